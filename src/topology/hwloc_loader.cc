// libhwloc import of one export. The only file of draguard that includes <hwloc.h>.
#include <hwloc.h>
#include <hwloc/distances.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <sys/socket.h>
#include <unordered_map>

#include "draguard/topology/loader.h"
#include "export_codec.h"

namespace draguard::topology {
namespace {

// Owns an hwloc topology for the duration of one import.
class TopologyHandle {
 public:
  TopologyHandle() = default;
  ~TopologyHandle() {
    if (topo_ != nullptr) hwloc_topology_destroy(topo_);
  }
  TopologyHandle(const TopologyHandle&) = delete;
  TopologyHandle& operator=(const TopologyHandle&) = delete;
  bool Init() { return hwloc_topology_init(&topo_) == 0; }
  hwloc_topology_t get() const { return topo_; }

 private:
  hwloc_topology_t topo_ = nullptr;
};

std::string Info(hwloc_obj_t obj, const char* name) {
  const char* v = hwloc_obj_get_info_by_name(obj, name);
  return v != nullptr ? std::string(v) : std::string();
}

std::vector<uint32_t> NodesetIndexes(hwloc_const_nodeset_t set) {
  std::vector<uint32_t> out;
  if (set == nullptr || hwloc_bitmap_weight(set) < 0) return out;  // empty or infinite
  for (int i = hwloc_bitmap_first(set); i >= 0; i = hwloc_bitmap_next(set, i)) {
    out.push_back(static_cast<uint32_t>(i));
  }
  return out;
}

std::vector<uint32_t> LocalNuma(hwloc_topology_t topo, hwloc_obj_t io_obj) {
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, io_obj);
  if (anc == nullptr) return {};
  return NodesetIndexes(anc->nodeset);
}

std::string BusId(const hwloc_obj_t pci) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%01x", static_cast<unsigned>(pci->attr->pcidev.domain),
                pci->attr->pcidev.bus, pci->attr->pcidev.dev, pci->attr->pcidev.func);
  return buf;
}

