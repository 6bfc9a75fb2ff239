// Printing of CEL values for the string functions. See value_format.h.
#include "value_format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "draguard/cel/debug_string.h"
#include "utf8.h"

namespace draguard::cel::internal {
namespace {

constexpr const char* kHex = "0123456789abcdef";

// The C escape of `cp` (a quote, a backslash or a control character with a letter escape), or null.
const char* CEscape(uint32_t cp) {
  switch (cp) {
    case '\a': return "\\a";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    case '\v': return "\\v";
    case '\\': return "\\\\";
    case '"': return "\\\"";
    default: return nullptr;
  }
}

bool IsPrintable(uint32_t cp) {
  // Approximation of Go's unicode.IsPrint: control characters, surrogates, private use and
  // noncharacters are not printable; other assigned code points are treated as printable.
  if (cp < 0x20 || (cp >= 0x7F && cp < 0xA0)) return false;
  if (cp == 0xAD) return false;
  if (cp >= 0xD800 && cp < 0xE000) return false;
  if (cp >= 0xE000 && cp < 0xF900) return false;
  if ((cp & 0xFFFE) == 0xFFFE) return false;
  if (cp >= 0x2028 && cp <= 0x2029) return false;
  if (cp >= 0x200B && cp <= 0x200F) return false;
  if (cp >= 0xFFF0 && cp <= 0xFFFB) return false;
  if (cp >= 0xE0000) return false;
  return cp <= 0x10FFFF;
}

void AppendHexByte(std::string& out, uint32_t b) {
  out += "\\x";
  out += kHex[b >> 4];
  out += kHex[b & 15];
}

// Go's escape of an unprintable code point.
void AppendUnprintable(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    AppendHexByte(out, cp);
    return;
  }
  char buf[16];
  if (cp < 0x10000) std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
  else std::snprintf(buf, sizeof(buf), "\\U%08x", cp);
  out += buf;
}

// Length of the (leniently decoded) UTF-8 sequence at s[i] with its code point in `cp`; 0 when invalid.
size_t DecodeAt(const std::string& s, size_t i, uint32_t& cp) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  cp = c;
  if (c < 0x80) return 1;
  size_t n = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  cp = n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (size_t k = 1; k < n; ++k) {
    unsigned char cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3F);
  }
  return n;
}

// Rendering of a non-finite double in format().
std::string NonFinite(double d) {
  if (std::isnan(d)) return "NaN";
  return d > 0 ? "Infinity" : "-Infinity";
}

// %s rendering (cel-go ext strings formatString).
std::optional<std::string> FormatAsString(const Value& v);

std::optional<std::string> FormatListAsString(const ListValue& l) {
  std::string out = "[";
  for (size_t i = 0; i < l.size(); ++i) {
    auto e = FormatAsString(l[i]);
    if (!e) return std::nullopt;
    out += (i ? ", " : "") + *e;
  }
  return out + "]";
}

std::optional<std::string> FormatMapAsString(const MapValue& m) {
  std::vector<std::pair<std::string, std::string>> kv;
  for (const auto& [key, val] : m.entries) {
    auto ks = FormatAsString(key);
    auto vs = FormatAsString(val);
    if (!ks || !vs) return std::nullopt;
    kv.emplace_back(*ks, *vs);
  }
  std::sort(kv.begin(), kv.end());
  std::string out = "{";
  for (size_t i = 0; i < kv.size(); ++i) out += (i ? ", " : "") + kv[i].first + ": " + kv[i].second;
  return out + "}";
}

std::optional<std::string> FormatAsString(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kString: return v.string_value();
    case ValueKind::kBytes: return v.bytes_value();
    case ValueKind::kInt: return std::to_string(v.int_value());
    case ValueKind::kUint: return std::to_string(v.uint_value());
    case ValueKind::kBool: return std::string(v.bool_value() ? "true" : "false");
    case ValueKind::kNull: return std::string("null");
    case ValueKind::kType: return v.type_name_value();
    case ValueKind::kDouble: {
      double d = v.double_value();
      if (!std::isfinite(d)) return NonFinite(d);
      return FormatDoubleG(d);
    }
    case ValueKind::kQuantity: return v.quantity_value().ToString();
    case ValueKind::kSemver: return v.semver_value().ToString();
    case ValueKind::kOptional: {
      if (v.optional_value() == nullptr) return std::string("optional.none()");
      auto inner = FormatAsString(*v.optional_value());
      if (!inner) return std::nullopt;
      return "optional.of(" + *inner + ")";
    }
    case ValueKind::kList: return FormatListAsString(v.list_value());
    case ValueKind::kMap: return FormatMapAsString(v.map_value());
    default: return std::nullopt;
  }
}

std::string ToBase(uint64_t v, int base, bool upper) {
  if (v == 0) return "0";
  const char* digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string s;
  while (v > 0) {
    s.push_back(digits[v % static_cast<uint64_t>(base)]);
    v /= static_cast<uint64_t>(base);
  }
  std::reverse(s.begin(), s.end());
  return s;
}

// One formatting clause of format(): appends `a` formatted by `verb` to `out`, or returns the error.
using ClauseError = std::optional<Value>;

ClauseError AppendString(const Value& a, std::string& out) {
  auto s = FormatAsString(a);
  if (!s) {
    return Value::Error("error during formatting: string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps, was given " + a.TypeName());
  }
  out += *s;
  return std::nullopt;
}

