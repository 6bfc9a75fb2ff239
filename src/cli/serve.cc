// `draguard serve`: wires policy, rules, metrics, logs, TLS, topology, the Kubernetes API and the
// HTTPS server together. The flags are read by ParseServeConfig (serve_config.h).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>

#include "commands.h"
#include "draguard/audit/background.h"
#include "draguard/certs/self_tls.h"
#include "draguard/engine/registry.h"
#include "draguard/kube/client.h"
#include "draguard/kubetopo/configmap_source.h"
#include "draguard/logging/logger.h"
#include "draguard/metrics/metrics.h"
#include "draguard/policy/store.h"
#include "draguard/provision/kube_provisioner.h"
#include "draguard/server/server.h"
#include "draguard/server/tls.h"
#include "draguard/topology/loader.h"
#include "draguard/topology/store.h"
#include "draguard/webhook/reviewer.h"
#include "serve_config.h"

namespace draguard::cli {
namespace {

using LoggerPtr = std::shared_ptr<logging::Logger>;

// Prints "draguard serve: MESSAGE" and returns `code`.
int Fail(std::ostream& err, int code, const std::string& message) {
  err << "draguard serve: " << message << "\n";
  return code;
}

// A one-line request a newcomer can paste: a Pod asking for one legacy GPU.
std::string CurlExample(const std::string& ca, const std::string& host, int port) {
  std::string h = host == "0.0.0.0" || host == "::" ? "127.0.0.1" : host;
  if (h.find(':') != std::string::npos) h = "[" + h + "]";
  return "curl --cacert " + ca + " -H 'Content-Type: application/json' https://" + h + ":" +
         std::to_string(port) +
         "/validate -d '{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
         "\"request\":{\"uid\":\"1\",\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"},"
         "\"operation\":\"CREATE\",\"namespace\":\"default\",\"object\":{\"apiVersion\":\"v1\","
         "\"kind\":\"Pod\",\"metadata\":{\"name\":\"cuda\"},\"spec\":{\"containers\":[{\"name\":"
         "\"cuda\",\"image\":\"nvidia/cuda\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":1}}}]}}}}'";
}

// Counts and logs every policy (re)load.
policy::PolicyStore::ReloadCallback PolicyReloadReporter(metrics::ServerMetrics& server_metrics,
                                                         const LoggerPtr& logger) {
  return [&server_metrics, logger](const Status& st) {
    server_metrics.policy_reloads.Inc({st.ok() ? "success" : "failure"});
    if (st.ok()) {
      logger->Info("policy loaded");
    } else {
      logger->Error("policy refused; the previous policy keeps serving", {{"error", st.message()}});
    }
  };
}

// --config FILE, or the bundled policy.
Status LoadPolicy(const ServeConfig& cfg, policy::PolicyStore& policies) {
  return cfg.policy_file ? policies.LoadFile(*cfg.policy_file) : policies.LoadDefault();
}

// Without --tls-cert/--tls-key: a CA and a serving certificate in --state-dir (generated, or
// reused while valid), installed in cfg.server.
Status PrepareTls(ServeConfig& cfg, logging::Logger& logger) {
  if (cfg.tls_from_flags || cfg.tls_self) return Status::Ok();
  const std::string& ns = cfg.namespace_name;
  const std::string& service = cfg.service_name;
  std::vector<std::string> dns = {"localhost", service + "." + ns + ".svc", service + "." + ns + ".svc.cluster.local"};
  auto paths = server::EnsureStateCertificates(cfg.state_dir, dns, {"127.0.0.1", "::1"});
  if (!paths.ok()) return paths.status();
  cfg.server.tls_cert = paths->tls_cert;
  cfg.server.tls_key = paths->tls_key;
  logger.Info(paths->generated ? "generated CA and serving certificate" : "reusing CA and serving certificate",
              {{"stateDir", cfg.state_dir}, {"caCert", paths->ca_cert}, {"sans", dns}});
  return Status::Ok();
}

