// Internal: the builtin function library of the CEL evaluator.
//
// Each library (builtins_<library>.cc) registers its overloads: a function name (namespaced
// functions with their namespace, "sets.contains"), a call style (global, or member on a receiver
// of one kind) and an implementation. Functions are numbered (FunctionId); the checker resolves
// every call node to one and records it in the CheckedExpr (ResolvedCalls), and the evaluator calls
// CallFunction with that id, resolving by name only expressions it runs unchecked. Within a
// function, the overload is picked by the receiver's runtime kind, as arguments typed `dyn` need.
#pragma once

#include <re2/re2.h>

#include <array>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "draguard/cel/ast.h"
#include "draguard/cel/budget.h"
#include "draguard/cel/value.h"

namespace draguard::cel {

struct CompiledRegexes;

/// Dense number of a builtin function (a name with a call style).
using FunctionId = uint16_t;
/// No builtin function (unknown name, an operator the evaluator handles itself, or not resolved).
inline constexpr FunctionId kUnknownFunction = 0xFFFF;

/// The checker's resolution of the call nodes of one expression, indexed by Expr::id.
struct ResolvedCalls {
  std::vector<FunctionId> by_id;  ///< kUnknownFunction where nothing was resolved
  /// The function resolved for node `id`, or kUnknownFunction.
  FunctionId Find(int64_t id) const {
    return id >= 0 && static_cast<uint64_t>(id) < by_id.size() ? by_id[static_cast<size_t>(id)] : kUnknownFunction;
  }
};

namespace internal {

/// Call arguments (receiver first): up to four inline, more on the heap.
class CallArgs {
 public:
  CallArgs() = default;
  /// Arguments from a list.
  CallArgs(std::initializer_list<Value> vs) {
    for (const auto& v : vs) push_back(v);
  }
  /// Appends one argument.
  void push_back(Value v) {
    if (n_ < inline_.size()) {
      inline_[n_] = std::move(v);
    } else {
      if (heap_.empty()) heap_.assign(inline_.begin(), inline_.end());
      heap_.push_back(std::move(v));
    }
    ++n_;
  }
  /// Number of arguments.
  size_t size() const { return n_; }
  /// Argument `i` (< size()).
  const Value& operator[](size_t i) const { return n_ > inline_.size() ? heap_[i] : inline_[i]; }

 private:
  std::array<Value, 4> inline_;
  std::vector<Value> heap_;
  size_t n_ = 0;
};

/// State of one evaluation shared by the interpreter and the builtins: the cost budget (of this
/// expression and, when set, of the whole review) and the regular expressions compiled so far.
class CallContext {
 public:
  /// A budget of `cost_limit` units; `precompiled` (may be null) holds the checker's patterns;
  /// `review` (may be null) is the review's budget, charged every kBudgetCheckUnits units.
  CallContext(int64_t cost_limit, const CompiledRegexes* precompiled, Budget* review = nullptr)
      : limit_(cost_limit), pre_(precompiled), review_(review) {
    if (review_ != nullptr && review_->exhausted()) exceeded_ = stopped_ = true;
  }
  /// Charges `n` units; false when the budget is exhausted.
  bool Charge(int64_t n) {
    cost_ += n;
    if (cost_ > limit_) exceeded_ = true;
    if (review_ != nullptr && !exceeded_ && cost_ - reported_ >= kBudgetCheckUnits) Report();
    return !exceeded_;
  }
  /// Hands the units not yet reported to the review's budget; an exhausted one stops evaluation.
  void Report() {
    if (review_ == nullptr) return;
    if (!review_->Spend(cost_ - reported_)) exceeded_ = stopped_ = true;
    reported_ = cost_;
  }
  /// Whether the budget is exhausted.
  bool exceeded() const { return exceeded_; }
  /// Units spent.
  int64_t cost() const { return cost_; }
  /// The error value of an exhausted budget.
  static Value CostError();
  /// The error that stopped this evaluation: the review budget's reason, else CostError().
  Value StopError() const { return stopped_ ? Value::Error(review_->Reason()) : CostError(); }
  /// `pattern` compiled (precompiled or cached for this evaluation), or null with `error` set.
  const re2::RE2* Regex(const std::string& pattern, std::string* error);

