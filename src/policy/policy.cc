#include "draguard/policy/policy.h"

#include <fstream>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "draguard/glob.h"

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

bool IsRuleId(const std::string& s) {
  if (s.size() != 5 || s[0] != 'D' || s[1] != 'G') return false;
  for (std::size_t i = 2; i < 5; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

Result<Policy> ParseDocument(const YAML::Node& root, const Parser& p) {
  Policy pol;
  if (!root.IsDefined() || root.IsNull()) return p.Error(root, "(document)", "policy is empty");
  DRAGUARD_RETURN_IF_ERROR(p.ExpectMap(root, "(document)"));
  DRAGUARD_RETURN_IF_ERROR(p.CheckKeys(root, "",
                                 {"apiVersion", "kind", "mode", "legacyResources", "rules",
                                  "ruleErrors", "exemptions", "workloadClasses", "mutation"}));
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
    DRAGUARD_RETURN_IF_ERROR(p.CheckKeys(n, "exemptions", {"namespaces", "users", "groups"}));
    if (auto e = n["namespaces"]) {
      DRAGUARD_RETURN_IF_ERROR(p.StringList(e, "exemptions.namespaces", &pol.exemptions.namespaces));
    }
    if (auto e = n["users"]) DRAGUARD_RETURN_IF_ERROR(p.StringList(e, "exemptions.users", &pol.exemptions.users));
    if (auto e = n["groups"]) {
      DRAGUARD_RETURN_IF_ERROR(p.StringList(e, "exemptions.groups", &pol.exemptions.groups));
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
  if (auto n = root["mutation"]; n && !n.IsNull()) {
    DRAGUARD_RETURN_IF_ERROR(p.ExpectMap(n, "mutation"));
    DRAGUARD_RETURN_IF_ERROR(p.CheckKeys(n, "mutation", {"enabled", "templates"}));
    if (auto e = n["enabled"]) DRAGUARD_RETURN_IF_ERROR(p.Bool(e, "mutation.enabled", &pol.mutation.enabled));
    if (auto t = n["templates"]) {
      DRAGUARD_RETURN_IF_ERROR(p.Enum<TemplateMode>(
          t, "mutation.templates",
          {{"create", TemplateMode::kCreate}, {"reference", TemplateMode::kReference}},
          &pol.mutation.templates));
    }
  }
  return pol;
}

}  // namespace

const char* ActionName(Action action) {
  switch (action) {
    case Action::kDeny: return "deny";
    case Action::kWarn: return "warn";
    case Action::kAudit: return "audit";
    case Action::kOff: return "off";
  }
  return "unknown";
}

std::optional<Action> ParseAction(std::string_view text) {
  if (text == "deny") return Action::kDeny;
  if (text == "warn") return Action::kWarn;
  if (text == "audit") return Action::kAudit;
  if (text == "off") return Action::kOff;
  return std::nullopt;
}

Action Policy::ActionFor(std::string_view rule_id, Action default_action) const {
  auto it = rules.find(std::string(rule_id));
  if (it != rules.end() && it->second.action) return *it->second.action;
  return default_action;
}

bool Policy::IsLegacyResource(std::string_view resource_name) const {
  for (const auto& pattern : legacy_resources) {
    if (GlobMatch(pattern, resource_name)) return true;
  }
  return false;
}

Result<Policy> ParsePolicy(std::string_view yaml, std::string_view source) {
  if (yaml.size() > kMaxPolicyBytes) {
    return Status::InvalidArgument(std::string(source) + ": policy larger than 1 MiB");
  }
  Parser parser(source);
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    return ParseDocument(root, parser);
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
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot open policy file " + path);
  std::string data;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    data.append(buf, static_cast<std::size_t>(in.gcount()));
    if (data.size() > kMaxPolicyBytes) {
      return Status::InvalidArgument(path + ": policy larger than 1 MiB");
    }
  }
  return ParsePolicy(data, path);
}

}  // namespace draguard::policy
