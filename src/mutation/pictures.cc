// Placement pictures (pictures.h): the conversion of each pod spec, the node shapes it may land
// on, and per shape the devices its claim can receive (dra::PlaceClaim) drawn by topology::DrawSvg.
#include "draguard/mutation/pictures.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>

#include "draguard/dra/devices.h"
#include "draguard/dra/pod_specs.h"
#include "draguard/dra/satisfiability.h"
#include "draguard/mutation/mutation.h"
#include "draguard/topology/draw.h"
#include "draguard/topology/snapshot.h"
#include "internal.h"

namespace draguard::mutation {
namespace {

using admission::Json;

constexpr std::size_t kListedNodes = 4;

// The nodes, one per shape, a Pod using `t` may land on, each with every node of its shape it
// may land on.
std::vector<std::vector<std::string>> TargetShapes(const GeneratedTemplate& t, const topology::Snapshot& snap) {
  std::vector<std::vector<std::string>> out;
  auto add = [&](const std::string& fingerprint, const std::string& node) {
    for (auto& group : out) {
      const topology::NodeTopology* first = snap.Find(group.front());
      if (first != nullptr && first->shape->fingerprint == fingerprint) {
        group.push_back(node);
        return;
      }
    }
    out.push_back({node});
  };
  if (!t.nodes.empty()) {
    for (const auto& n : t.nodes) {
      if (const topology::NodeTopology* node = snap.Find(n)) add(node->shape->fingerprint, n);
    }
  } else {
    for (const topology::ShapeGroup& g : snap.shapes()) {
      if (!t.shapes.empty() && std::find(t.shapes.begin(), t.shapes.end(), g.shape->fingerprint) == t.shapes.end()) {
        continue;
      }
      for (const auto& n : g.nodes) add(g.shape->fingerprint, n);
    }
  }
  return out;
}

// The marks of `placement` on `node`: each device with the requests that can receive it (a MIG
// device marks its GPU).
topology::DrawMarks Marks(const dra::ClaimPlacement& placement, const topology::NodeTopology& node) {
  topology::DrawMarks m;
  m.gpu_requests.resize(node.shape->gpus.size());
  m.nic_requests.resize(node.shape->nics.size());
  if (placement.devices == nullptr) return m;
  for (const auto& r : placement.requests) {
    for (std::size_t d : r.devices) {
      const dra::Device& dev = (*placement.devices)[d];
      auto& list = dev.kind == dra::DeviceKind::kNic ? m.nic_requests : m.gpu_requests;
      if (dev.index >= list.size()) continue;
      if (std::find(list[dev.index].begin(), list[dev.index].end(), r.name) == list[dev.index].end()) {
        list[dev.index].push_back(r.name);
      }
    }
  }
  return m;
}

// CPU marks (mutation.cpu): a CPU request of `claim` tied by a numaNode matchAttribute to GPU
// requests can take its CPUs on the NUMA node of each GPU those requests can receive, when the
// node has the CPUs. The CPU driver is not simulated, so this is read from the constraint.
void MarkCpus(const Json& claim, const policy::Policy& policy, const topology::NodeTopology& node,
              topology::DrawMarks& m) {
  const topology::Shape& s = *node.shape;
  const std::vector<internal::CpuTie> ties = internal::CpuTies(claim, policy);
  if (ties.empty()) return;
  m.numa_requests.resize(s.numa_nodes.size());
  for (const auto& tie : ties) {
    const std::set<std::string> partners(tie.gpu_requests.begin(), tie.gpu_requests.end());
    for (uint32_t g = 0; g < s.gpus.size() && g < m.gpu_requests.size(); ++g) {
      const uint32_t numa = s.AlignableNumaNode(s.gpus[g]);
      if (numa == topology::kNoIndex) continue;
      bool tied = false;
      for (const auto& req : m.gpu_requests[g]) tied = tied || partners.count(req.substr(0, req.find('/'))) != 0;
      const uint32_t k = s.NumaIndex(numa);
      if (!tied || k >= s.numa_nodes.size() || static_cast<int64_t>(s.numa_nodes[k].cpus) < tie.cpus) continue;
      auto& list = m.numa_requests[k];
      if (std::find(list.begin(), list.end(), tie.cpu_request) == list.end()) list.push_back(tie.cpu_request);
    }
  }
}

std::string NodeList(const std::vector<std::string>& nodes) {
  std::string out;
  for (std::size_t i = 0; i < nodes.size() && i < kListedNodes; ++i) out += (i == 0 ? "" : ", ") + nodes[i];
  if (nodes.size() > kListedNodes) out += " +" + std::to_string(nodes.size() - kListedNodes) + " more";
  return out;
}

// "deployment-train" (+ "-1" for the second pod spec of an object with several).
std::string Label(const Json& object, std::size_t index, std::size_t specs) {
  std::string kind = object.value("kind", "object");
  std::transform(kind.begin(), kind.end(), kind.begin(), [](unsigned char c) { return std::tolower(c); });
  std::string name;
  if (auto md = object.find("metadata"); md != object.end() && md->is_object()) {
    name = md->value("name", "");
    if (name.empty()) name = md->value("generateName", "");
  }
  return kind + "-" + (name.empty() ? "unnamed" : name) + (specs > 1 ? "-" + std::to_string(index) : "");
}

}  // namespace

std::vector<PlacementPicture> DrawPlacements(const admission::Json& object, std::string_view namespace_name,
                                             const policy::Policy& policy, const topology::Snapshot* topology) {
  std::vector<PlacementPicture> out;
  if (topology == nullptr || topology->node_count() == 0 || !object.is_object()) return out;
  const topology::Snapshot& snap = *topology;
  const admission::AdmissionRequest req = admission::CreateRequestFor(object, namespace_name);
  const auto locations = dra::LocatePodSpecs(req, policy);
  for (std::size_t k = 0; k < locations.size(); ++k) {
    const auto& loc = locations[k];
    const Json pod = internal::PodAt(object, loc);
    const PodConversion c = ConvertPod(pod, req.namespace_, policy, topology);
    const std::string label = Label(object, k, locations.size());
    const std::string who = req.kind.kind + " " + req.namespace_ + "/" + req.name + (loc.workload ? " " + loc.spec_pointer : "");
    auto picture = [&](const topology::NodeTopology& node, topology::DrawMarks marks) {
      out.push_back({label + "-" + node.name, topology::DrawSvg(node, marks)});
    };
    if (c.outcome == PodConversion::Outcome::kConverted) {
      for (const GeneratedTemplate& t : c.templates) {
        for (const auto& nodes : TargetShapes(t, snap)) {
          const topology::NodeTopology* node = snap.Find(nodes.front());
          if (node == nullptr) continue;
          const dra::ClaimPlacement placement = dra::PlaceClaim(t.object, policy, snap, *node);
          topology::DrawMarks marks = Marks(placement, *node);
          MarkCpus(t.object, policy, *node, marks);
          marks.caption = {who + ": converted, ResourceClaimTemplate " + t.name,
                           t.description,
                           "may land on " + NodeList(nodes) + (t.nodes.empty() && t.shapes.empty() ? " (not pinned)" : "")};
          if (placement.exceeded) marks.caption.push_back("(the search ran out of budget: some devices are marked unproven)");
          if (!placement.satisfiable) marks.miss = "the claim cannot be allocated on this shape";
          picture(*node, std::move(marks));
        }
      }
    } else if (c.outcome == PodConversion::Outcome::kRefused) {
      // The nearest miss: what the same profile could receive without the alignment.
      std::optional<GeneratedTemplate> unaligned;
      if (auto profile = ProfilePod(pod, policy); profile.ok()) {
        policy::Policy relaxed = policy;
        relaxed.mutation.allow_unaligned = true;
        if (auto t = GenerateTemplate(*profile, req.namespace_, relaxed, topology); t.ok()) unaligned = std::move(*t);
      }
      for (const topology::ShapeGroup& g : snap.shapes()) {
        const topology::NodeTopology* node = snap.Find(g.nodes.front());
        if (node == nullptr) continue;
        topology::DrawMarks marks;
        if (unaligned) {
          marks = Marks(dra::PlaceClaim(unaligned->object, policy, snap, *node), *node);
          for (uint32_t i = 0; i < marks.gpu_requests.size(); ++i) {
            if (!marks.gpu_requests[i].empty()) marks.miss_gpus.push_back(i);
          }
        }
        marks.caption = {who + ": not convertible", "nodes of this shape: " + NodeList(g.nodes)};
        if (unaligned) marks.caption.push_back("outlined, the nearest miss: where " + unaligned->description + " could go");
        marks.miss = c.reason;
        picture(*node, std::move(marks));
      }
    }
  }
  return out;
}

}  // namespace draguard::mutation
