// PolicyStore: the current policy as an immutable snapshot, reloaded when its file changes.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "draguard/file_watcher.h"
#include "draguard/policy/policy.h"
#include "draguard/status.h"

namespace draguard::policy {

/// Holds the last good policy. Readers never block on a reload; a bad new file is refused and
/// the previous policy keeps serving. Optionally watches its file (Watch). Thread-safe.
class PolicyStore {
 public:
  /// Called after every reload attempt with its outcome.
  using ReloadCallback = std::function<void(const Status&)>;

  /// `extra_exempt_namespaces` are appended to every loaded policy (e.g. the release namespace).
  explicit PolicyStore(std::vector<std::string> extra_exempt_namespaces = {},
                       ReloadCallback on_reload = nullptr);
  /// Stops the watcher.
  ~PolicyStore();
  PolicyStore(const PolicyStore&) = delete;
  PolicyStore& operator=(const PolicyStore&) = delete;

  /// Loads the bundled default policy.
  Status LoadDefault();
  /// Loads `path` (remembered for Reload()).
  Status LoadFile(const std::string& path);
  /// Re-reads the remembered file; on failure keeps the current policy.
  Status Reload();
  /// Installs an already-parsed policy.
  void Set(Policy policy);

  /// Polls the file being served every `interval` on a background thread and reloads it when it
  /// changes (Reload). Nothing is watched for the embedded default. Replaces an earlier watch.
  void Watch(std::chrono::milliseconds interval);
  /// Stops the watcher. Idempotent.
  void StopWatching();
  /// Checks the watched file once, synchronously; reloads and returns true if it changed since
  /// Watch() or the last check. False when nothing is watched.
  bool PollNow();

  /// The current policy; null before the first successful load.
  std::shared_ptr<const Policy> Current() const;
  /// The file being served, or "" for the embedded default.
  std::string path() const;

 private:
  Status Install(Result<Policy> parsed);

  std::vector<std::string> extra_namespaces_;
  ReloadCallback on_reload_;
  mutable std::mutex mu_;
  std::shared_ptr<const Policy> current_;
  std::string path_;
  std::mutex watch_mu_;  // guards watcher_; never held by the reload callback
  std::unique_ptr<FileWatcher> watcher_;
};

}  // namespace draguard::policy
