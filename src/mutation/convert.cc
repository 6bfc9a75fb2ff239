// Converting Pods (and offline, workloads) into DRA form (see mutation.h).
#include <algorithm>
#include <set>

#include "draguard/engine/pod_objects.h"
#include "draguard/mutation/mutation.h"
#include "draguard/topology/model.h"
#include "internal.h"

namespace draguard::mutation {
namespace {

using admission::Json;

constexpr const char* kLists[] = {"containers", "initContainers"};

bool HasLegacy(const Json& spec, const policy::Policy& policy) {
  for (const char* list : kLists) {
    auto it = spec.find(list);
    if (it == spec.end() || !it->is_array()) continue;
    for (const auto& c : *it) {
      if (!c.is_object()) continue;
      auto res = c.find("resources");
      if (res == c.end() || !res->is_object()) continue;
      for (const char* section : {"requests", "limits"}) {
        auto sec = res->find(section);
        if (sec == res->end() || !sec->is_object()) continue;
        for (auto e = sec->begin(); e != sec->end(); ++e) {
          if (policy.IsLegacyResource(e.key())) return true;
        }
      }
    }
  }
  return false;
}

// Removes legacy entries from every container; drops maps left empty.
void StripLegacy(Json& spec, const policy::Policy& policy) {
  for (const char* list : kLists) {
    auto it = spec.find(list);
    if (it == spec.end() || !it->is_array()) continue;
    for (auto& c : *it) {
      if (!c.is_object()) continue;
      auto res = c.find("resources");
      if (res == c.end() || !res->is_object()) continue;
      for (const char* section : {"requests", "limits"}) {
        auto sec = res->find(section);
        if (sec == res->end() || !sec->is_object()) continue;
        std::vector<std::string> drop;
        for (auto e = sec->begin(); e != sec->end(); ++e) {
          if (policy.IsLegacyResource(e.key())) drop.push_back(e.key());
        }
        for (const auto& k : drop) sec->erase(k);
        if (sec->empty()) res->erase(section);
      }
    }
  }
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

// ANDs a node requirement into every required nodeSelectorTerm (creating one when there is none).
// Node names go through matchFields, which takes exactly one value per requirement, so a list of
// nodes becomes one term per (existing term, node); shapes use one matchExpressions entry.
void RequireNodes(Json& spec, const GeneratedTemplate& tmpl) {
  Json& required = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
  if (!required.is_object()) required = Json::object();
  Json& terms = required["nodeSelectorTerms"];
  if (!terms.is_array() || terms.empty()) terms = Json::array({Json::object()});
  Json out = Json::array();
  for (Json term : terms) {
    if (!term.is_object()) term = Json::object();
    if (!tmpl.nodes.empty()) {
      for (const auto& node : tmpl.nodes) {
        Json t = term;
        if (!t["matchFields"].is_array()) t["matchFields"] = Json::array();
        t["matchFields"].push_back({{"key", "metadata.name"}, {"operator", "In"}, {"values", Json::array({node})}});
        out.push_back(std::move(t));
      }
    } else {
      if (!term["matchExpressions"].is_array()) term["matchExpressions"] = Json::array();
      term["matchExpressions"].push_back(
          {{"key", std::string(topology::kShapeLabel)}, {"operator", "In"}, {"values", tmpl.shapes}});
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
  std::vector<std::vector<std::string>> covered;
  auto profile = ProfilePod(pod, policy, &covered);
  if (!profile.ok()) {
    out.outcome = PodConversion::Outcome::kRefused;
    out.reason = profile.status().message();
    return out;
  }
  out.warnings = profile->notes;
  out.pod = pod;
  Json& mspec = out.pod["spec"];
  StripLegacy(mspec, policy);
  std::vector<std::string> containers;
  if (!profile->entries.empty()) {
    auto tmpl = GenerateTemplate(*profile, namespace_name, policy, topology);
    if (!tmpl.ok()) {
      out = PodConversion{};
      out.outcome = PodConversion::Outcome::kRefused;
      out.reason = tmpl.status().message();
      return out;
    }
    const std::string claim = FreeClaimName(mspec);
    for (std::size_t e = 0; e < profile->entries.size(); ++e) {
      for (const auto& pointer : covered[e]) {
        Json& c = out.pod[Json::json_pointer(pointer)];
        Json& claims = c["resources"]["claims"];
        if (!claims.is_array()) claims = Json::array();
        claims.push_back({{"name", claim}, {"request", profile->entries[e].request}});
        if (c.contains("name") && c["name"].is_string()) containers.push_back(c["name"].get<std::string>());
      }
    }
    Json& rcs = mspec["resourceClaims"];
    if (!rcs.is_array()) rcs = Json::array();
    rcs.push_back({{"name", claim}, {"resourceClaimTemplateName", tmpl->name}});
    if (!tmpl->nodes.empty() || !tmpl->shapes.empty()) {
      RequireNodes(mspec, *tmpl);
      out.warnings.push_back("restricted to " +
                             (!tmpl->nodes.empty() ? "nodes " + Join(tmpl->nodes)
                                                   : "topology shapes " + Join(tmpl->shapes)) +
                             ": the only nodes where " + tmpl->description + " is possible");
    }
    out.warnings.insert(out.warnings.end(), tmpl->notes.begin(), tmpl->notes.end());
    out.summary = "converted legacy GPU requests of " + Join(containers) + " into ResourceClaimTemplate " +
                  tmpl->name + " (" + tmpl->description + ")";
    out.templates.push_back(std::move(*tmpl));
  } else {
    out.summary = "removed legacy GPU entries that request no device";
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
  admission::AdmissionRequest req;
  std::string api_version = object.value("apiVersion", "");
  auto slash = api_version.find('/');
  req.kind.group = slash == std::string::npos ? "" : api_version.substr(0, slash);
  req.kind.version = slash == std::string::npos ? api_version : api_version.substr(slash + 1);
  req.kind.kind = object.value("kind", "");
  req.operation = admission::Operation::kCreate;
  req.object = object;
  std::string ns(namespace_name);
  if (auto md = object.find("metadata"); md != object.end() && md->is_object()) {
    if (auto n = md->find("namespace"); n != md->end() && n->is_string()) ns = n->get<std::string>();
  }
  req.namespace_ = ns;
  std::set<std::string> names;
  for (const auto& loc : engine::LocatePodSpecs(req, policy)) {
    Json pod;
    const Json::json_pointer spec_ptr(loc.spec_pointer);
    if (!loc.workload) {
      pod = out.object;
    } else {
      pod = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"spec", out.object.at(spec_ptr)}};
      if (!loc.metadata_pointer.empty() && out.object.contains(Json::json_pointer(loc.metadata_pointer))) {
        pod["metadata"] = out.object.at(Json::json_pointer(loc.metadata_pointer));
      }
    }
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
  }
  return out;
}

}  // namespace draguard::mutation
