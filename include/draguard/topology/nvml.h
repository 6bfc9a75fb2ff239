// What NVML says about the GPUs of this machine, read through libnvidia-ml loaded at run time.
//
// libnvidia-ml.so.1 is never a link-time dependency: ReadNvml dlopen()s it (the NVIDIA container
// toolkit injects it into GPU containers), resolves the few entry points it uses, checks every
// return code and unloads it again. The values below are plain data, free of NVML types.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "draguard/status.h"

namespace draguard::topology {

/// Library ReadNvml loads when no path is given.
inline constexpr const char* kNvmlLibrary = "libnvidia-ml.so.1";
/// Environment variable that overrides the library path (tests, unusual driver layouts).
inline constexpr const char* kNvmlLibraryEnv = "DRAGUARD_NVML_LIBRARY";

/// One NVLink of a GPU.
struct NvmlLink {
  uint32_t link = 0;        ///< link number on the GPU
  bool active = false;      ///< nvmlDeviceGetNvLinkState says enabled
  uint32_t version = 0;     ///< nvmlDeviceGetNvLinkVersion (1 = NVLink 1.0 ... 7 = NVLink 5); 0 unknown
  std::string remote_pci;   ///< remote end "dddd:bb:dd.f" (a GPU, an NVSwitch, a CPU bridge)
  bool operator==(const NvmlLink&) const = default;
};

/// One configured MIG GPU instance.
struct NvmlMigInstance {
  std::string profile;          ///< "<slices>g.<GiB>gb", e.g. "1g.10gb" (memory rounded up)
  uint32_t id = 0;              ///< GPU instance id on its GPU
  uint32_t profile_id = 0;      ///< NVML GPU instance profile id
  uint32_t slices = 0;          ///< GPU slices of the profile
  uint64_t memory_bytes = 0;    ///< profile memory
  uint32_t placement_start = 0; ///< first memory slice
  uint32_t placement_size = 0;  ///< memory slices
  bool operator==(const NvmlMigInstance&) const = default;
};

/// A GPU's NVLink fabric membership (nvmlDeviceGetGpuFabricInfoV, multi-node NVLink: GB200 and
/// GB300 NVL72, GH200 NVL32): GPUs of one clique share one NVLink domain across nodes.
struct NvmlFabric {
  std::string cluster_uuid;  ///< the fabric's cluster UUID, lower-case 8-4-4-4-12 hex
  uint32_t clique_id = 0;    ///< the clique within it
  /// "<cluster_uuid>.<clique_id>": the value of the node label nvidia.com/gpu.clique.
  std::string Clique() const { return cluster_uuid + "." + std::to_string(clique_id); }
  bool operator==(const NvmlFabric&) const = default;
};

/// One GPU as NVML reports it.
struct NvmlGpu {
  uint32_t index = 0;                     ///< NVML device index
  std::string pci_bus_id;                 ///< "dddd:bb:dd.f", lower-case hex
  std::string uuid;                       ///< "GPU-..."
  std::string name;                       ///< product name ("NVIDIA H100 80GB HBM3")
  uint64_t memory_bytes = 0;              ///< total framebuffer memory
  bool mig_enabled = false;               ///< current MIG mode
  std::vector<NvmlMigInstance> mig_instances;  ///< configured GPU instances (MIG enabled only)
  std::vector<NvmlLink> links;            ///< NVLinks that answered, by link number
  /// Set when the GPU has completed its registration with an NVLink fabric (state COMPLETED,
  /// status SUCCESS, a non-zero cluster UUID: what GPU Feature Discovery and the NVIDIA DRA
  /// driver call "fabric attached"); empty without a fabric.
  std::optional<NvmlFabric> fabric;
  bool operator==(const NvmlGpu&) const = default;
};

/// The result of one NVML read.
struct NvmlReport {
  std::string library;                ///< the library that was loaded
  std::vector<NvmlGpu> gpus;          ///< GPUs that answered, in NVML index order
  std::vector<std::string> warnings;  ///< GPUs or links skipped, and why
};

/// The library to load: `path` when set, else $DRAGUARD_NVML_LIBRARY, else kNvmlLibrary.
std::string NvmlLibraryPath(const std::string& path = {});

/// Loads `library`, initialises NVML and reads every GPU. NotFound when the library cannot be
/// loaded or lacks an entry point, Unavailable when nvmlInit or the device count fails. A GPU that
/// errors is skipped with a warning (the others are still read). Not thread-safe with itself
/// (NVML init/shutdown are process-wide).
Result<NvmlReport> ReadNvml(const std::string& library);

}  // namespace draguard::topology
