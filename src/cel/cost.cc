// Compile-time cost estimate (see include/draguard/cel/cost.h).
//
// A port of the rules of cel-go checker/cost.go (coster: cost, costIdent, costSelect, costCall,
// functionCost, costCreateList/Map, costComprehension, costBind, computeSize, the path and local
// variable tracking) over our checked tree, with Kubernetes' size estimator for `device`
// (dynamic-resource-allocation/cel compile.go, sizeEstimator) and the call estimates of
// Kubernetes' apiserver/pkg/cel/library/cost.go and cel-go ext/sets.go. Overloads are not
// recorded by our checker, so the candidate overloads of an operator are derived from the operand
// types as cel-go's overload resolution would pick them (a `dyn` operand admits every overload).
#include "draguard/cel/cost.h"

#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "builtins.h"
#include "utf8.h"

namespace draguard::cel {
namespace {

using K = Type::Kind;
constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
// cel-go common/cost.go.
constexpr double kStringTraversalCostFactor = 0.1;
constexpr double kRegexStringLengthCostFactor = 0.25;
constexpr uint64_t kSelectAndIdentCost = 1;
constexpr uint64_t kListCreateBaseCost = 10;
constexpr uint64_t kMapCreateBaseCost = 30;
constexpr uint64_t kStructCreateBaseCost = 40;
// k8s.io/api/resource/v1 limits the DRA environment declares as sizes.
constexpr uint64_t kMaxAttributesAndCapacities = 32;  // ResourceSliceMaxAttributesAndCapacitiesPerDevice
constexpr uint64_t kMaxDomainLength = 63;             // DeviceMaxDomainLength
constexpr uint64_t kMaxIdLength = 32;                 // DeviceMaxIDLength
constexpr uint64_t kMaxDriverLength = 63;             // DriverNameMaxLength
constexpr uint64_t kMaxAttributeValueLength = 64;     // DeviceAttributeMaxValueLength

uint64_t AddSat(uint64_t a, uint64_t b) { return b > 0 && a > kMax - b ? kMax : a + b; }
uint64_t MulSat(uint64_t a, uint64_t b) { return b != 0 && a > kMax / b ? kMax : a * b; }
// cel-go multiplyByCostFactor: the product rounded up, saturating.
uint64_t MulFactor(uint64_t x, double f) {
  double xf = static_cast<double>(x);
  if (xf > 0 && f > 0 && xf > static_cast<double>(kMax) / f) return kMax;
  double c = std::ceil(xf * f);
  if (c >= std::ldexp(1.0, 64)) return kMax;
  return static_cast<uint64_t>(c);
}

struct Size {
  uint64_t min = 0, max = 0;
  Size Add(Size o) const { return {AddSat(min, o.min), AddSat(max, o.max)}; }
  Size Mul(Size o) const { return {MulSat(min, o.min), MulSat(max, o.max)}; }
  Size Union(Size o) const { return {std::min(min, o.min), std::max(max, o.max)}; }
};
constexpr Size kUnknownSize{0, kMax};

struct Cost {
  uint64_t min = 0, max = 0;
  Cost Add(Cost o) const { return {AddSat(min, o.min), AddSat(max, o.max)}; }
  Cost Mul(Cost o) const { return {MulSat(min, o.min), MulSat(max, o.max)}; }
  Cost Union(Cost o) const { return {std::min(min, o.min), std::max(max, o.max)}; }
};
Cost Fixed(uint64_t c) { return {c, c}; }
Cost ByFactor(Size s, double f) { return {MulFactor(s.min, f), MulFactor(s.max, f)}; }
Cost ByCost(Size s, Cost c) { return {MulSat(s.min, c.min), MulSat(s.max, c.max)}; }

// entrySizeEstimate: the key / index and value sizes of a container.
struct EntrySize {
  bool list = false;
  Size key, val;
};
std::optional<EntrySize> UnionEntry(const std::optional<EntrySize>& a, const std::optional<EntrySize>& b) {
  if (!a || !b) return std::nullopt;
  return EntrySize{a->list, a->key.Union(b->key), a->val.Union(b->val)};
}

// The declared types of the DRA `device` variable, as far as sizes go (compile.go, newCompiler).
enum class Decl : uint8_t { kDevice, kDriver, kMultiAlloc, kOuterAttrs, kInnerAttrs, kAttr, kOuterCaps, kInnerCaps,
                            kQuantity, kDomain, kId };

uint64_t MaxElements(Decl d) {
  switch (d) {
    case Decl::kDevice: return 0;
    case Decl::kDriver: return kMaxDriverLength;
    case Decl::kMultiAlloc: return 1;
    case Decl::kOuterAttrs:
    case Decl::kInnerAttrs:
    case Decl::kOuterCaps:
    case Decl::kInnerCaps: return kMaxAttributesAndCapacities;
    case Decl::kAttr: return kMaxAttributeValueLength;
    case Decl::kQuantity: return 0;
    case Decl::kDomain: return kMaxDomainLength;
    case Decl::kId: return kMaxIdLength;
  }
  return 0;
}

// Kubernetes' sizeEstimator.EstimateSize: walks the path through the declared types.
std::optional<Size> DeviceSize(const std::vector<std::string>& path) {
  if (path.empty() || path[0] != "device") return std::nullopt;
  Decl cur = Decl::kDevice;
  for (size_t i = 1; i < path.size(); ++i) {
    const std::string& n = path[i];
    bool elems = n == "@items" || n == "@values";
    bool keys = n == "@keys";
    switch (cur) {
      case Decl::kDevice:
        if (n == "driver") cur = Decl::kDriver;
        else if (n == "attributes") cur = Decl::kOuterAttrs;
        else if (n == "capacity") cur = Decl::kOuterCaps;
        else if (n == "allowMultipleAllocations") cur = Decl::kMultiAlloc;
        else return std::nullopt;
        break;
      case Decl::kOuterAttrs:
        if (elems) cur = Decl::kInnerAttrs;
        else if (keys) cur = Decl::kDomain;
        else return std::nullopt;  // a field of the outer map: its elements are maps, not attributes
        break;
      case Decl::kInnerAttrs:
        if (keys) cur = Decl::kId;
        else cur = Decl::kAttr;  // elements, or any field name: every attribute has the same bound
        break;
      case Decl::kOuterCaps:
        if (elems) cur = Decl::kInnerCaps;
        else if (keys) cur = Decl::kDomain;
        else return std::nullopt;
        break;
      case Decl::kInnerCaps:
        if (elems) cur = Decl::kQuantity;
        else if (keys) cur = Decl::kId;
        else return std::nullopt;
        break;
      default: return std::nullopt;
    }
  }
  return Size{0, MaxElements(cur)};
}

bool IsScalar(const Type& t) {
  switch (t.kind) {
    case K::kBool:
    case K::kDouble:
    case K::kInt:
    case K::kUint: return true;
    case K::kOptional: return t.elem && IsScalar(*t.elem);
    default: return false;
  }
}

bool IsAccumulator(const std::vector<std::string>& path) {
  return !path.empty() && (path[0] == "@result" || path[0] == "__result__");
}

struct LocalVar {
  std::vector<std::string> path;
  std::optional<Size> size;
  std::optional<EntrySize> entry;
};

// How one candidate overload of a call is estimated.
enum class Est : uint8_t {
  kConstant,        // O(1): 1 plus the arguments
  kLogical,         // && / ||
  kConditional,     // ?:
  kEquality,        // ==, != and string / bytes ordering
  kAddSized,        // string / bytes concatenation
  kAddList,         // list concatenation
  kInList,          // x in list
  kIndexList,       // list[i]
  kIndexMap,        // map[k]
  kMatches,         // s.matches(re)
  kContains,        // s.contains(t)
  kStartsEnds,      // startsWith / endsWith
  kStringToBytes,   // bytes(s)
  kBytesToString,   // string(b)
  kFormat,          // s.format(list)
  kQuote,           // strings.quote(s)
  kK8sTraversal,    // isSorted, sum, min, max, indexOf, lastIndexOf (Kubernetes)
  kK8sStringCopy,   // lowerAscii, upperAscii, substring, trim (Kubernetes)
  kK8sReplace,      // replace (Kubernetes)
  kK8sSplit,        // split (Kubernetes)
  kK8sJoin,         // join (Kubernetes)
  kK8sFind,         // find, findAll (Kubernetes)
  kSets1,           // sets.contains, sets.intersects (cel-go ext.Sets, factor 1)
  kSets2,           // sets.equivalent (factor 2)
};

// Whether an operand of type `t` may be passed where `want` is declared.
bool Admits(const Type& t, K want) { return t.kind == K::kDyn || t.kind == want; }
bool BothAdmit(const Type& a, const Type& b, K want) { return Admits(a, want) && Admits(b, want); }

class Coster {
 public:
  explicit Coster(const CheckedExpr& ce) : ce_(ce) {}

