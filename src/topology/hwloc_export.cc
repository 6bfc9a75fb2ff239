// ExportLocalTopology (exporter.h): libhwloc discovery of this machine plus the NVML merge. With
// hwloc_import.cc and hwloc_handle.h the only files of draguard that include <hwloc.h>.
#include <hwloc.h>
#include <hwloc/distances.h>
// plugins.h (the object-insertion calls that hwloc_topology_insert_misc_object itself uses)
// lacks the extern "C" guards of the other hwloc headers.
extern "C" {
#include <hwloc/plugins.h>
}

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>

#include "draguard/topology/exporter.h"
#include "hwloc_handle.h"

namespace draguard::topology {
namespace {

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// A string libhwloc frees with free().
char* Dup(const std::string& s) { return strdup(s.c_str()); }

std::string MigInstanceInfo(const NvmlMigInstance& m) {
  return "profile=" + m.profile + " id=" + std::to_string(m.id) + " profile_id=" + std::to_string(m.profile_id) +
         " slices=" + std::to_string(m.slices) + " memory_mib=" + std::to_string(m.memory_bytes >> 20) +
         " placement=" + std::to_string(m.placement_start) + ":" + std::to_string(m.placement_size);
}

// Adds the nvml OS device of `g` under `pci`; returns it, or nullptr when libhwloc refuses.
hwloc_obj_t AddNvmlOsDevice(hwloc_topology_t topo, hwloc_obj_t pci, const NvmlGpu& g) {
  hwloc_obj_t o = hwloc_alloc_setup_object(topo, HWLOC_OBJ_OS_DEVICE, HWLOC_UNKNOWN_INDEX);
  if (o == nullptr) return nullptr;
  o->name = Dup("nvml" + std::to_string(g.index));
  o->subtype = Dup("NVML");
  o->attr->osdev.type = HWLOC_OBJ_OSDEV_GPU;
  hwloc_insert_object_by_parent(topo, pci, o);
  hwloc_obj_add_info(o, "Backend", "NVML");
  hwloc_obj_add_info(o, "GPUVendor", "NVIDIA Corporation");
  if (!g.name.empty()) hwloc_obj_add_info(o, "GPUModel", g.name.c_str());
  if (!g.uuid.empty()) hwloc_obj_add_info(o, "NVIDIAUUID", g.uuid.c_str());
  if (g.memory_bytes != 0) hwloc_obj_add_info(o, "NVMLTotalMemorySize", std::to_string(g.memory_bytes >> 10).c_str());
  hwloc_obj_add_info(o, "NVIDIAMIGMode", g.mig_enabled ? "Enabled" : "Disabled");
  for (const NvmlMigInstance& m : g.mig_instances) hwloc_obj_add_info(o, "NVIDIAMIGGPUInstance", MigInstanceInfo(m).c_str());
  if (g.fabric) hwloc_obj_add_info(o, "NVIDIAGPUClique", g.fabric->Clique().c_str());
  return o;
}

bool IsNvSwitch(hwloc_obj_t pci) {
  return pci->attr->pcidev.vendor_id == 0x10de && pci->attr->pcidev.class_id == 0x0680;
}

// The NVLinkBandwidth matrix over the GPUs' OS devices and the NVSwitches their links reach.
Status AddNvlinkMatrix(hwloc_topology_t topo, const std::vector<std::pair<const NvmlGpu*, hwloc_obj_t>>& gpus,
                       std::vector<std::string>& warnings) {
  std::vector<hwloc_obj_t> objs;
  std::map<std::string, size_t> index;  // by PCI bus id
  for (const auto& [g, o] : gpus) {
    index[g->pci_bus_id] = objs.size();
    objs.push_back(o);
  }
  struct Edge {
    size_t a, b;
    uint64_t mbps;
  };
  std::vector<Edge> edges;
  for (size_t i = 0; i < gpus.size(); ++i) {
    const NvmlGpu& g = *gpus[i].first;
    for (const NvmlLink& l : g.links) {
      if (!l.active) continue;
      const uint64_t bw = NvlinkLinkBandwidth(l.version);
      if (bw == 0) {
        warnings.push_back("GPU " + g.pci_bus_id + " NVLink " + std::to_string(l.link) + ": unknown NVLink version " +
                           std::to_string(l.version) + "; link left out");
        continue;
      }
      auto it = index.find(l.remote_pci);
      if (it == index.end()) {
        hwloc_obj_t peer = hwloc_get_pcidev_by_busidstring(topo, l.remote_pci.c_str());
        if (peer == nullptr || !IsNvSwitch(peer)) {
          warnings.push_back("GPU " + g.pci_bus_id + " NVLink " + std::to_string(l.link) + ": remote " + l.remote_pci +
                             (peer == nullptr ? " is not in the PCI tree" : " is neither a GPU nor an NVSwitch") +
                             "; link left out");
          continue;
        }
        if (peer->subtype == nullptr) peer->subtype = Dup("NVSwitch");
        it = index.emplace(l.remote_pci, objs.size()).first;
        objs.push_back(peer);
      }
      if (it->second == i) continue;
      edges.push_back({i, it->second, bw});
    }
  }
  if (edges.empty() || objs.size() < 2) return Status::Ok();
  const size_t n = objs.size();
  std::vector<hwloc_uint64_t> values(n * n, 0);
  for (size_t i = 0; i < n; ++i) values[i * n + i] = 1000000;
  const size_t gpu_count = gpus.size();
  for (const Edge& e : edges) {
    values[e.a * n + e.b] += e.mbps;
    // A GPU-GPU link is reported by both GPUs; a switch reports nothing, so mirror it.
    if (e.b >= gpu_count) values[e.b * n + e.a] += e.mbps;
  }
  hwloc_distances_add_handle_t h = hwloc_distances_add_create(
      topo, "NVLinkBandwidth", HWLOC_DISTANCES_KIND_FROM_OS | HWLOC_DISTANCES_KIND_MEANS_BANDWIDTH, 0);
  if (h == nullptr) return Status::Internal(Errno("hwloc_distances_add_create"));
  if (hwloc_distances_add_values(topo, h, static_cast<unsigned>(n), objs.data(), values.data(), 0) < 0) {
    return Status::Internal(Errno("hwloc_distances_add_values"));
  }
  if (hwloc_distances_add_commit(topo, h, 0) < 0) return Status::Internal(Errno("hwloc_distances_add_commit"));
  return Status::Ok();
}

Status MergeNvml(hwloc_topology_t topo, const NvmlReport& nvml, LocalExport& out) {
  std::vector<std::pair<const NvmlGpu*, hwloc_obj_t>> gpus;
  for (const NvmlGpu& g : nvml.gpus) {
    hwloc_obj_t pci = hwloc_get_pcidev_by_busidstring(topo, g.pci_bus_id.c_str());
    if (pci == nullptr) {
      out.warnings.push_back("NVML GPU " + g.pci_bus_id + " (" + g.uuid + ") is not in hwloc's PCI tree; left out");
      continue;
    }
    hwloc_obj_t o = AddNvmlOsDevice(topo, pci, g);
    if (o == nullptr) return Status::Internal("hwloc: cannot allocate an OS device");
    gpus.emplace_back(&g, o);
  }
  if (gpus.empty()) return Status::Ok();
  if (hwloc_topology_reconnect(topo, 0) < 0) return Status::Internal(Errno("hwloc_topology_reconnect"));
  out.nvml_gpus = gpus.size();
  return AddNvlinkMatrix(topo, gpus, out.warnings);
}

}  // namespace

Result<LocalExport> ExportLocalTopology(const NvmlReport* nvml) {
  internal::TopologyHandle topo;
  if (!topo.Init()) return Status::Internal("hwloc_topology_init failed");
  if (!internal::ApplyLoadSettings(topo.get())) {
    return Status::Internal("hwloc: cannot set I/O filter or flags");
  }
  if (hwloc_topology_load(topo.get()) < 0) return Status::Unavailable(Errno("hwloc could not discover this machine"));
  LocalExport out;
  if (nvml != nullptr) {
    if (Status s = MergeNvml(topo.get(), *nvml, out); !s.ok()) return s;
  }
  char* buf = nullptr;
  int len = 0;
  if (hwloc_topology_export_xmlbuffer(topo.get(), &buf, &len, 0) < 0 || buf == nullptr) {
    return Status::Internal(Errno("hwloc_topology_export_xmlbuffer"));
  }
  out.xml.assign(buf, strnlen(buf, static_cast<size_t>(len)));
  hwloc_free_xmlbuffer(topo.get(), buf);
  return out;
}

}  // namespace draguard::topology
