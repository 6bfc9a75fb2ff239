// The draguard policy: what the webhook enforces and how strictly.
//
// A Policy is an immutable value parsed from YAML (apiVersion draguard.io/v1alpha1, kind Policy).
// Parsing reports unknown keys and wrong types with line and column; it never throws.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "draguard/status.h"

namespace draguard::policy {

/// Global enforcement mode: audit never denies.
enum class Mode { kEnforce, kAudit };

/// What a rule's findings do to the admission decision.
enum class Action { kDeny, kWarn, kAudit, kOff };

/// How a rule that cannot evaluate (kError) is treated.
enum class RuleErrorPolicy { kAllow, kDeny };

/// How mutation obtains the ResourceClaimTemplates it references.
enum class TemplateMode { kCreate, kReference };

/// "deny", "warn", "audit" or "off".
const char* ActionName(Action action);

/// How a legacy name backed by DRA through DeviceClass.extendedResourceName (KEP-5004) is treated.
enum class ExtendedResourceMapping { kDeny, kWarn, kAllow };

/// The prefix of every DeviceClass's implicit extended-resource name (KEP-5004,
/// resourceapi.ResourceDeviceClassPrefix): `deviceclass.resource.kubernetes.io/<class>`.
inline constexpr std::string_view kImplicitResourcePrefix = "deviceclass.resource.kubernetes.io/";

/// One matchExpressions entry of a Kubernetes label selector.
struct LabelSelectorRequirement {
  std::string key;                  ///< label key
  std::string op;                   ///< In | NotIn | Exists | DoesNotExist
  std::vector<std::string> values;  ///< for In / NotIn
};

/// A Kubernetes label selector (matchLabels AND matchExpressions).
struct LabelSelector {
  std::map<std::string, std::string> match_labels;      ///< all must match
  std::vector<LabelSelectorRequirement> match_expressions;  ///< all must hold
  /// True when `labels` satisfies the selector (an empty selector matches everything).
  bool Matches(const std::map<std::string, std::string>& labels) const;
};

/// Who and what is exempt from the policy.
struct Exemptions {
  std::vector<std::string> namespaces;  ///< names or globs ("*", "?")
  std::vector<std::string> users;       ///< userInfo.username, globs allowed
  std::vector<std::string> groups;      ///< userInfo.groups entries, globs allowed
  std::vector<LabelSelector> object_selectors;  ///< any matching the object's labels exempts it
};

/// An exception the platform team grants in the policy file: `rules` do not apply to the objects
/// it matches (namespace AND object name AND labels) until `expires`.
struct PolicyException {
  std::string name;                       ///< names it in records; "exceptions[i]" when not given
  std::vector<std::string> rules;         ///< rule IDs ("DG001"), at least one
  std::vector<std::string> namespaces;    ///< names or globs, at least one
  std::vector<std::string> object_names;  ///< metadata.name (globs); empty = any name
  std::optional<LabelSelector> object_selector;  ///< unset = any labels
  std::string reason;                     ///< required justification
  /// End of the exception (RFC 3339); unset = no end. It no longer applies from this instant on.
  std::optional<std::chrono::system_clock::time_point> expires;
  std::string expires_text;               ///< `expires` as written
};

/// Where the draguard.io/exempt annotation is honoured. Annotation exceptions are off unless an
/// entry matches: namespace AND (no users/groups given, or the requester's username or a group
/// matches) AND (no rules given, or the rule is listed).
struct AnnotationExceptionGrant {
  std::vector<std::string> namespaces;  ///< names or globs, at least one
  std::vector<std::string> users;       ///< userInfo.username (globs)
  std::vector<std::string> groups;      ///< userInfo.groups entries (globs)
  std::vector<std::string> rules;       ///< rule IDs the annotation may name; empty = any
};

/// A custom resource kind that embeds pod templates or containers.
struct CustomResource {
  std::string group;                       ///< API group, e.g. "kubeflow.org"
  std::string kind;                        ///< kind, e.g. "PyTorchJob"
  /// Dotted paths to PodTemplateSpecs or PodSpecs; `*` = every map value, `name[]` = every item.
  std::vector<std::string> pod_templates;
  /// Dotted paths to single container-like objects (with `resources`), e.g. KServe's predictor.model.
  std::vector<std::string> containers;
  /// Where `containers` can get DRA claims: "parent" (the object holding each container is a
  /// PodSpec-like object that takes resourceClaims and affinity, as KServe's predictor) or "none"
  /// (`draguard convert` reports them as not convertible).
  std::string container_claims = "none";
};

/// The built-in list of custom resources (Kubeflow, Ray, LWS, JobSet, KServe, Volcano, ...).
std::vector<CustomResource> DefaultCustomResources();

/// DRA DeviceClass names by what they allocate: NVIDIA GPUs, and CPUs.
struct DeviceClasses {
  std::vector<std::string> gpu = {"gpu.nvidia.com"};               ///< full GPUs (DG003)
  std::vector<std::string> mig = {"mig.nvidia.com"};               ///< MIG devices (DG004)
  std::vector<std::string> passthrough = {"vfio.gpu.nvidia.com"};  ///< VFIO passthrough GPUs
  /// CPUs published as devices (DG005, DG016): the DeviceClass the dra-driver-cpu deployment
  /// installs (driver dra.cpu) is named "dra.cpu".
  std::vector<std::string> cpu = {"dra.cpu"};
  /// True when `name` is in any of the three GPU lists (gpu, mig, passthrough).
  bool IsGpuClass(std::string_view name) const;
  /// True when `name` is in `cpu`.
  bool IsCpuClass(std::string_view name) const;
};

/// How latency-sensitive workloads are recognised.
struct WorkloadClassSelector {
  std::map<std::string, std::string> labels;      ///< all must match (AND)
  std::vector<std::string> priority_class_names;  ///< any matches (OR with labels)
};

/// How mutation converts `nvidia.com/gpu.shared`.
enum class SharedMode { kDeny, kMps };

/// MPS limits written into a generated GpuConfig (overridable per Pod by annotations).
struct MpsDefaults {
  int64_t active_thread_percentage = 50;    ///< defaultActiveThreadPercentage (0-100)
  std::string pinned_memory_limit = "10Gi"; ///< defaultPinnedDeviceMemoryLimit (a quantity)
};

/// mutation.nic.numaAttribute: which NUMA attributes the cluster's NIC driver release publishes.
enum class NicNumaAttribute {
  kDriver,    ///< only `<driver>/numaNode` (dranet up to v1.4.0)
  kStandard,  ///< also the standard resource.kubernetes.io/numaNode (KEP-6072; dranet after v1.4.0, a7fdaf0)
};

/// The NIC request mutation adds next to GPUs.
struct NicConfig {
  /// "none" or "rdma": what multi-GPU Pods get without the draguard.io/nic annotation.
  std::string default_for_multi_gpu = "none";
  std::string device_class = "dranet";  ///< DeviceClass of the NIC request
  std::string driver = "dra.net";       ///< driver (attribute domain) of the NIC devices
  /// kStandard: NIC devices publish resource.kubernetes.io/numaNode, so a NIC request joins the
  /// numaNode constraint of its GPUs and CPUs (mutation.cpu) directly; kDriver: it is tied to them
  /// through its GPU's pcieRoot only.
  NicNumaAttribute numa_attribute = NicNumaAttribute::kDriver;
};

/// One request profile of the template catalogue (`draguard render`, reference mode).
struct CatalogueProfile {
  int64_t gpus = 1;              ///< full GPUs (ignored when `mig` is set)
  std::string mig;               ///< MIG profile ("3g.40gb"); empty for full GPUs
  std::string memory;            ///< memory floor per GPU; empty = the policy default
  std::string product;           ///< productName to select; empty = any
  std::string nic;               ///< "" | "none" | "rdma"
  std::string interconnect;      ///< "" | "auto" | "nvlink" | "pcie" | "numa" | "any"
  bool latency_sensitive = false;  ///< generate for the latency-sensitive class
};

/// mutation.numaAlignment: how a NUMA-local multi-GPU request is expressed (see MutationConfig).
enum class NumaAlignment { kPcieRoots, kNumaNode };

/// mutation.cpu.mode: how the cluster's DRA CPU driver (dra-driver-cpu) publishes CPUs.
enum class CpuMode {
  kNone,        ///< no CPU driver: exclusive CPUs stay with the kubelet's CPU manager
  kIndividual,  ///< one device per logical CPU (cpudevNNN): a request with `count`
  kGrouped,     ///< one device per NUMA node with consumable capacity dra.cpu/cpu
};

/// mutation.computeDomains: whether converted Pods of multi-node GPU jobs get a ComputeDomain.
enum class ComputeDomainMode {
  kOff,       ///< never
  kAuto,      ///< where some node of the topology model is in an NVLink clique
  kRequired,  ///< always; a multi-node job's Pod is refused where no node is in a clique
};

/// mutation.cpu: converted containers' CPUs in the claim of their GPUs.
struct CpuConfig {
  CpuMode mode = CpuMode::kNone;
  /// The DeviceClass of the CPU request; the dra-driver-cpu deployment installs "dra.cpu". It is
  /// added to deviceClasses.cpu when not listed there.
  std::string device_class = "dra.cpu";
};

/// Mutation settings.
struct MutationConfig {
  bool enabled = true;                          ///< /mutate converts legacy requests
  TemplateMode templates = TemplateMode::kCreate;
  /// Memory floor per full GPU when the Pod has no draguard.io/gpu-memory annotation; empty =
  /// memoryReservation.minimum.
  std::string default_memory;
  SharedMode shared = SharedMode::kDeny;        ///< nvidia.com/gpu.shared handling
  MpsDefaults mps;                              ///< limits for SharedMode::kMps
  NicConfig nic;                                ///< NIC requests
  bool allow_unaligned = false;                 ///< admit multi-device requests no node can align
  /// Weakest GPU placement accepted for N >= 2 GPUs, strongest tried first: "auto" (= "numa"),
  /// "nvlink", "pcie" or "numa". The Pod annotation draguard.io/interconnect overrides it.
  std::string interconnect = "auto";
  /// How a NUMA-local multi-GPU request is expressed. kPcieRoots: a selector on the pcieRoot
  /// values of one NUMA node's roots (an alternative per NUMA node; works with every driver
  /// release). kNumaNode: `matchAttribute: resource.kubernetes.io/numaNode` (KEP-6072), for
  /// drivers that publish it on NUMA-local GPUs; shapes with one NUMA node keep the selector.
  NumaAlignment numa_alignment = NumaAlignment::kPcieRoots;
  /// CPUs of converted containers: with a mode set, whole CPUs move into the GPUs' claim, aligned
  /// with them by resource.kubernetes.io/numaNode (needs numa_alignment kNumaNode).
  CpuConfig cpu;
  /// mutation.kueue: every generated claim is one Kueue can charge (Kueue v0.19 refuses
  /// firstAvailable): each GPU request is written as `exactly`, in the one alignment that the most
  /// nodes can use; a request that only several alternatives could align on a node is refused
  /// (see docs/mutation.md, "Kueue").
  bool kueue = false;
  /// mutation.computeDomains: a converted Pod of a multi-node GPU job (dra::PodNvlinkJob) gets the
  /// IMEX channel of one ComputeDomain per job unit, which draguard creates (templates: create),
  /// and a required podAffinity that keeps the unit's Pods in one NVLink clique.
  ComputeDomainMode compute_domains = ComputeDomainMode::kOff;
  uint32_t hostname_affinity_limit = 8;         ///< pin by node name up to this many nodes
  uint32_t api_timeout_ms = 3000;               ///< deadline of template creation per review
  std::vector<CatalogueProfile> catalogue;      ///< profiles for `render` and reference mode
};

/// Per-rule settings.
struct RuleConfig {
  std::optional<Action> action;  ///< overrides the rule's default action when set
};

/// A parsed, validated policy.
struct Policy {
  Mode mode = Mode::kEnforce;
  std::vector<std::string> legacy_resources = {
      "nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-*", "nvidia.com/gpumem",
      "nvidia.com/gpucores", "nvidia.com/gpumem-percentage", "nvidia.com/gpu-*"};
  std::map<std::string, RuleConfig, std::less<>> rules;  ///< keyed by rule ID ("DG001")
  Exemptions exemptions;
  std::vector<PolicyException> exceptions;                   ///< per-object exceptions (`exceptions`)
  std::vector<AnnotationExceptionGrant> annotation_exceptions;  ///< `annotationExceptions`; empty = off
  WorkloadClassSelector latency_sensitive;
  MutationConfig mutation;
  RuleErrorPolicy rule_errors = RuleErrorPolicy::kAllow;
  bool require_topology_for_readiness = false;  ///< /readyz waits for at least one node
  ExtendedResourceMapping extended_resource_mapping = ExtendedResourceMapping::kDeny;
  /// trustedSchedulers: the userInfo.username of each kube-scheduler (exact names, no globs). A
  /// ResourceClaim one of them creates with the annotation resource.kubernetes.io/extended-resource-claim
  /// is the claim it made for a Pod's extended resources (KEP-5004): admitted unjudged. The same
  /// annotation from anyone else changes nothing.
  std::vector<std::string> trusted_schedulers = {"system:kube-scheduler"};
  std::vector<CustomResource> custom_resources = DefaultCustomResources();
  DeviceClasses device_classes;
  /// DG003: the lowest acceptable memory floor of a full-GPU request (a Kubernetes quantity).
  std::string memory_minimum = "1Gi";
  /// DG005: classes whose requests need no pcieRoot alignment (e.g. IMEX channels).
  std::vector<std::string> alignment_exempt_classes = {
      "compute-domain-default-channel.nvidia.com", "compute-domain-channel.nvidia.com",
      "compute-domain-daemon.nvidia.com"};
  std::vector<std::string> admin_access_namespaces;       ///< DG009: namespaces (globs) allowed adminAccess
  std::vector<std::string> allocation_mode_all_namespaces;  ///< DG010: namespaces (globs) allowed All
  /// celCostPerReview: CEL cost units all selectors of one review may spend together.
  int64_t cel_cost_per_review = 10000000;
  /// Identifies the parsed document (a hash of its text), set by ParsePolicy: replicas and reloads
  /// of one document share it. Empty for a policy built in code; clear it when changing a parsed
  /// policy's fields, since caches keyed on it (the claim generator's) would not see the change.
  std::string fingerprint;

