// Conversion of an imported export (hwloc_import.h) into the topology model. No libhwloc here.
#include "hwloc_convert.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

namespace draguard::topology::internal {
namespace {

// The first info called `name`, or "" (what hwloc_obj_get_info_by_name gives).
std::string Info(const RawInfos& infos, const char* name) {
  for (const auto& [k, v] : infos) {
    if (k == name) return v;
  }
  return std::string();
}

std::string BusId(const RawPciDevice& pci) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%01x", pci.domain, pci.bus, pci.dev, pci.func);
  return buf;
}

bool StartsWith(const std::optional<std::string>& s, const char* prefix) {
  return s.has_value() && s->compare(0, std::strlen(prefix), prefix) == 0;
}

// Parses a decimal KiB figure into bytes; nullopt when absent or malformed.
std::optional<uint64_t> KibToBytes(const std::string& v) {
  if (v.empty()) return std::nullopt;
  uint64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return std::nullopt;
    if (n > (UINT64_MAX - 9) / 10) return std::nullopt;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  if (n == 0 || n > UINT64_MAX / 1024) return std::nullopt;
  return n * 1024;
}

std::optional<uint32_t> ParseU32(const std::string& v) {
  if (v.empty() || v.size() > 9) return std::nullopt;
  uint32_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<uint32_t>(c - '0');
  }
  return n;
}

bool IsGpuPciDev(const RawPciDevice& p) {
  const unsigned base = p.class_id >> 8;
  if (base != 0x03 && base != 0x12) return false;
  if (p.vendor_id != 0x10de && p.vendor_id != 0x1002) return false;
  if (p.vendor_id == 0x1002 && p.device_id == 0x515e) return false;  // ATI ES1000 BMC VGA
  return true;
}

// GPU OS device families recognised by name prefix (falling back to the Backend info).
enum class OsDevKind { kOther, kCuda, kNvml, kRsmi, kOpenCl };

OsDevKind KindOf(const RawOsDevice& osdev) {
  if (StartsWith(osdev.name, "cuda")) return OsDevKind::kCuda;
  if (StartsWith(osdev.name, "nvml")) return OsDevKind::kNvml;
  if (StartsWith(osdev.name, "rsmi")) return OsDevKind::kRsmi;
  if (StartsWith(osdev.name, "opencl")) return OsDevKind::kOpenCl;
  const std::string backend = Info(osdev.infos, "Backend");
  if (backend == "CUDA") return OsDevKind::kCuda;
  if (backend == "NVML") return OsDevKind::kNvml;
  if (backend == "RSMI") return OsDevKind::kRsmi;
  if (backend == "OpenCL") return OsDevKind::kOpenCl;
  return OsDevKind::kOther;
}

struct BusKey {
  uint32_t domain, bus, dev, func;
  auto operator<=>(const BusKey&) const = default;
};

BusKey KeyOf(const RawPciDevice& p) { return {p.domain, p.bus, p.dev, p.func}; }

// Host bridges -> PCIe roots, ascending (domain, root bus); returns the root index by bridge gp.
std::unordered_map<uint64_t, uint32_t> ConvertRoots(const RawTopology& raw, Shape& shape) {
  std::vector<std::pair<PcieRoot, uint64_t>> roots;  // root, gp_index
  for (const RawHostBridge& b : raw.host_bridges) {
    PcieRoot r;
    r.domain = b.domain;
    r.bus_first = b.secondary_bus;
    r.bus_last = b.subordinate_bus;
    char buf[32];
    std::snprintf(buf, sizeof buf, "pci%04x:%02x", r.domain, r.bus_first);
    r.id = buf;
    r.numa_nodes = b.local_numa;
    roots.emplace_back(std::move(r), b.gp);
  }
  std::sort(roots.begin(), roots.end(), [](const auto& a, const auto& b) {
    return std::tie(a.first.domain, a.first.bus_first, a.second) < std::tie(b.first.domain, b.first.bus_first, b.second);
  });
  std::unordered_map<uint64_t, uint32_t> root_by_gp;
  for (const auto& [r, gp] : roots) {
    root_by_gp[gp] = static_cast<uint32_t>(shape.pcie_roots.size());
    shape.pcie_roots.push_back(r);
  }
  return root_by_gp;
}

