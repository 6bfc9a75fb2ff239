// NVML read through dlopen (nvml.h). The only file of draguard that calls NVML.
#include "draguard/topology/nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "nvml_abi.h"

namespace draguard::topology {
namespace {

// The resolved entry points of one loaded library.
struct Api {
  nvmlInit_v2_fn init = nullptr;
  nvmlShutdown_fn shutdown = nullptr;
  nvmlErrorString_fn error_string = nullptr;
  nvmlDeviceGetCount_v2_fn count = nullptr;
  nvmlDeviceGetHandleByIndex_v2_fn handle = nullptr;
  nvmlDeviceGetPciInfo_v3_fn pci = nullptr;
  nvmlDeviceGetUUID_fn uuid = nullptr;
  nvmlDeviceGetName_fn name = nullptr;
  nvmlDeviceGetMemoryInfo_fn memory = nullptr;
  // Optional (older drivers, non-NVLink or non-MIG builds): a missing one reads as "not supported".
  nvmlDeviceGetMigMode_fn mig_mode = nullptr;
  nvmlDeviceGetNvLinkState_fn link_state = nullptr;
  nvmlDeviceGetNvLinkVersion_fn link_version = nullptr;
  nvmlDeviceGetNvLinkRemotePciInfo_v2_fn link_remote = nullptr;
  nvmlDeviceGetGpuInstanceProfileInfo_fn gi_profile = nullptr;
  nvmlDeviceGetGpuInstances_fn gi_list = nullptr;
  nvmlGpuInstanceGetInfo_fn gi_info = nullptr;
  nvmlDeviceGetGpuFabricInfoV_fn fabric = nullptr;

