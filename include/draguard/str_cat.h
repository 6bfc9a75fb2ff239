// Joining string pieces into one string sized once (messages and JSON pointers built per review).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>

namespace draguard {

/// The pieces of `parts` in order, in one string allocated once at its final size: where
/// `a + b + c` makes a temporary and may grow it at every `+`.
inline std::string StrCat(std::initializer_list<std::string_view> parts) {
  std::size_t size = 0;
  for (std::string_view p : parts) size += p.size();
  std::string out;
  out.reserve(size);
  for (std::string_view p : parts) out += p;
  return out;
}

}  // namespace draguard