// One NVIDIAMIGGPUInstance value ("profile=1g.10gb id=1 profile_id=19 slices=1 memory_mib=9856
// placement=6:1"); nullopt when a field is missing or malformed.
std::optional<MigInstance> ParseMigInstance(const std::string& v) {
  MigInstance m;
  std::optional<uint32_t> id, profile_id, slices, mib, start, size;
  size_t pos = 0;
  while (pos < v.size()) {
    size_t end = v.find(' ', pos);
    if (end == std::string::npos) end = v.size();
    const std::string tok = v.substr(pos, end - pos);
    pos = end + 1;
    const size_t eq = tok.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = tok.substr(0, eq), val = tok.substr(eq + 1);
    if (key == "profile") {
      m.profile = val;
    } else if (key == "id") {
      id = ParseU32(val);
    } else if (key == "profile_id") {
      profile_id = ParseU32(val);
    } else if (key == "slices") {
      slices = ParseU32(val);
    } else if (key == "memory_mib") {
      mib = ParseU32(val);
    } else if (key == "placement") {
      const size_t colon = val.find(':');
      if (colon != std::string::npos) {
        start = ParseU32(val.substr(0, colon));
        size = ParseU32(val.substr(colon + 1));
      }
    }
  }
  if (m.profile.empty() || m.profile.size() > 64 || !id || !profile_id || !slices || !mib || !start || !size) {
    return std::nullopt;
  }
  m.id = *id;
  m.profile_id = *profile_id;
  m.slices = *slices;
  m.memory_bytes = static_cast<uint64_t>(*mib) << 20;
  m.placement_start = *start;
  m.placement_size = *size;
  return m;
}

// MIG mode and GPU instances from the infos of an nvml OS device (the first one that has them).
void ReadMig(const RawInfos& infos, Gpu& g) {
  if (g.mig_mode != MigMode::kUnknown) return;
  const std::string mode = Info(infos, "NVIDIAMIGMode");
  if (mode == "Enabled") {
    g.mig_mode = MigMode::kEnabled;
  } else if (mode == "Disabled") {
    g.mig_mode = MigMode::kDisabled;
  } else {
    return;
  }
  constexpr size_t kMaxInstances = 64;
  for (const auto& [k, v] : infos) {
    if (k != "NVIDIAMIGGPUInstance" || g.mig_instances.size() >= kMaxInstances) continue;
    if (auto m = ParseMigInstance(v)) g.mig_instances.push_back(std::move(*m));
  }
  std::sort(g.mig_instances.begin(), g.mig_instances.end(),
            [](const MigInstance& a, const MigInstance& b) { return a.id < b.id; });
}

// What the OS devices of one GPU say, per family.
struct GpuOsInfo {
  std::string model_nvml, model_cuda, model_rsmi, model_opencl;
  std::optional<uint64_t> mem_cuda, mem_rsmi, mem_opencl, mem_nvml;
  std::string uuid_nvml, uuid_rsmi;
  std::string clique;  // NVIDIAGPUClique of the nvml OS device
  uint32_t rsmi_count = 0;
};

// Reads the OS devices of GPU `pci` into `g` (names, SM count) and `info`.
void ReadGpuOsDevices(const RawTopology& raw, const RawPciDevice& pci, Gpu& g, GpuOsInfo& info) {
  for (uint32_t ci : pci.os_devices) {
    const RawOsDevice& c = raw.os_devices[ci];
    if (!c.name.has_value()) continue;
    g.os_devices.push_back(*c.name);
    switch (KindOf(c)) {
      case OsDevKind::kCuda:
        if (info.model_cuda.empty()) info.model_cuda = Info(c.infos, "GPUModel");
        if (!info.mem_cuda) info.mem_cuda = KibToBytes(Info(c.infos, "CUDAGlobalMemorySize"));
        if (!g.sm_count) g.sm_count = ParseU32(Info(c.infos, "CUDAMultiProcessors"));
        break;
      case OsDevKind::kNvml:
        if (info.model_nvml.empty()) info.model_nvml = Info(c.infos, "GPUModel");
        if (info.uuid_nvml.empty()) info.uuid_nvml = Info(c.infos, "NVIDIAUUID");
        if (info.clique.empty()) info.clique = Info(c.infos, "NVIDIAGPUClique");
        if (!info.mem_nvml) info.mem_nvml = KibToBytes(Info(c.infos, "NVMLTotalMemorySize"));
        ReadMig(c.infos, g);
        break;
      case OsDevKind::kRsmi:
        ++info.rsmi_count;
        if (info.model_rsmi.empty()) info.model_rsmi = Info(c.infos, "GPUModel");
        if (!info.mem_rsmi) info.mem_rsmi = KibToBytes(Info(c.infos, "RSMIVRAMSize"));
        if (info.uuid_rsmi.empty()) info.uuid_rsmi = Info(c.infos, "AMDUUID");
        break;
      case OsDevKind::kOpenCl:
        if (info.model_opencl.empty()) info.model_opencl = Info(c.infos, "GPUModel");
        if (!info.mem_opencl) info.mem_opencl = KibToBytes(Info(c.infos, "OpenCLGlobalMemorySize"));
        break;
      case OsDevKind::kOther:
        break;
    }
  }
}

