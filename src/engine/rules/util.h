// Small helpers shared by the built-in rules (internal to the engine module).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "draguard/dra/claims.h"
#include "draguard/dra/pod_specs.h"
#include "draguard/dra/satisfiability.h"
#include "draguard/dra/selector_analysis.h"
#include "draguard/engine/rule.h"
#include "draguard/glob.h"
#include "draguard/policy/policy.h"

namespace draguard::engine::rules {

// The DRA model's views of claims and pod specs, which every rule reads.
using dra::Alternative;
using dra::ClaimRef;
using dra::ConfigRef;
using dra::ConstraintRef;
using dra::ContainerRef;
using dra::DeviceRequestRef;
using dra::PodObjects;
using dra::PodSpecRef;
using dra::SelectorRef;
using dra::Containers;
using dra::ContainerClaimNames;
using dra::ExclusiveCpus;
using dra::IsGeneratedTemplateName;
using dra::IsZeroQuantity;
using dra::RequestsLegacyGpus;
using dra::PodClaims;
using dra::Describe;
using dra::DriverOfClass;
using dra::EscapePointerToken;
using dra::FindClaim;
using dra::FindPodObjects;
using dra::FindPodSpecs;
using dra::IsLatencySensitive;
using dra::Member;
using dra::OwnerName;
using dra::StringMapAt;
using dra::StringMember;
using dra::AttributeValues;
using dra::CapacityLowerBound;
using dra::ComparesDriver;
using dra::ConjunctRestriction;
using dra::LowerBound;

/// True when `value` is one of `list`.
inline bool InList(const std::vector<std::string>& list, const std::string& value) {
  for (const auto& v : list) {
    if (v == value) return true;
  }
  return false;
}

/// True when a glob of `patterns` matches `ns`.
inline bool NamespaceAllowed(const std::vector<std::string>& patterns, const std::string& ns) {
  for (const auto& p : patterns) {
    if (GlobMatch(p, ns)) return true;
  }
  return false;
}

/// What a namespace-gated rule says of one alternative it flags.
struct GatedFinding {
  std::string field;    ///< the member of the alternative that is set ("adminAccess")
  std::string message;
  std::string fix;
};

/// A rule that allows a request setting only in the namespaces the policy lists: for each
/// alternative of the claim under review that `flagged` selects, in a namespace no glob of
/// `allowed` matches, the finding `describe` gives, at the alternative's `field`. Skip when the
/// object is not a claim.
RuleResult NamespaceGatedFindings(const RuleInput& input, const std::vector<std::string>& allowed,
                                  const std::function<bool(const Alternative&)>& flagged,
                                  const std::function<GatedFinding(const ClaimRef&, const Alternative&)>& describe);

/// RFC 1123 DNS label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63 characters.
bool IsDnsLabel(const std::string& s);

/// RFC 1123 DNS subdomain: dot-separated labels, at most 253 characters.
bool IsDnsSubdomain(const std::string& s);

/// A C identifier of at most 32 characters (DRA attribute / capacity names).
bool IsCIdentifier(const std::string& s);

/// One allocation of a claim: the alternative chosen for each request (null = none).
using Combination = std::vector<const Alternative*>;

/// Calls `fn` for every combination of alternatives (one per request with alternatives).
/// Returns false (without finishing) when there are more than `limit` combinations.
bool ForEachCombination(const ClaimRef& claim, std::size_t limit,
                        const std::function<void(const Combination&)>& fn);

/// Devices an alternative allocates for counting purposes (All counts as 1, malformed as 0).
inline int64_t DeviceCount(const Alternative& a) {
  if (a.all) return 1;
  return a.count > 0 ? a.count : 0;
}

/// True when `constraint` names `alt`: it has no `requests` list (every request), lists the main
/// request of `alt` (all its subrequests) or lists `alt` itself ("main/sub").
bool Names(const ConstraintRef& constraint, const Alternative& alt);

/// True when `constraint` is a pcieRoot matchAttribute covering every alternative of `alts`.
bool CoversAll(const ConstraintRef& constraint, const std::vector<const Alternative*>& alts);

/// Standard attribute used for PCIe locality constraints.
inline constexpr const char* kPcieRoot = "resource.kubernetes.io/pcieRoot";

/// Standard attribute for NUMA locality (KEP-6072), published by GPU drivers on NUMA-local GPUs
/// and by dra-driver-cpu on its CPU devices.
inline constexpr const char* kNumaNode = "resource.kubernetes.io/numaNode";

/// What a request allocates, as alignment sees it: by DeviceClass (deviceClasses.gpu / mig /
/// passthrough, deviceClasses.cpu, mutation.nic.deviceClass).
enum class DeviceRole { kGpu, kCpu, kNic, kOther };

/// The role of `alt`'s devices under `policy`.
DeviceRole RoleOf(const Alternative& alt, const policy::Policy& policy);

/// True when `constraint` puts `alt`'s devices on one PCIe root or NUMA node with the other devices
/// it names: a matchAttribute on resource.kubernetes.io/pcieRoot or resource.kubernetes.io/numaNode
/// that names `alt`, or on a driver-specific NUMA attribute that the devices of `alt` publish:
/// `<NIC driver>/numaNode` for NIC requests (dranet: dra.net/numaNode), dra.net/numaNode and
/// dra.cpu/numaNodeID for CPU requests (dra-driver-cpu's compatibility attributes). No GPU driver
/// publishes the driver-specific ones, so they tie no GPU.
bool AlignsWith(const ConstraintRef& constraint, const Alternative& alt, const policy::Policy& policy);

/// True when one constraint of the claim aligns every alternative of `alts` (AlignsWith).
bool OneConstraintAligns(const ClaimRef& claim, const std::vector<const Alternative*>& alts,
                         const policy::Policy& policy);

/// True when the claim has a pcieRoot matchAttribute covering every alternative of `alts`.
bool PcieRootCovers(const ClaimRef& claim, const std::vector<const Alternative*>& alts);

/// Annotation by which a claim declares the interconnect its GPUs rely on.
inline constexpr const char* kInterconnectAnnotation = "draguard.io/interconnect";

/// True when a selector of `alt` has a top-level conjunct restricting
/// resource.kubernetes.io/pcieRoot, gpu.nvidia.com/uuid or resource.kubernetes.io/numaNode to
/// literal values (`== ..` or `in [..]`): the alternative is placed on chosen PCIe roots, GPUs or
/// NUMA nodes by its selectors (draguard's claims for Grace and POWER9 pick a socket's GPUs by
/// their memory nodes and its CPUs by their node this way).
bool SelectorAligned(const Alternative& alt);

/// True when the claim (or the template's claim metadata) declares draguard.io/interconnect: nvlink.
bool DeclaresNvlink(const ClaimRef& claim);

/// DG005's notion of aligned devices: one constraint aligns every alternative of `alts`
/// (OneConstraintAligns), or each of them is aligned on its own (SelectorAligned, or a GPU-class
/// request of a claim that declares NVLink, which DRA cannot express).
bool AlignmentCovers(const ClaimRef& claim, const std::vector<const Alternative*>& alts,
                     const policy::Policy& policy);

/// "request \"gpus\" x2, request \"nic\"" for messages.
std::string DescribeCombination(const std::vector<const Alternative*>& alts);

}  // namespace draguard::engine::rules

namespace draguard::engine::rules {

/// The sharing settings of an NVIDIA opaque config (GpuConfig / MigDeviceConfig).
struct SharingInfo {
  std::string kind;                 ///< parameters.kind
  std::string strategy;             ///< sharing.strategy ("" when no sharing)
  bool has_sharing = false;         ///< a sharing object is present
  bool has_thread_percentage = false;  ///< mpsConfig.defaultActiveThreadPercentage set
  bool has_pinned_limit = false;    ///< defaultPinnedDeviceMemoryLimit or per-device limits set
  bool has_time_slicing_config = false;  ///< sharing.timeSlicingConfig present
};

/// Reads the sharing settings of a config for driver gpu.nvidia.com; nullopt for other drivers
/// or parameters that are not an object.
std::optional<SharingInfo> ReadSharing(const ConfigRef& config);

/// The alternatives a config applies to (every alternative when config.requests is empty).
std::vector<const Alternative*> ConfigTargets(const ClaimRef& claim, const ConfigRef& config);

}  // namespace draguard::engine::rules
