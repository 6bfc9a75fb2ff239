// Converting Pods (and offline, workloads) into DRA form (see mutation.h).
#include <algorithm>
#include <functional>
#include <optional>
#include <set>
#include <tuple>

#include "draguard/dra/pod_specs.h"
#include "draguard/dra/satisfiability.h"
#include "draguard/mutation/mutation.h"
#include "draguard/topology/model.h"
#include "draguard/topology/snapshot.h"
#include "internal.h"

namespace draguard::mutation {
namespace {

using admission::Json;

constexpr const char* kLists[] = {"containers", "initContainers"};

// Calls fn(resources, section name, section) for every requests/limits map of every container and
// init container of `spec` (const or not).
template <typename J, typename Fn>
void ForEachResourceSection(J& spec, Fn&& fn) {
  for (const char* list : kLists) {
    auto it = spec.find(list);
    if (it == spec.end() || !it->is_array()) continue;
    for (auto& c : *it) {
      if (!c.is_object()) continue;
      auto res = c.find("resources");
      if (res == c.end() || !res->is_object()) continue;
      for (const char* section : {"requests", "limits"}) {
        auto sec = res->find(section);
        if (sec != res->end() && sec->is_object()) fn(*res, section, *sec);
      }
    }
  }
}

bool HasLegacy(const Json& spec, const policy::Policy& policy) {
  bool found = false;
  ForEachResourceSection(spec, [&](const Json&, const char*, const Json& sec) {
    for (auto e = sec.begin(); e != sec.end() && !found; ++e) found = policy.IsLegacyGpuRequest(e.key());
  });
  return found;
}

// Removes legacy entries from every container; drops maps left empty.
void StripLegacy(Json& spec, const policy::Policy& policy) {
  std::vector<std::pair<Json*, const char*>> emptied;
  ForEachResourceSection(spec, [&](Json& res, const char* section, Json& sec) {
    std::vector<std::string> drop;
    for (auto e = sec.begin(); e != sec.end(); ++e) {
      if (policy.IsLegacyGpuRequest(e.key())) drop.push_back(e.key());
    }
    for (const auto& k : drop) sec.erase(k);
    if (sec.empty()) emptied.emplace_back(&res, section);
  });
  for (auto [res, section] : emptied) res->erase(section);  // after the walk: erasing invalidates it
}

std::string FreeClaimName(const Json& spec) {
  std::set<std::string> taken;
  if (auto it = spec.find("resourceClaims"); it != spec.end() && it->is_array()) {
    for (const auto& rc : *it) {
      if (rc.is_object() && rc.contains("name") && rc["name"].is_string()) taken.insert(rc["name"].get<std::string>());
    }
  }
  std::string base = std::string(kNamePrefix) + "gpu";
  if (!taken.count(base)) return base;
  for (int i = 2;; ++i) {
    std::string name = base + "-" + std::to_string(i);
    if (!taken.count(name)) return name;
  }
}

// The claims of one Pod are allocated on one node, without sharing devices. Checks that some node
// can hold them all: the templates' requests merged into one claim (names prefixed per template,
// constraints kept per template) must be satisfiable. Returns why not, or "".
std::string JointlyUnsatisfiable(const std::vector<const GeneratedTemplate*>& templates, const policy::Policy& policy,
                                 const topology::Snapshot& topology) {
  Json requests = Json::array();
  Json constraints = Json::array();
  for (std::size_t i = 0; i < templates.size(); ++i) {
    const Json& devices = templates[i]->object["spec"]["spec"]["devices"];
    const std::string prefix = "t" + std::to_string(i) + "-";
    for (Json r : devices["requests"]) {
      r["name"] = prefix + r["name"].get<std::string>();
      requests.push_back(std::move(r));
    }
    if (devices.contains("constraints")) {
      for (Json c : devices["constraints"]) {
        for (auto& name : c["requests"]) name = prefix + name.get<std::string>();
        constraints.push_back(std::move(c));
      }
    }
  }
  Json devices = {{"requests", requests}};
  if (!constraints.empty()) devices["constraints"] = constraints;
  Json merged = {{"apiVersion", "resource.k8s.io/v1"},
                 {"kind", "ResourceClaimTemplate"},
                 {"metadata", {{"name", "draguard-pod"}}},
                 {"spec", {{"spec", {{"devices", devices}}}}}};
  auto report = dra::CheckSatisfiable(merged, policy, topology);
  if (report.verdict != dra::SatisfiabilityReport::Verdict::kUnsatisfiable) return "";
  return "no node can hold all their devices at once: " + report.message;
}

// Whether the NUMA-local needs `ties` (mutation.cpu: GPUs and CPUs that one numaNode constraint
// keeps on one NUMA node) fit the NUMA nodes of `shape` together: GPUs that publish
// resource.kubernetes.io/numaNode and CPUs, each used once. A bounded search; running out of its
// budget counts as fitting (the scheduler decides).
bool NumaNeedsFit(const topology::Shape& shape, std::vector<internal::CpuTie> ties) {
  std::vector<int64_t> gpus(shape.numa_nodes.size(), 0), cpus(shape.numa_nodes.size(), 0);
  for (std::size_t k = 0; k < shape.numa_nodes.size(); ++k) cpus[k] = shape.numa_nodes[k].cpus;
  for (const auto& g : shape.gpus) {
    const uint32_t numa = shape.AlignableNumaNode(g);
    if (numa == topology::kNoIndex) continue;  // no numaNode of its CPUs published
    const uint32_t k = shape.NumaIndex(numa);
    if (k < gpus.size()) ++gpus[k];
  }
  std::sort(ties.begin(), ties.end(), [](const internal::CpuTie& a, const internal::CpuTie& b) {
    return std::tie(a.cpus, a.gpus) > std::tie(b.cpus, b.gpus);
  });
  int budget = 100000;
  std::function<bool(std::size_t)> place = [&](std::size_t i) {
    if (i == ties.size() || --budget <= 0) return true;
    for (std::size_t k = 0; k < gpus.size(); ++k) {
      if (gpus[k] < ties[i].gpus || cpus[k] < ties[i].cpus) continue;
      gpus[k] -= ties[i].gpus;
      cpus[k] -= ties[i].cpus;
      const bool ok = place(i + 1);
      gpus[k] += ties[i].gpus;
      cpus[k] += ties[i].cpus;
      if (ok) return true;
    }
    return false;
  };
  return place(0);
}

// Where a Pod may run: named nodes, or (when `nodes` is empty) shapes.
struct Restriction {
  std::vector<std::string> nodes;   // ascending
  std::vector<std::string> shapes;  // ascending fingerprints
};

std::vector<std::string> IntersectSorted(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::string> out;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

// Both restrictions at once. Named nodes win over shapes (they are filtered by the other's shapes).
Restriction Intersect(const Restriction& a, const Restriction& b, const topology::Snapshot* topo,
                      const policy::Policy& policy) {
  Restriction out;
  auto node_shape_in = [&](const std::string& node, const std::vector<std::string>& shapes) {
    const topology::NodeTopology* t = topo != nullptr ? topo->Find(node) : nullptr;
    return t != nullptr && std::binary_search(shapes.begin(), shapes.end(), t->shape->fingerprint);
  };
  if (!a.nodes.empty() && !b.nodes.empty()) {
    out.nodes = IntersectSorted(a.nodes, b.nodes);
  } else if (!a.nodes.empty() || !b.nodes.empty()) {
    const Restriction& named = a.nodes.empty() ? b : a;
    const Restriction& shaped = a.nodes.empty() ? a : b;
    for (const auto& n : named.nodes) {
      if (node_shape_in(n, shaped.shapes)) out.nodes.push_back(n);
    }
  } else {
    out.shapes = IntersectSorted(a.shapes, b.shapes);
    std::vector<std::string> nodes;
    for (const auto& fp : out.shapes) {
      if (const auto* g = topo != nullptr ? topo->FindShape(fp) : nullptr) nodes.insert(nodes.end(), g->nodes.begin(), g->nodes.end());
    }
    if (nodes.size() <= policy.mutation.hostname_affinity_limit) {
      std::sort(nodes.begin(), nodes.end());
      out.nodes = std::move(nodes);
    }
  }
  return out;
}

// ANDs a node requirement into every required nodeSelectorTerm (creating one when there is none).
// Node names go through matchFields, which takes exactly one value per requirement, so a list of
// nodes becomes one term per (existing term, node); shapes use one matchExpressions entry.
void RequireNodes(Json& spec, const Restriction& where) {
  Json& required = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
  if (!required.is_object()) required = Json::object();
  Json& terms = required["nodeSelectorTerms"];
  if (!terms.is_array() || terms.empty()) terms = Json::array({Json::object()});
  Json out = Json::array();
  for (Json term : terms) {
    if (!term.is_object()) term = Json::object();
    if (!where.nodes.empty()) {
      for (const auto& node : where.nodes) {
        Json t = term;
        if (!t["matchFields"].is_array()) t["matchFields"] = Json::array();
        t["matchFields"].push_back({{"key", "metadata.name"}, {"operator", "In"}, {"values", Json::array({node})}});
        out.push_back(std::move(t));
      }
    } else {
      if (!term["matchExpressions"].is_array()) term["matchExpressions"] = Json::array();
      term["matchExpressions"].push_back(
          {{"key", std::string(topology::kShapeLabel)}, {"operator", "In"}, {"values", where.shapes}});
      out.push_back(std::move(term));
    }
  }
  terms = std::move(out);
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// "\"a\", \"b\""
std::string Quoted(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "\"" : ", \"") + s + "\"";
  return out;
}

// A Pod refused at step `refusal`, because of `reason`.
PodConversion Refused(PodConversion::Refusal refusal, std::string reason) {
  PodConversion out;
  out.outcome = PodConversion::Outcome::kRefused;
  out.refusal = refusal;
  out.reason = std::move(reason);
  return out;
}

// The names of the containers at `pointers` (the pointer for a container without a name).
std::vector<std::string> ContainerNames(const Json& pod, const std::vector<std::string>& pointers) {
  std::vector<std::string> names;
  for (const auto& pointer : pointers) {
    const Json& c = pod.at(Json::json_pointer(pointer));
    names.push_back(c.contains("name") && c["name"].is_string() ? c["name"].get<std::string>() : pointer);
  }
  return names;
}

// The request names of a generated template's claim.
std::vector<std::string> RequestNames(const GeneratedTemplate& t) {
  std::vector<std::string> out;
  const Json* requests = dra::Member(dra::Member(dra::Member(dra::Member(&t.object, "spec"), "spec"), "devices"),
                                     "requests");
  if (requests == nullptr || !requests->is_array()) return out;
  for (const auto& r : *requests) out.push_back(dra::StringMember(&r, "name"));
  return out;
}

// Adds a claim from template `t` to `pod` and to its containers at `pointers`. With CPUs in the
// claim (`cpus` > 0, mutation.cpu) the containers list each request, so that the CPU request shows
// in the Pod (DG016 reads it), and their cpu requests and limits are set to the CPUs of the claim
// (dra-driver-cpu's accounting: kubelet and scheduler count them once). Under mutation.kueue they
// list the claim once instead: Kueue v0.19's Workload keys a container's claims by name alone and
// refuses two requests of one claim, which would leave the Pod gated (DG016 then knows the CPUs
// are in the claim from the policy).
void AddClaim(Json& pod, const std::vector<std::string>& pointers, const GeneratedTemplate& t, int64_t cpus,
              bool kueue) {
  Json& spec = pod["spec"];
  const std::string claim = FreeClaimName(spec);
  for (const auto& pointer : pointers) {
    Json& container = pod[Json::json_pointer(pointer)];
    Json& claims = container["resources"]["claims"];
    if (!claims.is_array()) claims = Json::array();
    if (cpus > 0) {
      if (kueue) {
        claims.push_back({{"name", claim}});
      } else {
        for (const auto& request : RequestNames(t)) claims.push_back({{"name", claim}, {"request", request}});
      }
      for (const char* section : {"requests", "limits"}) container["resources"][section]["cpu"] = std::to_string(cpus);
    } else if (t.whole_claim) {
      claims.push_back({{"name", claim}});
    } else {
      claims.push_back({{"name", claim}, {"request", "gpu"}});
    }
  }
  Json& rcs = spec["resourceClaims"];
  if (!rcs.is_array()) rcs = Json::array();
  rcs.push_back({{"name", claim}, {"resourceClaimTemplateName", t.name}});
}

// The templates of `names` (one per entry), from `templates`.
std::vector<const GeneratedTemplate*> TemplatesNamed(const std::vector<std::string>& names,
                                                     const std::vector<GeneratedTemplate>& templates) {
  std::vector<const GeneratedTemplate*> out;
  for (const auto& name : names) {
    for (const auto& t : templates) {
      if (t.name == name) out.push_back(&t);
    }
  }
  return out;
}

// With CPUs in several claims of a Pod (mutation.cpu; each claim was planned alone): narrows
// `where` to the shapes whose NUMA nodes hold every claim's GPUs with their CPUs at once. Returns
// why no shape does, or "".
std::string KeepShapesWithNumaRoom(const std::vector<const GeneratedTemplate*>& templates, const policy::Policy& policy,
                                   const topology::Snapshot& topology, std::optional<Restriction>& where) {
  std::vector<internal::CpuTie> ties;
  for (const auto* t : templates) {
    auto more = internal::CpuTies(t->object, policy);
    ties.insert(ties.end(), more.begin(), more.end());
  }
  if (ties.size() < 2) return "";
  std::vector<std::string> fit;
  std::size_t candidates = 0;
  for (const topology::ShapeGroup& g : topology.shapes()) {
    if (g.shape->gpus.empty()) continue;
    if (where) {
      bool allowed = false;
      if (!where->nodes.empty()) {
        for (const auto& n : g.nodes) allowed = allowed || std::binary_search(where->nodes.begin(), where->nodes.end(), n);
      } else {
        allowed = std::binary_search(where->shapes.begin(), where->shapes.end(), g.shape->fingerprint);
      }
      if (!allowed) continue;
    }
    ++candidates;
    if (NumaNeedsFit(*g.shape, ties)) fit.push_back(g.shape->fingerprint);
  }
  if (fit.empty()) {
    std::string needs;
    for (const auto& t : ties) {
      needs += (needs.empty() ? "" : ", ") + std::to_string(t.gpus) + " GPUs with " + std::to_string(t.cpus) + " CPUs";
    }
    return "no node they may use has NUMA nodes for all their GPUs with their CPUs at once (mutation.cpu: " + needs +
           ", each on one NUMA node)";
  }
  if (fit.size() == candidates) return "";  // every shape it may use: nothing to narrow
  std::sort(fit.begin(), fit.end());
  const Restriction room{{}, fit};
  where = where ? Intersect(*where, room, &topology, policy) : Intersect(room, room, &topology, policy);
  return "";
}

// Gives every entry of `profile` its claim and template in `out.pod` (`covered`: per entry, the
// containers it covers), and restricts the Pod to the nodes that can place them all. Returns why
// the Pod is refused, or "".
std::string ConvertEntries(const Json& pod, const ClaimProfile& profile,
                           const std::vector<std::vector<std::string>>& covered, std::string_view namespace_name,
                           const policy::Policy& policy, const topology::Snapshot* topology, PodConversion& out) {
  // One claim and template per converted container (init containers that reuse a request share
  // it): constraints never tie devices of different containers, and equal container profiles
  // share one template across Pods.
  std::optional<Restriction> where;  // the intersection of the templates' node restrictions
  std::vector<std::string> parts;
  std::vector<std::string> containers;
  std::vector<std::string> entry_templates;  // per entry, the template's name
  for (std::size_t e = 0; e < profile.entries.size(); ++e) {
    const RequestProfile& rp = profile.entries[e].profile;
    ClaimProfile one;
    one.entries.push_back({"gpu", rp});
    one.nic = profile.nic && rp.kind == RequestProfile::Kind::kGpu;
    one.interconnect = profile.interconnect;
    auto tmpl = GenerateTemplate(one, namespace_name, policy, topology);
    std::vector<std::string> names = ContainerNames(pod, covered[e]);
    if (!tmpl.ok()) return "container " + Quoted(names) + ": " + tmpl.status().message();
    AddClaim(out.pod, covered[e], *tmpl, rp.cpus, policy.mutation.kueue);
    if (!tmpl->nodes.empty() || !tmpl->shapes.empty()) {
      Restriction r{tmpl->nodes, tmpl->shapes};
      where = where ? Intersect(*where, r, topology, policy) : r;
      if (where->nodes.empty() && where->shapes.empty()) {
        return "no single node can place the devices of every converted container (container " + Quoted(names) +
               " needs " + tmpl->description + ")";
      }
    }
    out.warnings.insert(out.warnings.end(), tmpl->notes.begin(), tmpl->notes.end());
    containers.insert(containers.end(), names.begin(), names.end());
    entry_templates.push_back(tmpl->name);
    bool known = false;
    for (const auto& t : out.templates) known = known || t.name == tmpl->name;
    if (!known) {
      parts.push_back(tmpl->name + " (" + tmpl->description + ")");
      out.templates.push_back(std::move(*tmpl));
    }
  }
  if (profile.entries.size() > 1 && topology != nullptr) {
    auto per_entry = TemplatesNamed(entry_templates, out.templates);
    if (std::string why = JointlyUnsatisfiable(per_entry, policy, *topology); !why.empty()) {
      return "containers " + Quoted(containers) + " together: " + why;
    }
  }
  if (topology != nullptr) {
    if (std::string why = KeepShapesWithNumaRoom(TemplatesNamed(entry_templates, out.templates), policy, *topology, where);
        !why.empty()) {
      return "containers " + Quoted(containers) + " together: " + why;
    }
  }
  if (where) {
    RequireNodes(out.pod["spec"], *where);
    out.warnings.push_back("restricted to " +
                           (!where->nodes.empty() ? "nodes " + Join(where->nodes)
                                                  : "topology shapes " + Join(where->shapes)) +
                           ": the only nodes where the converted devices can be placed");
  }
  out.summary = "converted legacy GPU requests of " + Join(containers) + " into ResourceClaimTemplate" +
                (parts.size() > 1 ? "s " : " ") + Join(parts);
  return "";
}

// Whether `v` (a resource quantity) asks for something: anything but 0.
bool NonZero(const Json& v) {
  if (v.is_number()) return v.get<double>() != 0;
  if (v.is_string()) {
    const std::string t = v.get<std::string>();
    return !(t == "0" || t == "0.0" || t.empty());
  }
  return true;
}

// JSON Pointers of the legacy GPU entries left anywhere in `node` (under a `limits` or
// `requests` map), at most `max`; depth-bounded.
void FindLegacy(const Json& node, const std::string& pointer, const policy::Policy& policy, int depth,
                std::vector<std::string>* out) {
  if (depth > 64 || out->size() >= 16) return;
  if (node.is_array()) {
    for (std::size_t i = 0; i < node.size(); ++i) FindLegacy(node[i], pointer + "/" + std::to_string(i), policy, depth + 1, out);
    return;
  }
  if (!node.is_object()) return;
  for (auto it = node.begin(); it != node.end(); ++it) {
    const std::string child = pointer + "/" + dra::EscapePointerToken(it.key());
    if ((it.key() == "limits" || it.key() == "requests") && it->is_object()) {
      for (auto e = it->begin(); e != it->end(); ++e) {
        if (policy.IsLegacyGpuRequest(e.key()) && NonZero(*e)) out->push_back(child + "/" + dra::EscapePointerToken(e.key()));
      }
      continue;
    }
    FindLegacy(*it, child, policy, depth + 1, out);
  }
}

// The parent pointer of `pointer` ("/spec/predictor/model" -> "/spec/predictor").
std::string ParentPointer(const std::string& pointer) { return pointer.substr(0, pointer.rfind('/')); }

}  // namespace

PodConversion ConvertPod(const admission::Json& pod, std::string_view namespace_name, const policy::Policy& policy,
                         const topology::Snapshot* topology) {
  PodConversion out;
  const Json* spec = nullptr;
  if (pod.is_object()) {
    if (auto it = pod.find("spec"); it != pod.end() && it->is_object()) spec = &*it;
  }
  if (spec == nullptr || !HasLegacy(*spec, policy)) {
    out.reason = "no legacy GPU requests";
    return out;
  }
  // Conversion may add node and pod affinity: a spec.affinity of another type than the API's
  // (only a request that bypassed the API server carries one) is refused, not replaced.
  if (const Json* affinity = dra::Member(spec, "affinity"); affinity != nullptr && !affinity->is_null()) {
    if (!affinity->is_object()) return Refused(PodConversion::Refusal::kUnsupportedRequest, "spec.affinity is not an object");
    for (const char* key : {"nodeAffinity", "podAffinity"}) {
      const Json* part = dra::Member(affinity, key);
      if (part != nullptr && !part->is_null() && !part->is_object()) {
        return Refused(PodConversion::Refusal::kUnsupportedRequest, std::string("spec.affinity.") + key + " is not an object");
      }
    }
    const Json* terms = dra::Member(dra::Member(affinity, "podAffinity"), "requiredDuringSchedulingIgnoredDuringExecution");
    if (terms != nullptr && !terms->is_null() && !terms->is_array()) {
      return Refused(PodConversion::Refusal::kUnsupportedRequest,
                     "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution is not a list");
    }
  }
  std::vector<std::vector<std::string>> covered;
  auto profile = ProfilePod(pod, policy, &covered);
  if (!profile.ok()) return Refused(PodConversion::Refusal::kUnsupportedRequest, profile.status().message());
  out.warnings = profile->notes;
  out.pod = pod;
  StripLegacy(out.pod["spec"], policy);
  if (profile->entries.empty()) {
    out.summary = "removed legacy GPU entries that request no device";
  } else if (std::string why = ConvertEntries(pod, *profile, covered, namespace_name, policy, topology, out);
             !why.empty()) {
    return Refused(PodConversion::Refusal::kNotPlaceable, std::move(why));
  } else {
    std::vector<std::string> gpu_containers;
    for (const auto& pointers : covered) gpu_containers.insert(gpu_containers.end(), pointers.begin(), pointers.end());
    if (std::string why = internal::AddComputeDomain(pod, namespace_name, gpu_containers, policy, topology, &out);
        !why.empty()) {
      return Refused(PodConversion::Refusal::kNotPlaceable, std::move(why));
    }
  }
  out.patch = Json::diff(pod, out.pod);
  out.outcome = out.patch.empty() ? PodConversion::Outcome::kUnchanged : PodConversion::Outcome::kConverted;
  return out;
}

ObjectConversion ConvertObject(const admission::Json& object, std::string_view namespace_name,
                               const policy::Policy& policy, const topology::Snapshot* topology) {
  ObjectConversion out;
  out.object = object;
  if (!object.is_object()) {
    out.errors.push_back("not an object");
    return out;
  }
  admission::AdmissionRequest req = admission::CreateRequestFor(object, namespace_name);
  const std::string ns = req.namespace_;
  std::set<std::string> names;
  for (const auto& loc : dra::LocatePodSpecs(req, policy)) {
    const Json::json_pointer spec_ptr(loc.spec_pointer);
    const Json pod = internal::PodAt(out.object, loc);
    PodConversion c = ConvertPod(pod, ns, policy, topology);
    for (const auto& w : c.warnings) out.warnings.push_back(loc.spec_pointer + ": " + w);
    if (c.outcome == PodConversion::Outcome::kRefused) {
      out.errors.push_back(loc.spec_pointer + ": " + c.reason);
      continue;
    }
    if (c.outcome != PodConversion::Outcome::kConverted) continue;
    out.changed = true;
    if (!loc.workload) {
      out.object = c.pod;
    } else {
      out.object[spec_ptr] = c.pod["spec"];
      if (!loc.metadata_pointer.empty() && c.pod.contains("metadata")) {
        out.object[Json::json_pointer(loc.metadata_pointer)] = c.pod["metadata"];
      }
    }
    for (auto& t : c.templates) {
      if (names.insert(t.name).second) out.templates.push_back(std::move(t));
    }
    for (auto& cd : c.compute_domains) {
      if (names.insert(cd.name).second) out.compute_domains.push_back(std::move(cd));
    }
  }
  // Container-like objects of custom resources (KServe's predictor.model, TrainJob's trainer, ...).
  for (const auto& loose : dra::FindPodObjects(req, policy).loose_containers) {
    const Json::json_pointer ptr(loose.pointer);
    if (!out.object.contains(ptr) || !out.object.at(ptr).is_object()) continue;
    const Json container = out.object.at(ptr);
    std::vector<std::string> left;
    FindLegacy(container, loose.pointer, policy, 0, &left);
    if (left.empty()) continue;
    const std::string who = loose.pointer + ": container \"" + loose.name + "\"";
    if (container.contains("resourcesPerNode") || !loose.claims_in_parent || loose.pointer.empty()) {
      std::string resource = left.front().substr(left.front().rfind('/') + 1);
      for (std::size_t at; (at = resource.find("~1")) != std::string::npos;) resource.replace(at, 2, "/");
      for (std::size_t at; (at = resource.find("~0")) != std::string::npos;) resource.replace(at, 2, "~");
      out.errors.push_back(who + " requests " + resource +
                           " (at " + left.front() + ") but " + req.kind.kind +
                           " has no place for pod-level resource claims draguard could write (policy "
                           "customResources containerClaims: none); not convertible: request the GPUs "
                           "through the pod templates or ResourceClaims the resource supports");
      continue;
    }
    // The parent is PodSpec-like: convert the container as the only container of that spec.
    const Json::json_pointer parent_ptr(ParentPointer(loose.pointer));
    Json spec = out.object.at(parent_ptr);
    if (!spec.is_object()) continue;
    Json renamed = container;
    if (!renamed.contains("name")) renamed["name"] = loose.name;
    spec.erase("initContainers");
    spec["containers"] = Json::array({renamed});
    Json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"spec", spec}};
    if (object.contains("metadata")) pod["metadata"] = object["metadata"];
    PodConversion c = ConvertPod(pod, ns, policy, topology);
    for (const auto& w : c.warnings) out.warnings.push_back(loose.pointer + ": " + w);
    if (c.outcome == PodConversion::Outcome::kRefused) {
      out.errors.push_back(who + ": " + c.reason);
      continue;
    }
    if (c.outcome != PodConversion::Outcome::kConverted) continue;
    Json converted = c.pod["spec"]["containers"][0];
    if (!container.contains("name")) converted.erase("name");
    out.object[ptr] = converted;
    for (const char* key : {"resourceClaims", "affinity"}) {
      if (c.pod["spec"].contains(key)) out.object[parent_ptr][key] = c.pod["spec"][key];
    }
    out.changed = true;
    for (auto& t : c.templates) {
      if (names.insert(t.name).second) out.templates.push_back(std::move(t));
    }
  }
  // Never a silent pass: a legacy request left anywhere in the output is an error.
  if (out.errors.empty()) {
    std::vector<std::string> left;
    FindLegacy(out.object, "", policy, 0, &left);
    for (const auto& p : left) {
      out.errors.push_back(p + ": legacy GPU request left in place; draguard does not know this path as a "
                               "pod spec or container (add the kind to the policy's customResources, or "
                               "convert it by hand)");
    }
  }
  return out;
}

