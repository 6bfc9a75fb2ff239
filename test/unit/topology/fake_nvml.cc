// A fake libnvidia-ml.so.1 for hermetic exporter tests: it implements the NVML subset that
// src/topology/nvml.cc uses and answers from a scenario file named by $DRAGUARD_FAKE_NVML_SCENARIO,
// read at nvmlInit_v2. One directive per line ('#' comments):
//   init_error CODE                        nvmlInit_v2 fails with CODE
//   gpu BUSID UUID MEMORY_MIB MIG(0|1) NAME...   a GPU (index = order of appearance)
//   link GPU LINK VERSION REMOTE_BUSID     an active NVLink of GPU index GPU
//   down GPU LINK                          an inactive NVLink
//   error GPU FUNCTION CODE                FUNCTION (e.g. nvmlDeviceGetUUID) fails with CODE for GPU
//   profile GPU INDEX PROFILE_ID SLICES MEMORY_MIB COUNT   a MIG GPU instance profile
//   instance GPU PROFILE_ID GI_ID START SIZE               a configured GPU instance
//   fabric GPU CLUSTER_UUID CLIQUE STATE STATUS  NVLink fabric info (UUID as 32 hex digits, any
//                                          dashes); without it nvmlDeviceGetGpuFabricInfoV
//                                          answers NOT_SUPPORTED
//   fabric_v2_only                         nvmlDeviceGetGpuFabricInfoV refuses v3 (an older driver)
// The library state is process-wide, as the real NVML's is.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "nvml_abi.h"

namespace {

struct FakeLink {
  unsigned link = 0;
  bool active = true;
  unsigned version = 0;
  std::string remote;
};
struct FakeProfile {
  unsigned index = 0, id = 0, slices = 0, count = 0;
  unsigned long long memory_mib = 0;
};
struct FakeInstance {
  unsigned profile_id = 0, id = 0, start = 0, size = 0;
};
struct FakeFabric {
  bool set = false;
  unsigned char uuid[16] = {};
  unsigned clique = 0, state = 0;
  int status = 0;
};
struct FakeGpu {
  FakeFabric fabric;
  std::string bus, uuid, name;
  unsigned long long memory_mib = 0;
  unsigned mig = 0;
  std::vector<FakeLink> links;
  std::map<std::string, int> errors;  // function -> code
  std::vector<FakeProfile> profiles;
  std::vector<FakeInstance> instances;
};
struct FakeState {
  bool initialised = false;
  bool fabric_v2_only = false;
  std::vector<FakeGpu> gpus;
};

FakeState& State() {
  static FakeState state;  // the fake library's process-wide state, like NVML's own
  return state;
}

int Load() {
  FakeState& s = State();
  s.gpus.clear();
  s.fabric_v2_only = false;
  const char* path = std::getenv("DRAGUARD_FAKE_NVML_SCENARIO");
  if (path == nullptr) return NVML_ERROR_UNKNOWN;
  std::ifstream in(path);
  if (!in) return NVML_ERROR_UNKNOWN;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string kind;
    if (!(ls >> kind) || kind[0] == '#') continue;
    if (kind == "init_error") {
      int code = 0;
      ls >> code;
      return code;
    }
    if (kind == "fabric_v2_only") {
      s.fabric_v2_only = true;
      continue;
    }
    if (kind == "gpu") {
      FakeGpu g;
      ls >> g.bus >> g.uuid >> g.memory_mib >> g.mig;
      std::getline(ls >> std::ws, g.name);
      s.gpus.push_back(std::move(g));
      continue;
    }
    unsigned gpu = 0;
    if (!(ls >> gpu) || gpu >= s.gpus.size()) return NVML_ERROR_UNKNOWN;
    FakeGpu& g = s.gpus[gpu];
    if (kind == "link" || kind == "down") {
      FakeLink l;
      ls >> l.link;
      l.active = kind == "link";
      if (l.active) ls >> l.version >> l.remote;
      g.links.push_back(l);
    } else if (kind == "error") {
      std::string fn;
      int code = 0;
      ls >> fn >> code;
      g.errors[fn] = code;
    } else if (kind == "profile") {
      FakeProfile p;
      ls >> p.index >> p.id >> p.slices >> p.memory_mib >> p.count;
      g.profiles.push_back(p);
    } else if (kind == "fabric") {
      std::string hex;
      ls >> hex >> g.fabric.clique >> g.fabric.state >> g.fabric.status;
      std::erase(hex, '-');
      if (hex.size() != 32) return NVML_ERROR_UNKNOWN;
      for (int i = 0; i < 16; ++i) g.fabric.uuid[i] = static_cast<unsigned char>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
      g.fabric.set = true;
    } else if (kind == "instance") {
      FakeInstance i;
      ls >> i.profile_id >> i.id >> i.start >> i.size;
      g.instances.push_back(i);
    } else {
      return NVML_ERROR_UNKNOWN;
    }
  }
  return NVML_SUCCESS;
}