// Kubernetes API access: --kube=auto uses the in-cluster configuration when
// KUBERNETES_SERVICE_HOST is set and runs without API access otherwise; on requires it; off never
// uses it. --topology-configmaps requires it too. Null = no API access.
Result<std::unique_ptr<kube::Client>> ConnectKube(const ServeConfig& cfg, logging::Logger& logger) {
  using ClientPtr = std::unique_ptr<kube::Client>;
  if (cfg.kube == KubeMode::kOff) return ClientPtr();
  const bool required = cfg.kube == KubeMode::kOn || !cfg.topology_configmaps.empty() || cfg.tls_self.has_value();
  const bool in_cluster = std::getenv("KUBERNETES_SERVICE_HOST") != nullptr;
  if (!required && !in_cluster) return ClientPtr();
  auto config = kube::InClusterConfig();
  if (!config.ok()) {
    if (required) {
      const char* why = cfg.kube == KubeMode::kOn ? "--kube=on"
                        : cfg.tls_self                ? "--tls-self-secret"
                                                      : "--topology-configmaps";
      return Status::InvalidArgument(std::string(why) +
                                     ": no in-cluster Kubernetes configuration: " + config.status().message());
    }
    logger.Warn("running without Kubernetes API access", {{"error", config.status().message()}});
    return ClientPtr();
  }
  config->request_timeout = cfg.kube_timeout;
  config->read_timeout = std::max(config->read_timeout, cfg.kube_timeout);
  logger.Info("Kubernetes API access", {{"server", kube::ServerUrl(*config)},
                                        {"timeoutMs", static_cast<int64_t>(cfg.kube_timeout.count())}});
  return std::make_unique<kube::Client>(*config);
}

// The topology store logs through the server's logger, tagged component=topology.
topology::StoreOptions TopologyStoreOptions(const LoggerPtr& logger) {
  topology::StoreOptions options;
  options.log = [logger](topology::LogLevel lvl, const std::string& msg) {
    logging::Level level = logging::Level::kError;
    switch (lvl) {
      case topology::LogLevel::kDebug: level = logging::Level::kDebug; break;
      case topology::LogLevel::kInfo: level = logging::Level::kInfo; break;
      case topology::LogLevel::kWarn: level = logging::Level::kWarn; break;
      case topology::LogLevel::kError: level = logging::Level::kError; break;
    }
    logger->Log(level, msg, {{"component", std::string("topology")}});
  };
  return options;
}

// The watched topology ConfigMaps of --topology-configmaps, listed once before serving (up to
// max(--kube-timeout, 10 s)); the watch keeps trying and fills the model in later.
std::unique_ptr<kubetopo::ConfigMapSource> ConfigMapTopologySource(const ServeConfig& cfg, const kube::Client& client,
                                                                   const LoggerPtr& logger) {
  const auto wait = std::max(cfg.kube_timeout, std::chrono::milliseconds(10000));
  kubetopo::ConfigMapSourceOptions options;
  options.watch.namespace_name = cfg.topology_configmaps;
  options.watch.list_timeout = wait;
  options.on_error = [logger](const Status& st) {
    logger->Warn("topology ConfigMap watch failed; retrying",
                 {{"component", std::string("topology")}, {"error", st.message()}});
  };
  auto source = std::make_unique<kubetopo::ConfigMapSource>(client, options);
  source->Start();
  if (!source->WaitForSync(wait)) {
    logger->Warn("topology ConfigMaps not listed yet; starting with an empty topology model",
                 {{"namespace", cfg.topology_configmaps}, {"error", source->last_error().message()}});
  }
  return source;
}

