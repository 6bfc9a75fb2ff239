// The allocation audit: what each Pod's containers were really allocated. An allocated
// ResourceClaim names its devices (`status.allocation.devices.results[{request, driver, pool,
// device}]`); the ResourceSlices name what locates each device (PCI address, PCIe root, NUMA node,
// UUID, the node); the node's topology model says where the device really is and which GPUs are
// NVLink-connected. Per container with GPUs: what its devices share (all NVLink-connected, one
// PCIe root, one NUMA node, or none), whether its GPUs share a NUMA node with its CPUs (dra.cpu
// devices), and whether the allocation keeps what its claims promised (matchAttribute
// constraints, draguard.io/interconnect: nvlink, the alternatives and selectors of draguard's
// generated claims).
//
// The reading (ReadAllocatedClaim, ReadResourceSlice, ReadPodClaims) and the analysis
// (AnalyzePod) are pure functions over compact records; AllocationJoin joins the three kinds in
// whatever order they arrive, holding claims, devices and waiting Pods as compact records only
// (never whole objects; never a Pod that can be analysed at once).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "draguard/admission/review.h"

namespace draguard::topology {
class Snapshot;
}  // namespace draguard::topology

namespace draguard::audit {

/// What a container's GPUs share, strongest first.
enum class Alignment : uint8_t {
  kSingle,    ///< one GPU: nothing to align
  kNvlink,    ///< every pair NVLink-connected
  kPcieRoot,  ///< all under one PCIe root
  kNuma,      ///< all local to one NUMA node
  kNone,      ///< none of these
  kUnknown,   ///< none proven, and something could not be told (no topology for the node, no attribute)
};

/// "single", "nvlink", "pcie-root", "numa", "none" or "unknown".
const char* AlignmentName(Alignment alignment);

/// Who wrote a claim.
enum class ClaimOrigin : uint8_t {
  kUser,       ///< anything else: a hand-written claim or template
  kDraguard,   ///< made from a template draguard generated (label app.kubernetes.io/managed-by: draguard)
  kScheduler,  ///< made by kube-scheduler for extended resources: the KEP-5004 annotation, and (in
               ///< AnalyzePod) named by its Pod's status.extendedResourceClaimStatus
};

/// "user", "draguard" or "scheduler".
const char* ClaimOriginName(ClaimOrigin origin);

/// What a device is, as far as the allocation audit cares.
enum class DeviceKind : uint8_t { kOther, kGpu, kNic, kCpu };

/// "other", "gpu", "nic" or "cpu".
const char* DeviceKindName(DeviceKind kind);

/// One device of a ResourceSlice, reduced to what locates it.
struct SliceDevice {
  std::string node;            ///< the slice's (or the device's) nodeName; "" when not node-local
  DeviceKind kind = DeviceKind::kOther;  ///< from the driver and gpu.nvidia.com/type
  std::string pci_bus_id;      ///< resource.kubernetes.io/pciBusID (or the driver's older names), "dddd:bb:dd.f" lower case
  std::string pcie_root;       ///< resource.kubernetes.io/pcieRoot ("" when not published or a list)
  std::vector<int64_t> numa;   ///< the NUMA attribute (resource.kubernetes.io/numaNode, else a driver's own), ascending
  std::string uuid;            ///< without a PCI address: gpu.nvidia.com/uuid (a MIG device's parentUUID)
  int64_t cpu_id = -1;         ///< dra.cpu/cpuID of an individual CPU device
  int64_t generation = 0;      ///< spec.pool.generation
};

/// The devices of one ResourceSlice that something can locate (a PCI address, a PCIe root, a
/// NUMA node, a UUID, or a CPU).
struct SliceRead {
  std::string driver;           ///< spec.driver
  std::string pool;             ///< spec.pool.name
  int64_t generation = 0;       ///< spec.pool.generation
  int64_t slice_count = 1;      ///< spec.pool.resourceSliceCount
  std::vector<std::pair<std::string, SliceDevice>> devices;  ///< (device name, device)
};

/// Reads a resource.k8s.io/v1 ResourceSlice (attribute names unqualified or qualified; the
/// driver's domain for unqualified ones); nullopt when it is not one.
std::optional<SliceRead> ReadResourceSlice(const admission::Json& slice);

/// A promise a claim makes about some of its devices.
struct Promise {
  enum class Kind : uint8_t { kNvlink, kPcieRoot, kNuma };
  Kind kind = Kind::kPcieRoot;
  std::string source;             ///< what makes it: "constraint matchAttribute resource.kubernetes.io/pcieRoot (requests gpu, nic)"
  std::vector<uint32_t> results;  ///< indexes into ClaimAllocation::results it covers
};

/// "NVLink between all its GPUs", "one PCIe root", "one NUMA node".
const char* PromiseWords(Promise::Kind kind);

/// One entry of status.allocation.devices.results.
struct AllocatedResult {
  std::string request;  ///< "gpu" or "gpu/numa-1"
  std::string driver;
  std::string pool;
  std::string device;
};

/// An allocated claim reduced to what the allocation audit needs.
struct ClaimAllocation {
  std::string namespace_;
  std::string name;
  ClaimOrigin origin = ClaimOrigin::kUser;
  std::vector<AllocatedResult> results;
  std::vector<Promise> promises;
};

/// Reads an allocated ResourceClaim: its results, who wrote it and what it promises:
/// - a `matchAttribute` constraint on resource.kubernetes.io/pcieRoot: one PCIe root for the
///   devices it covers; on a NUMA attribute (resource.kubernetes.io/numaNode, dra.net/numaNode,
///   dra.cpu/numaNodeID, gpu.nvidia.com/numa): one NUMA node;
/// - the annotation draguard.io/interconnect: nvlink: NVLink between all its GPUs (DG005 takes it at
///   its word), except for the results of a generated claim's alternatives of another class;
/// - in a claim draguard generated: a `firstAvailable` alternative `nvlink-<k>` or `numa-<k>` its
///   class for that alternative's devices, and a selector restricting pcieRoot to literals one
///   NUMA node (the generator writes such selectors only for the roots of one NUMA node);
/// - in any other claim, a selector restricting pcieRoot to one literal: one PCIe root.
/// nullopt when the object is not a ResourceClaim or not allocated.
std::optional<ClaimAllocation> ReadAllocatedClaim(const admission::Json& claim);

/// One claim (or one request of it) a container uses.
struct ClaimUse {
  std::string claim;    ///< ResourceClaim name in the Pod's namespace
  std::string request;  ///< "" = the whole claim
};

/// One container and the claims it uses.
struct ContainerClaims {
  std::string name;
  std::vector<ClaimUse> uses;
};

/// A bound Pod reduced to which containers use which claims.
struct PodClaims {
  std::string namespace_;
  std::string name;
  std::string uid;
  std::string node;                       ///< spec.nodeName
  std::vector<ContainerClaims> containers;  ///< init containers, then containers; only those with claims
  std::string extended_claim;             ///< status.extendedResourceClaimStatus.resourceClaimName ("" when none)
  std::set<std::string> generated;        ///< claims made from draguard's templates (draguard-<hash> names)
};

/// Reads which claims a Pod's containers use: resources.claims through spec.resourceClaims
/// (resourceClaimName, or for a template the claim status.resourceClaimStatuses names) and the
/// extended-resource mappings (status.extendedResourceClaimStatus.requestMappings). nullopt when
/// the object is not a Pod, is not bound to a node, or uses no claim.
std::optional<PodClaims> ReadPodClaims(const admission::Json& pod, std::string_view default_namespace = "default");

/// One allocated device of a container, located.
struct LocatedDevice {
  std::string claim;
  std::string request;
  std::string driver;
  std::string pool;
  std::string device;
  DeviceKind kind = DeviceKind::kOther;
  std::string node;              ///< from its slice ("" when not found)
  std::string pci_bus_id;        ///< as published
  std::string pcie_root;         ///< by the node's topology when located there, else as published ("" unknown)
  std::string published_root;    ///< as the slice publishes it
  std::vector<uint32_t> numa;    ///< NUMA nodes by the topology when located, else as published
  std::vector<int64_t> published_numa;  ///< as the slice publishes it
  bool found = false;            ///< its ResourceSlice device is known
  bool located = false;          ///< mapped onto the node's topology model
  uint32_t gpu = 0xffffffffu;    ///< index into the node's shape->gpus when located as a GPU
};

/// Tri-state: proven true, proven false, or not known.
enum class Proof : uint8_t { kUnknown, kYes, kNo };

/// A promise the allocation does not keep.
struct BrokenPromise {
  std::string claim;
  std::string message;  ///< "claim \"c\" promises one PCIe root (constraint ...), but gpu-1 and gpu-4 are under pci0000:17 and pci0000:3a by the node's topology"
};

/// What one container was allocated.
struct ContainerAllocation {
  std::string container;
  std::string node;
  std::vector<LocatedDevice> devices;  ///< its GPUs, NICs and CPUs (claim order)
  std::vector<std::string> claims;     ///< the claims it uses
  uint32_t gpus = 0;                   ///< distinct physical GPUs (MIG devices of one GPU count once)
  Proof nvlink = Proof::kUnknown;      ///< every GPU pair NVLink-connected
  Proof one_root = Proof::kUnknown;    ///< all GPUs under one PCIe root
  Proof one_numa = Proof::kUnknown;    ///< all GPUs local to one NUMA node
  Alignment alignment = Alignment::kUnknown;
  std::vector<uint32_t> gpu_numa;      ///< NUMA nodes of its GPUs (union)
  std::vector<uint32_t> cpu_numa;      ///< NUMA nodes of its CPUs (dra.cpu devices)
  Proof cpus_with_gpus = Proof::kUnknown;  ///< every GPU shares a NUMA node with its CPUs (unknown without CPU devices)
  ClaimOrigin origin = ClaimOrigin::kUser; ///< of the claims holding its GPUs (scheduler before draguard before user)
  std::vector<BrokenPromise> broken;   ///< promises of its claims the allocation does not keep
  std::string result;                  ///< "pass", "warn" or "fail"
  std::string message;                 ///< what the devices share, and why warn or fail
};

/// What one Pod was allocated: its containers with GPUs.
struct PodAllocation {
  std::string namespace_;
  std::string name;
  std::string uid;
  std::string node;
  std::vector<ContainerAllocation> containers;
  std::vector<std::string> missing;  ///< claims it uses that were not found (or not allocated)
  std::string where;                 ///< where the Pod was read (offline audit), else ""
};

/// True when the container has something to align: two GPUs, or a GPU with a NIC or CPUs. A
/// container with one GPU and nothing else is counted, not reported.
bool Reportable(const ContainerAllocation& c);

/// What AnalyzePod reads: claims by namespace and name, slice devices by driver, pool and name,
/// and the topology (may be null: then only what the slices publish).
struct AllocationLookup {
  std::function<const ClaimAllocation*(std::string_view ns, std::string_view name)> claim;
  std::function<const SliceDevice*(std::string_view driver, std::string_view pool, std::string_view device)> device;
  const topology::Snapshot* topology = nullptr;
};

/// Analyses one Pod: per container with GPUs, its devices located, what they share, what its
/// claims promised and did not get, and the result: `fail` when a promise is broken, `warn` when a
/// claim kube-scheduler made spreads GPUs over NUMA nodes without NVLink between them all or when
/// GPUs and the container's CPUs are on no common NUMA node, else `pass`. Pure.
PodAllocation AnalyzePod(const PodClaims& pod, const AllocationLookup& lookup);

/// Caps of AllocationJoin (bad input must not exhaust memory): about 0.7 KiB per claim of two
/// devices, 0.35 KiB per device, 0.6 KiB per waiting Pod (docs/performance.md), so at most about
/// 300 MiB in all.
struct AllocationLimits {
  std::size_t max_claims = 100000;         ///< allocated claims held
  std::size_t max_devices = 400000;        ///< slice devices held
  std::size_t max_waiting_pods = 200000;   ///< Pods waiting for their claims or devices
};

/// Joins claims, slices and Pods that arrive in any order, with bounded memory: allocated claims
/// and locatable slice devices are held as compact records; a Pod is analysed as soon as its
/// claims and the pools of their devices are known, otherwise kept as its PodClaims until Finish.
/// Not thread-safe.
class AllocationJoin {
 public:
  /// Receives each analysed Pod.
  using Sink = std::function<void(PodAllocation&&)>;