  Cost Of(const Expr* e) {
    if (e == nullptr) return {};
    switch (e->kind) {
      case ExprKind::kConst: return {};
      case ExprKind::kIdent: return Ident(*e);
      case ExprKind::kSelect: return Select(*e);
      case ExprKind::kCall: return Call(*e);
      case ExprKind::kList: return List(*e);
      case ExprKind::kMap: return Map(*e);
      case ExprKind::kStruct: {
        Cost sum;
        for (const auto& f : e->fields) sum = sum.Add(Of(f.value.get()));
        return sum.Add(Fixed(kStructCreateBaseCost));
      }
      case ExprKind::kComprehension: return IsBind(*e) ? Bind(*e) : Comprehension(*e);
    }
    return {};
  }

 private:
  const Type& TypeOf(const Expr& e) const {
    static const Type kDynType;
    if (ce_.types == nullptr || e.id < 0 || static_cast<size_t>(e.id) >= ce_.types->size()) return kDynType;
    return (*ce_.types)[static_cast<size_t>(e.id)];
  }

  LocalVar* Local(const std::string& name) {
    auto it = locals_.find(name);
    if (it == locals_.end() || it->second.empty()) return nullptr;
    return &it->second.back();
  }
  void Push(const std::string& name, LocalVar v) { locals_[name].push_back(std::move(v)); }
  void Pop(const std::string& name) {
    auto it = locals_.find(name);
    if (it != locals_.end() && !it->second.empty()) it->second.pop_back();
  }

