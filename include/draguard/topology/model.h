// The topology model: what draguard knows about the hardware of each Kubernetes node.
//
// The model is built once per hwloc export (see loader.h) and is immutable afterwards. It is
// split in two so that thousands of identical nodes cost little memory:
//   * Shape        - everything hardware-relevant (NUMA nodes, PCIe roots, GPUs, NICs, NVLink /
//                    XGMI links and the derived placement answers). Identical nodes share one
//                    Shape object; its Fingerprint() is the value of the node label
//                    `draguard.io/topology-shape`.
//   * NodeTopology - one node: its name, where the export came from, the exporter's hwloc
//                    version, host name, GPU UUIDs, and a pointer to its Shape.
// A Snapshot is the immutable whole-cluster view handed to rules (see snapshot.h).
//
// All types here are plain values without hwloc types; they are safe to read from any number of
// threads once published through a std::shared_ptr<const ...>.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace draguard::topology {

/// Label under which a node's shape fingerprint is published.
inline constexpr std::string_view kShapeLabel = "draguard.io/topology-shape";
/// Node label naming the NVLink clique of a node's GPUs (set by GPU Feature Discovery, the NVIDIA
/// DRA driver with --gpu-clique-label-enabled, or draguard's exporter where neither does).
inline constexpr std::string_view kCliqueLabel = "nvidia.com/gpu.clique";

/// Whether `s` is an NVLink clique as NVML's fabric info gives it and kCliqueLabel carries it:
/// "<cluster UUID>.<clique id>", the UUID lower-case 8-4-4-4-12 hex, the id 1 to 10 decimal digits.
bool IsNvlinkClique(std::string_view s);

/// One NUMA node as hwloc reports it.
struct NumaNode {
  uint32_t os_index = 0;      ///< Linux node number (hwloc P#)
  uint64_t memory_bytes = 0;  ///< local memory in bytes
  uint32_t cpus = 0;          ///< number of PUs (hardware threads) local to the node; 0 for a GPU's memory
  std::string subtype;        ///< "DRAM", "HBM", "GPUMemory", ...; empty when the export does not say
  bool operator==(const NumaNode&) const = default;
};

/// One PCIe root complex (an hwloc host bridge).
struct PcieRoot {
  /// Exact form of the DRA attribute `resource.kubernetes.io/pcieRoot`: "pci<domain>:<bus>".
  std::string id;
  uint32_t domain = 0;    ///< PCI domain
  uint32_t bus_first = 0; ///< first bus behind the host bridge (the root bus)
  uint32_t bus_last = 0;  ///< last bus behind the host bridge
  /// OS indexes of the NUMA nodes local to the host bridge (0, 1 or several), ascending.
  std::vector<uint32_t> numa_nodes;
  bool operator==(const PcieRoot&) const = default;
};

/// GPU vendor recognised by the loader.
enum class GpuVendor : uint8_t { kNvidia, kAmd };
/// "nvidia" or "amd".
const char* GpuVendorName(GpuVendor vendor);

/// Which export attribute a GPU's memory figure came from.
enum class MemorySource : uint8_t {
  kUnknown,           ///< the export carries no memory size for this GPU
  kCudaGlobalMemory,  ///< `CUDAGlobalMemorySize` (KiB) of a cuda OS device
  kRsmiVram,          ///< `RSMIVRAMSize` (KiB) of an rsmi OS device
  kOpenClGlobalMemory, ///< `OpenCLGlobalMemorySize` (KiB) of an opencl OS device
  kNvmlTotalMemory     ///< `NVMLTotalMemorySize` (KiB) of an nvml OS device (draguard's exporter)
};
/// "CUDAGlobalMemorySize", "RSMIVRAMSize", "OpenCLGlobalMemorySize", "NVMLTotalMemorySize" or ""
/// for kUnknown.
const char* MemorySourceName(MemorySource source);

/// Sentinel for "no PCIe root known" in index fields.
inline constexpr uint32_t kNoIndex = 0xffffffffu;

/// MIG mode of a GPU as the export records it (NVIDIAMIGMode info of its nvml OS device).
enum class MigMode : uint8_t { kUnknown, kDisabled, kEnabled };