bool StartsWith(const char* s, const char* prefix) {
  return s != nullptr && std::strncmp(s, prefix, std::strlen(prefix)) == 0;
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

bool IsGpuPciDev(hwloc_obj_t pci) {
  const auto& p = pci->attr->pcidev;
  const unsigned base = p.class_id >> 8;
  if (base != 0x03 && base != 0x12) return false;
  if (p.vendor_id != 0x10de && p.vendor_id != 0x1002) return false;
  if (p.vendor_id == 0x1002 && p.device_id == 0x515e) return false;  // ATI ES1000 BMC VGA
  return true;
}

// The host bridge above an I/O object, or nullptr.
hwloc_obj_t HostBridgeOf(hwloc_obj_t obj) {
  for (hwloc_obj_t p = obj->parent; p != nullptr; p = p->parent) {
    if (p->type != HWLOC_OBJ_BRIDGE) {
      if (p->type == HWLOC_OBJ_PCI_DEVICE) continue;
      return nullptr;
    }
    if (p->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) return p;
  }
  return nullptr;
}

// GPU OS device families recognised by name prefix (falling back to the Backend info).
enum class OsDevKind { kOther, kCuda, kNvml, kRsmi, kOpenCl };

OsDevKind KindOf(hwloc_obj_t osdev) {
  const char* name = osdev->name;
  if (StartsWith(name, "cuda")) return OsDevKind::kCuda;
  if (StartsWith(name, "nvml")) return OsDevKind::kNvml;
  if (StartsWith(name, "rsmi")) return OsDevKind::kRsmi;
  if (StartsWith(name, "opencl")) return OsDevKind::kOpenCl;
  const std::string backend = Info(osdev, "Backend");
  if (backend == "CUDA") return OsDevKind::kCuda;
  if (backend == "NVML") return OsDevKind::kNvml;
  if (backend == "RSMI") return OsDevKind::kRsmi;
  if (backend == "OpenCL") return OsDevKind::kOpenCl;
  return OsDevKind::kOther;
}

// Reads one bandwidth matrix family (all matrices named `name`) into `out`.
void ReadInterconnect(hwloc_topology_t topo, const char* name,
                      const std::unordered_map<uint64_t, uint32_t>& gpu_by_pci_gp, Interconnect& out) {
  unsigned nr = 0;
  if (hwloc_distances_get_by_name(topo, name, &nr, nullptr, 0) < 0 || nr == 0) return;
  std::vector<hwloc_distances_s*> dists(nr, nullptr);
  if (hwloc_distances_get_by_name(topo, name, &nr, dists.data(), 0) < 0) return;
  dists.resize(nr);
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> pairs;
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> cpu;
  for (hwloc_distances_s* d : dists) {
    if (d == nullptr) continue;
    if ((d->kind & HWLOC_DISTANCES_KIND_MEANS_BANDWIDTH) == 0) {
      hwloc_distances_release(topo, d);
      continue;
    }
    bool has_switch = false;
    for (unsigned i = 0; i < d->nbobjs; ++i) {
      hwloc_obj_t o = d->objs[i];
      if (o != nullptr && o->subtype != nullptr && std::strcmp(o->subtype, "NVSwitch") == 0) has_switch = true;
    }
    if (has_switch) {
      // GPU<->GPU entries through NVSwitches are 0 in the export; hwloc's transitive closure
      // (what `lstopo --distances-transform transitive-closure` shows) connects them.
      if (hwloc_distances_transform(topo, d, HWLOC_DISTANCES_TRANSFORM_TRANSITIVE_CLOSURE, nullptr, 0) == 0) {
        out.via_switch = true;
      }
    }
    const unsigned n = d->nbobjs;
    std::vector<uint32_t> gpu(n, kNoIndex);
    std::vector<int64_t> package(n, -1);
    for (unsigned i = 0; i < n; ++i) {
      hwloc_obj_t o = d->objs[i];
      if (o == nullptr) continue;
      hwloc_obj_t pci = nullptr;
      if (o->type == HWLOC_OBJ_OS_DEVICE && o->parent != nullptr && o->parent->type == HWLOC_OBJ_PCI_DEVICE) {
        pci = o->parent;
      } else if (o->type == HWLOC_OBJ_PCI_DEVICE) {
        pci = o;
      } else if (o->type == HWLOC_OBJ_PACKAGE) {
        package[i] = o->os_index;
      }
      if (pci != nullptr) {
        auto it = gpu_by_pci_gp.find(pci->gp_index);
        if (it != gpu_by_pci_gp.end()) gpu[i] = it->second;
      }
    }
    for (unsigned i = 0; i < n; ++i) {
      for (unsigned j = 0; j < n; ++j) {
        if (i == j) continue;
        const uint64_t v = d->values[static_cast<size_t>(i) * n + j];
        if (v == 0) continue;
        if (gpu[i] != kNoIndex && gpu[j] != kNoIndex && gpu[i] != gpu[j]) {
          auto key = std::minmax(gpu[i], gpu[j]);
          uint64_t& slot = pairs[{key.first, key.second}];
          slot = std::max(slot, v);
        } else if (gpu[i] != kNoIndex && package[j] >= 0) {
          uint64_t& slot = cpu[{gpu[i], static_cast<uint32_t>(package[j])}];
          slot = std::max(slot, v);
        } else if (gpu[j] != kNoIndex && package[i] >= 0) {
          uint64_t& slot = cpu[{gpu[j], static_cast<uint32_t>(package[i])}];
          slot = std::max(slot, v);
        }
      }
    }
    hwloc_distances_release(topo, d);
  }
  out.source = name;
  for (const auto& [k, v] : pairs) out.peers.push_back(GpuLink{k.first, k.second, v});
  for (const auto& [k, v] : cpu) out.cpu_peers.push_back(CpuLink{k.first, k.second, v});
}

struct BusKey {
  uint32_t domain, bus, dev, func;
  auto operator<=>(const BusKey&) const = default;
};

BusKey KeyOf(hwloc_obj_t pci) {
  const auto& p = pci->attr->pcidev;
  return {static_cast<uint32_t>(p.domain), p.bus, p.dev, p.func};
}

Result<ParsedExport> Convert(hwloc_topology_t topo, const LoaderLimits& limits, LoadErrorReason* reason) {
  ParsedExport out;
  Shape& shape = out.shape;
  hwloc_obj_t root = hwloc_get_root_obj(topo);
  out.host_name = Info(root, "HostName");
  out.hwloc_version = Info(root, "hwlocVersion");

  // NUMA nodes.
  for (hwloc_obj_t o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, nullptr); o != nullptr;
       o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, o)) {
    NumaNode n;
    n.os_index = o->os_index;
    n.memory_bytes = o->attr != nullptr ? o->attr->numanode.local_memory : 0;
    const int w = o->cpuset != nullptr ? hwloc_bitmap_weight(o->cpuset) : 0;
    n.cpus = w > 0 ? static_cast<uint32_t>(w) : 0;
    if (o->subtype != nullptr) n.subtype = o->subtype;
    shape.numa_nodes.push_back(std::move(n));
  }
  std::sort(shape.numa_nodes.begin(), shape.numa_nodes.end(),
            [](const NumaNode& a, const NumaNode& b) { return a.os_index < b.os_index; });

  // Host bridges -> PCIe roots.
  std::vector<std::pair<PcieRoot, uint64_t>> roots;  // root, gp_index
  for (hwloc_obj_t b = hwloc_get_next_bridge(topo, nullptr); b != nullptr; b = hwloc_get_next_bridge(topo, b)) {
    if (b->attr->bridge.upstream_type != HWLOC_OBJ_BRIDGE_HOST) continue;
    if (b->attr->bridge.downstream_type != HWLOC_OBJ_BRIDGE_PCI) continue;
    PcieRoot r;
    const auto& ds = b->attr->bridge.downstream.pci;
    r.domain = static_cast<uint32_t>(ds.domain);
    r.bus_first = ds.secondary_bus;
    r.bus_last = ds.subordinate_bus;
    char buf[32];
    std::snprintf(buf, sizeof buf, "pci%04x:%02x", r.domain, r.bus_first);
    r.id = buf;
    r.numa_nodes = LocalNuma(topo, b);
    roots.emplace_back(std::move(r), b->gp_index);
  }
  std::sort(roots.begin(), roots.end(), [](const auto& a, const auto& b) {
    return std::tie(a.first.domain, a.first.bus_first, a.second) < std::tie(b.first.domain, b.first.bus_first, b.second);
  });
  std::unordered_map<uint64_t, uint32_t> root_by_gp;
  for (const auto& [r, gp] : roots) {
    root_by_gp[gp] = static_cast<uint32_t>(shape.pcie_roots.size());
    shape.pcie_roots.push_back(r);
  }
  auto root_index = [&](hwloc_obj_t io) {
    hwloc_obj_t hb = HostBridgeOf(io);
    if (hb == nullptr) return kNoIndex;
    auto it = root_by_gp.find(hb->gp_index);
    return it == root_by_gp.end() ? kNoIndex : it->second;
  };

  // PCI devices: GPUs.
  size_t pci_count = 0;
  struct GpuTmp {
    BusKey key;
    Gpu gpu;
    std::string uuid;
    uint64_t gp;
  };
  std::vector<GpuTmp> gpus;
  for (hwloc_obj_t p = hwloc_get_next_pcidev(topo, nullptr); p != nullptr; p = hwloc_get_next_pcidev(topo, p)) {
    ++pci_count;
    if (!IsGpuPciDev(p)) continue;
    GpuTmp t;
    t.key = KeyOf(p);
    t.gp = p->gp_index;
    Gpu& g = t.gpu;
    g.pci_bus_id = BusId(p);
    g.vendor_id = p->attr->pcidev.vendor_id;
    g.device_id = p->attr->pcidev.device_id;
    g.pci_class = p->attr->pcidev.class_id;
    g.vendor = g.vendor_id == 0x10de ? GpuVendor::kNvidia : GpuVendor::kAmd;
    g.pcie_root = root_index(p);
    g.numa_nodes = LocalNuma(topo, p);
    std::string model_nvml, model_cuda, model_rsmi, model_opencl;
    std::optional<uint64_t> mem_cuda, mem_rsmi, mem_opencl;
    std::string uuid_nvml, uuid_rsmi;
    uint32_t rsmi_count = 0;
    for (hwloc_obj_t c = p->io_first_child; c != nullptr; c = c->next_sibling) {
      if (c->type != HWLOC_OBJ_OS_DEVICE || c->name == nullptr) continue;
      g.os_devices.emplace_back(c->name);
      switch (KindOf(c)) {
        case OsDevKind::kCuda:
          if (model_cuda.empty()) model_cuda = Info(c, "GPUModel");
          if (!mem_cuda) mem_cuda = KibToBytes(Info(c, "CUDAGlobalMemorySize"));
          if (!g.sm_count) g.sm_count = ParseU32(Info(c, "CUDAMultiProcessors"));
          break;
        case OsDevKind::kNvml:
          if (model_nvml.empty()) model_nvml = Info(c, "GPUModel");
          if (uuid_nvml.empty()) uuid_nvml = Info(c, "NVIDIAUUID");
          break;
        case OsDevKind::kRsmi:
          ++rsmi_count;
          if (model_rsmi.empty()) model_rsmi = Info(c, "GPUModel");
          if (!mem_rsmi) mem_rsmi = KibToBytes(Info(c, "RSMIVRAMSize"));
          if (uuid_rsmi.empty()) uuid_rsmi = Info(c, "AMDUUID");
          break;
        case OsDevKind::kOpenCl:
          if (model_opencl.empty()) model_opencl = Info(c, "GPUModel");
          if (!mem_opencl) mem_opencl = KibToBytes(Info(c, "OpenCLGlobalMemorySize"));
          break;
        case OsDevKind::kOther:
          break;
      }
    }
    g.partitions = rsmi_count > 1 ? rsmi_count : 1;
    // rsmi comes last: ROCm-SMI model strings are truncated in some exporters ("deon Instinct MI50").
    for (const std::string* m : {&model_nvml, &model_cuda, &model_opencl, &model_rsmi}) {
      if (!m->empty()) {
        g.model = *m;
        break;
      }
    }
    if (g.model.empty()) g.model = Info(p, "PCIDevice");
    if (mem_cuda) {
      g.memory_bytes = mem_cuda;
      g.memory_source = MemorySource::kCudaGlobalMemory;
    } else if (mem_rsmi) {
      g.memory_bytes = mem_rsmi;
      g.memory_source = MemorySource::kRsmiVram;
    } else if (mem_opencl) {
      g.memory_bytes = mem_opencl;
      g.memory_source = MemorySource::kOpenClGlobalMemory;
    }
    t.uuid = !uuid_nvml.empty() ? uuid_nvml : uuid_rsmi;
    gpus.push_back(std::move(t));
  }
  // Bridges count as PCI information too (an export may list only host bridges and bridges).
  if (limits.require_pci && pci_count == 0 && roots.empty()) {
    if (reason != nullptr) *reason = LoadErrorReason::kNoPci;
    return Status::FailedPrecondition(
        "export has no PCI information (exported with --no-io?); re-export with `lstopo --of xml "
        "--whole-io` from an hwloc built with NVML/RSMI");
  }
  std::sort(gpus.begin(), gpus.end(), [](const GpuTmp& a, const GpuTmp& b) { return a.key < b.key; });
  std::unordered_map<uint64_t, uint32_t> gpu_by_pci_gp;
  for (auto& t : gpus) {
    gpu_by_pci_gp[t.gp] = static_cast<uint32_t>(shape.gpus.size());
    shape.gpus.push_back(std::move(t.gpu));
    out.gpu_uuids.push_back(std::move(t.uuid));
  }

  // NICs: network / OpenFabrics OS devices under a PCI device.
  struct NicTmp {
    BusKey key;
    Nic nic;
  };
  std::vector<NicTmp> nics;
  for (hwloc_obj_t o = hwloc_get_next_osdev(topo, nullptr); o != nullptr; o = hwloc_get_next_osdev(topo, o)) {
    const auto type = o->attr->osdev.type;
    if (type != HWLOC_OBJ_OSDEV_NETWORK && type != HWLOC_OBJ_OSDEV_OPENFABRICS) continue;
    hwloc_obj_t p = o->parent;
    if (p == nullptr || p->type != HWLOC_OBJ_PCI_DEVICE || o->name == nullptr) continue;
    NicTmp t;
    t.key = KeyOf(p);
    t.nic.name = o->name;
    t.nic.pci_bus_id = BusId(p);
    t.nic.pcie_root = root_index(p);
    t.nic.numa_nodes = LocalNuma(topo, p);
    const unsigned cls = p->attr->pcidev.class_id;
    bool rdma = type == HWLOC_OBJ_OSDEV_OPENFABRICS || cls == 0x0207 || cls == 0x0c06;
    for (hwloc_obj_t c = p->io_first_child; c != nullptr && !rdma; c = c->next_sibling) {
      if (c->type == HWLOC_OBJ_OS_DEVICE && c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS) rdma = true;
    }
    t.nic.rdma = rdma;
    nics.push_back(std::move(t));
  }
  std::sort(nics.begin(), nics.end(),
            [](const NicTmp& a, const NicTmp& b) { return std::tie(a.key, a.nic.name) < std::tie(b.key, b.nic.name); });
  for (auto& t : nics) shape.nics.push_back(std::move(t.nic));

  ReadInterconnect(topo, "NVLinkBandwidth", gpu_by_pci_gp, shape.nvlink);
  ReadInterconnect(topo, "XGMIBandwidth", gpu_by_pci_gp, shape.xgmi);
  FinalizeShape(shape);
  return out;
}


