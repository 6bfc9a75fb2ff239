// Optional values (cel-go OptionalTypes): optional.of / ofNonZeroValue / none, the optional
// selections `x.?f` / `x[?k]`, and the methods of an optional. See builtins.h.
#include "builtins.h"

namespace draguard::cel::internal {
namespace {

using Result = std::optional<Value>;

Result Select(std::string_view fn, const CallArgs& a, CallContext&) {
  if (a.size() != 2) return std::nullopt;
  return OptionalSelect(fn, a);
}

Result None(std::string_view, const CallArgs& a, CallContext&) {
  if (a.size() != 0) return std::nullopt;
  return Value::OptionalNone();
}

Result Of(std::string_view, const CallArgs& a, CallContext&) {
  if (a.size() != 1) return std::nullopt;
  return Value::OptionalOf(a[0]);
}

bool IsZero(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kNull: return true;
    case ValueKind::kBool: return !v.bool_value();
    case ValueKind::kInt: return v.int_value() == 0;
    case ValueKind::kUint: return v.uint_value() == 0;
    case ValueKind::kDouble: return v.double_value() == 0;
    case ValueKind::kString: return v.string_value().empty();
    case ValueKind::kBytes: return v.bytes_value().empty();
    case ValueKind::kList: return v.list_value().empty();
    case ValueKind::kMap: return v.map_value().entries.empty();
    default: return false;
  }
}

Result OfNonZeroValue(std::string_view, const CallArgs& a, CallContext&) {
  if (a.size() != 1) return std::nullopt;
  return IsZero(a[0]) ? Value::OptionalNone() : Value::OptionalOf(a[0]);
}

Result HasValue(std::string_view, const CallArgs& a, CallContext&) {
  if (a.size() != 1) return std::nullopt;
  return Value::Bool(a[0].optional_value() != nullptr);
}

Result GetValue(std::string_view, const CallArgs& a, CallContext&) {
  if (a.size() != 1) return std::nullopt;
  const Value* v = a[0].optional_value();
  return v ? *v : Value::Error("optional.none() dereference");
}

Result OrValue(std::string_view, const CallArgs& a, CallContext&) {
  if (a.size() != 2) return std::nullopt;
  const Value* v = a[0].optional_value();
  return v ? *v : a[1];
}

Result Or(std::string_view, const CallArgs& a, CallContext&) {
  if (a.size() != 2) return std::nullopt;
  if (a[0].optional_value() != nullptr) return a[0];
  if (a[1].kind() != ValueKind::kOptional) return std::nullopt;
  return a[1];
}

const Overload kOptional[] = {
    Global("_?._", &Select),
    Global("_[?_]", &Select),
    Global("optional.none", &None),
    Global("optional.of", &Of),
    Global("optional.ofNonZeroValue", &OfNonZeroValue),
    Member("hasValue", ValueKind::kOptional, &HasValue),
    Member("value", ValueKind::kOptional, &GetValue),
    Member("orValue", ValueKind::kOptional, &OrValue),
    Member("or", ValueKind::kOptional, &Or),
};

}  // namespace

Value OptionalSelect(std::string_view name, const CallArgs& args) {
  Value obj = args[0];
  if (obj.kind() == ValueKind::kOptional) {
    if (obj.optional_value() == nullptr) return obj;
    Value inner = *obj.optional_value();  // copy first: assigning from obj's own storage is unsafe
    obj = std::move(inner);
  }
  const Value& key = args[1];
  if (obj.kind() == ValueKind::kMap) {
    if (const Value* v = MapFind(obj.map_value(), key)) return Value::OptionalOf(*v);
    if (obj.map_value().missing_is_empty) return Value::OptionalOf(Value::Map(MapValue{}));
    return Value::OptionalNone();
  }
  if (name == "_[?_]" && obj.kind() == ValueKind::kList) {
    Value r = Index(obj, key);
    if (r.is_error()) {
      if (key.kind() != ValueKind::kInt && key.kind() != ValueKind::kUint && key.kind() != ValueKind::kDouble) return r;
      return Value::OptionalNone();
    }
    return Value::OptionalOf(std::move(r));
  }
  return NoOverload(name, args);
}

std::span<const Overload> OptionalOverloads() { return kOptional; }

}  // namespace draguard::cel::internal
