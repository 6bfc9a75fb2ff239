// The engine: runs every rule over a request and turns findings into an admission decision.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "draguard/admission/response.h"
#include "draguard/admission/review.h"
#include "draguard/engine/registry.h"
#include "draguard/engine/rule.h"
#include "draguard/policy/policy.h"

namespace draguard::engine {

/// One rule's outcome and the action it carries under the current policy.
struct RuleOutcome {
  const Rule* rule = nullptr;
  policy::Action action = policy::Action::kDeny;  ///< effective action (after global mode)
  RuleResult result;
};

/// Result of running the registry over a request.
struct EngineResult {
  std::vector<RuleOutcome> outcomes;  ///< one per rule that is not off or exempted
  std::string exemption;              ///< non-empty when the request is exempt: why
  /// Per-object exception (annotation draguard.io/exempt) in effect: "DG003,DG005 (reason: ...)".
  std::string rule_exemption;
  std::vector<std::string> exempted_rules;  ///< rule IDs skipped because of that exception
  std::vector<std::string> notes;           ///< warnings about the exception itself (expired, ...)
};

/// Annotation that lists the rules an object is exempt from ("DG003,DG005").
inline constexpr const char* kExemptAnnotation = "draguard.io/exempt";
/// Required justification of a draguard.io/exempt exception.
inline constexpr const char* kExemptReasonAnnotation = "draguard.io/exempt-reason";
/// Optional RFC 3339 expiry of a draguard.io/exempt exception.
inline constexpr const char* kExemptUntilAnnotation = "draguard.io/exempt-until";

/// Parses an RFC 3339 timestamp ("2026-01-31T00:00:00Z", offsets and fractions allowed).
std::optional<std::chrono::system_clock::time_point> ParseRfc3339(std::string_view text);

/// Maximum length of a deny message (kubectl shows it on one screen).
inline constexpr std::size_t kMaxDenyMessage = 1024;

/// Runs every enabled rule. A rule that throws is reported as kError (never propagates).
EngineResult Evaluate(const RuleInput& input, const Registry& registry);

/// Why `rule_id` does not apply to the request at all: a policy exemption (namespace, user, group,
/// object selector) or a valid draguard.io/exempt exception naming it; "" when it applies. The
/// mutating webhook uses this with "DG001" to leave exempt Pods untouched.
std::string ExemptionFrom(const RuleInput& input, const Registry& registry, std::string_view rule_id);

/// The admission decision in words, for logs and metrics.
struct Decision {
  admission::AdmissionResponse response;  ///< not yet Complete()d
  std::string verdict;                    ///< "allow", "deny", "warn", "audit" or "exempt"
  std::vector<std::string> denied_rules;  ///< IDs that denied
  std::vector<std::string> warned_rules;  ///< IDs that produced warnings
  std::vector<std::string> audited_rules; ///< IDs recorded only in audit annotations
  std::vector<std::string> error_rules;   ///< IDs that could not evaluate
};

/// Turns rule outcomes into a response: deny findings → 403 with every denying finding (most
/// important rule first), warn → warnings, audit → auditAnnotations; rule errors follow
/// policy.rule_errors. Pure function.
Decision Decide(const EngineResult& result, const policy::Policy& policy);

}  // namespace draguard::engine