// Keeps libhwloc's components (and the plugins it dlopen()s: xml_libxml, pci, opencl, gl) loaded
// until the process exits. Without it every hwloc_topology_destroy() that drops the component
// refcount to zero unloads the plugins and the next import loads them again, and each forked
// import would pay the full plugin load (about 30 ms). Created once, never modified afterwards;
// called before any fork so no hwloc lock can be held by a parent thread at fork time.
void EnsureHwlocComponentsLoaded() {
  // Function-local static: initialised once (thread-safe), immutable afterwards, destroyed at exit.
  struct Anchor {
    hwloc_topology_t topo = nullptr;
    Anchor() {
      if (hwloc_topology_init(&topo) != 0) topo = nullptr;
      // Also run one XML import (of a tiny synthetic topology) so the XML backend and libxml2 are
      // initialised here once rather than in every forked child.
      hwloc_topology_t synth = nullptr;
      if (hwloc_topology_init(&synth) != 0) return;
      char* xml = nullptr;
      int len = 0;
      if (hwloc_topology_set_synthetic(synth, "pu:1") == 0 && hwloc_topology_load(synth) == 0 &&
          hwloc_topology_export_xmlbuffer(synth, &xml, &len, 0) == 0) {
        hwloc_topology_t back = nullptr;
        if (hwloc_topology_init(&back) == 0) {
          if (hwloc_topology_set_xmlbuffer(back, xml, len) == 0) (void)hwloc_topology_load(back);
          hwloc_topology_destroy(back);
        }
        hwloc_free_xmlbuffer(synth, xml);
      }
      hwloc_topology_destroy(synth);
    }
    ~Anchor() {
      if (topo != nullptr) hwloc_topology_destroy(topo);
    }
  };
  static const Anchor anchor;
  (void)anchor;
}

