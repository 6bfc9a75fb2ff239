#include "draguard/json_string.h"

#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <nlohmann/json.hpp>

namespace draguard {
namespace {

constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
constexpr std::uint64_t kHighs = 0x8080808080808080ULL;

std::uint64_t Word(const char* p) {
  std::uint64_t w;
  std::memcpy(&w, p, sizeof w);
  return w;
}

// True when one of the 8 bytes of `w` is zero (exact for the word as a whole).
constexpr bool HasZeroByte(std::uint64_t w) { return ((w - kOnes) & ~w & kHighs) != 0; }

// True when one of the 8 bytes of `w` needs an escape: a control byte, '"' or '\\'.
constexpr bool NeedsEscape(std::uint64_t w) {
  return ((w - kOnes * 0x20) & ~w & kHighs) != 0 || HasZeroByte(w ^ (kOnes * '"')) ||
         HasZeroByte(w ^ (kOnes * '\\'));
}

// The offset of the first byte at or after `i` that is not ASCII (s.size() when none), sixteen
// or eight bytes at a time.
std::size_t SkipAscii(std::string_view s, std::size_t i) {
#if defined(__SSE2__)
  for (; i + 16 <= s.size(); i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.data() + i));
    if (const int m = _mm_movemask_epi8(v); m != 0) return i + static_cast<std::size_t>(__builtin_ctz(m));
  }
#endif
  while (i + 8 <= s.size() && (Word(s.data() + i) & kHighs) == 0) i += 8;
  while (i < s.size() && static_cast<unsigned char>(s[i]) < 0x80) ++i;
  return i;
}

// The offset of the first byte at or after `k` that needs an escape (s.size() when none).
std::size_t SkipPlain(std::string_view s, std::size_t k) {
#if defined(__SSE2__)
  const __m128i ctl = _mm_set1_epi8(0x1F);
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  for (; k + 16 <= s.size(); k += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.data() + k));
    // Unsigned v <= 0x1F: max(v, 0x1F) == 0x1F.
    const __m128i hit = _mm_or_si128(_mm_cmpeq_epi8(_mm_max_epu8(v, ctl), ctl),
                                     _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)));
    if (const int m = _mm_movemask_epi8(hit); m != 0) return k + static_cast<std::size_t>(__builtin_ctz(m));
  }
#endif
  while (k + 8 <= s.size() && !NeedsEscape(Word(s.data() + k))) k += 8;
  for (; k < s.size(); ++k) {
    const auto c = static_cast<unsigned char>(s[k]);
    if (c < 0x20 || c == '"' || c == '\\') return k;
  }
  return k;
}

}  // namespace

void AppendJsonString(std::string& out, std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    // ASCII runs many bytes at a time; each other sequence checked as UTF-8.
    i = SkipAscii(s, i);
    if (i >= s.size()) break;
    const auto c = static_cast<unsigned char>(s[i]);  // not ASCII
    std::size_t n = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) break;
    bool ok = true;
    for (std::size_t k = 1; k < n; ++k) ok = ok && (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    if (ok && n == 2) ok = c >= 0xC2;
    if (ok && n == 3) {
      const auto c1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0);
    }
    if (ok && n == 4) {
      const auto c1 = static_cast<unsigned char>(s[i + 1]);
      ok = c <= 0xF4 && !(c == 0xF0 && c1 < 0x90) && !(c == 0xF4 && c1 >= 0x90);
    }
    if (!ok) break;
    i += n;
  }
  if (i < s.size()) {
    out += nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  out.reserve(out.size() + s.size() + 2);
  out.push_back('"');
  std::size_t run = 0;  // start of the bytes not yet written, which need no escape
  for (std::size_t k = 0; k < s.size(); ++k) {
    k = SkipPlain(s, k);
    if (k >= s.size()) break;
    const auto c = static_cast<unsigned char>(s[k]);
    out.append(s.data() + run, k - run);
    run = k + 1;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        out += "\\u00";
        out.push_back(kHex[c >> 4]);
        out.push_back(kHex[c & 0xF]);
    }
  }
  out.append(s.data() + run, s.size() - run);
  out.push_back('"');
}

}  // namespace draguard
