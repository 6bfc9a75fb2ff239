// Tree-walking CEL interpreter. See include/draguard/cel/evaluator.h.
//
// Recursion follows the tree, whose depth the parser bounds (ParseOptions::max_depth), so it cannot
// be driven into a stack overflow. Loops (comprehensions) are iterative and charged to the cost
// budget, as are operations whose work grows with their operands (string / list concatenation,
// string functions, regular expressions). Calls go to the builtin libraries (builtins.h) by the
// function the checker resolved.
#include "draguard/cel/evaluator.h"

#include <algorithm>

#include "builtins.h"
#include "regex_cache.h"

namespace draguard::cel {
namespace {

using internal::CallArgs;
using internal::CallContext;

Value ConstValue(const Constant& c) {
  switch (c.kind) {
    case ConstKind::kNull: return Value::Null();
    case ConstKind::kBool: return Value::Bool(c.b);
    case ConstKind::kInt: return Value::Int(c.i);
    case ConstKind::kUint: return Value::Uint(c.u);
    case ConstKind::kDouble: return Value::Double(c.d);
    case ConstKind::kString: return Value::String(c.s);
    case ConstKind::kBytes: return Value::Bytes(c.s);
  }
  return Value::Null();
}

const char* TypeIdent(const std::string& n) {
  static constexpr const char* kTypes[] = {"int",  "uint", "double",    "bool", "string",
                                           "bytes", "list", "map", "null_type", "type", "optional_type"};
  for (const char* t : kTypes) {
    if (n == t) return t;
  }
  return nullptr;
}

bool IsNamespace(const std::string& n) {
  return n == "strings" || n == "sets" || n == "lists" || n == "math" || n == "cel" || n == "optional";
}

bool IsOptionalIndex(const Expr& e, size_t i) {
  return !e.optional_indices.empty() &&
         std::find(e.optional_indices.begin(), e.optional_indices.end(), static_cast<int32_t>(i)) !=
             e.optional_indices.end();
}

// `obj.name` of a map (has() when `test_only`).
Value SelectField(const Value& obj, const Expr& e) {
  if (obj.kind() != ValueKind::kMap) {
    if (e.test_only) return Value::Error("invalid type for field selection: " + obj.TypeName());
    return Value::Error("no such key: " + e.name + " (type '" + obj.TypeName() + "' does not support field selection)");
  }
  const MapValue& m = obj.map_value();
  for (const auto& [k, v] : m.entries) {
    if (k.kind() == ValueKind::kString && k.string_value() == e.name) return e.test_only ? Value::Bool(true) : v;
  }
  if (e.test_only) return Value::Bool(false);
  if (m.missing_is_empty) return Value::Map(MapValue{});
  return Value::Error("no such key: " + e.name);
}

// Optional chaining: x.?a.b is empty when x.?a is or b is missing, else optional.of(x.a.b);
// has() on an optional tests the value it holds.
Value SelectOptionalField(const Value& obj, const Expr& e) {
  if (obj.optional_value() == nullptr) return e.test_only ? Value::Bool(false) : obj;
  Value inner = *obj.optional_value();
  if (inner.kind() != ValueKind::kMap) {
    return Value::Error("no such key: " + e.name + " (type '" + inner.TypeName() + "' does not support field selection)");
  }
  for (const auto& [k, v] : inner.map_value().entries) {
    if (k.kind() == ValueKind::kString && k.string_value() == e.name) {
      return e.test_only ? Value::Bool(true) : Value::OptionalOf(v);
    }
  }
  if (e.test_only) return Value::Bool(false);
  if (inner.map_value().missing_is_empty) return Value::OptionalOf(Value::Map(MapValue{}));
  return Value::OptionalNone();
}

class Interp {
 public:
  Interp(const Activation& act, const EvalOptions& opts, const CompiledRegexes* regexes, const ResolvedCalls* calls)
      : act_(act), ctx_(opts.cost_limit, regexes, opts.budget), calls_(calls) {}

  Value Eval(const Expr& e) {
    if (ctx_.exceeded() || !ctx_.Charge(1)) return CostError();
    switch (e.kind) {
      case ExprKind::kConst: return ConstValue(e.constant);
      case ExprKind::kIdent: return Ident(e);
      case ExprKind::kSelect: return Select(e);
      case ExprKind::kCall: return Call(e);
      case ExprKind::kList: return List(e);
      case ExprKind::kMap: return Map(e);
      case ExprKind::kStruct: return Value::Error("message construction is not supported: " + e.name);
      case ExprKind::kComprehension: return Comprehension(e);
    }
    return Value::Error("unknown expression kind");
  }

  int64_t cost() const { return ctx_.cost(); }
  bool exceeded() const { return ctx_.exceeded(); }
  Value CostError() const { return ctx_.StopError(); }
  // Hands the cost spent to the review's budget (if any).
  void Report() { ctx_.Report(); }

