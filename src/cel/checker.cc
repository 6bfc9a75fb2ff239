// CEL type checker and DRA reference extraction. See include/draguard/cel/checker.h.
#include "draguard/cel/checker.h"

#include "builtins.h"
#include "regex_cache.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

namespace draguard::cel {

using K = Type::Kind;

Type Type::ListOf(Type elem) { return Type{K::kList, std::make_shared<const Type>(std::move(elem)), nullptr}; }
Type Type::MapOf(Type key, Type value) {
  return Type{K::kMap, std::make_shared<const Type>(std::move(value)), std::make_shared<const Type>(std::move(key))};
}

Type Type::OptionalOf(Type value) { return Type{K::kOptional, std::make_shared<const Type>(std::move(value)), nullptr}; }

std::string Type::ToString() const {
  switch (kind) {
    case K::kDyn: return "dyn";
    case K::kNull: return "null_type";
    case K::kBool: return "bool";
    case K::kInt: return "int";
    case K::kUint: return "uint";
    case K::kDouble: return "double";
    case K::kString: return "string";
    case K::kBytes: return "bytes";
    case K::kList: return "list(" + (elem ? elem->ToString() : "dyn") + ")";
    case K::kMap: return "map(" + (key ? key->ToString() : "dyn") + ", " + (elem ? elem->ToString() : "dyn") + ")";
    case K::kType: return "type";
    case K::kQuantity: return "kubernetes.Quantity";
    case K::kSemver: return "kubernetes.Semver";
    case K::kDevice: return "kubernetes.DRADevice";
    case K::kOptional: return "optional_type(" + (elem ? elem->ToString() : "dyn") + ")";
  }
  return "?";
}

Env Env::Dra(const DraEnvOptions& options) {
  Env env;
  env.Declare("device", Type::Of(K::kDevice));
  env.allow_multiple_allocations_ = options.allow_multiple_allocations;
  env.require_bool_ = true;
  return env;
}

void Env::Declare(std::string name, Type type) {
  for (auto& [n, t] : vars_) {
    if (n == name) {
      t = std::move(type);
      return;
    }
  }
  vars_.emplace_back(std::move(name), std::move(type));
}

const Type* Env::Lookup(std::string_view name) const {
  for (const auto& [n, t] : vars_) {
    if (n == name) return &t;
  }
  return nullptr;
}

namespace {

Type Dyn() { return Type::Of(K::kDyn); }
Type Of(K k) { return Type::Of(k); }

// Whether a value of type `b` may be used where `a` is expected (and vice versa: symmetric).
bool Compatible(const Type& a, const Type& b) {
  if (a.kind == K::kDyn || b.kind == K::kDyn) return true;
  if (a.kind != b.kind) return false;
  if (a.kind == K::kList || a.kind == K::kMap || a.kind == K::kOptional) {
    if (a.elem && b.elem && !Compatible(*a.elem, *b.elem)) return false;
    if (a.key && b.key && !Compatible(*a.key, *b.key)) return false;
  }
  return true;
}

// Least general type covering both (dyn when they differ).
Type Join(const Type& a, const Type& b) {
  if (a.kind != b.kind) return Dyn();
  if (a.kind == K::kList) {
    // An empty literal has no element type yet (null) and takes the other side's.
    if (!a.elem) return b;
    if (!b.elem) return a;
    return Type::ListOf(Join(*a.elem, *b.elem));
  }
  if (a.kind == K::kOptional) {
    if (!a.elem) return b;
    if (!b.elem) return a;
    return Type::OptionalOf(Join(*a.elem, *b.elem));
  }
  if (a.kind == K::kMap) {
    if (!a.elem && !a.key) return b;
    if (!b.elem && !b.key) return a;
    Type ka = a.key ? *a.key : Dyn(), kb = b.key ? *b.key : Dyn();
    Type va = a.elem ? *a.elem : Dyn(), vb = b.elem ? *b.elem : Dyn();
    return Type::MapOf(Join(ka, kb), Join(va, vb));
  }
  return a;
}

bool IsNumeric(K k) { return k == K::kInt || k == K::kUint || k == K::kDouble; }

struct Overload {
  const char* fn;
  bool member;
  std::vector<K> params;  // receiver first for member functions
  K result;
};

// Declares one overload: function, member call, parameter kinds (receiver first), result kind.
using AddOverload = std::function<void(const char*, bool, std::vector<K>, K)>;

// Arithmetic, negation and ordering.
void AddOperators(const AddOverload& add) {
  for (K k : {K::kInt, K::kUint, K::kDouble}) {
    for (const char* op : {"_+_", "_-_", "_*_", "_/_"}) add(op, false, {k, k}, k);
  }
  add("_%_", false, {K::kInt, K::kInt}, K::kInt);
  add("_%_", false, {K::kUint, K::kUint}, K::kUint);
  add("_+_", false, {K::kString, K::kString}, K::kString);
  add("_+_", false, {K::kBytes, K::kBytes}, K::kBytes);
  add("-_", false, {K::kInt}, K::kInt);
  add("-_", false, {K::kDouble}, K::kDouble);
  add("!_", false, {K::kBool}, K::kBool);
  for (const char* op : {"_<_", "_<=_", "_>_", "_>=_"}) {
    for (K a : {K::kInt, K::kUint, K::kDouble}) {
      for (K b : {K::kInt, K::kUint, K::kDouble}) add(op, false, {a, b}, K::kBool);
    }
    for (K k : {K::kString, K::kBytes, K::kBool}) add(op, false, {k, k}, K::kBool);
  }
}

// size and the type conversions.
void AddConversions(const AddOverload& add) {
  for (K k : {K::kString, K::kBytes, K::kList, K::kMap}) {
    add("size", false, {k}, K::kInt);
    add("size", true, {k}, K::kInt);
  }
  for (K k : {K::kInt, K::kUint, K::kDouble, K::kString}) add("int", false, {k}, K::kInt);
  for (K k : {K::kInt, K::kUint, K::kDouble, K::kString}) add("uint", false, {k}, K::kUint);
  for (K k : {K::kInt, K::kUint, K::kDouble, K::kString}) add("double", false, {k}, K::kDouble);
  for (K k : {K::kInt, K::kUint, K::kDouble, K::kString, K::kBytes, K::kBool}) add("string", false, {k}, K::kString);
  for (K k : {K::kString, K::kBytes}) add("bytes", false, {k}, K::kBytes);
  for (K k : {K::kString, K::kBool}) add("bool", false, {k}, K::kBool);
}

// String functions (cel-go ext.Strings) and matches.
void AddStrings(const AddOverload& add) {
  for (const char* f : {"contains", "startsWith", "endsWith", "matches"}) add(f, true, {K::kString, K::kString}, K::kBool);
  add("matches", false, {K::kString, K::kString}, K::kBool);
  for (const char* f : {"lowerAscii", "upperAscii", "trim", "reverse"}) add(f, true, {K::kString}, K::kString);
  add("charAt", true, {K::kString, K::kInt}, K::kString);
  for (const char* f : {"indexOf", "lastIndexOf"}) {
    add(f, true, {K::kString, K::kString}, K::kInt);
    add(f, true, {K::kString, K::kString, K::kInt}, K::kInt);
  }
  add("substring", true, {K::kString, K::kInt}, K::kString);
  add("substring", true, {K::kString, K::kInt, K::kInt}, K::kString);
  add("replace", true, {K::kString, K::kString, K::kString}, K::kString);
  add("replace", true, {K::kString, K::kString, K::kString, K::kInt}, K::kString);
  add("split", true, {K::kString, K::kString}, K::kList);
  add("split", true, {K::kString, K::kString, K::kInt}, K::kList);
  add("join", true, {K::kList}, K::kString);
  add("join", true, {K::kList, K::kString}, K::kString);
  add("strings.quote", false, {K::kString}, K::kString);
  add("format", true, {K::kString, K::kList}, K::kString);
}

// The Kubernetes Quantity and Semver libraries.
void AddKubernetes(const AddOverload& add) {
  add("quantity", false, {K::kString}, K::kQuantity);
  add("isQuantity", false, {K::kString}, K::kBool);
  add("semver", false, {K::kString}, K::kSemver);
  add("semver", false, {K::kString, K::kBool}, K::kSemver);
  add("isSemver", false, {K::kString}, K::kBool);
  add("isSemver", false, {K::kString, K::kBool}, K::kBool);
  for (K k : {K::kQuantity, K::kSemver}) {
    add("compareTo", true, {k, k}, K::kInt);
    add("isGreaterThan", true, {k, k}, K::kBool);
    add("isLessThan", true, {k, k}, K::kBool);
  }
  add("add", true, {K::kQuantity, K::kQuantity}, K::kQuantity);
  add("add", true, {K::kQuantity, K::kInt}, K::kQuantity);
  add("sub", true, {K::kQuantity, K::kQuantity}, K::kQuantity);
  add("sub", true, {K::kQuantity, K::kInt}, K::kQuantity);
  add("asInteger", true, {K::kQuantity}, K::kInt);
  add("isInteger", true, {K::kQuantity}, K::kBool);
  add("asApproximateFloat", true, {K::kQuantity}, K::kDouble);
  add("sign", false, {K::kQuantity}, K::kInt);  // k8s.io/apiserver library/quantity.go: a global overload
  for (const char* f : {"major", "minor", "patch"}) add(f, true, {K::kSemver}, K::kInt);
}

// cel-go ext.Sets and the Kubernetes list library.
void AddListsAndSets(const AddOverload& add) {
  for (const char* f : {"sets.contains", "sets.equivalent", "sets.intersects"}) add(f, false, {K::kList, K::kList}, K::kBool);
  add("isSorted", true, {K::kList}, K::kBool);
  add("indexOf", true, {K::kList, K::kDyn}, K::kInt);
  add("lastIndexOf", true, {K::kList, K::kDyn}, K::kInt);
  for (const char* f : {"sum", "min", "max"}) add(f, true, {K::kList}, K::kDyn);
}

// cel-go OptionalTypes.
void AddOptionals(const AddOverload& add) {
  add("optional.of", false, {K::kDyn}, K::kOptional);
  add("optional.ofNonZeroValue", false, {K::kDyn}, K::kOptional);
  add("optional.none", false, {}, K::kOptional);
  add("hasValue", true, {K::kOptional}, K::kBool);
  add("value", true, {K::kOptional}, K::kDyn);
  add("orValue", true, {K::kOptional, K::kDyn}, K::kDyn);
  add("or", true, {K::kOptional, K::kOptional}, K::kOptional);
}

// cel-go ext.Lists (version 3) and the Kubernetes regex library.
void AddExtLists(const AddOverload& add) {
  add("slice", true, {K::kList, K::kInt, K::kInt}, K::kList);
  add("flatten", true, {K::kList}, K::kList);
  add("flatten", true, {K::kList, K::kInt}, K::kList);
  add("distinct", true, {K::kList}, K::kList);
  add("reverse", true, {K::kList}, K::kList);
  add("sort", true, {K::kList}, K::kList);
  add("lists.range", false, {K::kInt}, K::kList);
  add("find", true, {K::kString, K::kString}, K::kString);
  add("findAll", true, {K::kString, K::kString}, K::kList);
  add("findAll", true, {K::kString, K::kString, K::kInt}, K::kList);
}

const std::vector<Overload>& Overloads() {
  static const std::vector<Overload> kTable = [] {
    std::vector<Overload> t;
    AddOverload add = [&](const char* fn, bool member, std::vector<K> p, K r) {
      t.push_back({fn, member, std::move(p), r});
    };
    for (auto part : {AddOperators, AddConversions, AddStrings, AddKubernetes, AddListsAndSets, AddOptionals, AddExtLists}) {
      part(add);
    }
    return t;
  }();
  return kTable;
}

// Overloads grouped by function name, built once.
const std::unordered_map<std::string, std::vector<const Overload*>>& OverloadIndex() {
  static const auto kIndex = [] {
    std::unordered_map<std::string, std::vector<const Overload*>> idx;
    for (const auto& o : Overloads()) idx[o.fn].push_back(&o);
    return idx;
  }();
  return kIndex;
}

bool IsTypeIdent(const std::string& n) {
  static constexpr const char* kTypes[] = {"int",   "uint", "double",    "bool", "string",       "bytes",
                                           "list",  "map",  "null_type", "type", "optional_type"};
  for (const char* t : kTypes) {
    if (n == t) return true;
  }
  return false;
}

class Checker {
 public:
  explicit Checker(const Env& env) : env_(env) {}