// Imports `buf` with libhwloc in this process.
Result<ParsedExport> ImportInProcess(const std::string& buf, const std::string& format, const LoaderLimits& limits,
                                     LoadErrorReason* r) {
  TopologyHandle topo;
  if (!topo.Init()) {
    *r = LoadErrorReason::kMalformed;
    return Status::Internal("hwloc_topology_init failed");
  }
  // REQUIRED: the default I/O filter (KEEP_NONE) silently drops every Bridge/PCIDev/OSDev and
  // the NVLink/XGMI matrices whose objects disappear with them.
  if (hwloc_topology_set_io_types_filter(topo.get(), HWLOC_TYPE_FILTER_KEEP_ALL) < 0 ||
      // See the whole node even if the exporter ran inside a cgroup/cpuset.
      hwloc_topology_set_flags(topo.get(), HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED) < 0) {
    *r = LoadErrorReason::kMalformed;
    return Status::Internal("hwloc: cannot set I/O filter or flags");
  }
  // hwloc wants the buffer size including the terminating NUL.
  if (hwloc_topology_set_xmlbuffer(topo.get(), buf.c_str(), static_cast<int>(buf.size() + 1)) < 0) {
    const int e = errno;
    *r = LoadErrorReason::kMalformed;
    return Status::InvalidArgument(std::string("hwloc refused the XML export (set_xmlbuffer: ") +
                                   std::strerror(e) + "); the file is not a valid hwloc " + format + " export");
  }
  if (hwloc_topology_load(topo.get()) < 0) {
    const int e = errno;
    *r = LoadErrorReason::kMalformed;
    return Status::InvalidArgument(std::string("hwloc could not load the XML export (load: ") + std::strerror(e) +
                                   "); the file is truncated or not a valid hwloc " + format + " export");
  }
  Result<ParsedExport> res = Convert(topo.get(), limits, r);
  if (res.ok()) res.value().xml_format = format;
  return res;
}

