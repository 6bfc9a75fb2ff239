#include "draguard/policy/policy.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "draguard/k8s/quantity.h"
#include "draguard/glob.h"
#include "draguard/read_file.h"

namespace draguard::policy {
namespace {

constexpr std::size_t kMaxPolicyBytes = 1024 * 1024;

// Parsing context: every error names the source, the key path, line and column.
class Parser {
 public:
  explicit Parser(std::string_view source) : source_(source) {}

  Status Error(const YAML::Node& node, const std::string& path, const std::string& what) const {
    std::ostringstream os;
    os << source_;
    if (node.IsDefined()) {
      auto m = node.Mark();
      if (m.line >= 0) os << ":" << (m.line + 1) << ":" << (m.column + 1);
    }
    os << ": " << path << ": " << what;
    return Status::InvalidArgument(os.str());
  }

  // Rejects keys of `map` not in `allowed`; the error points at the key itself.
  Status CheckKeys(const YAML::Node& map, const std::string& path,
                   const std::set<std::string>& allowed) const {
    for (const auto& kv : map) {
      std::string key = kv.first.Scalar();
      if (!kv.first.IsScalar() || allowed.count(key) == 0) {
        std::string list;
        for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
        return Error(kv.first, path.empty() ? key : path + "." + key,
                     "unknown key \"" + key + "\" (allowed: " + list + ")");
      }
    }
    return Status::Ok();
  }

  Status ExpectMap(const YAML::Node& n, const std::string& path) const {
    if (!n.IsMap()) return Error(n, path, "must be a mapping");
    return Status::Ok();
  }

  Status String(const YAML::Node& n, const std::string& path, std::string* out) const {
    if (!n.IsScalar()) return Error(n, path, "must be a string");
    *out = n.Scalar();
    return Status::Ok();
  }

  Status Bool(const YAML::Node& n, const std::string& path, bool* out) const {
    if (n.IsScalar()) {
      const std::string& s = n.Scalar();
      if (s == "true" || s == "True" || s == "TRUE") { *out = true; return Status::Ok(); }
      if (s == "false" || s == "False" || s == "FALSE") { *out = false; return Status::Ok(); }
    }
    return Error(n, path, "must be true or false");
  }

  Status StringList(const YAML::Node& n, const std::string& path,
                    std::vector<std::string>* out) const {
    if (n.IsNull()) { out->clear(); return Status::Ok(); }
    if (!n.IsSequence()) return Error(n, path, "must be a list of strings");
    out->clear();
    for (std::size_t i = 0; i < n.size(); ++i) {
      const YAML::Node& e = n[i];
      std::string p = path + "[" + std::to_string(i) + "]";
      if (!e.IsScalar() || e.Scalar().empty()) return Error(e, p, "must be a non-empty string");
      out->push_back(e.Scalar());
    }
    return Status::Ok();
  }

  Status StringMap(const YAML::Node& n, const std::string& path,
                   std::map<std::string, std::string>* out) const {
    if (n.IsNull()) { out->clear(); return Status::Ok(); }
    if (!n.IsMap()) return Error(n, path, "must be a mapping of strings");
    out->clear();
    for (const auto& kv : n) {
      std::string key = kv.first.Scalar();
      if (!kv.second.IsScalar()) return Error(kv.second, path + "." + key, "must be a string");
      (*out)[key] = kv.second.Scalar();
    }
    return Status::Ok();
  }

  Status Int(const YAML::Node& n, const std::string& path, int64_t min, int64_t max, int64_t* out) const {
    if (n.IsScalar()) {
      const std::string& t = n.Scalar();
      char* end = nullptr;
      errno = 0;
      long long v = std::strtoll(t.c_str(), &end, 10);
      if (!t.empty() && end == t.c_str() + t.size() && errno == 0 && v >= min && v <= max) {
        *out = v;
        return Status::Ok();
      }
    }
    return Error(n, path, "must be an integer from " + std::to_string(min) + " to " + std::to_string(max));
  }

  Status Quantity(const YAML::Node& n, const std::string& path, std::string* out) const {
    DRAGUARD_RETURN_IF_ERROR(String(n, path, out));
    auto q = k8s::Quantity::Parse(*out);
    if (!q.ok() || q->Sign() < 0) return Error(n, path, "\"" + *out + "\" is not a non-negative quantity (e.g. 40Gi)");
    return Status::Ok();
  }

  template <typename E>
  Status Enum(const YAML::Node& n, const std::string& path,
              const std::vector<std::pair<const char*, E>>& values, E* out) const {
    std::string list;
    for (const auto& [name, v] : values) {
      list += (list.empty() ? "" : " | ") + std::string(name);
      if (n.IsScalar() && n.Scalar() == name) {
        *out = v;
        return Status::Ok();
      }
    }
    return Error(n, path, "must be one of " + list);
  }

