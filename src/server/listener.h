// The event-driven HTTP/1.1 and HTTP/2 listener of the server module (Boost.Asio/Beast inside
// listener.cc, nghttp2 inside h2_connection.cc; only standard types here). A few IO threads
// accept, handshake, read and write every connection; a complete request is handed to a bounded
// pool of workers, so an idle or slow connection holds no worker. Every phase has its own
// deadline; HTTP/1.1 framing follows RFC 9112 strictly. With `http2`, TLS offers h2 and
// http/1.1 by ALPN and a connection that chose h2 is served by H2Connection (RFC 9113).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <openssl/ssl.h>

#include "draguard/status.h"

namespace draguard::server {

/// A complete request as handlers see it.
struct HttpRequest {
  std::string method;
  std::string path;
  std::string query;  ///< raw, without '?'
  std::vector<std::pair<std::string, std::string>> headers;  ///< names lower-case
  std::string body;
  std::chrono::steady_clock::time_point start;     ///< when the header block was complete
  std::chrono::steady_clock::time_point deadline;  ///< bounds body read and handler
  /// Value of the first header `name` (lower-case), or "".
  std::string_view Header(std::string_view name) const;
  /// Percent-decoded value of query parameter `name`, or "".
  std::string Param(std::string_view name) const;
};

/// A response; the listener adds framing headers.
struct HttpResponse {
  int status = 200;
  std::string content_type;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  bool close = false;  ///< close the connection after this response
};

/// Answers one request. Must not throw (exceptions are answered 500 as a last resort).
using HttpHandler = std::function<void(const HttpRequest&, HttpResponse*)>;

/// One endpoint.
struct HttpRoute {
  std::string method;
  std::string path;
  bool on_worker = false;  ///< run on the worker pool (may block); else inline on the IO thread
  HttpHandler handler;
  /// With on_worker: a request for which this returns true is answered inline on the IO thread
  /// (no hand-off); it must be cheap and must not block. Null: always on a worker.
  std::function<bool(const HttpRequest&)> run_inline;
};

/// Listener settings.
struct ListenerOptions {
  std::string host = "127.0.0.1";
  int port = 0;                                        ///< 0 = ephemeral
  std::function<bool(SSL_CTX*, std::string*)> configure_tls;  ///< null = plain HTTP
  std::size_t io_threads = 1;
  std::size_t workers = 4;                             ///< review workers
  std::size_t max_queued = 1024;                       ///< complete requests waiting for a worker
  std::size_t max_body = 7 * 1024 * 1024;              ///< larger bodies: 413
  std::size_t body_padding = 0;                        ///< spare capacity reserved past a body of known length
  std::size_t max_header_bytes = 64 * 1024;            ///< request line + headers; beyond: 431
  std::size_t max_headers = 100;                       ///< header fields; beyond: 431
  std::size_t body_budget = 0;                         ///< bytes of bodies held at once (0 = unbounded); beyond: 429
  std::size_t max_connections = 10000;                 ///< open connections; beyond: closed at accept
  std::size_t keep_alive_max_requests = 10000;
  std::chrono::milliseconds handshake_timeout{10000};  ///< TLS handshake
  std::chrono::milliseconds header_timeout{10000};     ///< whole header block, from its first byte
  std::chrono::milliseconds idle_timeout{30000};       ///< keep-alive wait for the next request
  std::chrono::milliseconds body_timeout{10000};       ///< whole body, from the end of the header block
  std::chrono::milliseconds write_timeout{10000};      ///< whole response
  bool http2 = false;                                  ///< offer h2 by ALPN (TLS only)
  std::size_t http2_max_streams = 100;                 ///< SETTINGS_MAX_CONCURRENT_STREAMS (and requests in progress) per h2 connection
  /// Deadline of a request whose header block is complete (body read + handler).
  std::function<std::chrono::steady_clock::time_point(const HttpRequest&)> deadline;
  /// Fills an error response (status, message).
  std::function<void(int, const std::string&, HttpResponse*)> error;
  /// Called +1 when a worker request's header block is complete, -1 when it is answered or dropped.
  std::function<void(int)> inflight;
  /// Called when a request is shed (worker queue full) or refused by the body budget.
  std::function<void()> on_shed, on_budget_refused;
  /// Called with the text of an exception that escaped a handler.
  std::function<void(const std::string&)> on_exception;
  /// Called when a TLS handshake completes, with the protocol the connection speaks ("h2", "http/1.1").
  std::function<void(std::string_view protocol)> on_connection;
  /// Called when an h2 connection is ended for misbehaviour (reason: a closed set, see H2Connection).
  std::function<void(std::string_view reason)> on_http2_abuse;
};

/// An HTTP/1.1 (optionally TLS, optionally HTTP/2 by ALPN) listener. Start() returns once it
/// accepts connections.
class Listener {
 public:
  Listener(ListenerOptions options, std::vector<HttpRoute> routes);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  /// Sets up TLS, binds, listens and starts the threads.
  Status Start();
  /// The bound port (after Start()).
  int port() const;
  /// From now on every HTTP/1.1 response carries `Connection: close`, so each keep-alive
  /// connection closes after its next answer (HTTP/1.1 gives a server no race-free way to close
  /// an idle one: a request may be on its way); each h2 connection is sent a GOAWAY notice
  /// (RFC 9113 §6.8), so its client opens new streams elsewhere; new connections are still accepted.
  void BeginDrain();
  /// Takes the connections the kernel has queued and stops accepting; closes the idle ones that
  /// have been answered; gives the others a short grace (2 s) to deliver their request, which is
  /// answered with `Connection: close`; waits for the requests in progress to be answered, then
  /// stops the threads. Idempotent.
  void Stop();
  /// Open connections now (for tests and metrics).
  std::size_t connections() const;

 /// Internal state (defined in listener.cc).
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace draguard::server
