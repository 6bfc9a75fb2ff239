#include "draguard/webhook/reviewer.h"

#include <utility>

namespace draguard::webhook {

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
    // Mutation converts legacy requests (see the mutation design); until a conversion applies,
    // the mutating webhook admits unchanged and leaves the decision to /validate.
    response = admission::Allowed();
    out.verdict = "allow";
  }
  response = admission::Complete(std::move(response), req.uid, webhook);
  out.body = admission::EncodeReview(response, req.api_version);
  return out;
}

}  // namespace draguard::webhook