  std::vector<std::string> PathOf(const Expr& e) {
    if (e.kind == ExprKind::kIdent) {
      if (LocalVar* v = Local(e.name)) return v->path;
    }
    auto it = paths_.find(e.id);
    return it == paths_.end() ? std::vector<std::string>{} : it->second;
  }
  void SetPath(const Expr& e, std::vector<std::string> p) { paths_[e.id] = std::move(p); }
  void SetSize(const Expr& e, const std::optional<Size>& s) {
    if (s) sizes_[e.id] = *s;
  }
  void SetEntry(const Expr& e, const std::optional<EntrySize>& s) {
    if (s) entries_[e.id] = *s;
  }

  // computeExprSize: literals and container literals.
  static std::optional<Size> ExprSize(const Expr& e) {
    uint64_t v = 0;
    switch (e.kind) {
      case ExprKind::kConst:
        switch (e.constant.kind) {
          case ConstKind::kString: v = internal::CodePoints(e.constant.s); break;
          case ConstKind::kBytes: v = e.constant.s.size(); break;
          default: v = 1; break;
        }
        break;
      case ExprKind::kList: v = e.args.size(); break;
      case ExprKind::kMap: v = e.entries.size(); break;
      default: return std::nullopt;
    }
    return Size{v, v};
  }

  // computeSize.
  std::optional<Size> SizeOf(const Expr& e) {
    if (auto it = sizes_.find(e.id); it != sizes_.end()) return it->second;
    if (auto s = ExprSize(e)) return s;
    std::vector<std::string> path = PathOf(e);
    if (!IsAccumulator(path)) {
      if (auto s = DeviceSize(path)) {
        sizes_[e.id] = *s;
        return s;
      }
    }
    if (IsScalar(TypeOf(e))) return Size{1, 1};
    if (e.kind == ExprKind::kIdent) {
      if (LocalVar* v = Local(e.name); v != nullptr && v->size) return v->size;
    }
    return std::nullopt;
  }
  Size SizeOrUnknown(const Expr& e) { return SizeOf(e).value_or(kUnknownSize); }

  std::optional<EntrySize> EntryOf(const Expr& e) {
    if (auto it = entries_.find(e.id); it != entries_.end()) return it->second;
    if (e.kind == ExprKind::kIdent) {
      if (LocalVar* v = Local(e.name); v != nullptr && v->entry) return v->entry;
    }
    return std::nullopt;
  }

