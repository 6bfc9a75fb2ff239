// PolicyStore: the current policy as an immutable snapshot, reloaded when its file changes.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "draguard/policy/policy.h"
#include "draguard/status.h"

namespace draguard::policy {

/// Holds the last good policy. Readers never block on a reload; a bad new file is refused and
/// the previous policy keeps serving. Thread-safe.
class PolicyStore {
 public:
  /// Called after every reload attempt with its outcome.
  using ReloadCallback = std::function<void(const Status&)>;

  /// `extra_exempt_namespaces` are appended to every loaded policy (e.g. the release namespace).
  explicit PolicyStore(std::vector<std::string> extra_exempt_namespaces = {},
                       ReloadCallback on_reload = nullptr);

  /// Loads the bundled default policy.
  Status LoadDefault();
  /// Loads `path` (remembered for Reload()).
  Status LoadFile(const std::string& path);
  /// Re-reads the remembered file; on failure keeps the current policy.
  Status Reload();
  /// Installs an already-parsed policy.
  void Set(Policy policy);

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
};

}  // namespace draguard::policy
