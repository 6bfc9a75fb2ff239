// The HTTP/2 protocol of one server connection (RFC 9113) on nghttp2, without the transport: bytes
// in (Receive), bytes out (TakeOutput), requests out (Callbacks::on_request) and answers in
// (Respond), the clock passed in (Expire). The listener runs it on a TLS connection whose ALPN chose
// "h2"; the fuzzer runs it on arbitrary bytes. nghttp2 types stay in h2_connection.cc.
//
// The hardening of the HTTP/1.1 path, per stream: header block caps (431), body cap (413, from
// content-length before any DATA, or when the DATA passes it), the body-bytes budget (the body is
// not granted flow-control window until its bytes fit; 429 after the wait), the body deadline
// (408), the request deadline. Per connection: SETTINGS_MAX_CONCURRENT_STREAMS, bounded
// flow-control windows, HPACK and header-list limits, at most 8 CONTINUATION frames, nghttp2's
// RST_STREAM rate limit (CVE-2023-44487) plus a cap of our own on streams that end without an
// answer (reset, refused) and on empty DATA frames, requests still being answered counted against
// the stream limit after their stream was reset, a response deadline per stream, an idle
// timeout, a header-block deadline, and GOAWAY after the per-connection request limit.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "listener.h"

namespace draguard::server {

/// Limits and timeouts of an HTTP/2 connection.
struct H2Limits {
  std::size_t max_concurrent_streams = 100;    ///< SETTINGS_MAX_CONCURRENT_STREAMS; also bounds requests in progress
  std::size_t max_header_bytes = 64 * 1024;    ///< header list (RFC 9113 §6.5.2 size); beyond: 431
  std::size_t max_headers = 100;               ///< header fields; beyond: 431
  std::size_t max_body = 7 * 1024 * 1024;      ///< beyond: 413
  std::size_t body_padding = 0;                ///< spare capacity reserved past a body of known length
  std::uint32_t stream_window = 256 * 1024;    ///< SETTINGS_INITIAL_WINDOW_SIZE
  std::uint32_t connection_window = 1024 * 1024;  ///< receive window of the connection
  std::size_t max_requests = 10000;            ///< streams per connection, then GOAWAY
  std::uint64_t reset_burst = 200;             ///< nghttp2's RST_STREAM token bucket: burst ...
  std::uint64_t reset_rate = 33;               ///< ... and tokens per second
  std::size_t churn_burst = 200;               ///< streams ended without an answer / empty DATA frames: burst ...
  std::size_t churn_rate = 50;                 ///< ... and per second; beyond: GOAWAY ENHANCE_YOUR_CALM
  std::chrono::milliseconds header_timeout{10000};  ///< a header block, from its first frame
  std::chrono::milliseconds body_timeout{10000};    ///< a body, from the end of its header block
  std::chrono::milliseconds write_timeout{10000};   ///< a response, from when it is submitted
  std::chrono::milliseconds idle_timeout{30000};    ///< no stream open
  std::chrono::milliseconds budget_wait{1000};      ///< a body waiting for the budget, then 429
};

/// What a connection needs from its listener. All are required.
struct H2Callbacks {
  /// A complete request (header block and body). Exactly one Respond(stream_id, ...) must follow,
  /// even when the stream has been reset meanwhile.
  std::function<void(std::int32_t stream_id, HttpRequest req)> on_request;
  /// Deadline of a request whose header block is complete (body read + handler).
  std::function<std::chrono::steady_clock::time_point(const HttpRequest&)> deadline;
  /// Fills an error response.
  std::function<void(int, const std::string&, HttpResponse*)> error;
  /// Body-bytes budget: reserve (false = does not fit now) and release.
  std::function<bool(std::size_t)> reserve;
  std::function<void(std::size_t)> release;
  /// A connection ended for misbehaviour; `reason` is one of a closed set (metric label).
  std::function<void(std::string_view reason)> on_abuse;
};

/// One server-side HTTP/2 connection. Not thread-safe: one thread (the connection's loop) calls it.
class H2Connection {
 public:
  H2Connection(H2Limits limits, H2Callbacks callbacks, std::chrono::steady_clock::time_point now);
  ~H2Connection();
  H2Connection(const H2Connection&) = delete;
  H2Connection& operator=(const H2Connection&) = delete;

  /// Feeds received bytes. False: the connection is beyond repair (a GOAWAY may be waiting in the
  /// output); send what TakeOutput gives, then close.
  bool Receive(const char* data, std::size_t size, std::chrono::steady_clock::time_point now);
  /// Appends the bytes to send now (frames) to `out`.
  void TakeOutput(std::string* out);
  /// Answers a request given to on_request (dropped when its stream is gone).
  void Respond(std::int32_t stream_id, HttpResponse response, std::chrono::steady_clock::time_point now);
  /// Enforces the deadlines and retries bodies waiting for the budget.
  void Expire(std::chrono::steady_clock::time_point now);
  /// The earliest time Expire has something to do (time_point::max(): none).
  std::chrono::steady_clock::time_point NextDeadline() const;
  /// Graceful shutdown, step 1: GOAWAY announcing that no new streams will be taken (RFC 9113 §6.8).
  void ShutdownNotice();
  /// Graceful shutdown, step 2: GOAWAY with the last stream taken; the connection ends when the
  /// streams in progress are answered.
  void Shutdown();
  /// False once nothing more will be read or written (closed, or shut down and all answered).
  bool Alive() const;
  /// Streams open or requests still being answered.
  std::size_t Busy() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace draguard::server