 private:
  std::string source_;
};

int Digits(std::string_view s, std::size_t pos, std::size_t n, bool* ok) {
  int v = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (pos + i >= s.size() || !std::isdigit(static_cast<unsigned char>(s[pos + i]))) {
      *ok = false;
      return 0;
    }
    v = v * 10 + (s[pos + i] - '0');
  }
  return v;
}

bool IsRuleId(const std::string& s) {
  if (s.size() != 5 || s[0] != 'D' || s[1] != 'G') return false;
  for (std::size_t i = 2; i < 5; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

// A dotted path of field names, "*" (every map value) and "name[]" (every list item).
bool ValidTemplatePath(const std::string& path) {
  if (path.empty()) return false;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t dot = path.find('.', start);
    std::string tok = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (tok.empty()) return false;
    if (tok.size() >= 2 && tok.compare(tok.size() - 2, 2, "[]") == 0) tok.resize(tok.size() - 2);
    if (tok.empty() || tok.find_first_of("[]") != std::string::npos) return false;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return true;
}

Status ParseSelector(const YAML::Node& n, const std::string& path, const Parser& p, LabelSelector* out) {
  DRAGUARD_RETURN_IF_ERROR(p.ExpectMap(n, path));
  DRAGUARD_RETURN_IF_ERROR(p.CheckKeys(n, path, {"matchLabels", "matchExpressions"}));
  if (auto l = n["matchLabels"]) DRAGUARD_RETURN_IF_ERROR(p.StringMap(l, path + ".matchLabels", &out->match_labels));
  if (auto e = n["matchExpressions"]; e && !e.IsNull()) {
    if (!e.IsSequence()) return p.Error(e, path + ".matchExpressions", "must be a list");
    for (std::size_t i = 0; i < e.size(); ++i) {
      std::string ep = path + ".matchExpressions[" + std::to_string(i) + "]";
      DRAGUARD_RETURN_IF_ERROR(p.ExpectMap(e[i], ep));
      DRAGUARD_RETURN_IF_ERROR(p.CheckKeys(e[i], ep, {"key", "operator", "values"}));
      LabelSelectorRequirement r;
      if (!e[i]["key"]) return p.Error(e[i], ep + ".key", "is required");
      DRAGUARD_RETURN_IF_ERROR(p.String(e[i]["key"], ep + ".key", &r.key));
      if (!e[i]["operator"]) return p.Error(e[i], ep + ".operator", "is required");
      DRAGUARD_RETURN_IF_ERROR(p.String(e[i]["operator"], ep + ".operator", &r.op));
      if (r.op != "In" && r.op != "NotIn" && r.op != "Exists" && r.op != "DoesNotExist") {
        return p.Error(e[i]["operator"], ep + ".operator", "must be one of In | NotIn | Exists | DoesNotExist");
      }
      if (auto v = e[i]["values"]) DRAGUARD_RETURN_IF_ERROR(p.StringList(v, ep + ".values", &r.values));
      bool set_op = r.op == "In" || r.op == "NotIn";
      if (set_op && r.values.empty()) return p.Error(e[i], ep + ".values", "must be non-empty for " + r.op);
      if (!set_op && !r.values.empty()) return p.Error(e[i], ep + ".values", "must be empty for " + r.op);
      out->match_expressions.push_back(std::move(r));
    }
  }
  return Status::Ok();
}

// The list of rule IDs at entry.rules (`path`), non-empty when `required`.
Status RuleIdList(const Parser& p, const YAML::Node& entry, const std::string& path, bool required,
                  std::vector<std::string>* out) {
  const YAML::Node n = entry["rules"];
  if (!n) {
    return required ? p.Error(entry, path, "is required (a list of rule IDs like DG001)") : Status::Ok();
  }
  DRAGUARD_RETURN_IF_ERROR(p.StringList(n, path, out));
  if (required && out->empty()) return p.Error(n, path, "must name at least one rule");
  for (std::size_t i = 0; i < out->size(); ++i) {
    if (!IsRuleId((*out)[i])) {
      return p.Error(n[i], path + "[" + std::to_string(i) + "]", "\"" + (*out)[i] + "\" is not a rule ID (like DG001)");
    }
  }
  return Status::Ok();
}

Status RequiredNamespaces(const Parser& p, const YAML::Node& entry, const std::string& path,
                          std::vector<std::string>* out) {
  const YAML::Node n = entry["namespaces"];
  if (!n) return p.Error(entry, path + ".namespaces", "is required (names or globs)");
  DRAGUARD_RETURN_IF_ERROR(p.StringList(n, path + ".namespaces", out));
  if (out->empty()) return p.Error(n, path + ".namespaces", "must name at least one namespace");
  return Status::Ok();
}

Status ParseException(const Parser& p, const YAML::Node& n, const std::string& path, PolicyException* out) {
  DRAGUARD_RETURN_IF_ERROR(p.ExpectMap(n, path));
  DRAGUARD_RETURN_IF_ERROR(p.CheckKeys(
      n, path, {"name", "rules", "namespaces", "objectNames", "objectSelector", "reason", "expires"}));
  if (auto v = n["name"]) {
    DRAGUARD_RETURN_IF_ERROR(p.String(v, path + ".name", &out->name));
    if (out->name.empty()) return p.Error(v, path + ".name", "must not be empty");
  }
  DRAGUARD_RETURN_IF_ERROR(RuleIdList(p, n, path + ".rules", true, &out->rules));
  DRAGUARD_RETURN_IF_ERROR(RequiredNamespaces(p, n, path, &out->namespaces));
  if (!n["objectNames"] && !n["objectSelector"]) {
    return p.Error(n, path, "needs objectNames or objectSelector (objectSelector: {} matches every object)");
  }
  if (auto v = n["objectNames"]) {
    DRAGUARD_RETURN_IF_ERROR(p.StringList(v, path + ".objectNames", &out->object_names));
    if (out->object_names.empty()) return p.Error(v, path + ".objectNames", "must name at least one object");
  }
  if (auto v = n["objectSelector"]) {
    LabelSelector sel;
    if (!v.IsNull()) DRAGUARD_RETURN_IF_ERROR(ParseSelector(v, path + ".objectSelector", p, &sel));
    out->object_selector = std::move(sel);
  }
  const YAML::Node reason = n["reason"];
  if (!reason) return p.Error(n, path + ".reason", "is required");
  DRAGUARD_RETURN_IF_ERROR(p.String(reason, path + ".reason", &out->reason));
  if (out->reason.find_first_not_of(" \t\r\n") == std::string::npos) {
    return p.Error(reason, path + ".reason", "must not be empty");
  }
  if (auto v = n["expires"]; v && !v.IsNull()) {
    DRAGUARD_RETURN_IF_ERROR(p.String(v, path + ".expires", &out->expires_text));
    out->expires = ParseRfc3339(out->expires_text);
    if (!out->expires) {
      return p.Error(v, path + ".expires",
                     "\"" + out->expires_text + "\" is not an RFC 3339 time (e.g. 2026-03-01T00:00:00Z)");
    }
  }
  return Status::Ok();
}

Status ParseAnnotationGrant(const Parser& p, const YAML::Node& n, const std::string& path,
                            AnnotationExceptionGrant* out) {
  DRAGUARD_RETURN_IF_ERROR(p.ExpectMap(n, path));
  DRAGUARD_RETURN_IF_ERROR(p.CheckKeys(n, path, {"namespaces", "users", "groups", "rules"}));
  DRAGUARD_RETURN_IF_ERROR(RequiredNamespaces(p, n, path, &out->namespaces));
  if (auto v = n["users"]) DRAGUARD_RETURN_IF_ERROR(p.StringList(v, path + ".users", &out->users));
  if (auto v = n["groups"]) DRAGUARD_RETURN_IF_ERROR(p.StringList(v, path + ".groups", &out->groups));
  return RuleIdList(p, n, path + ".rules", false, &out->rules);
}

Status ParseCatalogueProfile(const Parser& p, const YAML::Node& n, const std::string& path, CatalogueProfile* out) {
  DRAGUARD_RETURN_IF_ERROR(p.ExpectMap(n, path));
  DRAGUARD_RETURN_IF_ERROR(
      p.CheckKeys(n, path, {"gpus", "mig", "memory", "product", "nic", "interconnect", "latencySensitive"}));
  if (auto v = n["gpus"]) DRAGUARD_RETURN_IF_ERROR(p.Int(v, path + ".gpus", 1, 32, &out->gpus));
  if (auto v = n["mig"]) DRAGUARD_RETURN_IF_ERROR(p.String(v, path + ".mig", &out->mig));
  if (auto v = n["memory"]) DRAGUARD_RETURN_IF_ERROR(p.Quantity(v, path + ".memory", &out->memory));
  if (auto v = n["product"]) DRAGUARD_RETURN_IF_ERROR(p.String(v, path + ".product", &out->product));
  if (auto v = n["nic"]) {
    DRAGUARD_RETURN_IF_ERROR(p.String(v, path + ".nic", &out->nic));
    if (out->nic != "none" && out->nic != "rdma") return p.Error(v, path + ".nic", "must be none or rdma");
  }
  if (auto v = n["interconnect"]) {
    DRAGUARD_RETURN_IF_ERROR(p.String(v, path + ".interconnect", &out->interconnect));
    if (out->interconnect != "auto" && out->interconnect != "pcie" && out->interconnect != "nvlink" &&
        out->interconnect != "numa" && out->interconnect != "any") {
      return p.Error(v, path + ".interconnect", "must be auto, nvlink, pcie, numa or any");
    }
  }
  if (auto v = n["latencySensitive"]) {
    DRAGUARD_RETURN_IF_ERROR(p.Bool(v, path + ".latencySensitive", &out->latency_sensitive));
  }
  return Status::Ok();
}

Status ParseMutation(const Parser& p, const YAML::Node& n, MutationConfig* m) {
  DRAGUARD_RETURN_IF_ERROR(p.ExpectMap(n, "mutation"));
  DRAGUARD_RETURN_IF_ERROR(p.CheckKeys(n, "mutation",
                                       {"enabled", "templates", "defaultMemory", "shared", "mps", "nic",
                                        "unaligned", "interconnect", "numaAlignment", "cpu", "kueue", "computeDomains", "hostnameAffinityLimit",
                                        "apiTimeoutMs", "catalogue"}));
  if (auto e = n["enabled"]) DRAGUARD_RETURN_IF_ERROR(p.Bool(e, "mutation.enabled", &m->enabled));
  if (auto t = n["templates"]) {
    DRAGUARD_RETURN_IF_ERROR(p.Enum<TemplateMode>(
        t, "mutation.templates", {{"create", TemplateMode::kCreate}, {"reference", TemplateMode::kReference}},
        &m->templates));
  }
  if (auto v = n["defaultMemory"]; v && !(v.IsScalar() && v.Scalar().empty())) {
    DRAGUARD_RETURN_IF_ERROR(p.Quantity(v, "mutation.defaultMemory", &m->default_memory));
  }
  if (auto v = n["shared"]) {
    DRAGUARD_RETURN_IF_ERROR(
        p.Enum<SharedMode>(v, "mutation.shared", {{"deny", SharedMode::kDeny}, {"mps", SharedMode::kMps}}, &m->shared));
  }
  if (auto v = n["mps"]; v && !v.IsNull()) {
    DRAGUARD_RETURN_IF_ERROR(p.ExpectMap(v, "mutation.mps"));
    DRAGUARD_RETURN_IF_ERROR(
        p.CheckKeys(v, "mutation.mps", {"defaultActiveThreadPercentage", "defaultPinnedDeviceMemoryLimit"}));
    if (auto t = v["defaultActiveThreadPercentage"]) {
      DRAGUARD_RETURN_IF_ERROR(
          p.Int(t, "mutation.mps.defaultActiveThreadPercentage", 1, 100, &m->mps.active_thread_percentage));
    }
    if (auto t = v["defaultPinnedDeviceMemoryLimit"]) {
      DRAGUARD_RETURN_IF_ERROR(
          p.Quantity(t, "mutation.mps.defaultPinnedDeviceMemoryLimit", &m->mps.pinned_memory_limit));
    }
  }
  if (auto v = n["nic"]; v && !v.IsNull()) {
    DRAGUARD_RETURN_IF_ERROR(p.ExpectMap(v, "mutation.nic"));
    DRAGUARD_RETURN_IF_ERROR(p.CheckKeys(v, "mutation.nic", {"default", "deviceClass", "driver", "numaAttribute"}));
    if (auto t = v["default"]) {
      DRAGUARD_RETURN_IF_ERROR(p.String(t, "mutation.nic.default", &m->nic.default_for_multi_gpu));
      if (m->nic.default_for_multi_gpu != "none" && m->nic.default_for_multi_gpu != "rdma") {
        return p.Error(t, "mutation.nic.default", "must be none or rdma");
      }
    }
    if (auto t = v["deviceClass"]) DRAGUARD_RETURN_IF_ERROR(p.String(t, "mutation.nic.deviceClass", &m->nic.device_class));
    if (auto t = v["driver"]) DRAGUARD_RETURN_IF_ERROR(p.String(t, "mutation.nic.driver", &m->nic.driver));
    if (auto t = v["numaAttribute"]) {
      DRAGUARD_RETURN_IF_ERROR(p.Enum<NicNumaAttribute>(
          t, "mutation.nic.numaAttribute",
          {{"driver", NicNumaAttribute::kDriver}, {"standard", NicNumaAttribute::kStandard}}, &m->nic.numa_attribute));
    }
  }
  if (auto v = n["unaligned"]) {
    int allow = 0;
    DRAGUARD_RETURN_IF_ERROR(p.Enum<int>(v, "mutation.unaligned", {{"deny", 0}, {"allow", 1}}, &allow));
    m->allow_unaligned = allow == 1;
  }
  if (auto v = n["interconnect"]) {
    DRAGUARD_RETURN_IF_ERROR(p.String(v, "mutation.interconnect", &m->interconnect));
    if (m->interconnect != "auto" && m->interconnect != "nvlink" && m->interconnect != "pcie" &&
        m->interconnect != "numa") {
      return p.Error(v, "mutation.interconnect", "must be auto, nvlink, pcie or numa");
    }
  }
  if (auto v = n["numaAlignment"]) {
    DRAGUARD_RETURN_IF_ERROR(p.Enum<NumaAlignment>(
        v, "mutation.numaAlignment", {{"pcieRoots", NumaAlignment::kPcieRoots}, {"numaNode", NumaAlignment::kNumaNode}},
        &m->numa_alignment));
  }
  if (auto v = n["cpu"]; v && !v.IsNull()) {
    DRAGUARD_RETURN_IF_ERROR(p.ExpectMap(v, "mutation.cpu"));
    DRAGUARD_RETURN_IF_ERROR(p.CheckKeys(v, "mutation.cpu", {"mode", "deviceClass"}));
    if (auto t = v["mode"]) {
      DRAGUARD_RETURN_IF_ERROR(p.Enum<CpuMode>(
          t, "mutation.cpu.mode",
          {{"none", CpuMode::kNone}, {"individual", CpuMode::kIndividual}, {"grouped", CpuMode::kGrouped}},
          &m->cpu.mode));
      if (m->cpu.mode != CpuMode::kNone && m->numa_alignment != NumaAlignment::kNumaNode) {
        return p.Error(t, "mutation.cpu.mode",
                       "needs mutation.numaAlignment: numaNode (CPUs align with GPUs only through "
                       "resource.kubernetes.io/numaNode, which the GPU driver must publish)");
      }
    }
    if (auto t = v["deviceClass"]) {
      DRAGUARD_RETURN_IF_ERROR(p.String(t, "mutation.cpu.deviceClass", &m->cpu.device_class));
      if (m->cpu.device_class.empty()) return p.Error(t, "mutation.cpu.deviceClass", "must not be empty");
    }
  }
  if (auto v = n["kueue"]) DRAGUARD_RETURN_IF_ERROR(p.Bool(v, "mutation.kueue", &m->kueue));
  if (auto v = n["computeDomains"]) {
    DRAGUARD_RETURN_IF_ERROR(p.Enum<ComputeDomainMode>(
        v, "mutation.computeDomains",
        {{"off", ComputeDomainMode::kOff}, {"auto", ComputeDomainMode::kAuto}, {"required", ComputeDomainMode::kRequired}},
        &m->compute_domains));
    if (m->compute_domains != ComputeDomainMode::kOff && m->templates != TemplateMode::kCreate) {
      return p.Error(v, "mutation.computeDomains",
                     "needs mutation.templates: create (draguard creates each job's ComputeDomain through the API)");
    }
  }
  if (auto v = n["hostnameAffinityLimit"]) {
    int64_t limit = 0;
    DRAGUARD_RETURN_IF_ERROR(p.Int(v, "mutation.hostnameAffinityLimit", 0, 1000, &limit));
    m->hostname_affinity_limit = static_cast<uint32_t>(limit);
  }
  if (auto v = n["apiTimeoutMs"]) {
    int64_t ms = 0;
    DRAGUARD_RETURN_IF_ERROR(p.Int(v, "mutation.apiTimeoutMs", 1, 30000, &ms));
    m->api_timeout_ms = static_cast<uint32_t>(ms);
  }
  if (auto v = n["catalogue"]; v && !v.IsNull()) {
    if (!v.IsSequence()) return p.Error(v, "mutation.catalogue", "must be a list of profiles");
    for (std::size_t i = 0; i < v.size(); ++i) {
      CatalogueProfile prof;
      DRAGUARD_RETURN_IF_ERROR(
          ParseCatalogueProfile(p, v[i], "mutation.catalogue[" + std::to_string(i) + "]", &prof));
      m->catalogue.push_back(std::move(prof));
    }
  }
  return Status::Ok();
}

Result<Policy> ParseDocument(const YAML::Node& root, const Parser& p) {
  Policy pol;
  if (!root.IsDefined() || root.IsNull()) return p.Error(root, "(document)", "policy is empty");
  DRAGUARD_RETURN_IF_ERROR(p.ExpectMap(root, "(document)"));
  DRAGUARD_RETURN_IF_ERROR(p.CheckKeys(root, "",
                                 {"apiVersion", "kind", "mode", "legacyResources", "rules",
                                  "ruleErrors", "exemptions", "workloadClasses", "mutation",
                                  "extendedResourceMapping", "customResources", "deviceClasses",
                                  "memoryReservation", "topologyAlignment", "adminAccess",
                                  "allocationModeAll", "readiness", "celCostPerReview", "exceptions",
                                  "annotationExceptions", "trustedSchedulers"}));
  std::string api_version, kind;
  if (!root["apiVersion"]) return p.Error(root, "apiVersion", "is required (draguard.io/v1alpha1)");
  DRAGUARD_RETURN_IF_ERROR(p.String(root["apiVersion"], "apiVersion", &api_version));
  if (api_version != "draguard.io/v1alpha1") {
    return p.Error(root["apiVersion"], "apiVersion",
                   "\"" + api_version + "\" is not supported (use draguard.io/v1alpha1)");
  }
  if (!root["kind"]) return p.Error(root, "kind", "is required (Policy)");
  DRAGUARD_RETURN_IF_ERROR(p.String(root["kind"], "kind", &kind));
  if (kind != "Policy") return p.Error(root["kind"], "kind", "must be \"Policy\"");

  if (auto n = root["mode"]) {
    DRAGUARD_RETURN_IF_ERROR(p.Enum<Mode>(n, "mode", {{"enforce", Mode::kEnforce}, {"audit", Mode::kAudit}},
                                    &pol.mode));
  }
  if (auto n = root["legacyResources"]) {
    DRAGUARD_RETURN_IF_ERROR(p.StringList(n, "legacyResources", &pol.legacy_resources));
  }
  if (auto n = root["celCostPerReview"]) {
    DRAGUARD_RETURN_IF_ERROR(p.Int(n, "celCostPerReview", 1000, 1000000000000, &pol.cel_cost_per_review));
  }
  if (auto n = root["ruleErrors"]) {
    DRAGUARD_RETURN_IF_ERROR(p.Enum<RuleErrorPolicy>(
        n, "ruleErrors", {{"allow", RuleErrorPolicy::kAllow}, {"deny", RuleErrorPolicy::kDeny}},
        &pol.rule_errors));
  }
  if (auto n = root["rules"]; n && !n.IsNull()) {
    DRAGUARD_RETURN_IF_ERROR(p.ExpectMap(n, "rules"));
    for (const auto& kv : n) {
      std::string id = kv.first.Scalar();
      std::string path = "rules." + id;
      if (!IsRuleId(id)) return p.Error(kv.first, path, "rule IDs look like DG001");
      DRAGUARD_RETURN_IF_ERROR(p.ExpectMap(kv.second, path));
      DRAGUARD_RETURN_IF_ERROR(p.CheckKeys(kv.second, path, {"action"}));
      RuleConfig rc;
      if (auto a = kv.second["action"]) {
        Action action = Action::kDeny;
        DRAGUARD_RETURN_IF_ERROR(p.Enum<Action>(a, path + ".action",
                                          {{"deny", Action::kDeny},
                                           {"warn", Action::kWarn},
                                           {"audit", Action::kAudit},
                                           {"off", Action::kOff}},
                                          &action));
        rc.action = action;
      }
      pol.rules[id] = rc;
    }
  }
  if (auto n = root["exemptions"]; n && !n.IsNull()) {
    DRAGUARD_RETURN_IF_ERROR(p.ExpectMap(n, "exemptions"));
    DRAGUARD_RETURN_IF_ERROR(
        p.CheckKeys(n, "exemptions", {"namespaces", "users", "groups", "objectSelectors"}));
    if (auto e = n["objectSelectors"]; e && !e.IsNull()) {
      if (!e.IsSequence()) return p.Error(e, "exemptions.objectSelectors", "must be a list of label selectors");
      for (std::size_t i = 0; i < e.size(); ++i) {
        LabelSelector sel;
        DRAGUARD_RETURN_IF_ERROR(ParseSelector(e[i], "exemptions.objectSelectors[" + std::to_string(i) + "]", p, &sel));
        pol.exemptions.object_selectors.push_back(std::move(sel));
      }
    }
    if (auto e = n["namespaces"]) {
      DRAGUARD_RETURN_IF_ERROR(p.StringList(e, "exemptions.namespaces", &pol.exemptions.namespaces));
    }
    if (auto e = n["users"]) DRAGUARD_RETURN_IF_ERROR(p.StringList(e, "exemptions.users", &pol.exemptions.users));
    if (auto e = n["groups"]) {
      DRAGUARD_RETURN_IF_ERROR(p.StringList(e, "exemptions.groups", &pol.exemptions.groups));
    }
  }
  if (auto n = root["exceptions"]; n && !n.IsNull()) {
    if (!n.IsSequence()) return p.Error(n, "exceptions", "must be a list of exceptions");
    std::set<std::string> names;
    for (std::size_t i = 0; i < n.size(); ++i) {
      const std::string path = "exceptions[" + std::to_string(i) + "]";
      PolicyException ex;
      DRAGUARD_RETURN_IF_ERROR(ParseException(p, n[i], path, &ex));
      if (ex.name.empty()) ex.name = path;
      if (!names.insert(ex.name).second) {
        return p.Error(n[i], path + ".name", "\"" + ex.name + "\" is used by an earlier exception");
      }
      pol.exceptions.push_back(std::move(ex));
    }
  }
  if (auto n = root["annotationExceptions"]; n && !n.IsNull()) {
    if (!n.IsSequence()) return p.Error(n, "annotationExceptions", "must be a list of {namespaces, users, groups, rules}");
    for (std::size_t i = 0; i < n.size(); ++i) {
      AnnotationExceptionGrant g;
      DRAGUARD_RETURN_IF_ERROR(ParseAnnotationGrant(p, n[i], "annotationExceptions[" + std::to_string(i) + "]", &g));
      pol.annotation_exceptions.push_back(std::move(g));
    }
  }
  if (auto n = root["workloadClasses"]; n && !n.IsNull()) {
    DRAGUARD_RETURN_IF_ERROR(p.ExpectMap(n, "workloadClasses"));
    DRAGUARD_RETURN_IF_ERROR(p.CheckKeys(n, "workloadClasses", {"latencySensitive"}));
    if (auto ls = n["latencySensitive"]; ls && !ls.IsNull()) {
      const std::string path = "workloadClasses.latencySensitive";
      DRAGUARD_RETURN_IF_ERROR(p.ExpectMap(ls, path));
      DRAGUARD_RETURN_IF_ERROR(p.CheckKeys(ls, path, {"labels", "priorityClassNames"}));
      if (auto l = ls["labels"]) {
        DRAGUARD_RETURN_IF_ERROR(p.StringMap(l, path + ".labels", &pol.latency_sensitive.labels));
      }
      if (auto pc = ls["priorityClassNames"]) {
        DRAGUARD_RETURN_IF_ERROR(p.StringList(pc, path + ".priorityClassNames",
                                        &pol.latency_sensitive.priority_class_names));
      }
    }
  }
  if (auto n = root["readiness"]; n && !n.IsNull()) {
    DRAGUARD_RETURN_IF_ERROR(p.ExpectMap(n, "readiness"));
    DRAGUARD_RETURN_IF_ERROR(p.CheckKeys(n, "readiness", {"requireTopology"}));
    if (auto t = n["requireTopology"]) {
      DRAGUARD_RETURN_IF_ERROR(p.Bool(t, "readiness.requireTopology", &pol.require_topology_for_readiness));
    }
  }
  if (auto n = root["mutation"]; n && !n.IsNull()) {
    DRAGUARD_RETURN_IF_ERROR(ParseMutation(p, n, &pol.mutation));
  }
  if (auto n = root["extendedResourceMapping"]) {
    DRAGUARD_RETURN_IF_ERROR(p.Enum<ExtendedResourceMapping>(
        n, "extendedResourceMapping",
        {{"deny", ExtendedResourceMapping::kDeny},
         {"warn", ExtendedResourceMapping::kWarn},
         {"allow", ExtendedResourceMapping::kAllow}},
        &pol.extended_resource_mapping));
  }
  if (auto n = root["trustedSchedulers"]) {
    DRAGUARD_RETURN_IF_ERROR(p.StringList(n, "trustedSchedulers", &pol.trusted_schedulers));
    for (std::size_t i = 0; i < pol.trusted_schedulers.size(); ++i) {
      // An identity, never a pattern: a glob would let every matching user skip the claim rules.
      if (pol.trusted_schedulers[i].find_first_of("*?") != std::string::npos) {
        return p.Error(n[i], "trustedSchedulers[" + std::to_string(i) + "]",
                       "must be an exact username (no '*' or '?'), e.g. system:kube-scheduler");
      }
    }
  }
  if (auto n = root["customResources"]) {
    pol.custom_resources.clear();
    if (!n.IsNull() && !n.IsSequence()) return p.Error(n, "customResources", "must be a list");
    for (std::size_t i = 0; n.IsSequence() && i < n.size(); ++i) {
      const YAML::Node& e = n[i];
      std::string path = "customResources[" + std::to_string(i) + "]";
      DRAGUARD_RETURN_IF_ERROR(p.ExpectMap(e, path));
      DRAGUARD_RETURN_IF_ERROR(p.CheckKeys(e, path, {"group", "kind", "podTemplates", "containers", "containerClaims"}));
      CustomResource cr;
      if (!e["group"]) return p.Error(e, path + ".group", "is required");
      if (!e["kind"]) return p.Error(e, path + ".kind", "is required");
      DRAGUARD_RETURN_IF_ERROR(p.String(e["group"], path + ".group", &cr.group));
      DRAGUARD_RETURN_IF_ERROR(p.String(e["kind"], path + ".kind", &cr.kind));
      if (cr.kind.empty()) return p.Error(e["kind"], path + ".kind", "must not be empty");
      if (auto t = e["podTemplates"]) {
        DRAGUARD_RETURN_IF_ERROR(p.StringList(t, path + ".podTemplates", &cr.pod_templates));
      }
      if (auto c = e["containers"]) {
        DRAGUARD_RETURN_IF_ERROR(p.StringList(c, path + ".containers", &cr.containers));
      }
      if (auto c = e["containerClaims"]) {
        DRAGUARD_RETURN_IF_ERROR(p.String(c, path + ".containerClaims", &cr.container_claims));
        if (cr.container_claims != "parent" && cr.container_claims != "none") {
          return p.Error(c, path + ".containerClaims", "must be parent or none");
        }
      }
      for (const auto* list : {&cr.pod_templates, &cr.containers}) {
        for (const auto& tp : *list) {
          if (!ValidTemplatePath(tp)) {
            return p.Error(e, path, "invalid path \"" + tp +
                                        "\" (dotted field names; \"*\" for map values, \"name[]\" for list items)");
          }
        }
      }
      if (cr.pod_templates.empty() && cr.containers.empty()) {
        return p.Error(e, path, "needs podTemplates or containers");
      }
      pol.custom_resources.push_back(std::move(cr));
    }
  }
  if (auto n = root["deviceClasses"]; n && !n.IsNull()) {
    DRAGUARD_RETURN_IF_ERROR(p.ExpectMap(n, "deviceClasses"));
    DRAGUARD_RETURN_IF_ERROR(p.CheckKeys(n, "deviceClasses", {"gpu", "mig", "passthrough", "cpu"}));
    if (auto e = n["gpu"]) DRAGUARD_RETURN_IF_ERROR(p.StringList(e, "deviceClasses.gpu", &pol.device_classes.gpu));
    if (auto e = n["mig"]) DRAGUARD_RETURN_IF_ERROR(p.StringList(e, "deviceClasses.mig", &pol.device_classes.mig));
    if (auto e = n["passthrough"]) {
      DRAGUARD_RETURN_IF_ERROR(p.StringList(e, "deviceClasses.passthrough", &pol.device_classes.passthrough));
    }
    if (auto e = n["cpu"]) DRAGUARD_RETURN_IF_ERROR(p.StringList(e, "deviceClasses.cpu", &pol.device_classes.cpu));
  }
  if (auto n = root["memoryReservation"]; n && !n.IsNull()) {
    DRAGUARD_RETURN_IF_ERROR(p.ExpectMap(n, "memoryReservation"));
    DRAGUARD_RETURN_IF_ERROR(p.CheckKeys(n, "memoryReservation", {"minimum"}));
    if (auto m = n["minimum"]) {
      DRAGUARD_RETURN_IF_ERROR(p.String(m, "memoryReservation.minimum", &pol.memory_minimum));
      auto q = k8s::Quantity::Parse(pol.memory_minimum);
      if (!q.ok() || q->Sign() < 0) {
        return p.Error(m, "memoryReservation.minimum",
                       "\"" + pol.memory_minimum + "\" is not a non-negative quantity (e.g. 40Gi)");
      }
    }
  }
  if (auto n = root["topologyAlignment"]; n && !n.IsNull()) {
    DRAGUARD_RETURN_IF_ERROR(p.ExpectMap(n, "topologyAlignment"));
    DRAGUARD_RETURN_IF_ERROR(p.CheckKeys(n, "topologyAlignment", {"exemptClasses"}));
    if (auto e = n["exemptClasses"]) {
      DRAGUARD_RETURN_IF_ERROR(p.StringList(e, "topologyAlignment.exemptClasses", &pol.alignment_exempt_classes));
    }
  }
  if (auto n = root["adminAccess"]; n && !n.IsNull()) {
    DRAGUARD_RETURN_IF_ERROR(p.ExpectMap(n, "adminAccess"));
    DRAGUARD_RETURN_IF_ERROR(p.CheckKeys(n, "adminAccess", {"allowedNamespaces"}));
    if (auto e = n["allowedNamespaces"]) {
      DRAGUARD_RETURN_IF_ERROR(p.StringList(e, "adminAccess.allowedNamespaces", &pol.admin_access_namespaces));
    }
  }
  if (auto n = root["allocationModeAll"]; n && !n.IsNull()) {
    DRAGUARD_RETURN_IF_ERROR(p.ExpectMap(n, "allocationModeAll"));
    DRAGUARD_RETURN_IF_ERROR(p.CheckKeys(n, "allocationModeAll", {"allowedNamespaces"}));
    if (auto e = n["allowedNamespaces"]) {
      DRAGUARD_RETURN_IF_ERROR(
          p.StringList(e, "allocationModeAll.allowedNamespaces", &pol.allocation_mode_all_namespaces));
    }
  }
  if (pol.mutation.cpu.mode != CpuMode::kNone) {
    // The cluster runs the CPU driver: its class is a CPU class, and exclusive CPUs outside the
    // GPUs' claim are denied unless the policy sets DG016's action.
    if (!pol.device_classes.IsCpuClass(pol.mutation.cpu.device_class)) {
      pol.device_classes.cpu.push_back(pol.mutation.cpu.device_class);
    }
    auto& dg016 = pol.rules["DG016"];
    if (!dg016.action) dg016.action = Action::kDeny;
  }
  return pol;
}

// FNV-1a 64-bit of `text` and its length, as hex: equal documents give equal fingerprints.
std::string SourceFingerprint(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx-%zx", static_cast<unsigned long long>(h), text.size());
  return buf;
}

}  // namespace

std::optional<std::chrono::system_clock::time_point> ParseRfc3339(std::string_view s) {
  // YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)
  bool ok = true;
  if (s.size() < 20) return std::nullopt;
  int y = Digits(s, 0, 4, &ok), mo = Digits(s, 5, 2, &ok), d = Digits(s, 8, 2, &ok);
  int h = Digits(s, 11, 2, &ok), mi = Digits(s, 14, 2, &ok), se = Digits(s, 17, 2, &ok);
  if (!ok || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') || s[13] != ':' ||
      s[16] != ':') {
    return std::nullopt;
  }
  std::size_t pos = 19;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    std::size_t digits = 0;
    while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) ++pos, ++digits;
    if (digits == 0) return std::nullopt;
  }
  int offset_min = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int sign = s[pos] == '-' ? -1 : 1;
    int oh = Digits(s, pos + 1, 2, &ok), om = Digits(s, pos + 4, 2, &ok);
    if (!ok || pos + 3 >= s.size() || s[pos + 3] != ':' || oh > 23 || om > 59) return std::nullopt;
    offset_min = sign * (oh * 60 + om);
    pos += 6;
  } else {
    return std::nullopt;
  }
  if (pos != s.size()) return std::nullopt;
  using namespace std::chrono;
  year_month_day ymd{year{y}, month{static_cast<unsigned>(mo)}, day{static_cast<unsigned>(d)}};
  if (!ymd.ok() || h > 23 || mi > 59 || se > 60) return std::nullopt;
  auto tp = sys_days(ymd) + hours(h) + minutes(mi) + seconds(se) - minutes(offset_min);
  return time_point_cast<system_clock::duration>(tp);
}

