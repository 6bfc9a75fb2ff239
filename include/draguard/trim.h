// Trimming ASCII white space (annotation values, files read from mounted Secrets).
#pragma once

#include <string>
#include <string_view>

namespace draguard {

/// `text` without leading and trailing ASCII white space (space, \t, \n, \v, \f, \r).
inline std::string Trim(std::string_view text) {
  constexpr std::string_view kSpace = " \t\n\v\f\r";
  const auto first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return "";
  return std::string(text.substr(first, text.find_last_not_of(kSpace) - first + 1));
}

}  // namespace draguard