// In a forked import child: default signal dispositions, so that a crash in libhwloc is reported
// to the parent as a signal rather than running the webhook's own handlers (crash reporters,
// graceful-shutdown handlers) in the child.
void ResetSignalsInChild() {
  for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD}) {
    ::signal(sig, SIG_DFL);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// One export after screening: its bytes and detected dialect.
struct Pending {
  std::string_view xml;
  std::string format;
};

// One result frame from the child: [u32 index][u8 'K'|'E'][u64 length][payload].
void WriteFrame(int fd, uint32_t index, const Result<ParsedExport>& res, LoadErrorReason reason) {
  std::string payload;
  char kind = 'K';
  if (res.ok()) {
    payload = internal::EncodeExport(res.value());
  } else {
    kind = 'E';
    payload += static_cast<char>(reason);
    payload += static_cast<char>(res.status().code());
    payload += res.status().message();
  }
  std::string frame(13, '\0');
  const uint64_t len = payload.size();
  std::memcpy(frame.data(), &index, 4);
  frame[4] = kind;
  std::memcpy(frame.data() + 5, &len, 8);
  frame += payload;
  if (!WriteAll(fd, frame)) _exit(3);
}

// Runs the libhwloc imports of `items[first..]` in one forked child, storing results as they
// arrive. Returns the index of the first item without a result (== items.size() when all done);
// that item is the one the child died or hung on, and has already been given an error result.
size_t RunChild(const std::vector<Pending>& items, size_t first, const LoaderLimits& limits,
                std::vector<std::optional<Result<ParsedExport>>>& results, std::vector<LoadErrorReason>& reasons) {
  auto fail_all = [&](Status s) {
    for (size_t i = first; i < items.size(); ++i) {
      results[i] = s;
      reasons[i] = LoadErrorReason::kIo;
    }
    return items.size();
  };
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return fail_all(Status::Unavailable(std::string("pipe2: ") + std::strerror(errno)));
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return fail_all(Status::Unavailable(std::string("fork: ") + std::strerror(e)));
  }
  if (pid == 0) {
    // Child: single-threaded; import each item in order and stream the results.
    ResetSignalsInChild();
    ::close(fds[0]);
    const rlim_t cpu = std::max<rlim_t>(1, (limits.import_timeout_ms + 999) / 1000 * (items.size() - first));
    struct rlimit rl {cpu, cpu + 1};
    ::setrlimit(RLIMIT_CPU, &rl);
    for (size_t i = first; i < items.size(); ++i) {
      LoadErrorReason cr = LoadErrorReason::kNone;
      const std::string buf(items[i].xml);
      Result<ParsedExport> res = ImportInProcess(buf, items[i].format, limits, &cr);
      WriteFrame(fds[1], static_cast<uint32_t>(i), res, cr);
    }
    _exit(0);
  }
  ::close(fds[1]);
  std::string in;
  size_t next = first;  // the child handles items strictly in order
  bool timed_out = false;
  bool garbage = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(limits.import_timeout_ms);
  char chunk[65536];
  while (next < items.size()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd pfd{fds[0], POLLIN, 0};
    const int pr = ::poll(&pfd, 1, static_cast<int>(left.count()));
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) {
      timed_out = true;
      break;
    }
    if (pr < 0) break;
    const ssize_t n = ::read(fds[0], chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the child exited or died
    in.append(chunk, static_cast<size_t>(n));
    // Consume complete frames.
    size_t pos = 0;
    while (in.size() - pos >= 13) {
      uint32_t index = 0;
      uint64_t len = 0;
      std::memcpy(&index, in.data() + pos, 4);
      const char kind = in[pos + 4];
      std::memcpy(&len, in.data() + pos + 5, 8);
      if (index != next || (kind != 'K' && kind != 'E') || len > (64u << 20)) {
        garbage = true;
        break;
      }
      if (in.size() - pos - 13 < len) break;
      const std::string_view payload(in.data() + pos + 13, len);
      if (kind == 'K') {
        Result<ParsedExport> res = internal::DecodeExport(payload);
        reasons[index] = res.ok() ? LoadErrorReason::kNone : LoadErrorReason::kMalformed;
        results[index] = std::move(res);
      } else if (payload.size() >= 2) {
        auto reason = static_cast<LoadErrorReason>(static_cast<unsigned char>(payload[0]));
        if (static_cast<size_t>(reason) >= kLoadErrorReasonCount || reason == LoadErrorReason::kNone) {
          reason = LoadErrorReason::kMalformed;
        }
        reasons[index] = reason;
        results[index] = Status(static_cast<StatusCode>(static_cast<unsigned char>(payload[1])),
                                std::string(payload.substr(2)));
      } else {
        garbage = true;
        break;
      }
      pos += 13 + len;
      ++next;
      deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(limits.import_timeout_ms);
    }
    in.erase(0, pos);
    if (garbage) break;
  }
  ::close(fds[0]);
  if (next < items.size()) ::kill(pid, SIGKILL);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (next >= items.size()) return next;
  // The child stopped at item `next`: that export is refused, the caller restarts after it.
  reasons[next] = LoadErrorReason::kMalformed;
  const std::string& format = items[next].format;
  if (timed_out) {
    results[next] = Status::ResourceExhausted("hwloc import did not finish within " +
                                              std::to_string(limits.import_timeout_ms) + " ms; refused");
  } else if (!garbage && WIFSIGNALED(st) && WTERMSIG(st) != SIGKILL) {
    results[next] = Status::InvalidArgument("libhwloc crashed (signal " + std::to_string(WTERMSIG(st)) +
                                            ") importing this export; it is not a valid hwloc " + format + " export");
  } else {
    results[next] = Status::InvalidArgument("the hwloc import worker died (status " + std::to_string(st) +
                                            ") importing this export; it is not a valid hwloc " + format + " export");
  }
  return next + 1;
}

