#include "draguard/server/server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

#include <sys/socket.h>

#include <httplib.h>

#include "draguard/admission/codec.h"
#include "draguard/engine/engine.h"
#include "draguard/file_watcher.h"
#include "draguard/read_file.h"
#include "draguard/truncate.h"
#include "tls_internal.h"

namespace draguard::server {

std::chrono::milliseconds ParseGoDuration(std::string_view text) {
  using std::chrono::milliseconds;
  if (text.empty()) return milliseconds(0);
  double total_ms = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t start = i;
    while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
    if (start == i) return milliseconds(0);
    double value = 0;
    try {
      value = std::stod(std::string(text.substr(start, i - start)));
    } catch (...) {
      return milliseconds(0);
    }
    std::size_t unit_start = i;
    while (i < text.size() && !((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
    std::string_view unit = text.substr(unit_start, i - unit_start);
    if (unit == "h") total_ms += value * 3600000;
    else if (unit == "m") total_ms += value * 60000;
    else if (unit == "s") total_ms += value * 1000;
    else if (unit == "ms") total_ms += value;
    else if (unit == "us" || unit == "µs") total_ms += value / 1000;
    else if (unit == "ns") total_ms += value / 1e6;
    else return milliseconds(0);
  }
  if (total_ms > 3.6e6) total_ms = 3.6e6;
  return milliseconds(static_cast<int64_t>(total_ms));
}

Status ParseHostPort(std::string_view text, std::string* host, int* port) {
  std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == text.size()) {
    return Status::InvalidArgument("address \"" + std::string(text) + "\" is not HOST:PORT");
  }
  std::string h(text.substr(0, colon));
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (h.empty()) return Status::InvalidArgument("address \"" + std::string(text) + "\" has no host");
  int p = 0;
  for (char c : text.substr(colon + 1)) {
    if (c < '0' || c > '9') return Status::InvalidArgument("port in \"" + std::string(text) + "\" is not a number");
    p = p * 10 + (c - '0');
    if (p > 65535) return Status::InvalidArgument("port in \"" + std::string(text) + "\" is out of range");
  }
  *host = h;
  *port = p;
  return Status::Ok();
}

namespace {

// A fixed pool of workers with a bounded queue. Connections beyond the bound go to a shedding
// thread whose requests are answered 503 at once, so overload never grows memory or latency
// without bound. Each keep-alive connection holds a worker for its lifetime (httplib's model).
class BoundedPool final : public httplib::TaskQueue {
 public:
  BoundedPool(std::size_t workers, std::size_t max_queued, std::atomic<std::thread::id>* shed_id,
              metrics::CounterFamily* shed_counter)
      : max_queued_(max_queued), shed_counter_(shed_counter) {
    for (std::size_t i = 0; i < workers; ++i) {
      threads_.emplace_back([this] { Work(jobs_, cv_); });
    }
    threads_.emplace_back([this, shed_id] {
      shed_id->store(std::this_thread::get_id());
      Work(shed_jobs_, shed_cv_);
    });
  }

  void enqueue(std::function<void()> fn) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (jobs_.size() < max_queued_) {
        jobs_.push_back(std::move(fn));
        cv_.notify_one();
        return;
      }
      shed_jobs_.push_back(std::move(fn));
    }
    if (shed_counter_ != nullptr) shed_counter_->Inc({});
    shed_cv_.notify_one();
  }

  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    shed_cv_.notify_all();
    for (auto& t : threads_) t.join();
  }

 private:
  void Work(std::deque<std::function<void()>>& queue, std::condition_variable& cv) {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv.wait(lock, [&] { return stop_ || !queue.empty(); });
        if (queue.empty()) return;  // stop_ and drained
        fn = std::move(queue.front());
        queue.pop_front();
      }
      fn();
    }
  }

  std::size_t max_queued_;
  metrics::CounterFamily* shed_counter_;
  std::mutex mu_;
  std::condition_variable cv_;       // workers
  std::condition_variable shed_cv_;  // the shedding thread
  bool stop_ = false;
  std::deque<std::function<void()>> jobs_;
  std::deque<std::function<void()>> shed_jobs_;
  std::vector<std::thread> threads_;
};

