// libhwloc import of one export into plain values (hwloc_import.h). With hwloc_export.cc and
// hwloc_handle.h the only files of draguard that include <hwloc.h>.
#include "hwloc_import.h"
#include "hwloc_handle.h"

#include <hwloc.h>
#include <hwloc/distances.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <unordered_map>

namespace draguard::topology::internal {
namespace {

RawInfos InfosOf(hwloc_obj_t obj) {
  RawInfos out;
  out.reserve(obj->infos_count);
  for (unsigned i = 0; i < obj->infos_count; ++i) {
    const hwloc_info_s& info = obj->infos[i];
    out.emplace_back(info.name != nullptr ? info.name : "", info.value != nullptr ? info.value : "");
  }
  return out;
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

// Where each hwloc PCI device / OS device object went in the RawTopology.
using ObjectIndex = std::unordered_map<hwloc_obj_t, uint32_t>;

// The OS index of the package holding NUMA node `numa`: its ancestor package, else the only
// package whose CPUs include the node's (a node attached above its package); kNoIndex for a node
// without CPUs outside any package (GPU memory, CXL), one spanning packages, or an unnumbered package.
uint32_t PackageOf(hwloc_topology_t topo, hwloc_obj_t numa) {
  hwloc_obj_t package = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, numa);
  if (package == nullptr && numa->cpuset != nullptr && !hwloc_bitmap_iszero(numa->cpuset)) {
    for (hwloc_obj_t p = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PACKAGE, nullptr); p != nullptr;
         p = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PACKAGE, p)) {
      if (p->cpuset != nullptr && hwloc_bitmap_isincluded(numa->cpuset, p->cpuset)) {
        package = p;
        break;
      }
    }
  }
  if (package == nullptr || package->os_index == HWLOC_UNKNOWN_INDEX) return kNoIndex;
  return package->os_index;
}

void ReadNuma(hwloc_topology_t topo, RawTopology& out) {
  for (hwloc_obj_t o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, nullptr); o != nullptr;
       o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, o)) {
    out.numa_packages.push_back(PackageOf(topo, o));
    NumaNode n;
    n.os_index = o->os_index;
    n.memory_bytes = o->attr != nullptr ? o->attr->numanode.local_memory : 0;
    const int w = o->cpuset != nullptr ? hwloc_bitmap_weight(o->cpuset) : 0;
    n.cpus = w > 0 ? static_cast<uint32_t>(w) : 0;
    if (o->subtype != nullptr) n.subtype = o->subtype;
    std::string gpu;
    if (n.subtype == "GPUMemory") {
      // hwloc gives a GPU's memory node the cpuset of the GPU's local CPUs; it holds none of its own.
      n.cpus = 0;
      if (const char* bus = hwloc_obj_get_info_by_name(o, "PCIBusID"); bus != nullptr && std::strlen(bus) <= 16) {
        gpu = bus;
        for (char& c : gpu) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      }
    }
    out.numa_gpu_bus_ids.push_back(std::move(gpu));
    out.numa_nodes.push_back(std::move(n));
  }
}

// Owns an hwloc bitmap.
struct BitmapHandle {
  hwloc_bitmap_t b = hwloc_bitmap_alloc();
  BitmapHandle() = default;
  BitmapHandle(const BitmapHandle&) = delete;
  BitmapHandle& operator=(const BitmapHandle&) = delete;
  ~BitmapHandle() { hwloc_bitmap_free(b); }
  hwloc_bitmap_t get() const { return b; }
};