  // Infers the type of `e` and records it by Expr::id.
  Type Check(const Expr& e) {
    Type t = CheckNode(e);
    if (e.id >= 0) {
      size_t i = static_cast<size_t>(e.id);
      if (types_.size() <= i) types_.resize(i + 1);
      types_[i] = t;
    }
    return t;
  }

  Type CheckNode(const Expr& e) {
    switch (e.kind) {
      case ExprKind::kConst:
        switch (e.constant.kind) {
          case ConstKind::kNull: return Of(K::kNull);
          case ConstKind::kBool: return Of(K::kBool);
          case ConstKind::kInt: return Of(K::kInt);
          case ConstKind::kUint: return Of(K::kUint);
          case ConstKind::kDouble: return Of(K::kDouble);
          case ConstKind::kString: return Of(K::kString);
          case ConstKind::kBytes: return Of(K::kBytes);
        }
        return Dyn();
      case ExprKind::kIdent: return Ident(e);
      case ExprKind::kSelect: return Select(e);
      case ExprKind::kCall: return Call(e);
      case ExprKind::kList: {
        std::optional<Type> elem;
        for (size_t i = 0; i < e.args.size(); ++i) {
          Type t = Check(*e.args[i]);
          if (std::find(e.optional_indices.begin(), e.optional_indices.end(), static_cast<int32_t>(i)) !=
              e.optional_indices.end()) {
            if (t.kind != K::kOptional && t.kind != K::kDyn) {
              Error(e.args[i]->offset, "expected type 'optional_type' but found '" + t.ToString() + "'");
            }
            t = t.kind == K::kOptional && t.elem ? *t.elem : Dyn();
          }
          elem = elem ? Join(*elem, t) : t;
        }
        return elem ? Type::ListOf(*elem) : Type::Of(K::kList);
      }
      case ExprKind::kMap: {
        std::optional<Type> kt, vt;
        for (const auto& en : e.entries) {
          Type k = Check(*en.key);
          Type v = Check(*en.value);
          if (en.optional) {
            if (v.kind != K::kOptional && v.kind != K::kDyn) {
              Error(en.value->offset, "expected type 'optional_type' but found '" + v.ToString() + "'");
            }
            v = v.kind == K::kOptional && v.elem ? *v.elem : Dyn();
          }
          if (k.kind != K::kDyn && k.kind != K::kString && k.kind != K::kInt && k.kind != K::kUint && k.kind != K::kBool) {
            Error(en.key->offset, "unsupported map key type: " + k.ToString());
          }
          kt = kt ? Join(*kt, k) : k;
          vt = vt ? Join(*vt, v) : v;
        }
        return kt ? Type::MapOf(*kt, *vt) : Type::Of(K::kMap);
      }
      case ExprKind::kStruct:
        Error(e.offset, "message construction is not supported (undeclared message type '" + e.name + "')");
        for (const auto& f : e.fields) Check(*f.value);
        return Dyn();
      case ExprKind::kComprehension: return Comprehension(e);
    }
    return Dyn();
  }

