#include "draguard/file_watcher.h"

#include <sys/stat.h>

#include <utility>

namespace draguard {

FileWatcher::FileWatcher(std::vector<std::string> paths, std::chrono::milliseconds interval,
                         std::function<void()> on_change)
    : paths_(std::move(paths)), interval_(interval), on_change_(std::move(on_change)) {}

FileWatcher::~FileWatcher() { Stop(); }

std::string FileWatcher::Fingerprint() const {
  std::string fp;
  for (const auto& p : paths_) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) {
      fp += "missing;";
      continue;
    }
    fp += std::to_string(st.st_dev) + ':' + std::to_string(st.st_ino) + ':' +
          std::to_string(st.st_size) + ':' + std::to_string(st.st_mtim.tv_sec) + '.' +
          std::to_string(st.st_mtim.tv_nsec) + ';';
  }
  return fp;
}

void FileWatcher::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return;
  last_ = Fingerprint();
  stop_ = false;
  thread_ = std::thread([this] { Run(); });
}

void FileWatcher::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool FileWatcher::CheckNow() {
  std::string fp = Fingerprint();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (fp == last_) return false;
    last_ = fp;
  }
  on_change_();
  return true;
}

void FileWatcher::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, interval_, [this] { return stop_; });
    if (stop_) break;
    lock.unlock();
    CheckNow();
    lock.lock();
  }
}

}  // namespace draguard
