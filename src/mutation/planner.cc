// The claim generator's placement planner: from the topology model, which GPUs (and NIC) an entry
// asks for and on which nodes (see docs/mutation.md for the algorithm).
#include "planner.h"

#include <algorithm>

#include "draguard/cel/evaluator.h"
#include "draguard/dra/devices.h"
#include "draguard/topology/snapshot.h"
#include "internal.h"

namespace draguard::mutation::internal {
namespace {

constexpr std::size_t kMaxAlternatives = 8;  // DRA's firstAvailable limit

using Selectors = std::vector<std::shared_ptr<const cel::CheckedExpr>>;

std::shared_ptr<const View> BuildView(const topology::Snapshot* snap, const policy::Policy& policy) {
  auto v = std::make_shared<View>();
  v->snapshot = snap;
  if (snap == nullptr) return v;
  dra::NicOptions nic{policy.mutation.nic.driver};
  for (const auto& group : snap->shapes()) {
    if (group.nodes.empty()) continue;
    const topology::NodeTopology* node = snap->Find(group.nodes.front());
    if (node == nullptr) continue;
    ShapeDevices sd{&group, dra::SimulateNode(*snap, *node, nic)};
    bool gpu = false;
    for (const auto& d : sd.devices()) {
      if (d.kind != dra::DeviceKind::kGpu) continue;
      gpu = true;
      auto cap = d.device.capacity.find(std::string(topology::kNvidiaDriver));
      if (cap == d.device.capacity.end()) continue;
      auto mem = cap->second.find("memory");
      if (mem == cap->second.end()) continue;
      if (auto bytes = mem->second.AsInt64(); bytes && *bytes > 0) v->memories.insert(static_cast<uint64_t>(*bytes));
    }
    if (!gpu) continue;
    v->gpu_nodes += group.nodes.size();
    v->shapes.push_back(std::move(sd));
  }
  return v;
}

// "shape 1a2b3c4d5e6f7a8b (nodes a, b +3 more)"
std::string DescribeShape(const topology::ShapeGroup& g) {
  std::string out = "shape " + g.shape->fingerprint + " (node" + (g.nodes.size() == 1 ? " " : "s ");
  for (std::size_t i = 0; i < g.nodes.size() && i < 3; ++i) out += (i ? ", " : "") + g.nodes[i];
  if (g.nodes.size() > 3) out += " +" + std::to_string(g.nodes.size() - 3) + " more";
  return out + ")";
}

bool ReadsUnknown(const cel::CheckedExpr& sel, const dra::Device& d) {
  for (const auto& ref : sel.references) {
    const std::string domain = ref.domain.empty() ? d.device.driver : ref.domain;
    if (std::find(d.unknown.begin(), d.unknown.end(), domain + "/" + ref.name) != d.unknown.end()) return true;
  }
  return false;
}

// GPU indexes (into shape->gpus) of a shape that every selector may match.
std::vector<uint32_t> Qualifying(const ShapeDevices& sd, const Selectors& selectors) {
  std::vector<uint32_t> out;
  for (const auto& d : sd.devices()) {
    if (d.kind != dra::DeviceKind::kGpu) continue;
    bool ok = true;
    for (const auto& sel : selectors) {
      auto r = cel::EvaluateSelectorValue(*sel, d.value);
      if (r.ok() && *r) continue;
      // A selector that reads what the export cannot know (memory of an nvml-only export, the
      // driver version) may match on the real device.
      if (!ReadsUnknown(*sel, d)) {
        ok = false;
        break;
      }
    }
    if (ok) out.push_back(d.index);
  }
  return out;
}

bool HasRdmaNicUnder(const ShapeDevices& sd, uint32_t root) {
  const auto& shape = *sd.group->shape;
  for (const auto& nic : shape.nics) {
    if (nic.rdma && nic.pcie_root == root) return true;
  }
  return false;
}

std::vector<uint32_t> Intersect(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  std::vector<uint32_t> out;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

std::string InList(const std::string& domain, const std::string& attr, const std::vector<std::string>& values) {
  std::string list;
  for (const auto& v : values) list += (list.empty() ? "" : ", ") + CelString(v).value_or("''");
  const std::string ref = "device.attributes['" + domain + "']";
  return "'" + attr + "' in " + ref + " && " + ref + "." + attr + " in [" + list + "]";
}

// What one GPU entry is planned against: the GPUs of each shape its selectors may match.
struct Request {
  Request(const std::string& what, std::size_t n, bool nic, const View& view)
      : what(what), n(n), nic(nic), view(view) {}

  const std::string& what;  // the filter in words, for messages
  std::size_t n;            // GPUs
  bool nic;                 // with an RDMA NIC under the GPUs' root
  const View& view;
  std::map<const ShapeDevices*, std::vector<uint32_t>> q;  // qualifying GPUs per shape
  std::vector<const ShapeDevices*> enough;                 // shapes with at least n of them
  const ShapeDevices* best_shape = nullptr;                // the shape with the most of them
  std::size_t best = 0;                                    // how many that is

  // Restricts `plan` to `shapes` (no restriction when that is every shape).
  void RestrictTo(Plan& plan, const std::vector<const ShapeDevices*>& shapes) const {
    if (shapes.size() == view.shapes.size()) return;
    std::set<std::size_t> idx;
    for (const auto* sd : shapes) idx.insert(static_cast<std::size_t>(sd - view.shapes.data()));
    plan.shapes = std::move(idx);
  }
};

// Named alternatives of a firstAvailable request, each restricting `attr` of `domain` to its values.
void NameAlternatives(std::vector<Alternative>& alts, const char* prefix, const std::string& domain,
                      const std::string& attr, Plan& plan) {
  for (auto& alt : alts) {
    alt.name = prefix + std::to_string(plan.alternatives.size() + 1);
    alt.restriction = InList(domain, attr, alt.values);
    plan.alternatives.push_back(std::move(alt));
  }
}

// NVLink cliques named by the GPUs' UUIDs: cliques are per node.
Result<Plan> PlanNvlinkCliques(const Request& r, Plan plan) {
  std::vector<Alternative> alts;
  for (const auto* sd : r.enough) {
    for (const auto& node_name : sd->group->nodes) {
      const topology::NodeTopology* node = r.view.snapshot->Find(node_name);
      if (node == nullptr) continue;
      for (const auto& clique : sd->group->shape->derived.link_cliques) {
        auto members = Intersect(clique, r.q.at(sd));
        if (members.size() < r.n) continue;
        Alternative alt;
        for (uint32_t g : members) {
          auto uuid = node->GpuUuid(g);
          if (!uuid) break;
          alt.values.emplace_back(*uuid);
        }
        if (alt.values.size() != members.size()) continue;
        std::sort(alt.values.begin(), alt.values.end());
        alt.fit = members.size();
        alt.nodes.insert(node_name);
        alts.push_back(std::move(alt));
      }
    }
  }
  if (alts.empty()) {
    return Status::FailedPrecondition("no node has " + std::to_string(r.n) + " NVLink-connected GPUs matching " +
                                      r.what + " with known UUIDs");
  }
  std::stable_sort(alts.begin(), alts.end(), [](const Alternative& a, const Alternative& b) {
    return a.fit != b.fit ? a.fit < b.fit : *a.nodes.begin() < *b.nodes.begin();
  });
  if (alts.size() > kMaxAlternatives) alts.resize(kMaxAlternatives);
  std::set<std::string> nodes;
  for (const auto& alt : alts) nodes.insert(alt.nodes.begin(), alt.nodes.end());
  NameAlternatives(alts, "nvlink-", "gpu.nvidia.com", "uuid", plan);
  if (nodes.size() < r.view.gpu_nodes) plan.nodes = std::move(nodes);
  return plan;
}

// NVLink: NVSwitch (fully connected) shapes, else cliques identified by GPU UUIDs.
Result<Plan> PlanNvlink(const Request& r, Plan plan) {
  if (r.nic) {
    return Status::FailedPrecondition("an RDMA NIC aligned with NVLink-connected GPUs cannot be expressed in DRA "
                                      "(the NIC can only share a PCIe root with GPUs); drop draguard.io/nic or "
                                      "the nvlink interconnect");
  }
  std::vector<const ShapeDevices*> full;
  for (const auto* sd : r.enough) {
    if (sd->group->shape->derived.link_fully_connected) full.push_back(sd);
  }
  plan.placement = Placement::kNvlink;
  if (full.empty()) return PlanNvlinkCliques(r, std::move(plan));
  r.RestrictTo(plan, full);
  return plan;
}

// The shapes that can place the GPUs (and the NIC) under one PCIe root; `best_root` receives the
// most qualifying GPUs under one root.
std::vector<const ShapeDevices*> RootedShapes(const Request& r, std::size_t* best_root) {
  std::vector<const ShapeDevices*> rooted;
  for (const auto* sd : r.enough) {
    const auto& d = sd->group->shape->derived;
    bool ok = false;
    for (uint32_t root = 0; root < d.gpus_by_root.size(); ++root) {
      std::size_t k = Intersect(d.gpus_by_root[root], r.q.at(sd)).size();
      *best_root = std::max(*best_root, k);
      if (k >= r.n && (!r.nic || HasRdmaNicUnder(*sd, root))) ok = true;
    }
    if (ok) rooted.push_back(sd);
  }
  return rooted;
}

// Alternatives restricting pcieRoot to the roots local to one NUMA node, tightest first;
// `best_numa` receives the most qualifying GPUs local to one NUMA node.
std::vector<Alternative> NumaAlternatives(const Request& r, std::size_t* best_numa) {
  std::map<std::vector<std::string>, Alternative> by_roots;
  for (const auto* sd : r.enough) {
    const auto& shape = *sd->group->shape;
    for (const auto& numa : shape.numa_nodes) {
      std::vector<std::string> roots;
      std::vector<uint32_t> gpus;
      for (uint32_t root = 0; root < shape.pcie_roots.size(); ++root) {
        const auto& nn = shape.pcie_roots[root].numa_nodes;
        if (std::find(nn.begin(), nn.end(), numa.os_index) == nn.end()) continue;
        auto k = Intersect(shape.derived.gpus_by_root[root], r.q.at(sd));
        if (k.empty()) continue;
        roots.push_back(shape.pcie_roots[root].id);
        gpus.insert(gpus.end(), k.begin(), k.end());
      }
      *best_numa = std::max(*best_numa, gpus.size());
      if (gpus.size() < r.n) continue;
      std::sort(roots.begin(), roots.end());
      Alternative& alt = by_roots[roots];
      alt.values = roots;
      alt.fit = std::max(alt.fit, gpus.size());
      alt.from.insert(sd);
    }
  }
  std::vector<Alternative> alts;
  for (auto& [roots, alt] : by_roots) alts.push_back(std::move(alt));
  std::stable_sort(alts.begin(), alts.end(), [](const Alternative& a, const Alternative& b) {
    return a.fit != b.fit ? a.fit < b.fit : a.values < b.values;
  });
  if (alts.size() > kMaxAlternatives) alts.resize(kMaxAlternatives);
  return alts;
}

// The shapes on which every alternative selects NUMA-local GPUs (root names repeat across shapes,
// so an alternative from one shape could span NUMA nodes on another) and some alternative fits.
std::vector<const ShapeDevices*> NumaSafeShapes(const Request& r, const std::vector<Alternative>& alts) {
  std::vector<const ShapeDevices*> safe;
  for (const auto* sd : r.enough) {
    const auto& shape = *sd->group->shape;
    bool ok = true;
    bool useful = false;
    for (const auto& alt : alts) {
      std::vector<uint32_t> sel;
      for (uint32_t g : r.q.at(sd)) {
        const std::string& root = shape.PcieRootId(shape.gpus[g]);
        if (std::binary_search(alt.values.begin(), alt.values.end(), root)) sel.push_back(g);
      }
      if (sel.size() < r.n) continue;
      useful = true;
      std::vector<uint32_t> common = shape.gpus[sel.front()].numa_nodes;
      for (uint32_t g : sel) common = Intersect(common, shape.gpus[g].numa_nodes);
      if (common.empty()) ok = false;
    }
    if (ok && useful) safe.push_back(sd);
  }
  return safe;
}

// NUMA-local placement; nullopt when no shape can use it.
std::optional<Plan> PlanNuma(const Request& r, Plan plan, std::size_t* best_numa) {
  std::vector<Alternative> alts = NumaAlternatives(r, best_numa);
  std::vector<const ShapeDevices*> safe = NumaSafeShapes(r, alts);
  if (safe.empty()) return std::nullopt;
  plan.placement = Placement::kNuma;
  std::vector<Alternative> valid;
  for (auto& alt : alts) {
    bool from_safe = std::any_of(alt.from.begin(), alt.from.end(), [&](const ShapeDevices* sd) {
      return std::find(safe.begin(), safe.end(), sd) != safe.end();
    });
    if (from_safe) valid.push_back(std::move(alt));
  }
  NameAlternatives(valid, "numa-", "resource.kubernetes.io", "pcieRoot", plan);
  r.RestrictTo(plan, safe);
  return plan;
}

// PCIe root, else NUMA node, else unaligned when the policy allows it.
Result<Plan> PlanAligned(const Request& r, Plan plan, const policy::Policy& policy) {
  std::size_t best_root = 0;
  std::vector<const ShapeDevices*> rooted = RootedShapes(r, &best_root);
  if (!rooted.empty()) {
    plan.placement = Placement::kPcieRoot;
    plan.constraint = true;
    r.RestrictTo(plan, rooted);
    return plan;
  }
  std::size_t best_numa = 0;
  if (!r.nic) {
    if (auto numa = PlanNuma(r, plan, &best_numa)) return std::move(*numa);
  }
  std::string why = "no node can place " + std::to_string(r.n) + " GPUs matching " + r.what +
                    (r.nic ? " and an RDMA NIC under one PCIe root" : " under one PCIe root or NUMA node") +
                    "; at most " + std::to_string(r.nic ? best_root : std::max(best_root, best_numa)) +
                    (r.nic ? " under a root" : "") + " on " + DescribeShape(*r.best_shape->group);
  if (!policy.mutation.allow_unaligned) return Status::FailedPrecondition(why);
  plan.placement = Placement::kUnaligned;
  plan.note = why + "; placed unaligned because the policy sets mutation.unaligned: allow";
  r.RestrictTo(plan, r.enough);
  return plan;
}

Result<Plan> PlanGpus(const std::string& what, int64_t count, bool nic, const std::string& interconnect,
                      const View& view, const Selectors& selectors, const policy::Policy& policy) {
  Plan plan;
  if (view.shapes.empty()) {
    // No topology: the strongest placement, unchecked.
    if (count >= 2 || nic) {
      plan.placement = Placement::kPcieRoot;
      plan.constraint = true;
      plan.note = "no topology is loaded: the " + std::string(nic ? "GPUs and NIC" : "GPUs") +
                  " are constrained to one PCIe root without checking that any node can provide that";
    }
    return plan;
  }
  Request r(what, static_cast<std::size_t>(count), nic, view);
  for (const auto& sd : view.shapes) {
    std::vector<uint32_t>& q = r.q[&sd] = Qualifying(sd, selectors);
    if (q.size() > r.best || r.best_shape == nullptr) r.best = q.size(), r.best_shape = &sd;
    if (q.size() >= r.n) r.enough.push_back(&sd);
  }
  if (r.enough.empty()) {
    return Status::FailedPrecondition("no node has " + std::to_string(r.n) + " GPUs matching " + what + "; at most " +
                                      std::to_string(r.best) + " on " + DescribeShape(*r.best_shape->group));
  }
  if (r.n == 1 && !nic) {
    r.RestrictTo(plan, r.enough);
    return plan;
  }
  if (interconnect == "nvlink") return PlanNvlink(r, std::move(plan));
  return PlanAligned(r, std::move(plan), policy);
}

}  // namespace

Result<std::shared_ptr<const cel::CheckedExpr>> View::Compile(const std::string& text) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = compiled_.find(text);
  if (it != compiled_.end()) return it->second;
  auto c = cel::CompileSelector(text);
  if (!c.ok()) return c.status();
  auto ptr = std::make_shared<const cel::CheckedExpr>(std::move(*c));
  if (compiled_.size() < 1024) compiled_.emplace(text, ptr);
  return ptr;
}

std::shared_ptr<const View> GetView(const topology::Snapshot* snap, const policy::Policy& policy) {
  if (snap == nullptr) return BuildView(nullptr, policy);
  return std::static_pointer_cast<const View>(snap->Memo(
      "mutation.view/" + policy.mutation.nic.driver,
      [&]() -> std::shared_ptr<const void> { return BuildView(snap, policy); }));
}

Result<Plan> PlanEntry(const std::string& who, const RequestProfile& p, bool nic, const std::string& interconnect,
                       const std::vector<std::string>& selectors, const View& view, const policy::Policy& policy) {
  Selectors compiled;
  for (const auto& text : selectors) {
    if (view.shapes.empty()) break;  // nothing to evaluate against
    auto c = view.Compile(text);
    if (!c.ok()) return Status::InvalidArgument("generated selector does not compile: " + c.status().message());
    compiled.push_back(std::move(*c));
  }
  if (p.kind == RequestProfile::Kind::kShared) return Plan{};
  std::string filter = p.memory.empty() ? "" : ">= " + p.memory;
  if (!p.product.empty()) filter += (filter.empty() ? "" : ", ") + p.product;
  if (filter.empty()) filter = "the request";
  auto planned = PlanGpus(filter, p.count, nic, interconnect, view, compiled, policy);
  if (!planned.ok()) return Status(planned.status().code(), who + ": " + planned.status().message());
  return planned;
}

void NodeRestriction::Add(const Plan& plan) {
  auto intersect = [](auto& acc, const auto& more) {
    if (!more) return;
    if (!acc) {
      acc = *more;
      return;
    }
    std::decay_t<decltype(*acc)> both;
    std::set_intersection(acc->begin(), acc->end(), more->begin(), more->end(), std::inserter(both, both.end()));
    acc = std::move(both);
  };
  intersect(shapes, plan.shapes);
  intersect(nodes, plan.nodes);
}

Status ResolveRestriction(const NodeRestriction& where, const View& view, const policy::Policy& policy,
                          GeneratedTemplate* out) {
  // Named nodes (NVLink cliques) of the allowed shapes, else shapes.
  std::optional<std::set<std::string>> nodes = where.nodes;
  const auto& shapes = where.shapes;
  if (nodes && shapes) {
    std::set<std::string> kept;
    for (const auto& name : *nodes) {
      const topology::NodeTopology* node = view.snapshot->Find(name);
      for (std::size_t i : *shapes) {
        if (node != nullptr && node->shape == view.shapes[i].group->shape) kept.insert(name);
      }
    }
    nodes = std::move(kept);
  }
  std::size_t restricted_nodes = 0;
  if (nodes) {
    restricted_nodes = nodes->size();
  } else if (shapes) {
    for (std::size_t i : *shapes) restricted_nodes += view.shapes[i].group->nodes.size();
  }
  if ((nodes || shapes) && restricted_nodes == 0) {
    return Status::FailedPrecondition("no single node can place every converted container's devices together");
  }
  if (nodes) {
    out->nodes.assign(nodes->begin(), nodes->end());
  } else if (shapes) {
    for (std::size_t i : *shapes) out->shapes.push_back(view.shapes[i].group->shape->fingerprint);
    std::sort(out->shapes.begin(), out->shapes.end());
    if (restricted_nodes <= policy.mutation.hostname_affinity_limit) {
      for (std::size_t i : *shapes) {
        out->nodes.insert(out->nodes.end(), view.shapes[i].group->nodes.begin(), view.shapes[i].group->nodes.end());
      }
      std::sort(out->nodes.begin(), out->nodes.end());
    }
  }
  return Status::Ok();
}

}  // namespace draguard::mutation::internal
