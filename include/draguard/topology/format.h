// Text renderings of the topology model for `draguard topology show`.
#pragma once

#include <string>
#include <string_view>

#include "draguard/topology/snapshot.h"

namespace draguard::topology {

/// JSON array with one object per node (all nodes, or only `node` when non-empty), in the shape
/// documented in docs/product.md and docs/topology.md. Pretty-printed with 2-space indent.
std::string FormatJson(const Snapshot& snapshot, std::string_view node = {});

/// One line per GPU: node, PCI id, model, memory, pcieRoot, NUMA, local NICs, NVLink peers.
std::string FormatTable(const Snapshot& snapshot, std::string_view node = {});

}  // namespace draguard::topology
