#include "draguard/engine/rule.h"

#include <utility>

#include "draguard/dra/pod_specs.h"

namespace draguard::engine {

const char* RuleStatusName(RuleStatus status) {
  switch (status) {
    case RuleStatus::kPass: return "pass";
    case RuleStatus::kFail: return "fail";
    case RuleStatus::kSkip: return "skip";
    case RuleStatus::kError: return "error";
  }
  return "unknown";
}

const dra::PodObjects& PodObjectsOf(const RuleInput& input, dra::PodObjects& scratch) {
  if (input.pod_objects != nullptr) return *input.pod_objects;
  scratch = dra::FindPodObjects(input.request, input.policy);
  return scratch;
}

policy::Action EffectiveAction(policy::Action rule_action, const Finding& finding) {
  // Enum order is deny < warn < audit < off, i.e. decreasing severity.
  if (!finding.cap) return rule_action;
  return static_cast<int>(*finding.cap) > static_cast<int>(rule_action) ? *finding.cap : rule_action;
}

RuleResult Pass() { return RuleResult{}; }

RuleResult Skip() {
  RuleResult r;
  r.status = RuleStatus::kSkip;
  return r;
}

RuleResult Error(std::string message) {
  RuleResult r;
  r.status = RuleStatus::kError;
  r.error = std::move(message);
  return r;
}

RuleResult Fail(std::vector<Finding> findings) {
  RuleResult r;
  if (findings.empty()) return r;
  r.status = RuleStatus::kFail;
  r.findings = std::move(findings);
  return r;
}

}  // namespace draguard::engine