  Cost Ident(const Expr& e) {
    if (LocalVar* v = Local(e.name)) {
      SetPath(e, v->path);
    } else {
      SetPath(e, {e.name});
    }
    return Fixed(kSelectAndIdentCost);
  }

  Cost Select(const Expr& e) {
    Cost sum;
    if (e.test_only) {  // has(): the API server sets PresenceTestHasCost(false), so only the operand
      return sum.Add(Of(e.operand.get()));
    }
    sum = sum.Add(Of(e.operand.get()));
    K k = TypeOf(*e.operand).kind;
    if (k == K::kMap || k == K::kDevice) sum = sum.Add(Fixed(kSelectAndIdentCost));
    std::vector<std::string> p = PathOf(*e.operand);
    p.push_back(e.name);
    SetPath(e, std::move(p));
    return sum;
  }

  Cost List(const Expr& e) {
    Cost sum;
    Size item{e.args.empty() ? 0 : kMax, 0};
    for (const auto& a : e.args) {
      sum = sum.Add(Of(a.get()));
      item = item.Union(SizeOrUnknown(*a));
    }
    SetEntry(e, EntrySize{true, Size{1, 1}, item});
    return sum.Add(Fixed(kListCreateBaseCost));
  }

  Cost Map(const Expr& e) {
    Cost sum;
    Size ks{e.entries.empty() ? 0 : kMax, 0}, vs{e.entries.empty() ? 0 : kMax, 0};
    for (const auto& en : e.entries) {
      sum = sum.Add(Of(en.key.get()));
      sum = sum.Add(Of(en.value.get()));
      ks = ks.Union(SizeOrUnknown(*en.key));
      vs = vs.Union(SizeOrUnknown(*en.value));
    }
    SetEntry(e, EntrySize{false, ks, vs});
    return sum.Add(Fixed(kMapCreateBaseCost));
  }

  static bool IsBind(const Expr& e) {
    return e.iter_range && e.iter_range->kind == ExprKind::kList && e.iter_range->args.empty() && e.loop_cond &&
           e.loop_cond->kind == ExprKind::kConst && e.loop_cond->constant.kind == ConstKind::kBool &&
           !e.loop_cond->constant.b && e.accu_var != "@result" && e.accu_var != "__result__";
  }

  void PushAccu(const std::string& name, const Expr& init) {
    Push(name, LocalVar{PathOf(init), SizeOf(init), EntryOf(init)});
  }

  // pushIterSingle / pushIterKey / pushIterValue.
  void PushIter(const std::string& name, const Expr& range, bool key_of_two, bool value_of_two) {
    std::optional<EntrySize> entry = EntryOf(range);
    bool list = entry ? entry->list : TypeOf(range).kind == K::kList;
    std::optional<Size> size;
    std::string sub;
    if (value_of_two) {
      size = entry ? std::optional<Size>(entry->val) : std::nullopt;
      sub = list ? "@items" : "@values";
    } else if (key_of_two) {
      size = entry ? std::optional<Size>(entry->key) : std::nullopt;
      sub = list ? "@indices" : "@keys";
    } else {
      size = entry ? std::optional<Size>(list ? entry->val : entry->key) : std::nullopt;
      sub = list ? "@items" : "@keys";
    }
    std::vector<std::string> path = PathOf(range);
    path.push_back(sub);
    Push(name, LocalVar{std::move(path), size, std::nullopt});
  }

  Cost Comprehension(const Expr& e) {
    Cost sum;
    sum = sum.Add(Of(e.iter_range.get()));
    sum = sum.Add(Of(e.accu_init.get()));
    PushAccu(e.accu_var, *e.accu_init);
    if (!e.iter_var2.empty()) {
      PushIter(e.iter_var, *e.iter_range, true, false);
      PushIter(e.iter_var2, *e.iter_range, false, true);
    } else {
      PushIter(e.iter_var, *e.iter_range, false, false);
    }
    Cost loop = Of(e.loop_cond.get());
    Cost step = Of(e.loop_step.get());
    Pop(e.iter_var);
    if (!e.iter_var2.empty()) Pop(e.iter_var2);
    sum = sum.Add(Of(e.result.get()));
    Pop(e.accu_var);
    Size range = SizeOrUnknown(*e.iter_range);
    sum = sum.Add(ByCost(range, step.Add(loop)));
    switch (e.accu_init->kind) {
      case ExprKind::kConst: SetSize(e, SizeOf(*e.accu_init)); break;
      case ExprKind::kList:
      case ExprKind::kMap:
        SetSize(e, range);
        SetEntry(e, EntryOf(*e.loop_step));
        break;
      default: break;
    }
    return sum;
  }