// Imports `items` in forked children so that a libhwloc crash or hang on hostile input
// (libhwloc's XML importer is not hardened: mutated exports make 2.9 dereference NULL bitmaps)
// costs one refused export instead of the webhook process. One child handles a whole batch (fork
// is slow on small VMs); when it dies on an item, a new child continues after that item. The
// parent calls libhwloc only in the once-only warm-up, so no hwloc/libxml2 lock can be held by
// another parent thread at fork time.
void ImportIsolated(const std::vector<Pending>& items, const LoaderLimits& limits,
                    std::vector<std::optional<Result<ParsedExport>>>& results, std::vector<LoadErrorReason>& reasons) {
  size_t first = 0;
  while (first < items.size()) first = RunChild(items, first, limits, results, reasons);
}


// ---- Long-lived import workers (ImportPool) ----

bool ReadAll(int fd, char* data, size_t n) {
  while (n > 0) {
    const ssize_t k = ::read(fd, data, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    data += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);  // never SIGPIPE the webhook
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Child side: read requests [u64 len][u32 format len][xml][format], answer with one frame each,
// exit on EOF (the parent closed its end or died).
[[noreturn]] void WorkerLoop(int fd, const LoaderLimits& limits) {
  for (;;) {
    uint64_t len = 0;
    uint32_t flen = 0;
    if (!ReadAll(fd, reinterpret_cast<char*>(&len), 8) || !ReadAll(fd, reinterpret_cast<char*>(&flen), 4) ||
        len > (256u << 20) || flen > 16) {
      _exit(0);
    }
    std::string buf(len, '\0');
    std::string format(flen, '\0');
    if (!ReadAll(fd, buf.data(), len) || !ReadAll(fd, format.data(), flen)) _exit(0);
    LoadErrorReason r = LoadErrorReason::kNone;
    Result<ParsedExport> res = ImportInProcess(buf, format, limits, &r);
    WriteFrame(fd, 0, res, r);
  }
}

}  // namespace

struct ImportPool::Impl {
  struct Slot {
    pid_t pid = -1;
    int fd = -1;  // parent end of the socketpair
  };
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Slot> slots;   // GUARDED_BY(mu) for the free list; a taken slot is owned by its user
  std::vector<size_t> free;  // GUARDED_BY(mu)

  static void Stop(Slot& s) {
    if (s.fd >= 0) ::close(s.fd);  // EOF makes an idle worker exit
    if (s.pid > 0) {
      ::kill(s.pid, SIGKILL);
      int st = 0;
      while (::waitpid(s.pid, &st, 0) < 0 && errno == EINTR) {
      }
    }
    s = Slot{};
  }

  static Status Start(Slot& s, const LoaderLimits& limits) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      return Status::Unavailable(std::string("socketpair: ") + std::strerror(errno));
    }
    const pid_t pid = ::fork();
    if (pid < 0) {
      const int e = errno;
      ::close(sv[0]);
      ::close(sv[1]);
      return Status::Unavailable(std::string("fork: ") + std::strerror(e));
    }
    if (pid == 0) {
      // Keep only stdio and our socket: the worker must not hold the server's listening socket,
      // other workers' sockets or the inotify descriptor.
      ResetSignalsInChild();
      if (::dup2(sv[1], 3) < 0) _exit(4);
      ::close_range(4, ~0u, 0);
      WorkerLoop(3, limits);
    }
    ::close(sv[1]);
    s.pid = pid;
    s.fd = sv[0];
    return Status::Ok();
  }

  // Imports one screened export on `s`, (re)starting its worker as needed.
  static Result<ParsedExport> Import(Slot& s, const Pending& item, const LoaderLimits& limits, LoadErrorReason* r) {
    *r = LoadErrorReason::kMalformed;
    if (s.pid < 0) {
      if (Status st = Start(s, limits); !st.ok()) {
        *r = LoadErrorReason::kIo;
        return st;
      }
    }
    std::string req(12, '\0');
    const uint64_t len = item.xml.size();
    const uint32_t flen = static_cast<uint32_t>(item.format.size());
    std::memcpy(req.data(), &len, 8);
    std::memcpy(req.data() + 8, &flen, 4);
    bool ok = SendAll(s.fd, req) && SendAll(s.fd, item.xml) && SendAll(s.fd, item.format);
    // Read one frame: 13-byte header, then the payload, under one deadline.
    std::string in;
    bool timed_out = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(limits.import_timeout_ms);
    size_t want = 13;
    char chunk[65536];
    while (ok && in.size() < want) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        timed_out = true;
        break;
      }
      pollfd pfd{s.fd, POLLIN, 0};
      const int pr = ::poll(&pfd, 1, static_cast<int>(left.count()));
      if (pr < 0 && errno == EINTR) continue;
      if (pr == 0) {
        timed_out = true;
        break;
      }
      const ssize_t n = pr < 0 ? -1 : ::read(s.fd, chunk, std::min(sizeof chunk, want - in.size()));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ok = false;
        break;
      }
      in.append(chunk, static_cast<size_t>(n));
      if (in.size() == 13 && want == 13) {
        uint64_t plen = 0;
        std::memcpy(&plen, in.data() + 5, 8);
        if ((in[4] != 'K' && in[4] != 'E') || plen > (64u << 20)) {
          ok = false;
          break;
        }
        want = 13 + plen;
      }
    }
    if (!ok || timed_out || in.size() < want) {
      // The worker died, hung or sent garbage on this export: replace it.
      int st = 0;
      if (!timed_out && s.pid > 0) {
        // Give a crashing worker a moment to be reaped to report its signal.
        for (int i = 0; i < 100 && ::waitpid(s.pid, &st, WNOHANG) == 0; ++i) ::usleep(1000);
      }
      const bool signaled = st != 0 && WIFSIGNALED(st);
      if (signaled) s.pid = -1;  // already reaped
      Stop(s);
      if (timed_out) {
        return Status::ResourceExhausted("hwloc import did not finish within " +
                                         std::to_string(limits.import_timeout_ms) + " ms; refused");
      }
      if (signaled) {
        return Status::InvalidArgument("libhwloc crashed (signal " + std::to_string(WTERMSIG(st)) +
                                       ") importing this export; it is not a valid hwloc " + item.format + " export");
      }
      return Status::InvalidArgument("the hwloc import worker died importing this export; it is not a valid hwloc " +
                                     item.format + " export");
    }
    const std::string_view payload = std::string_view(in).substr(13);
    if (in[4] == 'K') {
      Result<ParsedExport> res = internal::DecodeExport(payload);
      *r = res.ok() ? LoadErrorReason::kNone : LoadErrorReason::kMalformed;
      return res;
    }
    if (payload.size() < 2) return Status::Internal("hwloc import worker sent a short error");
    auto reason = static_cast<LoadErrorReason>(static_cast<unsigned char>(payload[0]));
    if (static_cast<size_t>(reason) >= kLoadErrorReasonCount || reason == LoadErrorReason::kNone) {
      reason = LoadErrorReason::kMalformed;
    }
    *r = reason;
    return Status(static_cast<StatusCode>(static_cast<unsigned char>(payload[1])), std::string(payload.substr(2)));
  }
};