/// One configured MIG GPU instance (an NVIDIAMIGGPUInstance info, see exporter.h).
struct MigInstance {
  std::string profile;          ///< "1g.10gb", ...
  uint32_t id = 0;              ///< GPU instance id
  uint32_t profile_id = 0;      ///< NVML profile id
  uint32_t slices = 0;          ///< GPU slices
  uint64_t memory_bytes = 0;    ///< profile memory
  uint32_t placement_start = 0; ///< first memory slice
  uint32_t placement_size = 0;  ///< memory slices
  bool operator==(const MigInstance&) const = default;
};

/// One GPU, counted by PCI device (all its OS devices - cuda, nvml, rsmi, opencl, card,
/// renderD - are aliases of it).
struct Gpu {
  std::string pci_bus_id;  ///< "dddd:bb:dd.f", lower-case hex
  GpuVendor vendor = GpuVendor::kNvidia;
  uint16_t vendor_id = 0;  ///< PCI vendor id (0x10de, 0x1002)
  uint16_t device_id = 0;  ///< PCI device id
  uint16_t pci_class = 0;  ///< PCI class (0x0302, 0x0380, ...)
  std::string model;       ///< GPUModel of the best OS device, else the PCI device name; may be empty
  std::optional<uint64_t> memory_bytes;            ///< as the export says; see memory_source
  MemorySource memory_source = MemorySource::kUnknown;
  std::optional<uint32_t> sm_count;                ///< CUDA multiprocessors when known
  uint32_t pcie_root = kNoIndex;  ///< index into Shape::pcie_roots, or kNoIndex
  /// CPU-local NUMA node OS indexes, ascending: the nodes of the CPUs nearest the GPU's PCI
  /// function (never a GPU's own memory node, see memory_numa_node).
  std::vector<uint32_t> numa_nodes;
  /// OS index of the NUMA node that is this GPU's own memory, kNoIndex when the export shows none.
  /// On NVIDIA Grace (GH200, GB200, GB300) and IBM POWER9 the GPU's memory is a CPU-less NUMA
  /// node (hwloc subtype "GPUMemory" with the GPU's PCIBusID), distinct from the CPU-local
  /// numa_nodes; the NVIDIA DRA driver publishes it as the GPU's resource.kubernetes.io/numaNode.
  uint32_t memory_numa_node = kNoIndex;
  std::vector<std::string> os_devices;    ///< OS device names in export order
  uint32_t partitions = 1;                ///< number of rsmi partitions (MI300A TPX/CPX), else 1
  MigMode mig_mode = MigMode::kUnknown;   ///< kUnknown unless the export records it
  std::vector<MigInstance> mig_instances; ///< configured GPU instances, ascending id
  bool operator==(const Gpu&) const = default;
};

/// One network or OpenFabrics OS device with a PCI parent.
struct Nic {
  std::string name;        ///< OS device name (eth0, ib0, mlx5_0, ...)
  std::string pci_bus_id;  ///< PCI function the device belongs to
  uint32_t pcie_root = kNoIndex;     ///< index into Shape::pcie_roots, or kNoIndex
  std::vector<uint32_t> numa_nodes;  ///< local NUMA node OS indexes, ascending
  /// True for OpenFabrics devices, for network devices on a PCI function that also carries an
  /// OpenFabrics device, and for InfiniBand-class (0c06) functions.
  bool rdma = false;
  bool operator==(const Nic&) const = default;
};

/// A GPU pair with a direct or switch-mediated link; a < b are indexes into Shape::gpus.
struct GpuLink {
  uint32_t a = 0;
  uint32_t b = 0;
  uint64_t mbps = 0;  ///< MB/s per direction as the matrix (after NVSwitch closure) says
  bool operator==(const GpuLink&) const = default;
};

/// A GPU linked directly to a CPU package (IBM POWER NVLink).
struct CpuLink {
  uint32_t gpu = 0;               ///< index into Shape::gpus
  uint32_t package_os_index = 0;  ///< OS index of the hwloc Package peer
  uint64_t mbps = 0;
  bool operator==(const CpuLink&) const = default;
};