  Cost Bind(const Expr& e) {
    Cost sum;
    sum = sum.Add(Of(e.iter_range.get()));  // binds keep the cost of the empty range
    sum = sum.Add(Of(e.accu_init.get()));
    PushAccu(e.accu_var, *e.accu_init);
    sum = sum.Add(Of(e.result.get()));
    Pop(e.accu_var);
    SetSize(e, SizeOf(*e.result));
    SetEntry(e, EntryOf(*e.result));
    return sum;
  }

  // The candidate overloads of an operator or function, derived from the operand types.
  std::vector<Est> Candidates(const Expr& e, std::string_view fn, bool member, const std::vector<const Expr*>& args) {
    auto T = [&](size_t i) -> const Type& { return TypeOf(*args[i]); };
    switch (e.op) {
      case OpCode::kAnd:
      case OpCode::kOr: return {Est::kLogical};
      case OpCode::kCond: return {Est::kConditional};
      case OpCode::kEq:
      case OpCode::kNe:
        // Kubernetes prices equality of its own types (Quantity, and the other library types) at one.
        if (args.size() == 2 && (T(0).kind == K::kQuantity || T(1).kind == K::kQuantity ||
                                 T(0).kind == K::kSemver || T(1).kind == K::kSemver)) {
          return {Est::kConstant};
        }
        return {Est::kEquality};
      case OpCode::kLt:
      case OpCode::kLe:
      case OpCode::kGt:
      case OpCode::kGe: {
        if (args.size() != 2) return {Est::kConstant};
        std::vector<Est> out;
        bool sized = BothAdmit(T(0), T(1), K::kString) || BothAdmit(T(0), T(1), K::kBytes);
        bool other = !(T(0).kind == K::kString || T(0).kind == K::kBytes || T(1).kind == K::kString ||
                       T(1).kind == K::kBytes);
        if (sized) out.push_back(Est::kEquality);
        if (other || out.empty()) out.push_back(Est::kConstant);
        return out;
      }
      case OpCode::kAdd: {
        if (args.size() != 2) return {Est::kConstant};
        std::vector<Est> out;
        if (BothAdmit(T(0), T(1), K::kString) || BothAdmit(T(0), T(1), K::kBytes)) out.push_back(Est::kAddSized);
        if (BothAdmit(T(0), T(1), K::kList)) out.push_back(Est::kAddList);
        bool numeric = (Admits(T(0), K::kInt) || Admits(T(0), K::kUint) || Admits(T(0), K::kDouble)) &&
                       (Admits(T(1), K::kInt) || Admits(T(1), K::kUint) || Admits(T(1), K::kDouble));
        if (numeric || out.empty()) out.push_back(Est::kConstant);
        return out;
      }
      case OpCode::kIndex: {
        if (args.empty()) return {Est::kConstant};
        K k = T(0).kind;
        if (k == K::kList) return {Est::kIndexList};
        if (k == K::kMap) return {Est::kIndexMap};
        if (k == K::kDyn) return {Est::kIndexList, Est::kIndexMap};
        return {Est::kConstant};
      }
      case OpCode::kIn: {
        if (args.size() != 2) return {Est::kConstant};
        K k = T(1).kind;
        if (k == K::kList) return {Est::kInList};
        if (k == K::kDyn) return {Est::kInList, Est::kConstant};
        return {Est::kConstant};
      }
      case OpCode::kOther: break;
      default: return {Est::kConstant};
    }
    // Kubernetes' library.CostEstimator first (by function name, with a receiver).
    if (member) {
      if (fn == "isSorted" || fn == "sum" || fn == "max" || fn == "min" || fn == "indexOf" || fn == "lastIndexOf") {
        return {Est::kK8sTraversal};
      }
      if (fn == "lowerAscii" || fn == "upperAscii" || fn == "substring" || fn == "trim") return {Est::kK8sStringCopy};
      if (fn == "replace" && args.size() >= 2) return {Est::kK8sReplace};
      if (fn == "split") return {Est::kK8sSplit};
      if (fn == "join") return {Est::kK8sJoin};
      if ((fn == "find" || fn == "findAll") && !args.empty()) return {Est::kK8sFind};
      if (fn == "matches" && args.size() == 1) return {Est::kMatches};
      if (fn == "contains" && args.size() == 1) return {Est::kContains};
      if ((fn == "startsWith" || fn == "endsWith") && args.size() == 1) return {Est::kStartsEnds};
      if (fn == "format") return {Est::kFormat};
      return {Est::kConstant};
    }
    if (fn == "sets.contains" || fn == "sets.intersects") return {Est::kSets1};
    if (fn == "sets.equivalent") return {Est::kSets2};
    if (fn == "strings.quote" && args.size() == 1) return {Est::kQuote};
    if (fn == "bytes" && args.size() == 1) {
      K k = T(0).kind;
      if (k == K::kString) return {Est::kStringToBytes};
      if (k == K::kDyn) return {Est::kConstant, Est::kStringToBytes};
    }
    if (fn == "string" && args.size() == 1) {
      K k = T(0).kind;
      if (k == K::kBytes) return {Est::kBytesToString};
      if (k == K::kDyn) return {Est::kConstant, Est::kBytesToString};
    }
    return {Est::kConstant};
  }

