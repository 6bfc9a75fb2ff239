#include "draguard/dra/selector_analysis.h"

#include <algorithm>

namespace draguard::dra {
namespace {

using cel::ConstKind;
using cel::Expr;
using cel::ExprKind;

bool IsCall(const Expr& e, const char* fn, std::size_t nargs) {
  return e.kind == ExprKind::kCall && e.name == fn && e.args.size() == nargs;
}

bool IsDevice(const Expr* e) { return e != nullptr && e->kind == ExprKind::kIdent && e->name == "device"; }

bool IsDeviceField(const Expr* e, const char* field) {
  return e != nullptr && e->kind == ExprKind::kSelect && !e->test_only && e->name == field && IsDevice(e->operand.get());
}

const std::string* StringConst(const Expr* e) {
  if (e == nullptr || e->kind != ExprKind::kConst || e->constant.kind != ConstKind::kString) return nullptr;
  return &e->constant.s;
}

// device.<map>['domain'] or device.<map>[device.driver].
bool DomainRead(const Expr* e, const char* map, const std::string& domain) {
  if (e == nullptr || !IsCall(*e, "_[_]", 2) || !IsDeviceField(e->args[0].get(), map)) return false;
  if (const std::string* s = StringConst(e->args[1].get())) return *s == domain;
  return IsDeviceField(e->args[1].get(), "driver");
}

// device.<map>[domain].name or device.<map>[domain]['name'].
bool ValueRead(const Expr* e, const char* map, const std::string& domain, const std::string& name) {
  if (e == nullptr) return false;
  if (e->kind == ExprKind::kSelect && !e->test_only && e->name == name) return DomainRead(e->operand.get(), map, domain);
  if (IsCall(*e, "_[_]", 2)) {
    const std::string* s = StringConst(e->args[1].get());
    return s != nullptr && *s == name && DomainRead(e->args[0].get(), map, domain);
  }
  return false;
}

std::optional<k8s::Quantity> QuantityLiteral(const Expr* e) {
  if (e == nullptr || !IsCall(*e, "quantity", 1) || e->operand != nullptr) return std::nullopt;
  const std::string* s = StringConst(e->args[0].get());
  if (s == nullptr) return std::nullopt;
  auto q = k8s::Quantity::Parse(*s);
  if (!q.ok()) return std::nullopt;
  return *q;
}

std::optional<int64_t> IntLiteral(const Expr* e) {
  if (e == nullptr) return std::nullopt;
  if (e->kind == ExprKind::kConst && e->constant.kind == ConstKind::kInt) return e->constant.i;
  if (IsCall(*e, "-_", 1)) {
    auto v = IntLiteral(e->args[0].get());
    if (v) return -*v;
  }
  return std::nullopt;
}

// Signs of (M - Q) a condition allows, as a bit set: 1 = "<", 2 = "==", 4 = ">".
constexpr int kLess = 1, kEqual = 2, kGreater = 4;

struct Atom {
  int signs = 0;
  k8s::Quantity q;
};

int BitOf(int sign) { return sign < 0 ? kLess : sign == 0 ? kEqual : kGreater; }

bool Compare(const std::string& op, int64_t a, int64_t b) {
  if (op == "_<_") return a < b;
  if (op == "_<=_") return a <= b;
  if (op == "_>_") return a > b;
  if (op == "_>=_") return a >= b;
  if (op == "_==_") return a == b;
  if (op == "_!=_") return a != b;
  return false;
}

// X.method(Y) where one of X / Y is the capacity and the other a quantity literal. Returns
// +1 when X is the capacity (forward), -1 when reversed, 0 when not this shape.
int MethodShape(const Expr& e, const char* method, const std::string& domain, const std::string& name,
                k8s::Quantity* q) {
  if (e.kind != ExprKind::kCall || e.name != method || e.operand == nullptr || e.args.size() != 1) return 0;
  if (ValueRead(e.operand.get(), "capacity", domain, name)) {
    if (auto lit = QuantityLiteral(e.args[0].get())) {
      *q = *lit;
      return 1;
    }
  }
  if (ValueRead(e.args[0].get(), "capacity", domain, name)) {
    if (auto lit = QuantityLiteral(e.operand.get())) {
      *q = *lit;
      return -1;
    }
  }
  return 0;
}

std::optional<Atom> CapacityAtom(const Expr& e, const std::string& domain, const std::string& name) {
  Atom a;
  if (IsCall(e, "!_", 1)) {
    auto inner = CapacityAtom(*e.args[0], domain, name);
    if (!inner) return std::nullopt;
    inner->signs = 7 & ~inner->signs;
    return inner;
  }
  for (const char* method : {"isGreaterThan", "isLessThan"}) {
    int dir = MethodShape(e, method, domain, name, &a.q);
    if (dir == 0) continue;
    bool greater = std::string(method) == "isGreaterThan";
    // forward: M > Q (or M < Q); reversed: Q > M means M < Q.
    a.signs = (greater == (dir > 0)) ? kGreater : kLess;
    return a;
  }
  static const char* kOps[] = {"_<_", "_<=_", "_>_", "_>=_", "_==_", "_!=_"};
  for (const char* op : kOps) {
    if (!IsCall(e, op, 2)) continue;
    for (int side = 0; side < 2; ++side) {
      const Expr& call = *e.args[side];
      auto k = IntLiteral(e.args[1 - side].get());
      if (!k) continue;
      int dir = MethodShape(call, "compareTo", domain, name, &a.q);
      if (dir == 0) continue;
      a.signs = 0;
      for (int s = -1; s <= 1; ++s) {
        int64_t c = dir > 0 ? s : -s;
        bool holds = side == 0 ? Compare(op, c, *k) : Compare(op, *k, c);
        if (holds) a.signs |= BitOf(s);
      }
      return a;
    }
  }
  return std::nullopt;
}

std::optional<LowerBound> Stronger(std::optional<LowerBound> a, std::optional<LowerBound> b) {
  if (!a) return b;
  if (!b) return a;
  int c = a->value.Compare(b->value);
  if (c > 0 || (c == 0 && a->strict)) return a;
  return b;
}

std::optional<LowerBound> Weaker(const LowerBound& a, const LowerBound& b) {
  int c = a.value.Compare(b.value);
  if (c < 0 || (c == 0 && !a.strict)) return a;
  return b;
}

}  // namespace

std::optional<LowerBound> CapacityLowerBound(const Expr& root, const std::string& domain, const std::string& name) {
  if (IsCall(root, "_&&_", 2)) {
    return Stronger(CapacityLowerBound(*root.args[0], domain, name), CapacityLowerBound(*root.args[1], domain, name));
  }
  if (IsCall(root, "_||_", 2)) {
    auto a = CapacityLowerBound(*root.args[0], domain, name);
    auto b = CapacityLowerBound(*root.args[1], domain, name);
    if (!a || !b) return std::nullopt;
    return Weaker(*a, *b);
  }
  auto atom = CapacityAtom(root, domain, name);
  if (!atom || atom->signs == 0 || (atom->signs & kLess) != 0) return std::nullopt;
  return LowerBound{atom->q, (atom->signs & kEqual) == 0};
}

std::optional<std::set<std::string>> AttributeValues(const Expr& root, const std::string& domain,
                                                     const std::string& name) {
  if (IsCall(root, "_&&_", 2)) {
    auto a = AttributeValues(*root.args[0], domain, name);
    auto b = AttributeValues(*root.args[1], domain, name);
    if (!a) return b;
    if (!b) return a;
    std::set<std::string> both;
    std::set_intersection(a->begin(), a->end(), b->begin(), b->end(), std::inserter(both, both.end()));
    return both;
  }
  if (IsCall(root, "_||_", 2)) {
    auto a = AttributeValues(*root.args[0], domain, name);
    auto b = AttributeValues(*root.args[1], domain, name);
    if (!a || !b) return std::nullopt;
    a->insert(b->begin(), b->end());
    return a;
  }
  if (IsCall(root, "_==_", 2)) {
    for (int side = 0; side < 2; ++side) {
      const std::string* s = StringConst(root.args[1 - side].get());
      if (s != nullptr && ValueRead(root.args[side].get(), "attributes", domain, name)) return std::set<std::string>{*s};
    }
  }
  if (IsCall(root, "@in", 2) && ValueRead(root.args[0].get(), "attributes", domain, name) &&
      root.args[1]->kind == ExprKind::kList) {
    std::set<std::string> out;
    for (const auto& e : root.args[1]->args) {
      const std::string* s = StringConst(e.get());
      if (s == nullptr) return std::nullopt;
      out.insert(*s);
    }
    return out;
  }
  return std::nullopt;
}

namespace {

// device.attributes[domain].name / ['name'], with device.driver accepted only when allowed.
bool StrictValueRead(const Expr* e, const std::string& domain, const std::string& name, bool driver_domain) {
  if (!ValueRead(e, "attributes", domain, name)) return false;
  if (driver_domain) return true;
  const Expr* map = e->kind == ExprKind::kSelect ? e->operand.get() : e->args[0].get();
  return StringConst(map->args[1].get()) != nullptr;  // a literal domain, not device.driver
}

// A string literal, or an int literal as its decimal text (numaNode); nullopt for anything else.
std::optional<std::string> LiteralText(const Expr* e) {
  if (const std::string* s = StringConst(e)) return *s;
  if (e != nullptr && e->kind == ExprKind::kConst && e->constant.kind == ConstKind::kInt) {
    return std::to_string(e->constant.i);
  }
  return std::nullopt;
}

std::optional<std::set<std::string>> LiteralRestriction(const Expr& e, const std::string& domain,
                                                        const std::string& name, bool driver_domain) {
  if (IsCall(e, "_==_", 2)) {
    for (int side = 0; side < 2; ++side) {
      auto lit = LiteralText(e.args[1 - side].get());
      if (lit && StrictValueRead(e.args[side].get(), domain, name, driver_domain)) return std::set<std::string>{*lit};
    }
  }
  if (IsCall(e, "@in", 2) && StrictValueRead(e.args[0].get(), domain, name, driver_domain) &&
      e.args[1]->kind == ExprKind::kList) {
    std::set<std::string> out;
    for (const auto& item : e.args[1]->args) {
      auto lit = LiteralText(item.get());
      if (!lit) return std::nullopt;
      out.insert(*lit);
    }
    return out;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::set<std::string>> ConjunctRestriction(const Expr& root, const std::string& domain,
                                                         const std::string& name, bool driver_domain) {
  if (IsCall(root, "_&&_", 2)) {
    auto a = ConjunctRestriction(*root.args[0], domain, name, driver_domain);
    auto b = ConjunctRestriction(*root.args[1], domain, name, driver_domain);
    if (!a) return b;
    if (!b) return a;
    std::set<std::string> both;
    std::set_intersection(a->begin(), a->end(), b->begin(), b->end(), std::inserter(both, both.end()));
    return both;
  }
  return LiteralRestriction(root, domain, name, driver_domain);
}

bool ComparesDriver(const Expr& root, const std::string& driver) {
  if (IsCall(root, "_==_", 2)) {
    for (int side = 0; side < 2; ++side) {
      const std::string* s = StringConst(root.args[1 - side].get());
      if (s != nullptr && *s == driver && IsDeviceField(root.args[side].get(), "driver")) return true;
    }
  }
  for (const auto& a : root.args) {
    if (a && ComparesDriver(*a, driver)) return true;
  }
  if (root.operand && ComparesDriver(*root.operand, driver)) return true;
  return false;
}

}  // namespace draguard::dra
