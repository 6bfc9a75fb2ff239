// ConfigMapSource: a topology::Source fed by kube::ConfigMapWatcher.
//
// This small module is the only place that knows both draguard_kube and draguard_topology; neither
// of them depends on the other.
//
// Which ConfigMaps: those matching the label selector (default draguard.io/topology=hwloc) in one
// namespace (or all). Per ConfigMap, one export:
//   - node:    label draguard.io/node (empty: the store takes it from the export's HostName)
//   - bytes:   the key `topology.xml` in `data`, else in `binaryData`; else `topology.xml.gz` in
//              `binaryData` (gzip, decompressed up to the size limit; publisher.h writes it for
//              large exports); else the first key (in byte order) ending in `.xml` in `data`,
//              else in `binaryData`. A ConfigMap with none of
//              these is still listed, and reading it fails, so the store logs and counts it.
//   - version: metadata.resourceVersion
//   - origin:  "configmap <namespace>/<name>"
//   - modified_ns: the resourceVersion read as a number (etcd revisions grow), so that the newer
//              ConfigMap wins a node-name conflict; 0 when it is not a number.
//
// Start() starts the watcher; WaitForSync() waits for the first complete LIST. Until then List()
// returns an empty set. Watch(on_change) calls on_change from a source-owned notifier thread after
// the watcher delivered changes; a burst (a relist, many events while a reload runs) is coalesced
// into one call, optionally after a short quiet period (`settle`).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "draguard/kube/client.h"
#include "draguard/kube/watch.h"
#include "draguard/status.h"
#include "draguard/topology/store.h"

namespace draguard::kubetopo {

/// Label carrying the node name.
inline constexpr const char* kNodeLabel = "draguard.io/node";
/// Preferred data key.
inline constexpr const char* kTopologyKey = "topology.xml";

/// Options of a ConfigMapSource.
struct ConfigMapSourceOptions {
  kube::WatchOptions watch;                    ///< namespace, selector, timeouts, backoff
  std::chrono::milliseconds settle{100};       ///< quiet period before on_change; 0 = none
  /// Called for watcher errors (from the watcher thread); optional.
  std::function<void(const Status&)> on_error;
};

/// The export (key, bytes) of one ConfigMap following the rules above; NotFound when none.
Result<std::pair<std::string, std::string>> SelectExport(const kube::ConfigMap& config_map);

/// A topology source backed by ConfigMaps. Thread-safe.
class ConfigMapSource : public topology::Source, private kube::ConfigMapHandler {
 public:
  /// `client` must outlive the source.
  ConfigMapSource(const kube::Client& client, ConfigMapSourceOptions options = {});
  /// Stops the notifier and the watcher.
  ~ConfigMapSource() override;

  /// Starts the list + watch thread (once).
  void Start();
  /// Waits until the first LIST arrived; false after `timeout`.
  bool WaitForSync(std::chrono::milliseconds timeout);
  /// True once the first LIST arrived.
  bool synced() const;
  /// The last watcher error (OK when none since the last successful list).
  Status last_error() const;

  std::string Describe() const override;
  Result<std::vector<topology::SourceEntry>> List() override;
  Result<std::string> Read(const topology::SourceEntry& entry, size_t max_bytes) override;
  Status Watch(std::function<void()> on_change) override;
  void StopWatching() override;

 private:
  // ConfigMapHandler (watcher thread).
  void OnSync(std::vector<kube::ConfigMap> all) override;
  void OnUpsert(const kube::ConfigMap& config_map) override;
  void OnDelete(const kube::ConfigMap& config_map) override;
  void OnError(const Status& status) override;
  void MarkDirty();
  void Notify();

  ConfigMapSourceOptions options_;
  kube::ConfigMapWatcher watcher_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, kube::ConfigMap> maps_;  // by origin; guarded by mu_
  bool synced_ = false;                          // guarded by mu_
  Status last_error_;                            // guarded by mu_
  bool dirty_ = false;                           // guarded by mu_
  bool stop_notify_ = false;                     // guarded by mu_
  std::function<void()> on_change_;              // guarded by mu_
  std::thread notifier_;
  std::mutex watch_mu_;  // serialises Watch/StopWatching
};

}  // namespace draguard::kubetopo
