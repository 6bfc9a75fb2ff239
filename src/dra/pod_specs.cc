#include "draguard/dra/pod_specs.h"

#include <cstdint>
#include <optional>
#include <set>
#include <string_view>

#include "draguard/k8s/quantity.h"

namespace draguard::dra {
namespace {

using admission::Json;

// Expands a dotted template path ("spec.replicatedJobs[].template.spec.template") from `root`.
void Expand(const Json& node, const std::string& pointer, const std::vector<std::string>& tokens,
            std::size_t i, std::vector<std::pair<std::string, const Json*>>* out) {
  if (i == tokens.size()) {
    if (node.is_object()) out->emplace_back(pointer, &node);
    return;
  }
  if (!node.is_object()) return;
  const std::string& tok = tokens[i];
  if (tok == "*") {
    for (const auto& [k, v] : node.items()) Expand(v, pointer + "/" + EscapePointerToken(k), tokens, i + 1, out);
    return;
  }
  bool list = tok.size() > 2 && tok.compare(tok.size() - 2, 2, "[]") == 0;
  std::string key = list ? tok.substr(0, tok.size() - 2) : tok;
  auto it = node.find(key);
  if (it == node.end()) return;
  std::string p = pointer + "/" + EscapePointerToken(key);
  if (!list) {
    Expand(*it, p, tokens, i + 1, out);
    return;
  }
  if (!it->is_array()) return;
  for (std::size_t j = 0; j < it->size(); ++j) Expand((*it)[j], p + "/" + std::to_string(j), tokens, i + 1, out);
}

// Adds the pod spec of a PodTemplateSpec ({metadata, spec}) or of a bare PodSpec at `pointer`.
void AddTemplate(const Json& node, const std::string& pointer, const std::string& owner, PodObjects* out) {
  if (!node.is_object()) return;
  if (node.contains("containers") || node.contains("initContainers")) {
    out->specs.push_back(MakePodSpecRef(pointer, &node, nullptr, true, owner));
    return;
  }
  auto spec = node.find("spec");
  if (spec == node.end() || !spec->is_object()) return;
  out->specs.push_back(MakePodSpecRef(pointer + "/spec", &*spec, Member(&node, "metadata"), true, owner));
}

const Json* AtPointer(const Json& root, const std::string& pointer) {
  try {
    Json::json_pointer p(pointer);
    if (!root.contains(p)) return nullptr;
    return &root.at(p);
  } catch (...) {
    return nullptr;
  }
}

struct Builtin {
  const char* group;
  const char* kind;
  const char* path;  // dotted, to the PodTemplateSpec
};

constexpr Builtin kBuiltins[] = {
    {"apps", "Deployment", "spec.template"},   {"apps", "StatefulSet", "spec.template"},
    {"apps", "DaemonSet", "spec.template"},    {"apps", "ReplicaSet", "spec.template"},
    {"", "ReplicationController", "spec.template"}, {"batch", "Job", "spec.template"},
    {"batch", "CronJob", "spec.jobTemplate.spec.template"}, {"", "PodTemplate", "template"},
};

}  // namespace

std::string EscapePointerToken(const std::string& token) {
  std::string out;
  out.reserve(token.size());
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

const Json* Member(const Json* obj, const char* key) {
  if (obj == nullptr || !obj->is_object()) return nullptr;
  auto it = obj->find(key);
  return it == obj->end() ? nullptr : &*it;
}

std::string StringMember(const Json* obj, const char* key) {
  const Json* m = Member(obj, key);
  return m != nullptr && m->is_string() ? m->get<std::string>() : std::string();
}

std::map<std::string, std::string> StringMapAt(const Json& root, std::initializer_list<const char*> path) {
  std::map<std::string, std::string> out;
  const Json* node = &root;
  for (const char* k : path) {
    node = Member(node, k);
    if (node == nullptr) return out;
  }
  if (!node->is_object()) return out;
  for (const auto& [k, v] : node->items()) {
    if (v.is_string()) out[k] = v.get<std::string>();
  }
  return out;
}

std::string OwnerName(const admission::AdmissionRequest& request) {
  std::string name = StringMember(Member(&request.object, "metadata"), "name");
  if (name.empty()) name = request.name;
  if (name.empty()) name = StringMember(Member(&request.object, "metadata"), "generateName");
  return request.kind.kind + " \"" + name + "\"";
}

namespace {

// IsLatencySensitive over labels read through `label`: key -> the label's value, or null.
template <typename Label>
bool LatencySensitive(const policy::Policy& policy, const Label& label, std::string_view priority_class) {
  const auto& sel = policy.latency_sensitive;
  if (!sel.labels.empty()) {
    bool all = true;
    for (const auto& [k, v] : sel.labels) {
      const std::string* value = label(k);
      all = all && value != nullptr && *value == v;
    }
    if (all) return true;
  }
  if (!priority_class.empty()) {
    for (const auto& pc : sel.priority_class_names) {
      if (pc == priority_class) return true;
    }
  }
  return false;
}

}  // namespace

bool IsLatencySensitive(const policy::Policy& policy, const std::map<std::string, std::string>& labels,
                        const std::string& priority_class) {
  const auto label = [&labels](const std::string& key) -> const std::string* {
    auto it = labels.find(key);
    return it == labels.end() ? nullptr : &it->second;
  };
  return LatencySensitive(policy, label, priority_class);
}

bool IsLatencySensitive(const policy::Policy& policy, const Json* labels, std::string_view priority_class) {
  const auto label = [labels](const std::string& key) -> const std::string* {
    const Json* v = Member(labels, key.c_str());
    return v != nullptr && v->is_string() ? &v->get_ref<const std::string&>() : nullptr;
  };
  return LatencySensitive(policy, label, priority_class);
}

PodObjects FindPodObjects(const admission::AdmissionRequest& request, const policy::Policy& policy) {
  PodObjects out;
  const auto& obj = request.object;
  if (!obj.is_object()) return out;
  if (request.operation != admission::Operation::kCreate &&
      request.operation != admission::Operation::kUpdate) {
    return out;
  }
  const auto& gvk = request.kind;
  out.owner = OwnerName(request);
  if (gvk.group.empty() && gvk.kind == "Pod") {
    // Containers' resources and spec.resourceClaims of a Pod are immutable: judge on CREATE.
    if (request.operation != admission::Operation::kCreate) return out;
    auto it = obj.find("spec");
    if (it != obj.end() && it->is_object()) {
      out.specs.push_back(MakePodSpecRef("/spec", &*it, Member(&obj, "metadata"), false, ""));
    }
    return out;
  }
  out.workload = true;
  std::vector<std::string> templates, containers;
  std::set<std::string> parent_claims;  // container paths whose parent takes claims
  for (const auto& b : kBuiltins) {
    if (gvk.group == b.group && gvk.kind == b.kind) templates.push_back(b.path);
  }
  for (const auto& cr : policy.custom_resources) {
    if (cr.group == gvk.group && cr.kind == gvk.kind) {
      templates.insert(templates.end(), cr.pod_templates.begin(), cr.pod_templates.end());
      containers.insert(containers.end(), cr.containers.begin(), cr.containers.end());
      if (cr.container_claims == "parent") parent_claims.insert(cr.containers.begin(), cr.containers.end());
    }
  }
  bool update = request.operation == admission::Operation::kUpdate;
  // On UPDATE, only what changed is judged: scaling or relabelling an admitted workload passes.
  auto unchanged = [&](const std::string& pointer, const Json& node) {
    if (!update) return false;
    const Json* old = AtPointer(request.old_object, pointer);
    return old != nullptr && *old == node;
  };
  for (const auto& t : templates) {
    std::vector<std::pair<std::string, const Json*>> found;
    Expand(obj, "", SplitPath(t), 0, &found);
    for (const auto& [p, node] : found) {
      if (unchanged(p, *node)) continue;
      AddTemplate(*node, p, out.owner, &out);
    }
  }
  for (const auto& c : containers) {
    std::vector<std::pair<std::string, const Json*>> found;
    Expand(obj, "", SplitPath(c), 0, &found);
    for (const auto& [p, node] : found) {
      if (unchanged(p, *node)) continue;
      ContainerRef ref;
      ref.pointer = p;
      ref.container = node;
      ref.kind = "container";
      ref.claims_in_parent = parent_claims.count(c) > 0;
      ref.name = StringMember(node, "name");
      if (ref.name.empty()) {
        auto slash = p.rfind('/');
        ref.name = p.substr(slash + 1);
      }
      out.loose_containers.push_back(std::move(ref));
    }
  }
  return out;
}

std::vector<PodSpecRef> FindPodSpecs(const admission::AdmissionRequest& request, const policy::Policy& policy) {
  return FindPodObjects(request, policy).specs;
}

namespace {

// The containers and initContainers of the pod spec `spec` at `pointer`, in order.
std::vector<ContainerRef> ListContainers(const std::string& pointer, const Json& spec) {
  std::vector<ContainerRef> out;
  for (const std::string_view field : {std::string_view("containers"), std::string_view("initContainers")}) {
    auto it = spec.find(field);
    if (it == spec.end() || !it->is_array()) continue;
    const bool init = field == "initContainers";
    out.reserve(out.size() + it->size());
    for (std::size_t i = 0; i < it->size(); ++i) {
      const auto& c = (*it)[i];
      if (!c.is_object()) continue;
      ContainerRef ref;
      const std::string index = std::to_string(i);
      ref.pointer.reserve(pointer.size() + field.size() + index.size() + 2);
      ref.pointer.append(pointer).append(1, '/').append(field).append(1, '/').append(index);
      ref.container = &c;
      auto n = c.find("name");
      if (n != c.end() && n->is_string()) ref.name = n->get<std::string>();
      ref.kind = "container";
      if (init) {
        auto rp = c.find("restartPolicy");
        bool sidecar = rp != c.end() && rp->is_string() && *rp == "Always";
        ref.kind = sidecar ? "sidecar" : "initContainer";
      }
      out.push_back(std::move(ref));
    }
  }
  return out;
}

}  // namespace

PodSpecRef MakePodSpecRef(std::string pointer, const Json* spec, const Json* metadata, bool workload,
                          std::string owner) {
  PodSpecRef ref{std::move(pointer), spec, metadata, workload, std::move(owner), {}};
  if (spec != nullptr && spec->is_object()) ref.containers = ListContainers(ref.pointer, *spec);
  return ref;
}

std::vector<PodSpecLocation> LocatePodSpecs(const admission::AdmissionRequest& request, const policy::Policy& policy) {
  std::vector<PodSpecLocation> out;
  for (const auto& ref : FindPodObjects(request, policy).specs) {
    PodSpecLocation loc;
    loc.spec_pointer = ref.pointer;
    loc.workload = ref.workload;
    const std::string suffix = "/spec";
    if (ref.pointer.size() >= suffix.size() &&
        ref.pointer.compare(ref.pointer.size() - suffix.size(), suffix.size(), suffix) == 0) {
      loc.metadata_pointer = ref.pointer.substr(0, ref.pointer.size() - suffix.size()) + "/metadata";
    }
    out.push_back(std::move(loc));
  }
  return out;
}

std::vector<std::string> SplitPath(const std::string& path) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    std::size_t dot = path.find('.', start);
    out.push_back(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return out;
}

std::vector<PodClaimRef> PodClaims(const PodSpecRef& spec) {
  std::vector<PodClaimRef> out;
  const Json* claims = Member(spec.spec, "resourceClaims");
  if (claims == nullptr || !claims->is_array()) return out;
  for (std::size_t i = 0; i < claims->size(); ++i) {
    const Json& e = (*claims)[i];
    if (!e.is_object()) continue;
    out.push_back({StringMember(&e, "name"), StringMember(&e, "resourceClaimTemplateName"),
                   StringMember(&e, "resourceClaimName"), spec.pointer + "/resourceClaims/" + std::to_string(i)});
  }
  return out;
}

std::vector<std::string> ContainerClaimNames(const ContainerRef& container) {
  std::vector<std::string> out;
  const Json* list = Member(Member(container.container, "resources"), "claims");
  if (list == nullptr || !list->is_array()) return out;
  std::set<std::string> seen;
  for (const auto& e : *list) {
    std::string name = StringMember(&e, "name");
    if (!name.empty() && seen.insert(name).second) out.push_back(std::move(name));
  }
  return out;
}

bool IsZeroQuantity(const admission::Json& quantity) {
  if (quantity.is_number()) return quantity.get<double>() == 0;
  if (quantity.is_string()) {
    auto parsed = k8s::Quantity::Parse(quantity.get<std::string>());
    return parsed.ok() && parsed->Sign() == 0;
  }
  return false;
}

bool RequestsLegacyGpus(const ContainerRef& container, const policy::Policy& policy) {
  const admission::Json* resources = Member(container.container, "resources");
  for (const char* section : {"limits", "requests"}) {
    const admission::Json* entries = Member(resources, section);
    if (entries == nullptr || !entries->is_object()) continue;
    for (const auto& [name, quantity] : entries->items()) {
      if (policy.IsLegacyGpuRequest(name) && !IsZeroQuantity(quantity)) return true;
    }
  }
  return false;
}

bool IsGeneratedTemplateName(std::string_view name) {
  constexpr std::string_view kPrefix = "draguard-";
  if (name.size() != kPrefix.size() + 20 || name.substr(0, kPrefix.size()) != kPrefix) return false;
  for (char c : name.substr(kPrefix.size())) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

namespace {

// A resource quantity of a requests / limits map: a string or a JSON number; nullopt when absent
// or unreadable.
std::optional<k8s::Quantity> QuantityAt(const Json* map, const char* resource) {
  const Json* v = Member(map, resource);
  if (v == nullptr) return std::nullopt;
  if (v->is_string()) {
    auto q = k8s::Quantity::Parse(v->get<std::string>());
    if (q.ok()) return *q;
    return std::nullopt;
  }
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return k8s::Quantity::FromInt64(static_cast<int64_t>(u));
  }
  if (v->is_number_integer()) return k8s::Quantity::FromInt64(v->get<int64_t>());
  return std::nullopt;  // fractional JSON numbers are not quantities the API server accepts
}

// `resources` (a ResourceRequirements) has a positive cpu and memory limit and its requests of
// both, where given, equal the limits.
bool GuaranteedResources(const Json* resources) {
  const Json* limits = Member(resources, "limits");
  const Json* requests = Member(resources, "requests");
  for (const char* r : {"cpu", "memory"}) {
    auto limit = QuantityAt(limits, r);
    if (!limit || limit->Sign() <= 0) return false;
    if (Member(requests, r) == nullptr) continue;
    auto request = QuantityAt(requests, r);
    if (!request || request->Compare(*limit) != 0) return false;
  }
  return true;
}

}  // namespace

bool IsGuaranteed(const PodSpecRef& spec) {
  const Json* pod = Member(spec.spec, "resources");
  for (const char* section : {"requests", "limits"}) {
    const Json* m = Member(pod, section);
    if (Member(m, "cpu") != nullptr || Member(m, "memory") != nullptr) return GuaranteedResources(pod);
  }
  const auto& containers = Containers(spec);
  if (containers.empty()) return false;
  for (const auto& c : containers) {
    if (!GuaranteedResources(Member(c.container, "resources"))) return false;
  }
  return true;
}

int64_t ExclusiveCpus(const PodSpecRef& spec, const ContainerRef& container) {
  const Json* resources = Member(container.container, "resources");
  if (!GuaranteedResources(resources) || !IsGuaranteed(spec)) return 0;
  const Json* requests = Member(resources, "requests");
  auto cpu = QuantityAt(Member(requests, "cpu") != nullptr ? requests : Member(resources, "limits"), "cpu");
  if (!cpu) return 0;
  auto whole = cpu->AsInt64();
  return whole && *whole > 0 ? *whole : 0;
}

}  // namespace draguard::dra
