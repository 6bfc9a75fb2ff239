// Satisfiability of a DRA claim against the topology model (see satisfiability.h).
#include "draguard/dra/satisfiability.h"

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <variant>

#include "draguard/dra/claims.h"
#include "draguard/cel/budget.h"
#include "draguard/cel/checker.h"
#include "draguard/cel/cost.h"
#include "draguard/cel/evaluator.h"
#include "draguard/dra/devices.h"
#include "draguard/topology/snapshot.h"
#include "draguard/dra/selector_analysis.h"

namespace draguard::dra {
namespace {

using Verdict = SatisfiabilityReport::Verdict;

// Error values put in place of attributes the simulation does not know: a selector that reads one
// evaluates to this error unless the rest of the expression decides without it (CEL's commutative
// error absorption gives three-valued logic for free).
constexpr std::string_view kUnknownMarker = "draguard: unknown to the simulation: ";
// Backtracking steps per node (or shape) before the search gives up and assumes satisfiable.
constexpr int64_t kSearchBudget = 200000;
constexpr std::size_t kMaxMessage = 300;
constexpr const char* kGpuDomain = "gpu.nvidia.com";

// kGpuLike: classes that cannot be simulated but need an NVIDIA GPU (passthrough).
enum class Kind : uint8_t { kGpu, kNic, kMig, kGpuLike, kOther };

bool InList(const std::vector<std::string>& list, const std::string& v) {
  return std::find(list.begin(), list.end(), v) != list.end();
}

// Attributes that differ between nodes of one shape: a GPU's UUID, a MIG device's parent's.
bool IsUuidName(std::string_view name) { return name == "uuid" || name == "parentUUID"; }

bool IsUuidAttribute(std::string_view attr) {
  const auto slash = attr.rfind('/');
  return IsUuidName(slash == std::string_view::npos ? attr : attr.substr(slash + 1));
}

struct AltPlan {
  const Alternative* alt = nullptr;
  Kind kind = Kind::kOther;
  std::vector<cel::CheckedExpr> selectors;
  bool simulated = false;                // evaluated against simulated devices
  std::vector<std::size_t> constraints;  // indexes into Plan::constraints
  int64_t need() const { return alt->all ? 1 : alt->count; }
};

struct RequestPlan {
  const DeviceRequestRef* req = nullptr;
  std::vector<AltPlan> alts;
};

struct ConstraintPlan {
  const ConstraintRef* ref = nullptr;
  bool match = true;  // matchAttribute, else distinctAttribute
  std::string attr, domain, name;
};

struct Plan {
  std::vector<RequestPlan> requests;
  std::vector<ConstraintPlan> constraints;
  bool reads_uuid = false;
  std::vector<std::string> notes;
  cel::Budget* budget = nullptr;  // the review's CEL budget (may be null)
};

enum class Match : uint8_t { kNo, kYes, kMaybe };

struct Cell {
  enum State : uint8_t { kMissing, kUnknown, kValue } state = kMissing;
  std::string value;  // typed: "s:..", "i:..", "b:..", "v:.."
};

struct AltEval {
  std::vector<Match> match;                     // per device
  std::vector<std::vector<std::string>> names;  // per device: unknown names behind kMaybe
  std::size_t candidates = 0;                   // devices with match != kNo
};

// One evaluation unit: a shape (all its nodes) or a single node. A node evaluated on its own
// because a selector reads UUIDs shares the devices of its shape's representative (`base`) and
// re-evaluates only what depends on the UUIDs.
struct Unit {
  std::vector<std::string> nodes;
  std::string fingerprint;
  const Unit* base = nullptr;
  std::shared_ptr<const std::vector<dra::Device>> own_devices;  // shared with the snapshot's memo
  std::vector<cel::Value> own_probes;
  std::size_t gpus = 0, nics = 0, migs = 0;  // simulated devices by kind
  std::size_t nvidia = 0;                      // NVIDIA GPUs, MIG-enabled or not
  bool mig_unknown = false;                    // some NVIDIA GPU's MIG mode is not in the export
  std::vector<std::vector<AltEval>> own_eval;      // [request][alternative] evaluated here
  std::vector<std::vector<const AltEval*>> eval;   // [request][alternative]
  std::vector<std::vector<Cell>> own_cells;        // constraints evaluated here
  std::vector<const std::vector<Cell>*> cells;     // [constraint][device]
  bool satisfiable = false;
  bool exceeded = false;

