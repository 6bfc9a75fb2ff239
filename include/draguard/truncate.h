// Capping strings that come from requests before they are logged, echoed or used as labels.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace draguard {

/// The default cap of a request-derived string in a log field or an error message, in bytes.
inline constexpr std::size_t kMaxEchoBytes = 256;

/// `text` when it has at most `max` bytes; else its first bytes (at most `max`, never cutting a
/// UTF-8 sequence) followed by "...[N more bytes]".
inline std::string Truncate(std::string_view text, std::size_t max = kMaxEchoBytes) {
  if (text.size() <= max) return std::string(text);
  std::size_t cut = max;
  // Back up over continuation bytes (10xxxxxx) so the kept prefix ends on a character boundary.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "...[" + std::to_string(text.size() - cut) + " more bytes]";
}

}  // namespace draguard
