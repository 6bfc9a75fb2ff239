#include "draguard/server/server.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <thread>


#include "draguard/admission/codec.h"
#include "draguard/engine/engine.h"
#include "draguard/file_watcher.h"
#include "draguard/read_file.h"
#include "draguard/truncate.h"
#include "draguard/webhook/topology_review.h"
#include "listener.h"
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

// Whether a Content-Type value names application/json: its parameters, spaces and case aside.
bool IsJsonContentType(std::string_view value) {
  static constexpr std::string_view kJson = "application/json";
  std::size_t matched = 0;
  for (const char c : value.substr(0, value.find(';'))) {
    if (c == ' ') continue;
    if (matched == kJson.size() || std::tolower(static_cast<unsigned char>(c)) != kJson[matched]) return false;
    ++matched;
  }
  return matched == kJson.size();
}

void SetJson(HttpResponse* res, int status, std::string body) {
  res->status = status;
  res->content_type = "application/json";
  res->body = std::move(body);
}

}  // namespace

struct Server::Impl {
  ServerOptions opt;
  ServerDeps deps;
  std::unique_ptr<CertificateSource> certs;
  TlsContextOptions tls_opts;
  std::unique_ptr<Listener> https;
  std::unique_ptr<Listener> metrics_http;
  std::unique_ptr<FileWatcher> cert_watcher;
  metrics::CounterFamily* budget_refused = nullptr;
  // draguard_connections_total{protocol} (h2, http/1.1) and draguard_http2_abuse_total{reason}.
  metrics::CounterFamily* connections = nullptr;
  metrics::CounterFamily* http2_abuse = nullptr;
  // Hot-path series, found once at Start: the duration of each webhook, the rule results by key.
  metrics::HistogramFamily::Handle validate_duration, mutate_duration, topology_duration;
  std::unique_ptr<metrics::CounterTable> rule_results;
  // The conversion series by webhook::ConversionReason, created at 0 at Start.
  std::array<metrics::Counter, webhook::kConversionReasons> conversions;
  // draguard_extended_resource_claims_total by creator (scheduler, other), created at 0 at Start.
  metrics::Counter scheduler_claims, other_claims;
  std::thread shutdown_thread;
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

  void Error(HttpResponse* res, int code, const std::string& message) {
    deps.metrics->http_errors.Inc({std::to_string(code)});
    SetJson(res, code, admission::EncodeHttpError(code, message));
  }

  // Our own bound, tightened by the API server's remaining budget (?timeout=), minus a margin so
  // that the answer arrives before the API server gives up.
  std::chrono::steady_clock::time_point Deadline(const HttpRequest& req) const {
    auto deadline = req.start + opt.request_deadline;
    auto budget = ParseGoDuration(req.Param("timeout"));
    if (budget.count() > 0) {
      auto margin = std::min<std::chrono::milliseconds>(budget / 10, std::chrono::milliseconds(500));
      deadline = std::min(deadline, req.start + budget - margin);
    }
    return deadline;
  }

  // The webhooks: /validate, /mutate (the policy's) and /validate-topology (shape objects).
  enum class Endpoint { kValidate, kMutate, kTopology };
  void HandleAdmission(Endpoint endpoint, const HttpRequest& req, HttpResponse* res);
  std::vector<HttpRoute> Routes(bool admission);
  ListenerOptions Options(bool admission);
};

