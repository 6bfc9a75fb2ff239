// Internal to the CLI: `serve`'s topology source, the store's logging and its metrics
// (serve_topology.cc).
#pragma once

#include <memory>

#include "draguard/kube/client.h"
#include "draguard/logging/logger.h"
#include "draguard/metrics/metrics.h"
#include "draguard/status.h"
#include "draguard/topology/store.h"
#include "serve_config.h"

namespace draguard::cli {

/// Store options whose log goes through `logger`, tagged component=topology.
topology::StoreOptions TopologyStoreOptions(const std::shared_ptr<logging::Logger>& logger);

/// Starts `store` on the topology source: ConfigMaps through the API (--topology-configmaps, listed
/// once before serving, up to max(--kube-timeout, 10 s)), the exports in --topology-dir (both
/// watched), the bundled examples when named or for a local newcomer, else none (never the demo
/// machines in a cluster). An error names the flag of the source.
Status StartTopology(const ServeConfig& cfg, const kube::Client* client, topology::Store& store,
                     const std::shared_ptr<logging::Logger>& logger);

/// Copies the topology store's counters into their metric families.
void ExportTopologyMetrics(const topology::StoreMetrics& m, metrics::TopologyMetrics& out);

}  // namespace draguard::cli