 private:
  Value List(const Expr& e) {
    ListValue out;
    out.reserve(e.args.size());
    for (size_t i = 0; i < e.args.size(); ++i) {
      Value v = Eval(*e.args[i]);
      if (v.is_error()) return v;
      if (IsOptionalIndex(e, i)) {
        if (v.kind() != ValueKind::kOptional) {
          return Value::Error("cannot initialize optional list element from non-optional value " + v.DebugString());
        }
        if (v.optional_value() != nullptr) out.push_back(*v.optional_value());
        continue;
      }
      out.push_back(std::move(v));
    }
    return Value::List(std::move(out));
  }

  Value Map(const Expr& e) {
    MapValue m;
    m.entries.reserve(e.entries.size());
    for (const auto& en : e.entries) {
      Value k = Eval(*en.key);
      if (k.is_error()) return k;
      ValueKind kk = k.kind();
      if (kk != ValueKind::kString && kk != ValueKind::kInt && kk != ValueKind::kUint && kk != ValueKind::kBool) {
        return Value::Error("unsupported key type: " + k.TypeName());
      }
      Value v = Eval(*en.value);
      if (v.is_error()) return v;
      if (en.optional) {
        if (v.kind() != ValueKind::kOptional) {
          return Value::Error("cannot initialize optional entry from non-optional value " + v.DebugString());
        }
        if (v.optional_value() == nullptr) continue;
        Value inner = *v.optional_value();  // copy first: assigning from v's own storage is unsafe
        v = std::move(inner);
      }
      if (MapFind(m, k) != nullptr) return Value::Error("Failed with repeated key: " + k.DebugString());
      m.entries.emplace_back(std::move(k), std::move(v));
    }
    return Value::Map(std::move(m));
  }

  Value Ident(const Expr& e) {
    for (size_t i = locals_.size(); i-- > 0;) {
      if (*locals_[i].first == e.name) return locals_[i].second;
    }
    if (const Value* v = Bound(e.name)) return *v;
    if (const char* t = TypeIdent(e.name)) return Value::Type(t);
    return Value::Error("undeclared reference to '" + e.name + "' (in container '')");
  }

  Value Select(const Expr& e) {
    // Qualified variable names (a.b.c bound as one name).
    if (e.operand->kind == ExprKind::kIdent && !IsLocal(e.operand->name)) {
      if (const Value* v = Bound(e.operand->name + "." + e.name)) return e.test_only ? Value::Bool(true) : *v;
    }
    Value obj = Eval(*e.operand);
    if (obj.is_error()) return obj;
    if (obj.kind() == ValueKind::kOptional) return SelectOptionalField(obj, e);
    return SelectField(obj, e);
  }

  bool IsLocal(const std::string& n) const {
    for (const auto& l : locals_) {
      if (*l.first == n) return true;
    }
    return false;
  }

  const Value* Bound(const std::string& n) const {
    for (const auto& [k, v] : act_.vars) {
      if (k == n) return &v;
    }
    return nullptr;
  }

  // `_&&_` / `_||_` with commutative error absorption.
  Value Logical(const Expr& e) {
    bool is_and = e.op == OpCode::kAnd;
    Value a = Eval(*e.args[0]);
    if (exceeded()) return CostError();
    if (a.kind() == ValueKind::kBool && a.bool_value() != is_and) return a;
    Value b = Eval(*e.args[1]);
    if (exceeded()) return CostError();
    if (b.kind() == ValueKind::kBool && b.bool_value() != is_and) return b;
    if (a.kind() == ValueKind::kBool && b.kind() == ValueKind::kBool) return a;
    if (a.is_error()) return a;
    if (b.is_error()) return b;
    return internal::NoOverload(e.name, {a, b});
  }

  Value Conditional(const Expr& e) {
    Value c = Eval(*e.args[0]);
    if (c.is_error()) return c;
    if (c.kind() != ValueKind::kBool) return internal::NoOverload(e.name, {c});
    return Eval(*e.args[c.bool_value() ? 1 : 2]);
  }

  Value NotStrictlyFalse(const Expr& e) {
    Value v = Eval(*e.args[0]);
    if (exceeded()) return CostError();
    if (v.kind() == ValueKind::kBool) return v;
    return Value::Bool(true);
  }

  // The callee of a call node: the checker's resolution, else (unchecked expressions) the name,
  // with namespaced global functions written as receiver calls on an undeclared identifier folded.
  struct Callee {
    FunctionId id = kUnknownFunction;
    std::string_view name;
    bool member = false;
    std::string qualified;  // storage of a folded name
  };

  void Resolve(const Expr& e, Callee& c) const {
    c.id = calls_ != nullptr ? calls_->Find(e.id) : kUnknownFunction;
    if (c.id != kUnknownFunction) {
      c.name = internal::FunctionName(c.id);
      c.member = internal::IsMemberFunction(c.id);
      return;
    }
    c.name = e.name;
    c.member = e.operand != nullptr;
    if (c.member && e.operand->kind == ExprKind::kIdent && IsNamespace(e.operand->name) &&
        !IsLocal(e.operand->name) && Bound(e.operand->name) == nullptr) {
      c.qualified = e.operand->name + "." + e.name;
      c.name = c.qualified;
      c.member = false;
    }
  }