// Topology: ConfigMaps through the API (--topology-configmaps), the exports in --topology-dir
// (both watched), the bundled examples when named or for a local newcomer, else none (never the
// demo machines in a cluster). An error names the flag of the source.
Status StartTopology(const ServeConfig& cfg, const kube::Client* client, topology::Store& store,
                     const LoggerPtr& logger) {
  std::unique_ptr<topology::Source> source;
  std::string described;
  const char* flag = "--topology-dir";
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  switch (TopologySourceFor(cfg, host != nullptr && *host != '\0')) {
    case TopologySource::kConfigMaps: {
      auto cm_source = ConfigMapTopologySource(cfg, *client, logger);
      described = cm_source->Describe();
      source = std::move(cm_source);
      flag = "--topology-configmaps";
      break;
    }
    case TopologySource::kExamples:
      source = topology::MakeBundledExampleSource();
      described = "bundled examples (demo machines, not this cluster's nodes)";
      break;
    case TopologySource::kDirectory:
      source = topology::MakeDirectorySource(cfg.topology_dir);
      described = cfg.topology_dir;
      break;
    case TopologySource::kNone:
      source = std::make_unique<topology::InMemorySource>(std::vector<topology::InMemoryExport>{});
      described = "none";
      logger->Warn("no topology source in a cluster: multi-GPU conversions are refused until exports are "
                   "provided (--topology-dir DIR or --topology-configmaps NAMESPACE)",
                   {});
      break;
  }
  const bool watch = !cfg.topology_configmaps.empty() ||
                     (!cfg.topology_dir.empty() && cfg.topology_dir != kBundledExamples);
  if (Status st = store.Start(std::move(source), watch); !st.ok()) {
    return Status(st.code(), std::string(flag) + ": " + st.message());
  }
  auto tm = store.Metrics();
  logger->Info("topology loaded", {{"source", described},
                                   {"nodes", static_cast<int64_t>(tm.nodes)},
                                   {"shapes", static_cast<int64_t>(tm.shapes)}});
  return Status::Ok();
}

// Copies the topology store's counters into their metric families.
void ExportTopologyMetrics(const topology::StoreMetrics& m, metrics::TopologyMetrics& out) {
  out.nodes.Set({}, static_cast<double>(m.nodes));
  out.shapes.Set({}, static_cast<double>(m.shapes));
  out.reloads.SetTotal({"success"}, static_cast<double>(m.reloads_total));
  out.reloads.SetTotal({"failure"}, static_cast<double>(m.reload_failures_total));
  out.last_reload.Set({}, static_cast<double>(m.last_reload_unix_ms) / 1000.0);
  out.reload_duration.Set({}, static_cast<double>(m.last_reload_duration_us) / 1e6);
  for (std::size_t i = 1; i < m.load_errors_total.size(); ++i) {
    if (m.load_errors_total[i] == 0) continue;
    out.load_errors.SetTotal({topology::LoadErrorReasonName(static_cast<topology::LoadErrorReason>(i))},
                             static_cast<double>(m.load_errors_total[i]));
  }
}

// Template provisioning: with API access, /mutate creates the generated ResourceClaimTemplates
// while the policy says mutation.templates: create (checked per request, so a hot-reloaded policy
// switches it); without access they must exist already (`draguard render`). Null without access.
std::unique_ptr<provision::KubeTemplateProvisioner> MakeProvisioner(const kube::Client* client,
                                                                    const policy::PolicyStore& policies,
                                                                    metrics::Registry& registry,
                                                                    logging::Logger& logger) {
  auto pol = policies.Current();
  const bool create = pol && pol->mutation.templates == policy::TemplateMode::kCreate;
  if (client == nullptr) {
    if (create) {
      logger.Info("no Kubernetes API access: /mutate will not create ResourceClaimTemplates; "
                  "they must exist already (draguard render)");
    }
    return nullptr;
  }
  auto provisioner = std::make_unique<provision::KubeTemplateProvisioner>(*client);
  provisioner->RegisterMetrics(registry);
  logger.Info(create ? "ResourceClaimTemplates are created through the API (policy mutation.templates: create)"
                     : "template provisioner ready; idle while policy mutation.templates is reference");
  return provisioner;
}

// tls.mode=self: the serving pair comes from the Secret (certs::SelfTls), written into
// <state-dir>/self-tls/ and hot-reloaded by the server. The first sync must succeed within
// max(--kube-timeout × 6, 60 s) or serve exits (the pod restarts and tries again).
class SelfTlsServing {
 public:
  SelfTlsServing(const ServeConfig& cfg, const kube::Client& client, const LoggerPtr& logger)
      : dir_(cfg.state_dir + "/self-tls"), logger_(logger) {
    const SelfTlsConfig& self = *cfg.tls_self;
    certs::SelfTlsOptions o;
    // The Secret lives in the pod's own namespace (service account), else --namespace.
    o.namespace_name = client.config().namespace_name.empty() ? cfg.namespace_name : client.config().namespace_name;
    o.secret_name = self.secret;
    o.service_name = cfg.service_name;
    o.validating_webhooks = self.validating;
    o.mutating_webhooks = self.mutating;
    o.rotation.ca_validity = std::chrono::hours(24) * self.ca_days;
    o.rotation.leaf_validity = std::chrono::hours(24) * self.cert_days;
    manager_ = std::make_unique<certs::SelfTls>(
        client, o, [this](const certs::PemPair& p, const std::string& ca) { return Install(p, ca); }, logger);
  }

