// CEL runtime values. See include/draguard/cel/value.h.
#include "draguard/cel/value.h"

#include <cmath>

#include "draguard/cel/debug_string.h"

namespace draguard::cel {

std::string Value::TypeName() const {
  switch (kind()) {
    case ValueKind::kNull: return "null_type";
    case ValueKind::kBool: return "bool";
    case ValueKind::kInt: return "int";
    case ValueKind::kUint: return "uint";
    case ValueKind::kDouble: return "double";
    case ValueKind::kString: return "string";
    case ValueKind::kBytes: return "bytes";
    case ValueKind::kList: return "list";
    case ValueKind::kMap: return "map";
    case ValueKind::kType: return "type";
    case ValueKind::kQuantity: return "kubernetes.Quantity";
    case ValueKind::kSemver: return "kubernetes.Semver";
    case ValueKind::kError: return "error";
    case ValueKind::kOptional: return "optional_type";
  }
  return "?";
}

std::string Value::DebugString() const {
  switch (kind()) {
    case ValueKind::kNull: return "null";
    case ValueKind::kBool: return bool_value() ? "true" : "false";
    case ValueKind::kInt: return std::to_string(int_value());
    case ValueKind::kUint: return std::to_string(uint_value()) + "u";
    case ValueKind::kDouble: {
      double d = double_value();
      if (std::isnan(d)) return "NaN";
      if (std::isinf(d)) return d > 0 ? "+Inf" : "-Inf";
      std::string s = FormatGoFloat(d);
      if (s.find('.') == std::string::npos) s += ".0";
      return s;
    }
    case ValueKind::kString: return GoQuote(string_value());
    case ValueKind::kBytes: return "b" + GoQuote(bytes_value());
    case ValueKind::kList: {
      std::string s = "[";
      const auto& l = list_value();
      for (size_t i = 0; i < l.size(); ++i) s += (i ? ", " : "") + l[i].DebugString();
      return s + "]";
    }
    case ValueKind::kMap: {
      std::string s = "{";
      const auto& m = map_value();
      for (size_t i = 0; i < m.entries.size(); ++i) {
        s += (i ? ", " : "") + m.entries[i].first.DebugString() + ": " + m.entries[i].second.DebugString();
      }
      return s + "}";
    }
    case ValueKind::kType: return type_name_value();
    case ValueKind::kQuantity: return "quantity(\"" + quantity_value().ToString() + "\")";
    case ValueKind::kSemver: return "semver(\"" + semver_value().ToString() + "\")";
    case ValueKind::kError: return "error: " + error_message();
    case ValueKind::kOptional:
      return optional_value() ? "optional.of(" + optional_value()->DebugString() + ")" : "optional.none()";
  }
  return "?";
}

namespace {

bool IsNumber(ValueKind k) { return k == ValueKind::kInt || k == ValueKind::kUint || k == ValueKind::kDouble; }

// Compares numbers of any numeric kinds exactly; returns -2 for unordered (NaN).
int NumCompare(const Value& a, const Value& b) {
  ValueKind ka = a.kind(), kb = b.kind();
  auto cmp = [](auto x, auto y) { return x < y ? -1 : x > y ? 1 : 0; };
  if (ka == kb) {
    if (ka == ValueKind::kInt) return cmp(a.int_value(), b.int_value());
    if (ka == ValueKind::kUint) return cmp(a.uint_value(), b.uint_value());
    double x = a.double_value(), y = b.double_value();
    if (std::isnan(x) || std::isnan(y)) return -2;
    return cmp(x, y);
  }
  if (ka == ValueKind::kInt && kb == ValueKind::kUint) {
    if (a.int_value() < 0) return -1;
    return cmp(static_cast<uint64_t>(a.int_value()), b.uint_value());
  }
  if (ka == ValueKind::kUint && kb == ValueKind::kInt) return -NumCompare(b, a);
  // One side is a double.
  if (ka == ValueKind::kDouble) {
    int r = NumCompare(b, a);
    return r == -2 ? -2 : -r;
  }
  // int/uint against double, as cel-go's compareIntDouble / compareUintDouble: out-of-range
  // doubles order first, otherwise the integer is converted to double.
  double y = b.double_value();
  if (std::isnan(y)) return -2;
  if (ka == ValueKind::kInt) {
    if (y < -9223372036854775808.0) return 1;
    if (y > 9223372036854775807.0) return -1;
    double x = static_cast<double>(a.int_value());
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (y < 0) return 1;
  if (y > 18446744073709551615.0) return -1;
  double x = static_cast<double>(a.uint_value());
  return x < y ? -1 : x > y ? 1 : 0;
}

}  // namespace

// Exported for the evaluator's relational operators.
int CompareNumbers(const Value& a, const Value& b) { return NumCompare(a, b); }

Value Equals(const Value& a, const Value& b) {
  if (a.is_error()) return a;
  if (b.is_error()) return b;
  ValueKind ka = a.kind(), kb = b.kind();
  if (IsNumber(ka) && IsNumber(kb)) return Value::Bool(NumCompare(a, b) == 0);
  if (ka != kb) return Value::Bool(false);
  switch (ka) {
    case ValueKind::kNull: return Value::Bool(true);
    case ValueKind::kBool: return Value::Bool(a.bool_value() == b.bool_value());
    case ValueKind::kString: return Value::Bool(a.string_value() == b.string_value());
    case ValueKind::kBytes: return Value::Bool(a.bytes_value() == b.bytes_value());
    case ValueKind::kType: return Value::Bool(a.type_name_value() == b.type_name_value());
    case ValueKind::kQuantity: return Value::Bool(a.quantity_value().Compare(b.quantity_value()) == 0);
    case ValueKind::kSemver: return Value::Bool(a.semver_value().Compare(b.semver_value()) == 0);
    case ValueKind::kOptional: {
      const Value* x = a.optional_value();
      const Value* y = b.optional_value();
      if (!x || !y) return Value::Bool(x == y);
      return Equals(*x, *y);
    }
    case ValueKind::kList: {
      const auto& x = a.list_value();
      const auto& y = b.list_value();
      if (x.size() != y.size()) return Value::Bool(false);
      Value err;
      bool has_err = false;
      for (size_t i = 0; i < x.size(); ++i) {
        Value e = Equals(x[i], y[i]);
        if (e.is_error()) {
          if (!has_err) err = e;
          has_err = true;
        } else if (!e.bool_value()) {
          return Value::Bool(false);
        }
      }
      return has_err ? err : Value::Bool(true);
    }
    case ValueKind::kMap: {
      const auto& x = a.map_value();
      const auto& y = b.map_value();
      if (x.entries.size() != y.entries.size()) return Value::Bool(false);
      for (const auto& [k, v] : x.entries) {
        const Value* other = MapFind(y, k);
        if (other == nullptr) return Value::Bool(false);
        Value e = Equals(v, *other);
        if (e.is_error() || !e.bool_value()) return e;
      }
      return Value::Bool(true);
    }
    default: return Value::Bool(false);
  }
}

const Value* MapFind(const MapValue& m, const Value& key) {
  ValueKind kk = key.kind();
  for (const auto& [k, v] : m.entries) {
    ValueKind ek = k.kind();
    if (ek == kk) {
      switch (kk) {
        case ValueKind::kString:
          if (k.string_value() == key.string_value()) return &v;
          continue;
        case ValueKind::kInt:
          if (k.int_value() == key.int_value()) return &v;
          continue;
        case ValueKind::kUint:
          if (k.uint_value() == key.uint_value()) return &v;
          continue;
        case ValueKind::kBool:
          if (k.bool_value() == key.bool_value()) return &v;
          continue;
        default: break;
      }
    }
    if (IsNumber(ek) && IsNumber(kk) && NumCompare(k, key) == 0) return &v;
  }
  return nullptr;
}

}  // namespace draguard::cel
