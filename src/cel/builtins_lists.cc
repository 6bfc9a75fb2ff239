// List functions: join, indexOf / lastIndexOf, cel-go's ext.Lists (version 3: slice, flatten,
// distinct, reverse, sort, lists.range) and Kubernetes' list library (isSorted, sum, min, max),
// and cel-go's ext.Sets. See builtins.h.
#include <algorithm>

#include "builtins.h"

namespace draguard::cel::internal {
namespace {

using Result = std::optional<Value>;

Result Join(std::string_view fn, const CallArgs& a, CallContext&) {
  size_t n = a.size();
  if (n != 1 && !(n == 2 && ArgIs(a, 1, ValueKind::kString))) return std::nullopt;
  const ListValue& l = a[0].list_value();
  std::string sep = n == 2 ? a[1].string_value() : "";
  std::string out;
  for (size_t i = 0; i < l.size(); ++i) {
    if (l[i].kind() != ValueKind::kString) return NoOverload(fn, a);
    if (i) out += sep;
    out += l[i].string_value();
  }
  return Value::String(std::move(out));
}

Result IndexOf(std::string_view fn, const CallArgs& a, CallContext&) {
  if (a.size() != 2) return std::nullopt;
  const ListValue& l = a[0].list_value();
  for (size_t j = 0; j < l.size(); ++j) {
    size_t i = fn == "indexOf" ? j : l.size() - 1 - j;
    if (ValueEquals(l[i], a[1])) return Value::Int(static_cast<int64_t>(i));
  }
  return Value::Int(-1);
}

Result Slice(std::string_view, const CallArgs& a, CallContext&) {
  if (a.size() != 3 || !ArgIs(a, 1, ValueKind::kInt) || !ArgIs(a, 2, ValueKind::kInt)) return std::nullopt;
  const ListValue& l = a[0].list_value();
  int64_t b = a[1].int_value(), e = a[2].int_value(), len = static_cast<int64_t>(l.size());
  std::string call = "cannot slice(" + std::to_string(b) + ", " + std::to_string(e) + "), ";
  if (b < 0 || e < 0) return Value::Error(call + "negative indexes not supported");
  if (b > e) return Value::Error(call + "start index must be less than or equal to end index");
  if (e > len) return Value::Error(call + "list is length " + std::to_string(len));
  return Value::List(ListValue(l.begin() + b, l.begin() + e));
}

// Recursion is bounded: list values cannot nest deeper than the expression that built them.
void FlattenInto(const ListValue& src, int64_t depth, ListValue& out) {
  for (const auto& x : src) {
    if (x.kind() == ValueKind::kList && depth > 0) FlattenInto(x.list_value(), depth - 1, out);
    else out.push_back(x);
  }
}

Result Flatten(std::string_view, const CallArgs& a, CallContext& ctx) {
  size_t n = a.size();
  if (n != 1 && !(n == 2 && ArgIs(a, 1, ValueKind::kInt))) return std::nullopt;
  int64_t depth = n == 2 ? a[1].int_value() : 1;
  if (depth < 0) return Value::Error("level must be non-negative");
  ListValue out;
  FlattenInto(a[0].list_value(), depth, out);
  if (!ctx.Charge(static_cast<int64_t>(out.size()))) return CallContext::CostError();
  return Value::List(std::move(out));
}

Result Distinct(std::string_view, const CallArgs& a, CallContext& ctx) {
  if (a.size() != 1) return std::nullopt;
  const ListValue& l = a[0].list_value();
  ListValue out;
  for (const auto& x : l) {
    bool seen = std::any_of(out.begin(), out.end(), [&](const Value& y) { return ValueEquals(x, y); });
    if (!seen) out.push_back(x);
  }
  if (!ctx.Charge(static_cast<int64_t>(l.size() * out.size()))) return CallContext::CostError();
  return Value::List(std::move(out));
}

Result Reverse(std::string_view, const CallArgs& a, CallContext&) {
  if (a.size() != 1) return std::nullopt;
  const ListValue& l = a[0].list_value();
  return Value::List(ListValue(l.rbegin(), l.rend()));
}

Result Sort(std::string_view, const CallArgs& a, CallContext& ctx) {
  if (a.size() != 1) return std::nullopt;
  ListValue out = a[0].list_value();
  bool bad = false;
  for (size_t i = 1; i < out.size() && !bad; ++i) {
    bool unordered = false;
    bad = !Order(out[0], out[i], &unordered).has_value() || out[0].kind() != out[i].kind();
  }
  if (bad) return Value::Error("list elements must have the same type");
  bool unordered_first = false;
  if (!out.empty() && !Order(out[0], out[0], &unordered_first).has_value()) {
    return Value::Error("list elements must be comparable");
  }
  std::stable_sort(out.begin(), out.end(), [](const Value& x, const Value& y) {
    bool unordered = false;
    return Order(x, y, &unordered).value_or(0) < 0;
  });
  if (!ctx.Charge(static_cast<int64_t>(out.size()))) return CallContext::CostError();
  return Value::List(std::move(out));
}

Result Sum(std::string_view, const CallArgs& a, CallContext& ctx) {
  if (a.size() != 1) return std::nullopt;
  const ListValue& l = a[0].list_value();
  if (l.empty()) return Value::Int(0);
  Value acc = l[0];
  for (size_t i = 1; i < l.size(); ++i) {
    acc = Arith(OpCode::kAdd, "_+_", acc, l[i], ctx);
    if (acc.is_error()) return acc;
  }
  return acc;
}

Result IsSorted(std::string_view fn, const CallArgs& a, CallContext&) {
  if (a.size() != 1) return std::nullopt;
  const ListValue& l = a[0].list_value();
  for (size_t i = 1; i < l.size(); ++i) {
    bool unordered = false;
    auto c = Order(l[i - 1], l[i], &unordered);
    if (!c) return NoOverload(fn, a);
    if (*c > 0) return Value::Bool(false);
  }
  return Value::Bool(true);
}

Result MinMax(std::string_view fn, const CallArgs& a, CallContext&) {
  if (a.size() != 1) return std::nullopt;
  const ListValue& l = a[0].list_value();
  if (l.empty()) return Value::Error(std::string(fn) + " called on an empty list");
  bool min = fn == "min";
  size_t best = 0;
  for (size_t i = 1; i < l.size(); ++i) {
    bool unordered = false;
    auto c = Order(l[i], l[best], &unordered);
    if (!c) return NoOverload(fn, a);
    if ((min && *c < 0) || (!min && *c > 0)) best = i;
  }
  return l[best];
}

Result Range(std::string_view, const CallArgs& a, CallContext& ctx) {
  if (a.size() != 1 || !ArgIs(a, 0, ValueKind::kInt)) return std::nullopt;
  int64_t count = a[0].int_value();
  if (count < 0) return Value::Error("lists.range() requires a non-negative count");
  if (!ctx.Charge(count)) return CallContext::CostError();
  ListValue out;
  out.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) out.push_back(Value::Int(i));
  return Value::List(std::move(out));
}

bool ContainsAll(const ListValue& p, const ListValue& q) {
  return std::all_of(q.begin(), q.end(), [&](const Value& e) {
    return std::any_of(p.begin(), p.end(), [&](const Value& f) { return ValueEquals(e, f); });
  });
}

// sets.contains / sets.equivalent / sets.intersects, charged by the product of the sizes.
Result Sets(std::string_view fn, const CallArgs& a, CallContext& ctx) {
  if (a.size() != 2 || !ArgIs(a, 0, ValueKind::kList) || !ArgIs(a, 1, ValueKind::kList)) return std::nullopt;
  const auto& x = a[0].list_value();
  const auto& y = a[1].list_value();
  if (!ctx.Charge(static_cast<int64_t>(x.size() * y.size()))) return CallContext::CostError();
  if (fn == "sets.contains") return Value::Bool(ContainsAll(x, y));
  if (fn == "sets.equivalent") return Value::Bool(ContainsAll(x, y) && ContainsAll(y, x));
  for (const auto& e : x) {
    for (const auto& f : y) {
      if (ValueEquals(e, f)) return Value::Bool(true);
    }
  }
  return Value::Bool(false);
}

constexpr ValueKind kList = ValueKind::kList;
const Overload kLists[] = {
    Member("join", kList, &Join),           Member("indexOf", kList, &IndexOf),
    Member("lastIndexOf", kList, &IndexOf), Member("slice", kList, &Slice),
    Member("flatten", kList, &Flatten),     Member("distinct", kList, &Distinct),
    Member("reverse", kList, &Reverse),     Member("sort", kList, &Sort),
    Member("sum", kList, &Sum),             Member("isSorted", kList, &IsSorted),
    Member("min", kList, &MinMax),          Member("max", kList, &MinMax),
    Global("lists.range", &Range),          Global("sets.contains", &Sets),
    Global("sets.equivalent", &Sets),       Global("sets.intersects", &Sets),
};

}  // namespace

std::span<const Overload> ListOverloads() { return kLists; }

}  // namespace draguard::cel::internal