  /// The action for `rule_id`: the override if any, else `default_action`.
  Action ActionFor(std::string_view rule_id, Action default_action) const;
  /// A position in `rules`, for asking ActionFor of many rules in ID order.
  using RuleCursor = std::map<std::string, RuleConfig, std::less<>>::const_iterator;
  /// ActionFor, for rules asked in ID order: `cursor` (rules.begin() at first) follows the asks, so
  /// a policy that names every rule answers each with one comparison; any order stays correct.
  Action ActionFor(std::string_view rule_id, Action default_action, RuleCursor& cursor) const;
  /// True when `resource_name` matches a legacyResources entry.
  bool IsLegacyResource(std::string_view resource_name) const;
  /// The GPU DeviceClass (deviceClasses gpu, mig or passthrough) whose implicit extended-resource
  /// name `resource_name` is (KEP-5004: deviceclass.resource.kubernetes.io/<class>); "" otherwise.
  std::string_view ImplicitGpuClass(std::string_view resource_name) const;
  /// True when `resource_name` asks for GPUs the legacy way: a legacyResources match or a GPU
  /// class's implicit name (ImplicitGpuClass).
  bool IsLegacyGpuRequest(std::string_view resource_name) const {
    return IsLegacyResource(resource_name) || !ImplicitGpuClass(resource_name).empty();
  }
};

/// Parses an RFC 3339 timestamp ("2026-01-31T00:00:00Z", offsets and fractions allowed).
std::optional<std::chrono::system_clock::time_point> ParseRfc3339(std::string_view text);

/// Parses a policy document. `source` names the file in error messages.
Result<Policy> ParsePolicy(std::string_view yaml, std::string_view source = "policy");

/// The bundled default policy (deploy/policy/default-policy.yaml, embedded at build time).
std::string_view DefaultPolicyYaml();

/// Loads and parses a policy file.
Result<Policy> LoadPolicyFile(const std::string& path);

}  // namespace draguard::policy
