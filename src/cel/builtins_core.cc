// Core builtins: type conversions, size, dyn, type, the unary operators and the map insertion of
// the comprehension macros. See builtins.h.
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "builtins.h"
#include "utf8.h"
#include "value_format.h"

namespace draguard::cel::internal {
namespace {

using Result = std::optional<Value>;

std::optional<int64_t> ParseInt64(const std::string& s) {
  if (s.empty()) return std::nullopt;
  size_t i = 0;
  bool neg = false;
  if (s[0] == '+' || s[0] == '-') {
    neg = s[0] == '-';
    i = 1;
  }
  if (i >= s.size()) return std::nullopt;
  unsigned __int128 v = 0;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return std::nullopt;
    v = v * 10 + static_cast<unsigned>(s[i] - '0');
    if (v > static_cast<unsigned __int128>(INT64_MAX) + 1) return std::nullopt;
  }
  if (!neg && v > static_cast<unsigned __int128>(INT64_MAX)) return std::nullopt;
  return neg ? static_cast<int64_t>(-static_cast<__int128>(v)) : static_cast<int64_t>(v);
}

std::optional<uint64_t> ParseUint64(const std::string& s) {
  if (s.empty()) return std::nullopt;
  size_t i = s[0] == '+' ? 1 : 0;
  if (i >= s.size()) return std::nullopt;
  unsigned __int128 v = 0;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return std::nullopt;
    v = v * 10 + static_cast<unsigned>(s[i] - '0');
    if (v > UINT64_MAX) return std::nullopt;
  }
  return static_cast<uint64_t>(v);
}

std::optional<double> ParseDouble(const std::string& s) {
  if (s.empty()) return std::nullopt;
  std::string l;
  for (char c : s) l.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (l == "inf" || l == "+inf" || l == "infinity" || l == "+infinity") return HUGE_VAL;
  if (l == "-inf" || l == "-infinity") return -HUGE_VAL;
  if (l == "nan") return std::nan("");
  for (char c : l) {
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == '+' || c == '-' || c == '_')) {
      return std::nullopt;
    }
  }
  char* end = nullptr;
  errno = 0;
  double d = std::strtod(s.c_str(), &end);
  if (end == nullptr || *end != '\0') return std::nullopt;
  if (errno == ERANGE && std::isinf(d)) return std::nullopt;
  return d;
}

Result ToInt(std::string_view fn, const CallArgs& a, CallContext&) {
  if (a.size() != 1) return std::nullopt;
  const Value& v = a[0];
  switch (v.kind()) {
    case ValueKind::kInt: return v;
    case ValueKind::kUint:
      if (v.uint_value() > static_cast<uint64_t>(INT64_MAX)) return Value::Error("range error converting uint to int");
      return Value::Int(static_cast<int64_t>(v.uint_value()));
    case ValueKind::kDouble: {
      double d = v.double_value();
      if (std::isnan(d) || d >= 9223372036854775808.0 || d <= -9223372036854775808.0) {
        return Value::Error("range error converting double to int");
      }
      return Value::Int(static_cast<int64_t>(d));
    }
    case ValueKind::kString: {
      auto r = ParseInt64(v.string_value());
      if (!r) return Value::Error("cannot convert string '" + v.string_value() + "' to int");
      return Value::Int(*r);
    }
    default: return NoOverload(fn, a);
  }
}

Result ToUint(std::string_view fn, const CallArgs& a, CallContext&) {
  if (a.size() != 1) return std::nullopt;
  const Value& v = a[0];
  switch (v.kind()) {
    case ValueKind::kUint: return v;
    case ValueKind::kInt:
      if (v.int_value() < 0) return Value::Error("range error converting int to uint");
      return Value::Uint(static_cast<uint64_t>(v.int_value()));
    case ValueKind::kDouble: {
      double d = v.double_value();
      if (std::isnan(d) || d < 0 || d >= 18446744073709551616.0) return Value::Error("range error converting double to uint");
      return Value::Uint(static_cast<uint64_t>(d));
    }
    case ValueKind::kString: {
      auto r = ParseUint64(v.string_value());
      if (!r) return Value::Error("cannot convert string '" + v.string_value() + "' to uint");
      return Value::Uint(*r);
    }
    default: return NoOverload(fn, a);
  }
}

Result ToDouble(std::string_view fn, const CallArgs& a, CallContext&) {
  if (a.size() != 1) return std::nullopt;
  const Value& v = a[0];
  switch (v.kind()) {
    case ValueKind::kDouble: return v;
    case ValueKind::kInt: return Value::Double(static_cast<double>(v.int_value()));
    case ValueKind::kUint: return Value::Double(static_cast<double>(v.uint_value()));
    case ValueKind::kString: {
      auto r = ParseDouble(v.string_value());
      if (!r) return Value::Error("cannot convert string '" + v.string_value() + "' to double");
      return Value::Double(*r);
    }
    default: return NoOverload(fn, a);
  }
}

