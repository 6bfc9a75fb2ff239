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
constexpr std::size_t kMaxRequests = 32;     // DRA's requests per claim
constexpr std::size_t kMaxConstraints = 32;  // DRA's constraints per claim

using Selectors = std::vector<std::shared_ptr<const cel::CheckedExpr>>;

std::shared_ptr<const View> BuildView(const topology::Snapshot* snap, const policy::Policy& policy) {
  auto v = std::make_shared<View>();
  v->snapshot = snap;
  if (snap == nullptr) return v;
  const dra::NicOptions nic = dra::NicOptionsOf(policy);
  for (const auto& group : snap->shapes()) {
    if (group.nodes.empty()) continue;
    const topology::NodeTopology* node = snap->Find(group.nodes.front());
    if (node == nullptr) continue;
    ShapeDevices sd{&group, dra::SimulateNode(*snap, *node, nic)};
    bool gpu = false;
    for (const auto& d : sd.devices()) {
      if (d.kind == dra::DeviceKind::kNic) continue;
      gpu = true;  // a full GPU or a MIG device
      if (d.kind != dra::DeviceKind::kGpu) continue;
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
  Request(const std::string& what, std::size_t n, bool nic, std::size_t cpus, const View& view)
      : what(what), n(n), nic(nic), cpus(cpus), view(view) {}

  const std::string& what;  // the filter in words, for messages
  std::size_t n;            // GPUs
  bool nic;                 // with an RDMA NIC under the GPUs' root
  std::size_t cpus;         // CPUs in the claim, on the GPUs' NUMA node (mutation.cpu); 0 = none
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

// Whether an alternative's constraint narrows the sets it allows (pcieRoot or numaNode).
bool Constrained(const Alternative& a) { return a.constraint || a.numa_match; }

// 0: only NVLink-connected GPUs, 1: or one PCIe root, 2: or one NUMA node.
int WeakestClass(const std::string& interconnect) {
  if (interconnect == "nvlink") return 0;
  if (interconnect == "pcie") return 1;
  return 2;  // auto, numa, any
}

bool Linked(const topology::Shape& shape, uint32_t a, uint32_t b) {
  const auto& peers = shape.derived.link_peers;
  return a < peers.size() && std::binary_search(peers[a].begin(), peers[a].end(), b);
}

bool PairwiseLinked(const topology::Shape& shape, const std::vector<uint32_t>& gpus) {
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    for (std::size_t j = i + 1; j < gpus.size(); ++j) {
      if (!Linked(shape, gpus[i], gpus[j])) return false;
    }
  }
  return true;
}

// Whether the GPU driver publishes its CPU-local NUMA node as resource.kubernetes.io/numaNode for
// GPU `g` (Shape::AlignableNumaNode, as topology/dra_devices.cc simulates it).
bool PublishesNumaNode(const topology::Shape& shape, uint32_t g) {
  return shape.AlignableNumaNode(shape.gpus[g]) != topology::kNoIndex;
}

// Whether some GPU of `gpus` has a memory NUMA node of its own (Grace, POWER9): it publishes that
// node as resource.kubernetes.io/numaNode, which nothing else shares.
bool HasGpuMemoryNodes(const topology::Shape& shape, const std::vector<uint32_t>& gpus) {
  return std::any_of(gpus.begin(), gpus.end(),
                     [&](uint32_t g) { return shape.gpus[g].memory_numa_node != topology::kNoIndex; });
}

// The CPUs (PUs) of NUMA node `os_index` of a shape; 0 for an unknown node.
std::size_t NumaCpus(const topology::Shape& shape, uint32_t os_index) {
  for (const auto& n : shape.numa_nodes) {
    if (n.os_index == os_index) return n.cpus;
  }
  return 0;
}

// The GPUs of `gpus` that publish resource.kubernetes.io/numaNode, by NUMA node (OS index).
std::map<uint32_t, std::vector<uint32_t>> GpusByNuma(const topology::Shape& shape, const std::vector<uint32_t>& gpus) {
  std::map<uint32_t, std::vector<uint32_t>> out;
  for (uint32_t g : gpus) {
    if (PublishesNumaNode(shape, g)) out[shape.gpus[g].numa_nodes.front()].push_back(g);
  }
  return out;
}

// With CPUs in the claim (matchAttribute resource.kubernetes.io/numaNode over GPUs and CPUs): the
// GPUs of `gpus` that publish the attribute, by NUMA node, on the NUMA nodes with at least
// r.cpus CPUs. Without CPUs: `gpus` as one set.
std::vector<std::vector<uint32_t>> CpuNumaParts(const Request& r, const topology::Shape& shape,
                                                const std::vector<uint32_t>& gpus) {
  if (r.cpus == 0) return {gpus};
  std::vector<std::vector<uint32_t>> out;
  for (auto& [numa, part] : GpusByNuma(shape, gpus)) {
    if (NumaCpus(shape, numa) >= r.cpus) out.push_back(std::move(part));
  }
  return out;
}

bool ShareNuma(const topology::Shape& shape, const std::vector<uint32_t>& gpus) {
  if (gpus.empty()) return true;
  std::vector<uint32_t> common = shape.gpus[gpus.front()].numa_nodes;
  for (uint32_t g : gpus) common = Intersect(common, shape.gpus[g].numa_nodes);
  return !common.empty();
}

// The value of `attr` (pciBusID or pcieRoot) a GPU publishes; "" when it publishes none.
const std::string& GpuAttr(const topology::Shape& shape, uint32_t g, const std::string& attr) {
  return attr == "pciBusID" ? shape.gpus[g].pci_bus_id : shape.PcieRootId(shape.gpus[g]);
}

// How one alternative behaves on one shape.
struct OnShape {
  bool useful = false;        // some allocation exists
  bool safe = true;           // every allocation it allows has its class
  std::vector<uint32_t> sel;  // the GPUs it may take (ascending)
  double sets = 0;            // the GPU sets it may allocate (by the sets its constraint allows)
};

// k-subsets of n things, as a double (counts compared, never exact).
double Subsets(std::size_t n, std::size_t k) {
  if (k > n) return 0;
  double out = 1;
  for (std::size_t i = 1; i <= k; ++i) out = out * static_cast<double>(n - k + i) / static_cast<double>(i);
  return out;
}

OnShape Evaluate(const Request& r, const ShapeDevices& sd, const Alternative& alt) {
  OnShape out;
  const auto& shape = *sd.group->shape;
  for (uint32_t g : r.q.at(&sd)) {
    if (!alt.attr.empty()) {
      const std::string& v = GpuAttr(shape, g, alt.attr);
      if (v.empty() || !std::binary_search(alt.values.begin(), alt.values.end(), v)) continue;
    }
    out.sel.push_back(g);
  }
  // The sets the scheduler may allocate from: one per PCIe root with the constraint, one per NUMA
  // node with the numaNode constraint (GPUs that publish the attribute only).
  std::vector<std::pair<uint32_t, std::vector<uint32_t>>> groups;
  if (alt.numa_match) {
    for (auto& [numa, gpus] : GpusByNuma(shape, out.sel)) groups.emplace_back(topology::kNoIndex, std::move(gpus));
  } else if (alt.constraint) {
    std::map<uint32_t, std::vector<uint32_t>> by_root;
    for (uint32_t g : out.sel) {
      if (shape.gpus[g].pcie_root != topology::kNoIndex) by_root[shape.gpus[g].pcie_root].push_back(g);
    }
    for (auto& [root, gpus] : by_root) groups.emplace_back(root, std::move(gpus));
  } else {
    groups.emplace_back(topology::kNoIndex, out.sel);
  }
  if (r.cpus > 0) {  // the numaNode constraint over GPUs and CPUs splits every set by NUMA node
    std::vector<std::pair<uint32_t, std::vector<uint32_t>>> split;
    for (const auto& [root, gpus] : groups) {
      for (auto& part : CpuNumaParts(r, shape, gpus)) split.emplace_back(root, std::move(part));
    }
    groups = std::move(split);
  }
  for (const auto& [root, gpus] : groups) {
    if (gpus.size() < r.n) continue;
    if (r.nic && (root == topology::kNoIndex || !HasRdmaNicUnder(sd, root))) continue;
    out.useful = true;
    out.sets += Subsets(gpus.size(), r.n);
    switch (alt.placement) {
      case Placement::kNvlink: out.safe = out.safe && PairwiseLinked(shape, gpus); break;
      case Placement::kPcieRoot: out.safe = out.safe && alt.constraint; break;
      case Placement::kNuma: out.safe = out.safe && ShareNuma(shape, gpus); break;
      default: out.safe = false;
    }
  }
  return out;
}

// The most qualifying GPUs of a root (with an RDMA NIC when asked) among `gpus`.
std::size_t MostUnderOneRoot(const Request& r, const ShapeDevices& sd, const std::vector<uint32_t>& gpus) {
  const auto& d = sd.group->shape->derived;
  std::size_t best = 0;
  for (uint32_t root = 0; root < d.gpus_by_root.size(); ++root) {
    if (r.nic && !HasRdmaNicUnder(sd, root)) continue;
    best = std::max(best, Intersect(d.gpus_by_root[root], gpus).size());
  }
  return best;
}

// Alternatives restricting pcieRoot to the roots local to one NUMA node; `best_numa` receives
// the most qualifying GPUs local to one NUMA node.
// With mutation.numaAlignment numaNode, a shape whose GPUs publish the numaNode attribute is
// covered by one numaNode-constraint alternative instead.
void NumaCandidates(const Request& r, policy::NumaAlignment how, std::vector<Alternative>* out,
                    std::size_t* best_numa) {
  std::map<std::vector<std::string>, Alternative> by_roots;
  Alternative match;
  match.placement = Placement::kNuma;
  match.numa_match = true;
  for (const auto* sd : r.enough) {
    const auto& shape = *sd->group->shape;
    // GPUs whose memory is a NUMA node publish that node, which no other GPU shares: their shape
    // is aligned by the pcieRoots of one NUMA node, as without numaAlignment numaNode.
    if (how == policy::NumaAlignment::kNumaNode && shape.numa_nodes.size() > 1 &&
        !HasGpuMemoryNodes(shape, r.q.at(sd))) {
      std::map<uint32_t, std::size_t> per_numa;
      for (uint32_t g : r.q.at(sd)) {
        if (PublishesNumaNode(shape, g)) ++per_numa[shape.gpus[g].numa_nodes.front()];
      }
      for (const auto& [numa, gpus] : per_numa) {
        *best_numa = std::max(*best_numa, gpus);
        if (gpus >= r.n) match.fit = std::max(match.fit, gpus);
      }
      continue;
    }
    for (const auto& numa : shape.numa_nodes) {
      std::vector<std::string> roots;
      std::size_t gpus = 0;
      for (uint32_t root = 0; root < shape.pcie_roots.size(); ++root) {
        const auto& nn = shape.pcie_roots[root].numa_nodes;
        if (std::find(nn.begin(), nn.end(), numa.os_index) == nn.end()) continue;
        auto k = Intersect(shape.derived.gpus_by_root[root], r.q.at(sd));
        if (k.empty()) continue;
        roots.push_back(shape.pcie_roots[root].id);
        gpus += k.size();
      }
      *best_numa = std::max(*best_numa, gpus);
      if (gpus < r.n) continue;
      std::sort(roots.begin(), roots.end());
      Alternative& alt = by_roots[roots];
      alt.placement = Placement::kNuma;
      alt.attr = "pcieRoot";
      alt.values = roots;
      alt.fit = std::max(alt.fit, gpus);
    }
  }
  if (match.fit > 0) out->push_back(std::move(match));
  for (auto& [roots, alt] : by_roots) out->push_back(std::move(alt));
}

// Every alternative worth trying, strongest class first; `best_*` receive the most GPUs any
// shape can give in each class (for messages).
std::vector<Alternative> Candidates(const Request& r, int weakest, policy::NumaAlignment numa_alignment,
                                    std::size_t* best_link, std::size_t* best_root, std::size_t* best_numa) {
  std::vector<Alternative> out;
  auto add = [&](Placement placement, bool constraint, const char* attr, std::vector<std::string> values,
                 std::size_t fit) {
    for (auto& a : out) {
      if (a.placement == placement && a.constraint == constraint && a.attr == attr && a.values == values) {
        a.fit = std::min(a.fit, fit);
        return;
      }
    }
    Alternative a;
    a.placement = placement;
    a.constraint = constraint;
    a.attr = attr;
    a.values = std::move(values);
    a.fit = fit;
    out.push_back(std::move(a));
  };
  for (const auto* sd : r.enough) {
    const auto& shape = *sd->group->shape;
    const auto& q = r.q.at(sd);
    *best_root = std::max(*best_root, MostUnderOneRoot(r, *sd, q));
    if (r.n < 2) continue;  // one GPU and a NIC: the root is the only alignment
    if (PairwiseLinked(shape, q)) {
      // NVSwitch or all-to-all NVLink: any qualifying GPUs will do.
      *best_link = std::max(*best_link, q.size());
      if (MostUnderOneRoot(r, *sd, q) >= r.n) add(Placement::kNvlink, true, "", {}, q.size());
      if (!r.nic) add(Placement::kNvlink, false, "", {}, q.size());
      continue;
    }
    for (const auto& clique : shape.derived.link_cliques) {
      auto members = Intersect(clique, q);
      if (members.size() < 2) continue;
      *best_link = std::max(*best_link, members.size());
      if (members.size() < r.n) continue;
      // Bus addresses are stable across the nodes of a shape (UUIDs are per node, or sanitised).
      std::vector<std::string> buses;
      for (uint32_t g : members) buses.push_back(shape.gpus[g].pci_bus_id);
      std::sort(buses.begin(), buses.end());
      if (MostUnderOneRoot(r, *sd, members) >= r.n) add(Placement::kNvlink, true, "pciBusID", buses, members.size());
      if (!r.nic) add(Placement::kNvlink, false, "pciBusID", buses, members.size());
    }
  }
  if (weakest >= 1 || r.n < 2) add(Placement::kPcieRoot, true, "", {}, 0);
  std::vector<Alternative> numa;
  if (!r.nic && r.n >= 2) NumaCandidates(r, numa_alignment, &numa, best_numa);
  if (weakest >= 2) out.insert(out.end(), numa.begin(), numa.end());
  auto rank = [](const Alternative& a) { return static_cast<int>(a.placement == Placement::kNvlink ? 0 : a.placement == Placement::kPcieRoot ? 1 : 2); };
  std::stable_sort(out.begin(), out.end(), [&](const Alternative& a, const Alternative& b) {
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    if (Constrained(a) != Constrained(b)) return Constrained(a);
    if (a.fit != b.fit) return a.fit < b.fit;
    return a.values < b.values;
  });
  return out;
}

// The name of the `rank`-th alternative of its class ("nvlink-1", "pcie-2", "numa-1") and its
// restriction selector.
void NameAlternative(Alternative& alt, int rank) {
  const char* prefix = alt.placement == Placement::kNvlink ? "nvlink-" : alt.placement == Placement::kPcieRoot ? "pcie-" : "numa-";
  alt.name = prefix + std::to_string(rank);
  if (!alt.attr.empty()) alt.restriction = InList("resource.kubernetes.io", alt.attr, alt.values);
}

// Picks the alternatives, strongest first: each one kept must be aligned on every shape the Pod
// may use, and add an allocation some shape did not have yet. Fills plan.alternatives and returns
// the shapes the Pod may use.
std::vector<const ShapeDevices*> Choose(const Request& r, const std::vector<Alternative>& candidates, Plan& plan) {
  std::vector<std::map<const ShapeDevices*, OnShape>> kept_eval;
  std::vector<Alternative> kept;
  auto allowed = [&](const ShapeDevices* sd) {
    bool useful = false;
    for (const auto& e : kept_eval) {
      const OnShape& o = e.at(sd);
      if (!o.safe) return false;
      useful = useful || o.useful;
    }
    return useful;
  };
  for (const auto& c : candidates) {
    if (kept.size() == kMaxAlternatives) break;
    std::map<const ShapeDevices*, OnShape> eval;
    for (const auto* sd : r.enough) eval[sd] = Evaluate(r, *sd, c);
    bool ok = true, adds = false;
    for (const auto* sd : r.enough) {
      const OnShape& o = eval[sd];
      if (allowed(sd)) {
        if (!o.safe) ok = false;
      } else {
        bool kept_safe = true;
        for (const auto& e : kept_eval) kept_safe = kept_safe && e.at(sd).safe;
        if (!kept_safe) continue;  // an earlier alternative already rules this shape out
      }
      if (!o.useful || !o.safe) continue;
      // Dominated: an earlier alternative without constraint may take every set this one may.
      bool dominated = false;
      for (std::size_t k = 0; k < kept.size() && !dominated; ++k) {
        const OnShape& ko = kept_eval[k].at(sd);
        dominated = !Constrained(kept[k]) && ko.useful &&
                    std::includes(ko.sel.begin(), ko.sel.end(), o.sel.begin(), o.sel.end());
      }
      if (!dominated) adds = true;
    }
    if (!ok || !adds) continue;
    kept.push_back(c);
    kept_eval.push_back(std::move(eval));
  }
  std::vector<const ShapeDevices*> shapes;
  for (const auto* sd : r.enough) {
    if (!kept.empty() && allowed(sd)) shapes.push_back(sd);
  }
  std::map<Placement, int> seen;
  for (auto& alt : kept) {
    NameAlternative(alt, ++seen[alt.placement]);
    plan.alternatives.push_back(std::move(alt));
  }
  if (!plan.alternatives.empty()) plan.placement = plan.alternatives.front().placement;
  return shapes;
}

// mutation.kueue: one alternative for the entry (Kueue v0.19 refuses firstAvailable). Of the
// candidates, on the shapes where each is aligned and can place the GPUs, the one that the most
// nodes can use, then the one that allows the most GPU sets there (ties: the stronger, earlier
// candidate). On a shape where a candidate's attribute list (one NUMA node's PCIe roots, one
// NVLink clique's bus addresses) leaves out some of the qualifying GPUs, it is not used: Pods would
// wait while aligned GPUs of the node's other part are free. `partial` says whether such
// candidates were all there was. Fills plan.alternatives and returns the shapes the Pod may use.
std::vector<const ShapeDevices*> ChooseOne(const Request& r, const std::vector<Alternative>& candidates, Plan& plan,
                                           std::string* partial) {
  const Alternative* best = nullptr;
  std::vector<const ShapeDevices*> best_shapes;
  std::size_t best_nodes = 0;
  double best_sets = 0;
  std::set<std::string> parts;  // what partial candidates cover, in words
  for (const auto& c : candidates) {
    std::vector<const ShapeDevices*> shapes;
    std::size_t nodes = 0;
    double sets = 0;
    for (const auto* sd : r.enough) {
      const OnShape o = Evaluate(r, *sd, c);
      if (!o.useful || !o.safe) continue;
      if (!c.attr.empty() && o.sel.size() < r.q.at(sd).size()) {
        parts.insert(c.attr == "pciBusID" ? "the GPUs of one NVLink clique (by PCI bus address)"
                                          : "the PCIe roots of one NUMA node");
        continue;
      }
      shapes.push_back(sd);
      nodes += sd->group->nodes.size();
      sets += o.sets * static_cast<double>(sd->group->nodes.size());
    }
    if (shapes.empty()) continue;
    if (best == nullptr || nodes > best_nodes || (nodes == best_nodes && sets > best_sets)) {
      best = &c;
      best_shapes = std::move(shapes);
      best_nodes = nodes;
      best_sets = sets;
    }
  }
  partial->clear();
  if (best == nullptr) {
    for (const auto& p : parts) *partial += (partial->empty() ? "" : " or ") + p;
    return {};
  }
  Alternative alt = *best;
  NameAlternative(alt, 1);
  plan.placement = alt.placement;
  plan.alternatives = {std::move(alt)};
  return best_shapes;
}

// RDMA NIC functions (distinct PCI addresses) per PCIe root index of a shape.
std::map<uint32_t, std::size_t> RdmaNicsByRoot(const ShapeDevices& sd) {
  std::map<uint32_t, std::set<std::string>> functions;
  for (const auto& nic : sd.group->shape->nics) {
    if (nic.rdma && nic.pcie_root != topology::kNoIndex) functions[nic.pcie_root].insert(nic.pci_bus_id);
  }
  std::map<uint32_t, std::size_t> out;
  for (const auto& [root, f] : functions) out[root] = f.size();
  return out;
}

// Rails: how many GPUs of `gpus` can each get a distinct RDMA NIC under their own root.
std::size_t RailCount(const ShapeDevices& sd, const std::vector<uint32_t>& gpus) {
  const auto nics = RdmaNicsByRoot(sd);
  std::map<uint32_t, std::size_t> per_root;
  for (uint32_t g : gpus) {
    uint32_t root = sd.group->shape->gpus[g].pcie_root;
    if (root != topology::kNoIndex) per_root[root]++;
  }
  std::size_t n = 0;
  for (const auto& [root, k] : per_root) {
    auto it = nics.find(root);
    n += std::min(k, it == nics.end() ? std::size_t{0} : it->second);
  }
  return n;
}

// Rails (one NIC per GPU, each under its GPU's root): the GPUs aligned by one alternative that
// every GPU request shares (per-request alternatives could pick different NVLink sets).
// Candidates: NVLink-complete shapes (no restriction), one clique by bus address, or one PCIe
// root for all. Returns the shapes, or none.
std::vector<const ShapeDevices*> PlanRails(const Request& r, int weakest, Plan& plan, std::size_t* best_rails) {
  Request single = r;  // the GPUs' alignment, without the one-NIC-per-root condition
  single.nic = false;
  std::vector<Alternative> candidates;
  for (const auto& c : Candidates(single, weakest, policy::NumaAlignment::kPcieRoots, best_rails, best_rails,
                                  best_rails)) {
    if (c.placement == Placement::kNvlink && !c.constraint) candidates.push_back(c);
  }
  if (weakest >= 1) {
    Alternative pcie;
    pcie.placement = Placement::kPcieRoot;
    pcie.constraint = true;
    candidates.push_back(pcie);
  }
  *best_rails = 0;
  for (const auto* sd : r.enough) *best_rails = std::max(*best_rails, RailCount(*sd, r.q.at(sd)));
  for (auto& c : candidates) {
    std::vector<const ShapeDevices*> shapes;
    for (const auto* sd : r.enough) {
      OnShape o = Evaluate(single, *sd, c);
      // A shape where the plan may misalign is left out: the Pod is pinned to the shapes
      // returned, as Choose does for the other plans.
      if (!o.safe) continue;
      bool fits = false;
      for (const auto& part : CpuNumaParts(r, *sd->group->shape, o.sel)) {
        if (c.constraint) {  // all GPUs and their NICs under one root
          const auto nics = RdmaNicsByRoot(*sd);
          const auto& d = sd->group->shape->derived;
          for (const auto& [root, k] : nics) {
            if (root < d.gpus_by_root.size() && std::min(Intersect(d.gpus_by_root[root], part).size(), k) >= r.n) {
              fits = true;
            }
          }
        } else {
          fits = fits || (o.useful && RailCount(*sd, part) >= r.n);
        }
      }
      if (fits) shapes.push_back(sd);
    }
    if (shapes.empty()) continue;
    c.name = c.placement == Placement::kNvlink ? "nvlink-1" : "pcie-1";
    if (!c.attr.empty()) c.restriction = InList("resource.kubernetes.io", c.attr, c.values);
    plan.placement = c.placement;
    plan.alternatives = {c};
    plan.rails = true;
    return shapes;
  }
  return {};
}

const char* ClassWords(int weakest) {
  switch (weakest) {
    case 0: return "pairwise NVLink-connected";
    case 1: return "pairwise NVLink-connected or under one PCIe root";
    default: return "pairwise NVLink-connected, under one PCIe root or on one NUMA node";
  }
}

// With CPUs in the claim: keeps in r.enough the shapes with a NUMA node that holds r.n of the
// qualifying GPUs (publishing resource.kubernetes.io/numaNode) and r.cpus CPUs; refuses with the
// nearest miss when there is none.
Status KeepShapesWithCpus(Request& r) {
  std::vector<const ShapeDevices*> fit;
  std::size_t most_gpus = 0, most_cpus = 0;
  const ShapeDevices* nearest = nullptr;
  const ShapeDevices* memory_nodes = nullptr;  // a shape whose qualifying GPUs have memory NUMA nodes
  for (const auto* sd : r.enough) {
    const auto& shape = *sd->group->shape;
    if (memory_nodes == nullptr && HasGpuMemoryNodes(shape, r.q.at(sd))) memory_nodes = sd;
    bool ok = false;
    Request all = r;
    all.cpus = 1;  // every NUMA node with a CPU: the GPUs per NUMA node, whatever its CPUs
    for (const auto& part : CpuNumaParts(all, shape, r.q.at(sd))) {
      const std::size_t cpus = NumaCpus(shape, shape.gpus[part.front()].numa_nodes.front());
      if (part.size() > most_gpus || nearest == nullptr) most_gpus = std::max(most_gpus, part.size()), nearest = sd;
      if (part.size() < r.n) continue;
      most_cpus = std::max(most_cpus, cpus);
      ok = ok || cpus >= r.cpus;
    }
    if (ok) fit.push_back(sd);
  }
  if (!fit.empty()) {
    r.enough = std::move(fit);
    return Status::Ok();
  }
  std::string why = "no node can place " + std::to_string(r.n) + " GPUs matching " + r.what + " with " +
                    std::to_string(r.cpus) + " CPUs on their NUMA node (mutation.cpu); ";
  if (most_gpus == 0 && memory_nodes != nullptr) {
    why += "the GPUs' memory is a NUMA node of its own (" + DescribeShape(*memory_nodes->group) +
           "; Grace and POWER9), which the GPU driver publishes as their resource.kubernetes.io/numaNode and no CPU "
           "shares, so no numaNode constraint can keep CPUs beside them. Fix: set mutation.cpu.mode: none (the "
           "kubelet's CPU manager then places the CPUs)";
  } else if (most_gpus < r.n) {
    why += "at most " + std::to_string(most_gpus) +
           " of them on one NUMA node that the GPU driver publishes (resource.kubernetes.io/numaNode)";
    if (nearest != nullptr) why += " (" + DescribeShape(*nearest->group) + ")";
    why += ": the GPUs need several NUMA nodes, and no shape can split them into equal parts with their CPUs "
           "(that needs all qualifying GPUs NVLink-connected, and GPUs and CPUs that divide evenly over NUMA nodes "
           "that hold a part each). Fix: ask for at most " +
           std::to_string(most_gpus) + " GPUs per container, or set mutation.cpu.mode: none";
  } else {
    why += "at most " + std::to_string(most_cpus) + " CPUs on a NUMA node with " + std::to_string(r.n) +
           " of the GPUs. Fix: ask for at most " + std::to_string(most_cpus) + " CPUs";
  }
  return Status::FailedPrecondition(why);
}

// With CPUs in the claim, on shapes whose qualifying GPUs all have a memory NUMA node of their own
// (Grace, POWER9): the sockets (CPU NUMA nodes) that hold r.n of them and r.cpus CPUs, as
// Plan::sockets. A socket's GPUs are those whose CPU-local node is the socket's, selected by the
// memory nodes of all its GPUs. Shapes can differ in which memory nodes belong to which socket,
// so the plan keeps the shapes of the one mapping that most nodes share. With an NVLink
// requirement (weakest 0) a socket's GPUs must be pairwise NVLink-connected; a PCIe-root one
// (weakest 1) is not planned. Returns the shapes (none when no socket fits), or why not in `why`.
std::vector<const ShapeDevices*> PlanSockets(const Request& r, int weakest, Plan& plan, std::string* why) {
  if (r.cpus == 0 || r.nic || (r.n >= 2 && weakest == 1)) return {};
  if (std::none_of(r.enough.begin(), r.enough.end(),
                   [&](const ShapeDevices* sd) { return HasGpuMemoryNodes(*sd->group->shape, r.q.at(sd)); })) {
    return {};
  }
  if (r.n + 1 > kMaxRequests || SocketConstraints(r.n, 2) > kMaxConstraints) {
    *why = std::to_string(r.n) + " GPUs, each its own request with the CPUs on their socket, need " +
           std::to_string(SocketConstraints(r.n, 2)) + " constraints; a claim holds at most " +
           std::to_string(kMaxConstraints);
    return {};
  }
  // socket -> memory nodes of its GPUs, as a key; its shapes and their nodes.
  struct Mapping {
    std::vector<Plan::Socket> sockets;
    std::vector<const ShapeDevices*> shapes;
    std::size_t nodes = 0;
  };
  std::map<std::string, Mapping> mappings;
  std::size_t most_gpus = 0, most_cpus = 0;
  for (const auto* sd : r.enough) {
    const auto& shape = *sd->group->shape;
    const auto& q = r.q.at(sd);
    if (!std::all_of(q.begin(), q.end(), [&](uint32_t g) {
          return shape.gpus[g].memory_numa_node != topology::kNoIndex && shape.gpus[g].numa_nodes.size() == 1;
        })) {
      continue;
    }
    std::map<uint32_t, Plan::Socket> all;  // every GPU with a memory node, by its CPU node
    for (const auto& g : shape.gpus) {
      if (g.memory_numa_node == topology::kNoIndex || g.numa_nodes.size() != 1) continue;
      Plan::Socket& s = all[g.numa_nodes.front()];
      s.cpu_node = g.numa_nodes.front();
      s.memory_nodes.push_back(g.memory_numa_node);
    }
    std::vector<Plan::Socket> fit;
    for (auto& [cpu_node, socket] : all) {
      std::vector<uint32_t> local;
      for (uint32_t g : q) {
        if (shape.gpus[g].numa_nodes.front() == cpu_node) local.push_back(g);
      }
      const std::size_t cpus = NumaCpus(shape, cpu_node);
      most_gpus = std::max(most_gpus, local.size());
      if (local.size() >= r.n) most_cpus = std::max(most_cpus, cpus);
      if (local.size() < r.n || cpus < r.cpus) continue;
      if (weakest == 0 && r.n >= 2 && !PairwiseLinked(shape, local)) continue;
      std::sort(socket.memory_nodes.begin(), socket.memory_nodes.end());
      fit.push_back(socket);
    }
    if (fit.empty()) continue;
    std::string key;
    for (const auto& s : fit) {
      key += std::to_string(s.cpu_node) + ":";
      for (uint32_t m : s.memory_nodes) key += std::to_string(m) + ",";
      key += ";";
    }
    Mapping& m = mappings[key];
    m.sockets = std::move(fit);
    m.shapes.push_back(sd);
    m.nodes += sd->group->nodes.size();
  }
  const Mapping* best = nullptr;
  for (const auto& [key, m] : mappings) {
    if (best == nullptr || m.nodes > best->nodes) best = &m;
  }
  if (best == nullptr) {
    if (most_gpus < r.n) {
      *why = "at most " + std::to_string(most_gpus) + " of them on one socket (CPU NUMA node)";
    } else {
      *why = "at most " + std::to_string(most_cpus) + " CPUs on a socket with " + std::to_string(r.n) + " of them";
    }
    return {};
  }
  plan.placement = weakest == 0 && r.n >= 2 ? Placement::kNvlink : Placement::kNuma;
  plan.sockets = best->sockets;
  return best->shapes;
}

// With CPUs in the claim, when no NUMA node holds the GPUs and CPUs: `parts` equal GPU requests,
// each with its share of the CPUs on its own NUMA node, on the shapes whose qualifying GPUs are
// all NVLink-connected (NVSwitch or all-to-all: any GPUs will do, so the parts need no selector)
// and that have `parts` NUMA nodes with a part's GPUs (publishing resource.kubernetes.io/numaNode)
// and CPUs each. The fewest parts that some shape can hold; the GPUs and CPUs must divide evenly.
// Returns the shapes and fills `plan`, or returns none.
std::vector<const ShapeDevices*> PlanNumaParts(const Request& r, Plan& plan) {
  if (r.nic) return {};  // rails already pair each GPU with a NIC; not combined with parts
  for (std::size_t parts = 2; parts <= r.n && 2 * parts <= kMaxRequests; ++parts) {
    if (r.n % parts != 0 || r.cpus % parts != 0) continue;
    Request part = r;
    part.n = r.n / parts;
    part.cpus = r.cpus / parts;
    std::vector<const ShapeDevices*> shapes;
    for (const auto* sd : r.enough) {
      const auto& shape = *sd->group->shape;
      if (!PairwiseLinked(shape, r.q.at(sd))) continue;
      std::size_t numa_nodes = 0;
      for (const auto& gpus : CpuNumaParts(part, shape, r.q.at(sd))) numa_nodes += gpus.size() >= part.n ? 1 : 0;
      if (numa_nodes >= parts) shapes.push_back(sd);
    }
    if (shapes.empty()) continue;
    plan.placement = Placement::kNvlink;
    plan.parts = parts;
    return shapes;
  }
  return {};
}

// NUMA nodes of a shape with `rails` of `gpus` (GPUs publishing resource.kubernetes.io/numaNode,
// each with a distinct RDMA NIC under its own root) and `cpus` CPUs.
std::size_t RailNumaNodes(const ShapeDevices& sd, const std::vector<uint32_t>& gpus, std::size_t rails,
                          std::size_t cpus) {
  const auto& shape = *sd.group->shape;
  std::size_t n = 0;
  for (const auto& [numa, members] : GpusByNuma(shape, gpus)) {
    n += RailCount(sd, members) >= rails && NumaCpus(shape, numa) >= cpus ? 1 : 0;
  }
  return n;
}

// The GPUs' alignment for rails that span NUMA nodes: the NVLink alternatives without constraint
// (an NVLink-complete shape, a clique by bus address) of the GPUs alone.
std::vector<Alternative> RailLinkCandidates(const Request& single, int weakest) {
  std::size_t ignored = 0;
  std::vector<Alternative> out;
  for (const auto& c : Candidates(single, weakest, policy::NumaAlignment::kPcieRoots, &ignored, &ignored, &ignored)) {
    if (c.placement == Placement::kNvlink && !c.constraint) out.push_back(c);
  }
  return out;
}

// Rails split per NUMA node (mutation.cpu), when no NUMA node holds the GPUs with their NICs and
// the CPUs: `parts` equal groups of rails, each with its share of the CPUs on its own NUMA node, as
// NUMA parts split plain GPUs. The GPUs are NVLink-connected (the shape's qualifying GPUs all, or
// a clique), and some shape has `parts` NUMA nodes that each hold a group's rails and CPUs. The
// fewest parts; rails and CPUs must divide evenly. Returns the shapes and fills `plan`, or none.
std::vector<const ShapeDevices*> PlanRailParts(const Request& all, int weakest, Plan& plan) {
  if (!all.nic || all.n < 2 || all.cpus == 0) return {};
  Request single = all;  // the GPUs' alignment, without NICs and CPUs
  single.nic = false;
  single.cpus = 0;
  std::vector<Alternative> candidates = RailLinkCandidates(single, weakest);
  for (std::size_t parts = 2; parts <= all.n && 2 * all.n + parts <= kMaxRequests; ++parts) {
    if (all.n % parts != 0 || all.cpus % parts != 0) continue;
    for (auto& c : candidates) {
      std::vector<const ShapeDevices*> shapes;
      for (const auto* sd : all.enough) {
        OnShape o = Evaluate(single, *sd, c);
        if (o.useful && o.safe && RailNumaNodes(*sd, o.sel, all.n / parts, all.cpus / parts) >= parts) {
          shapes.push_back(sd);
        }
      }
      if (shapes.empty()) continue;
      c.name = "nvlink-1";
      if (!c.attr.empty()) c.restriction = InList("resource.kubernetes.io", c.attr, c.values);
      plan.placement = c.placement;
      plan.alternatives = {c};
      plan.rails = true;
      plan.parts = parts;
      return shapes;
    }
  }
  return {};
}

// The most CPUs per GPU that rails split one per NUMA node could take on some shape (0: none).
std::size_t RailPartShare(const Request& all, int weakest) {
  Request single = all;
  single.nic = false;
  single.cpus = 0;
  std::size_t best = 0;
  for (const auto& c : RailLinkCandidates(single, weakest)) {
    for (const auto* sd : all.enough) {
      OnShape o = Evaluate(single, *sd, c);
      if (!o.useful || !o.safe) continue;
      std::vector<std::size_t> cpus;  // of the NUMA nodes with a rail
      for (const auto& [numa, members] : GpusByNuma(*sd->group->shape, o.sel)) {
        if (RailCount(*sd, members) > 0) cpus.push_back(NumaCpus(*sd->group->shape, numa));
      }
      if (cpus.size() < all.n) continue;
      std::sort(cpus.rbegin(), cpus.rend());
      best = std::max(best, cpus[all.n - 1]);
    }
  }
  return best;
}

// With CPUs and an RDMA NIC: why no node places them when the same GPUs with their NICs would fit
// without the CPUs (where the NICs are, the GPUs with them do not share a NUMA node, or it has too
// few CPUs), with what would work; "" when the NICs do not fit without CPUs either.
std::string NicCpuMiss(const Request& all, int weakest, const policy::Policy& policy) {
  Request nocpu = all;
  nocpu.cpus = 0;
  Plan p;
  std::size_t ignored = 0;
  std::vector<const ShapeDevices*> shapes =
      Choose(nocpu, Candidates(nocpu, weakest, policy.mutation.numa_alignment, &ignored, &ignored, &ignored), p);
  if (p.alternatives.empty() && all.n >= 2 && 2 * all.n <= kMaxRequests) shapes = PlanRails(nocpu, weakest, p, &ignored);
  if (p.alternatives.empty() || shapes.empty()) return "";
  std::size_t most_gpus = 0, most_cpus = 0;  // on one NUMA node: GPUs with their NICs; CPUs beside all N
  for (const auto* sd : shapes) {
    const auto& shape = *sd->group->shape;
    for (const auto& [numa, members] : GpusByNuma(shape, all.q.at(sd))) {
      const std::size_t k = p.rails ? RailCount(*sd, members) : MostUnderOneRoot(nocpu, *sd, members);
      most_gpus = std::max(most_gpus, std::min(k, all.n));
      if (k >= all.n) most_cpus = std::max(most_cpus, NumaCpus(shape, numa));
    }
  }
  const std::string n = std::to_string(all.n), cpus = std::to_string(all.cpus);
  std::string why = "no node can place " + n + " GPUs matching " + all.what + " with an RDMA NIC " +
                    (p.rails ? "each under its own PCIe root" : "under their PCIe root") + " and " + cpus +
                    " CPUs on their NUMA node (mutation.cpu): on the nodes that give the GPUs their NICs (" +
                    DescribeShape(*shapes.front()->group) +
                    (shapes.size() > 1 ? " and " + std::to_string(shapes.size() - 1) + " more shapes" : "") + ")";
  if (most_gpus < all.n) {
    why += most_gpus <= 1 ? ", each of those GPUs with its NIC is on a NUMA node of its own"
                          : ", at most " + std::to_string(most_gpus) + " of those GPUs with their NICs share a NUMA node";
    why += ", so the " + cpus + " CPUs cannot share one NUMA node with all " + n + " GPUs";
  } else {
    why += ", the NUMA node of the GPUs with their NIC has at most " + std::to_string(most_cpus) + " CPUs";
  }
  why += ". Fix: ";
  if (const std::size_t share = p.rails ? RailPartShare(all, weakest) : 0; share > 0) {
    why += "ask for at most " + std::to_string(share * all.n) + " CPUs, a multiple of " + n +
           " (draguard then splits them per GPU, each GPU's share on its own NUMA node with its NIC), or ";
  } else if (most_gpus >= all.n && most_cpus > 0) {
    why += "ask for at most " + std::to_string(most_cpus) + " CPUs, or ";
  }
  return why + "leave the NIC out (draguard.io/nic: none)";
}

Result<Plan> PlanGpus(const std::string& what, int64_t count, bool nic, int64_t cpus, const std::string& interconnect,
                      const View& view, const Selectors& selectors, const policy::Policy& policy) {
  Plan plan;
  if (view.shapes.empty()) {
    if (count < 2 && !nic) return plan;  // one GPU needs no topology
    std::string why = "no topology is loaded for any node, so draguard cannot tell which GPUs" +
                      std::string(nic ? " and NICs" : "") +
                      " share NVLink, a PCIe root or a NUMA node. Provide the nodes' hwloc exports "
                      "(`draguard topology export` on each node; draguard serve --topology-dir DIR or "
                      "--topology-configmaps NAMESPACE, the chart's topology values; "
                      "draguard convert --topology-dir DIR)";
    if (!policy.mutation.allow_unaligned) return Status::FailedPrecondition(why);
    plan.placement = Placement::kUnaligned;
    plan.note = why + "; converted unaligned because the policy sets mutation.unaligned: allow";
    return plan;
  }
  Request r(what, static_cast<std::size_t>(count), nic, static_cast<std::size_t>(cpus), view);
  for (const auto& sd : view.shapes) {
    std::vector<uint32_t>& q = r.q[&sd] = Qualifying(sd, selectors);
    if (q.size() > r.best || r.best_shape == nullptr) r.best = q.size(), r.best_shape = &sd;
    if (q.size() >= r.n) r.enough.push_back(&sd);
  }
  if (r.enough.empty()) {
    return Status::FailedPrecondition("no node has " + std::to_string(r.n) + " GPUs matching " + what + "; at most " +
                                      std::to_string(r.best) + " on " + DescribeShape(*r.best_shape->group));
  }
  const int weakest = WeakestClass(interconnect.empty() || interconnect == "any" ? policy.mutation.interconnect
                                                                                 : interconnect);
  const Request all = r;  // every shape with enough GPUs, before the CPUs narrow them
  if (r.cpus > 0) {
    if (Status kept = KeepShapesWithCpus(r); !kept.ok()) {
      std::string socket_miss;
      if (!policy.mutation.kueue) {
        if (std::vector<const ShapeDevices*> shapes = PlanSockets(r, weakest, plan, &socket_miss); !shapes.empty()) {
          r.RestrictTo(plan, shapes);
          return plan;
        }
      }
      std::vector<const ShapeDevices*> shapes = PlanNumaParts(r, plan);
      if (shapes.empty()) shapes = PlanRailParts(all, weakest, plan);
      if (!shapes.empty()) {
        r.RestrictTo(plan, shapes);
        return plan;
      }
      if (r.nic) {
        if (std::string miss = NicCpuMiss(all, weakest, policy); !miss.empty()) return Status::FailedPrecondition(miss);
      }
      if (!socket_miss.empty()) {
        return Status::FailedPrecondition("no node can place " + std::to_string(r.n) + " GPUs matching " + r.what +
                                          " with " + std::to_string(r.cpus) +
                                          " CPUs on their socket (mutation.cpu; the GPUs' memory is a NUMA node of its "
                                          "own, Grace and POWER9): " + socket_miss);
      }
      return kept;
    }
  }
  if (r.n == 1 && !nic) {
    r.RestrictTo(plan, r.enough);
    return plan;
  }
  std::size_t best_link = 0, best_root = 0, best_numa = 0;
  std::vector<Alternative> candidates =
      Candidates(r, weakest, policy.mutation.numa_alignment, &best_link, &best_root, &best_numa);
  std::string partial;  // mutation.kueue: what the only alternatives that fit cover, in words
  std::vector<const ShapeDevices*> shapes =
      policy.mutation.kueue ? ChooseOne(r, candidates, plan, &partial) : Choose(r, candidates, plan);
  if (!plan.alternatives.empty()) {
    r.RestrictTo(plan, shapes);
    return plan;
  }
  if (!partial.empty() && !r.nic) {
    return Status::FailedPrecondition(
        "no node can place " + std::to_string(r.n) + " GPUs matching " + r.what +
        " in one alignment without firstAvailable (mutation.kueue: Kueue refuses firstAvailable): each alignment "
        "that fits covers only " + partial +
        ", so the Pod would wait while aligned GPUs elsewhere on the node are free. Fix: set "
        "mutation.numaAlignment: numaNode where the GPU driver publishes resource.kubernetes.io/numaNode (one "
        "constraint covers every NUMA node), or ask for GPUs that one PCIe root or NVLink domain holds");
  }
  std::size_t best_rails = 0;
  if (r.nic && r.n >= 2) {
    if (2 * r.n > kMaxRequests) {
      return Status::FailedPrecondition(std::to_string(r.n) + " GPUs with one RDMA NIC each need " +
                                        std::to_string(2 * r.n) + " requests; a claim holds at most 32");
    }
    shapes = PlanRails(r, weakest, plan, &best_rails);
    if (shapes.empty() && r.cpus > 0) shapes = PlanRailParts(all, weakest, plan);
    if (!plan.alternatives.empty()) {
      r.RestrictTo(plan, shapes);
      return plan;
    }
  }
  std::string why = "no node can place " + std::to_string(r.n) + " GPUs matching " + r.what + " " +
                    (r.n < 2 ? "" : ClassWords(weakest)) +
                    (r.nic ? std::string(r.n < 2 ? "" : ", ") + "with an RDMA NIC under their PCIe root" : "") +
                    "; at most " + std::to_string(best_link) + " NVLink-connected, " + std::to_string(best_root) +
                    " under one PCIe root" + (r.nic ? " with an RDMA NIC" : "") +
                    (r.nic ? ", " + std::to_string(best_rails) + " with an RDMA NIC each under its own root"
                           : ", " + std::to_string(best_numa) + " on one NUMA node") +
                    " (" +
                    DescribeShape(*r.best_shape->group) + ")";
  if (weakest < 2) why += "; draguard.io/interconnect or mutation.interconnect accepts weaker placements";
  // With CPUs, the NIC may fit only where the CPUs do not: say so, not the numbers of the shapes
  // the CPUs left.
  if (r.nic && r.cpus > 0) {
    if (std::string miss = NicCpuMiss(all, weakest, policy); !miss.empty()) why = std::move(miss);
  }
  if (!policy.mutation.allow_unaligned) return Status::FailedPrecondition(why);
  plan.placement = Placement::kUnaligned;
  plan.note = why + "; placed unaligned because the policy sets mutation.unaligned: allow";
  r.RestrictTo(plan, r.enough);
  return plan;
}

}  // namespace

std::size_t SocketConstraints(std::size_t gpus, std::size_t sockets) {
  return sockets * (sockets - 1) * (gpus + gpus * (gpus - 1) / 2);
}

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
      "mutation.view/" + dra::NicOptionsOf(policy).Key(),
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
  auto planned = PlanGpus(filter, p.count, nic, p.cpus, interconnect, view, compiled, policy);
  if (!planned.ok()) return Status(planned.status().code(), who + ": " + planned.status().message());
  return planned;
}