  const std::vector<dra::Device>& devices() const { return base ? *base->own_devices : *own_devices; }
  const std::vector<cel::Value>& probes() const { return base ? base->own_probes : own_probes; }
};

// Units are referenced by address (`base`), so they live in a deque.
using Units = std::deque<Unit>;

std::string TypedValue(const cel::AttributeValue& v) {
  if (auto* i = std::get_if<int64_t>(&v)) return "i:" + std::to_string(*i);
  if (auto* b = std::get_if<bool>(&v)) return std::string("b:") + (*b ? "true" : "false");
  if (auto* s = std::get_if<std::string>(&v)) return "s:" + *s;
  return "v:" + std::get<cel::Semver>(v).ToString();
}

cel::Value AttrValue(const cel::AttributeValue& v) {
  if (auto* i = std::get_if<int64_t>(&v)) return cel::Value::Int(*i);
  if (auto* b = std::get_if<bool>(&v)) return cel::Value::Bool(*b);
  if (auto* s = std::get_if<std::string>(&v)) return cel::Value::String(*s);
  return cel::Value::Sem(std::get<cel::Semver>(v));
}

std::pair<std::string, std::string> SplitQualified(const std::string& q, const std::string& driver) {
  auto slash = q.rfind('/');
  if (slash == std::string::npos) return {driver, q};
  return {q.substr(0, slash), q.substr(slash + 1)};
}

bool IsCapacityName(const std::string& name) {
  static const std::set<std::string> kCaps = {"memory", "multiprocessors", "copyEngines", "decoders",
                                              "encoders", "jpegEngines", "ofaEngines", "addressableMemory"};
  return kCaps.count(name) != 0;
}

// The device as CEL sees it, with an error value (kUnknownMarker + name) for every attribute or
// capacity the simulation cannot provide.
cel::Value Probe(const dra::Device& d) {
  if (d.unknown.empty()) return d.value;
  std::map<std::string, std::map<std::string, cel::Value>> attrs, caps;
  for (const auto& [domain, names] : d.device.attributes) {
    for (const auto& [name, v] : names) attrs[domain][name] = AttrValue(v);
  }
  for (const auto& [domain, names] : d.device.capacity) {
    for (const auto& [name, q] : names) caps[domain][name] = cel::Value::Quant(q);
  }
  for (const auto& u : d.unknown) {
    auto [domain, name] = SplitQualified(u, d.device.driver);
    auto& target = IsCapacityName(name) ? caps[domain] : attrs[domain];
    target.emplace(name, cel::Value::Error(std::string(kUnknownMarker) + u));
  }
  auto to_map = [](const std::map<std::string, std::map<std::string, cel::Value>>& src) {
    cel::MapValue out;
    out.missing_is_empty = true;
    for (const auto& [domain, names] : src) {
      cel::MapValue m;
      for (const auto& [name, v] : names) m.entries.emplace_back(cel::Value::String(name), v);
      out.entries.emplace_back(cel::Value::String(domain), cel::Value::Map(std::move(m)));
    }
    return out;
  };
  cel::MapValue dev;
  dev.entries.emplace_back(cel::Value::String("driver"), cel::Value::String(d.device.driver));
  dev.entries.emplace_back(cel::Value::String("attributes"), cel::Value::Map(to_map(attrs)));
  dev.entries.emplace_back(cel::Value::String("capacity"), cel::Value::Map(to_map(caps)));
  dev.entries.emplace_back(cel::Value::String("allowMultipleAllocations"),
                           cel::Value::Bool(d.device.allow_multiple_allocations.value_or(false)));
  return cel::Value::Map(std::move(dev));
}

bool KindFits(Kind k, const dra::Device& d) {
  return (k == Kind::kGpu && d.kind == dra::DeviceKind::kGpu) ||
         (k == Kind::kNic && d.kind == dra::DeviceKind::kNic) || (k == Kind::kMig && d.kind == dra::DeviceKind::kMig);
}

// Evaluates one selector against one device: true / false / maybe (unknown names) / error.
enum class SelResult : uint8_t { kTrue, kFalse, kMaybe, kError };

SelResult EvalSelector(const cel::CheckedExpr& sel, const dra::Device& d, const cel::Value& probe,
                       std::vector<std::string>* names, std::string* error, cel::Budget* budget) {
  cel::EvalOptions opts;
  opts.budget = budget;
  auto r = cel::EvaluateSelectorValue(sel, probe, opts);
  if (budget != nullptr && budget->exhausted()) return SelResult::kError;
  if (r.ok()) return *r ? SelResult::kTrue : SelResult::kFalse;
  const std::string msg = r.status().message();
  if (msg.rfind(kUnknownMarker, 0) == 0) {
    names->push_back(msg.substr(kUnknownMarker.size()));
    return SelResult::kMaybe;
  }
  // Fallback: an error while the selector reads something the simulation does not know.
  bool unknown = false;
  for (const auto& ref : sel.references) {
    std::string domain = ref.domain.empty() && ref.domain_is_driver ? d.device.driver : ref.domain;
    std::string q = domain + "/" + ref.name;
    if (InList(d.unknown, q)) {
      names->push_back(q);
      unknown = true;
    }
  }
  if (unknown) return SelResult::kMaybe;
  if (error != nullptr) *error = msg;
  return SelResult::kError;
}

Kind ClassKind(const policy::Policy& pol, const std::string& cls) {
  if (InList(pol.device_classes.gpu, cls)) return Kind::kGpu;
  if (!cls.empty() && cls == pol.mutation.nic.device_class) return Kind::kNic;
  if (InList(pol.device_classes.mig, cls)) return Kind::kMig;
  if (InList(pol.device_classes.passthrough, cls)) return Kind::kGpuLike;
  return Kind::kOther;
}

bool Covers(const ConstraintRef& c, const Alternative& a) {
  if (c.requests.empty()) return true;
  std::string main = a.ref.substr(0, a.ref.find('/'));
  return InList(c.requests, main) || InList(c.requests, a.ref);
}

Plan MakePlan(const ClaimRef& claim, const policy::Policy& pol) {
  Plan p;
  for (const auto& c : claim.constraints) {
    ConstraintPlan cp;
    cp.ref = &c;
    cp.match = !c.match_attribute.empty();
    cp.attr = cp.match ? c.match_attribute : c.distinct_attribute;
    if (cp.attr.empty()) continue;
    if (IsUuidAttribute(cp.attr)) p.reads_uuid = true;
    p.constraints.push_back(std::move(cp));
  }
  for (const auto& r : claim.requests) {
    RequestPlan rp;
    rp.req = &r;
    for (const auto& a : r.alternatives) {
      AltPlan ap;
      ap.alt = &a;
      ap.kind = ClassKind(pol, a.device_class);
      ap.simulated = ap.kind == Kind::kGpu || ap.kind == Kind::kNic || ap.kind == Kind::kMig;
      if (ap.simulated && !a.all && a.count < 1) {
        ap.simulated = false;  // malformed count: DG013's business
        ap.kind = Kind::kOther;
      }
      if (ap.simulated) {
        for (std::size_t i = 0; i < a.selectors.size(); ++i) {
          auto checked = cel::CompileSelector(a.selectors[i].expression);
          if (!checked.ok()) {
            ap.simulated = false;
            ap.kind = Kind::kOther;
            p.notes.push_back(Describe(a) + " selector #" + std::to_string(i + 1) +
                              " does not compile; not simulated");
            break;
          }
          if (!cel::CheckCost(*checked).ok()) {  // the API server rejects it; never evaluated
            ap.simulated = false;
            ap.kind = Kind::kOther;
            p.notes.push_back(Describe(a) + " selector #" + std::to_string(i + 1) +
                              " exceeds the estimated cost limit; not simulated");
            break;
          }
          for (const auto& ref : checked->references) p.reads_uuid = p.reads_uuid || IsUuidName(ref.name);
          ap.selectors.push_back(std::move(*checked));
        }
        if (a.selector_count != a.selectors.size() && ap.simulated) {
          ap.simulated = false;
          ap.kind = Kind::kOther;
          ap.selectors.clear();
        }
      }
      if (!ap.simulated) {
        p.notes.push_back(Describe(a) + " (" + (a.device_class.empty() ? "no class" : a.device_class) +
                          ") is not simulated; assumed to fit every node" +
                          (ap.kind == Kind::kGpuLike ? " with an NVIDIA GPU" : ""));
      }
      for (std::size_t ci = 0; ci < p.constraints.size(); ++ci) {
        if (ap.simulated && Covers(*p.constraints[ci].ref, a)) ap.constraints.push_back(ci);
      }
      rp.alts.push_back(std::move(ap));
    }
    p.requests.push_back(std::move(rp));
  }
  return p;
}

bool ReadsUuid(const AltPlan& ap) {
  for (const auto& sel : ap.selectors) {
    for (const auto& ref : sel.references) {
      if (IsUuidName(ref.name)) return true;
    }
  }
  return false;
}

AltEval EvaluateAlt(const AltPlan& ap, const std::vector<dra::Device>& devices,
                    const std::vector<cel::Value>& probes, cel::Budget* budget) {
  const std::size_t n = devices.size();
  AltEval e;
  e.match.assign(n, Match::kNo);
  e.names.resize(n);
  if (!ap.simulated) return e;
  for (std::size_t d = 0; d < n; ++d) {
    if (budget != nullptr && budget->exhausted()) break;
    if (!KindFits(ap.kind, devices[d])) continue;
    Match m = Match::kYes;
    for (const auto& sel : ap.selectors) {
      auto r = EvalSelector(sel, devices[d], probes[d], &e.names[d], nullptr, budget);
      if (r == SelResult::kFalse || r == SelResult::kError) {
        m = Match::kNo;
        break;
      }
      if (r == SelResult::kMaybe) m = Match::kMaybe;
    }
    e.match[d] = m;
    if (m != Match::kNo) ++e.candidates;
  }
  return e;
}

std::vector<Cell> EvaluateCells(const ConstraintPlan& cp, const std::vector<dra::Device>& devices) {
  std::vector<Cell> cells(devices.size());
  for (std::size_t d = 0; d < devices.size(); ++d) {
    const auto& dev = devices[d];
    auto [domain, name] = SplitQualified(cp.attr, dev.device.driver);
    auto dit = dev.device.attributes.find(domain);
    if (dit != dev.device.attributes.end()) {
      if (auto nit = dit->second.find(name); nit != dit->second.end()) {
        cells[d].state = Cell::kValue;
        cells[d].value = TypedValue(nit->second);
        continue;
      }
    }
    if (InList(dev.unknown, domain + "/" + name)) cells[d].state = Cell::kUnknown;
  }
  return cells;
}

// Points eval / cells at what the unit evaluated itself, or else at its base's results.
void Link(const Plan& p, Unit& u) {
  u.eval.assign(p.requests.size(), {});
  for (std::size_t r = 0; r < p.requests.size(); ++r) {
    for (std::size_t a = 0; a < p.requests[r].alts.size(); ++a) {
      bool own = u.base == nullptr || (!u.own_eval[r].empty() && ReadsUuid(p.requests[r].alts[a]));
      u.eval[r].push_back(own ? &u.own_eval[r][a] : u.base->eval[r][a]);
    }
  }
  u.cells.clear();
  for (std::size_t ci = 0; ci < p.constraints.size(); ++ci) {
    bool own = u.base == nullptr || IsUuidAttribute(p.constraints[ci].attr);
    u.cells.push_back(own ? &u.own_cells[ci] : u.base->cells[ci]);
  }
}

// The representative of a shape: everything evaluated on its own devices.
void EvaluateUnit(const Plan& p, const policy::Policy& pol, const topology::Snapshot& snapshot,
                  const topology::NodeTopology& node, Unit& u) {
  u.own_devices = dra::SimulateNode(snapshot, node, dra::NicOptionsOf(pol));
  for (const auto& d : *u.own_devices) {
    u.own_probes.push_back(Probe(d));
    (d.kind == dra::DeviceKind::kGpu ? u.gpus : d.kind == dra::DeviceKind::kMig ? u.migs : u.nics)++;
  }
  for (const auto& g : node.shape->gpus) {
    if (g.vendor != topology::GpuVendor::kNvidia) continue;
    ++u.nvidia;
    u.mig_unknown = u.mig_unknown || g.mig_mode == topology::MigMode::kUnknown;
  }
  for (const auto& rp : p.requests) {
    std::vector<AltEval> evals;
    for (const auto& ap : rp.alts) evals.push_back(EvaluateAlt(ap, *u.own_devices, u.own_probes, p.budget));
    u.own_eval.push_back(std::move(evals));
  }
  for (const auto& cp : p.constraints) u.own_cells.push_back(EvaluateCells(cp, *u.own_devices));
  Link(p, u);
}

// Another node of `base`'s shape: only what reads GPU UUIDs is evaluated again, against the
// base's devices with this node's UUIDs.
void EvaluateUuidNode(const Plan& p, const topology::NodeTopology& node, const Unit& base, Unit& u) {
  u.base = &base;
  u.gpus = base.gpus;
  u.nics = base.nics;
  u.migs = base.migs;
  u.nvidia = base.nvidia;
  u.mig_unknown = base.mig_unknown;
  std::vector<dra::Device> devices;
  std::vector<cel::Value> probes;
  auto patched = [&]() {
    if (!devices.empty() || base.own_devices->empty()) return;
    devices = *base.own_devices;
    for (auto& d : devices) {
      if (d.kind == dra::DeviceKind::kNic) continue;
      // A MIG device's own UUID is never known; its parent GPU's is this node's.
      const std::string name = d.kind == dra::DeviceKind::kMig ? "parentUUID" : "uuid";
      auto& attrs = d.device.attributes[kGpuDomain];
      const std::string q = std::string(kGpuDomain) + "/" + name;
      d.unknown.erase(std::remove(d.unknown.begin(), d.unknown.end(), q), d.unknown.end());
      if (auto uuid = node.GpuUuid(d.index)) {
        attrs[name] = cel::AttributeValue(std::string(*uuid));
      } else {
        attrs.erase(name);
        d.unknown.push_back(q);
      }
      d.value = cel::DeviceToValue(d.device);
    }
    for (const auto& d : devices) probes.push_back(Probe(d));
  };
  for (const auto& rp : p.requests) {
    bool any = false;
    for (const auto& ap : rp.alts) any = any || ReadsUuid(ap);
    std::vector<AltEval> evals;
    if (any) {
      patched();
      for (const auto& ap : rp.alts) {
        evals.push_back(ReadsUuid(ap) ? EvaluateAlt(ap, devices, probes, p.budget) : AltEval{});
      }
    }
    u.own_eval.push_back(std::move(evals));
  }
  for (const auto& cp : p.constraints) {
    if (IsUuidAttribute(cp.attr)) {
      patched();
      u.own_cells.push_back(EvaluateCells(cp, devices));
    } else {
      u.own_cells.emplace_back();
    }
  }
  Link(p, u);
}

// Bounded backtracking over requests (in order), their alternatives (in order) and device sets.
class Solver {
 public:
  Solver(const Plan& p, const Unit& u, std::vector<bool> req_on, std::vector<bool> con_on)
      : p_(p), u_(u), req_on_(std::move(req_on)), con_on_(std::move(con_on)),
        used_(u.devices().size(), 0), stack_(p.constraints.size()) {}

