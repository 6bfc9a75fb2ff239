// Simulated DRA devices: for each NVIDIA GPU of a node, the attributes and capacities the NVIDIA
// DRA driver (gpu.nvidia.com) would publish for the full GPU, as far as an hwloc export can tell,
// so that selectors can be evaluated against real topologies. Attribute names follow the
// driver's deviceinfo.go (see docs/topology.md); what the export cannot know is listed in
// `unknown`, never invented.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "draguard/topology/model.h"

namespace draguard::topology {

/// Driver name of the NVIDIA DRA driver.
inline constexpr std::string_view kNvidiaDriver = "gpu.nvidia.com";

/// One attribute: domain ("gpu.nvidia.com", "resource.kubernetes.io"), name and value.
struct SimulatedAttribute {
  std::string domain;
  std::string name;
  std::variant<std::string, int64_t, bool> value;
};

/// One capacity in bytes (or a plain count, see `count`), and where the figure came from.
struct SimulatedCapacity {
  std::string domain;
  std::string name;
  uint64_t bytes = 0;  ///< the value: bytes, or a number of items when `count`
  /// "nvml-table" (NVML Total from the cited table in dra_devices.cc, what the driver publishes)
  /// or the export attribute used ("CUDAGlobalMemorySize", a few hundred MiB below NVML Total).
  std::string source;
  bool count = false;  ///< `bytes` is a count (dra.cpu/cpu: CPUs), published as a plain number
};

/// One device as the driver would publish it in a ResourceSlice.
struct SimulatedDevice {
  std::string name;        ///< "gpu-<n>", n = position in PCI bus order (NVML's default order)
  uint32_t gpu_index = 0;  ///< index into shape->gpus
  std::string driver;      ///< kNvidiaDriver
  /// For a MIG device (type "mig", named as MigDeviceName says): its index in
  /// shape->gpus[gpu_index].mig_instances; -1 for a full GPU.
  int64_t mig_instance = -1;
  std::vector<SimulatedAttribute> attributes;
  std::vector<SimulatedCapacity> capacity;
  /// Attributes/capacities the driver publishes but the export cannot provide (e.g.
  /// "gpu.nvidia.com/driverVersion", "gpu.nvidia.com/memory" when no size is known).
  std::vector<std::string> unknown;
  /// CPU devices (driver kCpuDriver): the Linux CPU numbers the device stands for.
  std::vector<uint32_t> cpus;
  /// The device may be allocated to several claims at once (`allowMultipleAllocations`; grouped
  /// CPU devices, whose capacity dra.cpu/cpu is consumed per claim).
  bool allow_multiple_allocations = false;
};

/// Driver name (and DeviceClass name) of kubernetes-sigs/dra-driver-cpu.
inline constexpr std::string_view kCpuDriver = "dra.cpu";

/// How dra-driver-cpu publishes CPUs (its `cpuDeviceMode`; grouped means `groupBy: numanode`, the
/// driver's default).
enum class CpuDeviceMode : uint8_t {
  kNone,        ///< the driver is not installed: no CPU devices
  kGrouped,     ///< one device per NUMA node with CPUs, "cpudevnuma<NNN>", consumable dra.cpu/cpu
  kIndividual,  ///< one device per logical CPU, "cpudev<NNN>", SMT siblings named consecutively
};

/// The CPU devices of a node.
struct SimulatedCpuDevices {
  std::vector<SimulatedDevice> devices;  ///< in the driver's order
  /// Why there are none although a mode is set (the driver would not start, or the export lists
  /// no CPUs); empty otherwise.
  std::string refused;
  /// Caveats for every device ("smtEnabled derived from ...").
  std::vector<std::string> notes;
};

/// The CPU devices dra-driver-cpu would publish for `node` in `mode`, from node.cpus, assuming no
/// reserved CPUs (the driver's default). Grouped: per NUMA node with CPUs, ascending node number,
/// `resource.kubernetes.io/numaNode`, `dra.cpu/socketID`, `numCPUs`, `smtEnabled`, the
/// compatibility `dra.cpu/numaNodeID` and `dra.net/numaNode`, capacity `dra.cpu/cpu` = its CPUs.
/// Individual: CPUs ascending, each core's SMT sibling right after it, named by that position, with
/// numaNode, `cpuID`, `coreID`, `coreType`, `cacheL3ID`, `socketID`, `smtEnabled` and the two
/// compatibility attributes. Values the export cannot tell are listed in `unknown`. None when the
/// export has a core with more than two CPUs (the driver refuses to start; `refused` says so).
SimulatedCpuDevices SimulateCpuDevices(const NodeTopology& node, CpuDeviceMode mode);

/// The simulated devices of `node` (NVIDIA GPUs only; AMD GPUs are not simulated). A full GPU has
/// type, uuid, productName, the standard pciBusID, pcieRoot and numaNode (each when known) and
/// capacity memory. A GPU whose export records MIG enabled yields its configured GPU instances
/// instead (type "mig", profile, parentUUID, productName, the parent's pciBusID / pcieRoot /
/// numaNode, capacity memory and one `memorySlice<i>` = 1 per occupied memory slice), as the
/// driver's v0.5 deviceinfo.go / mig.go publish them.
std::vector<SimulatedDevice> SimulateDraDevices(const NodeTopology& node);

/// The driver's canonical MIG device name (mig.go `ToCanonicalName`):
/// "gpu-<parent>-mig-<profile without dots, RFC 1123>-<GI profile id>-<placement start>", e.g.
/// "gpu-0-mig-1g10gb-19-0", "gpu-1-mig-1g10gb-me-20-6" for "1g.10gb+me".
std::string MigDeviceName(uint32_t parent, std::string_view profile, uint32_t profile_id, uint32_t placement_start);

/// NVML total memory in bytes for a known PCI device (vendor 0x10de), or 0 when not in the table.
uint64_t NvmlTotalMemoryBytes(uint16_t device_id);

/// Every NVML total memory figure of that table, ascending (what known GPUs report).
std::vector<uint64_t> NvmlKnownMemoryBytes();

}  // namespace draguard::topology
