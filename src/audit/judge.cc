#include "draguard/audit/judge.h"

#include <cctype>
#include <functional>
#include <string>
#include <utility>

#include "draguard/engine/scheduler_claims.h"
#include "draguard/mutation/mutation.h"

namespace draguard::audit {
namespace {

using admission::Json;
using engine::Verdict;

// Severity order of combined verdicts: the more severe of /mutate and /validate wins.
int Rank(Verdict v) {
  switch (v) {
    case Verdict::kError: return 7;
    case Verdict::kDeny: return 6;
    case Verdict::kWarn: return 5;
    case Verdict::kAudit: return 4;
    case Verdict::kMutate: return 3;
    case Verdict::kExempt: return 2;
    case Verdict::kAllow: return 1;
  }
  return 0;
}

std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string MetaString(const Json& object, const char* key) {
  auto md = object.find("metadata");
  if (md == object.end() || !md->is_object()) return "";
  auto it = md->find(key);
  return it != md->end() && it->is_string() ? it->get<std::string>() : "";
}

// The findings of a /validate judgement, each with the action the webhook takes on it.
void AddValidateFindings(const engine::EngineResult& result, const policy::Policy& policy,
                         std::vector<Finding>& out) {
  for (const auto& o : result.outcomes) {
    const engine::Rule& rule = *o.rule;
    if (o.result.status == engine::RuleStatus::kError) {
      bool deny = policy.rule_errors == policy::RuleErrorPolicy::kDeny && policy.mode == policy::Mode::kEnforce;
      out.push_back({std::string(rule.id()), std::string(rule.name()), deny ? "deny" : "error",
                     "could not be evaluated: " + o.result.error, "", ""});
      continue;
    }
    if (o.result.status != engine::RuleStatus::kFail) continue;
    const policy::Action rule_action = engine::ModeAction(o.action, policy);
    for (const auto& f : o.result.findings) {
      policy::Action a = engine::EffectiveAction(rule_action, f);
      if (a == policy::Action::kOff) continue;
      out.push_back({std::string(rule.id()), std::string(rule.name()), policy::ActionName(a), f.message, f.fix,
                     f.pointer});
    }
  }
}

// The finding a /mutate decision carries when it refused or warned (DG001).
void AddMutateFindings(const engine::Decision& d, const engine::Registry& registry, std::vector<Finding>& out) {
  const engine::Rule* rule = engine::MutationRule(registry);
  if (rule == nullptr) return;
  if (d.verdict == Verdict::kDeny) {
    out.push_back({std::string(rule->id()), std::string(rule->name()), "deny",
                   d.response.status ? d.response.status->message : "refused by /mutate", "", ""});
  } else if (d.verdict == Verdict::kWarn) {
    for (const auto& w : d.response.warnings) {
      out.push_back({std::string(rule->id()), std::string(rule->name()), "warn", w, "", ""});
    }
  }
}

// A ResourceClaim carrying kube-scheduler's extended-resource annotation (KEP-5004).
bool IsAnnotatedClaim(const Json& object, const admission::AdmissionRequest& req) {
  return req.kind.group == "resource.k8s.io" && req.kind.kind == "ResourceClaim" &&
         engine::HasExtendedResourceClaimAnnotation(object);
}

std::uint64_t Hash(std::string_view a, std::string_view b) {
  std::string key;
  key.reserve(a.size() + b.size() + 1);
  key.append(a).push_back('/');
  key.append(b);
  const std::uint64_t h = std::hash<std::string>{}(key);
  return h == 0 ? 1 : h;  // 0 means "no claim"
}

}  // namespace

void SchedulerClaimIndex::NotePod(const Json& pod, std::string_view default_namespace) {
  if (pods_.size() >= kMaxPods) return;
  std::string ns = MetaString(pod, "namespace");
  if (ns.empty()) ns = default_namespace;
  const std::string name = MetaString(pod, "name");
  if (name.empty()) return;
  std::uint64_t claim = 0;
  if (auto st = pod.find("status"); st != pod.end() && st->is_object()) {
    if (auto ext = st->find("extendedResourceClaimStatus"); ext != st->end() && ext->is_object()) {
      if (auto n = ext->find("resourceClaimName"); n != ext->end() && n->is_string() && !n->get_ref<const std::string&>().empty()) {
        claim = Hash(ns, n->get_ref<const std::string&>());
      }
    }
  }
  pods_[Hash(ns, name)] = claim;
}

SchedulerClaimIndex::Proof SchedulerClaimIndex::ProofFor(const Json& claim, std::string_view namespace_) const {
  const std::string pod = engine::ControllerPodOf(claim);
  if (pod.empty()) return Proof::kNotMade;
  auto it = pods_.find(Hash(namespace_, pod));
  if (it == pods_.end()) return Proof::kPodNotSeen;
  return it->second == Hash(namespace_, MetaString(claim, "name")) ? Proof::kMade : Proof::kNotMade;
}

std::vector<AuditedKind> AuditedKinds(const policy::Policy& policy) {
  std::vector<AuditedKind> kinds = {
      {"", "v1", "Pod", "pods"},
      {"apps", "v1", "Deployment", "deployments"},
      {"apps", "v1", "StatefulSet", "statefulsets"},
      {"apps", "v1", "DaemonSet", "daemonsets"},
      {"apps", "v1", "ReplicaSet", "replicasets"},
      {"", "v1", "ReplicationController", "replicationcontrollers"},
      {"", "v1", "PodTemplate", "podtemplates"},
      {"batch", "v1", "Job", "jobs"},
      {"batch", "v1", "CronJob", "cronjobs"},
      {"resource.k8s.io", "v1", "ResourceClaim", "resourceclaims"},
      {"resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates"},
  };
  for (const auto& cr : policy.custom_resources) {
    bool dup = false;
    for (const auto& k : kinds) dup = dup || (k.group == cr.group && k.kind == cr.kind);
    // Plural by the Kubernetes default (lowercase kind + "s"), as every bundled custom resource has.
    if (!dup) kinds.push_back({cr.group, "", cr.kind, Lower(cr.kind) + "s"});
  }
  return kinds;
}

bool IsAudited(std::string_view group, std::string_view kind, const policy::Policy& policy) {
  static constexpr std::pair<std::string_view, std::string_view> kBuiltin[] = {
      {"", "Pod"},          {"apps", "Deployment"}, {"apps", "StatefulSet"},
      {"apps", "DaemonSet"}, {"apps", "ReplicaSet"}, {"", "ReplicationController"},
      {"", "PodTemplate"},  {"batch", "Job"},       {"batch", "CronJob"},
      {"resource.k8s.io", "ResourceClaim"},         {"resource.k8s.io", "ResourceClaimTemplate"},
  };
  for (const auto& [g, k] : kBuiltin) {
    if (g == group && k == kind) return true;
  }
  for (const auto& cr : policy.custom_resources) {
    if (cr.group == group && cr.kind == kind) return true;
  }
  return false;
}

const char* MutationOutcomeName(MutationOutcome outcome) {
  switch (outcome) {
    case MutationOutcome::kNone: return "none";
    case MutationOutcome::kConverted: return "converted";
    case MutationOutcome::kRefused: return "refused";
    case MutationOutcome::kExempt: return "exempt";
  }
  return "none";
}

ObjectVerdict JudgeObject(Json object, const JudgeContext& ctx) {
  ObjectVerdict v;
  if (object.is_object()) {
    if (auto it = object.find("apiVersion"); it != object.end() && it->is_string()) v.api_version = *it;
    if (auto it = object.find("kind"); it != object.end() && it->is_string()) v.kind = *it;
    v.name = MetaString(object, "name");
    if (v.name.empty()) v.name = MetaString(object, "generateName");
    v.uid = MetaString(object, "uid");
  }
  admission::AdmissionRequest req = admission::CreateRequestFor(std::move(object), ctx.default_namespace);
  req.uid = v.uid.empty() ? "audit" : v.uid;
  req.api_version = "admission.k8s.io/v1";
  v.namespace_ = req.namespace_;
  const auto deadline = std::chrono::steady_clock::now() + webhook::kDefaultReviewTimeout;
  const bool pod = req.kind.group.empty() && req.kind.kind == "Pod";
  if (pod && ctx.scheduler_claims != nullptr) ctx.scheduler_claims->NotePod(req.object, req.namespace_);
  if (IsAnnotatedClaim(req.object, req)) {
    // No creator is stored: the claim is kube-scheduler's when its Pod's status says so. A claim
    // that carries the annotation without that proof is judged like any other.
    using Proof = SchedulerClaimIndex::Proof;
    const Proof proof = ctx.scheduler_claims != nullptr ? ctx.scheduler_claims->ProofFor(req.object, req.namespace_)
                                                        : Proof::kNotMade;
    const std::string owner = engine::ControllerPodOf(req.object);
    if (proof == Proof::kMade) {
      v.verdict = Verdict::kExempt;
      v.exemption = "the claim kube-scheduler made for the extended resources of Pod \"" + owner +
                    "\" (KEP-5004), named in its status: the Pod is judged itself";
      return v;
    }
    if (proof == Proof::kPodNotSeen) {
      v.verdict = Verdict::kExempt;
      v.exemption = "claims to be kube-scheduler's for Pod \"" + owner +
                    "\", which was not seen before it (list Pods before ResourceClaims); not verified";
      return v;
    }
  }

  Verdict mutate_verdict = Verdict::kAllow;
  if (pod) {
    webhook::Judgement m =
        ctx.reviewer.Judge(req, admission::WebhookKind::kMutating, ctx.policy, ctx.topology, ctx.now, deadline);
    using Outcome = engine::MutationFacts::Outcome;
    switch (m.mutation.outcome) {
      case Outcome::kUnchanged: break;
      case Outcome::kExempt: v.mutation = MutationOutcome::kExempt; break;
      case Outcome::kConverted: v.mutation = MutationOutcome::kConverted; break;
      case Outcome::kRefused:
      case Outcome::kTemplateMissing:
      case Outcome::kProvisioningFailed:
        v.mutation = MutationOutcome::kRefused;
        v.mutation_reason = m.mutation.outcome == Outcome::kTemplateMissing
                                ? "template " + m.mutation.template_name + " is not in the catalogue"
                                : m.mutation.reason;
        break;
    }
    mutate_verdict = m.decision.verdict;
    AddMutateFindings(m.decision, ctx.registry, v.findings);
    if (mutate_verdict == Verdict::kDeny) {
      v.verdict = Verdict::kDeny;  // the API server stops at the first denial
      return v;
    }
    // /validate sees the Pod as /mutate left it.
    if (mutate_verdict == Verdict::kMutate && !m.decision.response.patch.empty()) {
      req.object = req.object.patch(Json::parse(m.decision.response.patch));
    }
  } else if (ctx.policy.mutation.enabled) {
    // A workload is not mutated, the Pods it creates are: say what /mutate will do to them.
    engine::RuleInput input{req, ctx.policy, ctx.topology, ctx.now};
    const engine::Rule* rule = engine::MutationRule(ctx.registry);
    if (rule != nullptr && !engine::ExemptionFrom(input, ctx.registry, rule->id()).empty()) {
      v.mutation = MutationOutcome::kExempt;
    } else if (rule != nullptr) {
      mutation::ObjectConversion c = mutation::ConvertObject(req.object, req.namespace_, ctx.policy, ctx.topology);
      if (!c.errors.empty()) {
        v.mutation = MutationOutcome::kRefused;
        v.mutation_reason = c.errors.front();
      } else if (c.changed) {
        v.mutation = MutationOutcome::kConverted;
      }
    }
  }

  webhook::Judgement j =
      ctx.reviewer.Judge(req, admission::WebhookKind::kValidating, ctx.policy, ctx.topology, ctx.now, deadline);
  v.exemption = j.result.exemption;
  AddValidateFindings(j.result, ctx.policy, v.findings);
  v.verdict = Rank(mutate_verdict) > Rank(j.decision.verdict) ? mutate_verdict : j.decision.verdict;
  return v;
}

}  // namespace draguard::audit