void Server::Impl::HandleAdmission(Endpoint endpoint, const HttpRequest& req, HttpResponse* res) {
  const auto start = req.start;
  const auto deadline = req.deadline;
  const admission::WebhookKind kind =
      endpoint == Endpoint::kMutate ? admission::WebhookKind::kMutating : admission::WebhookKind::kValidating;
  const char* webhook = endpoint == Endpoint::kValidate ? "validate"
                        : endpoint == Endpoint::kMutate ? "mutate"
                                                        : "validate-topology";

  if (const std::string_view ct = req.Header("content-type"); !IsJsonContentType(ct)) {
    Error(res, 415, "Content-Type must be application/json, got \"" + Truncate(ct) + "\"");
    return;
  }
  webhook::ReviewOutcome out;
  if (endpoint == Endpoint::kTopology) {
    out = webhook::ReviewTopologyObject(req.body, admission::DecodeLimits{opt.max_body, 128},
                                        req.body.capacity() - req.body.size());
  } else {
    auto pol = deps.policies->Current();
    if (!pol) {
      Error(res, 503, "no policy loaded");
      return;
    }
    std::shared_ptr<const topology::Snapshot> topo;
    if (deps.topology) topo = deps.topology();
    // The same deadline bounds the review, template provisioning included.
    out = deps.reviewer->Review(req.body, kind, *pol, topo.get(), std::chrono::system_clock::now(), deadline,
                                req.body.capacity() - req.body.size());
  }
  SetJson(res, out.http_status, std::move(out.body));

  const auto elapsed = std::chrono::steady_clock::now() - start;
  const double seconds = std::chrono::duration<double>(elapsed).count();
  const int64_t micros = std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count();
  (endpoint == Endpoint::kValidate ? validate_duration
   : endpoint == Endpoint::kMutate ? mutate_duration
                                   : topology_duration)
      .Observe(seconds);
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
  const std::string_view verdict = engine::VerdictName(out.verdict);
  const std::string_view request_labels[] = {webhook, out.operation, out.kind_label, verdict};
  deps.metrics->requests.IncEach(request_labels);
  for (const auto& m : out.rule_metrics) {
    const std::string_view labels[] = {m.rule, m.action, m.result};
    rule_results->Inc(m.key, labels);
  }
  if (out.conversion != webhook::ConversionReason::kNotApplicable) {
    conversions[static_cast<std::size_t>(out.conversion)].Inc();
  }
  if (out.scheduler_claim == engine::SchedulerClaim::kScheduler) scheduler_claims.Inc();
  if (out.scheduler_claim == engine::SchedulerClaim::kOther) other_claims.Inc();
  using SV = std::string_view;
  const logging::FieldView fields[] = {{"webhook", SV(webhook)},
                                       {"uid", SV(out.uid)},
                                       {"kind", SV(out.kind)},
                                       {"namespace", SV(out.namespace_)},
                                       {"name", SV(out.name)},
                                       {"operation", SV(out.operation)},
                                       {"user", SV(out.user)},
                                       {"dryRun", out.dry_run},
                                       {"decision", SV(verdict)},
                                       {"rules", std::span<const std::string>(out.rules)},
                                       {"latency_us", static_cast<int64_t>(micros)}};
  deps.logger->Write(logging::Level::kInfo, "admission", fields);
  if (std::chrono::steady_clock::now() > deadline) {
    deps.logger->Warn("review finished after the request deadline", {{"uid", out.uid}});
  }
}

std::vector<HttpRoute> Server::Impl::Routes(bool admission) {
  std::vector<HttpRoute> routes;
  if (admission) {
    routes.push_back({"POST", "/validate", true,
                      [this](const HttpRequest& req, HttpResponse* res) {
                        HandleAdmission(Endpoint::kValidate, req, res);
                      },
                      [max = opt.inline_review_max_body](const HttpRequest& req) {
                        // Small reviews whose cost is linear in the body; a claim's CEL goes to a worker.
                        return req.body.size() <= max && !webhook::MayEvaluateCel(req.body);
                      }});
    routes.push_back({"POST", "/mutate", true, [this](const HttpRequest& req, HttpResponse* res) {
                        HandleAdmission(Endpoint::kMutate, req, res);
                      }});
    // Shape objects: a record's decode and checks are bounded by its size and caps.
    routes.push_back({"POST", "/validate-topology", true, [this](const HttpRequest& req, HttpResponse* res) {
                        HandleAdmission(Endpoint::kTopology, req, res);
                      }});
  }
  routes.push_back({"GET", "/healthz", false, [](const HttpRequest&, HttpResponse* res) {
                      res->content_type = "text/plain";
                      res->body = "ok\n";
                    }});
  routes.push_back({"GET", "/readyz", false, [this](const HttpRequest&, HttpResponse* res) {
                      bool ready = Ready();
                      res->status = ready ? 200 : 503;
                      res->content_type = "text/plain";
                      res->body = ready ? "ok\n" : (shutting_down ? "shutting down\n" : "not ready\n");
                    }});
  routes.push_back({"GET", "/metrics", false, [this](const HttpRequest&, HttpResponse* res) {
                      deps.metrics->ready.Set({}, Ready() ? 1 : 0);
                      res->content_type = "text/plain; version=0.0.4; charset=utf-8";
                      res->body = deps.registry->Render();
                    }});
  return routes;
}