  std::vector<Diagnostic>& errors() { return errors_; }
  /// The builtin resolved for each call node, by Expr::id.
  std::vector<FunctionId> TakeCalls() { return std::move(calls_); }
  /// The type inferred for each node, by Expr::id.
  std::vector<Type> TakeTypes() { return std::move(types_); }

  void Error(int32_t offset, std::string msg) { errors_.push_back({offset, 0, 0, std::move(msg)}); }

 private:
  const Type* Local(const std::string& n) const {
    for (size_t i = scopes_.size(); i-- > 0;) {
      if (scopes_[i].first == n) return &scopes_[i].second;
    }
    return nullptr;
  }

  Type Ident(const Expr& e) {
    if (const Type* t = Local(e.name)) return *t;
    if (const Type* t = env_.Lookup(e.name)) return *t;
    if (IsTypeIdent(e.name)) return Of(K::kType);
    Error(e.offset, "undeclared reference to '" + e.name + "' (in container '')");
    return Dyn();
  }

  Type Select(const Expr& e) {
    // Qualified variable names declared as one identifier ("a.b").
    if (e.operand->kind == ExprKind::kIdent && Local(e.operand->name) == nullptr &&
        env_.Lookup(e.operand->name) == nullptr) {
      if (const Type* t = env_.Lookup(e.operand->name + "." + e.name)) return e.test_only ? Of(K::kBool) : *t;
    }
    Type obj = Check(*e.operand);
    Type out = Dyn();
    bool wrap = false;
    if (obj.kind == K::kOptional) {
      // Optional chaining: select on the value, the result stays optional.
      obj = obj.elem ? *obj.elem : Dyn();
      wrap = true;
    }
    switch (obj.kind) {
      case K::kDevice:
        if (e.name == "driver") {
          out = Of(K::kString);
        } else if (e.name == "attributes") {
          out = Type::MapOf(Of(K::kString), Type::MapOf(Of(K::kString), Dyn()));
        } else if (e.name == "capacity") {
          out = Type::MapOf(Of(K::kString), Type::MapOf(Of(K::kString), Of(K::kQuantity)));
        } else if (e.name == "allowMultipleAllocations" && env_.allow_multiple_allocations()) {
          out = Of(K::kBool);
        } else {
          Error(e.offset, "undefined field '" + e.name + "'");
        }
        break;
      case K::kMap:
        if (obj.key && obj.key->kind != K::kString && obj.key->kind != K::kDyn) {
          Error(e.offset, "type '" + obj.ToString() + "' does not support field selection");
        }
        out = obj.elem ? *obj.elem : Dyn();
        break;
      case K::kDyn: break;
      default:
        Error(e.offset, "type '" + obj.ToString() + "' does not support field selection");
    }
    if (e.test_only) return Of(K::kBool);
    return wrap ? Type::OptionalOf(out) : out;
  }

