// The engine: runs every rule over a request and turns findings into an admission decision.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "draguard/admission/response.h"
#include "draguard/admission/review.h"
#include "draguard/engine/exceptions.h"
#include "draguard/engine/registry.h"
#include "draguard/engine/rule.h"
#include "draguard/engine/scheduler_claims.h"
#include "draguard/engine/shape.h"
#include "draguard/policy/policy.h"

namespace draguard::engine {

/// One rule's outcome and the action it carries under the current policy.
struct RuleOutcome {
  const Rule* rule = nullptr;
  policy::Action action = policy::Action::kDeny;  ///< the rule's action in the policy (before the global mode)
  RuleResult result;
};

/// Result of running the registry over a request.
struct EngineResult {
  std::vector<RuleOutcome> outcomes;  ///< one per rule that is not off or exempted
  std::string exemption;              ///< non-empty when the request is exempt: why
  /// Per-object exceptions in effect (policy `exceptions`, allowed draguard.io/exempt annotations),
  /// "; "-joined records: `DG001 (exception "bench": vendor benchmark)`.
  std::string rule_exemption;
  std::vector<std::string> exempted_rules;  ///< rule IDs skipped because of those exceptions
  std::vector<std::string> notes;           ///< exceptions not applied and why (expired, not allowed, ...)
  /// Values of the wrong type where the policy configures a custom resource's pod templates or
  /// containers (CustomResourceShapeErrors), prefixed with the object: deny in enforce mode.
  std::vector<std::string> shape_errors;
  /// Rules that could not finish because the review's CEL budget (cost or deadline) ran out:
  /// Decide denies for them in enforce mode whatever ruleErrors says, and warns in audit mode.
  std::vector<std::string> budget_rules;
  /// Whether the object is a claim carrying kube-scheduler's extended-resource annotation, and
  /// who made it (ClassifySchedulerClaim): kScheduler is admitted as exempt.
  SchedulerClaim scheduler_claim = SchedulerClaim::kNone;
};

/// RFC 3339 timestamps (policy::ParseRfc3339).
using policy::ParseRfc3339;


/// Runs every enabled rule. A rule that throws is reported as kError (never propagates).
EngineResult Evaluate(const RuleInput& input, const Registry& registry);

/// Why `rule_id` does not apply to the request at all: a policy exemption (namespace, user, group,
/// object selector) or an exception in effect naming it (DecideExceptions); "" when it applies. The
/// mutating webhook uses this with MutationRule() to leave exempt Pods untouched.
std::string ExemptionFrom(const RuleInput& input, const Registry& registry, std::string_view rule_id);

/// Closed vocabulary of admission verdicts (logs, metrics, the "decision" audit annotation).
enum class Verdict : uint8_t {
  kAllow,   ///< admitted, nothing to report
  kDeny,    ///< refused
  kWarn,    ///< admitted with warnings
  kAudit,   ///< admitted; findings recorded only in audit annotations
  kExempt,  ///< admitted without evaluation (exemption)
  kMutate,  ///< admitted with a patch (/mutate)
  kError,   ///< not reviewed: the request was malformed or the review failed internally
};

/// "allow", "deny", "warn", "audit", "exempt", "mutate" or "error": the one spelling of a verdict.
const char* VerdictName(Verdict verdict);

/// The admission decision in words, for logs and metrics.
struct Decision {
  admission::AdmissionResponse response;  ///< not yet Complete()d
  Verdict verdict = Verdict::kAllow;
  std::vector<std::string> denied_rules;  ///< IDs that denied
  std::vector<std::string> warned_rules;  ///< IDs that produced warnings
  std::vector<std::string> audited_rules; ///< IDs recorded only in audit annotations
  std::vector<std::string> error_rules;   ///< IDs that could not evaluate
};

/// The action a rule configured with `action` takes under the policy's global mode: audit mode
/// turns deny into audit. The only place the mode changes an action.
policy::Action ModeAction(policy::Action action, const policy::Policy& policy);

/// Turns rule outcomes into a response: deny findings → 403 with every denying finding (most
/// important rule first), warn → warnings, audit → auditAnnotations; rule errors follow
/// policy.rule_errors; the global mode applies (ModeAction). Shape errors of a custom resource
/// deny in enforce mode (after any rule's message) and warn in audit mode; both record them in the
/// `custom-resource-shape` audit annotation. Pure function.
Decision Decide(const EngineResult& result, const policy::Policy& policy);

/// The rule /mutate stands in for (DG001 legacy-gpu-resource): a Pod the webhook cannot convert
/// is judged under that rule's action. Null when `registry` lacks it.
const Rule* MutationRule(const Registry& registry);

/// What /mutate found out about one request: the input of DecideMutation. Gathered by the
/// webhook (conversion, template provisioning), so the engine needs no mutation types.
struct MutationFacts {
  /// What happened to the request.
  enum class Outcome : uint8_t {
    kUnchanged,           ///< nothing to convert (not a Pod CREATE, mutation off, no legacy requests)
    kExempt,              ///< exempt from the mutation rule; `reason` says why
    kConverted,           ///< converted: `summary`, `warnings` and `patch` are set
    kRefused,             ///< cannot be converted; `reason` says why
    kTemplateMissing,     ///< mutation.templates is reference and the catalogue lacks `template_name`
    kProvisioningFailed,  ///< `template_name` could not be ensured through the API; `reason` says why
  };
  Outcome outcome = Outcome::kUnchanged;
  std::string reason;                ///< see Outcome
  std::string template_name;         ///< the template concerned ("ml/draguard-…" when provisioning)
  std::string template_description;  ///< kTemplateMissing: the profile in words
  std::string summary;               ///< kConverted: one line for logs and audit annotations
  std::vector<std::string> warnings; ///< kConverted: adjustments worth a warning
  std::string patch;                 ///< kConverted: RFC 6902 operations (JSON text)
};

/// The /mutate decision, judged under MutationRule(registry). Converted → mutate (patch, warnings),
/// or in audit mode audit (no patch, a warning saying what would have changed); exempt → exempt;
/// a refusal, a missing catalogue template or a provisioning failure → deny when the rule denies
/// in enforce mode, else a warning. Without the rule in `registry` the request is admitted
/// unchanged. A mutate verdict is carried out by ensuring the templates exist; when that fails the
/// caller decides again with the failure as the facts. Pure function.
Decision DecideMutation(const MutationFacts& facts, const Registry& registry, const policy::Policy& policy);

}  // namespace draguard::engine