// Handles are 1-based indexes disguised as pointers; GPU instances encode gpu << 16 | instance.
FakeGpu* Gpu(nvmlDevice_t d) {
  const auto i = reinterpret_cast<uintptr_t>(d);
  FakeState& s = State();
  return s.initialised && i >= 1 && i <= s.gpus.size() ? &s.gpus[i - 1] : nullptr;
}

int Injected(FakeGpu* g, const char* fn) {
  auto it = g->errors.find(fn);
  return it == g->errors.end() ? NVML_SUCCESS : it->second;
}

const FakeLink* LinkOf(FakeGpu* g, unsigned link) {
  for (const FakeLink& l : g->links) {
    if (l.link == link) return &l;
  }
  return nullptr;
}

void FillPci(const std::string& bus, nvmlPciInfo_t* p) {
  std::memset(p, 0, sizeof *p);
  unsigned dom = 0, b = 0, dev = 0, fn = 0;
  std::sscanf(bus.c_str(), "%x:%x:%x.%x", &dom, &b, &dev, &fn);
  p->domain = dom;
  p->bus = b;
  p->device = dev;
  p->pciDeviceId = 0x233010de;
  std::snprintf(p->busId, sizeof p->busId, "%08X:%02X:%02X.%X", dom, b, dev, fn);
  std::snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "%04X:%02X:%02X.%X", dom, b, dev, fn);
}

int CopyString(const std::string& v, char* out, unsigned len) {
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (v.size() + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, v.c_str(), v.size() + 1);
  return NVML_SUCCESS;
}

}  // namespace

#define FAKE_GPU_OR_RETURN(dev, fn)                    \
  FakeGpu* g = Gpu(dev);                               \
  if (g == nullptr) return NVML_ERROR_INVALID_ARGUMENT; \
  if (int e = Injected(g, fn); e != NVML_SUCCESS) return e

