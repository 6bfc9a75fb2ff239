// Exporting this machine's topology as an hwloc XML v2 document (`draguard topology export`).
//
// libhwloc discovers the local machine in-process with the loader's settings (all I/O kept,
// disallowed PUs and NUMA nodes included; HWLOC_FSROOT and HWLOC_COMPONENTS are honoured, so a
// recorded sysfs tree can stand in for the machine). Debian's libhwloc has no NVML backend, so
// what NVML reports (nvml.h) is merged in the form an NVML-enabled hwloc writes it:
//   * one OS device `nvml<index>` (subtype NVML, GPU type) under each GPU's PCI device, with the
//     infos Backend=NVML, GPUVendor, GPUModel, NVIDIAUUID, and draguard's own
//     NVMLTotalMemorySize (KiB), NVIDIAMIGMode (Enabled/Disabled) and one NVIDIAMIGGPUInstance
//     per configured GPU instance ("profile=1g.10gb id=1 profile_id=19 slices=1 memory_mib=9856
//     placement=6:1");
//   * an `NVLinkBandwidth` matrix (MB/s per direction, summed over the links of a pair, diagonal
//     1,000,000) over the nvml OS devices and, as hwloc does for NVSwitch systems, the NVSwitch
//     PCI devices the links reach (subtype NVSwitch; the matrix is then heterogeneous). Per link:
//     NVLink version 1 20000, versions 2-6 25000, version 7 50000 (hwloc >= 2.12's table).
// The result is what `lstopo -i` and the loader (loader.h) read.
#pragma once

#include <string>
#include <vector>

#include "draguard/status.h"
#include "draguard/topology/nvml.h"

namespace draguard::topology {

/// MB/s per direction of one NVLink of `version`; 0 for an unknown version.
uint64_t NvlinkLinkBandwidth(uint32_t version);

/// An export of this machine.
struct LocalExport {
  std::string xml;                    ///< hwloc XML v2
  size_t nvml_gpus = 0;               ///< NVML GPUs merged into the export
  std::vector<std::string> warnings;  ///< NVML devices or links left out, and why
};

/// Discovers the local machine with libhwloc and merges `nvml` (null: a plain export). Fails
/// only when libhwloc cannot discover or export the machine.
Result<LocalExport> ExportLocalTopology(const NvmlReport* nvml);

/// Options of ExportThisNode.
struct ExportOptions {
  bool use_nvml = true;      ///< false: never load NVML
  std::string nvml_library;  ///< see NvmlLibraryPath
};

/// Reads NVML (unless disabled; an NVML that cannot be loaded or initialised becomes a warning)
/// and exports the local machine with it.
Result<LocalExport> ExportThisNode(const ExportOptions& options);

}  // namespace draguard::topology
