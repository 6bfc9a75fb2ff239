// Simulated NVIDIA DRA devices (see dra_devices.h).
#include "draguard/topology/dra_devices.h"

#include <algorithm>

namespace draguard::topology {
namespace {

// NVML `GetMemoryInfo().Total` (what the NVIDIA DRA driver publishes as capacity `memory`) by PCI
// device id. Figures: shared/docs/dra-reference.md §8 pitfall 1, citing `nvidia-smi` output in
// NVIDIA/nccl#1264 and modal-labs/modal-client PR #2797: H100 80GB HBM3 = 81559 MiB, A100 80GB =
// 81920 MiB. Device ids from the PCI ID database: 2330 = GH100 [H100 SXM5 80GB], 20b2 = GA100
// [A100 SXM4 80GB], 20b5 = GA100 [A100 PCIe 80GB]. Exports give CUDAGlobalMemorySize instead,
// a few hundred MiB less (81081 MiB for the H100).
struct NvmlMemory {
  uint16_t device_id;
  uint64_t mib;
};
constexpr NvmlMemory kNvmlMemory[] = {
    {0x2330, 81559},
    {0x20b2, 81920},
    {0x20b5, 81920},
};

// Attributes the driver publishes for a full GPU that no hwloc export carries.
constexpr const char* kNeverInExport[] = {"gpu.nvidia.com/brand", "gpu.nvidia.com/architecture",
                                          "gpu.nvidia.com/cudaComputeCapability", "gpu.nvidia.com/driverVersion",
                                          "gpu.nvidia.com/cudaDriverVersion"};

// Capacities of a MIG device that come from NVML's GPU instance profile info and that no export
// carries (mig.go CommonCapacitiesMig; `memory` is the profile's and is known).
constexpr const char* kMigProfileCapacities[] = {"gpu.nvidia.com/multiprocessors", "gpu.nvidia.com/copyEngines",
                                                 "gpu.nvidia.com/decoders",        "gpu.nvidia.com/encoders",
                                                 "gpu.nvidia.com/jpegEngines",     "gpu.nvidia.com/ofaEngines"};

// The standard NUMA attribute (KEP-6072) the driver publishes from the GPU's sysfs numa_node
// (numa.go, scalar unless its DRAListTypeAttributes gate is on); hwloc's locality of the PCI
// device comes from the same sysfs file. Unknown when the GPU is local to no or several nodes,
// and on a single-NUMA-node machine, whose firmware often reports no affinity (-1, no attribute).
void AddNumaNode(const Shape& s, const Gpu& g, std::vector<SimulatedAttribute>& attrs,
                 std::vector<std::string>& unknown) {
  if (g.numa_nodes.size() == 1 && s.numa_nodes.size() > 1) {
    attrs.push_back({"resource.kubernetes.io", "numaNode", static_cast<int64_t>(g.numa_nodes.front())});
  } else {
    unknown.push_back("resource.kubernetes.io/numaNode");
  }
}

}  // namespace

std::string MigDeviceName(uint32_t parent, std::string_view profile, uint32_t profile_id, uint32_t placement_start) {
  // mig.go toRFC1123Compliant(strings.ReplaceAll(profile, ".", "")): lower case, every character
  // outside [a-z0-9-.] becomes '-', leading and trailing '-' trimmed.
  std::string p;
  for (char c : profile) {
    if (c == '.') continue;
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    p.push_back(ok ? c : '-');
  }
  const auto first = p.find_first_not_of('-');
  p = first == std::string::npos ? "" : p.substr(first, p.find_last_not_of('-') - first + 1);
  return "gpu-" + std::to_string(parent) + "-mig-" + p + "-" + std::to_string(profile_id) + "-" +
         std::to_string(placement_start);
}

uint64_t NvmlTotalMemoryBytes(uint16_t device_id) {
  for (const NvmlMemory& m : kNvmlMemory) {
    if (m.device_id == device_id) return m.mib << 20;
  }
  return 0;
}

std::vector<uint64_t> NvmlKnownMemoryBytes() {
  std::vector<uint64_t> out;
  for (const NvmlMemory& m : kNvmlMemory) out.push_back(m.mib << 20);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<SimulatedDevice> SimulateDraDevices(const NodeTopology& node) {
  std::vector<SimulatedDevice> out;
  const Shape& s = *node.shape;
  uint32_t n = 0;
  for (uint32_t i = 0; i < s.gpus.size(); ++i) {
    const Gpu& g = s.gpus[i];
    if (g.vendor != GpuVendor::kNvidia) continue;
    SimulatedDevice d;
    d.name = "gpu-" + std::to_string(n++);
    d.gpu_index = i;
    d.driver = std::string(kNvidiaDriver);
    const std::string dom(kNvidiaDriver);
    d.attributes.push_back({dom, "type", std::string("gpu")});
    if (auto uuid = node.GpuUuid(i)) {
      d.attributes.push_back({dom, "uuid", std::string(*uuid)});
    } else {
      d.unknown.push_back(dom + "/uuid");
    }
    if (!g.model.empty()) {
      d.attributes.push_back({dom, "productName", g.model});
    } else {
      d.unknown.push_back(dom + "/productName");
    }
    d.attributes.push_back({"resource.kubernetes.io", "pciBusID", g.pci_bus_id});
    if (const std::string& root = s.PcieRootId(g); !root.empty()) {
      d.attributes.push_back({"resource.kubernetes.io", "pcieRoot", root});
    } else {
      d.unknown.push_back("resource.kubernetes.io/pcieRoot");
    }
    AddNumaNode(s, g, d.attributes, d.unknown);
    if (const uint64_t nvml = NvmlTotalMemoryBytes(g.device_id); nvml != 0) {
      d.capacity.push_back({dom, "memory", nvml, "nvml-table"});
    } else if (g.memory_bytes.has_value()) {
      d.capacity.push_back({dom, "memory", *g.memory_bytes, MemorySourceName(g.memory_source)});
    } else {
      d.unknown.push_back(dom + "/memory");
    }
    for (const char* a : kNeverInExport) d.unknown.emplace_back(a);
    if (g.mig_mode != MigMode::kEnabled) {
      out.push_back(std::move(d));
      continue;
    }
    // MIG enabled: the driver publishes the GPU's configured instances instead of the full GPU.
    for (const MigInstance& m : g.mig_instances) {
      SimulatedDevice mig;
      mig.name = MigDeviceName(n - 1, m.profile, m.profile_id, m.placement_start);
      mig.gpu_index = i;
      mig.driver = d.driver;
      mig.mig_instance = &m - g.mig_instances.data();
      mig.attributes.push_back({dom, "type", std::string("mig")});
      mig.attributes.push_back({dom, "profile", m.profile});
      if (auto uuid = node.GpuUuid(i)) {
        mig.attributes.push_back({dom, "parentUUID", std::string(*uuid)});
      } else {
        mig.unknown.push_back(dom + "/parentUUID");
      }
      if (!g.model.empty()) {
        mig.attributes.push_back({dom, "productName", g.model});
      } else {
        mig.unknown.push_back(dom + "/productName");
      }
      // The parent's standard PCI attributes (mig.go CommonAttributesMig).
      mig.attributes.push_back({"resource.kubernetes.io", "pciBusID", g.pci_bus_id});
      if (const std::string& root = s.PcieRootId(g); !root.empty()) {
        mig.attributes.push_back({"resource.kubernetes.io", "pcieRoot", root});
      } else {
        mig.unknown.push_back("resource.kubernetes.io/pcieRoot");
      }
      AddNumaNode(s, g, mig.attributes, mig.unknown);
      mig.capacity.push_back({dom, "memory", m.memory_bytes, "NVIDIAMIGGPUInstance"});
      // One capacity `memorySlice<i>` = 1 per memory slice the placement occupies (deviceinfo.go).
      for (uint32_t k = m.placement_start; k < m.placement_start + m.placement_size; ++k) {
        mig.capacity.push_back({dom, "memorySlice" + std::to_string(k), 1, "NVIDIAMIGGPUInstance"});
      }
      mig.unknown.push_back(dom + "/uuid");  // MIG device UUIDs exist per compute instance only
      for (const char* a : kNeverInExport) mig.unknown.emplace_back(a);
      for (const char* a : kMigProfileCapacities) mig.unknown.emplace_back(a);
      out.push_back(std::move(mig));
    }
  }
  return out;
}

}  // namespace draguard::topology
