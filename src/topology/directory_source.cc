// Directory source with an inotify watcher (debounced; handles the ConfigMap `..data` swap).
#include <dirent.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "draguard/read_file.h"
#include "draguard/topology/store.h"

namespace draguard::topology {
namespace {

class DirectorySource : public Source {
 public:
  DirectorySource(std::string dir, DirectorySourceOptions options) : dir_(std::move(dir)), options_(options) {
    while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  }
  ~DirectorySource() override { StopWatching(); }

  std::string Describe() const override { return "directory " + dir_; }

  Result<std::vector<SourceEntry>> List() override {
    DIR* d = ::opendir(dir_.c_str());
    if (d == nullptr) return Status::Unavailable(dir_ + ": cannot open directory: " + std::strerror(errno));
    std::vector<SourceEntry> out;
    while (dirent* ent = ::readdir(d)) {
      const std::string name = ent->d_name;
      const std::string node = NodeNameFromFileName(name);  // skips hidden names such as ..data
      if (node.empty()) continue;
      const std::string path = dir_ + "/" + name;
      struct stat st {};
      if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;  // dangling symlink, dir, ...
      SourceEntry e;
      e.node = node;
      e.origin = path;
      e.modified_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
      // The inode changes when a ConfigMap swaps `..data`, even if size and mtime do not.
      e.version = std::to_string(e.modified_ns) + ":" + std::to_string(st.st_size) + ":" +
                  std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
      out.push_back(std::move(e));
    }
    ::closedir(d);
    std::sort(out.begin(), out.end(), [](const SourceEntry& a, const SourceEntry& b) { return a.origin < b.origin; });
    return out;
  }

  Result<std::string> Read(const SourceEntry& entry, size_t max_bytes) override {
    return ReadFile(entry.origin, max_bytes);
  }

  Status Watch(std::function<void()> on_change) override {
    StopWatching();
    const int ifd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (ifd < 0) return Status::Unavailable(std::string("inotify_init1: ") + std::strerror(errno));
    const uint32_t mask = IN_CREATE | IN_DELETE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO |
                          IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;
    if (::inotify_add_watch(ifd, dir_.c_str(), mask) < 0) {
      const int e = errno;
      ::close(ifd);
      return Status::Unavailable(dir_ + ": inotify_add_watch: " + std::strerror(e));
    }
    const int efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (efd < 0) {
      ::close(ifd);
      return Status::Unavailable(std::string("eventfd: ") + std::strerror(errno));
    }
    std::lock_guard<std::mutex> lock(mu_);
    inotify_fd_ = ifd;
    stop_fd_ = efd;
    thread_ = std::thread([this, ifd, efd, cb = std::move(on_change)] { Run(ifd, efd, cb); });
    return Status::Ok();
  }

  void StopWatching() override {
    std::thread t;
    int ifd = -1;
    int efd = -1;
    {
      std::lock_guard<std::mutex> lock(mu_);
      t = std::move(thread_);
      ifd = inotify_fd_;
      efd = stop_fd_;
      inotify_fd_ = stop_fd_ = -1;
    }
    if (efd >= 0) {
      const uint64_t one = 1;
      (void)!::write(efd, &one, sizeof one);
    }
    if (t.joinable()) t.join();
    if (ifd >= 0) ::close(ifd);
    if (efd >= 0) ::close(efd);
  }

 private:
  // Drains pending inotify events; returns false when the stop fd fired.
  static bool Drain(int ifd) {
    alignas(inotify_event) char buf[8192];
    while (::read(ifd, buf, sizeof buf) > 0) {
    }
    return true;
  }

  void Run(int ifd, int efd, const std::function<void()>& cb) {
    using Clock = std::chrono::steady_clock;
    bool pending = false;
    Clock::time_point first{};
    Clock::time_point last{};
    for (;;) {
      int timeout = -1;
      if (pending) {
        const auto now = Clock::now();
        const auto quiet_deadline = last + std::chrono::milliseconds(options_.debounce_ms);
        const auto hard_deadline = first + std::chrono::milliseconds(options_.max_delay_ms);
        const auto deadline = std::min(quiet_deadline, hard_deadline);
        timeout = deadline <= now ? 0
                                  : static_cast<int>(
                                        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1);
      }
      pollfd fds[2] = {{ifd, POLLIN, 0}, {efd, POLLIN, 0}};
      const int n = ::poll(fds, 2, timeout);
      if (n < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[1].revents != 0) return;  // stop requested
      if (fds[0].revents != 0) {
        Drain(ifd);
        const auto now = Clock::now();
        if (!pending) first = now;
        pending = true;
        last = now;
        continue;
      }
      if (pending) {
        pending = false;
        cb();
      }
    }
  }

  std::string dir_;
  DirectorySourceOptions options_;
  std::mutex mu_;
  std::thread thread_;   // guarded by mu_
  int inotify_fd_ = -1;  // guarded by mu_
  int stop_fd_ = -1;     // guarded by mu_
};

}  // namespace

std::unique_ptr<Source> MakeDirectorySource(std::string dir, DirectorySourceOptions options) {
  return std::make_unique<DirectorySource>(std::move(dir), options);
}

}  // namespace draguard::topology