  std::string Sig(const std::vector<Type>& ts) {
    std::string s = "(";
    for (size_t i = 0; i < ts.size(); ++i) s += (i ? ", " : "") + ts[i].ToString();
    return s + ")";
  }

  Type NoOverload(const Expr& e, const std::string& fn, const std::vector<Type>& ts) {
    Error(e.offset, "found no matching overload for '" + fn + "' applied to '" + Sig(ts) + "'");
    return Dyn();
  }

  Type Call(const Expr& e) {
    std::string fn = e.name;
    bool member = e.operand != nullptr;
    // Namespaced functions (strings.quote, sets.contains) parse as receiver calls.
    if (member && e.operand->kind == ExprKind::kIdent && Local(e.operand->name) == nullptr &&
        env_.Lookup(e.operand->name) == nullptr &&
        (e.operand->name == "strings" || e.operand->name == "sets" || e.operand->name == "lists" ||
         e.operand->name == "optional")) {
      fn = e.operand->name + "." + fn;
      member = false;
    }
    Resolve(e.id, internal::ResolveFunction(fn, member));
    std::vector<Type> ts;
    if (member) ts.push_back(Check(*e.operand));
    for (const auto& a : e.args) ts.push_back(Check(*a));
    if (auto t = LogicCall(e, fn, ts)) return *t;
    if (auto t = OptionalCall(e, fn, member, ts)) return *t;
    if (auto t = ContainerCall(e, fn, member, ts)) return *t;
    return OverloadCall(e, fn, member, ts);
  }