Result ToString(std::string_view fn, const CallArgs& a, CallContext&) {
  if (a.size() != 1) return std::nullopt;
  const Value& v = a[0];
  switch (v.kind()) {
    case ValueKind::kString: return v;
    case ValueKind::kInt: return Value::String(std::to_string(v.int_value()));
    case ValueKind::kUint: return Value::String(std::to_string(v.uint_value()));
    case ValueKind::kDouble: return Value::String(FormatDoubleG(v.double_value()));
    case ValueKind::kBool: return Value::String(v.bool_value() ? "true" : "false");
    case ValueKind::kBytes:
      if (!ValidUtf8(v.bytes_value())) return Value::Error("invalid UTF-8 in bytes, cannot convert to string");
      return Value::String(v.bytes_value());
    case ValueKind::kQuantity: return Value::String(v.quantity_value().ToString());
    case ValueKind::kSemver: return Value::String(v.semver_value().ToString());
    default: return NoOverload(fn, a);
  }
}

Result ToBytes(std::string_view fn, const CallArgs& a, CallContext&) {
  if (a.size() != 1) return std::nullopt;
  if (a[0].kind() == ValueKind::kBytes) return a[0];
  if (a[0].kind() == ValueKind::kString) return Value::Bytes(a[0].string_value());
  return NoOverload(fn, a);
}

Result ToBool(std::string_view fn, const CallArgs& a, CallContext&) {
  if (a.size() != 1) return std::nullopt;
  const Value& v = a[0];
  if (v.kind() == ValueKind::kBool) return v;
  if (v.kind() != ValueKind::kString) return NoOverload(fn, a);
  const std::string& s = v.string_value();
  if (s == "1" || s == "t" || s == "T" || s == "TRUE" || s == "true" || s == "True") return Value::Bool(true);
  if (s == "0" || s == "f" || s == "F" || s == "FALSE" || s == "false" || s == "False") return Value::Bool(false);
  return Value::Error("cannot convert string '" + s + "' to bool");
}

Result Dyn(std::string_view, const CallArgs& a, CallContext&) {
  if (a.size() != 1) return std::nullopt;
  return a[0];
}

Result TypeOf(std::string_view, const CallArgs& a, CallContext&) {
  if (a.size() != 1) return std::nullopt;
  return Value::Type(a[0].TypeName());
}

Result Size(std::string_view fn, const CallArgs& a, CallContext&) {
  if (a.size() != 1) return std::nullopt;
  switch (a[0].kind()) {
    case ValueKind::kString: return Value::Int(static_cast<int64_t>(CodePoints(a[0].string_value())));
    case ValueKind::kBytes: return Value::Int(static_cast<int64_t>(a[0].bytes_value().size()));
    case ValueKind::kList: return Value::Int(static_cast<int64_t>(a[0].list_value().size()));
    case ValueKind::kMap: return Value::Int(static_cast<int64_t>(a[0].map_value().entries.size()));
    default: return NoOverload(fn, a);
  }
}

Result Not(std::string_view fn, const CallArgs& a, CallContext&) {
  if (a.size() != 1) return std::nullopt;
  if (a[0].kind() == ValueKind::kBool) return Value::Bool(!a[0].bool_value());
  return NoOverload(fn, a);
}

Result Negate(std::string_view fn, const CallArgs& a, CallContext&) {
  if (a.size() != 1) return std::nullopt;
  if (a[0].kind() == ValueKind::kInt) {
    if (a[0].int_value() == INT64_MIN) return Value::Error("integer overflow");
    return Value::Int(-a[0].int_value());
  }
  if (a[0].kind() == ValueKind::kDouble) return Value::Double(-a[0].double_value());
  return NoOverload(fn, a);
}

// cel.@mapInsert(map, key, value) and cel.@mapInsert(map, map), built by the comprehension macros.
Result MapInsert(std::string_view fn, const CallArgs& a, CallContext& ctx) {
  if (a.size() == 3 && a[0].kind() == ValueKind::kMap) {
    MapValue m = a[0].map_value();
    if (MapFind(m, a[1]) != nullptr) return Value::Error("insert failed: key " + a[1].DebugString() + " already exists");
    if (!ctx.Charge(static_cast<int64_t>(m.entries.size()))) return CallContext::CostError();
    m.entries.emplace_back(a[1], a[2]);
    return Value::Map(std::move(m));
  }
  if (a.size() == 2 && a[0].kind() == ValueKind::kMap && a[1].kind() == ValueKind::kMap) {
    MapValue m = a[0].map_value();
    for (const auto& [key, v] : a[1].map_value().entries) {
      if (MapFind(m, key) != nullptr) return Value::Error("insert failed: key " + key.DebugString() + " already exists");
      m.entries.emplace_back(key, v);
    }
    if (!ctx.Charge(static_cast<int64_t>(m.entries.size()))) return CallContext::CostError();
    return Value::Map(std::move(m));
  }
  return NoOverload(fn, a);
}

const Overload kCore[] = {
    Global("int", &ToInt),       Global("uint", &ToUint), Global("double", &ToDouble), Global("string", &ToString),
    Global("bytes", &ToBytes),   Global("bool", &ToBool), Global("dyn", &Dyn),         Global("type", &TypeOf),
    Global("size", &Size),       AnyMember("size", &Size), Global("!_", &Not),         Global("-_", &Negate),
    Global("cel.@mapInsert", &MapInsert),
};

}  // namespace

std::span<const Overload> CoreOverloads() { return kCore; }

}  // namespace draguard::cel::internal