ImportPool::ImportPool(unsigned slots) : impl_(std::make_unique<Impl>()) {
  impl_->slots.resize(std::max(1u, slots));
  for (size_t i = 0; i < impl_->slots.size(); ++i) impl_->free.push_back(i);
}

namespace {

// A batch after the pre-parse screen: refused exports already have their result; the rest wait
// in `pending`, with `index` giving their position in the batch.
struct Batch {
  std::vector<std::optional<Result<ParsedExport>>> results;
  std::vector<LoadErrorReason> reasons;
  std::vector<Pending> pending;
  std::vector<size_t> index;
};

Batch ScreenBatch(const std::vector<std::string_view>& xmls, const LoaderLimits& limits) {
  Batch b;
  b.results.resize(xmls.size());
  b.reasons.assign(xmls.size(), LoadErrorReason::kNone);
  for (size_t i = 0; i < xmls.size(); ++i) {
    std::string format;
    if (Status s = ScreenHwlocXml(xmls[i], limits, &b.reasons[i], &format); !s.ok()) {
      b.results[i] = s;
      continue;
    }
    b.pending.push_back({xmls[i], std::move(format)});
    b.index.push_back(i);
  }
  return b;
}

std::vector<Result<ParsedExport>> Collect(Batch& b, std::vector<LoadErrorReason>* reasons_out) {
  std::vector<Result<ParsedExport>> out;
  out.reserve(b.results.size());
  for (auto& r : b.results) {
    out.push_back(r.has_value() ? std::move(*r) : Result<ParsedExport>(Status::Internal("no result")));
  }
  if (reasons_out != nullptr) *reasons_out = std::move(b.reasons);
  return out;
}

}  // namespace

