// The audit's one judgement: a stored object judged as a CREATE in its namespace, by the
// webhook's own decision step (webhook::Reviewer::Judge), /mutate first and then /validate as the
// API server chains them. Used by `draguard audit` and by the background audit in `serve`.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "draguard/admission/review.h"
#include "draguard/engine/engine.h"
#include "draguard/policy/policy.h"
#include "draguard/webhook/reviewer.h"

namespace draguard::topology {
class Snapshot;
}  // namespace draguard::topology

namespace draguard::audit {

/// A kind the audit judges: the kinds the chart registers the webhooks for.
struct AuditedKind {
  std::string group;     ///< "" for the core group
  std::string version;   ///< preferred version to list ("" for custom resources: discovered)
  std::string kind;      ///< "Pod"
  std::string resource;  ///< plural resource name ("pods")
};

/// Pods, the built-in workloads, ResourceClaims, ResourceClaimTemplates and the custom resources
/// of policy.customResources, in that order.
std::vector<AuditedKind> AuditedKinds(const policy::Policy& policy);

/// True when objects of `group`/`kind` are judged (any version).
bool IsAudited(std::string_view group, std::string_view kind, const policy::Policy& policy);

/// One finding as the webhook acts on it.
struct Finding {
  std::string rule;     ///< "DG001"
  std::string name;     ///< "legacy-gpu-resource"
  std::string action;   ///< deny | warn | audit (after the global mode) or error
  std::string message;  ///< what is wrong
  std::string fix;      ///< how to fix it ("" when the rule gives none)
  std::string path;     ///< JSON Pointer into the object ("" when none)
};

/// What /mutate would do to the object.
enum class MutationOutcome : uint8_t {
  kNone,       ///< nothing to convert (or mutation off, or not a pod-bearing object)
  kConverted,  ///< /mutate converts it (for workloads: converts the Pods they create)
  kRefused,    ///< it cannot be converted; `mutation_reason` says why
  kExempt,     ///< exempt from conversion
};

/// "none", "converted", "refused" or "exempt".
const char* MutationOutcomeName(MutationOutcome outcome);

/// The verdict on one object.
struct ObjectVerdict {
  std::string api_version;  ///< as written
  std::string kind;         ///< "Deployment"
  std::string namespace_;   ///< metadata.namespace or the default namespace
  std::string name;         ///< metadata.name, else generateName
  std::string uid;          ///< metadata.uid when present (cluster objects)
  engine::Verdict verdict = engine::Verdict::kAllow;  ///< what the webhook would answer
  std::string exemption;    ///< why the object is exempt (verdict exempt)
  std::vector<Finding> findings;
  MutationOutcome mutation = MutationOutcome::kNone;
  std::string mutation_reason;  ///< kRefused: why
};

/// What the audit knows of the claims kube-scheduler made for legacy Pods (KEP-5004). A stored
/// claim records no creator, so the proof is the Pod's status: kube-scheduler names its claim in
/// status.extendedResourceClaimStatus.resourceClaimName, which only components that may write
/// pods/status can set. JudgeObject notes every Pod it judges and asks about every claim with the
/// extended-resource annotation; Pods are judged first in a cluster (AuditedKinds) and should come
/// first in a dump. At most kMaxPods Pods are remembered (a few dozen bytes each). Not thread-safe.
class SchedulerClaimIndex {
 public:
  /// Pods remembered at most; later Pods are not (their claims are then reported as unverified).
  static constexpr std::size_t kMaxPods = 1000000;

  /// What the Pods seen so far say about one claim.
  enum class Proof : uint8_t {
    kMade,        ///< its controller Pod names it in its status: the scheduler made it
    kNotMade,     ///< its controller Pod was seen and does not name it (or it has no controller Pod)
    kPodNotSeen,  ///< its controller Pod is not (yet) known
  };

  /// Remembers a stored Pod (namespace, name) and the claim its status names, if any.
  void NotePod(const admission::Json& pod, std::string_view default_namespace);
  /// The proof for `claim` (a stored ResourceClaim in `namespace_`).
  Proof ProofFor(const admission::Json& claim, std::string_view namespace_) const;
  /// Pods remembered.
  std::size_t size() const { return pods_.size(); }

 private:
  // Hash of "namespace/pod" -> hash of the claim name its status names (0: none).
  std::unordered_map<std::uint64_t, std::uint64_t> pods_;
};

/// Everything a judgement needs; all references must outlive the calls.
struct JudgeContext {
  const webhook::Reviewer& reviewer;   ///< built on `registry`, without a provisioner
  const engine::Registry& registry;
  const policy::Policy& policy;
  const topology::Snapshot* topology = nullptr;
  std::chrono::system_clock::time_point now{};  ///< evaluation time (exception expiry)
  std::string default_namespace = "default";    ///< for objects without metadata.namespace
  /// The Pods judged so far, the proof for kube-scheduler's claims; null = no proof (every
  /// annotated claim is judged like any other).
  SchedulerClaimIndex* scheduler_claims = nullptr;
};

/// Judges `object` (an audited kind; see IsAudited) as a CREATE: a Pod goes through /mutate and,
/// when converted, its patched form through /validate; every other kind through /validate, plus
/// what /mutate would do to the Pods it creates. Pure apart from the reviewer (no provisioner, so
/// no I/O); rule exceptions are contained by the engine, anything else throws std::exception.
ObjectVerdict JudgeObject(admission::Json object, const JudgeContext& ctx);

}  // namespace draguard::audit
