// Reviewer: the transport-independent core of /validate and /mutate.
//
// Takes a request body and the current snapshots, returns the HTTP status and JSON body to send,
// plus what the decision log and metrics need. Used by the server and by `draguard review`, so
// both answer byte-for-byte the same.
#pragma once

#include <chrono>
#include <memory>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "draguard/admission/codec.h"
#include "draguard/admission/response.h"
#include "draguard/dra/claim_catalog.h"
#include "draguard/engine/engine.h"
#include "draguard/mutation/mutation.h"
#include "draguard/mutation/provisioner.h"
#include "draguard/policy/policy.h"

namespace draguard::webhook {

/// Deadline of a review that no transport bounds (`draguard review`), and the server's default.
inline constexpr std::chrono::milliseconds kDefaultReviewTimeout{10000};

/// One rule's contribution, for draguard_rule_results_total: views of names that live as long
/// as the rule registry.
struct RuleMetric {
  std::string_view rule;    ///< "DG001"
  std::string_view action;  ///< effective action
  std::string_view result;  ///< pass | fail | skip | error
  /// The three as one dense number, for a metrics::CounterTable: the rule's position in the
  /// registry × kRuleMetricKeysPerRule + action × 4 + result (kNoRuleMetricKey when unknown).
  std::size_t key = 0;
};

/// Keys of RuleMetric::key per rule (4 actions × 4 results).
inline constexpr std::size_t kRuleMetricKeysPerRule = 16;
/// RuleMetric::key of a rule outside the registry: past every table.
inline constexpr std::size_t kNoRuleMetricKey = static_cast<std::size_t>(-1);

/// How /mutate ended for one request, the `reason` label of draguard_mutate_conversions_total: a
/// closed set, so request content cannot mint series (the refusal's text goes to the log).
enum class ConversionReason : uint8_t {
  kNotApplicable,       ///< not counted: /validate, no mutation rule, mutation off, or not a Pod CREATE
  kUnchanged,           ///< a Pod CREATE with nothing to convert (no legacy GPU requests)
  kExempt,              ///< exempt from the mutation rule
  kConverted,           ///< converted (also in audit mode, where the patch is not applied)
  kUnsupportedRequest,  ///< refused: the legacy requests have no claim profile
  kNotPlaceable,        ///< refused: no template can place the devices
  kTemplateMissing,     ///< refused: reference mode and the catalogue lacks the template
  kProvisioningFailed,  ///< refused: a template could not be created through the API
};

/// Number of ConversionReason values (a table index bound).
inline constexpr std::size_t kConversionReasons = 8;

/// The label of `reason`: "not-applicable", "unchanged", "exempt", "converted",
/// "unsupported-request", "not-placeable", "template-missing" or "provisioning-failed".
std::string_view ConversionReasonName(ConversionReason reason);

/// The reason of a /mutate review whose facts are `facts` and whose conversion, when one ran,
/// refused at `refusal` (kNone otherwise). Pure function.
ConversionReason ConversionReasonOf(const engine::MutationFacts& facts,
                                    mutation::PodConversion::Refusal refusal);

/// Everything the server needs to answer and to record one review.
struct ReviewOutcome {
  int http_status = 200;            ///< 200; 400/413 for requests that could not be reviewed; 500 when the
                                    ///< review failed internally (the body still echoes the uid)
  std::string body;                 ///< JSON body to send
  std::string error;                ///< why the request could not be reviewed ("" when reviewed)
  // Request facts, for the decision log (empty when decoding failed), each capped at
  // kMaxEchoBytes (draguard/truncate.h).
  std::string uid, kind, namespace_, name, operation, user;
  /// The kind as a metric label, from a closed set: a built-in workload kind, Pod, PodTemplate,
  /// ResourceClaim(Template), a custom resource kind of the policy, else "other".
  std::string kind_label;
  bool dry_run = false;
  engine::Verdict verdict = engine::Verdict::kAllow;  ///< printed with engine::VerdictName
  std::vector<std::string> rules;   ///< IDs that denied, warned or were audited
  std::vector<RuleMetric> rule_metrics;
  /// /mutate: how the conversion ended (kNotApplicable for /validate and for requests not judged).
  ConversionReason conversion = ConversionReason::kNotApplicable;
  /// /validate: whether the object was a claim carrying kube-scheduler's extended-resource
  /// annotation, and who made it (kNone otherwise).
  engine::SchedulerClaim scheduler_claim = engine::SchedulerClaim::kNone;
};

/// What the webhook decides about one decoded request, with the facts behind the decision.
struct Judgement {
  engine::EngineResult result;     ///< /validate: every rule's outcome (empty for /mutate)
  engine::MutationFacts mutation;  ///< /mutate: what the conversion found (kUnchanged for /validate)
  engine::Decision decision;       ///< the decision the webhook answers with
  ConversionReason conversion = ConversionReason::kNotApplicable;  ///< /mutate: how the conversion ended
};

/// Whether reviewing `body` may evaluate CEL (whose cost only the review's budget bounds): true for
/// ResourceClaims and ResourceClaimTemplates, the only objects whose rules evaluate selectors.
/// The API server writes request.kind as plain JSON, so the kind's name appears literally in such
/// a body; any other body that contains `"ResourceClaim` is answered true as well. The rules of
/// everything else take time linear in the body.
bool MayEvaluateCel(std::string_view body);

/// Reviews AdmissionReview bodies against a rule registry. Immutable; thread-safe.
class Reviewer {
 public:
  /// `registry` (and `provisioner`, when set) must outlive the reviewer. Without a provisioner,
  /// /mutate converts Pods but creates no templates (they must exist already, e.g. `render`ed).
  /// `claims`, when set, is the watch cache of claims and templates the Pod rules read (DG015,
  /// DG016) and must outlive the reviewer; null = none (API access off, or offline).
  explicit Reviewer(const engine::Registry& registry, admission::DecodeLimits limits = {},
                    mutation::TemplateProvisioner* provisioner = nullptr,
                    const dra::ClaimCatalog* claims = nullptr);