  bool Run() { return Solve(0); }
  /// Only allocations in which request `r` receives device `d` count.
  void Force(std::size_t r, std::size_t d) {
    forced_ = true;
    forced_r_ = r;
    forced_d_ = d;
  }
  bool exceeded() const { return exceeded_; }
  /// True when the solution assumed a MIG request fits because the export lacks the MIG mode.
  bool assumed_mig() const { return assumed_mig_; }
  const std::set<std::string>& unknown() const { return unknown_; }

 private:
  struct Taken {
    std::size_t r, a, d;
  };

  bool CanTake(const AltPlan& ap, std::size_t r, std::size_t a, std::size_t d) const {
    if (used_[d] || u_.eval[r][a]->match[d] == Match::kNo) return false;
    for (std::size_t ci : ap.constraints) {
      if (!con_on_[ci]) continue;
      const Cell& cell = (*u_.cells[ci])[d];
      if (cell.state == Cell::kMissing) return false;
      if (cell.state == Cell::kUnknown) continue;
      for (const std::string* v : stack_[ci]) {
        if (v == nullptr) continue;
        if (p_.constraints[ci].match) {
          if (*v != cell.value) return false;
          break;  // every value on the stack is equal
        }
        if (*v == cell.value) return false;
      }
    }
    return true;
  }

