// Store: keeps the current topology Snapshot and rebuilds it when the exports change.
//
// Exports come from a Source, which lists (node, version, origin) entries cheaply and reads the
// bytes of one entry on demand; only entries whose version changed are re-parsed. Readers call
// Current() and get an immutable std::shared_ptr<const Snapshot>; publishing a new snapshot is an
// atomic pointer swap, so admission threads never wait for a reload. A bad export is refused
// (logged, counted by reason) and the node keeps its last good model; an entry that disappears
// removes its node.
//
// Typical wiring in `draguard serve`:
//   topology::Store store({.log = my_log_callback});
//   auto source = flags.topology_dir.empty() ? topology::MakeBundledExampleSource()
//                                            : topology::MakeDirectorySource(flags.topology_dir);
//   if (Status s = store.Start(std::move(source), /*watch=*/true); !s.ok()) { /* exit */ }
//   ... engine gets store.Current() per request; metrics read store.Metrics().
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "draguard/status.h"
#include "draguard/topology/import_sandbox.h"
#include "draguard/topology/loader.h"
#include "draguard/topology/snapshot.h"

namespace draguard::topology {

/// One export as a source lists it.
struct SourceEntry {
  /// Node name from an explicit label (ConfigMap label `draguard.io/node`, file name); empty to
  /// take it from the export's HostName info.
  std::string node;
  std::string version;     ///< changes whenever the bytes may have changed
  std::string origin;      ///< human-readable location (file path, "configmap ns/name", ...)
  int64_t modified_ns = 0; ///< modification time; the newer entry wins a node-name conflict
  /// Set by sources that deliver the node already built (from a shape record and the node's
  /// facts, shape_record.h): the Store takes it as it is and never calls Read() for the entry.
  /// Its name must be `node`.
  std::shared_ptr<const NodeTopology> built;
};

/// A provider of hwloc exports. Implementations must be usable from the Store's reload thread.
class Source {
 public:
  virtual ~Source() = default;
  /// Short description for logs ("directory /etc/draguard/topology").
  virtual std::string Describe() const = 0;
  /// Lists the current exports.
  virtual Result<std::vector<SourceEntry>> List() = 0;
  /// Reads the bytes of one listed export, refusing more than `max_bytes` before reading. Not
  /// called for entries that come `built`.
  virtual Result<std::string> Read(const SourceEntry& entry, size_t max_bytes) = 0;
  /// Starts calling `on_change` (from a source-owned thread) after changes settle. Sources that
  /// cannot watch return OK and never call it.
  virtual Status Watch(std::function<void()> on_change) { return Status::Ok(); }
  /// Stops watching; after return `on_change` is not running and will not be called again.
  virtual void StopWatching() {}
};

/// Options of a directory source.
struct DirectorySourceOptions {
  /// Quiet period after the last inotify event before a reload is triggered.
  uint32_t debounce_ms = 200;
  /// Upper bound on the delay of a reload while events keep arriving.
  uint32_t max_delay_ms = 2000;
};

/// Exports in one directory: every `*.xml` file (symlinks followed, hidden names such as the
/// ConfigMap `..data` skipped), node name from the file name. Watched with inotify; a ConfigMap
/// atomic `..data` symlink swap, create, modify, rename and delete all trigger a debounced reload.
std::unique_ptr<Source> MakeDirectorySource(std::string dir, DirectorySourceOptions options = {});

/// A single file; the node name comes from the file name or, failing that, from HostName.
std::unique_ptr<Source> MakeFileSource(std::string path);

/// One in-memory export (tests, bundled examples, later ConfigMaps).
struct InMemoryExport {
  std::string node;     ///< explicit node name; empty to use HostName
  std::string bytes;    ///< the XML
  std::string version;  ///< opaque version
  std::string origin;   ///< description for logs
  int64_t modified_ns = 0;  ///< age for conflict resolution; 0 = position in the list (later is newer)
};

/// A fixed, replaceable set of in-memory exports. Thread-safe. Replace() notifies the watcher.
class InMemorySource : public Source {
 public:
  /// Creates a source holding `exports`.
  explicit InMemorySource(std::vector<InMemoryExport> exports = {});
  std::string Describe() const override;
  Result<std::vector<SourceEntry>> List() override;
  Result<std::string> Read(const SourceEntry& entry, size_t max_bytes) override;
  Status Watch(std::function<void()> on_change) override;
  void StopWatching() override;
  /// Replaces the exports and calls the watcher (synchronously) if one is set.
  void Replace(std::vector<InMemoryExport> exports);