// One GPU from its PCI device; `uuid` receives its UUID ("" when unknown), `clique` its NVLink
// clique ("" when unknown).
Gpu ConvertGpu(const RawTopology& raw, const RawPciDevice& p, uint32_t pcie_root, std::string& uuid,
               std::string& clique) {
  Gpu g;
  g.pci_bus_id = BusId(p);
  g.vendor_id = p.vendor_id;
  g.device_id = p.device_id;
  g.pci_class = p.class_id;
  g.vendor = g.vendor_id == 0x10de ? GpuVendor::kNvidia : GpuVendor::kAmd;
  g.pcie_root = pcie_root;
  g.numa_nodes = p.local_numa;
  GpuOsInfo info;
  ReadGpuOsDevices(raw, p, g, info);
  g.partitions = info.rsmi_count > 1 ? info.rsmi_count : 1;
  // rsmi comes last: ROCm-SMI model strings are truncated in some exporters ("deon Instinct MI50").
  for (const std::string* m : {&info.model_nvml, &info.model_cuda, &info.model_opencl, &info.model_rsmi}) {
    if (!m->empty()) {
      g.model = *m;
      break;
    }
  }
  if (g.model.empty()) g.model = Info(p.infos, "PCIDevice");
  if (info.mem_cuda) {
    g.memory_bytes = info.mem_cuda;
    g.memory_source = MemorySource::kCudaGlobalMemory;
  } else if (info.mem_nvml) {
    g.memory_bytes = info.mem_nvml;
    g.memory_source = MemorySource::kNvmlTotalMemory;
  } else if (info.mem_rsmi) {
    g.memory_bytes = info.mem_rsmi;
    g.memory_source = MemorySource::kRsmiVram;
  } else if (info.mem_opencl) {
    g.memory_bytes = info.mem_opencl;
    g.memory_source = MemorySource::kOpenClGlobalMemory;
  }
  uuid = !info.uuid_nvml.empty() ? info.uuid_nvml : info.uuid_rsmi;
  clique = info.clique;
  return g;
}

using RootIndex = std::unordered_map<uint64_t, uint32_t>;  // PCIe root index by host bridge gp_index
using GpuIndex = std::unordered_map<uint64_t, uint32_t>;   // GPU index by PCI device gp_index

uint32_t RootOf(const RawPciDevice& p, const RootIndex& root_by_gp) {
  if (!p.host_bridge_gp.has_value()) return kNoIndex;
  auto it = root_by_gp.find(*p.host_bridge_gp);
  return it == root_by_gp.end() ? kNoIndex : it->second;
}

// GPUs ascending by PCI address, with their UUIDs; returns the GPU index by PCI device gp_index.
GpuIndex ConvertGpus(const RawTopology& raw, const RootIndex& root_by_gp,
                                                   ParsedExport& out) {
  struct GpuTmp {
    BusKey key;
    Gpu gpu;
    std::string uuid;
    std::string clique;
    uint64_t gp;
  };
  std::vector<GpuTmp> gpus;
  for (const RawPciDevice& p : raw.pci_devices) {
    if (!IsGpuPciDev(p)) continue;
    GpuTmp t;
    t.key = KeyOf(p);
    t.gp = p.gp;
    t.gpu = ConvertGpu(raw, p, RootOf(p, root_by_gp), t.uuid, t.clique);
    gpus.push_back(std::move(t));
  }
  std::sort(gpus.begin(), gpus.end(), [](const GpuTmp& a, const GpuTmp& b) { return a.key < b.key; });
  // The node's clique: the one value its GPUs give (GPU Feature Discovery sets no label when they
  // disagree); a malformed value counts as a disagreement.
  bool agree = true;
  for (const auto& t : gpus) {
    if (t.clique.empty()) continue;
    if (!IsNvlinkClique(t.clique) || (!out.nvlink_clique.empty() && t.clique != out.nvlink_clique)) agree = false;
    if (out.nvlink_clique.empty()) out.nvlink_clique = t.clique;
  }
  if (!agree) out.nvlink_clique.clear();
  GpuIndex gpu_by_pci;
  for (auto& t : gpus) {
    gpu_by_pci[t.gp] = static_cast<uint32_t>(out.shape.gpus.size());
    out.shape.gpus.push_back(std::move(t.gpu));
    out.gpu_uuids.push_back(std::move(t.uuid));
  }
  return gpu_by_pci;
}