  Value Call(const Expr& e) {
    switch (e.op) {
      case OpCode::kAnd:
      case OpCode::kOr: return Logical(e);
      case OpCode::kCond: return Conditional(e);
      case OpCode::kNotStrictlyFalse: return NotStrictlyFalse(e);
      default: break;
    }
    Callee c;
    Resolve(e, c);
    CallArgs args;
    if (c.member) {
      Value t = Eval(*e.operand);
      if (t.is_error()) return t;
      args.push_back(std::move(t));
    }
    for (const auto& a : e.args) {
      Value v = Eval(*a);
      if (v.is_error()) return v;
      args.push_back(std::move(v));
    }
    Value r;
    if (e.op != OpCode::kOther && args.size() == 2) {
      r = internal::CallOperator(e.op, e.name, args[0], args[1], ctx_);
    } else {
      if (c.id == kUnknownFunction) c.id = internal::ResolveFunction(c.name, c.member);
      r = internal::CallFunction(c.id, c.name, c.member, args, ctx_);
    }
    if (exceeded()) return CostError();
    return r;
  }

  // Runs the loop of a comprehension; false (with `err`) when `range` cannot be iterated.
  bool Loop(const Expr& e, const Value& range, size_t accu_slot, Value& err) {
    bool two = !e.iter_var2.empty();
    size_t v1 = accu_slot + 1, v2 = accu_slot + 2;
    auto step = [&]() -> bool {
      if (!ctx_.Charge(1)) return false;
      Value c = Eval(*e.loop_cond);
      if (exceeded()) return false;
      if (c.kind() == ValueKind::kBool && !c.bool_value()) return false;
      Value next = Eval(*e.loop_step);
      if (exceeded()) return false;
      locals_[accu_slot].second = std::move(next);
      return true;
    };
    if (range.kind() == ValueKind::kList) {
      auto keep = range.list_ptr();
      const ListValue& l = *keep;
      for (size_t i = 0; i < l.size(); ++i) {
        locals_[v1].second = two ? Value::Int(static_cast<int64_t>(i)) : l[i];
        if (two) locals_[v2].second = l[i];
        if (!step()) break;
      }
      return true;
    }
    if (range.kind() == ValueKind::kMap) {
      Value keep = range;
      for (const auto& [k, v] : keep.map_value().entries) {
        locals_[v1].second = k;
        if (two) locals_[v2].second = v;
        if (!step()) break;
      }
      return true;
    }
    err = Value::Error("cannot iterate over " + range.TypeName());
    return false;
  }

  Value Comprehension(const Expr& e) {
    Value range = Eval(*e.iter_range);
    if (range.is_error()) return range;
    Value accu = Eval(*e.accu_init);
    if (accu.is_error() && exceeded()) return accu;
    locals_.emplace_back(&e.accu_var, std::move(accu));
    size_t accu_slot = locals_.size() - 1;
    locals_.emplace_back(&e.iter_var, Value());
    if (!e.iter_var2.empty()) locals_.emplace_back(&e.iter_var2, Value());
    Value result;  // the error when the range cannot be iterated
    bool iterated = Loop(e, range, accu_slot, result);
    if (iterated && exceeded()) {
      result = CostError();
    } else if (iterated) {
      // The iteration variables are out of scope in the result.
      locals_.resize(accu_slot + 1);
      result = Eval(*e.result);
    }
    locals_.resize(accu_slot);
    return result;
  }

  const Activation& act_;
  CallContext ctx_;
  const ResolvedCalls* calls_;
  std::vector<std::pair<const std::string*, Value>> locals_;
};

EvalOutcome Run(const Ast& ast, const Activation& activation, const EvalOptions& options,
                const CompiledRegexes* regexes, const ResolvedCalls* calls) {
  Interp in(activation, options, regexes, calls);
  EvalOutcome out;
  out.value = in.exceeded() ? in.CostError() : in.Eval(*ast.root);
  if (in.exceeded()) out.value = in.CostError();
  in.Report();  // a budget this exhausts stops the next evaluation, not this finished one
  out.cost = in.cost();
  return out;
}

}  // namespace

EvalOutcome Evaluate(const Ast& ast, const Activation& activation, const EvalOptions& options) {
  return Run(ast, activation, options, nullptr, nullptr);
}

Result<bool> EvaluateSelector(const CheckedExpr& selector, const Device& device, const EvalOptions& options) {
  return EvaluateSelectorValue(selector, DeviceToValue(device), options);
}

Result<bool> EvaluateSelectorValue(const CheckedExpr& selector, const Value& device, const EvalOptions& options) {
  Activation act;
  act.vars.emplace_back("device", device);
  EvalOutcome o = Run(selector.ast, act, options, selector.regexes.get(), selector.calls.get());
  if (o.value.is_error()) return Status::InvalidArgument(o.value.error_message());
  if (o.value.kind() != ValueKind::kBool) {
    return Status::InvalidArgument("selector evaluated to " + o.value.TypeName() + ", not bool");
  }
  return o.value.bool_value();
}

}  // namespace draguard::cel