  std::string cert_path() const { return dir_ + "/tls.crt"; }
  std::string key_path() const { return dir_ + "/tls.key"; }
  std::string ca_path() const { return dir_ + "/ca.crt"; }

  // The first sync, retried with a growing pause until `limit`.
  Status FirstSync(std::chrono::milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    std::chrono::milliseconds pause(500);
    for (;;) {
      auto r = manager_->SyncOnce();
      if (r.ok()) return Status::Ok();
      if (std::chrono::steady_clock::now() + pause >= until) {
        return Status(r.status().code(), "--tls-self-secret: " + r.status().message());
      }
      logger_->Warn("TLS Secret not ready yet; retrying", {{"error", r.status().message()}});
      std::this_thread::sleep_for(pause);  // a retry pause, not synchronisation
      pause = std::min(pause * 2, std::chrono::milliseconds(8000));
    }
  }

  // After the server started: later certificates are reloaded at once; resync in the background.
  void Run(server::Server& srv, std::chrono::milliseconds period) {
    server_.store(&srv);
    manager_->Start(period);
  }
  void Stop() {
    manager_->Stop();
    server_.store(nullptr);
  }

 private:
  Status Install(const certs::PemPair& p, const std::string& ca) {
    DRAGUARD_RETURN_IF_ERROR(certs::WritePrivateFile(dir_, "tls.key", p.key_pem));
    DRAGUARD_RETURN_IF_ERROR(certs::WritePrivateFile(dir_, "tls.crt", p.cert_pem));
    DRAGUARD_RETURN_IF_ERROR(certs::WritePrivateFile(dir_, "ca.crt", ca));
    if (server::Server* srv = server_.load(); srv != nullptr) return srv->ReloadCertificates();
    return Status::Ok();
  }

  std::string dir_;
  LoggerPtr logger_;
  std::atomic<server::Server*> server_{nullptr};
  std::unique_ptr<certs::SelfTls> manager_;
};

// The background audit (--audit-interval): one replica at a time, chosen by a Lease in the
// release namespace; null when off. Needs API access (checked here: --kube=auto may have none).
Result<std::unique_ptr<audit::BackgroundAudit>> StartBackgroundAudit(
    const ServeConfig& cfg, const kube::Client* client, const engine::Registry& rules, const policy::PolicyStore& policies,
    const topology::Store& topology_store, metrics::Registry& registry, std::unique_ptr<audit::LeaseElector>& elector,
    std::unique_ptr<metrics::AuditMetrics>& audit_metrics, const LoggerPtr& logger) {
  using AuditPtr = std::unique_ptr<audit::BackgroundAudit>;
  if (cfg.audit.interval.count() == 0) return AuditPtr();
  if (client == nullptr) {
    return Status::InvalidArgument("--audit-interval needs Kubernetes API access (in-cluster configuration or --kube=on)");
  }
  const char* pod = std::getenv("POD_NAME");
  char host[256] = {};
  std::string identity = pod != nullptr && *pod != '\0' ? pod : (gethostname(host, sizeof(host) - 1) == 0 ? host : "draguard");
  audit::LeaseOptions lease;
  lease.namespace_name = cfg.namespace_name;
  lease.name = cfg.audit.lease_name.empty() ? cfg.service_name + "-audit" : cfg.audit.lease_name;
  lease.identity = identity;
  elector = std::make_unique<audit::LeaseElector>(*client, lease);
  audit_metrics = std::make_unique<metrics::AuditMetrics>(registry);
  audit::BackgroundOptions options;
  options.interval = cfg.audit.interval;
  options.page_size = cfg.audit.page_size;
  options.max_results = cfg.audit.max_results;
  options.policy_reports = cfg.audit.policy_reports;
  auto bg = std::make_unique<audit::BackgroundAudit>(
      *client, rules, *elector,
      [&policies, &topology_store] { return audit::AuditSnapshots{policies.Current(), topology_store.Current()}; },
      *audit_metrics, logger, options);
  bg->Start();
  logger->Info("background audit on", {{"intervalSeconds", static_cast<int64_t>(cfg.audit.interval.count())},
                                       {"lease", cfg.namespace_name + "/" + lease.name},
                                       {"identity", identity}});
  return bg;
}