extern "C" {

__attribute__((visibility("default"))) nvmlReturn_t nvmlInit_v2() {
  const int r = Load();
  State().initialised = r == NVML_SUCCESS;
  return r;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlShutdown() {
  if (!State().initialised) return NVML_ERROR_UNINITIALIZED;
  State().initialised = false;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    default: return "Unknown Error";
  }
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (!State().initialised) return NVML_ERROR_UNINITIALIZED;
  *count = static_cast<unsigned>(State().gpus.size());
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t* d) {
  if (!State().initialised || i >= State().gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
  if (int e = Injected(&State().gpus[i], "nvmlDeviceGetHandleByIndex_v2"); e != NVML_SUCCESS) return e;
  *d = reinterpret_cast<nvmlDevice_t>(static_cast<uintptr_t>(i + 1));
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t* p) {
  FAKE_GPU_OR_RETURN(d, "nvmlDeviceGetPciInfo_v3");
  FillPci(g->bus, p);
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* out, unsigned int len) {
  FAKE_GPU_OR_RETURN(d, "nvmlDeviceGetUUID");
  return CopyString(g->uuid, out, len);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* out, unsigned int len) {
  FAKE_GPU_OR_RETURN(d, "nvmlDeviceGetName");
  return CopyString(g->name, out, len);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t* m) {
  FAKE_GPU_OR_RETURN(d, "nvmlDeviceGetMemoryInfo");
  m->total = g->memory_mib << 20;
  m->used = 0;
  m->free = m->total;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int* current,
                                                                         unsigned int* pending) {
  FAKE_GPU_OR_RETURN(d, "nvmlDeviceGetMigMode");
  *current = g->mig;
  *pending = g->mig;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned int link,
                                                                             nvmlEnableState_t* active) {
  FAKE_GPU_OR_RETURN(d, "nvmlDeviceGetNvLinkState");
  const FakeLink* l = LinkOf(g, link);
  if (l == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  *active = l->active ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetNvLinkVersion(nvmlDevice_t d, unsigned int link,
                                                                               unsigned int* version) {
  FAKE_GPU_OR_RETURN(d, "nvmlDeviceGetNvLinkVersion");
  const FakeLink* l = LinkOf(g, link);
  if (l == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  *version = l->version;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d,
                                                                                        unsigned int link,
                                                                                        nvmlPciInfo_t* p) {
  FAKE_GPU_OR_RETURN(d, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  const FakeLink* l = LinkOf(g, link);
  if (l == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  FillPci(l->remote, p);
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(
    nvmlDevice_t d, unsigned int profile, nvmlGpuInstanceProfileInfo_t* info) {
  FAKE_GPU_OR_RETURN(d, "nvmlDeviceGetGpuInstanceProfileInfo");
  for (const FakeProfile& p : g->profiles) {
    if (p.index != profile) continue;
    std::memset(info, 0, sizeof *info);
    info->id = p.id;
    info->sliceCount = p.slices;
    info->instanceCount = p.count;
    info->memorySizeMB = p.memory_mib;
    return NVML_SUCCESS;
  }
  return NVML_ERROR_NOT_SUPPORTED;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t d, unsigned int profile_id,
                                                                              nvmlGpuInstance_t* out,
                                                                              unsigned int* count) {
  FAKE_GPU_OR_RETURN(d, "nvmlDeviceGetGpuInstances");
  const auto gi = reinterpret_cast<uintptr_t>(d);
  unsigned n = 0;
  for (size_t i = 0; i < g->instances.size(); ++i) {
    if (g->instances[i].profile_id != profile_id) continue;
    if (n >= *count) return NVML_ERROR_INSUFFICIENT_SIZE;
    out[n++] = reinterpret_cast<nvmlGpuInstance_t>(gi << 16 | (i + 1));
  }
  *count = n;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t h,
                                                                           nvmlGpuInstanceInfo_t* info) {
  const auto v = reinterpret_cast<uintptr_t>(h);
  FakeGpu* g = Gpu(reinterpret_cast<nvmlDevice_t>(v >> 16));
  const size_t i = v & 0xffff;
  if (g == nullptr || i == 0 || i > g->instances.size()) return NVML_ERROR_INVALID_ARGUMENT;
  const FakeInstance& fi = g->instances[i - 1];
  info->device = reinterpret_cast<nvmlDevice_t>(v >> 16);
  info->id = fi.id;
  info->profileId = fi.profile_id;
  info->placement.start = fi.start;
  info->placement.size = fi.size;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t d,
                                                                                nvmlGpuFabricInfoV_t* info) {
  FAKE_GPU_OR_RETURN(d, "nvmlDeviceGetGpuFabricInfoV");
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const bool v2 = info->version == nvmlGpuFabricInfo_v2;
  if (!v2 && (info->version != nvmlGpuFabricInfo_v3 || State().fabric_v2_only)) {
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  }
  if (!g->fabric.set) return NVML_ERROR_NOT_SUPPORTED;
  std::memcpy(info->clusterUuid, g->fabric.uuid, sizeof info->clusterUuid);
  info->cliqueId = g->fabric.clique;
  info->state = static_cast<unsigned char>(g->fabric.state);
  info->status = g->fabric.status;
  if (!v2) info->healthSummary = 1;
  return NVML_SUCCESS;
}

}  // extern "C"