  // &&, ||, ?: and equality.
  std::optional<Type> LogicCall(const Expr& e, const std::string& fn, const std::vector<Type>& ts) {
    if (fn == "_&&_" || fn == "_||_" || fn == "@not_strictly_false") {
      for (const auto& t : ts) {
        if (t.kind != K::kBool && t.kind != K::kDyn) return NoOverload(e, fn, ts);
      }
      return Of(K::kBool);
    }
    if (fn == "_?_:_") {
      if (ts[0].kind != K::kBool && ts[0].kind != K::kDyn) return NoOverload(e, fn, ts);
      if (!Compatible(ts[1], ts[2]) && ts[1].kind != K::kNull && ts[2].kind != K::kNull) return NoOverload(e, fn, ts);
      return Join(ts[1], ts[2]);
    }
    if (fn == "_==_" || fn == "_!=_") {
      bool ok = Compatible(ts[0], ts[1]) || ts[0].kind == K::kNull || ts[1].kind == K::kNull;
      if (!ok) return NoOverload(e, fn, ts);
      return Of(K::kBool);
    }
    return std::nullopt;
  }

  // Optional selections and the functions whose result type follows an optional's.
  std::optional<Type> OptionalCall(const Expr& e, const std::string& fn, bool member, const std::vector<Type>& ts) {
    if (fn == "_?._" || fn == "_[?_]") return OptionalSelect(e, fn, ts);
    if (fn == "_[_]" && ts[0].kind == K::kOptional) return Type::OptionalOf(Dyn());
    if (member && fn == "value" && ts.size() == 1 && ts[0].kind == K::kOptional) return ts[0].elem ? *ts[0].elem : Dyn();
    if (member && fn == "orValue" && ts.size() == 2 && ts[0].kind == K::kOptional) {
      Type inner = ts[0].elem ? *ts[0].elem : Dyn();
      if (!Compatible(inner, ts[1])) return NoOverload(e, fn, ts);
      return Join(inner, ts[1]);
    }
    if (!member && fn == "optional.of" && ts.size() == 1) return Type::OptionalOf(ts[0]);
    return std::nullopt;
  }

  Type OptionalSelect(const Expr& e, const std::string& fn, const std::vector<Type>& ts) {
    Type c = ts[0].kind == K::kOptional ? (ts[0].elem ? *ts[0].elem : Dyn()) : ts[0];
    if (c.kind == K::kMap) return Type::OptionalOf(c.elem ? *c.elem : Dyn());
    if (fn == "_[?_]" && c.kind == K::kList) return Type::OptionalOf(c.elem ? *c.elem : Dyn());
    if (c.kind == K::kDyn) return Type::OptionalOf(Dyn());
    if (c.kind == K::kDevice && fn == "_?._" && e.args.size() == 2 && e.args[1]->kind == ExprKind::kConst) {
      const std::string& f = e.args[1]->constant.s;
      if (f == "driver") return Type::OptionalOf(Of(K::kString));
      if (f == "attributes" || f == "capacity" || (f == "allowMultipleAllocations" && env_.allow_multiple_allocations())) {
        return Type::OptionalOf(Dyn());
      }
      Error(e.offset, "undefined field '" + f + "'");
      return Dyn();
    }
    return NoOverload(e, fn, ts);
  }

  // Indexing, membership, list concatenation and the functions typed by their arguments.
  std::optional<Type> ContainerCall(const Expr& e, const std::string& fn, bool member, const std::vector<Type>& ts) {
    if (fn == "_[_]") return IndexCall(e, fn, ts);
    if (fn == "@in") return InCall(e, fn, ts);
    if (fn == "_+_" && ts[0].kind == K::kList && ts[1].kind == K::kList) {
      if (!Compatible(ts[0], ts[1])) return NoOverload(e, fn, ts);
      return Join(ts[0], ts[1]);
    }
    if (fn == "_+_" && ((ts[0].kind == K::kList && ts[1].kind == K::kDyn) || (ts[1].kind == K::kList && ts[0].kind == K::kDyn))) {
      return Type::ListOf(Dyn());
    }
    if (fn == "cel.@mapInsert") return ts.empty() ? Dyn() : ts[0];
    if (!member && fn == "dyn" && ts.size() == 1) return Dyn();
    if (!member && fn == "type" && ts.size() == 1) return Of(K::kType);
    return std::nullopt;
  }

  Type IndexCall(const Expr& e, const std::string& fn, const std::vector<Type>& ts) {
    const Type& c = ts[0];
    const Type& k = ts[1];
    if (c.kind == K::kList) {
      if (k.kind != K::kInt && k.kind != K::kDyn) return NoOverload(e, fn, ts);
      return c.elem ? *c.elem : Dyn();
    }
    if (c.kind == K::kMap) {
      if (c.key && !Compatible(*c.key, k) && !(IsNumeric(c.key->kind) && IsNumeric(k.kind))) return NoOverload(e, fn, ts);
      return c.elem ? *c.elem : Dyn();
    }
    if (c.kind == K::kDyn) return Dyn();
    return NoOverload(e, fn, ts);
  }

