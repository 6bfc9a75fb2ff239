// Internal to the topology module: ownership of an hwloc topology and the settings every load of
// ours uses, shared by the import (hwloc_import.cc) and the local export (hwloc_export.cc) so that
// what the exporter discovers is what the loader reads back.
#pragma once

#include <hwloc.h>

namespace draguard::topology::internal {

/// Owns an hwloc topology; destroys it with the handle.
class TopologyHandle {
 public:
  TopologyHandle() = default;
  ~TopologyHandle() {
    if (topo_ != nullptr) hwloc_topology_destroy(topo_);
  }
  TopologyHandle(const TopologyHandle&) = delete;
  TopologyHandle& operator=(const TopologyHandle&) = delete;
  /// hwloc_topology_init; false on failure.
  bool Init() { return hwloc_topology_init(&topo_) == 0; }
  /// The topology (null before Init).
  hwloc_topology_t get() const { return topo_; }

 private:
  hwloc_topology_t topo_ = nullptr;
};

/// Applies our load settings before hwloc_topology_load; false when hwloc refuses them.
/// Every I/O object is kept (the default filter, KEEP_NONE, silently drops every Bridge/PCIDev/
/// OSDev and the NVLink/XGMI matrices whose objects disappear with them), and disallowed PUs and
/// NUMA nodes are included (the whole node, even when the exporter ran inside a cgroup/cpuset).
inline bool ApplyLoadSettings(hwloc_topology_t topo) {
  return hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_ALL) == 0 &&
         hwloc_topology_set_flags(topo, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED) == 0;
}

}  // namespace draguard::topology::internal