  /// `topology` may be null and must outlive the join.
  explicit AllocationJoin(const topology::Snapshot* topology, AllocationLimits limits = {});

  /// Holds an allocated claim (a claim seen again replaces the first). Other objects are ignored.
  void AddClaim(const admission::Json& claim);
  /// Holds the locatable devices of a ResourceSlice (after ClaimsComplete only those an allocated
  /// claim names) and counts its pool's slices.
  void AddSlice(const admission::Json& slice);
  /// Every claim has been added: later slices keep only the devices claims allocated.
  void ClaimsComplete();
  /// Every claim and slice has been added: Pods are analysed at once.
  void InputsComplete();
  /// A Pod: analysed now (to `sink`) when what it needs is known, else kept until Finish.
  /// `where` says where it was read ("" in the cluster).
  void AddPod(const admission::Json& pod, const Sink& sink, const std::string& where = "",
              std::string_view default_namespace = "default");
  /// Analyses the Pods still waiting with what is known, in the order they arrived.
  void Finish(const Sink& sink);

  /// Counters.
  struct Stats {
    std::size_t claims = 0;          ///< allocated claims held
    std::size_t devices = 0;         ///< slice devices held
    std::size_t waiting = 0;         ///< Pods waiting now
    std::size_t peak_waiting = 0;    ///< most Pods waiting at once
    std::size_t dropped = 0;         ///< claims, devices or Pods not held because a cap was reached
  };
  /// The counters so far.
  const Stats& stats() const { return stats_; }

 private:
  struct Pool {
    int64_t generation = -1;
    int64_t expected = 1;
    int64_t seen = 0;
  };
  struct Waiting {
    PodClaims pod;
    std::string where;
  };
  struct Held {
    SliceDevice device;
    bool published = false;  // false: a claim names it, its slice has not come yet
  };
  // Holds a device key a claim names (until its slice comes); false when over the cap.
  bool Name(std::string key);
  bool Ready(const PodClaims& pod) const;
  PodAllocation Analyze(const PodClaims& pod) const;

  const topology::Snapshot* topology_;
  AllocationLimits limits_;
  bool claims_complete_ = false;
  bool inputs_complete_ = false;
  std::unordered_map<std::string, ClaimAllocation> claims_;   // "ns/name"
  std::unordered_map<std::string, Held> devices_;             // "driver\0pool\0device"
  std::unordered_map<std::string, Pool> pools_;               // "driver\0pool"
  std::vector<Waiting> waiting_;
  Stats stats_;
};

}  // namespace draguard::audit
