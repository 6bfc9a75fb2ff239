// Watcher: list + watch of one kind of object selected by label, delivered to a handler.
//
// The loop is the client-go reflector in small: LIST (paginated) → OnSync(all) → WATCH from the
// list's resourceVersion with allowWatchBookmarks=true. ADDED/MODIFIED → OnUpsert, DELETED →
// OnDelete, BOOKMARK only advances the resourceVersion. A watch that ends is re-opened from the
// last resourceVersion; 410 Gone (HTTP status or ERROR event with Status code 410) → relist.
// Failures wait an exponential backoff with jitter (reset after a success) before the next
// attempt. Clock, sleeper and random source are injectable so tests run without wall-clock sleeps.
//
// It watches any resource of the core group (ConfigMaps, Nodes) or of a named group and version
// (`group_version`: ResourceClaims); with `metadata_only` the server sends only the objects'
// metadata (PartialObjectMetadata), and the ObjectFilter keeps only the keys and fields a consumer
// reads, so a list of many large objects stays small in memory.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "draguard/kube/client.h"
#include "draguard/status.h"

namespace draguard::kube {

class HttpConnection;  // internal (src/kube/transport.h)

/// The parts of a watched object that consumers need: its metadata and, for ConfigMaps, its
/// data. binary_data is already base64-decoded.
struct Object {
  std::string namespace_name;                      ///< metadata.namespace (empty for Nodes)
  std::string name;                                ///< metadata.name
  std::string uid;                                 ///< metadata.uid
  std::string resource_version;                    ///< metadata.resourceVersion
  std::string creation_timestamp;                  ///< metadata.creationTimestamp (RFC 3339)
  std::map<std::string, std::string> labels;       ///< metadata.labels
  std::map<std::string, std::string> annotations;  ///< metadata.annotations
  std::map<std::string, std::string> data;         ///< data (ConfigMaps)
  std::map<std::string, std::string> binary_data;  ///< binaryData, decoded (ConfigMaps)
  bool immutable = false;                          ///< immutable (ConfigMaps)
  /// The top-level fields ObjectFilter::fields names, each as its JSON text ("spec" → "{...}").
  std::map<std::string, std::string> fields;
};

/// Which parts of an object ParseObject keeps.
struct ObjectFilter {
  /// Label keys to keep; empty = all.
  std::vector<std::string> labels;
  /// Annotation keys to keep; empty = all.
  std::vector<std::string> annotations;
  /// Keep `data` and `binaryData`.
  bool data = true;
  /// Keep labels and annotations (as `labels` and `annotations` say); false keeps neither.
  bool metadata_maps = true;
  /// Top-level fields kept as JSON text in Object::fields (e.g. "spec"); absent fields are left out.
  std::vector<std::string> fields;
};

/// Parses an object (JSON text) into an Object, keeping what `filter` asks for. InvalidArgument
/// when it is not an object with metadata.name, or when binaryData is not base64.
Result<Object> ParseObject(std::string_view json, const ObjectFilter& filter = {});

/// Receives the watcher's view. All calls come from the watcher thread, one at a time; they
/// should return quickly, must not call Watcher::Stop(), and should not throw (an exception is
/// caught, reported through OnError, and answered with a backoff and a relist).
class WatchHandler {
 public:
  virtual ~WatchHandler() = default;
  /// The complete current set (after the first list and after every relist); replaces all state.
  virtual void OnSync(std::vector<Object> all) = 0;
  /// An object was added or modified.
  virtual void OnUpsert(const Object& object) = 0;
  /// An object was deleted (its last state).
  virtual void OnDelete(const Object& object) = 0;
  /// A failed attempt (before backing off); for logging. Default: ignore.
  virtual void OnError(const Status& status) {}
};

/// Exponential backoff: delay n = min(max, initial * factor^n), then multiplied by
/// (1 + jitter * r) with r from `random` in [0, 1), and capped at max again.
struct BackoffPolicy {
  std::chrono::milliseconds initial{500};  ///< first delay
  std::chrono::milliseconds max{30000};    ///< cap
  double factor = 2.0;                     ///< growth per consecutive failure
  double jitter = 0.5;                     ///< 0 = none; 0.5 = up to +50 %
};

/// Consecutive-failure backoff state. Not thread-safe.
class Backoff {
 public:
  /// `random` returns values in [0, 1); null = a seeded std::mt19937_64.
  Backoff(BackoffPolicy policy, std::function<double()> random);
  /// The delay before the next attempt; grows with every call until Reset().
  std::chrono::milliseconds Next();
  /// Forgets past failures (after a success).
  void Reset() { failures_ = 0; }
  /// Consecutive failures counted so far.
  int failures() const { return failures_; }