ClauseError AppendDecimal(const Value& a, std::string& out) {
  if (a.kind() == ValueKind::kInt) out += std::to_string(a.int_value());
  else if (a.kind() == ValueKind::kUint) out += std::to_string(a.uint_value());
  else if (a.kind() == ValueKind::kDouble && !std::isfinite(a.double_value())) out += NonFinite(a.double_value());
  else return Value::Error("error during formatting: decimal clause can only be used on integers, was given " + a.TypeName());
  return std::nullopt;
}

ClauseError AppendFloat(char verb, int precision, const Value& a, std::string& out) {
  double d;
  if (a.kind() == ValueKind::kDouble) d = a.double_value();
  else if (a.kind() == ValueKind::kInt) d = static_cast<double>(a.int_value());
  else if (a.kind() == ValueKind::kUint) d = static_cast<double>(a.uint_value());
  else {
    return Value::Error(std::string("error during formatting: ") + (verb == 'f' ? "fixed-point" : "scientific") +
                        " clause can only be used on doubles, was given " + a.TypeName());
  }
  if (!std::isfinite(d)) {
    out += NonFinite(d);
    return std::nullopt;
  }
  char buf[512];
  std::snprintf(buf, sizeof(buf), verb == 'f' ? "%.*f" : "%.*e", precision < 0 ? 6 : std::min(precision, 100), d);
  out += buf;
  return std::nullopt;
}

ClauseError AppendBase(char verb, const Value& a, std::string& out) {
  int base = verb == 'b' ? 2 : verb == 'o' ? 8 : 16;
  bool upper = verb == 'X';
  std::string given = a.TypeName();
  if (a.kind() == ValueKind::kInt) {
    int64_t v = a.int_value();
    uint64_t mag = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
    out += (v < 0 ? "-" : "") + ToBase(mag, base, upper);
  } else if (a.kind() == ValueKind::kUint) {
    out += ToBase(a.uint_value(), base, upper);
  } else if (verb == 'b' && a.kind() == ValueKind::kBool) {
    out += a.bool_value() ? "1" : "0";
  } else if (base == 16 && (a.kind() == ValueKind::kString || a.kind() == ValueKind::kBytes)) {
    const std::string& s = a.kind() == ValueKind::kString ? a.string_value() : a.bytes_value();
    for (unsigned char c : s) {
      std::string h = ToBase(c, 16, upper);
      if (h.size() < 2) h = "0" + h;
      out += h;
    }
  } else if (verb == 'b') {
    return Value::Error("error during formatting: only integers and bools can be formatted as binary, was given " + given);
  } else if (verb == 'o') {
    return Value::Error("error during formatting: octal clause can only be used on integers, was given " + given);
  } else {
    return Value::Error("error during formatting: only integers, byte buffers, and strings can be formatted as hex, was given " + given);
  }
  return std::nullopt;
}

ClauseError AppendClause(char verb, int precision, const Value& a, std::string& out) {
  switch (verb) {
    case 's': return AppendString(a, out);
    case 'd': return AppendDecimal(a, out);
    case 'f':
    case 'e': return AppendFloat(verb, precision, a, out);
    default: return AppendBase(verb, a, out);
  }
}

}  // namespace

std::string Quote(const std::string& s, QuoteStyle style) {
  bool go = style == QuoteStyle::kGo;
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    size_t n = DecodeAt(s, i, cp);
    if (n == 0) {
      if (go) AppendHexByte(out, static_cast<unsigned char>(s[i]));
      else out.push_back(s[i]);
      ++i;
      continue;
    }
    if (const char* esc = CEscape(cp)) out += esc;
    else if (!go || IsPrintable(cp)) out.append(s, i, n);
    else AppendUnprintable(out, cp);
    i += n;
  }
  out += "\"";
  return out;
}

std::string QuoteString(const std::string& s) {
  if (ValidUtf8(s)) return Quote(s, QuoteStyle::kRaw);
  std::string fixed;
  for (unsigned char c : s) {
    if (c < 0x80) fixed.push_back(static_cast<char>(c));
    else fixed += "\xEF\xBF\xBD";
  }
  return Quote(fixed, QuoteStyle::kRaw);
}

std::string FormatDoubleG(double d) {
  // Go strconv.FormatFloat(d, 'g', -1, 64): shortest, exponent when exp < -4 || exp >= 21.
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  size_t e = sci.find('e');
  int exp = std::stoi(sci.substr(e + 1));
  if (exp < -4 || exp >= 21) {
    std::string mant = sci.substr(0, e);
    std::string es = std::to_string(std::abs(exp));
    if (es.size() < 2) es = "0" + es;
    return mant + "e" + (exp < 0 ? "-" : "+") + es;
  }
  return FormatGoFloat(d);
}

Value FormatString(const std::string& f, const ListValue& args) {
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      out.push_back(f[i]);
      continue;
    }
    if (i + 1 < f.size() && f[i + 1] == '%') {
      out.push_back('%');
      ++i;
      continue;
    }
    size_t j = i + 1;
    int precision = -1;
    if (j < f.size() && f[j] == '.') {
      ++j;
      precision = 0;
      while (j < f.size() && f[j] >= '0' && f[j] <= '9') precision = precision * 10 + (f[j++] - '0');
    }
    if (j >= f.size()) return Value::Error("could not parse formatting clause: unexpected end of string");
    char verb = f[j];
    if (std::string_view("sdfexXob").find(verb) == std::string_view::npos) {
      return Value::Error(std::string("could not parse formatting clause: unrecognized formatting clause \"") + verb + "\"");
    }
    if (next >= args.size()) return Value::Error("index " + std::to_string(next) + " out of range");
    if (ClauseError err = AppendClause(verb, precision, args[next++], out)) return *err;
    i = j;
  }
  return Value::String(std::move(out));
}

}  // namespace draguard::cel::internal
