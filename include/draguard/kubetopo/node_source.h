// NodeSource: the topology::Source of `draguard serve --topology-configmaps NS`, fed by three
// list + watch loops (kube/watch.h):
//   * Nodes labelled draguard.io/topology-shape, metadata only, keeping only that label and the
//     annotation draguard.io/topology (shape_object.h): each node's publication;
//   * shape objects in NS (ConfigMaps labelled draguard.io/topology=shape): each is verified
//     (name = digest of its content, immutable, fingerprint = label) and its record decoded once,
//     whatever number of nodes use it;
//   * per-node ConfigMaps of earlier releases in NS (labelled draguard.io/topology=hwloc), read
//     for one release so that a cluster whose exporters still publish them keeps working through
//     the upgrade.
//
// A node with a valid publication whose shape object is known comes to the Store built (no export
// parsed; topology::SourceEntry::built). Its per-node ConfigMap of an earlier release, if any, is
// then ignored. A later publication that is refused, or waits for its shape object, leaves the
// node its last good model; a node never built from a publication keeps using its old ConfigMap. A ConfigMap's XML is handed to the Store once and then dropped (a
// second read of the same version GETs it again), so no raw export stays in memory.
//
// What a replica keeps: each distinct record once (shared Shape and CPU list), and per node its
// name, the digest it uses, a hash of its label and annotation (so that the Node updates that do
// not touch them, status heartbeats, cost one comparison) and its built NodeTopology.
//
// Collection: shape objects that no Node refers to for `collect_after`, and that are older than
// that, are deleted after a fresh list of the Nodes with their fingerprint confirms that none uses
// them (each replica does this; the delete carries the object's uid as a precondition, so replicas
// racing for it do no harm). Objects that fail verification are collected alike.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "draguard/kube/client.h"
#include "draguard/kube/watch.h"
#include "draguard/kubetopo/shape_object.h"
#include "draguard/status.h"
#include "draguard/topology/shape_record.h"
#include "draguard/topology/store.h"

namespace draguard::kubetopo {

/// Label carrying the node name on per-node ConfigMaps of earlier releases.
inline constexpr const char* kNodeLabel = "draguard.io/node";
/// Preferred data key of per-node ConfigMaps of earlier releases.
inline constexpr const char* kTopologyKey = "topology.xml";

/// The export (key, bytes) of a per-node ConfigMap of an earlier release: the key `topology.xml`
/// in `data`, else in `binaryData`; else `topology.xml.gz` in `binaryData` (gzip, returned as
/// stored); else the first key (in byte order) ending in `.xml` in `data`, else in `binaryData`.
/// NotFound when none.
Result<std::pair<std::string, std::string>> SelectExport(const kube::Object& config_map);

/// Options of a NodeSource.
struct NodeSourceOptions {
  std::string namespace_name;               ///< where shape objects and per-node ConfigMaps live
  bool legacy_configmaps = true;            ///< also read per-node ConfigMaps of earlier releases
  int node_page_size = 500;                 ///< Nodes per LIST page
  /// Template of the three watches (timeouts, backoff, clock, sleeper); resource, namespace,
  /// selector, metadata and filter are set by the source.
  kube::WatchOptions watch;
  std::chrono::milliseconds settle{100};    ///< quiet period before on_change; 0 = none
  topology::ShapeRecordLimits limits;       ///< applied to every shape record
  /// Collect shape objects unused (and older than) this long; 0 = never collect.
  std::chrono::milliseconds collect_after{std::chrono::minutes(10)};
  std::chrono::milliseconds collect_interval{std::chrono::minutes(1)};  ///< how often to look
  std::chrono::milliseconds api_deadline{10000};  ///< per call of the collection
  /// Wall clock (creation times of shape objects); null = system_clock::now.
  std::function<std::chrono::system_clock::time_point()> wall_clock;
  /// Watcher errors and refused publications or objects (from watcher threads); optional.
  std::function<void(const Status&)> on_error;
};

/// Counts for metrics and tests (a consistent view). A node is counted by the state of its latest
/// publication; a waiting or refused one is still served with its last good model, if it had one.
struct NodeSourceCounts {
  uint64_t nodes_built = 0;        ///< nodes whose latest publication is built and served
  uint64_t nodes_waiting = 0;      ///< nodes whose latest publication names a shape object not known (yet)
  uint64_t nodes_refused = 0;      ///< nodes whose latest publication is refused
  uint64_t shape_objects = 0;      ///< shape objects verified and decoded
  uint64_t shape_objects_refused = 0;  ///< shape objects that failed verification
  uint64_t legacy_configmaps = 0;  ///< per-node ConfigMaps of earlier releases listed
  uint64_t collected_total = 0;    ///< shape objects this replica deleted
};

/// The source. Thread-safe.
class NodeSource : public topology::Source {
 public:
  /// `client` must outlive the source.
  NodeSource(const kube::Client& client, NodeSourceOptions options);
  /// Stops watching, collecting and notifying.
  ~NodeSource() override;
  NodeSource(const NodeSource&) = delete;
  NodeSource& operator=(const NodeSource&) = delete;