  struct CallEst {
    Cost cost;
    std::optional<Size> result;
  };

  // functionCost for one candidate; `target` is the receiver (null for global calls).
  CallEst Function(const Expr& e, Est est, const Expr* target, const std::vector<const Expr*>& args,
                   const std::vector<Cost>& arg_costs) {
    Cost argsum;
    for (const auto& c : arg_costs) argsum = argsum.Add(c);
    switch (est) {
      case Est::kConstant: return {Fixed(1).Add(argsum), std::nullopt};
      case Est::kLogical: {
        if (arg_costs.size() != 2) return {Fixed(1).Add(argsum), std::nullopt};
        const Cost& l = arg_costs[0];
        const Cost& r = arg_costs[1];
        return {Cost{l.min, l.Add(r).max}, std::nullopt};
      }
      case Est::kConditional: {
        if (args.size() != 3) return {Fixed(1).Add(argsum), std::nullopt};
        Size size = SizeOrUnknown(*args[1]).Union(SizeOrUnknown(*args[2]));
        SetEntry(e, UnionEntry(EntryOf(*args[1]), EntryOf(*args[2])));
        return {arg_costs[0].Add(arg_costs[1].Union(arg_costs[2])), size};
      }
      case Est::kEquality: {
        if (args.size() != 2) return {Fixed(1).Add(argsum), std::nullopt};
        Size l = SizeOrUnknown(*args[0]), r = SizeOrUnknown(*args[1]);
        uint64_t smallest = std::min(l.max, r.max);
        return {ByFactor(Size{smallest > 0 ? 1u : 0u, smallest}, kStringTraversalCostFactor).Add(argsum), std::nullopt};
      }
      case Est::kAddSized:
      case Est::kAddList: {
        Size size = SizeOrUnknown(*args[0]).Add(SizeOrUnknown(*args[1]));
        if (auto en = UnionEntry(EntryOf(*args[0]), EntryOf(*args[1]))) SetEntry(e, en);
        if (est == Est::kAddList) return {Fixed(1).Add(argsum), size};
        return {ByFactor(size, kStringTraversalCostFactor).Add(argsum), size};
      }
      case Est::kInList: return {ByFactor(SizeOrUnknown(*args[1]), 1).Add(argsum), std::nullopt};
      case Est::kIndexList:
      case Est::kIndexMap: return {Fixed(1).Add(argsum), std::nullopt};
      case Est::kMatches: {
        Cost str = ByFactor(SizeOrUnknown(*target).Add(Size{1, 1}), kStringTraversalCostFactor);
        Cost re = ByFactor(SizeOrUnknown(*args[0]), kRegexStringLengthCostFactor);
        return {str.Mul(re).Add(argsum), std::nullopt};
      }
      case Est::kContains: {
        Cost str = ByFactor(SizeOrUnknown(*target), kStringTraversalCostFactor);
        Cost sub = ByFactor(SizeOrUnknown(*args[0]), kStringTraversalCostFactor);
        return {str.Mul(sub).Add(argsum), std::nullopt};
      }
      case Est::kStartsEnds:
        return {ByFactor(SizeOrUnknown(*args[0]), kStringTraversalCostFactor).Add(argsum), std::nullopt};
      case Est::kStringToBytes: {
        Size sz = SizeOrUnknown(*args[0]);
        return {ByFactor(sz, kStringTraversalCostFactor).Add(argsum), Size{sz.min, MulSat(sz.max, 4)}};
      }
      case Est::kBytesToString: {
        Size sz = SizeOrUnknown(*args[0]);
        return {ByFactor(sz, kStringTraversalCostFactor).Add(argsum), Size{sz.min / 4, sz.max}};
      }
      case Est::kFormat: {
        Size t = SizeOrUnknown(*target);
        Size a = args.empty() ? Size{} : SizeOrUnknown(*args[0]);
        return {ByFactor(t, kStringTraversalCostFactor).Add(argsum), t.Add(a)};
      }
      case Est::kQuote: {
        Size sz = SizeOrUnknown(*args[0]);
        return {ByFactor(sz, kStringTraversalCostFactor).Add(argsum), Size{AddSat(sz.min, 2), AddSat(MulSat(sz.max, 2), 2)}};
      }
      case Est::kK8sTraversal: {
        const Type& tt = TypeOf(*target);
        Size ts = SizeOrUnknown(*target);
        if (tt.kind == K::kList) {  // listElementNode: the element type (dyn when not inferred)
          Cost el = Fixed(1);
          K ek = tt.elem ? tt.elem->kind : K::kDyn;
          if (ek == K::kString || ek == K::kBytes) el = el.Add(ByFactor(ItemSize(*target), kStringTraversalCostFactor));
          return {ByCost(ts, el).Add(argsum), std::nullopt};
        }
        return {ByFactor(ts, kStringTraversalCostFactor).Add(argsum), std::nullopt};
      }
      case Est::kK8sStringCopy: {
        Size sz = SizeOrUnknown(*target);
        return {ByFactor(sz, kStringTraversalCostFactor).Add(argsum), sz};
      }
      case Est::kK8sReplace: return {Replace(*target, *args[0], *args[1]).cost.Add(argsum), replace_size_};
      case Est::kK8sSplit: {
        Size sz = SizeOrUnknown(*target);
        uint64_t max = sz.max;
        if (args.size() > 1 && args[1]->kind == ExprKind::kConst) {
          const Constant& c = args[1]->constant;
          if (c.kind == ConstKind::kInt) max = static_cast<uint64_t>(c.i);
          else if (c.kind == ConstKind::kUint) max = c.u;
        }
        return {ByFactor(sz, 2 * kStringTraversalCostFactor).Add(argsum), Size{0, max}};
      }
      case Est::kK8sJoin: {
        Size list = SizeOrUnknown(*target);
        Size sz;
        const Type& tt = TypeOf(*target);
        if (tt.kind == K::kList) sz = list.Mul(ItemSize(*target));
        if (!args.empty()) {
          Size sep = SizeOrUnknown(*args[0]);
          Size n{list.min > 0 ? list.min - 1 : 0, list.max > 0 ? list.max - 1 : 0};
          sz = sz.Add(sep.Mul(n));
        }
        return {ByFactor(sz, kStringTraversalCostFactor).Add(argsum), sz};
      }
      case Est::kK8sFind: {
        Size sz = SizeOrUnknown(*target);
        Cost str = ByFactor(sz.Add(Size{1, 1}), kStringTraversalCostFactor);
        Cost re = ByFactor(SizeOrUnknown(*args[0]), kRegexStringLengthCostFactor);
        return {str.Mul(re).Add(argsum), Size{0, sz.max}};
      }
      case Est::kSets1:
      case Est::kSets2: {
        if (args.size() != 2) return {Fixed(1).Add(argsum), std::nullopt};
        Size p = SizeOrUnknown(*args[0]).Mul(SizeOrUnknown(*args[1]));
        return {ByFactor(p, est == Est::kSets2 ? 2 : 1).Add(Fixed(1)).Add(argsum), std::nullopt};
      }
    }
    return {Fixed(1).Add(argsum), std::nullopt};
  }