const char* ActionName(Action action) {
  switch (action) {
    case Action::kDeny: return "deny";
    case Action::kWarn: return "warn";
    case Action::kAudit: return "audit";
    case Action::kOff: return "off";
  }
  return "unknown";
}

Action Policy::ActionFor(std::string_view rule_id, Action default_action) const {
  RuleCursor cursor = rules.end();
  return ActionFor(rule_id, default_action, cursor);
}

Action Policy::ActionFor(std::string_view rule_id, Action default_action, RuleCursor& cursor) const {
  if (cursor == rules.end() || cursor->first != rule_id) cursor = rules.find(rule_id);
  if (cursor == rules.end()) return default_action;
  const RuleConfig& config = (cursor++)->second;
  return config.action ? *config.action : default_action;
}

bool LabelSelector::Matches(const std::map<std::string, std::string>& labels) const {
  for (const auto& [k, v] : match_labels) {
    auto it = labels.find(k);
    if (it == labels.end() || it->second != v) return false;
  }
  for (const auto& r : match_expressions) {
    auto it = labels.find(r.key);
    bool has = it != labels.end();
    bool in = false;
    if (has) {
      for (const auto& v : r.values) in = in || v == it->second;
    }
    if (r.op == "In" && !in) return false;
    if (r.op == "NotIn" && in) return false;
    if (r.op == "Exists" && !has) return false;
    if (r.op == "DoesNotExist" && has) return false;
  }
  return true;
}