  void Take(const AltPlan& ap, std::size_t r, std::size_t a, std::size_t d) {
    used_[d] = 1;
    for (std::size_t ci : ap.constraints) {
      if (!con_on_[ci]) continue;
      const Cell& cell = (*u_.cells[ci])[d];
      stack_[ci].push_back(cell.state == Cell::kValue ? &cell.value : nullptr);
    }
    taken_.push_back({r, a, d});
  }

  void Release(const AltPlan& ap) {
    Taken t = taken_.back();
    taken_.pop_back();
    used_[t.d] = 0;
    for (std::size_t ci : ap.constraints) {
      if (con_on_[ci]) stack_[ci].pop_back();
    }
  }

  void Record() {
    for (const auto& t : taken_) {
      for (const auto& n : u_.eval[t.r][t.a]->names[t.d]) unknown_.insert(n);
      for (std::size_t ci : p_.requests[t.r].alts[t.a].constraints) {
        if (con_on_[ci] && (*u_.cells[ci])[t.d].state == Cell::kUnknown) unknown_.insert(p_.constraints[ci].attr);
      }
    }
  }

  bool Solve(std::size_t r) {
    if (forced_ && r == forced_r_ + 1 &&
        std::none_of(taken_.begin(), taken_.end(), [&](const Taken& t) { return t.r == forced_r_ && t.d == forced_d_; })) {
      return false;
    }
    if (r == p_.requests.size()) {
      Record();
      return true;
    }
    if (!req_on_[r]) return Solve(r + 1);
    const auto& rp = p_.requests[r];
    for (std::size_t a = 0; a < rp.alts.size(); ++a) {
      const AltPlan& ap = rp.alts[a];
      if (!ap.simulated) {
        if (ap.kind == Kind::kGpuLike && u_.nvidia == 0) continue;
        if (Solve(r + 1)) return true;
        continue;
      }
      if (ap.kind == Kind::kMig && u_.mig_unknown) {  // the real MIG devices are unknown
        const bool before = assumed_mig_;
        assumed_mig_ = true;
        if (Solve(r + 1)) return true;
        assumed_mig_ = before;
        continue;
      }
      if (u_.eval[r][a]->candidates < static_cast<std::size_t>(ap.need())) continue;
      if (ap.alt->all) {
        if (TakeAll(ap, r, a)) return true;
      } else if (Place(ap, r, a, 0, ap.alt->count)) {
        return true;
      }
      if (exceeded_) return true;
    }
    return false;
  }

