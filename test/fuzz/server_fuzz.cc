// Fuzzes the HTTP/2 frame path of the server (H2Connection over nghttp2): after the client preface,
// the input is a list of steps [op][length: 2 bytes][bytes]: op 0 feeds the bytes as received
// frames, 1 moves the clock by `length` ms and runs the deadlines, 2 answers the requests waiting,
// 3 starts a graceful shutdown. Never a crash, a hang or a leak; at most the stream limit of
// requests in progress; the body budget is never overdrawn and all of it comes back.
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "h2_connection.h"

namespace {

using Clock = std::chrono::steady_clock;
using draguard::server::H2Callbacks;
using draguard::server::H2Connection;
using draguard::server::H2Limits;
using draguard::server::HttpRequest;
using draguard::server::HttpResponse;

constexpr std::size_t kBudget = 256 * 1024;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  H2Limits lim;
  lim.max_concurrent_streams = 16;
  lim.max_body = 64 * 1024;
  lim.max_header_bytes = 8 * 1024;
  lim.max_requests = 200;
  std::size_t held = 0;
  std::vector<std::int32_t> waiting;
  std::size_t in_progress = 0;
  {
    H2Callbacks cb;
    cb.on_request = [&](std::int32_t id, HttpRequest req) {
      if (req.method.empty() || req.path.empty() || req.body.size() > lim.max_body) __builtin_trap();
      waiting.push_back(id);
      ++in_progress;
    };
    cb.deadline = [](const HttpRequest& r) { return r.start + std::chrono::seconds(10); };
    cb.error = [](int code, const std::string& message, HttpResponse* res) {
      res->status = code;
      res->body = message;
    };
    cb.reserve = [&](std::size_t n) {
      if (held + n > kBudget) return false;
      held += n;
      return true;
    };
    cb.release = [&](std::size_t n) {
      if (n > held) __builtin_trap();  // released more than reserved
      held -= n;
    };
    cb.on_abuse = [](std::string_view) {};
    Clock::time_point now{};
    H2Connection conn(lim, std::move(cb), now);
    static const std::string kPreface = std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") + std::string("\0\0\0\4\0\0\0\0\0", 9);
    bool alive = conn.Receive(kPreface.data(), kPreface.size(), now);
    std::string out;
    std::size_t pos = 0;
    while (pos + 3 <= size && alive) {
      const uint8_t op = data[pos] % 4;
      const std::size_t len = (static_cast<std::size_t>(data[pos + 1]) << 8) | data[pos + 2];
      pos += 3;
      const std::size_t n = std::min(len, size - pos);
      switch (op) {
        case 0:
          alive = conn.Receive(reinterpret_cast<const char*>(data + pos), n, now);
          pos += n;
          break;
        case 1:
          now += std::chrono::milliseconds(len);
          conn.Expire(now);
          break;
        case 2:
          for (auto id : waiting) {
            HttpResponse res;
            res.status = 200;
            res.content_type = "application/json";
            res.body = std::string(id % 3000, 'r');
            res.headers.emplace_back("Retry-After", "1");
            conn.Respond(id, std::move(res), now);
            --in_progress;
          }
          waiting.clear();
          break;
        case 3:
          if (len % 2 == 0) conn.ShutdownNotice(); else conn.Shutdown();
          break;
      }
      if (conn.Busy() > lim.max_concurrent_streams) __builtin_trap();
      if (held > kBudget) __builtin_trap();
      out.clear();
      conn.TakeOutput(&out);
    }
    // Answers after the end (their streams may be gone) must be harmless.
    for (auto id : waiting) conn.Respond(id, HttpResponse{}, now);
  }
  if (held != 0) __builtin_trap();  // every reserved byte came back
  return 0;
}
