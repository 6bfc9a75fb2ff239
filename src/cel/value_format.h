// Internal: printing of CEL values for the string functions (string(), strings.quote(),
// format()) and the quoting shared with the debug printers (debug_string.cc).
#pragma once

#include <cstdint>
#include <string>

#include "draguard/cel/value.h"

namespace draguard::cel::internal {

/// How Quote() writes what needs no C escape (\a \b \f \n \r \t \v \\ \").
enum class QuoteStyle : uint8_t {
  kGo,   ///< Go's strconv.Quote: invalid bytes as \x, unprintable code points as \x, \u or \U
  kRaw,  ///< verbatim
};

/// `s` in double quotes with backslash escapes.
std::string Quote(const std::string& s, QuoteStyle style);

/// strings.quote(): Quote(kRaw), each non-ASCII byte of invalid UTF-8 text replaced by U+FFFD.
std::string QuoteString(const std::string& s);

/// Go's strconv.FormatFloat(d, 'g', -1, 64), as string(double) prints a double.
std::string FormatDoubleG(double d);

/// `format.format(args)` of cel-go's strings extension: the formatted string or an error value.
Value FormatString(const std::string& format, const ListValue& args);

}  // namespace draguard::cel::internal
