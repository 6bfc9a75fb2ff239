// `draguard serve`: the list of parts and the order they start and stop in — policy, metrics,
// logs, TLS (serve_tls.h), the Kubernetes API (serve_kube.h), topology (serve_topology.h), the
// HTTPS server, the background audit (serve_audit.h) and signals (serve_signals.h). The flags are
// read by ParseServeConfig (serve_config.h).
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "draguard/engine/registry.h"
#include "draguard/logging/logger.h"
#include "draguard/metrics/metrics.h"
#include "draguard/policy/store.h"
#include "draguard/server/server.h"
#include "draguard/topology/store.h"
#include "draguard/webhook/reviewer.h"
#include "serve_audit.h"
#include "serve_config.h"
#include "serve_kube.h"
#include "serve_signals.h"
#include "serve_tls.h"
#include "serve_topology.h"

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

// The "listening" log line: addresses and a request to paste.
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
  const kubetopo::NodeSource* node_source = nullptr;  // owned by topology_store
  if (Status st = StartTopology(cfg, kube_client->get(), topology_store, logger, &node_source); !st.ok()) {
    return Fail(err, kExitUsage, st.message());
  }
  metrics::TopologyMetrics topology_metrics(registry);
  registry.AddCollector([&] { ExportTopologyMetrics(topology_store.Metrics(), node_source, topology_metrics); });

  engine::Registry rules = engine::DefaultRegistry();
  auto provisioner = MakeProvisioner(kube_client->get(), policies, registry, *logger);
  // Stopped after the server (it outlives the reviewer that reads it).
  auto claim_cache = StartClaimCache(cfg, kube_client->get(), registry, logger);
  webhook::Reviewer reviewer(rules, admission::DecodeLimits{opt.max_body, 128}, provisioner.get(), claim_cache.get());

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
    // The audit Lease is released as the drain starts, so another replica takes it over at once.
    SignalLoop signals(sigs, srv, ReloadEverything(policies, srv, topology_store, logger), *logger,
                       [&background] {
                         if (*background) (*background)->RequestStop();
                       });
    srv.Wait();
  }
  if (*background) (*background)->Stop();
  if (self_tls) self_tls->Stop();
  (void)out;
  return kExitOk;
}

}  // namespace draguard::cli
