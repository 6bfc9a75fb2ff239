// Internal: the libhwloc side of loading an export. hwloc_import.cc, the only file of draguard
// that includes <hwloc.h>, imports the XML with libhwloc and copies what the conversion
// (hwloc_convert.cc) needs into the plain values below; no hwloc type leaves it. Collections
// keep libhwloc's iteration order, so the conversion sees the objects as libhwloc lists them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "draguard/status.h"
#include "draguard/topology/loader.h"
#include "draguard/topology/model.h"

namespace draguard::topology::internal {

/// An object's info attributes (name, value), in export order.
using RawInfos = std::vector<std::pair<std::string, std::string>>;

/// A host bridge whose downstream side is PCI (a PCIe root complex).
struct RawHostBridge {
  uint64_t gp = 0;  ///< hwloc gp_index
  uint32_t domain = 0;
  uint32_t secondary_bus = 0;
  uint32_t subordinate_bus = 0;
  std::vector<uint32_t> local_numa;  ///< nodeset of the first non-I/O ancestor
};

/// OS device types the conversion tells apart.
enum class RawOsDevType : uint8_t { kOther, kNetwork, kOpenFabrics };

/// An OS device whose parent is a PCI device.
struct RawOsDevice {
  std::optional<std::string> name;  ///< nullopt when libhwloc gives none
  RawOsDevType type = RawOsDevType::kOther;
  RawInfos infos;
  uint32_t pci = 0;  ///< index of the parent in RawTopology::pci_devices
};

/// A PCI device (function).
struct RawPciDevice {
  uint64_t gp = 0;  ///< hwloc gp_index
  uint32_t domain = 0;
  uint32_t bus = 0;
  uint32_t dev = 0;
  uint32_t func = 0;
  uint16_t vendor_id = 0;
  uint16_t device_id = 0;
  uint16_t class_id = 0;
  std::optional<uint64_t> host_bridge_gp;  ///< gp_index of the host bridge above it (through bridges and PCI devices)
  std::vector<uint32_t> local_numa;  ///< nodeset of the first non-I/O ancestor
  RawInfos infos;
  std::vector<uint32_t> os_devices;  ///< its OS-device I/O children, as indexes into RawTopology::os_devices
};

/// One object of a bandwidth matrix.
struct RawMatrixObject {
  std::optional<uint64_t> pci_gp;  ///< gp_index of the PCI device it is or whose OS device it is
  int64_t package = -1;     ///< OS index when it is a CPU package
};

/// One bandwidth matrix, after hwloc's transitive closure when it has NVSwitch objects.
struct RawMatrix {
  std::vector<RawMatrixObject> objects;
  std::vector<uint64_t> values;  ///< objects.size()² values, row-major
  bool via_switch = false;       ///< the transitive closure through NVSwitches was applied
};

/// All matrices of one name; `found` when the export has any of that name (bandwidth or not).
struct RawMatrices {
  bool found = false;
  std::vector<RawMatrix> bandwidth;  ///< those whose kind means bandwidth
};

/// What an export holds for the conversion.
struct RawTopology {
  RawInfos root_infos;                      ///< infos of the root object (HostName, hwlocVersion, ...)
  std::vector<NumaNode> numa_nodes;         ///< libhwloc order
  /// Parallel to numa_nodes: OS index of the CPU package (socket) that holds the node (its
  /// ancestor, else the one package whose CPUs include all of the node's), or kNoIndex.
  std::vector<uint32_t> numa_packages;
  /// Parallel to numa_nodes: the `PCIBusID` info of a node holding a GPU's memory (hwloc's
  /// "GPUMemory" nodes, kept with HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES or by default on Grace since
  /// hwloc 2.11), lower-case "dddd:bb:dd.f"; empty for every other node.
  std::vector<std::string> numa_gpu_bus_ids;
  std::vector<LogicalCpu> cpus;             ///< PUs in libhwloc order (core_group numbered in that order)
  std::vector<RawHostBridge> host_bridges;  ///< libhwloc order
  std::vector<RawPciDevice> pci_devices;    ///< libhwloc order
  std::vector<RawOsDevice> os_devices;      ///< libhwloc order; only those with a PCI parent
  RawMatrices nvlink;                       ///< "NVLinkBandwidth"
  RawMatrices xgmi;                         ///< "XGMIBandwidth"
};

/// Loads libhwloc's components once and keeps them loaded for the life of the process (so no
/// import reloads its plugins). Called before any fork of an import worker. Thread-safe.
void KeepHwlocLoaded();

/// Imports a screened export (`format` "1.x" or "2.0", for messages) with libhwloc in this
/// process. On failure `reason` receives kMalformed.
Result<RawTopology> ReadHwlocXml(const std::string& xml, const std::string& format, LoadErrorReason* reason);

}  // namespace draguard::topology::internal
