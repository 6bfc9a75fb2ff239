// Runtime values of the CEL evaluator.
//
// A Value is one of: null, bool, int (int64), uint (uint64), double, string, bytes, list, map,
// type, Quantity, Semver, or an error. Errors are values so that `&&`, `||` and `?:` can absorb
// them as CEL requires. Lists and maps are immutable and shared by pointer, so copying a Value is
// cheap. Thread-compatible; a Value shared between threads must not be mutated (none of the
// public operations mutate).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "draguard/k8s/quantity.h"
#include "draguard/cel/semver.h"

namespace draguard::cel {

/// CEL's quantity type is the Kubernetes quantity.
using Quantity = k8s::Quantity;

class Value;

/// The null value.
struct NullValue {
  bool operator==(const NullValue&) const = default;
};
/// A bytes value (raw octets).
struct BytesValue {
  std::string data;  ///< the bytes
};
/// A type value such as `int` or `kubernetes.Quantity`, as returned by type().
struct TypeValue {
  std::string name;  ///< CEL type name
};
/// A runtime error carried as a value.
struct ErrorValue {
  std::shared_ptr<const std::string> message;  ///< what went wrong
};
/// An optional value (cel-go OptionalTypes): empty, or holding one value.
struct OptionalValue {
  std::shared_ptr<const Value> value;  ///< null when empty (optional.none())
};
/// An immutable list.
using ListValue = std::vector<Value>;
/// An immutable map with insertion-ordered entries. Keys are bool, int, uint or string.
struct MapValue {
  std::vector<std::pair<Value, Value>> entries;  ///< key/value pairs, keys unique
  /// When true, looking up a missing key yields an empty map instead of an error; used for
  /// device.attributes and device.capacity, whose unknown domains read as empty (Kubernetes'
  /// newStringInterfaceMapWithDefault).
  bool missing_is_empty = false;
};

/// Kind of a Value, in variant order.
enum class ValueKind : uint8_t {
  kNull, kBool, kInt, kUint, kDouble, kString, kBytes, kList, kMap, kType, kQuantity, kSemver, kError, kOptional
};

/// A CEL runtime value.
class Value {
 public:
  /// null
  Value() = default;
  /// Factories for each kind.
  static Value Null() { return Value(); }
  static Value Bool(bool b) { return Value(Rep(b)); }
  static Value Int(int64_t i) { return Value(Rep(i)); }
  static Value Uint(uint64_t u) { return Value(Rep(u)); }
  static Value Double(double d) { return Value(Rep(d)); }
  static Value String(std::string s) { return Value(Rep(std::move(s))); }
  static Value Bytes(std::string b) { return Value(Rep(BytesValue{std::move(b)})); }
  static Value List(ListValue l) { return Value(Rep(std::make_shared<const ListValue>(std::move(l)))); }
  static Value List(std::shared_ptr<const ListValue> l) { return Value(Rep(std::move(l))); }
  static Value Map(MapValue m) { return Value(Rep(std::make_shared<const MapValue>(std::move(m)))); }
  static Value Map(std::shared_ptr<const MapValue> m) { return Value(Rep(std::move(m))); }
  static Value Type(std::string name) { return Value(Rep(TypeValue{std::move(name)})); }
  static Value Quant(Quantity q) { return Value(Rep(std::move(q))); }
  static Value Sem(Semver v) { return Value(Rep(std::make_shared<const Semver>(std::move(v)))); }
  static Value Error(std::string message) {
    return Value(Rep(ErrorValue{std::make_shared<const std::string>(std::move(message))}));
  }
  static Value OptionalOf(Value v) { return Value(Rep(OptionalValue{std::make_shared<const Value>(std::move(v))})); }
  static Value OptionalNone() { return Value(Rep(OptionalValue{})); }

  /// The kind of value held.
  ValueKind kind() const { return static_cast<ValueKind>(v_.index()); }
  /// True for errors.
  bool is_error() const { return kind() == ValueKind::kError; }

  /// Accessors; only valid for the matching kind.
  bool bool_value() const { return std::get<bool>(v_); }
  int64_t int_value() const { return std::get<int64_t>(v_); }
  uint64_t uint_value() const { return std::get<uint64_t>(v_); }
  double double_value() const { return std::get<double>(v_); }
  const std::string& string_value() const { return std::get<std::string>(v_); }
  const std::string& bytes_value() const { return std::get<BytesValue>(v_).data; }
  const ListValue& list_value() const { return *std::get<std::shared_ptr<const ListValue>>(v_); }
  const std::shared_ptr<const ListValue>& list_ptr() const { return std::get<std::shared_ptr<const ListValue>>(v_); }
  const MapValue& map_value() const { return *std::get<std::shared_ptr<const MapValue>>(v_); }
  const std::string& type_name_value() const { return std::get<TypeValue>(v_).name; }
  const Quantity& quantity_value() const { return std::get<Quantity>(v_); }
  const Semver& semver_value() const { return *std::get<std::shared_ptr<const Semver>>(v_); }
  const std::string& error_message() const { return *std::get<ErrorValue>(v_).message; }
  /// The value held by an optional, or null when it is empty.
  const Value* optional_value() const { return std::get<OptionalValue>(v_).value.get(); }

  /// CEL type name of this value ("int", "list", "kubernetes.Quantity", ...).
  std::string TypeName() const;
  /// Human-readable rendering ("true", "1u", "\"s\"", "[1, 2]", "quantity(\"1Gi\")").
  std::string DebugString() const;

 private:
  using Rep = std::variant<NullValue, bool, int64_t, uint64_t, double, std::string, BytesValue,
                           std::shared_ptr<const ListValue>, std::shared_ptr<const MapValue>, TypeValue,
                           Quantity, std::shared_ptr<const Semver>, ErrorValue, OptionalValue>;
  explicit Value(Rep r) : v_(std::move(r)) {}
  Rep v_;
};

/// CEL equality (heterogeneous: numbers compare by value across int/uint/double; values of
/// different kinds are unequal). Returns an error value if either side is an error.
Value Equals(const Value& a, const Value& b);

/// Looks up `key` in a map with CEL numeric key equivalence; null when absent.
const Value* MapFind(const MapValue& m, const Value& key);

}  // namespace draguard::cel