// Every asynchronous signal whose default action ends the process, except SIGKILL (and SIGPIPE,
// ignored): taken by sigwait() in SignalLoop, never by a default action. Blocked before any thread
// starts so that every thread inherits the mask.
sigset_t BlockSignals() {
  sigset_t sigs;
  sigemptyset(&sigs);
  for (int sig : {SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGIO, SIGPWR,
                  SIGSTKFLT, SIGXCPU}) {
    sigaddset(&sigs, sig);
  }
  for (int sig = SIGRTMIN; sig <= SIGRTMAX; ++sig) sigaddset(&sigs, sig);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  // A peer closing its socket, or a file size limit, must never kill the process.
  signal(SIGPIPE, SIG_IGN);
  signal(SIGXFSZ, SIG_IGN);
  return sigs;
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// The signal thread of `serve`: SIGTERM, SIGINT and SIGQUIT start the drain (readiness off,
// --shutdown-delay, in-flight requests finish) and a second one ends the delay early; SIGHUP runs
// `reload`; every other blocked signal is logged and ignored.
class SignalLoop {
 public:
  SignalLoop(const sigset_t& sigs, server::Server& srv, std::function<void()> reload, logging::Logger& logger)
      : sigs_(sigs), srv_(srv), reload_(std::move(reload)), logger_(logger) {
    thread_ = std::thread([this] { Run(); });
  }
  // Ends the loop (it wakes up on a signal sent to its own thread).
  ~SignalLoop() {
    stop_.store(true);
    pthread_kill(thread_.native_handle(), SIGUSR1);
    thread_.join();
  }
  SignalLoop(const SignalLoop&) = delete;
  SignalLoop& operator=(const SignalLoop&) = delete;

 private:
  void Run() {
    bool draining = false;
    for (;;) {
      int sig = 0;
      if (sigwait(&sigs_, &sig) != 0) continue;
      if (stop_.load()) return;
      if (sig == SIGTERM || sig == SIGINT || sig == SIGQUIT) {
        logger_.Info("signal received", {{"signal", SignalName(sig)},
                                         {"action", std::string(draining ? "end the shutdown delay" : "drain")}});
        if (draining) {
          srv_.SkipShutdownDelay();
        } else {
          draining = true;
          srv_.BeginShutdown();
        }
      } else if (sig == SIGHUP) {
        logger_.Info("signal received", {{"signal", SignalName(sig)}, {"action", std::string("reload")}});
        if (!draining) reload_();
      } else {
        logger_.Info("signal received", {{"signal", SignalName(sig)}, {"action", std::string("ignored")}});
      }
    }
  }

  sigset_t sigs_;
  server::Server& srv_;
  std::function<void()> reload_;
  logging::Logger& logger_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// SIGHUP: re-reads the policy file, the serving certificate and the topology source now. Each
// outcome is also logged by its own reload reporter; a failure keeps what serves.
std::function<void()> ReloadEverything(policy::PolicyStore& policies, server::Server& srv,
                                       topology::Store& topology_store, const LoggerPtr& logger) {
  return [&policies, &srv, &topology_store, logger] {
    auto text = [](const Status& st) { return st.ok() ? std::string("ok") : st.message(); };
    const Status p = policies.Reload();
    const Status c = srv.ReloadCertificates();
    const Status t = topology_store.Reload();
    logger->Log(p.ok() && c.ok() && t.ok() ? logging::Level::kInfo : logging::Level::kWarn, "reloaded on SIGHUP",
                {{"policy", text(p)}, {"certificate", text(c)}, {"topology", text(t)}});
  };
}

void LogListening(const ServeConfig& cfg, const server::Server& srv, logging::Logger& logger) {
  const server::ServerOptions& opt = cfg.server;
  std::string ca_hint = cfg.tls_from_flags ? "<your CA>"
                        : cfg.tls_self      ? cfg.state_dir + "/self-tls/ca.crt"
                                            : cfg.state_dir + "/ca.crt";
  logger.Info("listening", {{"address", opt.host + ":" + std::to_string(srv.port())},
                            {"metrics", opt.metrics_host.empty()
                                            ? std::string("on the HTTPS port")
                                            : opt.metrics_host + ":" + std::to_string(srv.metrics_port())},
                            {"try", CurlExample(ca_hint, opt.host, srv.port())}});
}

}  // namespace

int Serve(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto parsed = ParseServeConfig(args);
  if (!parsed.ok()) return Fail(err, kExitUsage, parsed.status().message());
  ServeConfig cfg = std::move(parsed).value();
  const server::ServerOptions& opt = cfg.server;
  const sigset_t sigs = BlockSignals();
  auto logger = logging::Logger::Stdout(cfg.log_level);

  metrics::Registry registry;
  metrics::ServerMetrics server_metrics(registry);
  policy::PolicyStore policies({cfg.namespace_name}, PolicyReloadReporter(server_metrics, logger));
  if (Status st = LoadPolicy(cfg, policies); !st.ok()) return Fail(err, kExitUsage, st.message());
  if (Status st = PrepareTls(cfg, *logger); !st.ok()) return Fail(err, kExitRuntime, st.message());

  auto kube_client = ConnectKube(cfg, *logger);  // outlives the topology store and the provisioner
  if (!kube_client.ok()) return Fail(err, kExitUsage, kube_client.status().message());
  std::unique_ptr<SelfTlsServing> self_tls;
  if (cfg.tls_self) {
    self_tls = std::make_unique<SelfTlsServing>(cfg, **kube_client, logger);
    if (Status st = self_tls->FirstSync(std::max(cfg.kube_timeout * 6, std::chrono::milliseconds(60000))); !st.ok()) {
      return Fail(err, kExitRuntime, st.message());
    }
    cfg.server.tls_cert = self_tls->cert_path();
    cfg.server.tls_key = self_tls->key_path();
  }
  topology::Store topology_store(TopologyStoreOptions(logger));
  if (Status st = StartTopology(cfg, kube_client->get(), topology_store, logger); !st.ok()) {
    return Fail(err, kExitUsage, st.message());
  }
  metrics::TopologyMetrics topology_metrics(registry);
  registry.AddCollector([&] { ExportTopologyMetrics(topology_store.Metrics(), topology_metrics); });

  engine::Registry rules = engine::DefaultRegistry();
  auto provisioner = MakeProvisioner(kube_client->get(), policies, registry, *logger);
  webhook::Reviewer reviewer(rules, admission::DecodeLimits{opt.max_body, 128}, provisioner.get());

  server::ServerDeps deps;
  deps.policies = &policies;
  deps.reviewer = &reviewer;
  deps.logger = logger;
  deps.registry = &registry;
  deps.metrics = &server_metrics;
  deps.topology = [&topology_store] { return topology_store.Current(); };
  deps.extra_ready = [&policies, &topology_store] {
    auto pol = policies.Current();
    return !pol || !pol->require_topology_for_readiness || topology_store.Current()->node_count() > 0;
  };
  server::Server srv(opt, deps);
  if (auto st = srv.Start(); !st.ok()) {
    return Fail(err, st.code() == StatusCode::kInvalidArgument ? kExitUsage : kExitRuntime, st.message());
  }
  policies.Watch(opt.reload_interval);
  if (self_tls) self_tls->Run(srv, cfg.tls_self->resync);
  std::unique_ptr<audit::LeaseElector> audit_elector;
  std::unique_ptr<metrics::AuditMetrics> audit_metrics;
  auto background = StartBackgroundAudit(cfg, kube_client->get(), rules, policies, topology_store, registry,
                                         audit_elector, audit_metrics, logger);
  if (!background.ok()) return Fail(err, kExitUsage, background.status().message());
  LogListening(cfg, srv, *logger);
  {
    SignalLoop signals(sigs, srv, ReloadEverything(policies, srv, topology_store, logger), *logger);
    srv.Wait();
  }
  if (*background) (*background)->Stop();
  if (self_tls) self_tls->Stop();
  (void)out;
  return kExitOk;
}

}  // namespace draguard::cli
