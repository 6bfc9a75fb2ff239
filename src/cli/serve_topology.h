// Internal to the CLI: `serve`'s topology source, the store's logging and its metrics
// (serve_topology.cc).
#pragma once

#include <memory>

#include "draguard/kube/client.h"
#include "draguard/kubetopo/node_source.h"
#include "draguard/logging/logger.h"
#include "draguard/metrics/metrics.h"
#include "draguard/status.h"
#include "draguard/topology/store.h"
#include "serve_config.h"

namespace draguard::cli {

/// Store options whose log goes through `logger`, tagged component=topology.
topology::StoreOptions TopologyStoreOptions(const std::shared_ptr<logging::Logger>& logger);

/// Starts `store` on the topology source: the nodes' publications, shape objects and per-node
/// ConfigMaps of earlier releases through the API (--topology-configmaps, listed once before
/// serving, up to max(--kube-timeout, 10 s)), the exports in --topology-dir (both watched), the
/// bundled examples when named or for a local newcomer, else none (never the demo machines in a
/// cluster). An error names the flag of the source. `node_source` (optional) receives the API
/// source when that is the one started (owned by `store`), else null.
Status StartTopology(const ServeConfig& cfg, const kube::Client* client, topology::Store& store,
                     const std::shared_ptr<logging::Logger>& logger,
                     const kubetopo::NodeSource** node_source = nullptr);

/// Copies the topology store's counters, and the API source's when there is one, into their
/// metric families.
void ExportTopologyMetrics(const topology::StoreMetrics& m, const kubetopo::NodeSource* source,
                           metrics::TopologyMetrics& out);

}  // namespace draguard::cli