  Type InCall(const Expr& e, const std::string& fn, const std::vector<Type>& ts) {
    const Type& c = ts[1];
    if (c.kind == K::kList) {
      if (c.elem && !Compatible(*c.elem, ts[0])) return NoOverload(e, fn, ts);
      return Of(K::kBool);
    }
    if (c.kind == K::kMap) {
      if (c.key && !Compatible(*c.key, ts[0]) && !(IsNumeric(c.key->kind) && IsNumeric(ts[0].kind))) {
        return NoOverload(e, fn, ts);
      }
      return Of(K::kBool);
    }
    if (c.kind == K::kDyn) return Of(K::kBool);
    return NoOverload(e, fn, ts);
  }

  // Table-driven overload resolution.
  Type OverloadCall(const Expr& e, const std::string& fn, bool member, const std::vector<Type>& ts) {
    const auto& index = OverloadIndex();
    auto found = index.find(fn);
    if (found == index.end()) {
      Error(e.offset, "undeclared reference to '" + fn + "' (in container '')");
      return Dyn();
    }
    std::optional<K> result;
    bool ambiguous = false;
    for (const Overload* op : found->second) {
      const Overload& o = *op;
      if (o.member != member || o.params.size() != ts.size()) continue;
      bool match = true;
      for (size_t i = 0; i < ts.size() && match; ++i) {
        K p = o.params[i];
        match = p == K::kDyn || ts[i].kind == K::kDyn || ts[i].kind == p;
      }
      if (!match) continue;
      if (result && *result != o.result) ambiguous = true;
      result = o.result;
    }
    if (!result) return NoOverload(e, fn, ts);
    if (ambiguous || *result == K::kDyn) return Dyn();
    if (*result == K::kList) {
      if (fn == "split" || fn == "findAll") return Type::ListOf(Of(K::kString));
      if ((fn == "slice" || fn == "distinct" || fn == "reverse" || fn == "sort") && !ts.empty() &&
          ts[0].kind == K::kList) {
        return ts[0];
      }
      if (fn == "lists.range") return Type::ListOf(Of(K::kInt));
      return Type::ListOf(Dyn());
    }
    return Of(*result);
  }

  // Records the builtin a call node calls, for the evaluator.
  void Resolve(int64_t id, FunctionId f) {
    if (id < 0) return;
    size_t i = static_cast<size_t>(id);
    if (calls_.size() <= i) calls_.resize(i + 1, kUnknownFunction);
    calls_[i] = f;
  }

  Type Comprehension(const Expr& e) {
    Type range = Check(*e.iter_range);
    Type v1 = Dyn(), v2 = Dyn();
    bool two = !e.iter_var2.empty();
    switch (range.kind) {
      case K::kList:
        if (two) {
          v1 = Of(K::kInt);
          v2 = range.elem ? *range.elem : Dyn();
        } else {
          v1 = range.elem ? *range.elem : Dyn();
        }
        break;
      case K::kMap:
        v1 = range.key ? *range.key : Dyn();
        if (two) v2 = range.elem ? *range.elem : Dyn();
        break;
      case K::kDyn: break;
      default:
        Error(e.iter_range->offset, "expression of type '" + range.ToString() + "' cannot be range of a comprehension (must be list, map, or dynamic)");
    }
    Type init = Check(*e.accu_init);
    scopes_.emplace_back(e.accu_var, init);
    size_t accu_slot = scopes_.size() - 1;
    scopes_.emplace_back(e.iter_var, v1);
    if (two) scopes_.emplace_back(e.iter_var2, v2);
    Type cond = Check(*e.loop_cond);
    if (cond.kind != K::kBool && cond.kind != K::kDyn) Error(e.loop_cond->offset, "loop condition must be bool");
    Type step = Check(*e.loop_step);
    scopes_.resize(accu_slot + 1);
    scopes_[accu_slot].second = Compatible(init, step) ? Join(init, step) : Dyn();
    if (init.kind == K::kList && step.kind == K::kList) scopes_[accu_slot].second = step;
    Type result = Check(*e.result);
    scopes_.resize(accu_slot);
    return result;
  }

