// Mutation: converts legacy GPU requests (nvidia.com/gpu, nvidia.com/mig-<profile>,
// nvidia.com/gpu.shared, HAMi's gpumem) of a Pod into generated, topology-aligned DRA
// ResourceClaimTemplates (one per converted container) referenced from spec.resourceClaims, and
// computes the RFC 6902 patch.
//
// Everything here is a pure function of (object, namespace, policy, topology snapshot): no I/O,
// no clock. Creating the templates is the provisioner's job (provisioner.h). See docs/mutation.md
// for the alignment algorithm.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "draguard/admission/review.h"
#include "draguard/policy/policy.h"
#include "draguard/status.h"

namespace draguard::topology {
class Snapshot;
}  // namespace draguard::topology

namespace draguard::mutation {

/// Pod annotation: memory floor per full GPU, a quantity ("80G", "40Gi").
inline constexpr std::string_view kMemoryAnnotation = "draguard.io/gpu-memory";
/// Pod annotation: productName to select ("NVIDIA H100 80GB HBM3").
inline constexpr std::string_view kProductAnnotation = "draguard.io/gpu-product";
/// Pod annotation: "rdma" adds an RDMA NIC request aligned with the GPUs; "none" suppresses it.
inline constexpr std::string_view kNicAnnotation = "draguard.io/nic";
/// Pod annotation: the weakest GPU placement accepted ("auto" = "numa", "nvlink", "pcie", "numa";
/// "any" = "auto"); overrides mutation.interconnect.
inline constexpr std::string_view kInterconnectAnnotation = "draguard.io/interconnect";
/// Pod annotation: MPS defaultActiveThreadPercentage for nvidia.com/gpu.shared.
inline constexpr std::string_view kMpsThreadsAnnotation = "draguard.io/mps-active-thread-percentage";
/// Pod annotation: MPS defaultPinnedDeviceMemoryLimit for nvidia.com/gpu.shared.
inline constexpr std::string_view kMpsMemoryAnnotation = "draguard.io/mps-pinned-memory";
/// Annotation on generated templates: the profile in words.
inline constexpr std::string_view kProfileAnnotation = "draguard.io/profile";
/// Prefix of generated template names and of the Pod claim names draguard adds.
inline constexpr std::string_view kNamePrefix = "draguard-";

/// What one converted container asks for.
struct RequestProfile {
  /// Full GPUs, one MIG profile, or an MPS-shared GPU.
  enum class Kind : uint8_t { kGpu, kMig, kShared };
  Kind kind = Kind::kGpu;
  int64_t count = 1;               ///< devices
  std::string mig_profile;         ///< kMig: "3g.40gb"
  std::string memory;              ///< kGpu/kShared: floor as requested ("80G"); empty = none
  std::string product;             ///< productName to select; empty = any
  bool latency_sensitive = false;  ///< the Pod is in the latency-sensitive class
  int64_t mps_threads = 0;         ///< kShared: defaultActiveThreadPercentage
  std::string mps_memory;          ///< kShared: defaultPinnedDeviceMemoryLimit
  /// kGpu with mutation.cpu: whole CPUs requested in the same claim as request "cpu", on the
  /// GPUs' NUMA node; 0 = none (the kubelet places the container's CPUs).
  int64_t cpus = 0;
  /// kGpu: the DeviceClass of the request when the Pod named one by its implicit extended-resource
  /// name (deviceclass.resource.kubernetes.io/<class>); empty = the policy's first GPU class.
  std::string device_class;
  bool operator==(const RequestProfile&) const = default;
};

/// The claim profile of one Pod: one request per converted container, plus NIC and interconnect.
struct ClaimProfile {
  /// One converted container: its request name in the template and what it needs.
  struct Entry {
    std::string request;      ///< request name in the template: "gpu", "gpu-1", ... by position
    RequestProfile profile;   ///< what it asks for
  };
  std::vector<Entry> entries;
  bool nic = false;           ///< add an RDMA NIC request next to every full-GPU entry
  std::string interconnect;   ///< "" (= the policy's), "auto", "nvlink", "pcie", "numa" or "any"
  std::vector<std::string> notes;  ///< what the conversion dropped or adjusted, for warnings
};

/// How the generated template places a request's devices.
enum class Placement : uint8_t {
  kNone,         ///< one device, or alignment not applicable (MIG without topology, ...)
  kPcieRoot,     ///< matchAttribute resource.kubernetes.io/pcieRoot
  kNuma,         ///< firstAvailable alternatives restricted to the roots of one NUMA node
  kNvlink,       ///< pairwise NVLink-connected GPUs (NVSwitch shapes, or cliques by pciBusID)
  kUnaligned,    ///< no node can align it; admitted because the policy allows it
};

/// The CPU request that goes with GPU request `gpu_request` of a generated template (mutation.cpu):
/// "cpu" for "gpu", "cpu-1" for "gpu-1".
std::string CpuRequestName(std::string_view gpu_request);

/// "none", "pcieRoot", "numa", "nvlink" or "unaligned".
const char* PlacementName(Placement placement);

/// A ResourceClaimTemplate draguard generated.
struct GeneratedTemplate {
  std::string name;          ///< "draguard-<20 hex digits>", a hash of the template's content
  std::string description;   ///< the profile in words ("2x full GPU >= 80G, same PCIe root as 1 RDMA NIC")
  admission::Json object;    ///< complete resource.k8s.io/v1 ResourceClaimTemplate (namespace set)
  std::vector<Placement> placements;  ///< per entry of the claim profile
  /// The nodes a Pod using the template must be restricted to, by name (ascending): shape
  /// restrictions covering at most mutation.hostnameAffinityLimit nodes. Empty with empty
  /// `shapes` = no restriction.
  std::vector<std::string> nodes;
  /// The shape fingerprints (label draguard.io/topology-shape) a Pod must be restricted to
  /// (ascending); used when `nodes` is empty.
  std::vector<std::string> shapes;
  std::vector<std::string> notes;  ///< adjustments worth a warning (memory floor lowered, ...)
  /// Containers reference the whole claim (no `request`): rails, whose GPU and NIC requests are
  /// "gpu-rail-<i>" and "gpu-rail-<i>-nic". Otherwise they reference request "gpu".
  bool whole_claim = false;
};

/// Builds the template for `profile` in `namespace_name` ("" = no namespace, for `render`).
/// Fails (InvalidArgument / FailedPrecondition) with a message that explains why, e.g. when no
/// node can align the devices and the policy does not allow unaligned placement.
Result<GeneratedTemplate> GenerateTemplate(const ClaimProfile& profile, std::string_view namespace_name,
                                           const policy::Policy& policy, const topology::Snapshot* topology);

/// The templates of policy.mutation.catalogue for `namespace_name` (`draguard render`, and the
/// names reference mode accepts). Profiles that cannot be generated are described in `errors`.
std::vector<GeneratedTemplate> RenderCatalogue(const policy::Policy& policy, const topology::Snapshot* topology,
                                               std::string_view namespace_name,
                                               std::vector<std::string>* errors = nullptr);

/// Label draguard puts on the converted Pods of one multi-node job unit (mutation.computeDomains):
/// their required podAffinity on the NVLink clique selects it.
inline constexpr std::string_view kNvlinkUnitLabel = "draguard.io/nvlink-unit";
/// The pod claim name of a converted Pod's ComputeDomain channel.
inline constexpr std::string_view kChannelClaimName = "draguard-channel";

/// A ComputeDomain (resource.nvidia.com/v1beta1, the NVIDIA DRA driver) that draguard creates for
/// one multi-node job unit (mutation.computeDomains); the driver's controller then creates its
/// channel ResourceClaimTemplate.
struct GeneratedComputeDomain {
  std::string name;              ///< "draguard-cd-<20 hex digits>": a hash of the namespace and the unit
  std::string channel_template;  ///< spec.channel.resourceClaimTemplate.name: "<name>-channel"
  std::string unit;              ///< the unit in words: `LeaderWorkerSet "llm" (group 0)`
  admission::Json object;        ///< the complete object (namespace set; owner as the Pod tells)
};

/// Outcome of converting one Pod.
struct PodConversion {
  /// Unchanged: nothing to convert (or exempt). Converted: `pod`, `patch` and `templates` are set.
  /// Refused: the Pod cannot be converted; `reason` says why.
  enum class Outcome : uint8_t { kUnchanged, kConverted, kRefused };
  /// Which step refused a Pod (kRefused), a closed set for metric labels: `reason` says more.
  enum class Refusal : uint8_t {
    kNone,                ///< not refused
    kUnsupportedRequest,  ///< the legacy requests have no claim profile (ProfilePod failed)
    kNotPlaceable,        ///< no template can place the devices (no topology fits, or no single node holds them all)
  };
  Outcome outcome = Outcome::kUnchanged;
  Refusal refusal = Refusal::kNone;         ///< kRefused: which step refused
  admission::Json pod;                      ///< the converted Pod (kConverted)
  admission::Json patch = admission::Json::array();  ///< RFC 6902 operations (kConverted)
  std::vector<GeneratedTemplate> templates; ///< templates the Pod references (kConverted)
  /// The ComputeDomain whose channel the Pod references (kConverted; mutation.computeDomains).
  std::vector<GeneratedComputeDomain> compute_domains;
  std::vector<std::string> warnings;        ///< for the admission response
  std::string summary;                      ///< one line for logs and audit annotations
  std::string reason;                       ///< kRefused: why; kUnchanged: why (may be empty)
};

/// Converts the legacy GPU requests of `pod` (a core/v1 Pod object) in `namespace_name`.
/// Pods without legacy requests yield kUnchanged (so re-invocation and retries are no-ops).
/// `pod` may be a decode that left out fields no conversion reads or edits
/// (admission::DecodeScope::kRuleFields): the patch is the diff of what the conversion edits, the
/// same as against the whole Pod; `PodConversion::pod` then lacks those fields too.
PodConversion ConvertPod(const admission::Json& pod, std::string_view namespace_name,
                         const policy::Policy& policy, const topology::Snapshot* topology);

/// Outcome of converting any object offline (`draguard convert`): a Pod, or every pod template of
/// a workload or listed custom resource (each converted as a Pod would be when created).
struct ObjectConversion {
  bool changed = false;                      ///< at least one pod spec was converted
  admission::Json object;                    ///< the converted object (a copy when unchanged)
  std::vector<GeneratedTemplate> templates;  ///< templates needed, deduplicated by name
  /// ComputeDomains a Pod's channel claim names (mutation.computeDomains), deduplicated by name.
  std::vector<GeneratedComputeDomain> compute_domains;
  std::vector<std::string> warnings;         ///< per pod spec, prefixed with its JSON Pointer
  std::vector<std::string> errors;           ///< pod specs that could not be converted, with why
};

/// Converts `object` (Pod, Deployment, Job, ..., or a custom resource of policy.customResources).
/// `namespace_name` is used when the object has no metadata.namespace.
ObjectConversion ConvertObject(const admission::Json& object, std::string_view namespace_name,
                               const policy::Policy& policy, const topology::Snapshot* topology);

/// The pod templates of a workload under review (a Deployment, Job, ... or a custom resource of
/// policy.customResources) whose Pods ConvertPod would refuse now, by the JSON Pointer of the
/// template's spec ("/spec/template/spec"), with the reason. The validating webhook gives them to
/// DG001, so that a workload whose Pods cannot be converted is refused at its own CREATE (or at
/// the UPDATE that changes the template) instead of failing to create Pods later: under Kueue, an
/// admitted Job whose Pods are refused holds its quota until waitForPodsReady evicts it. A Pod's
/// own spec is not judged (its /mutate does that); a template without legacy GPU requests costs
/// one scan of its containers' resources.
std::map<std::string, std::string> TemplateRefusals(const admission::AdmissionRequest& request,
                                                    const policy::Policy& policy,
                                                    const topology::Snapshot* topology);

/// The claim profile of a Pod (exposed for tests and `render`); fails like ConvertPod refuses.
/// `containers` receives, per entry, the container pointers ("/spec/containers/0") it covers.
Result<ClaimProfile> ProfilePod(const admission::Json& pod, const policy::Policy& policy,
                                std::vector<std::vector<std::string>>* containers = nullptr);

/// The claim profile of one catalogue entry of the policy (request name "gpu").
ClaimProfile ProfileFromCatalogue(const policy::CatalogueProfile& entry, const policy::Policy& policy);

}  // namespace draguard::mutation