 private:
  mutable std::mutex mu_;
  std::vector<InMemoryExport> exports_;  // guarded by mu_
  std::function<void()> on_change_;      // guarded by mu_
};

/// The bundled example exports (a DGX-2H and a PCIe server with 2x P100), embedded in the binary
/// from deploy/examples/topology/ at build time. Node names: "example-dgx2h", "example-pcie-2xp100".
std::vector<InMemoryExport> BundledExamples();
/// A source serving BundledExamples(); what `draguard serve` uses without --topology-dir.
std::unique_ptr<Source> MakeBundledExampleSource();

/// Plain-number counters for the metrics module. All values are cumulative unless noted.
struct StoreMetrics {
  uint64_t nodes = 0;               ///< gauge: nodes in the current snapshot
  uint64_t shapes = 0;              ///< gauge: distinct shapes in the current snapshot
  uint64_t reloads_total = 0;       ///< completed reloads
  uint64_t reload_failures_total = 0;  ///< reloads where the source could not be listed
  int64_t last_reload_unix_ms = 0;  ///< wall-clock time of the last completed reload (0: never)
  uint64_t last_reload_duration_us = 0;  ///< duration of the last reload
  uint64_t exports_parsed_total = 0;     ///< exports parsed successfully
  /// draguard_topology_load_errors_total{reason}: index with static_cast<size_t>(LoadErrorReason).
  std::array<uint64_t, kLoadErrorReasonCount> load_errors_total{};
};

/// Log severity for the Store's log callback.
enum class LogLevel { kDebug, kInfo, kWarn, kError };
/// Log sink; called from whichever thread runs a reload. Must be thread-safe.
using LogFn = std::function<void(LogLevel, const std::string&)>;

/// Store options.
struct StoreOptions {
  LoaderLimits limits;       ///< applied to every export
  LogFn log;                 ///< optional
  unsigned parse_threads = 0;  ///< threads for parsing changed exports; 0 = hardware concurrency
};

/// A problem found in the most recent reload.
struct StoreProblem {
  std::string origin;
  std::string node;  ///< may be empty when the name was not yet known
  LoadErrorReason reason = LoadErrorReason::kNone;
  Status status;
};

/// Holder of the current snapshot. Thread-safe: Current() and Metrics() may be called from any
/// thread at any time; Start/Reload/Stop are serialised internally.
class Store {
 public:
  /// Creates an empty store (Current() returns an empty snapshot until Start()).
  explicit Store(StoreOptions options = {});
  /// Stops watching.
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  /// Takes ownership of `source`, loads it once synchronously and, when `watch`, reloads on every
  /// change it reports. Fails when the source cannot be listed (individual bad exports do not
  /// fail Start; see problems()). Replaces any earlier source.
  Status Start(std::unique_ptr<Source> source, bool watch);
  /// Re-lists the source and publishes a new snapshot (re-parsing changed exports only).
  Status Reload();
  /// Stops watching the source (the current snapshot stays).
  void Stop();

  /// The current snapshot; never null. Lock-free.
  std::shared_ptr<const Snapshot> Current() const;
  /// Counters for the metrics module.
  StoreMetrics Metrics() const;
  /// Problems found by the most recent reload (refused exports, name conflicts).
  std::vector<StoreProblem> problems() const;
  /// Registers a callback run after every completed reload (tests wait on it). Thread-safe.
  void SetOnReloadForTest(std::function<void(uint64_t generation)> fn);

 private:
  struct Cached;
  struct Outcome;
  /// What one reload counts for the metrics.
  struct ReloadCounts {
    uint64_t parsed_ok = 0;
    std::array<uint64_t, kLoadErrorReasonCount> errors{};
  };
  void Log(LogLevel level, const std::string& msg) const;
  // Steps of Reload(), all under reload_mu_: parse the changed entries (`todo` indexes
  // `entries`), record the outcomes in cache_ (dropping entries no longer listed), then pick one
  // node per name, listing refusals and conflicts in `problems`.
  std::vector<Outcome> ParseChanged(const std::vector<SourceEntry>& entries, const std::vector<size_t>& todo);
  void ParseRange(const std::vector<SourceEntry>& entries, const std::vector<size_t>& todo, size_t begin, size_t end,
                  std::vector<Outcome>& outcomes);
  void Record(const std::vector<SourceEntry>& entries, const std::vector<size_t>& todo, std::vector<Outcome>& outcomes,
              ReloadCounts& counts);
  std::vector<std::shared_ptr<const NodeTopology>> PickNodes(std::vector<StoreProblem>& problems, ReloadCounts& counts);

  StoreOptions options_;
  std::unique_ptr<ImportPool> pool_;  // isolated import workers, one per parse thread
  ShapeInterner interner_;
  std::atomic<std::shared_ptr<const Snapshot>> current_;

  std::mutex reload_mu_;  // serialises Start/Reload/Stop
  std::unique_ptr<Source> source_;                          // guarded by reload_mu_
  std::map<std::string, std::shared_ptr<Cached>> cache_;    // by origin; guarded by reload_mu_
  uint64_t generation_ = 0;                                 // guarded by reload_mu_
  std::set<std::string> conflicts_;  // conflicts already counted; guarded by reload_mu_

  mutable std::mutex stats_mu_;
  StoreMetrics metrics_;                           // guarded by stats_mu_
  std::vector<StoreProblem> problems_;             // guarded by stats_mu_
  std::function<void(uint64_t)> on_reload_;        // guarded by stats_mu_
};

}  // namespace draguard::topology
