// Internal: the small subset of NVIDIA's NVML C ABI (nvml.h) that nvml.cc uses, declared here so
// that draguard builds without the CUDA toolkit. Layouts and values follow nvml.h; the test fake
// library (test/unit/topology/fake_nvml.cc) implements the same subset.
#pragma once

#include <cstdint>

extern "C" {

typedef int nvmlReturn_t;  // nvmlReturn_enum
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlGpuInstance_st* nvmlGpuInstance_t;
typedef int nvmlEnableState_t;  // nvmlEnableState_enum

enum : int {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_UNKNOWN = 999,
};
enum : int { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 };
enum : unsigned { NVML_DEVICE_MIG_DISABLE = 0, NVML_DEVICE_MIG_ENABLE = 1 };

constexpr unsigned NVML_NVLINK_MAX_LINKS = 18;
constexpr unsigned NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96;
constexpr unsigned NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96;
constexpr unsigned NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32;
constexpr unsigned NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE = 16;
/// Profile indexes 0 (1 slice) ... 0x10 (2 slices, all media engines) in current nvml.h.
constexpr unsigned NVML_GPU_INSTANCE_PROFILE_COUNT_MAX = 0x11;

typedef struct nvmlPciInfo_st {
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;     // device id << 16 | vendor id
  unsigned int pciSubSystemId;
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];  // "dddddddd:bb:dd.f"
} nvmlPciInfo_t;

typedef struct nvmlMemory_st {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlGpuInstancePlacement_st {
  unsigned int start;
  unsigned int size;
} nvmlGpuInstancePlacement_t;

typedef struct nvmlGpuInstanceProfileInfo_st {
  unsigned int id;
  unsigned int isP2pSupported;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;
} nvmlGpuInstanceProfileInfo_t;

typedef struct nvmlGpuInstanceInfo_st {
  nvmlDevice_t device;
  unsigned int id;
  unsigned int profileId;
  nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;

constexpr unsigned NVML_GPU_FABRIC_UUID_LEN = 16;
/// nvmlGpuFabricState_t
enum : unsigned char {
  NVML_GPU_FABRIC_STATE_NOT_SUPPORTED = 0,
  NVML_GPU_FABRIC_STATE_NOT_STARTED = 1,
  NVML_GPU_FABRIC_STATE_IN_PROGRESS = 2,
  NVML_GPU_FABRIC_STATE_COMPLETED = 3,
};

/// nvmlGpuFabricInfo_v3_t (= nvmlGpuFabricInfoV_t), for nvmlDeviceGetGpuFabricInfoV ("Hopper or
/// newer"); `version` is set by the caller. v2 is the same without healthSummary.
typedef struct nvmlGpuFabricInfo_v3_st {
  unsigned int version;
  unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN];
  nvmlReturn_t status;  // meaningful when state is COMPLETED
  unsigned int cliqueId;
  unsigned char state;  // nvmlGpuFabricState_t
  unsigned int healthMask;
  unsigned char healthSummary;
} nvmlGpuFabricInfoV_t;
static_assert(sizeof(nvmlGpuFabricInfoV_t) == 40, "nvmlGpuFabricInfo_v3_t layout");
/// NVML_STRUCT_VERSION(GpuFabricInfo, 3) and (…, 2): sizeof | version << 24.
constexpr unsigned nvmlGpuFabricInfo_v3 = 40u | (3u << 24);
constexpr unsigned nvmlGpuFabricInfo_v2 = 36u | (2u << 24);

// Entry point types, named after the functions.
using nvmlInit_v2_fn = nvmlReturn_t (*)();
using nvmlShutdown_fn = nvmlReturn_t (*)();
using nvmlErrorString_fn = const char* (*)(nvmlReturn_t);
using nvmlDeviceGetCount_v2_fn = nvmlReturn_t (*)(unsigned int*);
using nvmlDeviceGetHandleByIndex_v2_fn = nvmlReturn_t (*)(unsigned int, nvmlDevice_t*);
using nvmlDeviceGetPciInfo_v3_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlPciInfo_t*);
using nvmlDeviceGetUUID_fn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);
using nvmlDeviceGetName_fn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);
using nvmlDeviceGetMemoryInfo_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*);
using nvmlDeviceGetMigMode_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, unsigned int*);
using nvmlDeviceGetNvLinkState_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int, nvmlEnableState_t*);
using nvmlDeviceGetNvLinkVersion_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int, unsigned int*);
using nvmlDeviceGetNvLinkRemotePciInfo_v2_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int, nvmlPciInfo_t*);
using nvmlDeviceGetGpuInstanceProfileInfo_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int,
                                                                nvmlGpuInstanceProfileInfo_t*);
using nvmlDeviceGetGpuInstances_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int, nvmlGpuInstance_t*, unsigned int*);
using nvmlDeviceGetGpuFabricInfoV_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlGpuFabricInfoV_t*);
using nvmlGpuInstanceGetInfo_fn = nvmlReturn_t (*)(nvmlGpuInstance_t, nvmlGpuInstanceInfo_t*);

}  // extern "C"
