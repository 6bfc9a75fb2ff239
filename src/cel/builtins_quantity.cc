// Kubernetes Quantity library: quantity(), isQuantity() and the methods of a Quantity. See builtins.h.
#include "builtins.h"

namespace draguard::cel::internal {
namespace {

using Result = std::optional<Value>;

Result Parse(std::string_view fn, const CallArgs& a, CallContext&) {
  if (a.size() != 1) return std::nullopt;
  if (a[0].kind() != ValueKind::kString) return NoOverload(fn, a);
  auto q = Quantity::Parse(a[0].string_value());
  if (fn == "isQuantity") return Value::Bool(q.ok());
  if (!q.ok()) return Value::Error(q.status().message());
  return Value::Quant(*q);
}

Result Compare(std::string_view fn, const CallArgs& a, CallContext&) {
  if (a.size() != 2 || a[1].kind() != ValueKind::kQuantity) return std::nullopt;
  return ComparisonResult(fn, a[0].quantity_value().Compare(a[1].quantity_value()));
}

Result AsInteger(std::string_view, const CallArgs& a, CallContext&) {
  if (a.size() != 1) return std::nullopt;
  auto i = a[0].quantity_value().AsInt64();
  if (!i) return Value::Error("cannot convert value to integer");
  return Value::Int(*i);
}

Result IsInteger(std::string_view, const CallArgs& a, CallContext&) {
  if (a.size() != 1) return std::nullopt;
  return Value::Bool(a[0].quantity_value().AsInt64().has_value());
}

Result AsApproximateFloat(std::string_view, const CallArgs& a, CallContext&) {
  if (a.size() != 1) return std::nullopt;
  return Value::Double(a[0].quantity_value().AsApproximateFloat());
}

Result Sign(std::string_view, const CallArgs& a, CallContext&) {
  if (a.size() != 1 || a[0].kind() != ValueKind::kQuantity) return std::nullopt;
  return Value::Int(a[0].quantity_value().Sign());
}

// q.add(x) / q.sub(x) with x a Quantity or an int.
Result AddSub(std::string_view fn, const CallArgs& a, CallContext&) {
  if (a.size() != 2) return std::nullopt;
  Quantity y;
  if (a[1].kind() == ValueKind::kQuantity) y = a[1].quantity_value();
  else if (a[1].kind() == ValueKind::kInt) y = Quantity::FromInt64(a[1].int_value());
  else return std::nullopt;
  auto r = fn == "add" ? a[0].quantity_value().Add(y) : a[0].quantity_value().Sub(y);
  if (!r.ok()) return Value::Error(r.status().message());
  return Value::Quant(*r);
}

constexpr ValueKind kQuantity = ValueKind::kQuantity;
const Overload kQuantityLibrary[] = {
    Global("quantity", &Parse),
    Global("isQuantity", &Parse),
    Member("compareTo", kQuantity, &Compare),
    Member("isGreaterThan", kQuantity, &Compare),
    Member("isLessThan", kQuantity, &Compare),
    Member("asInteger", kQuantity, &AsInteger),
    Member("isInteger", kQuantity, &IsInteger),
    Member("asApproximateFloat", kQuantity, &AsApproximateFloat),
    Global("sign", &Sign),  // sign(q): a function, not a method, in the Kubernetes library
    Member("add", kQuantity, &AddSub),
    Member("sub", kQuantity, &AddSub),
};

}  // namespace

std::span<const Overload> QuantityOverloads() { return kQuantityLibrary; }

}  // namespace draguard::cel::internal