 private:
  int64_t limit_;
  int64_t cost_ = 0;
  int64_t reported_ = 0;
  bool exceeded_ = false;
  bool stopped_ = false;  // by the review's budget
  const CompiledRegexes* pre_;
  Budget* review_;
  std::map<std::string, std::unique_ptr<re2::RE2>> regex_;
};

/// Implementation of an overload: the result, or nullopt when no signature of the function
/// accepts `args` (the dispatcher then answers the error cel-go gives for the call).
using BuiltinFn = std::optional<Value> (*)(std::string_view function, const CallArgs& args, CallContext& ctx);

/// One registered overload.
struct Overload {
  std::string_view function;          ///< CEL name, namespaced ones with their namespace
  bool member = false;                ///< a receiver call; the receiver is args[0]
  std::optional<ValueKind> receiver;  ///< member: the receiver kind served (nullopt: every kind)
  BuiltinFn fn = nullptr;             ///< implementation
};

/// A global function.
constexpr Overload Global(std::string_view function, BuiltinFn fn) { return {function, false, std::nullopt, fn}; }
/// A member function on receivers of kind `receiver`.
constexpr Overload Member(std::string_view function, ValueKind receiver, BuiltinFn fn) {
  return {function, true, receiver, fn};
}
/// A member function on receivers of every kind.
constexpr Overload AnyMember(std::string_view function, BuiltinFn fn) { return {function, true, std::nullopt, fn}; }

/// The overloads of each library.
std::span<const Overload> CoreOverloads();      ///< conversions, size, unary operators (builtins_core.cc)
std::span<const Overload> OptionalOverloads();  ///< cel-go OptionalTypes (builtins_optional.cc)
std::span<const Overload> StringOverloads();    ///< string functions, cel-go ext.Strings (builtins_strings.cc)
std::span<const Overload> RegexOverloads();     ///< matches and the Kubernetes regex library (builtins_regex.cc)
std::span<const Overload> ListOverloads();      ///< list functions, cel-go ext.Lists and ext.Sets (builtins_lists.cc)
std::span<const Overload> QuantityOverloads();  ///< Kubernetes Quantity library (builtins_quantity.cc)
std::span<const Overload> SemverOverloads();    ///< Kubernetes Semver library (builtins_semver.cc)

/// The function `name` called as a member (`member`) or global function, or kUnknownFunction.
FunctionId ResolveFunction(std::string_view name, bool member);
/// The name of a resolved function.
std::string_view FunctionName(FunctionId id);
/// Whether a resolved function is a member function.
bool IsMemberFunction(FunctionId id);

/// Calls function `id` (kUnknownFunction for a name no builtin has) named `name`. Member calls on a
/// string or list receiver are charged its size (a sixteenth of the bytes; the elements) first.
Value CallFunction(FunctionId id, std::string_view name, bool member, const CallArgs& args, CallContext& ctx);

/// Binary operators, by the parser's OpCode (`name` is the operator's function name).
Value CallOperator(OpCode op, std::string_view name, const Value& a, const Value& b, CallContext& ctx);

/// "no such overload: name(types)".
Value NoOverload(std::string_view name, const CallArgs& args);

/// `a op b` for + - * / % (`name` is the operator's function name, for errors).
Value Arith(OpCode op, std::string_view name, const Value& a, const Value& b, CallContext& ctx);

/// -1/0/1, or nullopt when the kinds are not ordered with each other; `unordered` for NaN.
std::optional<int> Order(const Value& a, const Value& b, bool* unordered);

/// `c[k]` of a list or map.
Value Index(const Value& c, const Value& k);

/// `obj.?field` / `obj[?key]` (`name` is "_?._" or "_[?_]"), obj optional or not.
Value OptionalSelect(std::string_view name, const CallArgs& args);

/// Whether argument `i` exists and is of kind `k`.
inline bool ArgIs(const CallArgs& args, size_t i, ValueKind k) { return i < args.size() && args[i].kind() == k; }

/// compareTo (the three-way comparison `c`), isGreaterThan or isLessThan, by `name`.
inline Value ComparisonResult(std::string_view name, int c) {
  if (name == "compareTo") return Value::Int(c);
  return Value::Bool(name == "isGreaterThan" ? c > 0 : c < 0);
}

/// Whether `a` and `b` are equal by CEL equality (false when the comparison is an error).
inline bool ValueEquals(const Value& a, const Value& b) {
  Value e = Equals(a, b);
  return e.kind() == ValueKind::kBool && e.bool_value();
}

}  // namespace internal

/// Compares numbers of any numeric kinds exactly; -2 for unordered (NaN). Defined in value.cc.
int CompareNumbers(const Value& a, const Value& b);

}  // namespace draguard::cel
