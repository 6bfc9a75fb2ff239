// DG015 pod-claim-references: containers reference the Pod's resourceClaims correctly.
#include <set>

#include "draguard/dra/claim_catalog.h"
#include "draguard/dra/pod_specs.h"
#include "draguard/dra/nvlink_jobs.h"
#include "rules/rules.h"
#include "rules/util.h"

namespace draguard::engine::rules {
namespace {

using admission::Json;

// A reference to a template or claim that the server's watch cache knows does not exist
// (dra::ClaimCatalog): the Pod would stay Pending until it does. Only a warning: the cache follows
// the API by a moment, and `kubectl apply` or Helm may create the Pod before its template. The
// templates draguard generates are made by /mutate itself, and the channel templates of the
// ComputeDomains it creates by the NVIDIA driver's controller soon after: neither is looked up.
bool MissingReference(const RuleInput& input, const std::string& entry, const std::string& claim_name,
                      const std::string& template_name, const std::string& pointer, Finding* out) {
  const std::string& ns = input.request.namespace_;
  if (input.claims == nullptr || ns.empty()) return false;
  if (!template_name.empty() && IsGeneratedTemplateName(template_name)) return false;
  // The channel template of a ComputeDomain /mutate created: the driver's controller makes it.
  if (!template_name.empty() && dra::IsGeneratedChannelTemplateName(template_name)) return false;
  const bool by_template = !template_name.empty();
  const dra::ClaimLookup found = by_template ? input.claims->Template(ns, template_name) : input.claims->Claim(ns, claim_name);
  if (found.state != dra::ClaimLookup::State::kAbsent) return false;
  const std::string what = by_template ? "ResourceClaimTemplate \"" + template_name + "\""
                                       : "ResourceClaim \"" + claim_name + "\"";
  out->pointer = pointer + (by_template ? "/resourceClaimTemplateName" : "/resourceClaimName");
  out->message = "spec.resourceClaims entry \"" + entry + "\" references " + what + ", which does not exist in namespace " +
                 ns + ": the Pod stays Pending until it does";
  out->fix = "create the " + what + " in " + ns + " before the Pod, or correct the name";
  out->cap = policy::Action::kWarn;
  return true;
}

class PodClaimReferences final : public Rule {
 public:
  std::string_view id() const override { return "DG015"; }
  std::string_view name() const override { return "pod-claim-references"; }
  policy::Action default_action() const override { return policy::Action::kDeny; }

  RuleResult Evaluate(const RuleInput& input) const override {
    PodObjects scratch;
    const PodObjects& objects = PodObjectsOf(input, scratch);
    if (objects.specs.empty()) return Skip();
    std::vector<Finding> findings;
    for (const auto& spec : objects.specs) {
      std::string prefix = spec.workload ? spec.owner + " " + spec.pointer + ": " : "";
      auto add = [&](std::string pointer, std::string message, std::string fix) {
        findings.push_back({std::move(pointer), prefix + message, std::move(fix), std::nullopt});
      };
      std::set<std::string> declared;
      const Json* claims = Member(spec.spec, "resourceClaims");
      for (std::size_t i = 0; claims != nullptr && claims->is_array() && i < claims->size(); ++i) {
        const Json& e = (*claims)[i];
        std::string p = spec.pointer + "/resourceClaims/" + std::to_string(i);
        std::string name = StringMember(&e, "name");
        if (!IsDnsLabel(name)) {
          add(p + "/name", "spec.resourceClaims entry name \"" + name + "\" is not a DNS label",
              "use lower-case letters, digits and '-'");
        } else if (!declared.insert(name).second) {
          add(p + "/name", "spec.resourceClaims has two entries named \"" + name + "\"", "make the names unique");
        }
        const std::string claim_name = StringMember(&e, "resourceClaimName");
        const std::string template_name = StringMember(&e, "resourceClaimTemplateName");
        bool by_name = !claim_name.empty();
        bool by_template = !template_name.empty();
        if (Member(&e, "source") != nullptr && !by_name && !by_template) {
          add(p + "/source", "spec.resourceClaims entry \"" + name + "\" uses the removed source: wrapper "
              "(Kubernetes 1.30 and older)", "set resourceClaimName or resourceClaimTemplateName directly on the entry");
        } else if (by_name == by_template) {
          add(p, "spec.resourceClaims entry \"" + name + "\" must set exactly one of resourceClaimName and "
              "resourceClaimTemplateName", "keep resourceClaimTemplateName (one claim per Pod)");
        } else if (Finding missing; MissingReference(input, name, claim_name, template_name, p, &missing)) {
          missing.message = prefix + missing.message;
          findings.push_back(std::move(missing));
        }
      }
      for (const auto& c : Containers(spec)) {
        const Json* list = Member(Member(c.container, "resources"), "claims");
        if (list == nullptr || !list->is_array()) continue;
        std::set<std::string> whole, parts;
        std::string who = c.kind + " \"" + c.name + "\"";
        for (std::size_t i = 0; i < list->size(); ++i) {
          const Json& e = (*list)[i];
          std::string p = c.pointer + "/resources/claims/" + std::to_string(i);
          std::string name = StringMember(&e, "name");
          std::string request = StringMember(&e, "request");
          if (!declared.count(name)) {
            add(p + "/name", who + " uses claim \"" + name + "\", which spec.resourceClaims does not declare",
                "add {name: " + name + ", resourceClaimTemplateName: ...} to spec.resourceClaims");
            continue;
          }
          if (!request.empty() && !IsDnsLabel(request)) {
            add(p + "/request", who + " claim \"" + name + "\" request \"" + request +
                "\" is not a DNS label (only main request names, no \"req/sub\")", "name a main request of the claim");
            continue;
          }
          bool dup = request.empty() ? (whole.count(name) || [&] {
            for (const auto& x : parts) {
              if (x.rfind(name + "/", 0) == 0) return true;
            }
            return false;
          }()) : (whole.count(name) || parts.count(name + "/" + request));
          if (dup) {
            add(p, who + " uses claim \"" + name + "\"" + (request.empty() ? "" : " request \"" + request + "\"") +
                " more than once", "list each claim (or claim request) once per container");
          }
          if (request.empty()) whole.insert(name);
          else parts.insert(name + "/" + request);
        }
      }
    }
    return Fail(std::move(findings));
  }
};

}  // namespace

std::unique_ptr<Rule> MakePodClaimReferences() { return std::make_unique<PodClaimReferences>(); }

}  // namespace draguard::engine::rules