void NodeRestriction::Add(const Plan& plan) {
  if (!plan.shapes) return;
  if (!shapes) {
    shapes = *plan.shapes;
    return;
  }
  std::set<std::size_t> both;
  std::set_intersection(shapes->begin(), shapes->end(), plan.shapes->begin(), plan.shapes->end(),
                        std::inserter(both, both.end()));
  shapes = std::move(both);
}

Status ResolveRestriction(const NodeRestriction& where, const View& view, const policy::Policy& policy,
                          GeneratedTemplate* out) {
  if (!where.shapes) return Status::Ok();
  std::size_t restricted_nodes = 0;
  for (std::size_t i : *where.shapes) restricted_nodes += view.shapes[i].group->nodes.size();
  if (restricted_nodes == 0) {
    return Status::FailedPrecondition("no single node can place every converted container's devices together");
  }
  for (std::size_t i : *where.shapes) out->shapes.push_back(view.shapes[i].group->shape->fingerprint);
  std::sort(out->shapes.begin(), out->shapes.end());
  if (restricted_nodes <= policy.mutation.hostname_affinity_limit) {
    for (std::size_t i : *where.shapes) {
      out->nodes.insert(out->nodes.end(), view.shapes[i].group->nodes.begin(), view.shapes[i].group->nodes.end());
    }
    std::sort(out->nodes.begin(), out->nodes.end());
  }
  return Status::Ok();
}

}  // namespace draguard::mutation::internal