/// One GPU interconnect read from an hwloc bandwidth matrix.
struct Interconnect {
  std::string source;               ///< matrix name ("NVLinkBandwidth"); empty when absent
  std::vector<GpuLink> peers;       ///< each linked GPU pair once, sorted by (a, b)
  std::vector<CpuLink> cpu_peers;   ///< GPU-CPU links (hetero matrices with Package peers)
  bool via_switch = false;          ///< GPU pairs were derived through NVSwitch peers
  bool operator==(const Interconnect&) const = default;
};

/// Answers computed once per shape for the rules and the claim generator.
struct DerivedAnswers {
  /// Per PCIe root (parallel to Shape::pcie_roots): GPU indexes under it.
  std::vector<std::vector<uint32_t>> gpus_by_root;
  /// Per NUMA node (parallel to Shape::numa_nodes): GPU indexes local to it.
  std::vector<std::vector<uint32_t>> gpus_by_numa;
  /// Per GPU: NIC indexes under the same PCIe root.
  std::vector<std::vector<uint32_t>> nics_same_root;
  /// Per GPU: NIC indexes sharing a NUMA node with it (includes the same-root ones).
  std::vector<std::vector<uint32_t>> nics_same_numa;
  /// Per GPU: local NICs, same root first, then same NUMA node.
  std::vector<std::vector<uint32_t>> local_nics;
  /// Per GPU: NVLink (or XGMI when there is no NVLink) peer GPU indexes, ascending.
  std::vector<std::vector<uint32_t>> link_peers;
  /// Maximal cliques of the GPU link graph (each ascending; largest first). Empty without links.
  std::vector<std::vector<uint32_t>> link_cliques;
  bool link_fully_connected = false;  ///< every GPU pair is linked (and there are >= 2 GPUs)
  uint32_t max_gpus_per_root = 0;     ///< largest number of GPUs under one PCIe root
  uint32_t max_gpus_per_numa = 0;     ///< largest number of GPUs local to one NUMA node
  uint32_t max_gpus_per_clique = 0;   ///< size of the largest clique (1 with GPUs but no links)
  bool operator==(const DerivedAnswers&) const = default;
};

/// The hardware of a node, shared by all nodes with identical hardware. Immutable once built.
struct Shape {
  std::vector<NumaNode> numa_nodes;  ///< ascending OS index
  std::vector<PcieRoot> pcie_roots;  ///< ascending (domain, bus)
  std::vector<Gpu> gpus;             ///< ascending PCI bus id
  std::vector<Nic> nics;             ///< ascending (PCI bus id, name)
  Interconnect nvlink;               ///< NVLinkBandwidth
  Interconnect xgmi;                 ///< XGMIBandwidth
  DerivedAnswers derived;            ///< computed by FinalizeShape()
  std::string fingerprint;           ///< 16 lower-case hex digits; computed by FinalizeShape()

  /// The pcieRoot string of `gpu` ("" when unknown).
  const std::string& PcieRootId(const Gpu& gpu) const;
  /// The pcieRoot string of `nic` ("" when unknown).
  const std::string& PcieRootId(const Nic& nic) const;
  /// Index of the NUMA node with `os_index` in numa_nodes, or kNoIndex.
  uint32_t NumaIndex(uint32_t os_index) const;
  /// The NUMA node (OS index) that the NVIDIA DRA driver publishes for `gpu` as
  /// resource.kubernetes.io/numaNode when that node is its CPUs' (so a numaNode constraint can
  /// align the GPU with CPUs, NICs and GPUs of the node): its one CPU-local node on a machine with
  /// several. kNoIndex when the GPU is local to no or several nodes, on a single-node machine, and
  /// for a GPU whose memory is a NUMA node of its own (the node it publishes then, which nothing
  /// else shares).
  uint32_t AlignableNumaNode(const Gpu& gpu) const;
  /// True when hardware content (everything but `derived`/`fingerprint`) is identical.
  bool SameHardware(const Shape& other) const;
};