bool DeviceClasses::IsGpuClass(std::string_view name) const {
  for (const auto* list : {&gpu, &mig, &passthrough}) {
    for (const auto& c : *list) {
      if (c == name) return true;
    }
  }
  return false;
}

bool DeviceClasses::IsCpuClass(std::string_view name) const {
  for (const auto& c : cpu) {
    if (c == name) return true;
  }
  return false;
}

std::vector<CustomResource> DefaultCustomResources() {
  const std::vector<std::string> kserve_frameworks = {
      "model", "pytorch", "tensorflow", "sklearn", "xgboost", "onnx", "triton",
      "huggingface", "lightgbm", "paddle", "pmml"};
  std::vector<std::string> kserve_containers;
  for (const auto& f : kserve_frameworks) kserve_containers.push_back("spec.predictor." + f);
  return {
      {"kubeflow.org", "PyTorchJob", {"spec.pytorchReplicaSpecs.*.template"}, {}},
      {"kubeflow.org", "TFJob", {"spec.tfReplicaSpecs.*.template"}, {}},
      {"kubeflow.org", "MPIJob", {"spec.mpiReplicaSpecs.*.template"}, {}},
      {"kubeflow.org", "PaddleJob", {"spec.paddleReplicaSpecs.*.template"}, {}},
      {"kubeflow.org", "XGBoostJob", {"spec.xgbReplicaSpecs.*.template"}, {}},
      {"trainer.kubeflow.org", "TrainJob", {}, {"spec.trainer"}},
      {"trainer.kubeflow.org", "TrainingRuntime", {"spec.template.spec.replicatedJobs[].template.spec.template"}, {}},
      {"trainer.kubeflow.org", "ClusterTrainingRuntime",
       {"spec.template.spec.replicatedJobs[].template.spec.template"}, {}},
      {"ray.io", "RayCluster", {"spec.headGroupSpec.template", "spec.workerGroupSpecs[].template"}, {}},
      {"ray.io", "RayJob",
       {"spec.rayClusterSpec.headGroupSpec.template", "spec.rayClusterSpec.workerGroupSpecs[].template",
        "spec.submitterPodTemplate"},
       {}},
      {"ray.io", "RayService",
       {"spec.rayClusterConfig.headGroupSpec.template", "spec.rayClusterConfig.workerGroupSpecs[].template"}, {}},
      {"leaderworkerset.x-k8s.io", "LeaderWorkerSet",
       {"spec.leaderWorkerTemplate.leaderTemplate", "spec.leaderWorkerTemplate.workerTemplate"}, {}},
      {"jobset.x-k8s.io", "JobSet", {"spec.replicatedJobs[].template.spec.template"}, {}},
      {"serving.kserve.io", "InferenceService", {"spec.predictor", "spec.transformer", "spec.explainer"},
       kserve_containers, "parent"},
      {"serving.kserve.io", "LLMInferenceService",
       {"spec.template", "spec.worker", "spec.prefill.template", "spec.prefill.worker"}, {}},
      {"batch.volcano.sh", "Job", {"spec.tasks[].template"}, {}},
      // NIM Operator: spec.resources of the NIMService; no pod-level claims draguard could write.
      {"apps.nvidia.com", "NIMService", {}, {"spec"}},
  };
}