  // allocationMode All: every matching device, none of them already taken.
  bool TakeAll(const AltPlan& ap, std::size_t r, std::size_t a) {
    std::size_t n = 0;
    bool ok = true;
    for (std::size_t d = 0; d < u_.devices().size() && ok; ++d) {
      if (u_.eval[r][a]->match[d] == Match::kNo) continue;
      if (!CanTake(ap, r, a, d)) {
        ok = false;
        break;
      }
      Take(ap, r, a, d);
      ++n;
    }
    bool result = ok && n > 0 && Solve(r + 1);
    if (result) return true;
    while (n-- > 0) Release(ap);
    return false;
  }

  bool Place(const AltPlan& ap, std::size_t r, std::size_t a, std::size_t from, int64_t left) {
    if (left == 0) return Solve(r + 1);
    if (++steps_ > kSearchBudget) {
      exceeded_ = true;
      return true;
    }
    const std::size_t n = u_.devices().size();
    int64_t available = 0;
    for (std::size_t d = from; d < n; ++d) available += (!used_[d] && u_.eval[r][a]->match[d] != Match::kNo) ? 1 : 0;
    for (std::size_t d = from; d < n && available >= left; ++d) {
      if (used_[d] || u_.eval[r][a]->match[d] == Match::kNo) continue;
      --available;
      if (!CanTake(ap, r, a, d)) continue;
      Take(ap, r, a, d);
      if (Place(ap, r, a, d + 1, left - 1)) return true;
      Release(ap);
    }
    return false;
  }