  const Env& env_;
  std::vector<Diagnostic> errors_;
  std::vector<std::pair<std::string, Type>> scopes_;
  std::vector<FunctionId> calls_;
  std::vector<Type> types_;
};

// ---- DRA reference extraction ----

using RefKey = std::tuple<int, std::string, std::string>;  // kind, domain-key, name

bool IsDeviceField(const Expr& e, const char* field) {
  return e.kind == ExprKind::kSelect && !e.test_only && e.name == field && e.operand->kind == ExprKind::kIdent &&
         e.operand->name == "device";
}

const std::string* StringLit(const Expr& e) {
  if (e.kind == ExprKind::kConst && e.constant.kind == ConstKind::kString) return &e.constant.s;
  return nullptr;
}

// A variable bound by cel.bind (or shadowing one): `valid` when it names a domain map.
struct Alias {
  std::string name;
  bool valid = false;
  int kind = 0;
  std::string domain;
  bool is_driver = false;
};
using Aliases = std::vector<Alias>;

// A domain map expression: device.attributes[D] / device.capacity[D] (or .D), or a cel.bind
// variable holding one. Fills kind and domain.
bool DomainMap(const Expr& e, int& kind, std::string& domain, bool& is_driver, const Aliases& al) {
  if (e.kind == ExprKind::kIdent) {
    for (size_t i = al.size(); i-- > 0;) {
      if (al[i].name == e.name) {
        if (!al[i].valid) return false;
        kind = al[i].kind;
        domain = al[i].domain;
        is_driver = al[i].is_driver;
        return true;
      }
    }
    return false;
  }
  const Expr* base = nullptr;
  const Expr* dom = nullptr;
  std::string field_domain;
  if (e.kind == ExprKind::kCall && e.name == "_[_]" && !e.operand && e.args.size() == 2) {
    base = e.args[0].get();
    dom = e.args[1].get();
  } else if (e.kind == ExprKind::kSelect && !e.test_only) {
    base = e.operand.get();
    field_domain = e.name;
  } else {
    return false;
  }
  if (IsDeviceField(*base, "attributes")) kind = 0;
  else if (IsDeviceField(*base, "capacity")) kind = 1;
  else return false;
  is_driver = false;
  if (dom == nullptr) {
    domain = field_domain;
    return true;
  }
  if (const std::string* s = StringLit(*dom)) {
    domain = *s;
    return true;
  }
  if (IsDeviceField(*dom, "driver")) {
    is_driver = true;
    domain.clear();
    return true;
  }
  return false;
}

struct RefMatch {
  int kind = 0;
  std::string domain;
  bool is_driver = false;
  std::string name;
  bool presence = false;
  bool safe = false;  // an optional read (.? / [?]): cannot fail with "no such key"
  int32_t offset = 0;
};

// Matches a read (R.N, R[N]) or a presence test (has(R.N), N in R).
bool MatchRef(const Expr& e, RefMatch& m, const Aliases& al) {
  if (e.kind == ExprKind::kSelect) {
    if (!DomainMap(*e.operand, m.kind, m.domain, m.is_driver, al)) return false;
    m.name = e.name;
    m.presence = e.test_only;
    m.offset = e.offset;
    return true;
  }
  if (e.kind == ExprKind::kCall && !e.operand && e.args.size() == 2) {
    if (e.name == "_[_]") {
      const std::string* n = StringLit(*e.args[1]);
      if (n == nullptr || !DomainMap(*e.args[0], m.kind, m.domain, m.is_driver, al)) return false;
      m.name = *n;
      m.presence = false;
      m.offset = e.offset;
      return true;
    }
    if (e.name == "_?._" || e.name == "_[?_]") {
      const std::string* n = StringLit(*e.args[1]);
      if (n == nullptr || !DomainMap(*e.args[0], m.kind, m.domain, m.is_driver, al)) return false;
      m.name = *n;
      m.presence = false;
      m.safe = true;
      m.offset = e.offset;
      return true;
    }
    if (e.name == "@in") {
      const std::string* n = StringLit(*e.args[0]);
      if (n == nullptr || !DomainMap(*e.args[1], m.kind, m.domain, m.is_driver, al)) return false;
      m.name = *n;
      m.presence = true;
      m.offset = e.offset;
      return true;
    }
  }
  return false;
}

RefKey KeyOf(const RefMatch& m) { return {m.kind, m.is_driver ? std::string("\x01driver") : m.domain, m.name}; }

void Flatten(const Expr& e, const char* op, std::vector<const Expr*>& out) {
  if (e.kind == ExprKind::kCall && e.name == op && !e.operand && e.args.size() == 2) {
    Flatten(*e.args[0], op, out);
    Flatten(*e.args[1], op, out);
  } else {
    out.push_back(&e);
  }
}

// Presence tests that hold when `e` is true (positive) or when it is false (negated).
void Tests(const Expr& e, bool positive, std::set<RefKey>& out, const Aliases& al) {
  RefMatch m;
  if (MatchRef(e, m, al) && m.presence) {
    if (positive) out.insert(KeyOf(m));
    return;
  }
  if (e.kind == ExprKind::kCall && !e.operand) {
    if (e.name == "!_" && e.args.size() == 1) {
      Tests(*e.args[0], !positive, out, al);
    } else if (e.name == "_&&_" && positive) {
      Tests(*e.args[0], true, out, al);
      Tests(*e.args[1], true, out, al);
    } else if (e.name == "_||_" && !positive) {
      Tests(*e.args[0], false, out, al);
      Tests(*e.args[1], false, out, al);
    }
  }
}

class RefCollector {
 public:
  RefCollector(const Ast& ast, std::string driver) : ast_(ast), driver_(std::move(driver)) {}

