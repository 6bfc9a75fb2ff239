// `draguard serve`: wires policy, rules, metrics, logs, TLS and the HTTPS server together.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <memory>

#include "commands.h"
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
#include "flags.h"

namespace draguard::cli {
namespace {

bool ParseSeconds(const std::string& s, double* out) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || v < 0 || v > 86400) return false;
  *out = v;
  return true;
}

bool ParseCount(const std::string& s, std::size_t* out) {
  if (s.empty() || s.size() > 12) return false;
  std::size_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<std::size_t>(c - '0');
  }
  *out = v;
  return true;
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

}  // namespace

int Serve(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  Flags f = ParseFlags(args,
                       {"--listen", "--state-dir", "--service-name", "--namespace", "--tls-cert",
                        "--tls-key", "--client-ca", "--client-cn", "--config", "--topology-dir",
                        "--metrics-listen", "--shutdown-delay", "--log-level", "--max-body",
                        "--read-timeout", "--request-timeout", "--keep-alive-timeout",
                        "--workers", "--max-queued", "--reload-interval", "--kube", "--kube-timeout",
                        "--topology-configmaps"},
                       {});
  if (!f.error.empty() || !f.positional.empty()) {
    err << "draguard serve: " << (f.error.empty() ? "unexpected argument " + f.positional.front() : f.error)
        << " (see draguard help)\n";
    return kExitUsage;
  }
  auto level = logging::ParseLevel(f.Get("--log-level", "info"));
  if (!level.ok()) {
    err << "draguard serve: " << level.status().message() << "\n";
    return kExitUsage;
  }
  auto logger = logging::Logger::Stdout(*level);

  server::ServerOptions opt;
  if (auto st = server::ParseHostPort(f.Get("--listen", "127.0.0.1:8443"), &opt.host, &opt.port);
      !st.ok()) {
    err << "draguard serve: --listen: " << st.message() << "\n";
    return kExitUsage;
  }
  if (f.Has("--metrics-listen")) {
    if (auto st = server::ParseHostPort(f.Get("--metrics-listen"), &opt.metrics_host, &opt.metrics_port);
        !st.ok()) {
      err << "draguard serve: --metrics-listen: " << st.message() << "\n";
      return kExitUsage;
    }
  }
  struct SecondsFlag {
    const char* name;
    std::chrono::milliseconds* target;
  };
  std::chrono::milliseconds keep_alive{opt.keep_alive_timeout};
  for (SecondsFlag sf : {SecondsFlag{"--shutdown-delay", &opt.shutdown_delay},
                         SecondsFlag{"--read-timeout", &opt.read_timeout},
                         SecondsFlag{"--request-timeout", &opt.request_deadline},
                         SecondsFlag{"--keep-alive-timeout", &keep_alive},
                         SecondsFlag{"--reload-interval", &opt.reload_interval}}) {
    if (!f.Has(sf.name)) continue;
    double secs = 0;
    if (!ParseSeconds(f.Get(sf.name), &secs)) {
      err << "draguard serve: " << sf.name << " must be a number of seconds\n";
      return kExitUsage;
    }
    *sf.target = std::chrono::milliseconds(static_cast<int64_t>(secs * 1000));
  }
  opt.keep_alive_timeout = std::chrono::duration_cast<std::chrono::seconds>(keep_alive);
  if (opt.keep_alive_timeout.count() < 1) opt.keep_alive_timeout = std::chrono::seconds(1);
  opt.write_timeout = opt.read_timeout;
  for (auto [name, target] : {std::pair<const char*, std::size_t*>{"--max-body", &opt.max_body},
                              {"--workers", &opt.workers},
                              {"--max-queued", &opt.max_queued}}) {
    if (f.Has(name) && !ParseCount(f.Get(name), target)) {
      err << "draguard serve: " << name << " must be a non-negative integer\n";
      return kExitUsage;
    }
  }
  if (opt.max_body < 1024) {
    err << "draguard serve: --max-body must be at least 1024\n";
    return kExitUsage;
  }
  opt.client_ca = f.Get("--client-ca");
  if (auto it = f.values.find("--client-cn"); it != f.values.end()) {
    for (const auto& v : it->second) {
      std::size_t start = 0;
      while (start <= v.size()) {
        std::size_t comma = v.find(',', start);
        std::string cn = v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (!cn.empty()) opt.client_cns.push_back(cn);
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    }
  }
  if (!opt.client_cns.empty() && opt.client_ca.empty()) {
    err << "draguard serve: --client-cn needs --client-ca\n";
    return kExitUsage;
  }

  const std::string kube_mode = f.Get("--kube", "auto");
  if (kube_mode != "auto" && kube_mode != "on" && kube_mode != "off") {
    err << "draguard serve: --kube must be auto, on or off\n";
    return kExitUsage;
  }
  std::chrono::milliseconds kube_timeout{10000};
  if (f.Has("--kube-timeout")) {
    double secs = 0;
    if (!ParseSeconds(f.Get("--kube-timeout"), &secs) || secs <= 0) {
      err << "draguard serve: --kube-timeout must be a positive number of seconds\n";
      return kExitUsage;
    }
    kube_timeout = std::chrono::milliseconds(static_cast<int64_t>(secs * 1000));
  }
  const std::string topo_cm_ns = f.Get("--topology-configmaps");
  if (f.Has("--topology-configmaps") && topo_cm_ns.empty()) {
    err << "draguard serve: --topology-configmaps needs a namespace\n";
    return kExitUsage;
  }
  if (!topo_cm_ns.empty() && f.Has("--topology-dir")) {
    err << "draguard serve: --topology-configmaps and --topology-dir exclude each other\n";
    return kExitUsage;
  }
  if (!topo_cm_ns.empty() && kube_mode == "off") {
    err << "draguard serve: --topology-configmaps needs Kubernetes API access (not --kube=off)\n";
    return kExitUsage;
  }

  metrics::Registry registry;
  metrics::ServerMetrics server_metrics(registry);

  const std::string ns = f.Get("--namespace", "draguard");
  const std::string service = f.Get("--service-name", "draguard");
  policy::PolicyStore policies({ns}, [&server_metrics, logger](const Status& st) {
    server_metrics.policy_reloads.Inc({st.ok() ? "success" : "failure"});
    if (st.ok()) {
      logger->Info("policy loaded");
    } else {
      logger->Error("policy refused; the previous policy keeps serving", {{"error", st.message()}});
    }
  });
  Status pst = f.Has("--config") ? policies.LoadFile(f.Get("--config")) : policies.LoadDefault();
  if (!pst.ok()) {
    err << "draguard serve: " << pst.message() << "\n";
    return kExitUsage;
  }

  if (f.Has("--tls-cert") != f.Has("--tls-key")) {
    err << "draguard serve: --tls-cert and --tls-key go together\n";
    return kExitUsage;
  }
  if (f.Has("--tls-cert")) {
    opt.tls_cert = f.Get("--tls-cert");
    opt.tls_key = f.Get("--tls-key");
  } else {
    std::string dir = f.Get("--state-dir", ".draguard");
    std::vector<std::string> dns = {"localhost", service + "." + ns + ".svc",
                                    service + "." + ns + ".svc.cluster.local"};
    auto paths = server::EnsureStateCertificates(dir, dns, {"127.0.0.1", "::1"});
    if (!paths.ok()) {
      err << "draguard serve: " << paths.status().message() << "\n";
      return kExitRuntime;
    }
    opt.tls_cert = paths->tls_cert;
    opt.tls_key = paths->tls_key;
    logger->Info(paths->generated ? "generated CA and serving certificate"
                                  : "reusing CA and serving certificate",
                 {{"stateDir", dir}, {"caCert", paths->ca_cert}, {"sans", dns}});
  }

  // Kubernetes API access: --kube=auto (default) uses the in-cluster configuration when
  // KUBERNETES_SERVICE_HOST is set and runs without API access otherwise; on requires it; off
  // never uses it.
  std::unique_ptr<kube::Client> kube_client;  // outlives the topology store and the provisioner
  if (kube_mode != "off") {
    const bool in_cluster = std::getenv("KUBERNETES_SERVICE_HOST") != nullptr;
    if (kube_mode == "on" || in_cluster || !topo_cm_ns.empty()) {
      auto cfg = kube::InClusterConfig();
      if (cfg.ok()) {
        cfg->request_timeout = kube_timeout;
        cfg->read_timeout = std::max(cfg->read_timeout, kube_timeout);
        kube_client = std::make_unique<kube::Client>(*cfg);
        logger->Info("Kubernetes API access", {{"server", kube::ServerUrl(*cfg)},
                                              {"timeoutMs", static_cast<int64_t>(kube_timeout.count())}});
      } else if (kube_mode == "on" || !topo_cm_ns.empty()) {
        err << "draguard serve: " << (kube_mode == "on" ? "--kube=on" : "--topology-configmaps")
            << ": no in-cluster Kubernetes configuration: " << cfg.status().message() << "\n";
        return kExitUsage;
      } else {
        logger->Warn("running without Kubernetes API access", {{"error", cfg.status().message()}});
      }
    }
  }

  // Topology: ConfigMaps through the API (--topology-configmaps), the exports in --topology-dir
  // (watched), else the bundled examples.
  topology::StoreOptions topo_opt;
  topo_opt.log = [logger](topology::LogLevel lvl, const std::string& msg) {
    switch (lvl) {
      case topology::LogLevel::kDebug: logger->Debug(msg, {{"component", std::string("topology")}}); break;
      case topology::LogLevel::kInfo: logger->Info(msg, {{"component", std::string("topology")}}); break;
      case topology::LogLevel::kWarn: logger->Warn(msg, {{"component", std::string("topology")}}); break;
      case topology::LogLevel::kError: logger->Error(msg, {{"component", std::string("topology")}}); break;
    }
  };
  topology::Store topology_store(topo_opt);
  {
    std::string dir = f.Get("--topology-dir");
    std::unique_ptr<topology::Source> source;
    std::string described;
    const char* flag = "--topology-dir";
    if (!topo_cm_ns.empty()) {
      kubetopo::ConfigMapSourceOptions cm_opt;
      cm_opt.watch.namespace_name = topo_cm_ns;
      cm_opt.watch.list_timeout = std::max(kube_timeout, std::chrono::milliseconds(10000));
      cm_opt.on_error = [logger](const Status& st) {
        logger->Warn("topology ConfigMap watch failed; retrying",
                     {{"component", std::string("topology")}, {"error", st.message()}});
      };
      auto cm_source = std::make_unique<kubetopo::ConfigMapSource>(*kube_client, cm_opt);
      cm_source->Start();
      if (!cm_source->WaitForSync(std::max(kube_timeout, std::chrono::milliseconds(10000)))) {
        // The watcher keeps trying; the model fills in when the first list arrives.
        logger->Warn("topology ConfigMaps not listed yet; starting with an empty topology model",
                     {{"namespace", topo_cm_ns}, {"error", cm_source->last_error().message()}});
      }
      described = cm_source->Describe();
      source = std::move(cm_source);
      flag = "--topology-configmaps";
    } else if (dir.empty()) {
      source = topology::MakeBundledExampleSource();
      described = "bundled examples";
    } else {
      source = topology::MakeDirectorySource(dir);
      described = dir;
    }
    const bool watch = !topo_cm_ns.empty() || !dir.empty();
    if (Status st = topology_store.Start(std::move(source), watch); !st.ok()) {
      err << "draguard serve: " << flag << ": " << st.message() << "\n";
      return kExitUsage;
    }
    auto snap = topology_store.Current();
    auto tm = topology_store.Metrics();
    logger->Info("topology loaded", {{"source", described},
                                     {"nodes", static_cast<int64_t>(tm.nodes)},
                                     {"shapes", static_cast<int64_t>(tm.shapes)}});
  }
  auto& topo_nodes = registry.Gauge("draguard_topology_nodes", "Nodes in the topology model.");
  auto& topo_shapes = registry.Gauge("draguard_topology_shapes", "Distinct hardware shapes in the topology model.");
  auto& topo_reloads = registry.Counter("draguard_topology_reload_total", "Topology reloads by result.", {"result"});
  auto& topo_last = registry.Gauge("draguard_topology_last_reload_timestamp_seconds", "Unix time of the last topology reload.");
  auto& topo_duration = registry.Gauge("draguard_topology_last_reload_duration_seconds", "Duration of the last topology reload.");
  auto& topo_errors = registry.Counter("draguard_topology_load_errors_total", "Refused hwloc exports by reason.", {"reason"});
  registry.AddCollector([&] {
    auto m = topology_store.Metrics();
    topo_nodes.Set({}, static_cast<double>(m.nodes));
    topo_shapes.Set({}, static_cast<double>(m.shapes));
    topo_reloads.SetTotal({"success"}, static_cast<double>(m.reloads_total));
    topo_reloads.SetTotal({"failure"}, static_cast<double>(m.reload_failures_total));
    topo_last.Set({}, static_cast<double>(m.last_reload_unix_ms) / 1000.0);
    topo_duration.Set({}, static_cast<double>(m.last_reload_duration_us) / 1e6);
    for (std::size_t i = 1; i < m.load_errors_total.size(); ++i) {
      if (m.load_errors_total[i] == 0) continue;
      topo_errors.SetTotal({topology::LoadErrorReasonName(static_cast<topology::LoadErrorReason>(i))},
                           static_cast<double>(m.load_errors_total[i]));
    }
  });

  engine::Registry rules = engine::DefaultRegistry();
  // Template provisioning: with API access, /mutate creates the generated ResourceClaimTemplates
  // while the policy says mutation.templates: create (checked per request, so a hot-reloaded
  // policy switches it); without access they must exist already (`draguard render`).
  std::unique_ptr<provision::KubeTemplateProvisioner> provisioner;
  {
    auto pol = policies.Current();
    const bool create = pol && pol->mutation.templates == policy::TemplateMode::kCreate;
    if (kube_client) {
      provisioner = std::make_unique<provision::KubeTemplateProvisioner>(*kube_client);
      provisioner->RegisterMetrics(registry);
      logger->Info(create ? "ResourceClaimTemplates are created through the API (policy mutation.templates: create)"
                          : "template provisioner ready; idle while policy mutation.templates is reference");
    } else if (create) {
      logger->Info("no Kubernetes API access: /mutate will not create ResourceClaimTemplates; "
                   "they must exist already (draguard render)");
    }
  }
  webhook::Reviewer reviewer(rules, admission::DecodeLimits{opt.max_body, 128}, provisioner.get());

  // Signals are handled by sigwait() below; block them before any thread starts. A peer closing
  // its socket must never kill the process.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

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
    err << "draguard serve: " << st.message() << "\n";
    return st.code() == StatusCode::kInvalidArgument ? kExitUsage : kExitRuntime;
  }
  policies.Watch(opt.reload_interval);
  std::string ca_hint = f.Has("--tls-cert") ? "<your CA>" : f.Get("--state-dir", ".draguard") + "/ca.crt";
  logger->Info("listening", {{"address", opt.host + ":" + std::to_string(srv.port())},
                             {"metrics", opt.metrics_host.empty()
                                             ? std::string("on the HTTPS port")
                                             : opt.metrics_host + ":" + std::to_string(srv.metrics_port())},
                             {"try", CurlExample(ca_hint, opt.host, srv.port())}});
  int sig = 0;
  sigwait(&sigs, &sig);
  logger->Info("signal received", {{"signal", std::string(sig == SIGTERM ? "SIGTERM" : "SIGINT")}});
  srv.BeginShutdown();
  // A second signal ends the shutdown delay early.
  std::thread second([&srv, &sigs] {
    int again = 0;
    if (sigwait(&sigs, &again) == 0) srv.SkipShutdownDelay();
  });
  second.detach();
  srv.Wait();
  (void)out;
  return kExitOk;
}

}  // namespace draguard::cli