/// Computes `derived` and `fingerprint` from the hardware fields. Called by the loader.
void FinalizeShape(Shape& shape);

/// Core type of a logical CPU as the export records it (hwloc CPU kinds, "CoreType" info).
enum class CoreKind : uint8_t {
  kStandard,     ///< no hybrid CPU kinds in the export
  kPerformance,  ///< a kind whose CoreType is "IntelCore" on a machine that also has "IntelAtom"
  kEfficiency    ///< a kind whose CoreType is "IntelAtom"
};

/// One logical CPU (an hwloc PU: a hardware thread) and where it sits. OS indexes are Linux's own
/// numbers: the CPU number, sysfs `core_id`, `physical_package_id`, the node number and the L3
/// cache `id`.
struct LogicalCpu {
  uint32_t os_index = 0;          ///< Linux CPU number (hwloc PU P#)
  uint32_t core = kNoIndex;       ///< OS index of its Core (sysfs core_id), kNoIndex when the export has none
  uint32_t core_group = kNoIndex; ///< the export's Core object it belongs to, numbered in PU order; kNoIndex without one
  uint32_t package = kNoIndex;    ///< OS index of its Package (socket), kNoIndex when none or unnumbered
  /// OS index of its NUMA node: the one node whose CPUs include it (a node with CPUs of its own
  /// when several do, e.g. a DRAM node beside an HBM node); kNoIndex when not exactly one.
  uint32_t numa_node = kNoIndex;
  uint32_t l3_cache = kNoIndex;   ///< OS index (sysfs id) of its L3 cache; kNoIndex when absent or unnumbered
  CoreKind kind = CoreKind::kStandard;
  bool operator==(const LogicalCpu&) const = default;
};

/// The logical CPUs of a node, ascending OS index, shared by nodes with identical CPUs.
using CpuList = std::vector<LogicalCpu>;

/// One Kubernetes node's topology: per-node identity plus a shared Shape.
struct NodeTopology {
  std::string name;           ///< Kubernetes node name
  std::string source;         ///< where the export came from (file path, ConfigMap, "bundled:...")
  std::string version;        ///< source version (file mtime ns, resourceVersion, ...)
  std::string hwloc_version;  ///< exporter's `hwlocVersion` info; empty when not recorded
  std::string host_name;      ///< export's `HostName` info; empty when not recorded
  std::string xml_format;     ///< "1.x" or "2.0"
  /// Per GPU (parallel to shape->gpus): UUID from NVIDIAUUID / AMDUUID, empty when unknown.
  std::vector<std::string> gpu_uuids;
  /// Per NUMA node (parallel to shape->numa_nodes): OS index of the CPU package (socket) that
  /// holds it, kNoIndex for a node in no single package; empty when the export names no package.
  /// Kept per node, outside the Shape: packages decide no placement, so they neither split shapes
  /// nor change shape fingerprints (a shape's picture shows the packages of the node drawn).
  std::vector<uint32_t> numa_packages;
  /// The NVLink clique of the node's GPUs ("<cluster UUID>.<clique id>", see IsNvlinkClique):
  /// GPUs of nodes with one clique share an NVLink domain across nodes (GB200/GB300 NVL72 trays).
  /// Empty when the export records none or its GPUs disagree. Per node: identical trays in two
  /// racks have one shape and two cliques.
  std::string nvlink_clique;
  /// The node's logical CPUs (never null; empty when the export lists no PU). Kept outside the
  /// Shape like numa_packages: CPU numbering decides no placement, so it neither splits shapes
  /// nor changes shape fingerprints. Shared between nodes with identical CPU lists.
  std::shared_ptr<const CpuList> cpus = std::make_shared<const CpuList>();
  std::shared_ptr<const Shape> shape;  ///< never null

  /// UUID of GPU `gpu_index`, or std::nullopt when the export has none.
  std::optional<std::string_view> GpuUuid(uint32_t gpu_index) const;
  /// OS index of the package holding NUMA node `numa_index` (an index into shape->numa_nodes),
  /// or kNoIndex when unknown.
  uint32_t NumaPackage(uint32_t numa_index) const;
};

}  // namespace draguard::topology