// Tracks in-flight requests for the gauge.
class InflightGuard {
 public:
  explicit InflightGuard(metrics::GaugeFamily* g) : g_(g) { if (g_) g_->Add({}, 1); }
  ~InflightGuard() { if (g_) g_->Add({}, -1); }
 private:
  metrics::GaugeFamily* g_;
};

// Runs `server`'s accept loop on `thread` and returns once the loop is running. cpp-httplib's
// stop() does nothing before the loop has set is_running(), so a shutdown requested in that window
// would be lost; the library offers no notification, hence the bounded poll. False when the loop
// ended (or had not started within 10 s); the thread is then joined.
bool StartListening(httplib::Server& server, std::thread* thread) {
  auto exited = std::make_shared<std::atomic<bool>>(false);
  *thread = std::thread([&server, exited] {
    server.listen_after_bind();
    exited->store(true);
  });
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!server.is_running()) {
    if (exited->load() || std::chrono::steady_clock::now() > limit) {
      server.stop();
      thread->join();
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

void SetJson(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body, "application/json");
}

}  // namespace

struct Server::Impl {
  ServerOptions opt;
  ServerDeps deps;
  std::unique_ptr<CertificateSource> certs;
  TlsContextOptions tls_opts;
  std::unique_ptr<httplib::SSLServer> https;
  std::unique_ptr<httplib::Server> metrics_http;
  std::unique_ptr<FileWatcher> cert_watcher;
  std::thread https_thread, metrics_thread, shutdown_thread;
  std::atomic<std::thread::id> shed_thread_id{};
  int bound_port = 0;
  int bound_metrics_port = 0;
  std::atomic<bool> shutting_down{false};
  bool skip_delay = false;
  std::mutex mu;
  std::condition_variable cv;
  bool stopped = false;
  bool started = false;

  bool Ready() const {
    if (shutting_down.load()) return false;
    if (!certs || !certs->Usable(std::chrono::system_clock::now())) return false;
    if (deps.policies == nullptr || !deps.policies->Current()) return false;
    if (deps.extra_ready && !deps.extra_ready()) return false;
    return true;
  }

  void Error(httplib::Response& res, int code, const std::string& message) {
    deps.metrics->http_errors.Inc({std::to_string(code)});
    SetJson(res, code, admission::EncodeHttpError(code, message));
  }

  void HandleAdmission(admission::WebhookKind kind, const httplib::Request& req,
                       httplib::Response& res, const httplib::ContentReader& reader);
  void InstallRoutes(httplib::Server& svr, bool admission);
};

