// String functions: contains / startsWith / endsWith and cel-go's ext.Strings (charAt, indexOf,
// lastIndexOf, lowerAscii, upperAscii, replace, split, substring, trim, reverse, format,
// strings.quote). Positions count code points. See builtins.h.
#include <algorithm>

#include "builtins.h"
#include "utf8.h"
#include "value_format.h"

namespace draguard::cel::internal {
namespace {

using Result = std::optional<Value>;
using CodePointString = std::vector<uint32_t>;

Value OutOfRange(int64_t i) { return Value::Error("index out of range: " + std::to_string(i)); }

bool IsSpaceCp(uint32_t c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0D) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Code-point index of `sub` in `s` at or after `start` (or last at or before start); -1 if none.
int64_t FindCp(const CodePointString& s, const CodePointString& sub, int64_t start, bool last) {
  int64_t n = static_cast<int64_t>(s.size()), m = static_cast<int64_t>(sub.size());
  if (last) {
    for (int64_t i = std::min(start, n - m); i >= 0; --i) {
      if (std::equal(sub.begin(), sub.end(), s.begin() + i)) return i;
    }
    return -1;
  }
  for (int64_t i = start; i + m <= n; ++i) {
    if (std::equal(sub.begin(), sub.end(), s.begin() + i)) return i;
  }
  return -1;
}

Result Contains(std::string_view fn, const CallArgs& a, CallContext&) {
  if (a.size() != 2 || !ArgIs(a, 1, ValueKind::kString)) return std::nullopt;
  const std::string& s = a[0].string_value();
  const std::string& t = a[1].string_value();
  if (fn == "contains") return Value::Bool(s.find(t) != std::string::npos);
  if (fn == "startsWith") return Value::Bool(s.compare(0, t.size(), t) == 0 && s.size() >= t.size());
  return Value::Bool(s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0);
}

Result Format(std::string_view, const CallArgs& a, CallContext& ctx) {
  if (a.size() != 2 || !ArgIs(a, 1, ValueKind::kList)) return std::nullopt;
  if (!ctx.Charge(static_cast<int64_t>(a[1].list_value().size()))) return CallContext::CostError();
  return FormatString(a[0].string_value(), a[1].list_value());
}

Result ChangeCase(std::string_view fn, const CallArgs& a, CallContext&) {
  if (a.size() != 1) return std::nullopt;
  bool lower = fn == "lowerAscii";
  char from = lower ? 'A' : 'a', to = lower ? 'a' : 'A';
  std::string r = a[0].string_value();
  for (char& c : r) {
    if (c >= from && c <= from + 25) c = static_cast<char>(c - from + to);
  }
  return Value::String(std::move(r));
}

Result Trim(std::string_view, const CallArgs& a, CallContext&) {
  if (a.size() != 1) return std::nullopt;
  auto cps = DecodeUtf8(a[0].string_value());
  size_t b = 0, e = cps.size();
  while (b < e && IsSpaceCp(cps[b])) ++b;
  while (e > b && IsSpaceCp(cps[e - 1])) --e;
  return Value::String(EncodeUtf8(cps, b, e));
}

Result Reverse(std::string_view, const CallArgs& a, CallContext&) {
  if (a.size() != 1) return std::nullopt;
  auto cps = DecodeUtf8(a[0].string_value());
  std::reverse(cps.begin(), cps.end());
  return Value::String(EncodeUtf8(cps, 0, cps.size()));
}

Result CharAt(std::string_view, const CallArgs& a, CallContext&) {
  if (a.size() != 2 || !ArgIs(a, 1, ValueKind::kInt)) return std::nullopt;
  auto cps = DecodeUtf8(a[0].string_value());
  int64_t i = a[1].int_value();
  if (i < 0 || i > static_cast<int64_t>(cps.size())) return OutOfRange(i);
  if (i == static_cast<int64_t>(cps.size())) return Value::String("");
  return Value::String(EncodeUtf8(cps, static_cast<size_t>(i), static_cast<size_t>(i) + 1));
}

Result IndexOf(std::string_view fn, const CallArgs& a, CallContext&) {
  size_t n = a.size();
  if ((n != 2 && n != 3) || !ArgIs(a, 1, ValueKind::kString) || (n == 3 && !ArgIs(a, 2, ValueKind::kInt))) return std::nullopt;
  bool last = fn == "lastIndexOf";
  auto cps = DecodeUtf8(a[0].string_value());
  auto sub = DecodeUtf8(a[1].string_value());
  int64_t len = static_cast<int64_t>(cps.size());
  int64_t start = n == 3 ? a[2].int_value() : (last ? len : 0);
  if (n == 3 && (start < 0 || start > len)) return OutOfRange(start);
  if (sub.empty()) return Value::Int(start);
  return Value::Int(FindCp(cps, sub, start, last));
}

Result Substring(std::string_view, const CallArgs& a, CallContext&) {
  size_t n = a.size();
  if ((n != 2 && n != 3) || !ArgIs(a, 1, ValueKind::kInt) || (n == 3 && !ArgIs(a, 2, ValueKind::kInt))) return std::nullopt;
  auto cps = DecodeUtf8(a[0].string_value());
  int64_t len = static_cast<int64_t>(cps.size());
  int64_t b = a[1].int_value(), e = n == 3 ? a[2].int_value() : len;
  if (b < 0 || b > len) return OutOfRange(b);
  if (e < 0 || e > len) return OutOfRange(e);
  if (b > e) return Value::Error("invalid substring range. start: " + std::to_string(b) + ", end: " + std::to_string(e));
  return Value::String(EncodeUtf8(cps, static_cast<size_t>(b), static_cast<size_t>(e)));
}

// Go strings.Replace with an empty `old`: inserts `to` at every code-point boundary.
std::string ReplaceEmpty(const std::string& s, const std::string& to, int64_t limit) {
  auto cps = DecodeUtf8(s);
  std::string out;
  int64_t done = 0;
  for (size_t i = 0; i <= cps.size(); ++i) {
    if (limit < 0 || done < limit) {
      out += to;
      ++done;
    }
    if (i < cps.size()) out += EncodeUtf8(cps, i, i + 1);
  }
  return out;
}

Result Replace(std::string_view, const CallArgs& a, CallContext& ctx) {
  size_t n = a.size();
  if ((n != 3 && n != 4) || !ArgIs(a, 1, ValueKind::kString) || !ArgIs(a, 2, ValueKind::kString) ||
      (n == 4 && !ArgIs(a, 3, ValueKind::kInt))) {
    return std::nullopt;
  }
  const std::string& s = a[0].string_value();
  const std::string& from = a[1].string_value();
  const std::string& to = a[2].string_value();
  int64_t limit = n == 4 ? a[3].int_value() : -1;
  if (from.empty()) return Value::String(ReplaceEmpty(s, to, limit));
  std::string out;
  size_t pos = 0;
  int64_t done = 0;
  while (limit < 0 || done < limit) {
    size_t f = s.find(from, pos);
    if (f == std::string::npos) break;
    out.append(s, pos, f - pos);
    out += to;
    pos = f + from.size();
    ++done;
  }
  out.append(s, pos, std::string::npos);
  if (!ctx.Charge(static_cast<int64_t>(out.size() / 16))) return CallContext::CostError();
  return Value::String(std::move(out));
}

// split with an empty separator: one element per code point (the rest in the last at the limit).
ListValue SplitCodePoints(const std::string& s, int64_t limit) {
  auto cps = DecodeUtf8(s);
  ListValue out;
  for (size_t i = 0; i < cps.size(); ++i) {
    if (limit > 0 && static_cast<int64_t>(out.size()) == limit - 1) {
      out.push_back(Value::String(EncodeUtf8(cps, i, cps.size())));
      break;
    }
    out.push_back(Value::String(EncodeUtf8(cps, i, i + 1)));
  }
  return out;
}

Result Split(std::string_view, const CallArgs& a, CallContext& ctx) {
  size_t n = a.size();
  if ((n != 2 && n != 3) || !ArgIs(a, 1, ValueKind::kString) || (n == 3 && !ArgIs(a, 2, ValueKind::kInt))) return std::nullopt;
  const std::string& s = a[0].string_value();
  const std::string& sep = a[1].string_value();
  int64_t limit = n == 3 ? a[2].int_value() : -1;
  if (limit == 0) return Value::List(ListValue{});
  if (sep.empty()) return Value::List(SplitCodePoints(s, limit));
  ListValue out;
  size_t pos = 0;
  while (true) {
    if (limit > 0 && static_cast<int64_t>(out.size()) == limit - 1) {
      out.push_back(Value::String(s.substr(pos)));
      break;
    }
    size_t f = s.find(sep, pos);
    if (f == std::string::npos) {
      out.push_back(Value::String(s.substr(pos)));
      break;
    }
    out.push_back(Value::String(s.substr(pos, f - pos)));
    pos = f + sep.size();
  }
  if (!ctx.Charge(static_cast<int64_t>(out.size()))) return CallContext::CostError();
  return Value::List(std::move(out));
}

Result Quote(std::string_view, const CallArgs& a, CallContext&) {
  if (a.size() != 1 || !ArgIs(a, 0, ValueKind::kString)) return std::nullopt;
  return Value::String(QuoteString(a[0].string_value()));
}

constexpr ValueKind kStr = ValueKind::kString;
const Overload kStrings[] = {
    Member("contains", kStr, &Contains),     Member("startsWith", kStr, &Contains),
    Member("endsWith", kStr, &Contains),     Member("format", kStr, &Format),
    Member("lowerAscii", kStr, &ChangeCase), Member("upperAscii", kStr, &ChangeCase),
    Member("trim", kStr, &Trim),             Member("reverse", kStr, &Reverse),
    Member("charAt", kStr, &CharAt),         Member("indexOf", kStr, &IndexOf),
    Member("lastIndexOf", kStr, &IndexOf),   Member("substring", kStr, &Substring),
    Member("replace", kStr, &Replace),       Member("split", kStr, &Split),
    Global("strings.quote", &Quote),
};

}  // namespace

std::span<const Overload> StringOverloads() { return kStrings; }

}  // namespace draguard::cel::internal