  const Plan& p_;
  const Unit& u_;
  std::vector<bool> req_on_, con_on_;
  std::vector<char> used_;
  std::vector<std::vector<const std::string*>> stack_;
  std::vector<Taken> taken_;
  std::set<std::string> unknown_;
  int64_t steps_ = 0;
  bool exceeded_ = false;
  bool assumed_mig_ = false;
  bool forced_ = false;
  std::size_t forced_r_ = 0, forced_d_ = 0;
};

// ---- Nearest miss ----------------------------------------------------------------------------

std::string NodeList(std::vector<std::string> nodes) {
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  std::string out;
  for (std::size_t i = 0; i < nodes.size() && i < 3; ++i) out += (i ? ", " : "") + nodes[i];
  if (nodes.size() > 3) out += " +" + std::to_string(nodes.size() - 3) + " more";
  return out;
}

std::string Nodes(std::vector<std::string> nodes) {
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  return std::string(nodes.size() == 1 ? "node " : "nodes ") + NodeList(nodes);
}

std::string Noun(Kind k, int64_t n) {
  std::string s = k == Kind::kNic ? "NIC" : k == Kind::kMig ? "MIG device" : "GPU";
  return n == 1 ? s : s + "s";
}

std::string Cut(std::string s, std::size_t max) {
  if (s.size() <= max) return s;
  std::size_t end = max - 3;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
  return s.substr(0, end) + "...";
}

std::string Head(const AltPlan& ap) {
  std::string what = ap.alt->all ? "all of " + ap.alt->device_class
                                 : std::to_string(ap.alt->count) + "x " + ap.alt->device_class;
  return Describe(*ap.alt) + " (" + what + ")";
}

// "81559Mi", or "34072559616 (~31.7Gi)" for byte counts that are not whole MiB.
std::string Human(const k8s::Quantity& q) {
  std::string s = q.ToString();
  auto v = q.AsInt64();
  if (v && *v >= (int64_t{1} << 20) && *v % (int64_t{1} << 20) != 0 &&
      s.find_first_not_of("0123456789") == std::string::npos) {
    int64_t tenths = (*v * 10 + (int64_t{1} << 29)) >> 30;  // GiB, one decimal, rounded
    s += " (~" + std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + "Gi)";
  }
  return s;
}

struct Miss {
  std::string message, pointer, hint;
};

// Why no device of the alternative's kind qualifies anywhere: the first selector that no device
// passes on its own.
std::string SelectorReason(const AltPlan& ap, const Units& units, std::string* hint, cel::Budget* budget) {
  const std::string noun = Noun(ap.kind, 1);
  for (std::size_t i = 0; i < ap.selectors.size(); ++i) {
    const auto& sel = ap.selectors[i];
    bool passes = false, all_errors = true;
    std::string error;
    for (const auto& u : units) {
      for (std::size_t d = 0; d < u.devices().size(); ++d) {
        if (!KindFits(ap.kind, u.devices()[d])) continue;
        std::vector<std::string> names;
        std::string err;
        auto r = EvalSelector(sel, u.devices()[d], u.probes()[d], &names, &err, budget);
        if (r == SelResult::kTrue || r == SelResult::kMaybe) passes = true;
        if (r != SelResult::kError) all_errors = false;
        if (!err.empty() && error.empty()) error = err;
      }
    }
    if (passes) continue;
    std::string tag = "selector #" + std::to_string(i + 1);
    if (ap.kind == Kind::kGpu) {
      if (auto bound = CapacityLowerBound(*sel.ast.root, kGpuDomain, "memory")) {
        std::optional<k8s::Quantity> largest;
        std::string product;
        std::vector<std::string> where;
        for (const auto& u : units) {
          for (const auto& dev : u.devices()) {
            if (dev.kind != dra::DeviceKind::kGpu) continue;
            auto cit = dev.device.capacity.find(kGpuDomain);
            if (cit == dev.device.capacity.end()) continue;
            auto mit = cit->second.find("memory");
            if (mit == cit->second.end()) continue;
            int c = largest ? mit->second.Compare(*largest) : 1;
            if (c > 0) {
              largest = mit->second;
              where.clear();
              product.clear();
              auto ait = dev.device.attributes.find(kGpuDomain);
              if (ait != dev.device.attributes.end()) {
                if (auto pit = ait->second.find("productName");
                    pit != ait->second.end() && std::holds_alternative<std::string>(pit->second)) {
                  product = std::get<std::string>(pit->second);
                }
              }
            }
            if (c >= 0) where.insert(where.end(), u.nodes.begin(), u.nodes.end());
          }
        }
        if (largest) {
          *hint = "lower the memory floor to what the GPUs report (at most quantity('" + largest->ToString() +
                  "')), or add nodes with larger GPUs to the topology model";
          return "'memory' " + std::string(bound->strict ? ">" : ">=") + " " + bound->value.ToString() +
                 ": the largest GPU reports " + Human(*largest) + (product.empty() ? " (" : " on " + product + " (") +
                 Nodes(where) + ")";
        }
      }
    }
    *hint = "change " + tag + " of " + Describe(*ap.alt) + " so that it matches a " + noun +
            " the nodes have, or add such nodes to the topology model";
    if (all_errors && !error.empty()) return tag + " fails on every " + noun + ": " + Cut(error, 80);
    return tag + " (" + Cut(ap.alt->selectors[i].expression, 80) + ") matches no " + noun;
  }
  *hint = "relax the selectors of " + Describe(*ap.alt) + " so that some " + noun + " passes all of them";
  return "no " + noun + " passes all " + std::to_string(ap.selectors.size()) + " selectors together";
}

std::optional<Miss> RequestMiss(const Plan& p, const Units& units, std::size_t r) {
  const auto& rp = p.requests[r];
  // Feasible alone on some unit?
  for (const auto& u : units) {
    for (std::size_t a = 0; a < rp.alts.size(); ++a) {
      const auto& ap = rp.alts[a];
      if (!ap.simulated) {
        if (ap.kind != Kind::kGpuLike || u.nvidia > 0) return std::nullopt;
        continue;
      }
      if (ap.kind == Kind::kMig && u.mig_unknown) return std::nullopt;  // has an NVIDIA GPU
      if (u.eval[r][a]->candidates >= static_cast<std::size_t>(ap.need())) return std::nullopt;
    }
  }
  Miss m;
  m.pointer = rp.req->pointer;
  // The alternative that comes closest.
  const AltPlan* best_alt = nullptr;
  std::size_t best_a = 0;
  double best_ratio = -1;
  for (std::size_t a = 0; a < rp.alts.size(); ++a) {
    const auto& ap = rp.alts[a];
    if (!ap.simulated) continue;
    for (const auto& u : units) {
      double ratio = static_cast<double>(u.eval[r][a]->candidates) / static_cast<double>(ap.need());
      if (ratio > best_ratio) {
        best_ratio = ratio;
        best_alt = &ap;
        best_a = a;
      }
    }
  }
  if (best_alt == nullptr) {  // only passthrough (or other) alternatives, and no node has an NVIDIA GPU
    const auto& ap = rp.alts.front();
    m.message = Describe(*ap.alt) + " (" + ap.alt->device_class + "): no node of the topology model has an NVIDIA GPU";
    m.hint = "add GPU nodes to the topology model or request a device class their nodes provide";
    return m;
  }
  const AltPlan& ap = *best_alt;
  m.pointer = ap.alt->pointer;
  std::string head = Head(ap);
  if (rp.alts.size() > 1) head += ", the closest of " + std::to_string(rp.alts.size()) + " alternatives";
  std::size_t have = 0, best = 0, nvidia = 0;
  for (const auto& u : units) {
    have = std::max(have, ap.kind == Kind::kGpu ? u.gpus : ap.kind == Kind::kMig ? u.migs : u.nics);
    best = std::max(best, u.eval[r][best_a]->candidates);
    nvidia = std::max(nvidia, u.nvidia);
  }
  if (have == 0) {
    const bool no_mig = ap.kind == Kind::kMig && nvidia > 0;  // GPUs, all with MIG disabled
    m.message = head + ": no node of the topology model has " +
                (no_mig                  ? "MIG enabled (the exports record every GPU's MIG mode)"
                 : ap.kind == Kind::kNic ? "a NIC"
                                         : "an NVIDIA GPU");
    m.hint = no_mig ? "enable MIG on GPU nodes, or request full GPUs (class gpu.nvidia.com)"
                    : "add such nodes to the topology model or remove the request";
  } else if (best == 0) {
    m.message = head + ": no " + Noun(ap.kind, 1) + " qualifies on any node — " + SelectorReason(ap, units, &m.hint, p.budget);
  } else {
    std::vector<std::string> where;
    for (const auto& u : units) {
      if (u.eval[r][best_a]->candidates == best) where.insert(where.end(), u.nodes.begin(), u.nodes.end());
    }
    m.message = head + ": at most " + std::to_string(best) + " of " + std::to_string(ap.need()) + " " +
                Noun(ap.kind, ap.need()) + " qualify on one node (" + Nodes(where) + ")";
    m.hint = "lower count to at most " + std::to_string(best) + ", relax the selectors, or split the work";
  }
  return m;
}

// The constraint `ci` alone, with the requests it covers.
std::optional<Miss> ConstraintMiss(const Plan& p, const Units& units, std::size_t ci) {
  const auto& cp = p.constraints[ci];
  std::vector<bool> req_on(p.requests.size(), false), con_on(p.constraints.size(), false);
  con_on[ci] = true;
  bool any = false;
  for (std::size_t r = 0; r < p.requests.size(); ++r) {
    for (const auto& ap : p.requests[r].alts) {
      if (std::find(ap.constraints.begin(), ap.constraints.end(), ci) != ap.constraints.end()) req_on[r] = any = true;
    }
  }
  if (!any) return std::nullopt;
  for (const auto& u : units) {
    Solver s(p, u, req_on, con_on);
    if (s.Run()) return std::nullopt;
  }
  // How close: per unit and value, greedily count the devices of the covered requests (their first
  // covered alternative) that fit under one value (distinct: one device per value).
  int64_t need = 0;
  std::map<Kind, int64_t> needed;  // devices by kind
  std::vector<std::pair<std::size_t, std::size_t>> covered;  // (request, alternative)
  for (std::size_t r = 0; r < p.requests.size(); ++r) {
    if (!req_on[r]) continue;
    for (std::size_t a = 0; a < p.requests[r].alts.size(); ++a) {
      const auto& ap = p.requests[r].alts[a];
      if (std::find(ap.constraints.begin(), ap.constraints.end(), ci) == ap.constraints.end()) continue;
      covered.emplace_back(r, a);
      need += ap.need();
      needed[ap.kind] += ap.need();
      break;
    }
  }
  int64_t best = -1;
  std::string best_fp;
  std::vector<std::string> where;
  for (const auto& u : units) {
    int64_t k = 0;
    if (cp.match) {
      std::set<std::string> values;
      for (const auto& c : *u.cells[ci]) {
        if (c.state == Cell::kValue) values.insert(c.value);
      }
      for (const auto& v : values) {
        std::vector<char> taken(u.devices().size(), 0);
        int64_t got = 0;
        for (const auto& [r, a] : covered) {
          int64_t want = p.requests[r].alts[a].need(), n = 0;
          for (std::size_t d = 0; d < u.devices().size() && n < want; ++d) {
            if (taken[d] || u.eval[r][a]->match[d] == Match::kNo) continue;
            const Cell& c = (*u.cells[ci])[d];
            if (c.state == Cell::kMissing || (c.state == Cell::kValue && c.value != v)) continue;
            taken[d] = 1;
            ++n;
          }
          got += n;
        }
        k = std::max(k, got);
      }
    } else {
      std::set<std::string> values;
      for (const auto& [r, a] : covered) {
        for (std::size_t d = 0; d < u.devices().size(); ++d) {
          if (u.eval[r][a]->match[d] != Match::kNo && (*u.cells[ci])[d].state == Cell::kValue) {
            values.insert((*u.cells[ci])[d].value);
          }
        }
      }
      k = static_cast<int64_t>(values.size());
    }
    k = std::min(k, need);
    if (k > best) {
      best = k;
      best_fp = u.fingerprint;
      where.clear();
    }
    if (k == best && u.fingerprint == best_fp) where.insert(where.end(), u.nodes.begin(), u.nodes.end());
  }
  Miss m;
  m.pointer = cp.ref->pointer;
  std::string noun = needed.size() == 1 ? Noun(needed.begin()->first, need) : "devices";
  if (needed.size() > 1) {
    std::string parts;
    for (const auto& [kind, n] : needed) parts += (parts.empty() ? "" : " + ") + std::to_string(n) + " " + Noun(kind, n);
    noun += " (" + parts + ")";
  }
  std::string relation;
  if (!cp.match) {
    relation = "with distinct values (distinctAttribute " + cp.attr + ")";
  } else if (cp.attr == "resource.kubernetes.io/pcieRoot") {
    relation = "under one PCIe root (matchAttribute " + cp.attr + ")";
  } else {
    relation = "with one value of matchAttribute " + cp.attr;
  }
  m.message = "at most " + std::to_string(std::max<int64_t>(best, 0)) + " of " + std::to_string(need) + " " + noun +
              " " + relation + " on shape " + best_fp + " (" + Nodes(where) + ")";
  std::string under = cp.attr == "resource.kubernetes.io/pcieRoot" ? "one PCIe root" : "one value of " + cp.attr;
  m.hint = cp.match ? "request at most " + std::to_string(std::max<int64_t>(best, 0)) + " devices under " + under +
                          ", drop the constraint, or split the requests into separate claims"
                    : "request fewer devices than there are distinct values, or drop the distinctAttribute constraint";
  return m;
}

Miss TogetherMiss(const Plan& p, const Units& units, const ClaimRef& claim) {
  std::string parts;
  for (const auto& rp : p.requests) {
    for (const auto& ap : rp.alts) {
      if (!ap.simulated) continue;
      if (!parts.empty()) parts += ", ";
      parts += "\"" + ap.alt->ref + "\"" + (ap.alt->all ? " (All)" : " x" + std::to_string(ap.alt->count));
      break;
    }
  }
  std::size_t max_gpus = 0;
  std::vector<std::string> where;
  for (const auto& u : units) {
    if (u.gpus > max_gpus) {
      max_gpus = u.gpus;
      where.clear();
    }
    if (u.gpus == max_gpus) where.insert(where.end(), u.nodes.begin(), u.nodes.end());
  }
  Miss m;
  m.pointer = claim.spec_pointer + "/devices";
  m.message = "no node fits the requests together (" + parts + ": distinct devices";
  m.message += p.constraints.empty() ? "" : " and all constraints";
  m.message += "); the largest node has " + std::to_string(max_gpus) + " " + Noun(Kind::kGpu, static_cast<int64_t>(max_gpus)) +
               " (" + Nodes(where) + ")";
  m.hint = "reduce the number of devices or relax the selectors and constraints so that all requests fit one node";
  return m;
}

}  // namespace

SatisfiabilityReport CheckSatisfiable(const admission::Json& object, const policy::Policy& policy,
                                      const topology::Snapshot& topology, cel::Budget* budget) {
  SatisfiabilityReport rep;
  if (topology.node_count() == 0) {
    rep.skip_reason = "the topology model has no nodes";
    return rep;
  }
  admission::AdmissionRequest req = admission::CreateRequestFor(object);
  auto claim = FindClaim(req);
  if (!claim) {
    rep.skip_reason = "not a resource.k8s.io ResourceClaim or ResourceClaimTemplate";
    return rep;
  }
  Plan plan = MakePlan(*claim, policy);
  plan.budget = budget;
  bool relevant = false;
  for (const auto& rp : plan.requests) {
    for (const auto& ap : rp.alts) {
      Kind k = ClassKind(policy, ap.alt->device_class);
      relevant = relevant || k != Kind::kOther;
    }
  }
  if (!relevant) {
    rep.skip_reason = "no GPU or NIC request";
    return rep;
  }

  Units units;
  for (const auto& group : topology.shapes()) {
    if (group.nodes.empty()) continue;
    const topology::NodeTopology* rep = topology.Find(group.nodes.front());
    if (rep == nullptr) continue;
    Unit& base = units.emplace_back();
    base.fingerprint = group.shape->fingerprint;
    EvaluateUnit(plan, policy, topology, *rep, base);
    if (!plan.reads_uuid) {
      base.nodes = group.nodes;
      continue;
    }
    // UUIDs differ per node: one unit per node, sharing the representative's devices.
    base.nodes = {group.nodes.front()};
    for (std::size_t i = 1; i < group.nodes.size(); ++i) {
      const topology::NodeTopology* node = topology.Find(group.nodes[i]);
      if (node == nullptr) continue;
      Unit& u = units.emplace_back();
      u.nodes = {group.nodes[i]};
      u.fingerprint = base.fingerprint;
      EvaluateUuidNode(plan, *node, base, u);  // deque: `base` stays valid
    }
  }

  // The review's CEL budget ran out: the evaluations are incomplete, so there is no verdict.
  auto out_of_budget = [&]() {
    SatisfiabilityReport r;
    r.budget_exhausted = true;
    r.skip_reason = budget->Reason();
    return r;
  };
  if (budget != nullptr && budget->exhausted()) return out_of_budget();
  std::vector<std::string> exceeded, mig_assumed;
  std::set<std::string> unknown;
  for (auto& u : units) {
    Solver s(plan, u, std::vector<bool>(plan.requests.size(), true), std::vector<bool>(plan.constraints.size(), true));
    u.satisfiable = s.Run();
    u.exceeded = s.exceeded();
    if (u.satisfiable) {
      rep.nodes.insert(rep.nodes.end(), u.nodes.begin(), u.nodes.end());
      unknown.insert(s.unknown().begin(), s.unknown().end());
      if (s.assumed_mig()) mig_assumed.insert(mig_assumed.end(), u.nodes.begin(), u.nodes.end());
    }
    if (u.exceeded) exceeded.insert(exceeded.end(), u.nodes.begin(), u.nodes.end());
  }
  std::sort(rep.nodes.begin(), rep.nodes.end());
  rep.unknown.assign(unknown.begin(), unknown.end());

  if (!rep.nodes.empty()) {
    rep.verdict = Verdict::kSatisfiable;
    std::vector<std::string> notes = plan.notes;
    if (!exceeded.empty()) notes.push_back("search budget exhausted on " + Nodes(exceeded) + "; assumed satisfiable");
    if (!mig_assumed.empty()) {
      notes.push_back("MIG requests assumed to fit on " + Nodes(mig_assumed) +
                      ", whose export does not record the GPUs' MIG mode");
    }
    if (!rep.unknown.empty()) {
      std::string n = "assumed to match where the simulation does not know";
      for (const auto& x : rep.unknown) n += " " + x;
      notes.push_back(n);
    }
    for (const auto& n : notes) rep.message += (rep.message.empty() ? "" : "; ") + n;
    return rep;
  }

  rep.verdict = Verdict::kUnsatisfiable;
  std::optional<Miss> miss;
  for (std::size_t r = 0; r < plan.requests.size() && !miss; ++r) miss = RequestMiss(plan, units, r);
  for (std::size_t ci = 0; ci < plan.constraints.size() && !miss; ++ci) miss = ConstraintMiss(plan, units, ci);
  if (!miss) miss = TogetherMiss(plan, units, *claim);
  if (budget != nullptr && budget->exhausted()) return out_of_budget();
  rep.message = Cut(miss->message, kMaxMessage);
  rep.pointer = miss->pointer;
  rep.hint = miss->hint;
  return rep;
}

ClaimPlacement PlaceClaim(const admission::Json& object, const policy::Policy& policy,
                          const topology::Snapshot& topology, const topology::NodeTopology& node) {
  ClaimPlacement out;
  admission::AdmissionRequest req = admission::CreateRequestFor(object);
  auto claim = FindClaim(req);
  if (!claim) return out;
  Plan plan = MakePlan(*claim, policy);
  Unit u;
  u.nodes = {node.name};
  EvaluateUnit(plan, policy, topology, node, u);
  out.devices = u.own_devices;
  const std::vector<bool> all_requests(plan.requests.size(), true);
  const std::vector<bool> all_constraints(plan.constraints.size(), true);
  Solver whole(plan, u, all_requests, all_constraints);
  out.satisfiable = whole.Run();
  out.exceeded = whole.exceeded();
  for (std::size_t r = 0; r < plan.requests.size(); ++r) {
    ClaimPlacement::Request pr;
    pr.name = plan.requests[r].req->name;
    for (std::size_t d = 0; out.satisfiable && d < u.own_devices->size(); ++d) {
      bool candidate = false;
      for (std::size_t a = 0; a < plan.requests[r].alts.size() && !candidate; ++a) {
        candidate = plan.requests[r].alts[a].simulated && u.eval[r][a]->match[d] != Match::kNo;
      }
      if (!candidate) continue;
      Solver s(plan, u, all_requests, all_constraints);
      s.Force(r, d);
      if (s.Run()) pr.devices.push_back(d);
      out.exceeded = out.exceeded || s.exceeded();
    }
    out.requests.push_back(std::move(pr));
  }
  return out;
}

}  // namespace draguard::dra
