// Tree-walking CEL interpreter. See include/draguard/cel/evaluator.h.
//
// Recursion follows the tree, whose depth the parser bounds (ParseOptions::max_depth), so it cannot
// be driven into a stack overflow. Loops (comprehensions) are iterative and charged to the cost
// budget, as are operations whose work grows with their operands (string / list concatenation,
// string functions, regular expressions).
#include "draguard/cel/evaluator.h"

#include <re2/re2.h>

#include <algorithm>
#include <array>
#include <initializer_list>
#include <cerrno>
#include <charconv>
#include <optional>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>

#include "regex_cache.h"
#include "utf8.h"
#include "value_format.h"

namespace draguard::cel {

int CompareNumbers(const Value& a, const Value& b);  // value.cc

using internal::CodePoints;
using internal::DecodeUtf8;
using internal::EncodeUtf8;
using internal::FormatDoubleG;
using internal::FormatString;
using internal::QuoteString;
using internal::ValidUtf8;

namespace {

constexpr const char* kCostExceeded = "operation cancelled: actual cost limit exceeded";

class Interp;
// Call arguments (receiver first): up to four inline, more on the heap.
class CallArgs {
 public:
  CallArgs() = default;
  CallArgs(std::initializer_list<Value> vs) {
    for (const auto& v : vs) push_back(v);
  }
  void push_back(Value v) {
    if (n_ < inline_.size()) {
      inline_[n_] = std::move(v);
    } else {
      if (heap_.empty()) heap_.assign(inline_.begin(), inline_.end());
      heap_.push_back(std::move(v));
    }
    ++n_;
  }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  const Value& operator[](size_t i) const { return n_ > inline_.size() ? heap_[i] : inline_[i]; }

 private:
  std::array<Value, 4> inline_;
  std::vector<Value> heap_;
  size_t n_ = 0;
};
Value CallBuiltin(const std::string& fn, bool member, const CallArgs& args, Interp& in);
Value CallOperator(OpCode op, const std::string& fn, const Value& a, const Value& b, Interp& in);
Value NoOverload(const std::string& fn, const CallArgs& args);
std::string ArgTypeList(const CallArgs& args);

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

class Interp {
 public:
  Interp(const Activation& act, const EvalOptions& opts, const CompiledRegexes* pre)
      : act_(act), opts_(opts), pre_(pre) {}

