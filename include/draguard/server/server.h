// The HTTPS admission server: /validate, /mutate, /healthz, /readyz, /metrics.
//
// Transport hardening lives here: an event-driven listener (a few IO threads own every
// connection; only complete requests reach the bounded review workers), TLS policy and hot
// reload, deadlines for the handshake, the header block, the body and the idle keep-alive wait,
// header and body caps, a budget of body bytes in flight, strict HTTP/1.1 framing, HTTP/2 by ALPN
// with the same caps plus stream, flow-control, HPACK and reset limits, content-type check,
// per-request deadline (including the API server's ?timeout=), an exception guard, and a graceful
// shutdown that closes keep-alive connections and loses no request.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "draguard/logging/logger.h"
#include "draguard/metrics/metrics.h"
#include "draguard/policy/store.h"
#include "draguard/status.h"
#include "draguard/webhook/reviewer.h"

namespace draguard::topology {
class Snapshot;
}  // namespace draguard::topology

namespace draguard::server {

/// Server settings; defaults are the production defaults.
struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8443;                        ///< 0 picks an ephemeral port
  std::string tls_cert, tls_key;          ///< PEM files (required)
  /// DNS names the serving certificate must cover (empty = no check); not set: a reloaded
  /// certificate must keep every SAN of the one it replaces.
  std::optional<std::vector<std::string>> tls_required_names;
  std::string client_ca;                  ///< PEM file; set = client certificates required
  std::vector<std::string> client_cns;    ///< allowed client CNs (empty = any CN from client_ca)
  std::size_t max_body = 7 * 1024 * 1024; ///< bytes; larger bodies get 413
  std::size_t max_header_bytes = 64 * 1024; ///< request line + headers; larger: 431
  std::size_t max_headers = 100;          ///< header fields; more: 431
  std::size_t body_budget = 16 * 1024 * 1024; ///< body bytes held at once (0 = unbounded); beyond: 429
  std::size_t max_connections = 10000;    ///< open connections; more are closed at accept
  std::chrono::milliseconds read_timeout{10000};     ///< TLS handshake, whole header block, whole body
  std::chrono::milliseconds write_timeout{10000};    ///< whole response
  std::chrono::milliseconds request_deadline{webhook::kDefaultReviewTimeout}; ///< body read + review, provisioning included
  std::size_t keep_alive_max_requests = 10000;       ///< requests per connection
  std::chrono::seconds keep_alive_timeout{30};       ///< idle time before closing
  std::size_t io_threads = 0;             ///< connection threads; 0 = cores
  std::size_t workers = 0;                ///< review workers; 0 = max(16, 4 × cores)
  std::size_t inline_review_max_body = 128 * 1024;  ///< /validate bodies up to this size, of kinds whose review evaluates no CEL, are reviewed on the IO thread (0 = never)
  std::size_t max_queued = 1024;          ///< complete requests waiting for a worker; beyond: 503
  bool http2 = true;                      ///< offer h2 (and http/1.1) by ALPN; false: HTTP/1.1 only
  std::size_t http2_max_streams = 100;    ///< concurrent streams (and requests in progress) per h2 connection
  std::chrono::milliseconds shutdown_delay{5000};    ///< keep serving after SIGTERM
  std::chrono::milliseconds reload_interval{1000};   ///< certificate file polling
  std::string metrics_host;               ///< plain-HTTP metrics listener ("" = none)
  int metrics_port = 0;
};

/// What the server needs from the rest of the program. All must outlive the server.
struct ServerDeps {
  policy::PolicyStore* policies = nullptr;
  const webhook::Reviewer* reviewer = nullptr;
  std::shared_ptr<logging::Logger> logger;
  metrics::Registry* registry = nullptr;
  metrics::ServerMetrics* metrics = nullptr;
  /// Returns the current topology snapshot (may be null); optional.
  std::function<std::shared_ptr<const topology::Snapshot>()> topology;
  /// Extra readiness condition (e.g. topology loaded); optional.
  std::function<bool()> extra_ready;
};

/// The admission server. Start() binds and serves on background threads.
class Server {
 public:
  Server(ServerOptions options, ServerDeps deps);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Loads the certificate, binds the listeners and starts serving.
  Status Start();
  /// The bound HTTPS port (after Start()).
  int port() const;
  /// The bound metrics port, or 0.
  int metrics_port() const;
  /// Flips readiness to false now, and stops accepting after shutdown_delay; in-flight requests
  /// finish. Returns immediately; Wait() returns when everything has stopped.
  void BeginShutdown();
  /// Ends the shutdown delay early (a second SIGTERM does this).
  void SkipShutdownDelay();
  /// Blocks until the server has stopped.
  void Wait();
  /// True when /readyz would answer 200.
  bool Ready() const;
  /// Re-reads the certificate files now (the watcher also does this on change).
  Status ReloadCertificates();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Parses the API server's ?timeout= value ("10s", "1m30s", "500ms", Go duration syntax).
/// Returns a non-positive duration when absent or malformed.
std::chrono::milliseconds ParseGoDuration(std::string_view text);

/// Parses "HOST:PORT" ("[::1]:8443" for IPv6). Port 0 is allowed (ephemeral).
Status ParseHostPort(std::string_view text, std::string* host, int* port);

}  // namespace draguard::server
