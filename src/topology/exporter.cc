// ExportThisNode and the NVLink bandwidth table (exporter.h); the libhwloc part is hwloc_export.cc.
#include "draguard/topology/exporter.h"

namespace draguard::topology {

uint64_t NvlinkLinkBandwidth(uint32_t version) {
  if (version == 1) return 20000;
  if (version >= 2 && version <= 6) return 25000;
  if (version == 7) return 50000;
  return 0;
}

Result<LocalExport> ExportThisNode(const ExportOptions& options) {
  std::vector<std::string> warnings;
  Result<NvmlReport> nvml = Status::NotFound("NVML not used");
  if (options.use_nvml) {
    nvml = ReadNvml(NvmlLibraryPath(options.nvml_library));
    if (!nvml.ok()) {
      warnings.push_back("NVML unavailable (" + nvml.status().message() +
                         "); exporting without GPU UUIDs, memory, MIG and NVLink");
    } else {
      warnings.insert(warnings.end(), nvml->warnings.begin(), nvml->warnings.end());
    }
  }
  Result<LocalExport> out = ExportLocalTopology(nvml.ok() ? &nvml.value() : nullptr);
  if (!out.ok()) return out;
  warnings.insert(warnings.end(), out->warnings.begin(), out->warnings.end());
  out->warnings = std::move(warnings);
  return out;
}

}  // namespace draguard::topology