  void Walk(const Expr& e, const std::set<RefKey>& guards) {
    RefMatch m;
    if (MatchRef(e, m, aliases_)) {
      AttributeReference r;
      r.kind = m.kind == 0 ? AttributeReference::Kind::kAttribute : AttributeReference::Kind::kCapacity;
      r.domain_is_driver = m.is_driver;
      r.domain = m.is_driver ? driver_ : m.domain;
      r.name = m.name;
      r.presence_test = m.presence;
      r.guarded = m.presence || m.safe || guards.count(KeyOf(m)) > 0;
      SourcePosition p = PositionOf(ast_.source, m.offset);
      r.line = p.line;
      r.column = p.column;
      refs.push_back(std::move(r));
      // The domain expression itself (device.driver) holds no further references.
      return;
    }
    if (e.kind == ExprKind::kCall && !e.operand && (e.name == "_&&_" || e.name == "_||_")) {
      bool is_and = e.name == "_&&_";
      std::vector<const Expr*> parts;
      Flatten(e, e.name.c_str(), parts);
      std::set<RefKey> g = guards;
      for (const Expr* p : parts) Tests(*p, is_and, g, aliases_);
      for (const Expr* p : parts) Walk(*p, g);
      return;
    }
    if (e.kind == ExprKind::kCall && !e.operand && e.name == "_?_:_" && e.args.size() == 3) {
      Walk(*e.args[0], guards);
      std::set<RefKey> then_g = guards, else_g = guards;
      Tests(*e.args[0], true, then_g, aliases_);
      Tests(*e.args[0], false, else_g, aliases_);
      Walk(*e.args[1], then_g);
      Walk(*e.args[2], else_g);
      return;
    }
    auto walk = [&](const ExprPtr& c) {
      if (c) Walk(*c, guards);
    };
    if (e.kind == ExprKind::kComprehension) {
      // cel.bind(v, init, body) expands to a comprehension over an empty list whose accumulator
      // is v: a bound domain map makes `v.name` / `'name' in v` references too.
      walk(e.iter_range);
      walk(e.accu_init);
      size_t mark = aliases_.size();
      Alias accu{e.accu_var};
      accu.valid = DomainMap(*e.accu_init, accu.kind, accu.domain, accu.is_driver, aliases_);
      aliases_.push_back(accu);
      aliases_.push_back(Alias{e.iter_var});
      if (!e.iter_var2.empty()) aliases_.push_back(Alias{e.iter_var2});
      walk(e.loop_cond);
      walk(e.loop_step);
      walk(e.result);
      aliases_.resize(mark);
      return;
    }
    walk(e.operand);
    for (const auto& a : e.args) walk(a);
    for (const auto& en : e.entries) {
      walk(en.key);
      walk(en.value);
    }
    for (const auto& f : e.fields) walk(f.value);
    walk(e.iter_range);
    walk(e.accu_init);
    walk(e.loop_cond);
    walk(e.loop_step);
    walk(e.result);
  }

  std::vector<AttributeReference> refs;

 private:
  const Ast& ast_;
  std::string driver_;
  Aliases aliases_;
};

// The driver required by a top-level conjunct `device.driver == '...'`, or empty.
std::string RequiredDriver(const Expr& root) {
  std::vector<const Expr*> parts;
  Flatten(root, "_&&_", parts);
  for (const Expr* p : parts) {
    if (p->kind == ExprKind::kCall && p->name == "_==_" && p->args.size() == 2) {
      for (int i = 0; i < 2; ++i) {
        if (IsDeviceField(*p->args[i], "driver")) {
          if (const std::string* s = StringLit(*p->args[1 - i])) return *s;
        }
      }
    }
  }
  return "";
}

}  // namespace

Result<CheckedExpr> Check(const Ast& ast, const Env& env) {
  if (!ast.root) return Status::InvalidArgument("empty expression");
  Checker c(env);
  Type t = c.Check(*ast.root);
  if (c.errors().empty() && env.require_bool() && t.kind != K::kBool && t.kind != K::kDyn) {
    // Kubernetes' wording (dynamic-resource-allocation cel/compile.go).
    c.Error(ast.root->offset, "must evaluate to bool or the unknown type, not " + t.ToString());
  }
  if (!c.errors().empty()) {
    auto errs = c.errors();
    std::stable_sort(errs.begin(), errs.end(), [](const Diagnostic& a, const Diagnostic& b) { return a.offset < b.offset; });
    return Status::InvalidArgument(FormatDiagnostics(ast.source, errs));
  }
  CheckedExpr out;
  out.ast = ast;
  out.result_type = t;
  out.regexes = PrecompileRegexes(*ast.root);
  auto calls = std::make_shared<ResolvedCalls>();
  calls->by_id = c.TakeCalls();
  out.calls = std::move(calls);
  out.types = std::make_shared<const std::vector<Type>>(c.TakeTypes());
  if (env.Lookup("device") != nullptr && env.Lookup("device")->kind == K::kDevice) {
    RefCollector rc(ast, RequiredDriver(*ast.root));
    rc.Walk(*ast.root, {});
    out.references = std::move(rc.refs);
  }
  return out;
}

Result<CheckedExpr> Compile(std::string_view source, const Env& env, const ParseOptions& options) {
  auto ast = Parse(source, options);
  if (!ast.ok()) return ast.status();
  return Check(*ast, env);
}

Result<CheckedExpr> CompileSelector(std::string_view source, const DraEnvOptions& options) {
  return Compile(source, Env::Dra(options));
}

}  // namespace draguard::cel
