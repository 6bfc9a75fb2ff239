// The DG001 backstop policy. Every piece of CEL here has a twin in charts/draguard/templates/
// _backstop.tpl; the chart test compares the two renderings, so change both together.
#include "draguard/engine/backstop.h"

#include <algorithm>

#include "draguard/engine/engine.h"

namespace draguard::engine {
namespace {

constexpr const char* kMessage =
    "DG001 legacy-gpu-resource (draguard backstop policy): a container of this Pod requests a legacy "
    "device-plugin GPU resource; request GPUs with a DRA ResourceClaimTemplate in spec.resourceClaims";

std::vector<std::string> Uniq(const std::vector<std::string>& in) {
  std::vector<std::string> out;
  for (const auto& s : in) {
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  }
  return out;
}

bool HasWildcard(const std::string& p) { return p.find_first_of("*?") != std::string::npos; }

Status CheckLiteral(const std::string& s, const char* what) {
  if (s.find_first_of("'\\\"[]^\n\r") != std::string::npos) {
    return Status::InvalidArgument(std::string(what) + " \"" + s +
                                   "\" contains a character the backstop CEL cannot carry (quote, backslash, bracket, '^')");
  }
  return Status::Ok();
}

std::string Quote(const std::string& s) { return "'" + s + "'"; }

// A glob as an RE2 pattern: '*' → ".*", '?' → ".", regex punctuation in a character class.
std::string GlobRegex(const std::string& glob) {
  std::string re = "^";
  for (char c : glob) {
    if (c == '*') {
      re += ".*";
    } else if (c == '?') {
      re += ".";
    } else if (std::string_view(".+()|{}$").find(c) != std::string_view::npos) {
      re += std::string("[") + c + "]";
    } else {
      re += c;
    }
  }
  return re + "$";
}

// CEL: true when `var` matches one of the globs. Exact names first (one `in` list), then each
// glob in order: "*" → true, "prefix*" → startsWith, anything else → matches.
std::string GlobPredicate(const std::string& var, const std::vector<std::string>& patterns) {
  std::vector<std::string> exact, terms;
  for (const auto& p : Uniq(patterns)) {
    if (!HasWildcard(p)) exact.push_back(Quote(p));
  }
  if (!exact.empty()) {
    std::string list;
    for (const auto& e : exact) list += (list.empty() ? "" : ", ") + e;
    terms.push_back(var + " in [" + list + "]");
  }
  for (const auto& p : Uniq(patterns)) {
    if (!HasWildcard(p)) continue;
    const std::string head = p.substr(0, p.size() - 1);
    if (p == "*") {
      terms.push_back("true");
    } else if (p.back() == '*' && !HasWildcard(head)) {
      terms.push_back(var + ".startsWith(" + Quote(head) + ")");
    } else {
      terms.push_back(var + ".matches(" + Quote(GlobRegex(p)) + ")");
    }
  }
  if (terms.empty()) return "false";
  std::string out;
  for (const auto& t : Uniq(terms)) out += (out.empty() ? "" : " || ") + t;
  return "(" + out + ")";
}

// The resource names DG001 denies: with extendedResourceMapping deny, every legacy name plus the
// implicit deviceclass.resource.kubernetes.io/<class> of every GPU class; otherwise (a
// DeviceClass may back the name) only the HAMi sharing dimensions that are legacy names.
std::vector<std::string> DeniedNames(const policy::Policy& p) {
  std::vector<std::string> names;
  if (p.extended_resource_mapping == policy::ExtendedResourceMapping::kDeny) {
    names = p.legacy_resources;
    for (const auto* list : {&p.device_classes.gpu, &p.device_classes.mig, &p.device_classes.passthrough}) {
      for (const auto& c : *list) names.push_back("deviceclass.resource.kubernetes.io/" + c);
    }
  } else {
    for (const char* n : {"nvidia.com/gpumem", "nvidia.com/gpucores", "nvidia.com/gpumem-percentage"}) {
      if (p.IsLegacyResource(n)) names.emplace_back(n);
    }
  }
  return names;
}

// CEL on a ResourceRequirements expression `r`: a denied name with a non-zero quantity. `r` is
// read through dyn(): the OpenAPI schema of Quantity (a oneOf without a type) leaves limits and
// requests out of the type kube-controller-manager checks policies against (status warnings
// "undefined field"), while evaluation sees them.
std::string Resources(const std::string& r, const std::string& key) {
  auto section = [&](const char* s) {
    const std::string m = "dyn(" + r + ")." + s;
    return "(has(" + m + ") && " + m + ".exists(k, " + key + " && sign(quantity(string(" + m + "[k]))) != 0))";
  };
  return section("limits") + " || " + section("requests");
}

// CEL of one label selector on object.metadata.labels (matchLabels AND matchExpressions).
std::string Selector(const policy::LabelSelector& s) {
  auto present = [](const std::string& k) {
    return "(has(object.metadata.labels) && " + Quote(k) + " in object.metadata.labels)";
  };
  auto value = [](const std::string& k) { return "object.metadata.labels[" + Quote(k) + "]"; };
  auto list = [](const std::vector<std::string>& vs) {
    std::string out;
    for (const auto& v : vs) out += (out.empty() ? "" : ", ") + Quote(v);
    return "[" + out + "]";
  };
  std::vector<std::string> terms;
  for (const auto& [k, v] : s.match_labels) terms.push_back("(" + present(k) + " && " + value(k) + " == " + Quote(v) + ")");
  for (const auto& e : s.match_expressions) {
    if (e.op == "In") terms.push_back("(" + present(e.key) + " && " + value(e.key) + " in " + list(e.values) + ")");
    if (e.op == "NotIn") terms.push_back("!(" + present(e.key) + " && " + value(e.key) + " in " + list(e.values) + ")");
    if (e.op == "Exists") terms.push_back(present(e.key));
    if (e.op == "DoesNotExist") terms.push_back("!" + present(e.key));
  }
  if (terms.empty()) return "true";
  std::string out;
  for (const auto& t : terms) out += (out.empty() ? "" : " && ") + t;
  return "(" + out + ")";
}

// The policy exceptions that name DG001.
std::vector<const policy::PolicyException*> Dg001Exceptions(const policy::Policy& p) {
  std::vector<const policy::PolicyException*> out;
  for (const auto& ex : p.exceptions) {
    if (std::find(ex.rules.begin(), ex.rules.end(), "DG001") != ex.rules.end()) out.push_back(&ex);
  }
  return out;
}

// The annotationExceptions entries that may allow a DG001 annotation.
std::vector<const policy::AnnotationExceptionGrant*> Dg001Grants(const policy::Policy& p) {
  std::vector<const policy::AnnotationExceptionGrant*> out;
  for (const auto& g : p.annotation_exceptions) {
    if (g.rules.empty() || std::find(g.rules.begin(), g.rules.end(), "DG001") != g.rules.end()) out.push_back(&g);
  }
  return out;
}

Status CheckPolicy(const policy::Policy& p) {
  for (const auto& n : p.legacy_resources) DRAGUARD_RETURN_IF_ERROR(CheckLiteral(n, "legacyResources entry"));
  for (const auto* list : {&p.device_classes.gpu, &p.device_classes.mig, &p.device_classes.passthrough}) {
    for (const auto& c : *list) DRAGUARD_RETURN_IF_ERROR(CheckLiteral(c, "device class"));
  }
  for (const auto* list : {&p.exemptions.namespaces, &p.exemptions.users, &p.exemptions.groups}) {
    for (const auto& n : *list) DRAGUARD_RETURN_IF_ERROR(CheckLiteral(n, "exemption"));
  }
  std::vector<const policy::LabelSelector*> selectors;
  for (const auto& s : p.exemptions.object_selectors) selectors.push_back(&s);
  for (const auto* ex : Dg001Exceptions(p)) {
    for (const auto* list : {&ex->namespaces, &ex->object_names}) {
      for (const auto& n : *list) DRAGUARD_RETURN_IF_ERROR(CheckLiteral(n, "exception"));
    }
    if (ex->object_selector) selectors.push_back(&*ex->object_selector);
  }
  for (const auto* g : Dg001Grants(p)) {
    for (const auto* list : {&g->namespaces, &g->users, &g->groups}) {
      for (const auto& n : *list) DRAGUARD_RETURN_IF_ERROR(CheckLiteral(n, "annotationExceptions entry"));
    }
  }
  for (const auto* s : selectors) {
    for (const auto& [k, v] : s->match_labels) {
      DRAGUARD_RETURN_IF_ERROR(CheckLiteral(k, "label"));
      DRAGUARD_RETURN_IF_ERROR(CheckLiteral(v, "label value"));
    }
    for (const auto& e : s->match_expressions) {
      DRAGUARD_RETURN_IF_ERROR(CheckLiteral(e.key, "label"));
      for (const auto& v : e.values) DRAGUARD_RETURN_IF_ERROR(CheckLiteral(v, "label value"));
    }
  }
  return Status::Ok();
}

// CEL: the request matches one of `exceptions` (namespace, name, labels; the expiry needs a clock
// CEL does not have, so the webhook alone ends an exception).
std::string ExceptionPredicate(const std::vector<const policy::PolicyException*>& exceptions) {
  std::string any;
  for (const auto* ex : exceptions) {
    std::string t = GlobPredicate("request.namespace", ex->namespaces);
    if (!ex->object_names.empty()) t += " && " + GlobPredicate("request.name", ex->object_names);
    if (ex->object_selector) t += " && " + Selector(*ex->object_selector);
    any += (any.empty() ? "" : " || ") + ("(" + t + ")");
  }
  return any;
}

// CEL: an annotationExceptions entry allows the annotation here (namespace and requester).
std::string GrantPredicate(const std::vector<const policy::AnnotationExceptionGrant*>& grants) {
  std::string any;
  for (const auto* g : grants) {
    std::string t = GlobPredicate("request.namespace", g->namespaces);
    if (!g->users.empty() || !g->groups.empty()) {
      std::vector<std::string> who;
      if (!g->users.empty()) who.push_back(GlobPredicate("request.userInfo.username", g->users));
      if (!g->groups.empty()) {
        who.push_back("(has(request.userInfo.groups) && request.userInfo.groups.exists(g, " +
                      GlobPredicate("g", g->groups) + "))");
      }
      t += " && (" + who.front() + (who.size() > 1 ? " || " + who.back() : "") + ")";
    }
    any += (any.empty() ? "" : " || ") + ("(" + t + ")");
  }
  return any;
}

}  // namespace

Result<Backstop> MakeBackstop(const policy::Policy& p) {
  DRAGUARD_RETURN_IF_ERROR(CheckPolicy(p));
  Backstop b;
  switch (ModeAction(p.ActionFor("DG001", policy::Action::kDeny), p)) {
    case policy::Action::kDeny: b.actions = {"Deny"}; break;
    case policy::Action::kWarn:
    case policy::Action::kAudit: b.actions = {"Warn", "Audit"}; break;
    case policy::Action::kOff: break;
  }
  const auto& ex = p.exemptions;
  if (!ex.namespaces.empty()) {
    b.match_conditions.emplace_back("not-exempt-namespace", "!" + GlobPredicate("request.namespace", ex.namespaces));
  }
  if (!ex.users.empty()) {
    b.match_conditions.emplace_back("not-exempt-user", "!" + GlobPredicate("request.userInfo.username", ex.users));
  }
  if (!ex.groups.empty()) {
    b.match_conditions.emplace_back("not-exempt-group", "!(has(request.userInfo.groups) && request.userInfo.groups.exists(g, " +
                                                            GlobPredicate("g", ex.groups) + "))");
  }
  if (!ex.object_selectors.empty()) {
    std::string any;
    for (const auto& s : ex.object_selectors) any += (any.empty() ? "" : " || ") + Selector(s);
    b.match_conditions.emplace_back("not-exempt-labels", "!(" + any + ")");
  }
  if (auto exceptions = Dg001Exceptions(p); !exceptions.empty()) {
    b.match_conditions.emplace_back("no-dg001-policy-exception", "!(" + ExceptionPredicate(exceptions) + ")");
  }
  if (auto grants = Dg001Grants(p); !grants.empty()) {
    b.match_conditions.emplace_back(
        "no-dg001-exception",
        "!(has(object.metadata.annotations) && 'draguard.io/exempt' in object.metadata.annotations && "
        "object.metadata.annotations['draguard.io/exempt'].split(',').exists(id, id.trim() == 'DG001') && "
        "'draguard.io/exempt-reason' in object.metadata.annotations && "
        "object.metadata.annotations['draguard.io/exempt-reason'].trim() != '' && (" +
            GrantPredicate(grants) + "))");
  }
  const std::string key = GlobPredicate("k", DeniedNames(p));
  std::string pod = "(has(object.spec.resources) && (" + Resources("object.spec.resources", key) + "))";
  for (const char* f : {"containers", "initContainers", "ephemeralContainers"}) {
    const std::string list = std::string("object.spec.") + f;
    pod += " || (has(" + list + ") && " + list + ".exists(c, has(c.resources) && (" + Resources("c.resources", key) + ")))";
  }
  b.validation = "!(" + pod + ")";
  b.message = kMessage;
  return b;
}

std::vector<admission::Json> BackstopObjects(const Backstop& b, const std::string& name) {
  using admission::Json;
  if (b.actions.empty()) return {};
  Json conditions = Json::array();
  for (const auto& [n, e] : b.match_conditions) conditions.push_back({{"name", n}, {"expression", e}});
  Json policy = {
      {"apiVersion", "admissionregistration.k8s.io/v1"},
      {"kind", "ValidatingAdmissionPolicy"},
      {"metadata", {{"name", name}}},
      {"spec",
       {{"failurePolicy", "Fail"},
        {"matchConstraints",
         {{"resourceRules",
           Json::array({{{"apiGroups", {""}}, {"apiVersions", {"v1"}}, {"operations", {"CREATE"}}, {"resources", {"pods"}}}})}}},
        {"matchConditions", conditions},
        {"validations", Json::array({{{"expression", b.validation}, {"message", b.message}, {"reason", "Forbidden"}}})}}}};
  Json binding = {{"apiVersion", "admissionregistration.k8s.io/v1"},
                  {"kind", "ValidatingAdmissionPolicyBinding"},
                  {"metadata", {{"name", name}}},
                  {"spec", {{"policyName", name}, {"validationActions", b.actions}}}};
  return {policy, binding};
}

}  // namespace draguard::engine