ListenerOptions Server::Impl::Options(bool admission) {
  ListenerOptions lo;
  const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
  lo.host = admission ? opt.host : opt.metrics_host;
  lo.port = admission ? opt.port : opt.metrics_port;
  if (admission) {
    lo.configure_tls = [this](SSL_CTX* ctx, std::string* error) {
      return ConfigureServerContext(ctx, &tls_opts, error);
    };
  }
  lo.io_threads = admission ? (opt.io_threads == 0 ? cores : opt.io_threads) : 1;
  lo.workers = admission ? (opt.workers == 0 ? std::max<std::size_t>(16, 4 * cores) : opt.workers) : 1;
  lo.max_queued = opt.max_queued;
  lo.max_body = opt.max_body;
  lo.body_padding = admission::kBodyPadding;
  lo.max_header_bytes = opt.max_header_bytes;
  lo.max_headers = opt.max_headers;
  lo.body_budget = opt.body_budget;
  lo.max_connections = opt.max_connections;
  lo.keep_alive_max_requests = opt.keep_alive_max_requests;
  lo.handshake_timeout = opt.read_timeout;
  lo.header_timeout = opt.read_timeout;
  lo.body_timeout = opt.read_timeout;
  lo.idle_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(opt.keep_alive_timeout);
  lo.write_timeout = opt.write_timeout;
  lo.http2 = admission && opt.http2;
  lo.http2_max_streams = opt.http2_max_streams;
  lo.deadline = [this](const HttpRequest& req) { return Deadline(req); };
  lo.error = [this](int code, const std::string& message, HttpResponse* res) { Error(res, code, message); };
  if (admission) {
    lo.inflight = [this](int delta) { deps.metrics->inflight.Add({}, delta); };
    lo.on_shed = [this] { deps.metrics->shed.Inc({}); };
    lo.on_budget_refused = [this] { budget_refused->Inc({}); };
    lo.on_connection = [this](std::string_view protocol) { connections->Inc({std::string(protocol)}); };
    lo.on_http2_abuse = [this](std::string_view reason) { http2_abuse->Inc({std::string(reason)}); };
  }
  lo.on_exception = [this](const std::string& what) {
    // Last resort: the reviewer answers its own exceptions with the uid; this one has none.
    deps.logger->Error("handler exception", {{"error", what}});
  };
  return lo;
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
  m.validate_duration = metrics->duration.Find({"validate"});
  m.mutate_duration = metrics->duration.Find({"mutate"});
  m.topology_duration = metrics->duration.Find({"validate-topology"});
  m.rule_results = std::make_unique<metrics::CounterTable>(metrics->rule_results, m.deps.reviewer->RuleMetricKeys());
  for (std::size_t i = 1; i < webhook::kConversionReasons; ++i) {
    const std::string_view reason[] = {webhook::ConversionReasonName(static_cast<webhook::ConversionReason>(i))};
    m.conversions[i] = metrics->conversions.Series(reason);
  }
  for (auto [kind, series] : {std::pair{engine::SchedulerClaim::kScheduler, &m.scheduler_claims},
                              std::pair{engine::SchedulerClaim::kOther, &m.other_claims}}) {
    const std::string_view creator[] = {engine::SchedulerClaimName(kind)};
    *series = metrics->scheduler_claims.Series(creator);
  }
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
  m.budget_refused = &m.deps.registry->Counter(
      "draguard_body_budget_refused_total",
      "Requests answered 429 because the bytes of request bodies in flight reached --body-budget.", {});
  m.connections = &m.deps.registry->Counter(
      "draguard_connections_total",
      "TLS connections whose handshake completed, by the protocol they speak (h2, http/1.1).", {"protocol"});
  m.http2_abuse = &m.deps.registry->Counter(
      "draguard_http2_abuse_total",
      "HTTP/2 connections ended for misbehaviour: reset_rate, stream_churn, slow_headers, protocol.", {"reason"});
  // Both listeners accept once Start() returns: a shutdown requested from now on is never lost.
  m.https = std::make_unique<Listener>(m.Options(true), m.Routes(true));
  DRAGUARD_RETURN_IF_ERROR(m.https->Start());
  if (!m.opt.metrics_host.empty()) {
    m.metrics_http = std::make_unique<Listener>(m.Options(false), m.Routes(false));
    Status st = m.metrics_http->Start();
    if (!st.ok()) {
      m.https->Stop();
      return Status::Unavailable("metrics listener: " + st.message());
    }
  }

  m.cert_watcher = std::make_unique<FileWatcher>(
      std::vector<std::string>{m.opt.tls_cert, m.opt.tls_key}, m.opt.reload_interval,
      [&m] { (void)m.certs->Reload(); });
  m.cert_watcher->Start();
  m.started = true;
  return Status::Ok();
}

int Server::port() const { return impl_->https ? impl_->https->port() : 0; }

int Server::metrics_port() const { return impl_->metrics_http ? impl_->metrics_http->port() : 0; }

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
  // From now on every response says `Connection: close` and idle keep-alive connections close,
  // so clients move to other replicas while this one still answers.
  m.https->BeginDrain();
  if (m.metrics_http) m.metrics_http->BeginDrain();
  m.shutdown_thread = std::thread([&m] {
    {
      // Keep serving while endpoints are removed from the Service.
      std::unique_lock<std::mutex> lk(m.mu);
      m.cv.wait_for(lk, m.opt.shutdown_delay, [&m] { return m.skip_delay; });
    }
    if (m.cert_watcher) m.cert_watcher->Stop();
    m.https->Stop();  // waits for the requests in progress
    if (m.metrics_http) m.metrics_http->Stop();
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