// NICs: named network / OpenFabrics OS devices under a PCI device, ascending (PCI address, name).
void ConvertNics(const RawTopology& raw, const RootIndex& root_by_gp, Shape& shape) {
  struct NicTmp {
    BusKey key;
    Nic nic;
  };
  std::vector<NicTmp> nics;
  for (const RawOsDevice& o : raw.os_devices) {
    if (o.type == RawOsDevType::kOther || !o.name.has_value()) continue;
    const RawPciDevice& p = raw.pci_devices[o.pci];
    NicTmp t;
    t.key = KeyOf(p);
    t.nic.name = *o.name;
    t.nic.pci_bus_id = BusId(p);
    t.nic.pcie_root = RootOf(p, root_by_gp);
    t.nic.numa_nodes = p.local_numa;
    bool rdma = o.type == RawOsDevType::kOpenFabrics || p.class_id == 0x0207 || p.class_id == 0x0c06;
    for (size_t k = 0; k < p.os_devices.size() && !rdma; ++k) {
      if (raw.os_devices[p.os_devices[k]].type == RawOsDevType::kOpenFabrics) rdma = true;
    }
    t.nic.rdma = rdma;
    nics.push_back(std::move(t));
  }
  std::sort(nics.begin(), nics.end(),
            [](const NicTmp& a, const NicTmp& b) { return std::tie(a.key, a.nic.name) < std::tie(b.key, b.nic.name); });
  for (auto& t : nics) shape.nics.push_back(std::move(t.nic));
}

// GPU-GPU and GPU-package links of one bandwidth matrix, keeping the largest value of a pair.
void AddLinks(const RawMatrix& m, const GpuIndex& gpu_by_pci,
              std::map<std::pair<uint32_t, uint32_t>, uint64_t>& pairs,
              std::map<std::pair<uint32_t, uint32_t>, uint64_t>& cpu) {
  const size_t n = m.objects.size();
  std::vector<uint32_t> gpu(n, kNoIndex);
  for (size_t i = 0; i < n; ++i) {
    if (!m.objects[i].pci_gp.has_value()) continue;
    auto it = gpu_by_pci.find(*m.objects[i].pci_gp);
    if (it != gpu_by_pci.end()) gpu[i] = it->second;
  }
  auto raise = [](uint64_t& slot, uint64_t v) { slot = std::max(slot, v); };
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (i == j) continue;
      const uint64_t v = m.values[i * n + j];
      if (v == 0) continue;
      const int64_t pi = m.objects[i].package;
      const int64_t pj = m.objects[j].package;
      if (gpu[i] != kNoIndex && gpu[j] != kNoIndex && gpu[i] != gpu[j]) {
        auto key = std::minmax(gpu[i], gpu[j]);
        raise(pairs[{key.first, key.second}], v);
      } else if (gpu[i] != kNoIndex && pj >= 0) {
        raise(cpu[{gpu[i], static_cast<uint32_t>(pj)}], v);
      } else if (gpu[j] != kNoIndex && pi >= 0) {
        raise(cpu[{gpu[j], static_cast<uint32_t>(pi)}], v);
      }
    }
  }
}

// One interconnect from all bandwidth matrices of its name.
Interconnect ConvertInterconnect(const RawMatrices& ms, const char* name,
                                 const GpuIndex& gpu_by_pci) {
  Interconnect out;
  if (!ms.found) return out;
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> pairs;
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> cpu;
  for (const RawMatrix& m : ms.bandwidth) {
    if (m.via_switch) out.via_switch = true;
    AddLinks(m, gpu_by_pci, pairs, cpu);
  }
  out.source = name;
  for (const auto& [k, v] : pairs) out.peers.push_back(GpuLink{k.first, k.second, v});
  for (const auto& [k, v] : cpu) out.cpu_peers.push_back(CpuLink{k.first, k.second, v});
  return out;
}