  // Kubernetes' listElementNode size: the declared bound of the list's items (by path), else unknown.
  Size ItemSize(const Expr& list) {
    std::vector<std::string> p = PathOf(list);
    if (p.empty()) return kUnknownSize;
    p.push_back("@items");
    return DeviceSize(p).value_or(kUnknownSize);
  }

  // Kubernetes' estimate of `replace`: twice a traversal; the result size from the replacement
  // sizes (stored in replace_size_).
  CallEst Replace(const Expr& target, const Expr& from, const Expr& to) {
    Size sz = SizeOrUnknown(target), f = SizeOrUnknown(from), w = SizeOrUnknown(to);
    Size count, retained;
    if (f.min == 0) {
      count.max = sz.max < kMax ? sz.max + 1 : sz.max;
      retained.max = sz.max;
    } else if (w.max <= f.min) {
      count.max = 0;
      retained.max = sz.max;
    } else {
      count.max = static_cast<uint64_t>(std::ceil(static_cast<double>(sz.max) / static_cast<double>(f.min)));
    }
    if (f.max == 0) {
      count.min = sz.min < kMax ? sz.min + 1 : sz.min;
      retained.min = sz.min;
    } else if (f.max <= w.min) {
      count.min = 0;
      retained.min = sz.min;
    } else {
      count.min = static_cast<uint64_t>(std::ceil(static_cast<double>(sz.min) / static_cast<double>(f.max)));
    }
    replace_size_ = count.Mul(w).Add(retained);
    return {ByFactor(sz, 2 * kStringTraversalCostFactor), replace_size_};
  }

