// The fork sandbox of the libhwloc import (import_sandbox.h): the worker process, its wire
// protocol and the pool of worker slots.
#include "draguard/topology/import_sandbox.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>

#include "export_codec.h"
#include "hwloc_convert.h"
#include "hwloc_import.h"

namespace draguard::topology {
namespace {

// Wire protocol over the socketpair (host byte order: both ends are the same binary).
//   request:  [u64 xml length][u32 format length][xml][format]
//   response: [u8 kind][u64 payload length][payload]; kind 'K': internal::EncodeExport of the
//             result, kind 'E': [u8 LoadErrorReason][u8 StatusCode][message].
constexpr size_t kResponseHeader = 9;
constexpr uint64_t kMaxRequestBytes = 256u << 20;
constexpr uint64_t kMaxResponseBytes = 64u << 20;

bool ReadAll(int fd, char* data, size_t n) {
  while (n > 0) {
    const ssize_t k = ::read(fd, data, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    data += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);  // never SIGPIPE the webhook
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// In a worker: default signal dispositions, so that a crash in libhwloc is reported to the
// parent as a signal rather than running the webhook's own handlers (crash reporters,
// graceful-shutdown handlers) in the child.
void ResetSignalsInChild() {
  for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD}) {
    ::signal(sig, SIG_DFL);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

std::string ResponseFrame(const Result<ParsedExport>& res, LoadErrorReason reason) {
  std::string payload;
  char kind = 'K';
  if (res.ok()) {
    payload = internal::EncodeExport(res.value());
  } else {
    kind = 'E';
    payload += static_cast<char>(reason);
    payload += static_cast<char>(res.status().code());
    payload += res.status().message();
  }
  std::string frame(kResponseHeader, '\0');
  const uint64_t len = payload.size();
  frame[0] = kind;
  std::memcpy(frame.data() + 1, &len, 8);
  return frame + payload;
}

// The worker: answers each request with one response, exits on EOF (the parent closed its end
// or died).
[[noreturn]] void WorkerLoop(int fd, const LoaderLimits& limits) {
  for (;;) {
    uint64_t len = 0;
    uint32_t flen = 0;
    if (!ReadAll(fd, reinterpret_cast<char*>(&len), 8) || !ReadAll(fd, reinterpret_cast<char*>(&flen), 4) ||
        len > kMaxRequestBytes || flen > 16) {
      _exit(0);
    }
    std::string xml(len, '\0');
    std::string format(flen, '\0');
    if (!ReadAll(fd, xml.data(), len) || !ReadAll(fd, format.data(), flen)) _exit(0);
    LoadErrorReason r = LoadErrorReason::kNone;
    Result<ParsedExport> res = internal::ImportInProcess(xml, format, limits, &r);
    if (!SendAll(fd, ResponseFrame(res, r))) _exit(3);
  }
}

// Decodes the payload of a complete response of `kind`.
Result<ParsedExport> DecodeResponse(char kind, std::string_view payload, LoadErrorReason* r) {
  if (kind == 'K') {
    Result<ParsedExport> res = internal::DecodeExport(payload);
    *r = res.ok() ? LoadErrorReason::kNone : LoadErrorReason::kMalformed;
    return res;
  }
  if (payload.size() < 2) return Status::Internal("hwloc import worker sent a short error");
  auto reason = static_cast<LoadErrorReason>(static_cast<unsigned char>(payload[0]));
  if (static_cast<size_t>(reason) >= kLoadErrorReasonCount || reason == LoadErrorReason::kNone) {
    reason = LoadErrorReason::kMalformed;
  }
  *r = reason;
  return Status(static_cast<StatusCode>(static_cast<unsigned char>(payload[1])), std::string(payload.substr(2)));
}

enum class ReadOutcome { kComplete, kBroken, kTimedOut };

// Reads one response (header, then payload) from `fd` into `in` within `timeout_ms`.
ReadOutcome ReadResponse(int fd, uint32_t timeout_ms, std::string& in) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  size_t want = kResponseHeader;
  char chunk[65536];
  while (in.size() < want) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return ReadOutcome::kTimedOut;
    pollfd pfd{fd, POLLIN, 0};
    const int pr = ::poll(&pfd, 1, static_cast<int>(left.count()));
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) return ReadOutcome::kTimedOut;
    const ssize_t n = pr < 0 ? -1 : ::read(fd, chunk, std::min(sizeof chunk, want - in.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ReadOutcome::kBroken;
    in.append(chunk, static_cast<size_t>(n));
    if (in.size() == kResponseHeader && want == kResponseHeader) {
      uint64_t plen = 0;
      std::memcpy(&plen, in.data() + 1, 8);
      if ((in[0] != 'K' && in[0] != 'E') || plen > kMaxResponseBytes) return ReadOutcome::kBroken;
      want = kResponseHeader + plen;
    }
  }
  return ReadOutcome::kComplete;
}

// One worker process and the parent's end of its socket.
class Worker {
 public:
  // Imports one screened export, (re)starting the process as needed.
  Result<ParsedExport> Import(std::string_view xml, const std::string& format, const LoaderLimits& limits,
                              LoadErrorReason* r) {
    *r = LoadErrorReason::kMalformed;
    if (pid_ < 0) {
      if (Status st = Start(limits); !st.ok()) {
        *r = LoadErrorReason::kIo;
        return st;
      }
    }
    std::string req(12, '\0');
    const uint64_t len = xml.size();
    const uint32_t flen = static_cast<uint32_t>(format.size());
    std::memcpy(req.data(), &len, 8);
    std::memcpy(req.data() + 8, &flen, 4);
    std::string in;
    ReadOutcome got = ReadOutcome::kBroken;
    if (SendAll(fd_, req) && SendAll(fd_, xml) && SendAll(fd_, format)) got = ReadResponse(fd_, limits.import_timeout_ms, in);
    if (got != ReadOutcome::kComplete) return Replace(got == ReadOutcome::kTimedOut, format, limits);
    return DecodeResponse(in[0], std::string_view(in).substr(kResponseHeader), r);
  }

  // Stops the process: EOF makes an idle worker exit, SIGKILL any other.
  void Stop() {
    if (fd_ >= 0) ::close(fd_);
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int st = 0;
      while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
      }
    }
    pid_ = -1;
    fd_ = -1;
  }

