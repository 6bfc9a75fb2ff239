// `serve`'s topology source, store logging and metrics (serve_topology.h).
#include "serve_topology.h"

#include <algorithm>
#include <cstdlib>

#include "draguard/topology/loader.h"

namespace draguard::cli {

topology::StoreOptions TopologyStoreOptions(const std::shared_ptr<logging::Logger>& logger) {
  topology::StoreOptions options;
  options.log = [logger](topology::LogLevel lvl, const std::string& msg) {
    logging::Level level = logging::Level::kError;
    switch (lvl) {
      case topology::LogLevel::kDebug: level = logging::Level::kDebug; break;
      case topology::LogLevel::kInfo: level = logging::Level::kInfo; break;
      case topology::LogLevel::kWarn: level = logging::Level::kWarn; break;
      case topology::LogLevel::kError: level = logging::Level::kError; break;
    }
    logger->Log(level, msg, {{"component", std::string("topology")}});
  };
  return options;
}

namespace {

// The node publications, shape objects and per-node ConfigMaps of --topology-configmaps, listed
// once before serving (up to max(--kube-timeout, 10 s)); the watches keep trying and fill the
// model in later.
std::unique_ptr<kubetopo::NodeSource> NodeTopologySource(const ServeConfig& cfg, const kube::Client& client,
                                                         const std::shared_ptr<logging::Logger>& logger) {
  const auto wait = std::max(cfg.kube_timeout, std::chrono::milliseconds(10000));
  kubetopo::NodeSourceOptions options;
  options.namespace_name = cfg.topology_configmaps;
  options.watch.list_timeout = wait;
  options.api_deadline = cfg.kube_timeout;
  options.on_error = [logger](const Status& st) {
    logger->Warn("topology: " + st.message(), {{"component", std::string("topology")}});
  };
  auto source = std::make_unique<kubetopo::NodeSource>(client, options);
  source->Start();
  if (!source->WaitForSync(wait)) {
    logger->Warn("topology not listed yet; starting with an empty topology model",
                 {{"namespace", cfg.topology_configmaps}, {"error", source->last_error().message()}});
  }
  return source;
}

}  // namespace

Status StartTopology(const ServeConfig& cfg, const kube::Client* client, topology::Store& store,
                     const std::shared_ptr<logging::Logger>& logger, const kubetopo::NodeSource** node_source) {
  if (node_source != nullptr) *node_source = nullptr;
  std::unique_ptr<topology::Source> source;
  std::string described;
  const char* flag = "--topology-dir";
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  switch (TopologySourceFor(cfg, host != nullptr && *host != '\0')) {
    case TopologySource::kConfigMaps: {
      auto api_source = NodeTopologySource(cfg, *client, logger);
      described = api_source->Describe();
      if (node_source != nullptr) *node_source = api_source.get();
      source = std::move(api_source);
      flag = "--topology-configmaps";
      break;
    }
    case TopologySource::kExamples:
      source = topology::MakeBundledExampleSource();
      described = "bundled examples (demo machines, not this cluster's nodes)";
      break;
    case TopologySource::kDirectory:
      source = topology::MakeDirectorySource(cfg.topology_dir);
      described = cfg.topology_dir;
      break;
    case TopologySource::kNone:
      source = std::make_unique<topology::InMemorySource>(std::vector<topology::InMemoryExport>{});
      described = "none";
      logger->Warn("no topology source in a cluster: multi-GPU conversions are refused until exports are "
                   "provided (--topology-dir DIR or --topology-configmaps NAMESPACE)",
                   {});
      break;
  }
  const bool watch = !cfg.topology_configmaps.empty() ||
                     (!cfg.topology_dir.empty() && cfg.topology_dir != kBundledExamples);
  if (Status st = store.Start(std::move(source), watch); !st.ok()) {
    return Status(st.code(), std::string(flag) + ": " + st.message());
  }
  auto tm = store.Metrics();
  logger->Info("topology loaded", {{"source", described},
                                   {"nodes", static_cast<int64_t>(tm.nodes)},
                                   {"shapes", static_cast<int64_t>(tm.shapes)}});
  return Status::Ok();
}

void ExportTopologyMetrics(const topology::StoreMetrics& m, const kubetopo::NodeSource* source,
                           metrics::TopologyMetrics& out) {
  out.nodes.Set({}, static_cast<double>(m.nodes));
  out.shapes.Set({}, static_cast<double>(m.shapes));
  out.reloads.SetTotal({"success"}, static_cast<double>(m.reloads_total));
  out.reloads.SetTotal({"failure"}, static_cast<double>(m.reload_failures_total));
  out.last_reload.Set({}, static_cast<double>(m.last_reload_unix_ms) / 1000.0);
  out.reload_duration.Set({}, static_cast<double>(m.last_reload_duration_us) / 1e6);
  for (std::size_t i = 1; i < m.load_errors_total.size(); ++i) {
    if (m.load_errors_total[i] == 0) continue;
    out.load_errors.SetTotal({topology::LoadErrorReasonName(static_cast<topology::LoadErrorReason>(i))},
                             static_cast<double>(m.load_errors_total[i]));
  }
  if (source == nullptr) return;
  const kubetopo::NodeSourceCounts c = source->counts();
  out.node_publications.Set({"built"}, static_cast<double>(c.nodes_built));
  out.node_publications.Set({"waiting"}, static_cast<double>(c.nodes_waiting));
  out.node_publications.Set({"refused"}, static_cast<double>(c.nodes_refused));
  out.shape_objects.Set({"valid"}, static_cast<double>(c.shape_objects));
  out.shape_objects.Set({"refused"}, static_cast<double>(c.shape_objects_refused));
  out.legacy_configmaps.Set({}, static_cast<double>(c.legacy_configmaps));
  out.shape_objects_collected.SetTotal({}, static_cast<double>(c.collected_total));
}

}  // namespace draguard::cli