  /// Starts the watches and the collection (once).
  void Start();
  /// Waits until every watch has listed once; false after `timeout`.
  bool WaitForSync(std::chrono::milliseconds timeout);
  /// True once every watch has listed once.
  bool synced() const;
  /// The last watcher error (OK when none since the last successful list).
  Status last_error() const;
  /// Current counts.
  NodeSourceCounts counts() const;
  /// Runs one collection pass now (tests; the collection thread calls it every collect_interval).
  void CollectNow();

  std::string Describe() const override;
  Result<std::vector<topology::SourceEntry>> List() override;
  Result<std::string> Read(const topology::SourceEntry& entry, size_t max_bytes) override;
  Status Watch(std::function<void()> on_change) override;
  void StopWatching() override;

 private:
  struct NodeEntry;
  struct ShapeEntry;
  struct LegacyEntry;
  class Handler;
  enum class Feed { kNodes, kShapes, kLegacy };

  // Watch callbacks (watcher threads).
  void Sync(Feed feed, std::vector<kube::Object> all);
  void Upsert(Feed feed, const kube::Object& object);
  void Delete(Feed feed, const kube::Object& object);
  void Error(const Status& status);
  // Under mu_.
  bool UpsertNodeLocked(const kube::Object& node);
  void BuildNodeLocked(const std::string& name, NodeEntry& entry);
  bool UpsertShapeLocked(const kube::Object& config_map);
  static LegacyEntry LegacyEntryOf(const kube::Object& config_map);
  void MarkDirtyLocked();
  void FlushReports();
  void Notify();
  void StopNotifier();
  void CollectLoop();
  bool StillUnused(const std::string& digest, const std::string& fingerprint);

  const kube::Client& client_;
  NodeSourceOptions options_;
  topology::ShapeInterner interner_;
  std::vector<std::unique_ptr<Handler>> handlers_;
  std::vector<std::unique_ptr<kube::Watcher>> watchers_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, NodeEntry> nodes_;        // by node name; guarded by mu_
  std::map<std::string, ShapeEntry> shapes_;      // by digest; guarded by mu_
  std::map<std::string, LegacyEntry> legacy_;     // by origin; guarded by mu_
  bool synced_[3] = {false, false, false};         // per Feed; guarded by mu_
  Status last_error_;                              // guarded by mu_
  std::vector<Status> reports_;                    // refusals not reported yet; guarded by mu_
  uint64_t collected_ = 0;                         // guarded by mu_
  bool dirty_ = false;                             // guarded by mu_
  bool stop_ = false;                              // guarded by mu_: ends the collector
  bool stop_notify_ = false;                       // guarded by mu_: ends the notifier
  bool started_ = false;                           // guarded by mu_
  std::function<void()> on_change_;                // guarded by mu_
  std::thread notifier_;
  std::thread collector_;
  std::mutex watch_mu_;  // serialises Watch/StopWatching
};

}  // namespace draguard::kubetopo