ImportPool::~ImportPool() {
  for (Impl::Slot& s : impl_->slots) Impl::Stop(s);
}

std::vector<Result<ParsedExport>> ImportPool::ParseBatch(const std::vector<std::string_view>& xmls,
                                                         const LoaderLimits& limits,
                                                         std::vector<LoadErrorReason>* reasons_out) {
  Batch b = ScreenBatch(xmls, limits);
  auto& results = b.results;
  auto& reasons = b.reasons;
  const auto& todo = b.index;
  const auto& pending = b.pending;
  if (!pending.empty()) {
    EnsureHwlocComponentsLoaded();
    size_t slot = 0;
    {
      std::unique_lock<std::mutex> lock(impl_->mu);
      impl_->cv.wait(lock, [&] { return !impl_->free.empty(); });
      slot = impl_->free.back();
      impl_->free.pop_back();
    }
    for (size_t k = 0; k < pending.size(); ++k) {
      LoadErrorReason r = LoadErrorReason::kNone;
      results[todo[k]] = limits.isolate ? Impl::Import(impl_->slots[slot], pending[k], limits, &r)
                                        : ImportInProcess(std::string(pending[k].xml), pending[k].format, limits, &r);
      reasons[todo[k]] = r;
    }
    {
      std::lock_guard<std::mutex> lock(impl_->mu);
      impl_->free.push_back(slot);
    }
    impl_->cv.notify_one();
  }
  return Collect(b, reasons_out);
}

std::vector<Result<ParsedExport>> ParseHwlocXmlBatch(const std::vector<std::string_view>& xmls,
                                                     const LoaderLimits& limits,
                                                     std::vector<LoadErrorReason>* reasons_out) {
  Batch b = ScreenBatch(xmls, limits);
  auto& results = b.results;
  auto& reasons = b.reasons;
  const auto& pending_index = b.index;
  const auto& pending = b.pending;
  if (!pending.empty()) {
    EnsureHwlocComponentsLoaded();
    std::vector<std::optional<Result<ParsedExport>>> sub(pending.size());
    std::vector<LoadErrorReason> sub_reasons(pending.size(), LoadErrorReason::kNone);
    if (limits.isolate) {
      ImportIsolated(pending, limits, sub, sub_reasons);
    } else {
      for (size_t k = 0; k < pending.size(); ++k) {
        sub[k] = ImportInProcess(std::string(pending[k].xml), pending[k].format, limits, &sub_reasons[k]);
      }
    }
    for (size_t k = 0; k < pending.size(); ++k) {
      results[pending_index[k]] = std::move(sub[k]);
      reasons[pending_index[k]] = sub_reasons[k];
    }
  }
  return Collect(b, reasons_out);
}

Result<ParsedExport> ParseHwlocXml(std::string_view xml, const LoaderLimits& limits, LoadErrorReason* reason) {
  std::vector<LoadErrorReason> reasons;
  std::vector<Result<ParsedExport>> res = ParseHwlocXmlBatch({xml}, limits, &reasons);
  if (reason != nullptr) *reason = reasons[0];
  return std::move(res[0]);
}

Result<ParsedExport> ParseHwlocFile(const std::string& path, const LoaderLimits& limits, LoadErrorReason* reason) {
  LoadErrorReason local = LoadErrorReason::kNone;
  LoadErrorReason* r = reason != nullptr ? reason : &local;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    *r = LoadErrorReason::kIo;
    return Status::NotFound(path + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    *r = LoadErrorReason::kIo;
    return Status::InvalidArgument(path + ": not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > limits.max_bytes) {
    *r = LoadErrorReason::kTooLarge;
    return Status::ResourceExhausted(path + ": export is " + std::to_string(st.st_size) + " bytes, over the " +
                                     std::to_string(limits.max_bytes) + "-byte limit");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *r = LoadErrorReason::kIo;
    return Status::Unavailable(path + ": cannot open: " + std::strerror(errno));
  }
  std::string bytes;
  bytes.resize(static_cast<size_t>(st.st_size));
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  bytes.resize(static_cast<size_t>(in.gcount()));
  // The file may have grown between stat and read; the screen re-checks the size.
  Result<ParsedExport> res = ParseHwlocXml(bytes, limits, r);
  if (!res.ok()) return Status(res.status().code(), path + ": " + res.status().message());
  return res;
}

}  // namespace draguard::topology