// The CPU kind of each CPU (hwloc CPU kinds, hwloc >= 2.4): hybrid when some kind's CoreType is
// "IntelAtom"; then that kind's CPUs are efficiency cores and all others performance cores.
std::unordered_map<unsigned, CoreKind> CpuKinds(hwloc_topology_t topo) {
  std::unordered_map<unsigned, CoreKind> out;
  const int nr = hwloc_cpukinds_get_nr(topo, 0);
  if (nr <= 0) return out;
  BitmapHandle atom;
  bool hybrid = false;
  for (int k = 0; k < nr; ++k) {
    BitmapHandle set;
    unsigned nr_infos = 0;
    hwloc_info_s* infos = nullptr;
    if (hwloc_cpukinds_get_info(topo, static_cast<unsigned>(k), set.get(), nullptr, &nr_infos, &infos, 0) != 0) continue;
    for (unsigned i = 0; i < nr_infos; ++i) {
      if (infos[i].name != nullptr && infos[i].value != nullptr && std::strcmp(infos[i].name, "CoreType") == 0 &&
          std::strcmp(infos[i].value, "IntelAtom") == 0) {
        hwloc_bitmap_or(atom.get(), atom.get(), set.get());
        hybrid = true;
      }
    }
  }
  if (!hybrid) return out;
  hwloc_const_cpuset_t all = hwloc_topology_get_topology_cpuset(topo);
  for (int i = hwloc_bitmap_first(all); i >= 0; i = hwloc_bitmap_next(all, i)) {
    out[static_cast<unsigned>(i)] = hwloc_bitmap_isset(atom.get(), static_cast<unsigned>(i)) ? CoreKind::kEfficiency
                                                                                           : CoreKind::kPerformance;
  }
  return out;
}

// The NUMA node of a PU: the only node whose cpuset holds it, else the only such node without a
// memory subtype other than DRAM (HBM, GPU memory and CXL nodes share their CPUs' cpuset).
uint32_t NumaOfPu(hwloc_topology_t topo, hwloc_obj_t pu) {
  std::vector<hwloc_obj_t> all, plain;
  for (hwloc_obj_t n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, nullptr); n != nullptr;
       n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, n)) {
    if (n->cpuset == nullptr || !hwloc_bitmap_isset(n->cpuset, pu->os_index)) continue;
    all.push_back(n);
    if (n->subtype == nullptr || std::strcmp(n->subtype, "DRAM") == 0) plain.push_back(n);
  }
  if (all.size() == 1) return all.front()->os_index;
  if (plain.size() == 1) return plain.front()->os_index;
  return kNoIndex;
}

// Every PU with its core, package, NUMA node, L3 cache and CPU kind.
void ReadCpus(hwloc_topology_t topo, RawTopology& out) {
  const auto kinds = CpuKinds(topo);
  std::unordered_map<hwloc_obj_t, uint32_t> core_groups;
  auto index = [](hwloc_obj_t o) { return o == nullptr || o->os_index == HWLOC_UNKNOWN_INDEX ? kNoIndex : o->os_index; };
  for (hwloc_obj_t pu = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PU, nullptr); pu != nullptr;
       pu = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PU, pu)) {
    LogicalCpu c;
    c.os_index = pu->os_index;
    hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_CORE, pu);
    c.core = index(core);
    if (core != nullptr) {
      c.core_group = core_groups.try_emplace(core, static_cast<uint32_t>(core_groups.size())).first->second;
    }
    c.package = index(hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, pu));
    c.numa_node = NumaOfPu(topo, pu);
    c.l3_cache = index(hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_L3CACHE, pu));
    if (auto it = kinds.find(pu->os_index); it != kinds.end()) c.kind = it->second;
    out.cpus.push_back(c);
  }
}

void ReadHostBridges(hwloc_topology_t topo, RawTopology& out) {
  for (hwloc_obj_t b = hwloc_get_next_bridge(topo, nullptr); b != nullptr; b = hwloc_get_next_bridge(topo, b)) {
    if (b->attr->bridge.upstream_type != HWLOC_OBJ_BRIDGE_HOST) continue;
    if (b->attr->bridge.downstream_type != HWLOC_OBJ_BRIDGE_PCI) continue;
    const auto& ds = b->attr->bridge.downstream.pci;
    RawHostBridge r;
    r.gp = b->gp_index;
    r.domain = static_cast<uint32_t>(ds.domain);
    r.secondary_bus = ds.secondary_bus;
    r.subordinate_bus = ds.subordinate_bus;
    r.local_numa = LocalNuma(topo, b);
    out.host_bridges.push_back(std::move(r));
  }
}

