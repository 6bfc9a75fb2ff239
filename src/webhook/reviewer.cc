#include "draguard/webhook/reviewer.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <utility>

#include "draguard/mutation/mutation.h"

namespace draguard::webhook {

admission::AdmissionResponse Reviewer::Mutate(const admission::AdmissionRequest& req, const policy::Policy& policy,
                                              const topology::Snapshot* topology,
                                              std::chrono::system_clock::time_point now, ReviewOutcome* out) const {
  admission::AdmissionResponse response = admission::Allowed();
  out->verdict = "allow";
  if (!policy.mutation.enabled || !req.kind.group.empty() || req.kind.kind != "Pod" || !req.sub_resource.empty() ||
      req.operation != admission::Operation::kCreate) {
    return response;
  }
  engine::RuleInput input{req, policy, topology, now};
  if (std::string why = engine::ExemptionFrom(input, registry_, "DG001"); !why.empty()) {
    admission::AddAuditAnnotation(response, "mutation", "not converted: exempt (" + why + ")");
    out->verdict = "exempt";
    return response;
  }
  mutation::PodConversion conv = mutation::ConvertPod(req.object, req.namespace_, policy, topology);
  if (conv.outcome == mutation::PodConversion::Outcome::kUnchanged) return response;

  // A failure denies only when enforcing DG001 (the rule the conversion stands in for).
  const bool enforce = policy.mode == policy::Mode::kEnforce &&
                       policy.ActionFor("DG001", policy::Action::kDeny) == policy::Action::kDeny;
  auto fail = [&](const std::string& message) {
    const std::string text = "DG001 legacy-gpu-resource: " + message;
    out->rules = {"DG001"};
    if (enforce) {
      out->verdict = "deny";
      return admission::Denied(text);
    }
    admission::AdmissionResponse r = admission::Allowed();
    admission::AddWarning(r, text);
    admission::AddAuditAnnotation(r, "mutation", text);
    out->verdict = "warn";
    return r;
  };
  if (conv.outcome == mutation::PodConversion::Outcome::kRefused) {
    return fail("the Pod's legacy GPU requests cannot be converted to DRA: " + conv.reason);
  }
  if (policy.mode == policy::Mode::kAudit) {
    admission::AddWarning(response, "audit mode: draguard would have " + conv.summary);
    admission::AddAuditAnnotation(response, "mutation", "would have " + conv.summary);
    out->verdict = "audit";
    out->rules = {"DG001"};
    return response;
  }
  if (policy.mutation.templates == policy::TemplateMode::kReference) {
    std::set<std::string> catalogue;
    for (const auto& t : mutation::RenderCatalogue(policy, topology, req.namespace_)) catalogue.insert(t.name);
    for (const auto& t : conv.templates) {
      if (!catalogue.count(t.name)) {
        return fail("mutation.templates is reference and the catalogue has no template for " + t.description + " (" +
                    t.name + "). Fix: add the profile to mutation.catalogue and apply `draguard render`");
      }
    }
  } else if (!req.dry_run && provisioner_ != nullptr) {
    // One deadline for all the templates of this review.
    const auto budget = std::chrono::milliseconds(policy.mutation.api_timeout_ms);
    const auto start = std::chrono::steady_clock::now();
    for (const auto& t : conv.templates) {
      auto left = budget - std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
      if (left <= std::chrono::milliseconds(0)) {
        return fail("could not ensure ResourceClaimTemplate " + req.namespace_ + "/" + t.name + ": timeout after " +
                    std::to_string(budget.count()) + "ms (mutation.apiTimeoutMs)");
      }
      if (Status s = provisioner_->Ensure(req.namespace_, t, left); !s.ok()) {
        return fail("could not ensure ResourceClaimTemplate " + req.namespace_ + "/" + t.name + ": " + s.message());
      }
    }
  }
  admission::SetPatch(response, conv.patch.dump());
  for (const auto& w : conv.warnings) admission::AddWarning(response, "draguard: " + w);
  admission::AddAuditAnnotation(response, "mutation", conv.summary);
  out->verdict = "mutate";
  return response;
}

Reviewer::Reviewer(const engine::Registry& registry, admission::DecodeLimits limits,
                   mutation::TemplateProvisioner* provisioner)
    : registry_(registry), limits_(limits), provisioner_(provisioner) {}

ReviewOutcome Reviewer::Review(std::string_view body, admission::WebhookKind webhook,
                               const policy::Policy& policy, const topology::Snapshot* topology,
                               std::chrono::system_clock::time_point now) const {
  ReviewOutcome out;
  auto decoded = admission::DecodeReview(body, limits_);
  if (!decoded.ok()) {
    const Status& st = decoded.status();
    out.http_status = st.code() == StatusCode::kResourceExhausted && body.size() > limits_.max_bytes
                          ? 413
                          : 400;
    out.error = st.message();
    out.verdict = "error";
    out.body = admission::EncodeHttpError(out.http_status, "invalid AdmissionReview: " + st.message());
    return out;
  }
  const admission::AdmissionRequest& req = *decoded;
  out.uid = req.uid;
  out.kind = req.kind.kind;
  out.namespace_ = req.namespace_;
  out.name = req.name;
  out.operation = admission::OperationName(req.operation);
  out.user = req.user_info.username;
  out.dry_run = req.dry_run;

  admission::AdmissionResponse response;
  if (webhook == admission::WebhookKind::kValidating) {
    engine::RuleInput input{req, policy, topology, now};
    engine::EngineResult result = engine::Evaluate(input, registry_);
    engine::Decision decision = engine::Decide(result, policy);
    for (const auto& o : result.outcomes) {
      out.rule_metrics.push_back({std::string(o.rule->id()), policy::ActionName(o.action),
                                  engine::RuleStatusName(o.result.status)});
    }
    out.verdict = decision.verdict;
    for (const auto* list : {&decision.denied_rules, &decision.warned_rules,
                             &decision.audited_rules}) {
      out.rules.insert(out.rules.end(), list->begin(), list->end());
    }
    response = std::move(decision.response);
  } else {
    response = Mutate(req, policy, topology, now, &out);
  }
  response = admission::Complete(std::move(response), req.uid, webhook);
  out.body = admission::EncodeReview(response, req.api_version);
  return out;
}

}  // namespace draguard::webhook