 private:
  Status Start(const LoaderLimits& limits) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      return Status::Unavailable(std::string("socketpair: ") + std::strerror(errno));
    }
    const pid_t pid = ::fork();
    if (pid < 0) {
      const int e = errno;
      ::close(sv[0]);
      ::close(sv[1]);
      return Status::Unavailable(std::string("fork: ") + std::strerror(e));
    }
    if (pid == 0) {
      // Keep only stdio and our socket: the worker must not hold the server's listening socket,
      // other workers' sockets or the inotify descriptor.
      ResetSignalsInChild();
      if (::dup2(sv[1], 3) < 0) _exit(4);
      ::close_range(4, ~0u, 0);
      WorkerLoop(3, limits);
    }
    ::close(sv[1]);
    pid_ = pid;
    fd_ = sv[0];
    return Status::Ok();
  }

  // The worker died, hung or sent garbage on an export: replaces it and refuses the export.
  Status Replace(bool timed_out, const std::string& format, const LoaderLimits& limits) {
    int st = 0;
    if (!timed_out && pid_ > 0) {
      // Give a crashing worker a moment to be reaped to report its signal.
      for (int i = 0; i < 100; ++i) {
        const pid_t w = ::waitpid(pid_, &st, WNOHANG);
        if (w == pid_) pid_ = -1;  // reaped: nothing left to kill
        if (w != 0) break;
        ::usleep(1000);
      }
    }
    const bool signaled = st != 0 && WIFSIGNALED(st);
    Stop();
    if (timed_out) {
      return Status::ResourceExhausted("hwloc import did not finish within " +
                                       std::to_string(limits.import_timeout_ms) + " ms; refused");
    }
    if (signaled) {
      return Status::InvalidArgument("libhwloc crashed (signal " + std::to_string(WTERMSIG(st)) +
                                     ") importing this export; it is not a valid hwloc " + format + " export");
    }
    return Status::InvalidArgument("the hwloc import worker died importing this export; it is not a valid hwloc " +
                                   format + " export");
  }

  pid_t pid_ = -1;
  int fd_ = -1;  // parent end of the socketpair
};

}  // namespace

struct ImportPool::Impl {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Worker> workers;  // a taken worker is owned by the thread that took it
  std::vector<size_t> free;     // guarded by mu

  size_t Take() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return !free.empty(); });
    const size_t i = free.back();
    free.pop_back();
    return i;
  }
  void Give(size_t i) {
    {
      std::lock_guard<std::mutex> lock(mu);
      free.push_back(i);
    }
    cv.notify_one();
  }
};

ImportPool::ImportPool(unsigned slots) : impl_(std::make_unique<Impl>()) {
  impl_->workers.resize(std::max(1u, slots));
  for (size_t i = 0; i < impl_->workers.size(); ++i) impl_->free.push_back(i);
}

ImportPool::~ImportPool() {
  for (Worker& w : impl_->workers) w.Stop();
}

std::vector<Result<ParsedExport>> ImportPool::ParseBatch(const std::vector<std::string_view>& xmls,
                                                         const LoaderLimits& limits,
                                                         std::vector<LoadErrorReason>* reasons_out) {
  // Screen first; refused exports get their result at once, the rest wait in `todo`.
  std::vector<std::optional<Result<ParsedExport>>> results(xmls.size());
  std::vector<LoadErrorReason> reasons(xmls.size(), LoadErrorReason::kNone);
  std::vector<std::string> formats(xmls.size());
  std::vector<size_t> todo;
  for (size_t i = 0; i < xmls.size(); ++i) {
    if (Status s = ScreenHwlocXml(xmls[i], limits, &reasons[i], &formats[i]); !s.ok()) {
      results[i] = s;
    } else {
      todo.push_back(i);
    }
  }
  if (!todo.empty()) {
    internal::KeepHwlocLoaded();
    const size_t slot = impl_->Take();
    for (size_t i : todo) {
      LoadErrorReason r = LoadErrorReason::kNone;
      results[i] = limits.isolate ? impl_->workers[slot].Import(xmls[i], formats[i], limits, &r)
                                  : internal::ImportInProcess(std::string(xmls[i]), formats[i], limits, &r);
      reasons[i] = r;
    }
    impl_->Give(slot);
  }
  std::vector<Result<ParsedExport>> out;
  out.reserve(xmls.size());
  for (auto& r : results) out.push_back(std::move(*r));
  if (reasons_out != nullptr) *reasons_out = std::move(reasons);
  return out;
}

}  // namespace draguard::topology