  /// Decodes, evaluates, decides and encodes one review. `deadline` bounds the whole review: the
  /// template provisioning of /mutate gets what is left of it (at most mutation.apiTimeoutMs). An
  /// exception after decoding is answered 500 with an AdmissionReview that echoes the uid.
  /// `readable_past_end`: bytes after `body` that may be read (admission::DecodeReview).
  ReviewOutcome Review(std::string_view body, admission::WebhookKind webhook,
                       const policy::Policy& policy, const topology::Snapshot* topology,
                       std::chrono::system_clock::time_point now,
                       std::chrono::steady_clock::time_point deadline, std::size_t readable_past_end = 0) const;

  /// How many RuleMetric keys this reviewer's rules use (keys are below this number).
  std::size_t RuleMetricKeys() const { return registry_.rules().size() * kRuleMetricKeysPerRule; }

  /// The decision step of Review for an already decoded request (Review uses it; so does the
  /// audit, which judges stored objects as CREATEs). May throw; Review contains it.
  Judgement Judge(const admission::AdmissionRequest& req, admission::WebhookKind webhook,
                  const policy::Policy& policy, const topology::Snapshot* topology,
                  std::chrono::system_clock::time_point now,
                  std::chrono::steady_clock::time_point deadline) const;

 private:
  // The /mutate path: gathers the facts (conversion, templates) into `facts` and lets the engine decide.
  // `conversion` receives how the conversion ended.
  engine::Decision Mutate(const admission::AdmissionRequest& req, const policy::Policy& policy,
                          const topology::Snapshot* topology,
                          std::chrono::system_clock::time_point now,
                          std::chrono::steady_clock::time_point deadline, engine::MutationFacts& facts,
                          ConversionReason& conversion) const;
  // Makes the templates (and ComputeDomains) of a converted Pod exist; returns the failure as
  // facts, or nullopt.
  std::optional<engine::MutationFacts> EnsureTemplates(const admission::AdmissionRequest& req,
                                                       const mutation::PodConversion& conv,
                                                       const policy::Policy& policy,
                                                       const topology::Snapshot* topology,
                                                       std::chrono::steady_clock::time_point deadline) const;

  const engine::Registry& registry_;
  admission::DecodeLimits limits_;
  mutation::TemplateProvisioner* provisioner_ = nullptr;
  const dra::ClaimCatalog* claims_ = nullptr;
  // The decoder's parser buffers, shared by the reviews running at once (thread-safe).
  std::shared_ptr<const admission::DecodePool> decode_pool_ = std::make_shared<admission::DecodePool>();
};

}  // namespace draguard::webhook
