// The claim generator: one ResourceClaimTemplate per converted Pod, aligned from the topology
// model (see docs/mutation.md for the algorithm).
#include <algorithm>
#include <map>
#include <mutex>
#include <set>

#include "draguard/cel/checker.h"
#include "draguard/cel/evaluator.h"
#include "draguard/devsim/devices.h"
#include "draguard/engine/satisfiability.h"
#include "draguard/mutation/mutation.h"
#include "draguard/topology/snapshot.h"
#include "internal.h"

namespace draguard::mutation {
namespace {

using admission::Json;
using internal::CelString;

constexpr std::size_t kMaxAlternatives = 8;  // DRA's firstAvailable limit
constexpr const char* kPcieRootAttr = "resource.kubernetes.io/pcieRoot";

// One distinct shape with its simulated devices (from its first node).
struct ShapeDevices {
  const topology::ShapeGroup* group = nullptr;
  std::shared_ptr<const std::vector<devsim::Device>> simulated;  // shared with the snapshot's memo
  const std::vector<devsim::Device>& devices() const { return *simulated; }
};

// The topology as the planner needs it. Built once per snapshot (Snapshot::Memo) and immutable
// afterwards, except for the cache of compiled selectors.
struct View {
  const topology::Snapshot* snapshot = nullptr;
  std::vector<ShapeDevices> shapes;  // shapes with at least one NVIDIA GPU
  std::size_t gpu_nodes = 0;         // nodes of those shapes
  std::set<uint64_t> memories;       // GPU memory the simulated devices report