RawOsDevType OsDevTypeOf(hwloc_obj_t osdev) {
  switch (osdev->attr->osdev.type) {
    case HWLOC_OBJ_OSDEV_NETWORK: return RawOsDevType::kNetwork;
    case HWLOC_OBJ_OSDEV_OPENFABRICS: return RawOsDevType::kOpenFabrics;
    default: return RawOsDevType::kOther;
  }
}

// PCI devices and the OS devices under them.
void ReadPciAndOsDevices(hwloc_topology_t topo, RawTopology& out) {
  ObjectIndex pci_index;
  ObjectIndex osdev_index;
  for (hwloc_obj_t p = hwloc_get_next_pcidev(topo, nullptr); p != nullptr; p = hwloc_get_next_pcidev(topo, p)) {
    const auto& a = p->attr->pcidev;
    RawPciDevice d;
    d.gp = p->gp_index;
    d.domain = static_cast<uint32_t>(a.domain);
    d.bus = a.bus;
    d.dev = a.dev;
    d.func = a.func;
    d.vendor_id = a.vendor_id;
    d.device_id = a.device_id;
    d.class_id = a.class_id;
    if (hwloc_obj_t hb = HostBridgeOf(p); hb != nullptr) d.host_bridge_gp = hb->gp_index;
    d.local_numa = LocalNuma(topo, p);
    d.infos = InfosOf(p);
    pci_index[p] = static_cast<uint32_t>(out.pci_devices.size());
    out.pci_devices.push_back(std::move(d));
  }
  for (hwloc_obj_t o = hwloc_get_next_osdev(topo, nullptr); o != nullptr; o = hwloc_get_next_osdev(topo, o)) {
    hwloc_obj_t p = o->parent;
    if (p == nullptr || p->type != HWLOC_OBJ_PCI_DEVICE) continue;
    auto it = pci_index.find(p);
    if (it == pci_index.end()) continue;
    RawOsDevice d;
    if (o->name != nullptr) d.name = o->name;
    d.type = OsDevTypeOf(o);
    d.infos = InfosOf(o);
    d.pci = it->second;
    osdev_index[o] = static_cast<uint32_t>(out.os_devices.size());
    out.os_devices.push_back(std::move(d));
  }
  uint32_t i = 0;
  for (hwloc_obj_t p = hwloc_get_next_pcidev(topo, nullptr); p != nullptr; p = hwloc_get_next_pcidev(topo, p), ++i) {
    for (hwloc_obj_t c = p->io_first_child; c != nullptr; c = c->next_sibling) {
      if (c->type != HWLOC_OBJ_OS_DEVICE) continue;
      if (auto it = osdev_index.find(c); it != osdev_index.end()) out.pci_devices[i].os_devices.push_back(it->second);
    }
  }
}

RawMatrix ReadMatrix(hwloc_topology_t topo, hwloc_distances_s* d) {
  RawMatrix m;
  bool has_switch = false;
  for (unsigned i = 0; i < d->nbobjs; ++i) {
    hwloc_obj_t o = d->objs[i];
    if (o != nullptr && o->subtype != nullptr && std::strcmp(o->subtype, "NVSwitch") == 0) has_switch = true;
  }
  if (has_switch) {
    // GPU<->GPU entries through NVSwitches are 0 in the export; hwloc's transitive closure
    // (what `lstopo --distances-transform transitive-closure` shows) connects them.
    m.via_switch = hwloc_distances_transform(topo, d, HWLOC_DISTANCES_TRANSFORM_TRANSITIVE_CLOSURE, nullptr, 0) == 0;
  }
  const unsigned n = d->nbobjs;
  m.objects.resize(n);
  for (unsigned i = 0; i < n; ++i) {
    hwloc_obj_t o = d->objs[i];
    if (o == nullptr) continue;
    hwloc_obj_t pci = nullptr;
    if (o->type == HWLOC_OBJ_OS_DEVICE && o->parent != nullptr && o->parent->type == HWLOC_OBJ_PCI_DEVICE) {
      pci = o->parent;
    } else if (o->type == HWLOC_OBJ_PCI_DEVICE) {
      pci = o;
    } else if (o->type == HWLOC_OBJ_PACKAGE) {
      m.objects[i].package = o->os_index;
    }
    if (pci != nullptr) m.objects[i].pci_gp = pci->gp_index;
  }
  m.values.assign(d->values, d->values + static_cast<size_t>(n) * n);
  return m;
}

