#include "draguard/engine/engine.h"

#include <algorithm>
#include <cctype>
#include <exception>
#include <set>

#include "draguard/cel/budget.h"
#include "draguard/dra/pod_specs.h"
#include "draguard/glob.h"
#include "draguard/trim.h"
#include "draguard/truncate.h"

namespace draguard::engine {
namespace {

bool AnyGlob(const std::vector<std::string>& patterns, const std::string& value) {
  for (const auto& p : patterns) {
    if (GlobMatch(p, value)) return true;
  }
  return false;
}

// The object under review (the old object for DELETE).
const admission::Json& ReviewedObject(const admission::AdmissionRequest& req) {
  return req.object.is_object() ? req.object : req.old_object;
}

// Why the request is exempt from every rule, or "" when it is not.
std::string Exemption(const admission::AdmissionRequest& req, const policy::Policy& pol) {
  const auto& ex = pol.exemptions;
  if (!req.namespace_.empty() && AnyGlob(ex.namespaces, req.namespace_)) {
    return "namespace " + req.namespace_;
  }
  if (!req.user_info.username.empty() && AnyGlob(ex.users, req.user_info.username)) {
    return "user " + req.user_info.username;
  }
  for (const auto& g : req.user_info.groups) {
    if (AnyGlob(ex.groups, g)) return "group " + g;
  }
  if (!ex.object_selectors.empty()) {
    auto labels = dra::StringMapAt(ReviewedObject(req), {"metadata", "labels"});
    for (std::size_t i = 0; i < ex.object_selectors.size(); ++i) {
      if (ex.object_selectors[i].Matches(labels)) {
        return "labels match exemptions.objectSelectors[" + std::to_string(i) + "]";
      }
    }
  }
  return "";
}

// Why a claim a trusted scheduler made is admitted unjudged.
std::string SchedulerClaimExemption(const admission::AdmissionRequest& req) {
  const std::string pod = ControllerPodOf(req.object);
  return "ResourceClaim made by " + Truncate(req.user_info.username) + " for the extended resources of " +
         (pod.empty() ? std::string("a Pod") : "Pod \"" + Truncate(pod) + "\"") +
         " (KEP-5004): the Pod's request, judged when the Pod was admitted";
}

// Why the annotation of a claim someone else made changes nothing.
std::string UntrustedSchedulerClaimNote(const admission::AdmissionRequest& req) {
  const std::string& user = req.user_info.username;
  return std::string(kExtendedResourceClaimAnnotation) + " ignored: " +
         (user.empty() ? std::string("its creator is unknown") : "created by " + Truncate(user)) +
         ", not by a trusted scheduler (policy trustedSchedulers); the claim is judged like any other";
}

// The per-object exceptions in effect (DecideExceptions) into `out`.
void RuleExemptions(const RuleInput& input, const Registry& registry, EngineResult* out) {
  if (!ExceptionsMayApply(input.request, input.policy)) return;  // most reviews: no subject to build
  ExceptionDecision d = DecideExceptions(SubjectOf(input.request), input.policy, registry, input.now);
  out->exempted_rules = std::move(d.exempted_rules);
  for (const auto& r : d.records) out->rule_exemption += (out->rule_exemption.empty() ? "" : "; ") + r;
  for (auto& n : d.notes) out->notes.push_back(std::move(n));
}

}  // namespace

std::string ExemptionFrom(const RuleInput& input, const Registry& registry, std::string_view rule_id) {
  std::string global = Exemption(input.request, input.policy);
  if (!global.empty()) return global;
  EngineResult r;
  RuleExemptions(input, registry, &r);
  if (std::find(r.exempted_rules.begin(), r.exempted_rules.end(), rule_id) != r.exempted_rules.end()) {
    return r.rule_exemption;
  }
  return "";
}

EngineResult Evaluate(const RuleInput& given, const Registry& registry) {
  EngineResult out;
  out.scheduler_claim = ClassifySchedulerClaim(given.request, given.policy);
  if (out.scheduler_claim == SchedulerClaim::kScheduler) {
    out.exemption = SchedulerClaimExemption(given.request);
    return out;
  }
  out.exemption = Exemption(given.request, given.policy);
  if (!out.exemption.empty()) return out;
  // One CEL budget for every rule of the review.
  cel::Budget budget(given.policy.cel_cost_per_review, given.deadline);
  RuleInput input = given;
  if (input.cel_budget == nullptr) input.cel_budget = &budget;
  for (auto& e : CustomResourceShapeErrors(input.request, input.policy)) {
    out.shape_errors.push_back(dra::OwnerName(input.request) + ": " + e);
  }
  RuleExemptions(input, registry, &out);
  if (out.scheduler_claim == SchedulerClaim::kOther) out.notes.push_back(UntrustedSchedulerClaimNote(input.request));
  // Three rules walk the object's pod specs: find them once.
  dra::PodObjects objects;
  if (input.pod_objects == nullptr) {
    objects = dra::FindPodObjects(input.request, input.policy);
    input.pod_objects = &objects;
  }
  out.outcomes.reserve(registry.rules().size());
  policy::Policy::RuleCursor cursor = input.policy.rules.begin();  // the registry is in ID order
  for (const auto& rule : registry.rules()) {
    const policy::Action action = input.policy.ActionFor(rule->id(), rule->default_action(), cursor);
    if (action == policy::Action::kOff) continue;
    if (std::find(out.exempted_rules.begin(), out.exempted_rules.end(), rule->id()) !=
        out.exempted_rules.end()) {
      continue;
    }
    RuleOutcome o;
    o.rule = rule.get();
    o.action = action;
    try {
      o.result = rule->Evaluate(input);
    } catch (const std::exception& e) {
      o.result = Error(std::string("internal error: ") + e.what());
    } catch (...) {
      o.result = Error("internal error");
    }
    if (o.result.status == RuleStatus::kError && input.cel_budget->exhausted()) {
      out.budget_rules.emplace_back(rule->id());
    }
    out.outcomes.push_back(std::move(o));
  }
  return out;
}

}  // namespace draguard::engine