// GPU memory NUMA nodes (Grace, POWER9): each "GPUMemory" node whose PCIBusID names a GPU becomes
// that GPU's memory_numa_node and leaves every CPU locality (roots, GPUs, NICs), where hwloc puts
// it because it is a memory child of the GPU's CPU package. `bus_ids` is parallel to
// shape.numa_nodes.
void AttachGpuMemory(const std::vector<std::string>& bus_ids, Shape& shape) {
  std::vector<uint32_t> memory;  // OS indexes, ascending
  for (size_t i = 0; i < bus_ids.size() && i < shape.numa_nodes.size(); ++i) {
    if (bus_ids[i].empty()) continue;
    for (Gpu& g : shape.gpus) {
      if (g.pci_bus_id != bus_ids[i] || g.memory_numa_node != kNoIndex) continue;
      g.memory_numa_node = shape.numa_nodes[i].os_index;
      memory.push_back(g.memory_numa_node);
      break;
    }
  }
  if (memory.empty()) return;
  std::sort(memory.begin(), memory.end());
  auto strip = [&](std::vector<uint32_t>& nodes) {
    std::erase_if(nodes, [&](uint32_t n) { return std::binary_search(memory.begin(), memory.end(), n); });
  };
  for (PcieRoot& r : shape.pcie_roots) strip(r.numa_nodes);
  for (Gpu& g : shape.gpus) strip(g.numa_nodes);
  for (Nic& n : shape.nics) strip(n.numa_nodes);
}

}  // namespace

Result<ParsedExport> ConvertTopology(const RawTopology& raw, const LoaderLimits& limits, LoadErrorReason* reason) {
  ParsedExport out;
  Shape& shape = out.shape;
  out.host_name = Info(raw.root_infos, "HostName");
  out.hwloc_version = Info(raw.root_infos, "hwlocVersion");
  // NUMA nodes by OS index, each with its package.
  std::vector<uint32_t> order(raw.numa_nodes.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return raw.numa_nodes[a].os_index < raw.numa_nodes[b].os_index; });
  bool packaged = false;
  std::vector<std::string> gpu_bus_ids;  // parallel to shape.numa_nodes
  for (uint32_t i : order) {
    shape.numa_nodes.push_back(raw.numa_nodes[i]);
    gpu_bus_ids.push_back(i < raw.numa_gpu_bus_ids.size() ? raw.numa_gpu_bus_ids[i] : std::string());
    const uint32_t package = i < raw.numa_packages.size() ? raw.numa_packages[i] : kNoIndex;
    out.numa_packages.push_back(package);
    packaged = packaged || package != kNoIndex;
  }
  if (!packaged) out.numa_packages.clear();
  out.cpus = raw.cpus;
  std::stable_sort(out.cpus.begin(), out.cpus.end(),
                   [](const LogicalCpu& a, const LogicalCpu& b) { return a.os_index < b.os_index; });
  const RootIndex root_by_gp = ConvertRoots(raw, shape);
  const GpuIndex gpu_by_pci = ConvertGpus(raw, root_by_gp, out);
  // Bridges count as PCI information too (an export may list only host bridges and bridges).
  if (limits.require_pci && raw.pci_devices.empty() && raw.host_bridges.empty()) {
    if (reason != nullptr) *reason = LoadErrorReason::kNoPci;
    return Status::FailedPrecondition(
        "export has no PCI information (exported with --no-io?); re-export with `lstopo --of xml "
        "--whole-io` from an hwloc built with NVML/RSMI");
  }
  ConvertNics(raw, root_by_gp, shape);
  AttachGpuMemory(gpu_bus_ids, shape);
  shape.nvlink = ConvertInterconnect(raw.nvlink, "NVLinkBandwidth", gpu_by_pci);
  shape.xgmi = ConvertInterconnect(raw.xgmi, "XGMIBandwidth", gpu_by_pci);
  FinalizeShape(shape);
  return out;
}

Result<ParsedExport> ImportInProcess(const std::string& xml, const std::string& format, const LoaderLimits& limits,
                                     LoadErrorReason* reason) {
  Result<RawTopology> raw = ReadHwlocXml(xml, format, reason);
  if (!raw.ok()) return raw.status();
  Result<ParsedExport> res = ConvertTopology(raw.value(), limits, reason);
  if (res.ok()) res.value().xml_format = format;
  return res;
}

}  // namespace draguard::topology::internal