void Server::Impl::HandleAdmission(admission::WebhookKind kind, const httplib::Request& req,
                                   httplib::Response& res, const httplib::ContentReader& reader) {
  const auto start = std::chrono::steady_clock::now();
  InflightGuard inflight(&deps.metrics->inflight);
  const char* webhook = kind == admission::WebhookKind::kValidating ? "validate" : "mutate";

  // Deadline: our own bound, tightened by the API server's remaining budget (?timeout=), minus
  // a margin so that the answer arrives before the API server gives up.
  auto deadline = start + opt.request_deadline;
  if (req.has_param("timeout")) {
    auto budget = ParseGoDuration(req.get_param_value("timeout"));
    if (budget.count() > 0) {
      auto margin = std::min<std::chrono::milliseconds>(budget / 10, std::chrono::milliseconds(500));
      deadline = std::min(deadline, start + budget - margin);
    }
  }

  bool content_type_ok = false;
  {
    std::string ct = req.get_header_value("Content-Type");
    std::string base = ct.substr(0, ct.find(';'));
    base.erase(std::remove(base.begin(), base.end(), ' '), base.end());
    std::transform(base.begin(), base.end(), base.begin(), ::tolower);
    content_type_ok = base == "application/json";
  }

  std::string body;
  bool too_large = false, too_slow = false;
  bool read_ok = reader([&](const char* data, std::size_t len) {
    if (std::chrono::steady_clock::now() > deadline) {
      too_slow = true;
      return false;
    }
    if (!content_type_ok) return true;  // drain, keep the connection in sync
    if (body.size() + len > opt.max_body) {
      too_large = true;
      return false;
    }
    body.append(data, len);
    return true;
  });
  if (!read_ok || too_large || too_slow) {
    // The rest of the body is still on the wire: answer, then close the connection by shutting
    // down its read side, so the leftover bytes are never parsed as a next request.
    // (A body over the limit with a Content-Length was already drained by the library, which
    // keeps the connection usable: no shutdown then.)
    bool drained = res.status == 413 && !too_large;
    if (!drained) res.set_header("Connection", "close");
    if (!drained && req.ssl != nullptr) {
      int fd = SSL_get_fd(req.ssl);
      if (fd >= 0) ::shutdown(fd, SHUT_RD);
    }
    if (too_large || res.status == 413) {
      Error(res, 413, "request body too large: the limit is " + std::to_string(opt.max_body) + " bytes");
    } else if (too_slow) {
      Error(res, 408, "request body not received before the deadline");
    } else {
      Error(res, 400, "request body could not be read (truncated or malformed)");
    }
    return;
  }
  if (!content_type_ok) {
    Error(res, 415, "Content-Type must be application/json, got \"" +
                        Truncate(req.get_header_value("Content-Type")) + "\"");
    return;
  }
  auto pol = deps.policies->Current();
  if (!pol) {
    Error(res, 503, "no policy loaded");
    return;
  }
  std::shared_ptr<const topology::Snapshot> topo;
  if (deps.topology) topo = deps.topology();
  // The same deadline bounds the review, template provisioning included.
  webhook::ReviewOutcome out =
      deps.reviewer->Review(body, kind, *pol, topo.get(), std::chrono::system_clock::now(), deadline);
  SetJson(res, out.http_status, out.body);

  const auto elapsed = std::chrono::steady_clock::now() - start;
  const double seconds = std::chrono::duration<double>(elapsed).count();
  const int64_t micros = std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count();
  deps.metrics->duration.Observe({webhook}, seconds);
  if (out.http_status != 200) {
    deps.metrics->http_errors.Inc({std::to_string(out.http_status)});
    if (out.http_status >= 500) {
      // Decoded, then failed inside the review: the answer carries the uid, and so does the log.
      deps.logger->Error("review failed", {{"webhook", std::string(webhook)},
                                           {"uid", out.uid},
                                           {"status", static_cast<int64_t>(out.http_status)},
                                           {"error", out.error},
                                           {"latency_us", micros}});
      return;
    }
    deps.logger->Warn("rejected request", {{"webhook", std::string(webhook)},
                                           {"status", static_cast<int64_t>(out.http_status)},
                                           {"error", out.error},
                                           {"latency_us", micros}});
    return;
  }
  const std::string verdict = engine::VerdictName(out.verdict);
  deps.metrics->requests.Inc({webhook, out.operation, out.kind_label, verdict});
  for (const auto& m : out.rule_metrics) deps.metrics->rule_results.Inc({m.rule, m.action, m.result});
  deps.logger->Info("admission", {{"webhook", std::string(webhook)},
                                  {"uid", out.uid},
                                  {"kind", out.kind},
                                  {"namespace", out.namespace_},
                                  {"name", out.name},
                                  {"operation", out.operation},
                                  {"user", out.user},
                                  {"dryRun", out.dry_run},
                                  {"decision", verdict},
                                  {"rules", out.rules},
                                  {"latency_us", micros}});
  if (std::chrono::steady_clock::now() > deadline) {
    deps.logger->Warn("review finished after the request deadline", {{"uid", out.uid}});
  }
}