std::map<std::string, std::string> TemplateRefusals(const admission::AdmissionRequest& request,
                                                    const policy::Policy& policy,
                                                    const topology::Snapshot* topology) {
  std::map<std::string, std::string> out;
  if (!request.object.is_object()) return out;
  for (const auto& loc : dra::LocatePodSpecs(request, policy)) {
    if (!loc.workload) continue;
    const Json::json_pointer ptr(loc.spec_pointer);
    if (!request.object.contains(ptr)) continue;
    const Json& spec = request.object.at(ptr);
    if (!spec.is_object() || !HasLegacy(spec, policy)) continue;
    PodConversion c = ConvertPod(internal::PodAt(request.object, loc), request.namespace_, policy, topology);
    if (c.outcome == PodConversion::Outcome::kRefused) out.emplace(loc.spec_pointer, std::move(c.reason));
  }
  return out;
}

namespace internal {

Json PodAt(const Json& object, const dra::PodSpecLocation& loc) {
  if (!loc.workload) return object;
  Json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"spec", object.at(Json::json_pointer(loc.spec_pointer))}};
  if (!loc.metadata_pointer.empty() && object.contains(Json::json_pointer(loc.metadata_pointer))) {
    pod["metadata"] = object.at(Json::json_pointer(loc.metadata_pointer));
  }
  return pod;
}

}  // namespace internal

}  // namespace draguard::mutation
