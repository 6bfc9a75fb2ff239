// FileWatcher: calls back when any of a set of files changes.
//
// Polling stat() (device, inode, size, mtime) follows symlinks, so it sees both in-place writes
// and the atomic "..data" symlink swap that Kubernetes uses for mounted Secrets and ConfigMaps.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace draguard {

/// Watches files on a background thread; thread-safe; stops in its destructor.
class FileWatcher {
 public:
  /// `on_change` runs on the watcher thread after any watched file's fingerprint changes.
  FileWatcher(std::vector<std::string> paths, std::chrono::milliseconds interval,
              std::function<void()> on_change);
  ~FileWatcher();
  FileWatcher(const FileWatcher&) = delete;
  FileWatcher& operator=(const FileWatcher&) = delete;

  /// Starts the background thread (fingerprints are taken now).
  void Start();
  /// Stops and joins the background thread. Idempotent.
  void Stop();
  /// Checks once, synchronously; returns true and calls `on_change` if something changed.
  bool CheckNow();

 private:
  std::string Fingerprint() const;
  void Run();

  std::vector<std::string> paths_;
  std::chrono::milliseconds interval_;
  std::function<void()> on_change_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::string last_;
  std::thread thread_;
};

}  // namespace draguard
