// Arithmetic, relational, index and membership operators of the CEL evaluator. See builtins.h.
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "builtins.h"

namespace draguard::cel::internal {
namespace {

Value IntOverflow() { return Value::Error("integer overflow"); }

// + - * / % of int64 or uint64 operands, with CEL's overflow and division errors.
template <typename T>
std::optional<Value> ArithInteger(OpCode op, T x, T y) {
  constexpr bool kSigned = std::is_signed_v<T>;
  auto make = [](T v) {
    if constexpr (kSigned) return Value::Int(v);
    else return Value::Uint(v);
  };
  T r = 0;
  switch (op) {
    case OpCode::kAdd: return __builtin_add_overflow(x, y, &r) ? IntOverflow() : make(r);
    case OpCode::kSub: return __builtin_sub_overflow(x, y, &r) ? IntOverflow() : make(r);
    case OpCode::kMul: return __builtin_mul_overflow(x, y, &r) ? IntOverflow() : make(r);
    case OpCode::kDiv:
      if (y == 0) return Value::Error("division by zero");
      if (kSigned && x == std::numeric_limits<T>::min() && y == static_cast<T>(-1)) return IntOverflow();
      return make(x / y);
    case OpCode::kMod:
      if (y == 0) return Value::Error("modulus by zero");
      if (kSigned && x == std::numeric_limits<T>::min() && y == static_cast<T>(-1)) return IntOverflow();
      return make(x % y);
    default: return std::nullopt;
  }
}

std::optional<Value> ArithDouble(OpCode op, double x, double y) {
  switch (op) {
    case OpCode::kAdd: return Value::Double(x + y);
    case OpCode::kSub: return Value::Double(x - y);
    case OpCode::kMul: return Value::Double(x * y);
    case OpCode::kDiv: return Value::Double(x / y);
    default: return std::nullopt;
  }
}

// `a + b` of strings, bytes or lists (same kind), charged by the size of the result.
std::optional<Value> Concat(const Value& a, const Value& b, CallContext& ctx) {
  switch (a.kind()) {
    case ValueKind::kString:
      if (!ctx.Charge(static_cast<int64_t>((a.string_value().size() + b.string_value().size()) / 16))) {
        return CallContext::CostError();
      }
      return Value::String(a.string_value() + b.string_value());
    case ValueKind::kBytes:
      if (!ctx.Charge(static_cast<int64_t>((a.bytes_value().size() + b.bytes_value().size()) / 16))) {
        return CallContext::CostError();
      }
      return Value::Bytes(a.bytes_value() + b.bytes_value());
    case ValueKind::kList: {
      const auto& x = a.list_value();
      const auto& y = b.list_value();
      if (!ctx.Charge(static_cast<int64_t>(x.size() + y.size()))) return CallContext::CostError();
      if (y.empty()) return a;
      if (x.empty()) return b;
      ListValue out;
      out.reserve(x.size() + y.size());
      out.insert(out.end(), x.begin(), x.end());
      out.insert(out.end(), y.begin(), y.end());
      return Value::List(std::move(out));
    }
    default: return std::nullopt;
  }
}

// List index from an int, uint or integral double key.
std::optional<Value> ListIndex(const Value& c, const Value& k) {
  const auto& l = c.list_value();
  int64_t i;
  if (k.kind() == ValueKind::kInt) {
    i = k.int_value();
  } else if (k.kind() == ValueKind::kUint) {
    if (k.uint_value() > static_cast<uint64_t>(INT64_MAX)) return Value::Error("index out of bounds");
    i = static_cast<int64_t>(k.uint_value());
  } else if (k.kind() == ValueKind::kDouble) {
    double d = k.double_value();
    if (d != std::trunc(d) || std::isnan(d) || std::abs(d) > 9e18) {
      return Value::Error("unsupported index value " + k.DebugString() + " in list");
    }
    i = static_cast<int64_t>(d);
  } else {
    return std::nullopt;
  }
  if (i < 0 || static_cast<uint64_t>(i) >= l.size()) return Value::Error("index out of bounds: " + std::to_string(i));
  return l[static_cast<size_t>(i)];
}

Value MapIndex(const Value& c, const Value& k) {
  ValueKind kk = k.kind();
  if (kk != ValueKind::kString && kk != ValueKind::kInt && kk != ValueKind::kUint && kk != ValueKind::kBool &&
      kk != ValueKind::kDouble) {
    return Value::Error("unsupported key type: " + k.TypeName());
  }
  if (const Value* v = MapFind(c.map_value(), k)) return *v;
  if (c.map_value().missing_is_empty) return Value::Map(MapValue{});
  return Value::Error("no such key: " + (kk == ValueKind::kString ? k.string_value() : k.DebugString()));
}

Value In(const Value& elem, const Value& c) {
  if (c.kind() == ValueKind::kList) {
    for (const auto& x : c.list_value()) {
      if (ValueEquals(elem, x)) return Value::Bool(true);
    }
    return Value::Bool(false);
  }
  if (c.kind() == ValueKind::kMap) return Value::Bool(MapFind(c.map_value(), elem) != nullptr);
  return NoOverload("@in", {elem, c});
}

bool IsNum(const Value& v) {
  auto k = v.kind();
  return k == ValueKind::kInt || k == ValueKind::kUint || k == ValueKind::kDouble;
}

Value Relation(OpCode op, std::string_view name, const Value& a, const Value& b) {
  bool unordered = false;
  auto c = Order(a, b, &unordered);
  if (!c) return NoOverload(name, {a, b});
  if (unordered) return Value::Bool(false);
  if (op == OpCode::kLt) return Value::Bool(*c < 0);
  if (op == OpCode::kLe) return Value::Bool(*c <= 0);
  if (op == OpCode::kGt) return Value::Bool(*c > 0);
  return Value::Bool(*c >= 0);
}

}  // namespace

Value Arith(OpCode op, std::string_view name, const Value& a, const Value& b, CallContext& ctx) {
  if (a.kind() != b.kind()) return NoOverload(name, {a, b});
  std::optional<Value> r;
  switch (a.kind()) {
    case ValueKind::kInt: r = ArithInteger(op, a.int_value(), b.int_value()); break;
    case ValueKind::kUint: r = ArithInteger(op, a.uint_value(), b.uint_value()); break;
    case ValueKind::kDouble: r = ArithDouble(op, a.double_value(), b.double_value()); break;
    default:
      if (op == OpCode::kAdd) r = Concat(a, b, ctx);
  }
  if (r) return std::move(*r);
  return NoOverload(name, {a, b});
}

std::optional<int> Order(const Value& a, const Value& b, bool* unordered) {
  *unordered = false;
  if (IsNum(a) && IsNum(b)) {
    int c = CompareNumbers(a, b);
    if (c == -2) {
      *unordered = true;
      return 0;
    }
    return c;
  }
  if (a.kind() != b.kind()) return std::nullopt;
  switch (a.kind()) {
    case ValueKind::kString: {
      int c = a.string_value().compare(b.string_value());
      return c < 0 ? -1 : c > 0 ? 1 : 0;
    }
    case ValueKind::kBytes: {
      int c = a.bytes_value().compare(b.bytes_value());
      return c < 0 ? -1 : c > 0 ? 1 : 0;
    }
    case ValueKind::kBool: return static_cast<int>(a.bool_value()) - static_cast<int>(b.bool_value());
    default: return std::nullopt;
  }
}

Value Index(const Value& c, const Value& k) {
  if (c.kind() == ValueKind::kList) {
    if (std::optional<Value> r = ListIndex(c, k)) return std::move(*r);
  } else if (c.kind() == ValueKind::kMap) {
    return MapIndex(c, k);
  }
  return NoOverload("_[_]", {c, k});
}

Value CallOperator(OpCode op, std::string_view name, const Value& a, const Value& b, CallContext& ctx) {
  switch (op) {
    case OpCode::kEq: return Equals(a, b);
    case OpCode::kNe: {
      Value e = Equals(a, b);
      return e.is_error() ? e : Value::Bool(!e.bool_value());
    }
    case OpCode::kAdd:
    case OpCode::kSub:
    case OpCode::kMul:
    case OpCode::kDiv:
    case OpCode::kMod: return Arith(op, name, a, b, ctx);
    case OpCode::kLt:
    case OpCode::kLe:
    case OpCode::kGt:
    case OpCode::kGe: return Relation(op, name, a, b);
    case OpCode::kIndex:
      if (a.kind() == ValueKind::kOptional) return OptionalSelect("_[?_]", {a, b});
      return Index(a, b);
    case OpCode::kIn: return In(a, b);
    default: return NoOverload(name, {a, b});
  }
}

}  // namespace draguard::cel::internal