// Reads every matrix named `name`, keeping the bandwidth ones.
RawMatrices ReadMatrices(hwloc_topology_t topo, const char* name) {
  RawMatrices out;
  unsigned nr = 0;
  if (hwloc_distances_get_by_name(topo, name, &nr, nullptr, 0) < 0 || nr == 0) return out;
  std::vector<hwloc_distances_s*> dists(nr, nullptr);
  if (hwloc_distances_get_by_name(topo, name, &nr, dists.data(), 0) < 0) return out;
  dists.resize(nr);
  out.found = true;
  for (hwloc_distances_s* d : dists) {
    if (d == nullptr) continue;
    if ((d->kind & HWLOC_DISTANCES_KIND_MEANS_BANDWIDTH) != 0) out.bandwidth.push_back(ReadMatrix(topo, d));
    hwloc_distances_release(topo, d);
  }
  return out;
}

RawTopology ReadTopology(hwloc_topology_t topo) {
  RawTopology out;
  out.root_infos = InfosOf(hwloc_get_root_obj(topo));
  ReadNuma(topo, out);
  ReadCpus(topo, out);
  ReadHostBridges(topo, out);
  ReadPciAndOsDevices(topo, out);
  out.nvlink = ReadMatrices(topo, "NVLinkBandwidth");
  out.xgmi = ReadMatrices(topo, "XGMIBandwidth");
  return out;
}

}  // namespace

// Keeps libhwloc's components (and the plugins it dlopen()s: xml_libxml, pci, opencl, gl) loaded
// until the process exits. Without it every hwloc_topology_destroy() that drops the component
// refcount to zero unloads the plugins and the next import loads them again, and each forked
// import would pay the full plugin load (about 30 ms). Created once, never modified afterwards;
// called before any fork so no hwloc lock can be held by a parent thread at fork time.
void KeepHwlocLoaded() {
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

Result<RawTopology> ReadHwlocXml(const std::string& xml, const std::string& format, LoadErrorReason* reason) {
  TopologyHandle topo;
  if (!topo.Init()) {
    *reason = LoadErrorReason::kMalformed;
    return Status::Internal("hwloc_topology_init failed");
  }
  if (!ApplyLoadSettings(topo.get())) {
    *reason = LoadErrorReason::kMalformed;
    return Status::Internal("hwloc: cannot set I/O filter or flags");
  }
  // hwloc wants the buffer size including the terminating NUL.
  if (hwloc_topology_set_xmlbuffer(topo.get(), xml.c_str(), static_cast<int>(xml.size() + 1)) < 0) {
    const int e = errno;
    *reason = LoadErrorReason::kMalformed;
    return Status::InvalidArgument(std::string("hwloc refused the XML export (set_xmlbuffer: ") +
                                   std::strerror(e) + "); the file is not a valid hwloc " + format + " export");
  }
  if (hwloc_topology_load(topo.get()) < 0) {
    const int e = errno;
    *reason = LoadErrorReason::kMalformed;
    return Status::InvalidArgument(std::string("hwloc could not load the XML export (load: ") + std::strerror(e) +
                                   "); the file is truncated or not a valid hwloc " + format + " export");
  }
  return ReadTopology(topo.get());
}

}  // namespace draguard::topology::internal