bool Policy::IsLegacyResource(std::string_view resource_name) const {
  for (const auto& pattern : legacy_resources) {
    if (GlobMatch(pattern, resource_name)) return true;
  }
  return false;
}

std::string_view Policy::ImplicitGpuClass(std::string_view resource_name) const {
  if (!resource_name.starts_with(kImplicitResourcePrefix)) return {};
  std::string_view cls = resource_name.substr(kImplicitResourcePrefix.size());
  return device_classes.IsGpuClass(cls) ? cls : std::string_view{};
}

Result<Policy> ParsePolicy(std::string_view yaml, std::string_view source) {
  if (yaml.size() > kMaxPolicyBytes) {
    return Status::InvalidArgument(std::string(source) + ": policy larger than 1 MiB");
  }
  Parser parser(source);
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    auto policy = ParseDocument(root, parser);
    if (policy.ok()) policy->fingerprint = SourceFingerprint(yaml);
    return policy;
  } catch (const YAML::Exception& e) {
    std::ostringstream os;
    os << source;
    if (e.mark.line >= 0) os << ":" << (e.mark.line + 1) << ":" << (e.mark.column + 1);
    os << ": invalid YAML: " << e.msg;
    return Status::InvalidArgument(os.str());
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string(source) + ": invalid policy: " + e.what());
  }
}

Result<Policy> LoadPolicyFile(const std::string& path) {
  auto data = ReadFile(path, kMaxPolicyBytes);
  if (!data.ok()) {
    if (data.status().code() == StatusCode::kNotFound) return Status::NotFound("policy file: " + data.status().message());
    return Status::InvalidArgument("policy file: " + data.status().message());
  }
  return ParsePolicy(*data, path);
}

}  // namespace draguard::policy