  // Compiles a selector once per view.
  Result<std::shared_ptr<const cel::CheckedExpr>> Compile(const std::string& text) const {
    std::lock_guard<std::mutex> lock(mu);
    auto it = compiled.find(text);
    if (it != compiled.end()) return it->second;
    auto c = cel::CompileSelector(text);
    if (!c.ok()) return c.status();
    auto ptr = std::make_shared<const cel::CheckedExpr>(std::move(*c));
    if (compiled.size() < 1024) compiled.emplace(text, ptr);
    return ptr;
  }
  // Templates generated on this view, by MemoKey.
  std::shared_ptr<const GeneratedTemplate> Remembered(const std::string& key) const {
    std::lock_guard<std::mutex> lock(mu);
    auto it = templates.find(key);
    return it == templates.end() ? nullptr : it->second;
  }
  void Remember(const std::string& key, const GeneratedTemplate& t) const {
    std::lock_guard<std::mutex> lock(mu);
    if (templates.size() >= 4096) templates.clear();  // bounded; rebuilt on demand
    templates.emplace(key, std::make_shared<const GeneratedTemplate>(t));
  }
  mutable std::mutex mu;
  mutable std::map<std::string, std::shared_ptr<const cel::CheckedExpr>> compiled;  // GUARDED_BY(mu)
  mutable std::map<std::string, std::shared_ptr<const GeneratedTemplate>> templates;  // GUARDED_BY(mu)
};

// Everything GenerateTemplate reads besides the view: the policy (by its fingerprint, so every
// field counts), the namespace and the profile. Empty, so nothing is remembered, for a policy
// without a fingerprint.
std::string MemoKey(const ClaimProfile& profile, std::string_view ns, const policy::Policy& policy) {
  if (policy.fingerprint.empty()) return "";
  std::string k;
  auto add = [&k](std::string_view v) {
    k += std::to_string(v.size());
    k += ':';
    k += v;
  };
  add(policy.fingerprint);
  add(ns);
  for (const auto& e : profile.entries) {
    const RequestProfile& p = e.profile;
    add(e.request);
    add(std::to_string(static_cast<int>(p.kind)) + "/" + std::to_string(p.count) + "/" + std::to_string(p.mps_threads) +
        (p.latency_sensitive ? "/ls" : "/-"));
    add(p.mig_profile);
    add(p.memory);
    add(p.product);
    add(p.mps_memory);
  }
  add(profile.nic ? "nic" : "-");
  add(profile.interconnect);
  return k;
}

std::shared_ptr<const View> BuildView(const topology::Snapshot* snap, const policy::Policy& policy) {
  auto v = std::make_shared<View>();
  v->snapshot = snap;
  if (snap == nullptr) return v;
  devsim::NicOptions nic{policy.mutation.nic.driver};
  for (const auto& group : snap->shapes()) {
    if (group.nodes.empty()) continue;
    const topology::NodeTopology* node = snap->Find(group.nodes.front());
    if (node == nullptr) continue;
    ShapeDevices sd{&group, devsim::SimulateNode(*snap, *node, nic)};
    bool gpu = false;
    for (const auto& d : sd.devices()) {
      if (d.kind != devsim::DeviceKind::kGpu) continue;
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

// The view of `snap`, built on first use and kept with the snapshot.
std::shared_ptr<const View> GetView(const topology::Snapshot* snap, const policy::Policy& policy) {
  if (snap == nullptr) return BuildView(nullptr, policy);
  return std::static_pointer_cast<const View>(snap->Memo(
      "mutation.view/" + policy.mutation.nic.driver,
      [&]() -> std::shared_ptr<const void> { return BuildView(snap, policy); }));
}

// "shape 1a2b3c4d5e6f7a8b (nodes a, b +3 more)"
std::string DescribeShape(const topology::ShapeGroup& g) {
  std::string out = "shape " + g.shape->fingerprint + " (node" + (g.nodes.size() == 1 ? " " : "s ");
  for (std::size_t i = 0; i < g.nodes.size() && i < 3; ++i) out += (i ? ", " : "") + g.nodes[i];
  if (g.nodes.size() > 3) out += " +" + std::to_string(g.nodes.size() - 3) + " more";
  return out + ")";
}

bool ReadsUnknown(const cel::CheckedExpr& sel, const devsim::Device& d) {
  for (const auto& ref : sel.references) {
    const std::string domain = ref.domain.empty() ? d.device.driver : ref.domain;
    if (std::find(d.unknown.begin(), d.unknown.end(), domain + "/" + ref.name) != d.unknown.end()) return true;
  }
  return false;
}

// GPU indexes (into shape->gpus) of a shape that every selector may match.
std::vector<uint32_t> Qualifying(const ShapeDevices& sd,
                                 const std::vector<std::shared_ptr<const cel::CheckedExpr>>& selectors) {
  std::vector<uint32_t> out;
  for (const auto& d : sd.devices()) {
    if (d.kind != devsim::DeviceKind::kGpu) continue;
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

// One firstAvailable alternative: a selector restriction and the nodes where it is valid.
struct Alternative {
  std::string name;                // "numa-1", "nvlink-1"
  std::string restriction;         // extra selector
  std::vector<std::string> values; // roots or UUIDs, for matching and messages
  std::size_t fit = 0;             // qualifying GPUs it offers (smaller = tighter)
  std::set<std::string> nodes;     // NVLink: the node it names
  std::set<const ShapeDevices*> from;  // NUMA: the shapes it was derived from
};

// The placement of one entry.
struct Plan {
  Placement placement = Placement::kNone;
  std::vector<Alternative> alternatives;  // kNuma / kNvlink with cliques
  bool constraint = false;                // pcieRoot matchAttribute over the entry's requests
  std::optional<std::set<std::size_t>> shapes;  // restriction to view.shapes indexes; nullopt = any
  std::optional<std::set<std::string>> nodes;   // restriction to named nodes (NVLink cliques)
  std::string note;                       // for warnings
};

std::string InList(const std::string& domain, const std::string& attr, const std::vector<std::string>& values) {
  std::string list;
  for (const auto& v : values) list += (list.empty() ? "" : ", ") + CelString(v).value_or("''");
  const std::string ref = "device.attributes['" + domain + "']";
  return "'" + attr + "' in " + ref + " && " + ref + "." + attr + " in [" + list + "]";
}

Result<Plan> PlanGpus(const std::string& what, int64_t count, bool nic, const std::string& interconnect,
                      const View& view, const std::vector<std::shared_ptr<const cel::CheckedExpr>>& selectors,
                      const policy::Policy& policy) {
  Plan plan;
  const std::size_t n = static_cast<std::size_t>(count);
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
  std::map<const ShapeDevices*, std::vector<uint32_t>> q;
  std::size_t best = 0;
  const ShapeDevices* best_shape = nullptr;
  std::vector<const ShapeDevices*> enough;
  for (const auto& sd : view.shapes) {
    q[&sd] = Qualifying(sd, selectors);
    if (q[&sd].size() > best || best_shape == nullptr) best = q[&sd].size(), best_shape = &sd;
    if (q[&sd].size() >= n) enough.push_back(&sd);
  }
  if (enough.empty()) {
    return Status::FailedPrecondition("no node has " + std::to_string(n) + " GPUs matching " + what + "; at most " +
                                      std::to_string(best) + " on " + DescribeShape(*best_shape->group));
  }
  auto restrict_to = [&](const std::vector<const ShapeDevices*>& shapes) {
    if (shapes.size() == view.shapes.size()) return;
    std::set<std::size_t> idx;
    for (const auto* sd : shapes) idx.insert(static_cast<std::size_t>(sd - view.shapes.data()));
    plan.shapes = std::move(idx);
  };
  if (n == 1 && !nic) {
    restrict_to(enough);
    return plan;
  }

  // NVLink: NVSwitch (fully connected) shapes, else cliques identified by GPU UUIDs.
  if (interconnect == "nvlink") {
    if (nic) {
      return Status::FailedPrecondition("an RDMA NIC aligned with NVLink-connected GPUs cannot be expressed in DRA "
                                        "(the NIC can only share a PCIe root with GPUs); drop draguard.io/nic or "
                                        "the nvlink interconnect");
    }
    std::vector<const ShapeDevices*> full;
    for (const auto* sd : enough) {
      if (sd->group->shape->derived.link_fully_connected) full.push_back(sd);
    }
    plan.placement = Placement::kNvlink;
    if (!full.empty()) {
      restrict_to(full);
      return plan;
    }
    // Cliques are per node: a selector can only name them by the GPUs' UUIDs.
    std::vector<Alternative> alts;
    for (const auto* sd : enough) {
      for (const auto& node_name : sd->group->nodes) {
        const topology::NodeTopology* node = view.snapshot->Find(node_name);
        if (node == nullptr) continue;
        for (const auto& clique : sd->group->shape->derived.link_cliques) {
          auto members = Intersect(clique, q.at(sd));
          if (members.size() < n) continue;
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
      return Status::FailedPrecondition("no node has " + std::to_string(n) + " NVLink-connected GPUs matching " +
                                        what + " with known UUIDs");
    }
    std::stable_sort(alts.begin(), alts.end(), [](const Alternative& a, const Alternative& b) {
      return a.fit != b.fit ? a.fit < b.fit : *a.nodes.begin() < *b.nodes.begin();
    });
    if (alts.size() > kMaxAlternatives) alts.resize(kMaxAlternatives);
    std::set<std::string> nodes;
    for (auto& alt : alts) {
      alt.name = "nvlink-" + std::to_string(plan.alternatives.size() + 1);
      alt.restriction = InList("gpu.nvidia.com", "uuid", alt.values);
      nodes.insert(alt.nodes.begin(), alt.nodes.end());
      plan.alternatives.push_back(std::move(alt));
    }
    if (nodes.size() < view.gpu_nodes) plan.nodes = std::move(nodes);
    return plan;
  }

  // 1. One PCIe root for the GPUs (and the NIC).
  std::vector<const ShapeDevices*> rooted;
  std::size_t best_root = 0;
  for (const auto* sd : enough) {
    const auto& d = sd->group->shape->derived;
    bool ok = false;
    for (uint32_t r = 0; r < d.gpus_by_root.size(); ++r) {
      std::size_t k = Intersect(d.gpus_by_root[r], q.at(sd)).size();
      best_root = std::max(best_root, k);
      if (k >= n && (!nic || HasRdmaNicUnder(*sd, r))) ok = true;
    }
    if (ok) rooted.push_back(sd);
  }
  if (!rooted.empty()) {
    plan.placement = Placement::kPcieRoot;
    plan.constraint = true;
    restrict_to(rooted);
    return plan;
  }

  // 2. NUMA-local: alternatives restricting pcieRoot to the roots local to one NUMA node.
  std::size_t best_numa = 0;
  if (!nic) {
    std::map<std::vector<std::string>, Alternative> by_roots;
    for (const auto* sd : enough) {
      const auto& shape = *sd->group->shape;
      for (const auto& numa : shape.numa_nodes) {
        std::vector<std::string> roots;
        std::vector<uint32_t> gpus;
        for (uint32_t r = 0; r < shape.pcie_roots.size(); ++r) {
          const auto& nn = shape.pcie_roots[r].numa_nodes;
          if (std::find(nn.begin(), nn.end(), numa.os_index) == nn.end()) continue;
          auto k = Intersect(shape.derived.gpus_by_root[r], q.at(sd));
          if (k.empty()) continue;
          roots.push_back(shape.pcie_roots[r].id);
          gpus.insert(gpus.end(), k.begin(), k.end());
        }
        best_numa = std::max(best_numa, gpus.size());
        if (gpus.size() < n) continue;
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
    // Keep only shapes on which every alternative selects NUMA-local GPUs (root names repeat
    // across shapes, so an alternative from one shape could span NUMA nodes on another).
    std::vector<const ShapeDevices*> safe;
    for (const auto* sd : enough) {
      const auto& shape = *sd->group->shape;
      bool ok = true;
      bool useful = false;
      for (const auto& alt : alts) {
        std::vector<uint32_t> sel;
        for (uint32_t g : q.at(sd)) {
          const std::string& root = shape.PcieRootId(shape.gpus[g]);
          if (std::binary_search(alt.values.begin(), alt.values.end(), root)) sel.push_back(g);
        }
        if (sel.size() < n) continue;
        useful = true;
        std::vector<uint32_t> common = shape.gpus[sel.front()].numa_nodes;
        for (uint32_t g : sel) common = Intersect(common, shape.gpus[g].numa_nodes);
        if (common.empty()) ok = false;
      }
      if (ok && useful) safe.push_back(sd);
    }
    if (!safe.empty()) {
      plan.placement = Placement::kNuma;
      for (std::size_t i = 0; i < alts.size(); ++i) {
        bool valid = std::any_of(alts[i].from.begin(), alts[i].from.end(), [&](const ShapeDevices* sd) {
          return std::find(safe.begin(), safe.end(), sd) != safe.end();
        });
        if (!valid) continue;
        alts[i].name = "numa-" + std::to_string(plan.alternatives.size() + 1);
        alts[i].restriction = InList("resource.kubernetes.io", "pcieRoot", alts[i].values);
        plan.alternatives.push_back(std::move(alts[i]));
      }
      restrict_to(safe);
      return plan;
    }
  }

  // 3. Unaligned, when the policy allows it.
  std::string why = "no node can place " + std::to_string(n) + " GPUs matching " + what +
                    (nic ? " and an RDMA NIC under one PCIe root" : " under one PCIe root or NUMA node") +
                    "; at most " + std::to_string(nic ? best_root : std::max(best_root, best_numa)) +
                    (nic ? " under a root" : "") + " on " + DescribeShape(*best_shape->group);
  if (!policy.mutation.allow_unaligned) return Status::FailedPrecondition(why);
  plan.placement = Placement::kUnaligned;
  plan.note = why + "; placed unaligned because the policy sets mutation.unaligned: allow";
  restrict_to(enough);
  return plan;
}

}  // namespace

const char* PlacementName(Placement placement) {
  switch (placement) {
    case Placement::kNone: return "none";
    case Placement::kPcieRoot: return "pcieRoot";
    case Placement::kNuma: return "numa";
    case Placement::kNvlink: return "nvlink";
    case Placement::kUnaligned: return "unaligned";
  }
  return "none";
}

Result<GeneratedTemplate> GenerateTemplate(const ClaimProfile& profile, std::string_view namespace_name,
                                           const policy::Policy& policy, const topology::Snapshot* topology) {
  if (profile.entries.empty()) return Status::InvalidArgument("nothing to convert");
  const std::shared_ptr<const View> view_ptr = GetView(topology, policy);
  const View& view = *view_ptr;
  std::string memo_key;
  if (topology != nullptr) {
    memo_key = MemoKey(profile, namespace_name, policy);
    if (!memo_key.empty()) {
      if (auto known = view.Remembered(memo_key)) return *known;
    }
  }
  const std::string gpu_class = policy.device_classes.gpu.empty() ? "gpu.nvidia.com" : policy.device_classes.gpu[0];
  const std::string mig_class = policy.device_classes.mig.empty() ? "mig.nvidia.com" : policy.device_classes.mig[0];

  GeneratedTemplate out;
  Json requests = Json::array();
  Json constraints = Json::array();
  Json configs = Json::array();
  std::vector<std::string> words;
  std::optional<std::set<std::size_t>> shapes;  // intersection of the entries' shape restrictions
  std::optional<std::set<std::string>> nodes;   // intersection of the entries' node restrictions
  bool nvlink = false;
  int64_t gpus = 0;
  std::vector<std::string> notes;

  for (const auto& entry : profile.entries) {
    RequestProfile p = entry.profile;
    std::string note;
    if (p.kind != RequestProfile::Kind::kMig && !p.memory.empty()) {
      p.memory = internal::ResolveMemoryFloor(p.memory, view.memories, &note);
      if (!note.empty()) notes.push_back("request \"" + entry.request + "\": " + note);
    }
    const std::string desc = internal::DescribeProfile(p);
    std::string words_entry = desc;
    Json exactly = {{"allocationMode", "ExactCount"}, {"count", p.count}};
    Json selectors = Json::array();
    Placement placement = Placement::kNone;

    if (p.kind == RequestProfile::Kind::kMig) {
      exactly["deviceClassName"] = mig_class;
      selectors.push_back({{"cel", {{"expression", internal::MigSelector(p)}}}});
      if (p.count >= 2) {
        placement = Placement::kPcieRoot;
        constraints.push_back({{"requests", {entry.request}}, {"matchAttribute", kPcieRootAttr}});
        words_entry += ", same PCIe root";
      }
      exactly["selectors"] = selectors;
      requests.push_back({{"name", entry.request}, {"exactly", exactly}});
    } else {
      exactly["deviceClassName"] = gpu_class;
      auto texts = internal::GpuSelectors(p);
      std::vector<std::shared_ptr<const cel::CheckedExpr>> compiled;
      for (const auto& t : texts) {
        selectors.push_back({{"cel", {{"expression", t}}}});
        if (view.shapes.empty()) continue;  // nothing to evaluate against
        auto c = view.Compile(t);
        if (!c.ok()) return Status::InvalidArgument("generated selector does not compile: " + c.status().message());
        compiled.push_back(std::move(*c));
      }
      gpus += p.count;
      const bool nic = profile.nic && p.kind == RequestProfile::Kind::kGpu;
      Plan plan;
      if (p.kind == RequestProfile::Kind::kShared) {
        plan.placement = Placement::kNone;
      } else {
        std::string filter = p.memory.empty() ? "" : ">= " + p.memory;
        if (!p.product.empty()) filter += (filter.empty() ? "" : ", ") + p.product;
        if (filter.empty()) filter = "the request";
        auto planned = PlanGpus(filter, p.count, nic, profile.interconnect, view, compiled, policy);
        if (!planned.ok()) {
          return Status(planned.status().code(), "request \"" + entry.request + "\" (" + desc +
                                                     "): " + planned.status().message());
        }
        plan = std::move(*planned);
      }
      placement = plan.placement;
      if (!plan.note.empty()) notes.push_back("request \"" + entry.request + "\": " + plan.note);
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
      if (plan.alternatives.empty()) {
        exactly["selectors"] = selectors;
        requests.push_back({{"name", entry.request}, {"exactly", exactly}});
      } else {
        Json alts = Json::array();
        for (const auto& alt : plan.alternatives) {
          Json sub = exactly;
          sub["name"] = alt.name;
          Json sel = selectors;
          sel.push_back({{"cel", {{"expression", alt.restriction}}}});
          sub["selectors"] = sel;
          alts.push_back(sub);
        }
        requests.push_back({{"name", entry.request}, {"firstAvailable", alts}});
      }
      std::vector<std::string> covered = {entry.request};
      if (nic) {
        Json nic_req = {{"name", entry.request + "-nic"},
                        {"exactly",
                         {{"deviceClassName", policy.mutation.nic.device_class},
                          {"allocationMode", "ExactCount"},
                          {"count", 1},
                          {"selectors", Json::array({{{"cel", {{"expression", internal::NicSelector(policy)}}}}})}}}};
        requests.push_back(nic_req);
        covered.push_back(entry.request + "-nic");
      }
      if (plan.constraint) constraints.push_back({{"requests", covered}, {"matchAttribute", kPcieRootAttr}});
      switch (plan.placement) {
        case Placement::kPcieRoot:
          words_entry += nic ? ", same PCIe root as 1 RDMA NIC" : ", same PCIe root";
          break;
        case Placement::kNuma:
          words_entry += ", NUMA-local (" + std::to_string(plan.alternatives.size()) + " PCIe root set" +
                         (plan.alternatives.size() == 1 ? ")" : "s, first available)");
          break;
        case Placement::kNvlink:
          nvlink = true;
          words_entry += ", NVLink-connected";
          break;
        case Placement::kUnaligned:
          words_entry += ", unaligned";
          break;
        case Placement::kNone:
          if (nic) words_entry += " + 1 RDMA NIC";
          break;
      }
      if (p.kind == RequestProfile::Kind::kShared) {
        configs.push_back(
            {{"requests", {entry.request}},
             {"opaque",
              {{"driver", "gpu.nvidia.com"},
               {"parameters",
                {{"apiVersion", "resource.nvidia.com/v1beta1"},
                 {"kind", "GpuConfig"},
                 {"sharing",
                  {{"strategy", "MPS"},
                   {"mpsConfig",
                    {{"defaultActiveThreadPercentage", p.mps_threads},
                     {"defaultPinnedDeviceMemoryLimit", p.mps_memory}}}}}}}}}});
      }
    }
    out.placements.push_back(placement);
    words.push_back(profile.entries.size() == 1 ? words_entry : entry.request + ": " + words_entry);
  }
  // The Pod's node restriction: named nodes (NVLink cliques), else shapes.
  if (nodes && shapes) {
    std::set<std::string> kept;
    for (const auto& name : *nodes) {
      const topology::NodeTopology* node = topology->Find(name);
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

  Json devices = {{"requests", requests}};
  if (!constraints.empty()) devices["constraints"] = constraints;
  if (!configs.empty()) devices["config"] = configs;
  Json claim_meta = {{"labels", {{"app.kubernetes.io/managed-by", "draguard"}}}};
  bool latency = false;
  for (const auto& e : profile.entries) latency = latency || e.profile.latency_sensitive;
  if (latency) {
    for (const auto& [k, v] : policy.latency_sensitive.labels) claim_meta["labels"][k] = v;
  }
  if (gpus >= 2) {
    claim_meta["annotations"] = {{std::string(kInterconnectAnnotation), nvlink ? "nvlink" : "pcie"}};
  }
  out.description = words.size() == 1 ? words[0] : "";
  for (std::size_t i = 0; words.size() > 1 && i < words.size(); ++i) out.description += (i ? "; " : "") + words[i];

  Json object = {{"apiVersion", "resource.k8s.io/v1"},
                 {"kind", "ResourceClaimTemplate"},
                 {"metadata",
                  {{"labels", {{"app.kubernetes.io/managed-by", "draguard"}}},
                   {"annotations", {{std::string(kProfileAnnotation), out.description}}}}},
                 {"spec", {{"metadata", claim_meta}, {"spec", {{"devices", devices}}}}}};
  // Content address: everything but name and namespace (nlohmann objects dump with sorted keys).
  out.name = std::string(kNamePrefix) + internal::Sha256Hex(object.dump(), 10);
  object["metadata"]["name"] = out.name;
  if (!namespace_name.empty()) object["metadata"]["namespace"] = std::string(namespace_name);
  out.object = std::move(object);
  if (nodes) {
    out.nodes.assign(nodes->begin(), nodes->end());
  } else if (shapes) {
    for (std::size_t i : *shapes) out.shapes.push_back(view.shapes[i].group->shape->fingerprint);
    std::sort(out.shapes.begin(), out.shapes.end());
    if (restricted_nodes <= policy.mutation.hostname_affinity_limit) {
      for (std::size_t i : *shapes) {
        out.nodes.insert(out.nodes.end(), view.shapes[i].group->nodes.begin(), view.shapes[i].group->nodes.end());
      }
      std::sort(out.nodes.begin(), out.nodes.end());
    }
  }
  out.notes = std::move(notes);
  // The generated claim must be satisfiable on the topology (as DG014 would judge it).
  if (topology != nullptr && !view.shapes.empty()) {
    auto report = engine::CheckSatisfiable(out.object, policy, *topology);
    if (report.verdict == engine::SatisfiabilityReport::Verdict::kUnsatisfiable) {
      return Status::FailedPrecondition("the generated claim (" + out.description +
                                        ") cannot be satisfied by any node: " + report.message);
    }
  }
  if (!memo_key.empty()) view.Remember(memo_key, out);
  return out;
}

std::vector<GeneratedTemplate> RenderCatalogue(const policy::Policy& policy, const topology::Snapshot* topology,
                                               std::string_view namespace_name, std::vector<std::string>* errors) {
  std::vector<GeneratedTemplate> out;
  std::set<std::string> names;
  for (std::size_t i = 0; i < policy.mutation.catalogue.size(); ++i) {
    auto t = GenerateTemplate(ProfileFromCatalogue(policy.mutation.catalogue[i], policy), namespace_name, policy,
                              topology);
    if (!t.ok()) {
      if (errors != nullptr) {
        errors->push_back("mutation.catalogue[" + std::to_string(i) + "]: " + t.status().message());
      }
      continue;
    }
    if (names.insert(t->name).second) out.push_back(std::move(*t));
  }
  return out;
}

}  // namespace draguard::mutation
