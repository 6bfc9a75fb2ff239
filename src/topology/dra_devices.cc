// Simulated NVIDIA DRA devices and dra-driver-cpu CPU devices (see dra_devices.h).
#include "draguard/topology/dra_devices.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

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
// A GPU whose memory is a NUMA node of its own (Grace, POWER9) publishes that node, not its CPUs'
// (kubernetes-sigs/dra-driver-nvidia-gpu issue #1242: "the NUMA node reported is a HBM memory
// region which doesn't match 1:1 with the local CPU or Network interface").
void AddNumaNode(const Shape& s, const Gpu& g, std::vector<SimulatedAttribute>& attrs,
                 std::vector<std::string>& unknown) {
  if (g.memory_numa_node != kNoIndex) {
    attrs.push_back({"resource.kubernetes.io", "numaNode", static_cast<int64_t>(g.memory_numa_node)});
  } else if (const uint32_t numa = s.AlignableNumaNode(g); numa != kNoIndex) {
    attrs.push_back({"resource.kubernetes.io", "numaNode", static_cast<int64_t>(numa)});
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

namespace {

// dra-driver-cpu's device names (pkg/device/builder.go: fmt.Sprintf("%s%03d", prefix, n)).
std::string CpuDeviceName(std::string_view prefix, uint64_t n) {
  char digits[24];
  std::snprintf(digits, sizeof digits, "%03llu", static_cast<unsigned long long>(n));
  return std::string(prefix) + digits;
}

std::string JoinNumbers(const std::set<uint32_t>& v) {
  std::string out;
  for (uint32_t x : v) out += (out.empty() ? "" : ", ") + std::to_string(x);
  return out;
}

// The attributes every CPU device with a known NUMA node carries: the standard one and the two
// compatibility ones (builder.go addCompatibilityAttributes: dra.net/numaNode, dra.cpu/numaNodeID).
void AddCpuNuma(SimulatedDevice& d, uint32_t numa) {
  const std::string dom(kCpuDriver);
  if (numa == kNoIndex) {
    d.unknown.push_back("resource.kubernetes.io/numaNode");
    d.unknown.push_back(dom + "/numaNodeID");
    d.unknown.push_back("dra.net/numaNode");
    return;
  }
  d.attributes.push_back({"resource.kubernetes.io", "numaNode", static_cast<int64_t>(numa)});
  d.attributes.push_back({dom, "numaNodeID", static_cast<int64_t>(numa)});
  d.attributes.push_back({"dra.net", "numaNode", static_cast<int64_t>(numa)});
}

}  // namespace

SimulatedCpuDevices SimulateCpuDevices(const NodeTopology& node, CpuDeviceMode mode) {
  SimulatedCpuDevices out;
  if (mode == CpuDeviceMode::kNone) return out;
  const CpuList& cpus = *node.cpus;
  if (cpus.empty()) {
    out.refused = "the export lists no logical CPUs";
    return out;
  }
  const std::string dom(kCpuDriver);
  // Cores (the export's Core objects) and their CPUs, ascending CPU number.
  std::map<uint32_t, std::vector<uint32_t>> core_cpus;  // core group -> positions in cpus
  bool all_in_cores = true;
  for (uint32_t i = 0; i < cpus.size(); ++i) {
    if (cpus[i].core_group == kNoIndex) {
      all_in_cores = false;
    } else {
      core_cpus[cpus[i].core_group].push_back(i);
    }
  }
  // pkg/cpuinfo/cpuinfo.go populateCpuSiblings pairs the CPUs of a core only when it has exactly
  // two; the CPUs of a core with more (SMT4 and SMT8, as on POWER) get no sibling, and
  // pkg/device/builder.go then numbers each as a core of its own. The driver starts all the same.
  for (const auto& [group, members] : core_cpus) {
    if (members.size() > 2) {
      const LogicalCpu& c = cpus[members.front()];
      out.notes.push_back(
          "core " + (c.core == kNoIndex ? std::string("of CPU ") + std::to_string(c.os_index) : std::to_string(c.core)) +
          (c.package == kNoIndex ? std::string() : " of package " + std::to_string(c.package)) + " has " +
          std::to_string(members.size()) +
          " logical CPUs: the driver pairs SMT siblings only two by two (pkg/cpuinfo/cpuinfo.go), so in individual "
          "mode the CPUs of such cores are numbered in CPU order, each as a core of its own; its images are built "
          "for linux/amd64 and linux/arm64 only, so a POWER (ppc64le) node runs it only from an image built for it");
      break;
    }
  }
  // smtEnabled: the driver reads /sys/devices/system/cpu/smt/control ("on" -> true), which is "on"
  // exactly when a core has its sibling threads online; the export shows the online CPUs per core.
  std::optional<bool> smt;
  if (all_in_cores) {
    smt = std::any_of(core_cpus.begin(), core_cpus.end(), [](const auto& kv) { return kv.second.size() >= 2; });
    out.notes.push_back(dom + "/smtEnabled: " + (*smt ? "true" : "false") +
                        " because " + (*smt ? "some core has" : "no core has") +
                        " two or more online logical CPUs in the export (the driver reads smt/control)");
  }
  auto add_smt = [&](SimulatedDevice& d) {
    if (smt.has_value()) {
      d.attributes.push_back({dom, "smtEnabled", *smt});
    } else {
      d.unknown.push_back(dom + "/smtEnabled");
    }
  };
  std::set<uint32_t> no_numa;
  for (const LogicalCpu& c : cpus) {
    if (c.numa_node == kNoIndex) no_numa.insert(c.os_index);
  }

  if (mode == CpuDeviceMode::kGrouped) {
    // builder.go groupedCPUDeviceInfos(LayoutNUMANode): NUMA nodes with CPUs, ascending.
    std::map<uint32_t, std::vector<const LogicalCpu*>> by_numa;
    for (const LogicalCpu& c : cpus) {
      if (c.numa_node != kNoIndex) by_numa[c.numa_node].push_back(&c);
    }
    if (!no_numa.empty()) {
      out.notes.push_back("CPUs " + JoinNumbers(no_numa) +
                          ": the export does not tell their NUMA node; they are in no device here");
    }
    for (const auto& [numa, members] : by_numa) {
      SimulatedDevice d;
      d.name = CpuDeviceName("cpudevnuma", numa);
      d.driver = dom;
      d.allow_multiple_allocations = true;
      AddCpuNuma(d, numa);
      std::set<uint32_t> packages;
      for (const LogicalCpu* c : members) {
        packages.insert(c->package);
        d.cpus.push_back(c->os_index);
      }
      if (packages.size() == 1 && *packages.begin() != kNoIndex) {
        d.attributes.push_back({dom, "socketID", static_cast<int64_t>(*packages.begin())});
      } else if (packages.count(kNoIndex) != 0) {
        d.unknown.push_back(dom + "/socketID (no package in the export)");
      } else {
        d.unknown.push_back(dom + "/socketID (the node spans packages " + JoinNumbers(packages) +
                            "; the driver publishes the package of one of its CPUs)");
      }
      d.attributes.push_back({dom, "numCPUs", static_cast<int64_t>(members.size())});
      add_smt(d);
      d.capacity.push_back({dom, "cpu", members.size(), "PU", /*count=*/true});
      out.devices.push_back(std::move(d));
    }
    return out;
  }

  // Individual: builder.go cpuDeviceInfos: CPUs ascending, each followed by its SMT sibling (the
  // other CPU of a two-CPU core), devices numbered in that order.
  if (!all_in_cores) {
    out.notes.push_back("the export has CPUs outside any core, so SMT siblings are unknown; device names after the "
                        "first such CPU may differ (the driver names a core's siblings consecutively)");
  }
  std::vector<bool> done(cpus.size(), false);
  uint64_t n = 0;
  for (uint32_t i = 0; i < cpus.size(); ++i) {
    if (done[i]) continue;
    std::vector<uint32_t> group{i};
    if (cpus[i].core_group != kNoIndex && core_cpus[cpus[i].core_group].size() == 2) {  // a sibling pair
      for (uint32_t j : core_cpus[cpus[i].core_group]) {
        if (j != i && !done[j]) group.push_back(j);
      }
    }
    for (uint32_t k : group) {
      done[k] = true;
      const LogicalCpu& c = cpus[k];
      SimulatedDevice d;
      d.name = CpuDeviceName("cpudev", n++);
      d.driver = dom;
      d.cpus = {c.os_index};
      AddCpuNuma(d, c.numa_node);
      d.attributes.push_back({dom, "cpuID", static_cast<int64_t>(c.os_index)});
      if (c.core != kNoIndex) {
        d.attributes.push_back({dom, "coreID", static_cast<int64_t>(c.core)});
      } else {
        d.unknown.push_back(dom + "/coreID");
      }
      const char* kind = c.kind == CoreKind::kPerformance   ? "p-core"
                         : c.kind == CoreKind::kEfficiency ? "e-core"
                                                            : "standard";
      d.attributes.push_back({dom, "coreType", std::string(kind)});
      if (c.l3_cache != kNoIndex) {
        d.attributes.push_back({dom, "cacheL3ID", static_cast<int64_t>(c.l3_cache)});
      } else {
        d.unknown.push_back(dom + "/cacheL3ID");
      }
      if (c.package != kNoIndex) {
        d.attributes.push_back({dom, "socketID", static_cast<int64_t>(c.package)});
      } else {
        d.unknown.push_back(dom + "/socketID");
      }
      add_smt(d);
      out.devices.push_back(std::move(d));
    }
  }
  return out;
}

}  // namespace draguard::topology