  Value Eval(const Expr& e) {
    if (exceeded_) return CostError();
    if (++cost_ > opts_.cost_limit) {
      exceeded_ = true;
      return CostError();
    }
    switch (e.kind) {
      case ExprKind::kConst: return ConstValue(e.constant);
      case ExprKind::kIdent: return Ident(e);
      case ExprKind::kSelect: return Select(e);
      case ExprKind::kCall: return Call(e);
      case ExprKind::kList: {
        ListValue out;
        out.reserve(e.args.size());
        for (size_t i = 0; i < e.args.size(); ++i) {
          Value v = Eval(*e.args[i]);
          if (v.is_error()) return v;
          if (!e.optional_indices.empty() &&
              std::find(e.optional_indices.begin(), e.optional_indices.end(), static_cast<int32_t>(i)) !=
                  e.optional_indices.end()) {
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
      case ExprKind::kMap: {
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
      case ExprKind::kStruct:
        return Value::Error("message construction is not supported: " + e.name);
      case ExprKind::kComprehension: return Comprehension(e);
    }
    return Value::Error("unknown expression kind");
  }

  int64_t cost() const { return cost_; }
  bool exceeded() const { return exceeded_; }
  Value CostError() const { return Value::Error(kCostExceeded); }

 private:
  Value Ident(const Expr& e) {
    for (size_t i = locals_.size(); i-- > 0;) {
      if (*locals_[i].first == e.name) return locals_[i].second;
    }
    for (const auto& [n, v] : act_.vars) {
      if (n == e.name) return v;
    }
    if (const char* t = TypeIdent(e.name)) return Value::Type(t);
    return Value::Error("undeclared reference to '" + e.name + "' (in container '')");
  }

  Value Select(const Expr& e) {
    // Qualified variable names (a.b.c bound as one name).
    if (e.operand->kind == ExprKind::kIdent && !IsLocal(e.operand->name)) {
      std::string qualified = e.operand->name + "." + e.name;
      for (const auto& [n, v] : act_.vars) {
        if (n == qualified) return e.test_only ? Value::Bool(true) : v;
      }
    }
    Value obj = Eval(*e.operand);
    if (obj.is_error()) return obj;
    if (obj.kind() == ValueKind::kOptional) {
      // Optional chaining: x.?a.b is empty when x.?a is or b is missing, else optional.of(x.a.b);
      // has() on an optional tests the value it holds.
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
    if (obj.kind() != ValueKind::kMap) {
      if (e.test_only) return Value::Error("invalid type for field selection: " + obj.TypeName());
      return Value::Error("no such key: " + e.name + " (type '" + obj.TypeName() + "' does not support field selection)");
    }
    const MapValue& m = obj.map_value();
    for (const auto& [k, v] : m.entries) {
      if (k.kind() == ValueKind::kString && k.string_value() == e.name) {
        return e.test_only ? Value::Bool(true) : v;
      }
    }
    if (e.test_only) return Value::Bool(false);
    if (m.missing_is_empty) return Value::Map(MapValue{});
    return Value::Error("no such key: " + e.name);
  }

  bool IsLocal(const std::string& n) const {
    for (const auto& l : locals_) {
      if (*l.first == n) return true;
    }
    return false;
  }

  Value Call(const Expr& e) {
    const std::string& fn = e.name;
    OpCode op = e.op;
    if (op == OpCode::kAnd || op == OpCode::kOr) {
      bool is_and = op == OpCode::kAnd;
      Value a = Eval(*e.args[0]);
      if (exceeded_) return CostError();
      if (a.kind() == ValueKind::kBool && a.bool_value() != is_and) return a;
      Value b = Eval(*e.args[1]);
      if (exceeded_) return CostError();
      if (b.kind() == ValueKind::kBool && b.bool_value() != is_and) return b;
      if (a.kind() == ValueKind::kBool && b.kind() == ValueKind::kBool) return a;
      if (a.is_error()) return a;
      if (b.is_error()) return b;
      return NoOverload(fn, {a, b});
    }
    if (op == OpCode::kCond) {
      Value c = Eval(*e.args[0]);
      if (c.is_error()) return c;
      if (c.kind() != ValueKind::kBool) return NoOverload(fn, {c});
      return Eval(*e.args[c.bool_value() ? 1 : 2]);
    }
    if (op == OpCode::kNotStrictlyFalse) {
      Value v = Eval(*e.args[0]);
      if (exceeded_) return CostError();
      if (v.kind() == ValueKind::kBool) return v;
      return Value::Bool(true);
    }
    // Namespaced global functions written as receiver calls on an undeclared identifier.
    std::string qualified;
    const std::string* name = &fn;
    bool has_target = e.operand != nullptr;
    if (has_target && e.operand->kind == ExprKind::kIdent && IsNamespace(e.operand->name) &&
        !IsLocal(e.operand->name) && !IsBound(e.operand->name)) {
      qualified = e.operand->name + "." + fn;
      name = &qualified;
      has_target = false;
    }
    CallArgs args;
    if (has_target) {
      Value t = Eval(*e.operand);
      if (t.is_error()) return t;
      args.push_back(std::move(t));
    }
    for (const auto& a : e.args) {
      Value v = Eval(*a);
      if (v.is_error()) return v;
      args.push_back(std::move(v));
    }
    Value r = op != OpCode::kOther && args.size() == 2 ? CallOperator(op, fn, args[0], args[1], *this)
                                                       : CallBuiltin(*name, has_target, args, *this);
    if (exceeded_) return CostError();
    return r;
  }

  bool IsBound(const std::string& n) const {
    for (const auto& [k, v] : act_.vars) {
      if (k == n) return true;
    }
    return false;
  }
  static bool IsNamespace(const std::string& n) {
    return n == "strings" || n == "sets" || n == "lists" || n == "math" || n == "cel" || n == "optional";
  }

  Value Comprehension(const Expr& e) {
    Value range = Eval(*e.iter_range);
    if (range.is_error()) return range;
    Value accu = Eval(*e.accu_init);
    if (accu.is_error() && exceeded_) return accu;
    locals_.emplace_back(&e.accu_var, std::move(accu));
    size_t accu_slot = locals_.size() - 1;
    bool two = !e.iter_var2.empty();
    locals_.emplace_back(&e.iter_var, Value());
    size_t v1 = locals_.size() - 1;
    size_t v2 = v1;
    if (two) {
      locals_.emplace_back(&e.iter_var2, Value());
      v2 = locals_.size() - 1;
    }
    auto step = [&]() -> bool {
      if (!Charge(1)) return false;
      Value c = Eval(*e.loop_cond);
      if (exceeded_) return false;
      if (c.kind() == ValueKind::kBool && !c.bool_value()) return false;
      Value next = Eval(*e.loop_step);
      if (exceeded_) return false;
      locals_[accu_slot].second = std::move(next);
      return true;
    };
    Value err;
    if (range.kind() == ValueKind::kList) {
      auto keep = range.list_ptr();
      const ListValue& l = *keep;
      for (size_t i = 0; i < l.size(); ++i) {
        if (two) {
          locals_[v1].second = Value::Int(static_cast<int64_t>(i));
          locals_[v2].second = l[i];
        } else {
          locals_[v1].second = l[i];
        }
        if (!step()) break;
      }
    } else if (range.kind() == ValueKind::kMap) {
      const MapValue& m = range.map_value();
      Value keep = range;
      for (const auto& [k, v] : m.entries) {
        locals_[v1].second = k;
        if (two) locals_[v2].second = v;
        if (!step()) break;
      }
    } else {
      err = Value::Error("cannot iterate over " + range.TypeName());
    }
    Value result;
    if (err.is_error()) {
      result = err;
    } else if (exceeded_) {
      result = CostError();
    } else {
      // The iteration variables are out of scope in the result.
      locals_.resize(accu_slot + 1);
      result = Eval(*e.result);
    }
    locals_.resize(accu_slot);
    return result;
  }

 public:
  // Charges `n` units; false when the budget is exhausted.
  bool Charge(int64_t n) {
    cost_ += n;
    if (cost_ > opts_.cost_limit) exceeded_ = true;
    return !exceeded_;
  }
  // Compiled regular expressions, cached for the duration of one evaluation.
  const re2::RE2* Regex(const std::string& pattern, std::string* error) {
    if (pre_ != nullptr) {
      auto p = pre_->by_pattern.find(pattern);
      if (p != pre_->by_pattern.end()) return p->second.get();
    }
    auto it = regex_.find(pattern);
    if (it == regex_.end()) {
      re2::RE2::Options o;
      o.set_log_errors(false);
      auto re = std::make_unique<re2::RE2>(pattern, o);
      it = regex_.emplace(pattern, std::move(re)).first;
    }
    if (!it->second->ok()) {
      *error = it->second->error();
      return nullptr;
    }
    return it->second.get();
  }

 private:
  const Activation& act_;
  const EvalOptions& opts_;
  int64_t cost_ = 0;
  bool exceeded_ = false;
  std::vector<std::pair<const std::string*, Value>> locals_;
  std::map<std::string, std::unique_ptr<re2::RE2>> regex_;
  const CompiledRegexes* pre_ = nullptr;
};

// ---- builtins ----

std::string ArgTypeList(const CallArgs& args) {
  std::string s = "(";
  for (size_t i = 0; i < args.size(); ++i) s += (i ? ", " : "") + args[i].TypeName();
  return s + ")";
}

Value NoOverload(const std::string& fn, const CallArgs& args) {
  return Value::Error("no such overload: " + fn + ArgTypeList(args));
}

Value IntOverflow() { return Value::Error("integer overflow"); }

bool IsNum(const Value& v) {
  auto k = v.kind();
  return k == ValueKind::kInt || k == ValueKind::kUint || k == ValueKind::kDouble;
}

Value Arith(const std::string& fn, const Value& a, const Value& b, Interp& in) {
  ValueKind k = a.kind();
  if (k != b.kind()) return NoOverload(fn, {a, b});
  char op = fn[1];
  switch (k) {
    case ValueKind::kInt: {
      int64_t x = a.int_value(), y = b.int_value(), r = 0;
      switch (op) {
        case '+': return __builtin_add_overflow(x, y, &r) ? IntOverflow() : Value::Int(r);
        case '-': return __builtin_sub_overflow(x, y, &r) ? IntOverflow() : Value::Int(r);
        case '*': return __builtin_mul_overflow(x, y, &r) ? IntOverflow() : Value::Int(r);
        case '/':
          if (y == 0) return Value::Error("division by zero");
          if (x == INT64_MIN && y == -1) return IntOverflow();
          return Value::Int(x / y);
        case '%':
          if (y == 0) return Value::Error("modulus by zero");
          if (x == INT64_MIN && y == -1) return IntOverflow();
          return Value::Int(x % y);
      }
      break;
    }
    case ValueKind::kUint: {
      uint64_t x = a.uint_value(), y = b.uint_value(), r = 0;
      switch (op) {
        case '+': return __builtin_add_overflow(x, y, &r) ? IntOverflow() : Value::Uint(r);
        case '-': return __builtin_sub_overflow(x, y, &r) ? IntOverflow() : Value::Uint(r);
        case '*': return __builtin_mul_overflow(x, y, &r) ? IntOverflow() : Value::Uint(r);
        case '/':
          if (y == 0) return Value::Error("division by zero");
          return Value::Uint(x / y);
        case '%':
          if (y == 0) return Value::Error("modulus by zero");
          return Value::Uint(x % y);
      }
      break;
    }
    case ValueKind::kDouble: {
      double x = a.double_value(), y = b.double_value();
      switch (op) {
        case '+': return Value::Double(x + y);
        case '-': return Value::Double(x - y);
        case '*': return Value::Double(x * y);
        case '/': return Value::Double(x / y);
      }
      break;
    }
    case ValueKind::kString:
      if (op == '+') {
        if (!in.Charge(static_cast<int64_t>((a.string_value().size() + b.string_value().size()) / 16))) {
          return in.CostError();
        }
        return Value::String(a.string_value() + b.string_value());
      }
      break;
    case ValueKind::kBytes:
      if (op == '+') {
        if (!in.Charge(static_cast<int64_t>((a.bytes_value().size() + b.bytes_value().size()) / 16))) {
          return in.CostError();
        }
        return Value::Bytes(a.bytes_value() + b.bytes_value());
      }
      break;
    case ValueKind::kList:
      if (op == '+') {
        const auto& x = a.list_value();
        const auto& y = b.list_value();
        if (!in.Charge(static_cast<int64_t>(x.size() + y.size()))) return in.CostError();
        if (y.empty()) return a;
        if (x.empty()) return b;
        ListValue out;
        out.reserve(x.size() + y.size());
        out.insert(out.end(), x.begin(), x.end());
        out.insert(out.end(), y.begin(), y.end());
        return Value::List(std::move(out));
      }
      break;
    default: break;
  }
  return NoOverload(fn, {a, b});
}

// -1/0/1, or nullopt when the kinds are not ordered with each other; `unordered` for NaN.
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
      return NoOverload("_[_]", {c, k});
    }
    if (i < 0 || static_cast<uint64_t>(i) >= l.size()) {
      return Value::Error("index out of bounds: " + std::to_string(i));
    }
    return l[static_cast<size_t>(i)];
  }
  if (c.kind() == ValueKind::kMap) {
    ValueKind kk = k.kind();
    if (kk != ValueKind::kString && kk != ValueKind::kInt && kk != ValueKind::kUint && kk != ValueKind::kBool &&
        kk != ValueKind::kDouble) {
      return Value::Error("unsupported key type: " + k.TypeName());
    }
    if (const Value* v = MapFind(c.map_value(), k)) return *v;
    if (c.map_value().missing_is_empty) return Value::Map(MapValue{});
    return Value::Error("no such key: " + (kk == ValueKind::kString ? k.string_value() : k.DebugString()));
  }
  return NoOverload("_[_]", {c, k});
}

Value In(const Value& elem, const Value& c) {
  if (c.kind() == ValueKind::kList) {
    for (const auto& x : c.list_value()) {
      Value e = Equals(elem, x);
      if (e.kind() == ValueKind::kBool && e.bool_value()) return Value::Bool(true);
    }
    return Value::Bool(false);
  }
  if (c.kind() == ValueKind::kMap) return Value::Bool(MapFind(c.map_value(), elem) != nullptr);
  return NoOverload("@in", {elem, c});
}

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

bool IsSpaceCp(uint32_t c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0D) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Code-point index of `sub` in `s` at or after `start` (or last at or before start); -1 if none.
int64_t FindCp(const std::vector<uint32_t>& s, const std::vector<uint32_t>& sub, int64_t start, bool last) {
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

// Binary operators, dispatched on the parser's OpCode.
Value CallOperator(OpCode op, const std::string& fn, const Value& a, const Value& b, Interp& in) {
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
    case OpCode::kMod: return Arith(fn, a, b, in);
    case OpCode::kLt:
    case OpCode::kLe:
    case OpCode::kGt:
    case OpCode::kGe: {
      bool unordered = false;
      auto c = Order(a, b, &unordered);
      if (!c) return NoOverload(fn, {a, b});
      if (unordered) return Value::Bool(false);
      if (op == OpCode::kLt) return Value::Bool(*c < 0);
      if (op == OpCode::kLe) return Value::Bool(*c <= 0);
      if (op == OpCode::kGt) return Value::Bool(*c > 0);
      return Value::Bool(*c >= 0);
    }
    case OpCode::kIndex:
      if (a.kind() == ValueKind::kOptional) return CallBuiltin("_[?_]", false, {a, b}, in);
      return Index(a, b);
    case OpCode::kIn: return In(a, b);
    default: return NoOverload(fn, {a, b});
  }
}

Value CallBuiltin(const std::string& fn, bool member, const CallArgs& a, Interp& in) {
  size_t n = a.size();
  auto k = [&](size_t i) { return a[i].kind(); };
  auto is = [&](size_t i, ValueKind kind) { return i < n && a[i].kind() == kind; };

  // Quantity and Semver methods.
  if (member && n >= 1 && (k(0) == ValueKind::kQuantity || k(0) == ValueKind::kSemver)) {
    bool q = k(0) == ValueKind::kQuantity;
    if ((fn == "compareTo" || fn == "isGreaterThan" || fn == "isLessThan") && n == 2 && k(1) == k(0)) {
      int c = q ? a[0].quantity_value().Compare(a[1].quantity_value()) : a[0].semver_value().Compare(a[1].semver_value());
      if (fn == "compareTo") return Value::Int(c);
      return Value::Bool(fn == "isGreaterThan" ? c > 0 : c < 0);
    }
    if (q && n == 1) {
      const Quantity& x = a[0].quantity_value();
      if (fn == "asInteger") {
        auto i = x.AsInt64();
        if (!i) return Value::Error("cannot convert value to integer");
        return Value::Int(*i);
      }
      if (fn == "isInteger") return Value::Bool(x.AsInt64().has_value());
      if (fn == "asApproximateFloat") return Value::Double(x.AsApproximateFloat());
      if (fn == "sign") return Value::Int(x.Sign());
    }
    if (q && n == 2 && (fn == "add" || fn == "sub")) {
      Quantity y;
      if (k(1) == ValueKind::kQuantity) y = a[1].quantity_value();
      else if (k(1) == ValueKind::kInt) y = Quantity::FromInt64(a[1].int_value());
      else return NoOverload(fn, a);
      auto r = fn == "add" ? a[0].quantity_value().Add(y) : a[0].quantity_value().Sub(y);
      if (!r.ok()) return Value::Error(r.status().message());
      return Value::Quant(*r);
    }
    if (!q && n == 1) {
      const Semver& s = a[0].semver_value();
      if (fn == "major") return Value::Int(static_cast<int64_t>(s.major));
      if (fn == "minor") return Value::Int(static_cast<int64_t>(s.minor));
      if (fn == "patch") return Value::Int(static_cast<int64_t>(s.patch));
    }
    return NoOverload(fn, a);
  }


  // Optional types (cel-go OptionalTypes).
  if (n == 2 && (fn == "_?._" || fn == "_[?_]")) {
    Value obj = a[0];
    if (obj.kind() == ValueKind::kOptional) {
      if (obj.optional_value() == nullptr) return obj;
      Value inner = *obj.optional_value();  // copy first: assigning from obj's own storage is unsafe
      obj = std::move(inner);
    }
    if (obj.kind() == ValueKind::kMap) {
      if (const Value* v = MapFind(obj.map_value(), a[1])) return Value::OptionalOf(*v);
      if (obj.map_value().missing_is_empty) return Value::OptionalOf(Value::Map(MapValue{}));
      return Value::OptionalNone();
    }
    if (fn == "_[?_]" && obj.kind() == ValueKind::kList) {
      Value r = Index(obj, a[1]);
      if (r.is_error()) {
        if (a[1].kind() != ValueKind::kInt && a[1].kind() != ValueKind::kUint && a[1].kind() != ValueKind::kDouble) return r;
        return Value::OptionalNone();
      }
      return Value::OptionalOf(std::move(r));
    }
    return NoOverload(fn, a);
  }
  if (!member && fn.rfind("optional.", 0) == 0) {
    if (fn == "optional.none" && n == 0) return Value::OptionalNone();
    if (fn == "optional.of" && n == 1) return Value::OptionalOf(a[0]);
    if (fn == "optional.ofNonZeroValue" && n == 1) {
      const Value& v = a[0];
      bool zero = false;
      switch (v.kind()) {
        case ValueKind::kNull: zero = true; break;
        case ValueKind::kBool: zero = !v.bool_value(); break;
        case ValueKind::kInt: zero = v.int_value() == 0; break;
        case ValueKind::kUint: zero = v.uint_value() == 0; break;
        case ValueKind::kDouble: zero = v.double_value() == 0; break;
        case ValueKind::kString: zero = v.string_value().empty(); break;
        case ValueKind::kBytes: zero = v.bytes_value().empty(); break;
        case ValueKind::kList: zero = v.list_value().empty(); break;
        case ValueKind::kMap: zero = v.map_value().entries.empty(); break;
        default: break;
      }
      return zero ? Value::OptionalNone() : Value::OptionalOf(v);
    }
    return NoOverload(fn, a);
  }
  if (member && n >= 1 && k(0) == ValueKind::kOptional) {
    const Value* v = a[0].optional_value();
    if (fn == "hasValue" && n == 1) return Value::Bool(v != nullptr);
    if (fn == "value" && n == 1) return v ? *v : Value::Error("optional.none() dereference");
    if (fn == "orValue" && n == 2) return v ? *v : a[1];
    if (fn == "or" && n == 2) {
      if (v) return a[0];
      if (k(1) != ValueKind::kOptional) return NoOverload(fn, a);
      return a[1];
    }
    return NoOverload(fn, a);
  }

  if (!member && n == 1 && fn == "quantity" && is(0, ValueKind::kString)) {
    auto q = Quantity::Parse(a[0].string_value());
    if (!q.ok()) return Value::Error(q.status().message());
    return Value::Quant(*q);
  }

  // Operators.
  if (fn.size() >= 3 && fn[0] == '_') {
    if (n == 2) {
      if (fn == "_==_") return Equals(a[0], a[1]);
      if (fn == "_!=_") {
        Value e = Equals(a[0], a[1]);
        return e.is_error() ? e : Value::Bool(!e.bool_value());
      }
      if (fn == "_+_" || fn == "_-_" || fn == "_*_" || fn == "_/_" || fn == "_%_") return Arith(fn, a[0], a[1], in);
      if (fn == "_<_" || fn == "_<=_" || fn == "_>_" || fn == "_>=_") {
        bool unordered = false;
        auto c = Order(a[0], a[1], &unordered);
        if (!c) return NoOverload(fn, a);
        if (unordered) return Value::Bool(false);
        if (fn == "_<_") return Value::Bool(*c < 0);
        if (fn == "_<=_") return Value::Bool(*c <= 0);
        if (fn == "_>_") return Value::Bool(*c > 0);
        return Value::Bool(*c >= 0);
      }
      if (fn == "_[_]") return Index(a[0], a[1]);
    }
    return NoOverload(fn, a);
  }
  if (fn == "!_" && n == 1) {
    if (is(0, ValueKind::kBool)) return Value::Bool(!a[0].bool_value());
    return NoOverload(fn, a);
  }
  if (fn == "-_" && n == 1) {
    if (is(0, ValueKind::kInt)) {
      if (a[0].int_value() == INT64_MIN) return IntOverflow();
      return Value::Int(-a[0].int_value());
    }
    if (is(0, ValueKind::kDouble)) return Value::Double(-a[0].double_value());
    return NoOverload(fn, a);
  }
  if (fn == "@in" && n == 2) return In(a[0], a[1]);
  if (fn == "cel.@mapInsert") {
    if (n == 3 && is(0, ValueKind::kMap)) {
      MapValue m = a[0].map_value();
      if (MapFind(m, a[1]) != nullptr) return Value::Error("insert failed: key " + a[1].DebugString() + " already exists");
      if (!in.Charge(static_cast<int64_t>(m.entries.size()))) return in.CostError();
      m.entries.emplace_back(a[1], a[2]);
      return Value::Map(std::move(m));
    }
    if (n == 2 && is(0, ValueKind::kMap) && is(1, ValueKind::kMap)) {
      MapValue m = a[0].map_value();
      for (const auto& [key, v] : a[1].map_value().entries) {
        if (MapFind(m, key) != nullptr) return Value::Error("insert failed: key " + key.DebugString() + " already exists");
        m.entries.emplace_back(key, v);
      }
      if (!in.Charge(static_cast<int64_t>(m.entries.size()))) return in.CostError();
      return Value::Map(std::move(m));
    }
    return NoOverload(fn, a);
  }

  // size
  if (fn == "size" && n == 1) {
    switch (k(0)) {
      case ValueKind::kString: return Value::Int(static_cast<int64_t>(CodePoints(a[0].string_value())));
      case ValueKind::kBytes: return Value::Int(static_cast<int64_t>(a[0].bytes_value().size()));
      case ValueKind::kList: return Value::Int(static_cast<int64_t>(a[0].list_value().size()));
      case ValueKind::kMap: return Value::Int(static_cast<int64_t>(a[0].map_value().entries.size()));
      default: return NoOverload(fn, a);
    }
  }

  // Conversions (global only).
  if (!member && n == 1) {
    const Value& v = a[0];
    if (fn == "int") {
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
    if (fn == "uint") {
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
    if (fn == "double") {
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
    if (fn == "string") {
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
    if (fn == "bytes") {
      if (v.kind() == ValueKind::kBytes) return v;
      if (v.kind() == ValueKind::kString) return Value::Bytes(v.string_value());
      return NoOverload(fn, a);
    }
    if (fn == "bool") {
      if (v.kind() == ValueKind::kBool) return v;
      if (v.kind() == ValueKind::kString) {
        const std::string& s = v.string_value();
        if (s == "1" || s == "t" || s == "T" || s == "TRUE" || s == "true" || s == "True") return Value::Bool(true);
        if (s == "0" || s == "f" || s == "F" || s == "FALSE" || s == "false" || s == "False") return Value::Bool(false);
        return Value::Error("cannot convert string '" + s + "' to bool");
      }
      return NoOverload(fn, a);
    }
    if (fn == "dyn") return v;
    if (fn == "type") return Value::Type(v.TypeName() == "null_type" ? "null_type" : v.TypeName());
    if (fn == "quantity" || fn == "isQuantity") {
      if (!is(0, ValueKind::kString)) return NoOverload(fn, a);
      auto q = Quantity::Parse(v.string_value());
      if (fn == "isQuantity") return Value::Bool(q.ok());
      if (!q.ok()) return Value::Error(q.status().message());
      return Value::Quant(*q);
    }
  }
  if (!member && (fn == "semver" || fn == "isSemver") && (n == 1 || n == 2)) {
    if (!is(0, ValueKind::kString) || (n == 2 && !is(1, ValueKind::kBool))) return NoOverload(fn, a);
    auto s = Semver::Parse(a[0].string_value(), n == 2 && a[1].bool_value());
    if (fn == "isSemver") return Value::Bool(s.ok());
    if (!s.ok()) return Value::Error(s.status().message());
    return Value::Sem(*s);
  }

  // Strings.
  if (member && n >= 1 && k(0) == ValueKind::kString) {
    const std::string& s = a[0].string_value();
    if (!in.Charge(static_cast<int64_t>(s.size() / 16))) return in.CostError();
    if (n == 2 && k(1) == ValueKind::kString) {
      const std::string& t = a[1].string_value();
      if (fn == "contains") return Value::Bool(s.find(t) != std::string::npos);
      if (fn == "startsWith") return Value::Bool(s.compare(0, t.size(), t) == 0 && s.size() >= t.size());
      if (fn == "endsWith") return Value::Bool(s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0);
    }
    if ((fn == "find" && n == 2 && k(1) == ValueKind::kString) ||
        (fn == "findAll" && (n == 2 || n == 3) && k(1) == ValueKind::kString && (n == 2 || k(2) == ValueKind::kInt))) {
      // Kubernetes regex library: first match ("" if none) / all matches (at most n when n >= 0).
      std::string err;
      const re2::RE2* re = in.Regex(a[1].string_value(), &err);
      if (re == nullptr) return Value::Error("invalid regular expression: " + err);
      if (!in.Charge(static_cast<int64_t>(s.size()))) return in.CostError();
      re2::StringPiece input(s);
      re2::StringPiece match;
      if (fn == "find") {
        if (!re->Match(input, 0, input.size(), re2::RE2::UNANCHORED, &match, 1)) return Value::String("");
        return Value::String(std::string(match.data(), match.size()));
      }
      int64_t limit = n == 3 ? a[2].int_value() : -1;
      ListValue out;
      size_t pos = 0;
      while ((limit < 0 || static_cast<int64_t>(out.size()) < limit) && pos <= s.size() &&
             re->Match(input, pos, input.size(), re2::RE2::UNANCHORED, &match, 1)) {
        out.push_back(Value::String(std::string(match.data(), match.size())));
        size_t end = static_cast<size_t>(match.data() - s.data()) + match.size();
        pos = match.empty() ? end + 1 : end;
      }
      return Value::List(std::move(out));
    }
    if (fn == "format" && n == 2 && k(1) == ValueKind::kList) {
      if (!in.Charge(static_cast<int64_t>(a[1].list_value().size()))) return in.CostError();
      return FormatString(s, a[1].list_value());
    }
    if (fn == "matches" && n == 2 && k(1) == ValueKind::kString) {
      std::string err;
      const re2::RE2* re = in.Regex(a[1].string_value(), &err);
      if (re == nullptr) return Value::Error("invalid regular expression: " + err);
      if (!in.Charge(static_cast<int64_t>(s.size()))) return in.CostError();
      return Value::Bool(re2::RE2::PartialMatch(s, *re));
    }
    if (fn == "lowerAscii" && n == 1) {
      std::string r = s;
      for (char& c : r) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      }
      return Value::String(std::move(r));
    }
    if (fn == "upperAscii" && n == 1) {
      std::string r = s;
      for (char& c : r) {
        if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
      }
      return Value::String(std::move(r));
    }
    if (fn == "trim" && n == 1) {
      auto cps = DecodeUtf8(s);
      size_t b = 0, e = cps.size();
      while (b < e && IsSpaceCp(cps[b])) ++b;
      while (e > b && IsSpaceCp(cps[e - 1])) --e;
      return Value::String(EncodeUtf8(cps, b, e));
    }
    if (fn == "reverse" && n == 1) {
      auto cps = DecodeUtf8(s);
      std::reverse(cps.begin(), cps.end());
      return Value::String(EncodeUtf8(cps, 0, cps.size()));
    }
    if (fn == "charAt" && n == 2 && k(1) == ValueKind::kInt) {
      auto cps = DecodeUtf8(s);
      int64_t i = a[1].int_value();
      if (i < 0 || i > static_cast<int64_t>(cps.size())) return Value::Error("index out of range: " + std::to_string(i));
      if (i == static_cast<int64_t>(cps.size())) return Value::String("");
      return Value::String(EncodeUtf8(cps, static_cast<size_t>(i), static_cast<size_t>(i) + 1));
    }
    if ((fn == "indexOf" || fn == "lastIndexOf") && (n == 2 || n == 3) && k(1) == ValueKind::kString &&
        (n == 2 || k(2) == ValueKind::kInt)) {
      bool last = fn == "lastIndexOf";
      auto cps = DecodeUtf8(s);
      auto sub = DecodeUtf8(a[1].string_value());
      int64_t len = static_cast<int64_t>(cps.size());
      int64_t start = n == 3 ? a[2].int_value() : (last ? len : 0);
      if (n == 3 && (start < 0 || start > len)) return Value::Error("index out of range: " + std::to_string(start));
      if (sub.empty()) return Value::Int(start);
      return Value::Int(FindCp(cps, sub, start, last));
    }
    if (fn == "substring" && (n == 2 || n == 3) && k(1) == ValueKind::kInt && (n == 2 || k(2) == ValueKind::kInt)) {
      auto cps = DecodeUtf8(s);
      int64_t len = static_cast<int64_t>(cps.size());
      int64_t b = a[1].int_value(), e = n == 3 ? a[2].int_value() : len;
      if (b < 0 || b > len) return Value::Error("index out of range: " + std::to_string(b));
      if (e < 0 || e > len) return Value::Error("index out of range: " + std::to_string(e));
      if (b > e) return Value::Error("invalid substring range. start: " + std::to_string(b) + ", end: " + std::to_string(e));
      return Value::String(EncodeUtf8(cps, static_cast<size_t>(b), static_cast<size_t>(e)));
    }
    if (fn == "replace" && (n == 3 || n == 4) && k(1) == ValueKind::kString && k(2) == ValueKind::kString &&
        (n == 3 || k(3) == ValueKind::kInt)) {
      const std::string& from = a[1].string_value();
      const std::string& to = a[2].string_value();
      int64_t limit = n == 4 ? a[3].int_value() : -1;
      std::string out;
      if (from.empty()) {
        // Go strings.Replace with empty old: inserts at every code-point boundary.
        auto cps = DecodeUtf8(s);
        int64_t done = 0;
        for (size_t i = 0; i <= cps.size(); ++i) {
          if (limit < 0 || done < limit) {
            out += to;
            ++done;
          }
          if (i < cps.size()) out += EncodeUtf8(cps, i, i + 1);
        }
        return Value::String(std::move(out));
      }
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
      if (!in.Charge(static_cast<int64_t>(out.size() / 16))) return in.CostError();
      return Value::String(std::move(out));
    }
    if (fn == "split" && (n == 2 || n == 3) && k(1) == ValueKind::kString && (n == 2 || k(2) == ValueKind::kInt)) {
      const std::string& sep = a[1].string_value();
      int64_t limit = n == 3 ? a[2].int_value() : -1;
      ListValue out;
      if (limit == 0) return Value::List(std::move(out));
      if (sep.empty()) {
        auto cps = DecodeUtf8(s);
        for (size_t i = 0; i < cps.size(); ++i) {
          if (limit > 0 && static_cast<int64_t>(out.size()) == limit - 1) {
            out.push_back(Value::String(EncodeUtf8(cps, i, cps.size())));
            break;
          }
          out.push_back(Value::String(EncodeUtf8(cps, i, i + 1)));
        }
        return Value::List(std::move(out));
      }
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
      if (!in.Charge(static_cast<int64_t>(out.size()))) return in.CostError();
      return Value::List(std::move(out));
    }
    return NoOverload(fn, a);
  }
  if (!member && fn == "matches" && n == 2 && is(0, ValueKind::kString) && is(1, ValueKind::kString)) {
    return CallBuiltin(fn, true, a, in);
  }
  if (!member && fn == "lists.range" && n == 1 && is(0, ValueKind::kInt)) {
    int64_t count = a[0].int_value();
    if (count < 0) return Value::Error("lists.range() requires a non-negative count");
    if (!in.Charge(count)) return in.CostError();
    ListValue out;
    out.reserve(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) out.push_back(Value::Int(i));
    return Value::List(std::move(out));
  }
  if (!member && fn == "strings.quote" && n == 1 && is(0, ValueKind::kString)) {
    return Value::String(QuoteString(a[0].string_value()));
  }

  // Lists.
  if (member && n >= 1 && k(0) == ValueKind::kList) {
    const ListValue& l = a[0].list_value();
    if (!in.Charge(static_cast<int64_t>(l.size()))) return in.CostError();
    if (fn == "join" && (n == 1 || (n == 2 && k(1) == ValueKind::kString))) {
      std::string sep = n == 2 ? a[1].string_value() : "";
      std::string out;
      for (size_t i = 0; i < l.size(); ++i) {
        if (l[i].kind() != ValueKind::kString) return NoOverload(fn, a);
        if (i) out += sep;
        out += l[i].string_value();
      }
      return Value::String(std::move(out));
    }
    if ((fn == "indexOf" || fn == "lastIndexOf") && n == 2) {
      for (size_t j = 0; j < l.size(); ++j) {
        size_t i = fn == "indexOf" ? j : l.size() - 1 - j;
        Value e = Equals(l[i], a[1]);
        if (e.kind() == ValueKind::kBool && e.bool_value()) return Value::Int(static_cast<int64_t>(i));
      }
      return Value::Int(-1);
    }
    // cel-go ext.Lists (Kubernetes base environment, ListsVersion 3).
    if (fn == "slice" && n == 3 && k(1) == ValueKind::kInt && k(2) == ValueKind::kInt) {
      int64_t b = a[1].int_value(), e = a[2].int_value(), len = static_cast<int64_t>(l.size());
      if (b < 0 || e < 0) return Value::Error("cannot slice(" + std::to_string(b) + ", " + std::to_string(e) + "), negative indexes not supported");
      if (b > e) return Value::Error("cannot slice(" + std::to_string(b) + ", " + std::to_string(e) + "), start index must be less than or equal to end index");
      if (e > len) return Value::Error("cannot slice(" + std::to_string(b) + ", " + std::to_string(e) + "), list is length " + std::to_string(len));
      return Value::List(ListValue(l.begin() + b, l.begin() + e));
    }
    if (fn == "flatten" && (n == 1 || (n == 2 && k(1) == ValueKind::kInt))) {
      int64_t depth = n == 2 ? a[1].int_value() : 1;
      if (depth < 0) return Value::Error("level must be non-negative");
      ListValue out;
      // Recursion is bounded: list values cannot nest deeper than the expression that built them.
      std::function<void(const ListValue&, int64_t)> flat = [&](const ListValue& src, int64_t d) {
        for (const auto& x : src) {
          if (x.kind() == ValueKind::kList && d > 0) flat(x.list_value(), d - 1);
          else out.push_back(x);
        }
      };
      flat(l, depth);
      if (!in.Charge(static_cast<int64_t>(out.size()))) return in.CostError();
      return Value::List(std::move(out));
    }
    if (fn == "distinct" && n == 1) {
      ListValue out;
      for (const auto& x : l) {
        bool seen = false;
        for (const auto& y : out) {
          Value eq = Equals(x, y);
          if (eq.kind() == ValueKind::kBool && eq.bool_value()) {
            seen = true;
            break;
          }
        }
        if (!seen) out.push_back(x);
      }
      if (!in.Charge(static_cast<int64_t>(l.size() * out.size()))) return in.CostError();
      return Value::List(std::move(out));
    }
    if (fn == "reverse" && n == 1) return Value::List(ListValue(l.rbegin(), l.rend()));
    if (fn == "sort" && n == 1) {
      ListValue out = l;
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
      if (!in.Charge(static_cast<int64_t>(out.size()))) return in.CostError();
      return Value::List(std::move(out));
    }
    if ((fn == "min" || fn == "max" || fn == "isSorted" || fn == "sum") && n == 1) {
      if (fn == "sum") {
        if (l.empty()) return Value::Int(0);
        Value acc = l[0];
        for (size_t i = 1; i < l.size(); ++i) {
          acc = Arith("_+_", acc, l[i], in);
          if (acc.is_error()) return acc;
        }
        return acc;
      }
      if (l.empty()) {
        if (fn == "isSorted") return Value::Bool(true);
        return Value::Error(fn + " called on an empty list");
      }
      size_t best = 0;
      for (size_t i = 1; i < l.size(); ++i) {
        bool unordered = false;
        auto c = Order(fn == "isSorted" ? l[i - 1] : l[i], fn == "isSorted" ? l[i] : l[best], &unordered);
        if (!c) return NoOverload(fn, a);
        if (fn == "isSorted") {
          if (*c > 0) return Value::Bool(false);
        } else if ((fn == "min" && *c < 0) || (fn == "max" && *c > 0)) {
          best = i;
        }
      }
      if (fn == "isSorted") return Value::Bool(true);
      return l[best];
    }
    return NoOverload(fn, a);
  }
  if (!member && n == 2 && is(0, ValueKind::kList) && is(1, ValueKind::kList) &&
      (fn == "sets.contains" || fn == "sets.equivalent" || fn == "sets.intersects")) {
    const auto& x = a[0].list_value();
    const auto& y = a[1].list_value();
    if (!in.Charge(static_cast<int64_t>(x.size() * y.size()))) return in.CostError();
    auto contains_all = [](const ListValue& p, const ListValue& q) {
      for (const auto& e : q) {
        bool found = false;
        for (const auto& f : p) {
          Value eq = Equals(e, f);
          if (eq.kind() == ValueKind::kBool && eq.bool_value()) {
            found = true;
            break;
          }
        }
        if (!found) return false;
      }
      return true;
    };
    if (fn == "sets.contains") return Value::Bool(contains_all(x, y));
    if (fn == "sets.equivalent") return Value::Bool(contains_all(x, y) && contains_all(y, x));
    for (const auto& e : x) {
      for (const auto& f : y) {
        Value eq = Equals(e, f);
        if (eq.kind() == ValueKind::kBool && eq.bool_value()) return Value::Bool(true);
      }
    }
    return Value::Bool(false);
  }
  if (member && (fn == "int" || fn == "string" || fn == "size")) return NoOverload(fn, a);
  return Value::Error("no such overload: " + fn + ArgTypeList(a) + " (unbound function)");
}

}  // namespace

std::shared_ptr<const CompiledRegexes> PrecompileRegexes(const Expr& root) {
  auto out = std::make_shared<CompiledRegexes>();
  std::vector<const Expr*> stack{&root};
  while (!stack.empty()) {
    const Expr* e = stack.back();
    stack.pop_back();
    if (e->kind == ExprKind::kCall && e->name == "matches") {
      const Expr* pat = nullptr;
      if (e->operand && e->args.size() == 1) pat = e->args[0].get();
      if (!e->operand && e->args.size() == 2) pat = e->args[1].get();
      if (pat && pat->kind == ExprKind::kConst && pat->constant.kind == ConstKind::kString &&
          out->by_pattern.find(pat->constant.s) == out->by_pattern.end()) {
        re2::RE2::Options o;
        o.set_log_errors(false);
        auto re = std::make_unique<re2::RE2>(pat->constant.s, o);
        if (re->ok()) out->by_pattern.emplace(pat->constant.s, std::move(re));
      }
    }
    for (const ExprPtr* c : {&e->operand, &e->iter_range, &e->accu_init, &e->loop_cond, &e->loop_step, &e->result}) {
      if (*c) stack.push_back(c->get());
    }
    for (const auto& a : e->args) stack.push_back(a.get());
    for (const auto& en : e->entries) {
      stack.push_back(en.key.get());
      stack.push_back(en.value.get());
    }
    for (const auto& f : e->fields) stack.push_back(f.value.get());
  }
  if (out->by_pattern.empty()) return nullptr;
  return out;
}

EvalOutcome Evaluate(const Ast& ast, const Activation& activation, const EvalOptions& options) {
  return EvaluateWithRegexes(ast, activation, options, nullptr);
}

EvalOutcome EvaluateWithRegexes(const Ast& ast, const Activation& activation, const EvalOptions& options,
                                const CompiledRegexes* regexes) {
  Interp in(activation, options, regexes);
  EvalOutcome out;
  out.value = in.Eval(*ast.root);
  if (in.exceeded()) out.value = in.CostError();
  out.cost = in.cost();
  return out;
}

Result<bool> EvaluateSelector(const CheckedExpr& selector, const Device& device, const EvalOptions& options) {
  return EvaluateSelectorValue(selector, DeviceToValue(device), options);
}

Result<bool> EvaluateSelectorValue(const CheckedExpr& selector, const Value& device, const EvalOptions& options) {
  Activation act;
  act.vars.emplace_back("device", device);
  EvalOutcome o = EvaluateWithRegexes(selector.ast, act, options, selector.regexes.get());
  if (o.value.is_error()) return Status::InvalidArgument(o.value.error_message());
  if (o.value.kind() != ValueKind::kBool) {
    return Status::InvalidArgument("selector evaluated to " + o.value.TypeName() + ", not bool");
  }
  return o.value.bool_value();
}

}  // namespace draguard::cel
