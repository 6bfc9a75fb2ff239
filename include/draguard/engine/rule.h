// Rules: the unit of policy. Each rule is a pure function of (request, policy, topology).
//
// A rule reads the AdmissionRequest, the Policy snapshot and the topology snapshot and returns
// findings. It does no I/O, reads no clock (the time arrives in RuleInput) and touches no globals.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "draguard/admission/review.h"
#include "draguard/policy/policy.h"

namespace draguard::topology {
class Snapshot;
}  // namespace draguard::topology

namespace draguard::cel {
class Budget;
}  // namespace draguard::cel

namespace draguard::dra {
struct PodObjects;
class ClaimCatalog;
}  // namespace draguard::dra

namespace draguard::engine {

/// Closed vocabulary of rule outcomes.
enum class RuleStatus {
  kPass,   ///< evaluated, nothing wrong
  kFail,   ///< evaluated, at least one finding
  kSkip,   ///< not applicable to this request
  kError,  ///< could not evaluate; the policy's ruleErrors setting decides
};

/// "pass", "fail", "skip" or "error".
const char* RuleStatusName(RuleStatus status);

/// One violation: where it is and how to fix it.
struct Finding {
  std::string pointer;  ///< RFC 6901 JSON Pointer into the reviewed object
  std::string message;  ///< what is wrong, naming the container / field
  std::string fix;      ///< how to fix it
  /// The most severe action this finding may take (deny > warn > audit). Unset: the rule's
  /// action. A rule sets `kWarn` for findings that must never deny (e.g. DG001 on a workload
  /// whose Pods mutation will convert); a rule configured as audit or off stays audit or off.
  std::optional<policy::Action> cap;
};

/// The action a finding takes under `rule_action`: the less severe of the two.
policy::Action EffectiveAction(policy::Action rule_action, const Finding& finding);

/// What a rule returns.
struct RuleResult {
  RuleStatus status = RuleStatus::kPass;
  std::vector<Finding> findings;  ///< non-empty iff status == kFail
  std::string error;              ///< set iff status == kError
};

/// Everything a rule may look at.
struct RuleInput {
  const admission::AdmissionRequest& request;
  const policy::Policy& policy;
  const topology::Snapshot* topology = nullptr;  ///< may be null (no topology loaded)
  std::chrono::system_clock::time_point now{};   ///< evaluation time, for expiring exceptions
  /// The review's deadline: CEL evaluation stops there (Evaluate folds it into `cel_budget`).
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  /// The review's CEL budget, shared by every rule that evaluates selectors; Evaluate sets it
  /// (from policy.celCostPerReview and `deadline`) when the caller does not.
  cel::Budget* cel_budget = nullptr;
  /// The request's pod objects (dra::FindPodObjects), found once per review by Evaluate; null
  /// when a rule is called on its own (PodObjectsOf then finds them).
  const dra::PodObjects* pod_objects = nullptr;
  /// The server's watch cache of the ResourceClaimTemplates and ResourceClaims Pods reference;
  /// null when API access is off (or offline). Pod rules read what they cannot see in the Pod there.
  const dra::ClaimCatalog* claims = nullptr;
  /// With mutation on, the workload's pod templates (by the JSON Pointer of their spec) whose Pods
  /// /mutate would refuse to convert, with why (mutation::TemplateRefusals, gathered by the
  /// webhook); null when not known. DG001 denies those templates instead of warning.
  const std::map<std::string, std::string>* template_refusals = nullptr;
};

/// The pod objects of `input`'s request: input.pod_objects when set, else found into `scratch`.
const dra::PodObjects& PodObjectsOf(const RuleInput& input, dra::PodObjects& scratch);

/// A policy rule with a stable ID.
class Rule {
 public:
  virtual ~Rule() = default;
  /// Stable ID, e.g. "DG001".
  virtual std::string_view id() const = 0;
  /// Stable kebab-case name, e.g. "legacy-gpu-resource".
  virtual std::string_view name() const = 0;
  /// Action used when the policy does not override it.
  virtual policy::Action default_action() const = 0;
  /// Evaluates the rule. Must not throw.
  virtual RuleResult Evaluate(const RuleInput& input) const = 0;
};

/// Helpers for building results.
RuleResult Pass();
RuleResult Skip();
RuleResult Error(std::string message);
RuleResult Fail(std::vector<Finding> findings);

}  // namespace draguard::engine