void Server::Impl::InstallRoutes(httplib::Server& svr, bool admission) {
  if (admission) {
    svr.Post("/validate", [this](const httplib::Request& req, httplib::Response& res,
                                 const httplib::ContentReader& reader) {
      HandleAdmission(admission::WebhookKind::kValidating, req, res, reader);
    });
    svr.Post("/mutate", [this](const httplib::Request& req, httplib::Response& res,
                               const httplib::ContentReader& reader) {
      HandleAdmission(admission::WebhookKind::kMutating, req, res, reader);
    });
  }
  svr.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  svr.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    bool ready = Ready();
    res.status = ready ? 200 : 503;
    res.set_content(ready ? "ok\n" : (shutting_down ? "shutting down\n" : "not ready\n"),
                    "text/plain");
  });
  svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    deps.metrics->ready.Set({}, Ready() ? 1 : 0);
    res.set_content(deps.registry->Render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  svr.set_pre_routing_handler([this](const httplib::Request&, httplib::Response& res) {
    if (std::this_thread::get_id() == shed_thread_id.load()) {
      res.set_header("Connection", "close");
      res.set_header("Retry-After", "1");
      Error(res, 503, "server overloaded: worker queue full");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  svr.set_error_handler([this](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string what = res.status == 404   ? "no such endpoint"
                       : res.status == 413 ? "request body too large"
                       : res.status == 405 ? "method not allowed"
                                           : "bad request";
    if (res.status == 413) res.set_header("Connection", "close");
    deps.metrics->http_errors.Inc({std::to_string(res.status)});
    res.set_content(admission::EncodeHttpError(res.status, what), "application/json");
  });
  svr.set_exception_handler([this](const httplib::Request&, httplib::Response& res,
                                   std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    // Last resort: the reviewer answers its own exceptions with the uid; this one has none.
    deps.logger->Error("handler exception", {{"error", what}});
    Error(res, 500, "internal error");
  });
  svr.set_tcp_nodelay(true);
  svr.set_keep_alive_max_count(opt.keep_alive_max_requests);
  svr.set_keep_alive_timeout(opt.keep_alive_timeout.count());
  svr.set_read_timeout(opt.read_timeout);
  svr.set_write_timeout(opt.write_timeout);
  svr.set_payload_max_length(opt.max_body);
}

Server::Server(ServerOptions options, ServerDeps deps) : impl_(std::make_unique<Impl>()) {
  impl_->opt = std::move(options);
  impl_->deps = std::move(deps);
  if (!impl_->deps.logger) impl_->deps.logger = logging::Logger::Null();
}

Server::~Server() {
  if (impl_->started) {
    BeginShutdown();
    Wait();
  }
}

Status Server::Start() {
  Impl& m = *impl_;
  if (m.deps.policies == nullptr || m.deps.reviewer == nullptr || m.deps.metrics == nullptr ||
      m.deps.registry == nullptr) {
    return Status::Internal("server dependencies missing");
  }
  if (m.opt.tls_cert.empty() || m.opt.tls_key.empty()) {
    return Status::InvalidArgument("--tls-cert and --tls-key are required");
  }
  auto* metrics = m.deps.metrics;
  auto logger = m.deps.logger;
  m.certs = std::make_unique<CertificateSource>(
      m.opt.tls_cert, m.opt.tls_key,
      [metrics, logger](const Status& st, const CertificateInfo& info) {
        metrics->tls_reloads.Inc({st.ok() ? "success" : "failure"});
        if (st.ok()) {
          metrics->cert_expiry.Set({}, static_cast<double>(info.not_after_unix));
          logger->Info("serving certificate loaded",
                       {{"cn", info.common_name}, {"notAfter", info.not_after_unix},
                        {"sans", info.sans}});
        } else {
          logger->Error("serving certificate refused; previous certificate keeps serving",
                        {{"error", st.message()}});
        }
      },
      m.opt.tls_required_names);
  DRAGUARD_RETURN_IF_ERROR(m.certs->Reload());
  if (!m.opt.client_ca.empty()) {
    auto ca = ReadFile(m.opt.client_ca);
    if (!ca.ok()) return Status::InvalidArgument("--client-ca: " + ca.status().message());
  }
  m.tls_opts.certificates = m.certs.get();
  m.tls_opts.client_ca = m.opt.client_ca;
  m.tls_opts.client_cns = m.opt.client_cns;
  std::string tls_error;
  m.https = std::make_unique<httplib::SSLServer>(
      [&m, &tls_error](SSL_CTX& ctx) { return ConfigureServerContext(&ctx, &m.tls_opts, &tls_error); });
  if (!m.https->is_valid()) return Status::InvalidArgument("TLS setup failed: " + tls_error);

  std::size_t workers = m.opt.workers;
  if (workers == 0) {
    workers = std::max<std::size_t>(64, 8 * std::max(1u, std::thread::hardware_concurrency()));
  }
  std::size_t max_queued = m.opt.max_queued;
  m.https->new_task_queue = [&m, workers, max_queued] {
    return new BoundedPool(workers, max_queued, &m.shed_thread_id, &m.deps.metrics->shed);
  };
  m.InstallRoutes(*m.https, /*admission=*/true);

  if (m.opt.port == 0) {
    m.bound_port = m.https->bind_to_any_port(m.opt.host);
  } else {
    m.bound_port = m.https->bind_to_port(m.opt.host, m.opt.port) ? m.opt.port : -1;
  }
  if (m.bound_port <= 0) {
    return Status::Unavailable("cannot listen on " + m.opt.host + ":" + std::to_string(m.opt.port));
  }
  if (!m.opt.metrics_host.empty()) {
    m.metrics_http = std::make_unique<httplib::Server>();
    m.InstallRoutes(*m.metrics_http, /*admission=*/false);
    m.metrics_http->new_task_queue = [] { return new httplib::ThreadPool(2); };
    if (m.opt.metrics_port == 0) {
      m.bound_metrics_port = m.metrics_http->bind_to_any_port(m.opt.metrics_host);
    } else {
      m.bound_metrics_port =
          m.metrics_http->bind_to_port(m.opt.metrics_host, m.opt.metrics_port) ? m.opt.metrics_port : -1;
    }
    if (m.bound_metrics_port <= 0) {
      return Status::Unavailable("cannot listen on metrics address " + m.opt.metrics_host + ":" +
                                 std::to_string(m.opt.metrics_port));
    }
  }
  if (!StartListening(*m.https, &m.https_thread)) {
    return Status::Unavailable("the HTTPS listener on " + m.opt.host + " did not start");
  }
  if (m.metrics_http && !StartListening(*m.metrics_http, &m.metrics_thread)) {
    m.https->stop();
    m.https_thread.join();
    return Status::Unavailable("the metrics listener on " + m.opt.metrics_host + " did not start");
  }

  m.cert_watcher = std::make_unique<FileWatcher>(
      std::vector<std::string>{m.opt.tls_cert, m.opt.tls_key}, m.opt.reload_interval,
      [&m] { (void)m.certs->Reload(); });
  m.cert_watcher->Start();
  m.started = true;
  return Status::Ok();
}

int Server::port() const { return impl_->bound_port; }

int Server::metrics_port() const { return impl_->bound_metrics_port; }

bool Server::Ready() const { return impl_->Ready(); }

Status Server::ReloadCertificates() {
  if (!impl_->certs) return Status::FailedPrecondition("server not started");
  return impl_->certs->Reload();
}

void Server::BeginShutdown() {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  if (m.shutting_down.exchange(true) || !m.started) return;
  m.deps.logger->Info("shutdown requested; readiness is now false",
                      {{"delay_ms", static_cast<int64_t>(m.opt.shutdown_delay.count())}});
  m.shutdown_thread = std::thread([&m] {
    {
      // Keep serving while endpoints are removed from the Service.
      std::unique_lock<std::mutex> lk(m.mu);
      m.cv.wait_for(lk, m.opt.shutdown_delay, [&m] { return m.skip_delay; });
    }
    if (m.cert_watcher) m.cert_watcher->Stop();
    m.https->stop();
    if (m.metrics_http) m.metrics_http->stop();
    if (m.https_thread.joinable()) m.https_thread.join();  // waits for in-flight requests
    if (m.metrics_thread.joinable()) m.metrics_thread.join();
    m.deps.logger->Info("server stopped");
    std::lock_guard<std::mutex> lk(m.mu);
    m.stopped = true;
    m.cv.notify_all();
  });
}

void Server::SkipShutdownDelay() {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    m.skip_delay = true;
  }
  m.cv.notify_all();
}

void Server::Wait() {
  Impl& m = *impl_;
  {
    std::unique_lock<std::mutex> lock(m.mu);
    m.cv.wait(lock, [&m] { return m.stopped || !m.started; });
  }
  if (m.shutdown_thread.joinable() && m.shutdown_thread.get_id() != std::this_thread::get_id()) {
    m.shutdown_thread.join();
  }
}

}  // namespace draguard::server