 private:
  BackoffPolicy policy_;
  std::function<double()> random_;
  int failures_ = 0;
};

/// What to watch and how.
struct WatchOptions {
  std::string resource = "configmaps";                 ///< plural resource: "configmaps", "nodes", "resourceclaims"
  /// The resource's group and version: empty (or "v1") for the core group, else "group/version"
  /// (e.g. "resource.k8s.io/v1").
  std::string group_version;
  std::string namespace_name;                          ///< empty = all namespaces (or cluster-scoped)
  std::string label_selector;                          ///< labelSelector; empty = every object
  /// Ask for PartialObjectMetadata: the server sends metadata only (no spec, status or data).
  bool metadata_only = false;
  ObjectFilter filter;                                 ///< what each delivered Object keeps
  int page_size = 100;                                 ///< LIST limit per page (continue tokens)
  std::chrono::seconds watch_timeout{300};             ///< timeoutSeconds asked of the server
  std::chrono::milliseconds idle_timeout{120000};      ///< a silent watch is re-opened after this
  std::chrono::milliseconds list_timeout{60000};       ///< deadline for each LIST page
  /// A watch that ends without events sooner than this counts as a failure (backs off).
  std::chrono::milliseconds min_watch_duration{1000};
  BackoffPolicy backoff;                               ///< reconnect policy
  Clock clock;                                         ///< null = steady_clock::now
  /// Waits for a backoff delay; null = a wait that Stop() interrupts. Test sleepers may return
  /// at once (and e.g. advance a fake clock).
  std::function<void(std::chrono::milliseconds)> sleep;
  std::function<double()> random;                      ///< jitter source in [0,1); null = seeded PRNG
};

/// Runs list + watch on a background thread and feeds a handler. Stop() (or the destructor)
/// ends it promptly, including an in-flight watch and a backoff wait.
class Watcher {
 public:
  /// `client` and `handler` must outlive the watcher.
  Watcher(const Client& client, WatchHandler& handler, WatchOptions options = {});
  /// Stops the watcher (see Stop()).
  ~Watcher();
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;

  /// Starts the background thread (once).
  void Start();
  /// Stops and joins the thread; idempotent and thread-safe; no handler call happens after it
  /// returns. Must not be called from a handler.
  void Stop();

  /// The last resourceVersion seen (list, event or bookmark). Thread-safe.
  std::string resource_version() const;
  /// Number of completed LISTs (initial + relists). Thread-safe.
  uint64_t list_count() const { return lists_.load(); }

 private:
  enum class WatchEnd;
  void Run();
  void Step(bool& need_list);
  void ReportHandlerException(const char* what);
  bool ListAll();
  WatchEnd WatchOnce();
  void SleepBackoff();
  void SetResourceVersion(std::string rv);
  std::chrono::steady_clock::time_point Now() const;

  std::string BasePath() const;
  std::string What() const;

  const Client& client_;
  WatchHandler& handler_;
  WatchOptions options_;
  Backoff backoff_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> done_{false};
  std::atomic<uint64_t> lists_{0};
  std::mutex stop_mu_;  // serialises Stop() callers
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string resource_version_;   // guarded by mu_
  std::shared_ptr<HttpConnection> active_;  // guarded by mu_: in-flight connection, for Stop()
  std::thread thread_;
};

}  // namespace draguard::kube
