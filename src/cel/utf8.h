// UTF-8 helpers shared by the CEL parser, evaluator and printers (internal to the cel module).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace draguard::cel::internal {

/// Appends the UTF-8 encoding of code point `cp`.
inline void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

/// Number of code points of UTF-8 text (the bytes that are not continuation bytes).
size_t CodePoints(const std::string& s);

/// Whether `s` is well-formed UTF-8 (no truncated or overlong sequences, surrogates or code
/// points past U+10FFFF).
bool ValidUtf8(const std::string& s);

/// The code points of `s`, decoded leniently (callers decode only strings, which are valid).
std::vector<uint32_t> DecodeUtf8(const std::string& s);

/// The UTF-8 encoding of code points [from, to) of `cps`.
std::string EncodeUtf8(const std::vector<uint32_t>& cps, size_t from, size_t to);

}  // namespace draguard::cel::internal