  Cost Call(const Expr& e) {
    FunctionId id = ce_.calls != nullptr ? ce_.calls->Find(e.id) : kUnknownFunction;
    std::string_view fn = id != kUnknownFunction ? internal::FunctionName(id) : std::string_view(e.name);
    // A namespaced global function written as a receiver call (`lists.range(n)`) has no receiver.
    bool member = e.operand != nullptr && (id == kUnknownFunction || internal::IsMemberFunction(id));
    // maybeUnwrapDynCall: dyn(x) costs one plus x and keeps x's sizes.
    if (fn == "dyn" && !member && e.args.size() == 1) {
      Cost c = Fixed(1).Add(Of(e.args[0].get()));
      SetSize(e, SizeOf(*e.args[0]));
      SetEntry(e, EntryOf(*e.args[0]));
      return c;
    }
    std::vector<const Expr*> args;
    std::vector<Cost> arg_costs;
    for (const auto& a : e.args) {
      arg_costs.push_back(Of(a.get()));
      args.push_back(a.get());
    }
    Cost sum;
    const Expr* target = nullptr;
    if (member) {
      sum = sum.Add(Of(e.operand.get()));
      target = e.operand.get();
    }
    Cost fn_cost{kMax, 0};
    std::optional<Size> result;
    for (Est est : Candidates(e, fn, member, args)) {
      CallEst c = Function(e, est, target, args, arg_costs);
      fn_cost = fn_cost.Union(c.cost);
      if (c.result) result = result ? result->Union(*c.result) : *c.result;
      if ((est == Est::kIndexList || est == Est::kIndexMap) && !args.empty()) {
        auto en = EntryOf(*args[0]);
        result = en ? std::optional<Size>(en->val) : std::nullopt;
        std::vector<std::string> p = PathOf(*args[0]);
        p.push_back(est == Est::kIndexList ? "@items" : "@values");
        SetPath(e, std::move(p));
      }
      if (!result) result = SizeOf(e);
    }
    SetSize(e, result);
    return sum.Add(fn_cost);
  }

  const CheckedExpr& ce_;
  std::unordered_map<int64_t, std::vector<std::string>> paths_;
  std::unordered_map<int64_t, Size> sizes_;
  std::unordered_map<int64_t, EntrySize> entries_;
  std::map<std::string, std::vector<LocalVar>, std::less<>> locals_;
  Size replace_size_;
};

}  // namespace

CostEstimate EstimateCost(const CheckedExpr& expr) {
  if (!expr.ast.root) return {};
  Coster c(expr);
  Cost cost = c.Of(expr.ast.root.get());
  return {cost.min, cost.max};
}

Status CheckCost(const CheckedExpr& expr, uint64_t limit) {
  CostEstimate est = EstimateCost(expr);
  if (est.max <= limit) return Status::Ok();
  std::string estimated = est.max == kMax ? "unbounded" : std::to_string(est.max);
  return Status::InvalidArgument(std::string(kCostLimitMessage) + " (estimated cost " + estimated + ", limit " +
                                 std::to_string(limit) + ")");
}

}  // namespace draguard::cel