  std::string Error(nvmlReturn_t r) const {
    const char* s = error_string != nullptr ? error_string(r) : nullptr;
    return (s != nullptr ? std::string(s) : std::string("NVML error")) + " (" + std::to_string(r) + ")";
  }
};

// dlclose()s the library when it goes out of scope.
class Library {
 public:
  explicit Library(void* h) : h_(h) {}
  ~Library() {
    if (h_ != nullptr) dlclose(h_);
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  template <typename F>
  bool Resolve(const char* symbol, F& fn) const {
    fn = reinterpret_cast<F>(dlsym(h_, symbol));
    return fn != nullptr;
  }

 private:
  void* h_;
};

// A NUL-terminated copy of a fixed-size NVML buffer.
std::string FromBuffer(const char* buf, size_t size) { return std::string(buf, strnlen(buf, size)); }

// "dddd:bb:dd.f" from an NVML PCI record (whose busId may be "00000000:4E:00.0").
std::string BusIdOf(const nvmlPciInfo_t& p) {
  const std::string id = FromBuffer(p.busId, sizeof p.busId);
  unsigned func = 0;
  if (const size_t dot = id.rfind('.'); dot != std::string::npos && dot + 1 < id.size()) {
    func = static_cast<unsigned>(std::strtoul(id.c_str() + dot + 1, nullptr, 16)) & 0x7;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", p.domain & 0xffffu, p.bus & 0xffu, p.device & 0x1fu, func);
  return buf;
}

// The profile string the NVIDIA DRA driver publishes (go-nvlib's MigProfileInfo.String() for a GPU
// instance): "<slices>g.<GB>gb" plus the suffix of the profile index (NVML_GPU_INSTANCE_PROFILE_*:
// 7/8 "+me", 10-12 "+gfx", 13/14 "-me", 15/16 "+me.all"). GB is go-nvlib's getMigMemorySizeGB: the
// instance's share of the GPU's memory rounded up to eighths, times the GPU's memory in whole GB
// (rounded up), rounded half away from zero; so an H200's 1-slice instance reads "1g.18gb", not the
// 17 its MiB alone would give. Without the GPU's total the MiB are rounded up to GiB.
std::string ProfileName(unsigned index, uint32_t slices, unsigned long long memory_mib, uint64_t device_bytes) {
  constexpr uint64_t kGiB = uint64_t{1} << 30;
  uint64_t gb = (memory_mib + 1023) / 1024;
  if (device_bytes != 0) {
    const double share = std::ceil(static_cast<double>(memory_mib) * (1 << 20) / static_cast<double>(device_bytes) * 8) / 8;
    const double total_gb = static_cast<double>((device_bytes + kGiB - 1) / kGiB);
    gb = static_cast<uint64_t>(std::round(share * total_gb));
  }
  const char* suffix = "";
  switch (index) {
    case 7: case 8: suffix = "+me"; break;
    case 10: case 11: case 12: suffix = "+gfx"; break;
    case 13: case 14: suffix = "-me"; break;
    case 15: case 16: suffix = "+me.all"; break;
    default: break;
  }
  return std::to_string(slices) + "g." + std::to_string(gb) + "gb" + suffix;
}

void ReadMig(const Api& api, nvmlDevice_t dev, NvmlGpu& g, std::vector<std::string>& warnings) {
  if (api.mig_mode == nullptr) return;
  unsigned current = 0, pending = 0;
  const nvmlReturn_t r = api.mig_mode(dev, &current, &pending);
  if (r == NVML_ERROR_NOT_SUPPORTED) return;
  if (r != NVML_SUCCESS) {
    warnings.push_back("GPU " + g.pci_bus_id + ": nvmlDeviceGetMigMode: " + api.Error(r));
    return;
  }
  g.mig_enabled = current == NVML_DEVICE_MIG_ENABLE;
  if (!g.mig_enabled || api.gi_profile == nullptr || api.gi_list == nullptr || api.gi_info == nullptr) return;
  for (unsigned p = 0; p < NVML_GPU_INSTANCE_PROFILE_COUNT_MAX; ++p) {
    nvmlGpuInstanceProfileInfo_t info{};
    const nvmlReturn_t pr = api.gi_profile(dev, p, &info);
    if (pr == NVML_ERROR_NOT_SUPPORTED || pr == NVML_ERROR_INVALID_ARGUMENT) continue;  // profile absent
    if (pr != NVML_SUCCESS) {
      warnings.push_back("GPU " + g.pci_bus_id + ": nvmlDeviceGetGpuInstanceProfileInfo(" + std::to_string(p) +
                         "): " + api.Error(pr));
      continue;
    }
    const unsigned cap = std::min(info.instanceCount, 64u);
    if (cap == 0) continue;
    std::vector<nvmlGpuInstance_t> instances(cap, nullptr);
    unsigned n = cap;
    const nvmlReturn_t lr = api.gi_list(dev, info.id, instances.data(), &n);
    if (lr != NVML_SUCCESS) {
      warnings.push_back("GPU " + g.pci_bus_id + ": nvmlDeviceGetGpuInstances(profile " + std::to_string(info.id) +
                         "): " + api.Error(lr));
      continue;
    }
    for (unsigned i = 0; i < std::min(n, cap); ++i) {
      nvmlGpuInstanceInfo_t gi{};
      const nvmlReturn_t ir = api.gi_info(instances[i], &gi);
      if (ir != NVML_SUCCESS) {
        warnings.push_back("GPU " + g.pci_bus_id + ": nvmlGpuInstanceGetInfo: " + api.Error(ir));
        continue;
      }
      NvmlMigInstance m;
      m.profile = ProfileName(p, info.sliceCount, info.memorySizeMB, g.memory_bytes);
      m.id = gi.id;
      m.profile_id = info.id;
      m.slices = info.sliceCount;
      m.memory_bytes = info.memorySizeMB << 20;
      m.placement_start = gi.placement.start;
      m.placement_size = gi.placement.size;
      g.mig_instances.push_back(std::move(m));
    }
  }
  std::sort(g.mig_instances.begin(), g.mig_instances.end(),
            [](const NvmlMigInstance& a, const NvmlMigInstance& b) { return a.id < b.id; });
}

void ReadLinks(const Api& api, nvmlDevice_t dev, NvmlGpu& g, std::vector<std::string>& warnings) {
  if (api.link_state == nullptr || api.link_version == nullptr || api.link_remote == nullptr) return;
  for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; ++l) {
    nvmlEnableState_t state = NVML_FEATURE_DISABLED;
    const nvmlReturn_t sr = api.link_state(dev, l, &state);
    // NOT_SUPPORTED / INVALID_ARGUMENT: no such link (or no NVLink at all).
    if (sr == NVML_ERROR_NOT_SUPPORTED || sr == NVML_ERROR_INVALID_ARGUMENT) continue;
    if (sr != NVML_SUCCESS) {
      warnings.push_back("GPU " + g.pci_bus_id + " NVLink " + std::to_string(l) + ": nvmlDeviceGetNvLinkState: " +
                         api.Error(sr));
      continue;
    }
    NvmlLink link;
    link.link = l;
    link.active = state == NVML_FEATURE_ENABLED;
    if (link.active) {
      unsigned version = 0;
      const nvmlReturn_t vr = api.link_version(dev, l, &version);
      nvmlPciInfo_t remote{};
      const nvmlReturn_t rr = api.link_remote(dev, l, &remote);
      if (vr != NVML_SUCCESS || rr != NVML_SUCCESS) {
        warnings.push_back("GPU " + g.pci_bus_id + " NVLink " + std::to_string(l) + ": " +
                           (vr != NVML_SUCCESS ? "nvmlDeviceGetNvLinkVersion: " + api.Error(vr)
                                               : "nvmlDeviceGetNvLinkRemotePciInfo_v2: " + api.Error(rr)));
        continue;
      }
      link.version = version;
      link.remote_pci = BusIdOf(remote);
    }
    g.links.push_back(std::move(link));
  }
}

// The NVLink fabric membership of a GPU, as GPU Feature Discovery and the NVIDIA DRA driver read
// it (go-nvlib IsFabricAttached): v3 of the versioned struct, v2 from drivers that know no v3.
// No entry point, NOT_SUPPORTED or state NOT_SUPPORTED: no fabric, silently. A fabric not (yet)
// completed, failed, or with a zero cluster UUID: no fabric, with a warning.
void ReadFabric(const Api& api, nvmlDevice_t dev, NvmlGpu& g, std::vector<std::string>& warnings) {
  if (api.fabric == nullptr) return;
  nvmlGpuFabricInfoV_t info{};
  info.version = nvmlGpuFabricInfo_v3;
  nvmlReturn_t r = api.fabric(dev, &info);
  if (r == NVML_ERROR_ARGUMENT_VERSION_MISMATCH) {
    info = nvmlGpuFabricInfoV_t{};
    info.version = nvmlGpuFabricInfo_v2;
    r = api.fabric(dev, &info);
  }
  if (r == NVML_ERROR_NOT_SUPPORTED) return;
  if (r != NVML_SUCCESS) {
    warnings.push_back("GPU " + g.pci_bus_id + ": nvmlDeviceGetGpuFabricInfoV: " + api.Error(r));
    return;
  }
  if (info.state == NVML_GPU_FABRIC_STATE_NOT_SUPPORTED) return;
  if (info.state != NVML_GPU_FABRIC_STATE_COMPLETED) {
    warnings.push_back("GPU " + g.pci_bus_id + ": NVLink fabric registration not completed (state " +
                       std::to_string(info.state) + "); no clique published until it is");
    return;
  }
  if (info.status != NVML_SUCCESS) {
    warnings.push_back("GPU " + g.pci_bus_id + ": NVLink fabric registration failed: " + api.Error(info.status));
    return;
  }
  bool zero = true;
  for (unsigned char b : info.clusterUuid) zero = zero && b == 0;
  if (zero) {
    warnings.push_back("GPU " + g.pci_bus_id + ": NVLink fabric with a zero cluster UUID; no clique");
    return;
  }
  // uuid.FromBytes(...).String(): the 16 bytes in order, lower-case 8-4-4-4-12.
  static constexpr char kHex[] = "0123456789abcdef";
  std::string uuid;
  for (unsigned i = 0; i < NVML_GPU_FABRIC_UUID_LEN; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) uuid += '-';
    uuid += kHex[info.clusterUuid[i] >> 4];
    uuid += kHex[info.clusterUuid[i] & 0xf];
  }
  g.fabric = NvmlFabric{std::move(uuid), info.cliqueId};
}

// One GPU; a failed mandatory query returns the message and skips the GPU.
Result<NvmlGpu> ReadGpu(const Api& api, unsigned index, std::vector<std::string>& warnings) {
  const std::string where = "NVML device " + std::to_string(index);
  nvmlDevice_t dev = nullptr;
  if (nvmlReturn_t r = api.handle(index, &dev); r != NVML_SUCCESS) {
    return Status::Unavailable(where + ": nvmlDeviceGetHandleByIndex_v2: " + api.Error(r));
  }
  NvmlGpu g;
  g.index = index;
  nvmlPciInfo_t pci{};
  if (nvmlReturn_t r = api.pci(dev, &pci); r != NVML_SUCCESS) {
    return Status::Unavailable(where + ": nvmlDeviceGetPciInfo_v3: " + api.Error(r));
  }
  g.pci_bus_id = BusIdOf(pci);
  char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  if (nvmlReturn_t r = api.uuid(dev, buf, sizeof buf); r != NVML_SUCCESS) {
    return Status::Unavailable(where + " (" + g.pci_bus_id + "): nvmlDeviceGetUUID: " + api.Error(r));
  }
  g.uuid = FromBuffer(buf, sizeof buf);
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  if (nvmlReturn_t r = api.name(dev, name, sizeof name); r != NVML_SUCCESS) {
    return Status::Unavailable(where + " (" + g.pci_bus_id + "): nvmlDeviceGetName: " + api.Error(r));
  }
  g.name = FromBuffer(name, sizeof name);
  nvmlMemory_t mem{};
  if (nvmlReturn_t r = api.memory(dev, &mem); r != NVML_SUCCESS) {
    warnings.push_back(where + " (" + g.pci_bus_id + "): nvmlDeviceGetMemoryInfo: " + api.Error(r));
  } else {
    g.memory_bytes = mem.total;
  }
  ReadMig(api, dev, g, warnings);
  ReadLinks(api, dev, g, warnings);
  ReadFabric(api, dev, g, warnings);
  return g;
}

}  // namespace

std::string NvmlLibraryPath(const std::string& path) {
  if (!path.empty()) return path;
  if (const char* env = std::getenv(kNvmlLibraryEnv); env != nullptr && *env != '\0') return env;
  return kNvmlLibrary;
}

Result<NvmlReport> ReadNvml(const std::string& library) {
  void* h = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* e = dlerror();
    return Status::NotFound("cannot load " + library + ": " + (e != nullptr ? e : "dlopen failed"));
  }
  Library lib(h);
  Api api;
  const bool required = lib.Resolve("nvmlInit_v2", api.init) && lib.Resolve("nvmlShutdown", api.shutdown) &&
                        lib.Resolve("nvmlErrorString", api.error_string) &&
                        lib.Resolve("nvmlDeviceGetCount_v2", api.count) &&
                        lib.Resolve("nvmlDeviceGetHandleByIndex_v2", api.handle) &&
                        lib.Resolve("nvmlDeviceGetPciInfo_v3", api.pci) && lib.Resolve("nvmlDeviceGetUUID", api.uuid) &&
                        lib.Resolve("nvmlDeviceGetName", api.name) &&
                        lib.Resolve("nvmlDeviceGetMemoryInfo", api.memory);
  if (!required) return Status::NotFound(library + ": not an NVML library (missing entry points)");
  (void)lib.Resolve("nvmlDeviceGetMigMode", api.mig_mode);
  (void)lib.Resolve("nvmlDeviceGetNvLinkState", api.link_state);
  (void)lib.Resolve("nvmlDeviceGetNvLinkVersion", api.link_version);
  (void)lib.Resolve("nvmlDeviceGetNvLinkRemotePciInfo_v2", api.link_remote);
  (void)lib.Resolve("nvmlDeviceGetGpuInstanceProfileInfo", api.gi_profile);
  (void)lib.Resolve("nvmlDeviceGetGpuInstances", api.gi_list);
  (void)lib.Resolve("nvmlGpuInstanceGetInfo", api.gi_info);
  (void)lib.Resolve("nvmlDeviceGetGpuFabricInfoV", api.fabric);

  if (nvmlReturn_t r = api.init(); r != NVML_SUCCESS) {
    return Status::Unavailable(library + ": nvmlInit_v2: " + api.Error(r));
  }
  NvmlReport report;
  report.library = library;
  unsigned count = 0;
  Status failure;
  if (nvmlReturn_t r = api.count(&count); r != NVML_SUCCESS) {
    failure = Status::Unavailable(library + ": nvmlDeviceGetCount_v2: " + api.Error(r));
  } else {
    count = std::min(count, 1024u);
    for (unsigned i = 0; i < count; ++i) {
      Result<NvmlGpu> g = ReadGpu(api, i, report.warnings);
      if (g.ok()) {
        report.gpus.push_back(std::move(g).value());
      } else {
        report.warnings.push_back(g.status().message() + "; GPU left out of the NVML enrichment");
      }
    }
  }
  if (nvmlReturn_t r = api.shutdown(); r != NVML_SUCCESS) {
    report.warnings.push_back(library + ": nvmlShutdown: " + api.Error(r));
  }
  if (!failure.ok()) return failure;
  return report;
}

}  // namespace draguard::topology
