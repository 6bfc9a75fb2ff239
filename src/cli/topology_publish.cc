// `draguard topology export --publish`: the per-node exporter loop (the chart's DaemonSet).
// Re-exports on start, every --interval and on SIGHUP (with -f FILE: re-reads that export file
// instead); publishes through kubetopo::Publisher (the shape object, then the Node's label and
// annotation in one write, each only when it changed); backs off with
// jitter after export/file or API errors, leaving the last published state in place; serves
// /readyz (a publish succeeded and the last success is recent) and /metrics on --probe-listen.
#include <httplib.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <ctime>
#include <random>
#include <thread>

#include "commands.h"
#include "flags.h"
#include "draguard/kube/client.h"
#include "draguard/kubetopo/publisher.h"
#include "draguard/metrics/metrics.h"
#include "draguard/server/server.h"
#include "topology_export.h"

namespace draguard::cli {
namespace {

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

std::string ReleaseNamespace(const Flags& f) {
  if (f.Has("--namespace")) return f.Get("--namespace");
  return EnvOr("POD_NAMESPACE", kube::ServiceAccountNamespace());
}

double Now() { return static_cast<double>(std::time(nullptr)); }

}  // namespace

int TopologyPublish(const Flags& f, const topology::ExportOptions& options, std::ostream& out, std::ostream& err) {
  const std::string node = f.Get("--node", EnvOr("NODE_NAME", ""));
  const std::string file = f.Get("--file", f.Get("-f"));  // empty: export this machine
  const std::string ns = ReleaseNamespace(f);
  if (node.empty()) {
    err << "topology export: --publish needs --node NAME (or $NODE_NAME)\n";
    return kExitUsage;
  }
  if (ns.empty()) {
    err << "topology export: --publish needs --namespace NS (or the service account namespace)\n";
    return kExitUsage;
  }
  const auto interval = server::ParseGoDuration(f.Get("--interval", "10m"));
  if (interval.count() <= 0) {
    err << "topology export: --interval: not a positive duration\n";
    return kExitUsage;
  }
  std::string probe_host;
  int probe_port = 0;
  const std::string probe = f.Get("--probe-listen", f.Has("--once") ? "" : "0.0.0.0:8081");
  if (!probe.empty()) {
    if (Status s = server::ParseHostPort(probe, &probe_host, &probe_port); !s.ok()) {
      err << "topology export: --probe-listen: " << s.message() << "\n";
      return kExitUsage;
    }
  }
  Result<kube::ClientConfig> config = kube::InClusterConfig();
  if (!config.ok()) {
    err << "topology export: no Kubernetes API access: " << config.status().message() << "\n";
    return kExitRuntime;
  }
  kube::Client client(*config);
  kubetopo::PublisherOptions po;
  po.node = node;
  po.namespace_name = ns;
  kubetopo::Publisher publisher(client, po);

  // SIGHUP re-exports now, SIGTERM/SIGINT stop; blocked before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGHUP);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  metrics::Registry registry;
  metrics::ExporterMetrics m(registry);
  std::atomic<double> last_success{0};
  const double stale_after = 3.0 * static_cast<double>(interval.count()) / 1000.0;
  httplib::Server probes;
  std::thread probe_thread;
  if (!probe.empty()) {
    probes.Get("/readyz", [&](const httplib::Request&, httplib::Response& res) {
      const double t = last_success.load();
      const bool ready = t > 0 && Now() - t <= stale_after;
      res.status = ready ? 200 : 503;
      res.set_content(ready ? "ok\n" : "no recent successful publish\n", "text/plain");
    });
    probes.Get("/healthz", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok\n", "text/plain"); });
    probes.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
      res.set_content(registry.Render(), "text/plain; version=0.0.4");
    });
    if (!probes.bind_to_port(probe_host, probe_port)) {
      err << "topology export: cannot listen on " << probe << "\n";
      return kExitRuntime;
    }
    probe_thread = std::thread([&] { probes.listen_after_bind(); });
  }

  std::mt19937_64 rng(std::random_device{}());
  uint32_t failures = 0;
  int rc = kExitOk;
  for (;;) {
    Result<ExportWithShape> exp = file.empty() ? ProduceExport(options, err) : LoadExportFile(file);
    Status status = exp.ok() ? Status::Ok() : exp.status();
    if (exp.ok()) {
      if (file.empty()) m.nvml_gpus.Set({}, static_cast<double>(exp->local.nvml_gpus));
      m.export_bytes.Set({}, static_cast<double>(exp->local.xml.size()));
      Result<kubetopo::PublishResult> pub = publisher.Publish(exp->parsed);
      if (pub.ok()) {
        if (pub->created) m.writes.Inc({"shape"});
        if (pub->node_patched) m.writes.Inc({"node"});
        if (pub->legacy_deleted) m.writes.Inc({"legacy-delete"});
        std::string wrote;
        if (pub->created) wrote += ", created " + pub->shape_object;
        if (pub->node_patched) wrote += ", published on the node";
        if (pub->legacy_deleted) wrote += ", deleted configmap " + kubetopo::ConfigMapNameFor(node);
        out << "topology export: node " << node << " shape " << exp->fingerprint << " (" << pub->shape_object
            << "): " << (wrote.empty() ? std::string("unchanged") : wrote.substr(2)) << std::endl;
        if (!pub->legacy_error.empty()) err << "topology export: warning: " << pub->legacy_error << std::endl;
      } else {
        status = pub.status();
      }
    }
    m.publishes.Inc({status.ok() ? "ok" : "error"});
    std::chrono::milliseconds wait = interval;
    if (status.ok()) {
      failures = 0;
      last_success = Now();
      m.last_success.Set({}, last_success.load());
    } else {
      ++failures;
      wait = kubetopo::PublishBackoff(failures, rng());
      err << "topology export: publish failed (attempt " << failures << ", retry in " << wait.count()
          << " ms): " << status.message() << std::endl;
    }
    if (f.Has("--once")) {
      rc = status.ok() ? kExitOk : kExitRuntime;
      break;
    }
    timespec ts{static_cast<time_t>(wait.count() / 1000), static_cast<long>((wait.count() % 1000) * 1000000)};
    siginfo_t info{};
    const int sig = sigtimedwait(&signals, &info, &ts);
    if (sig == SIGTERM || sig == SIGINT) break;
    // SIGHUP or the interval (EAGAIN): export again.
  }
  if (probe_thread.joinable()) {
    probes.stop();
    probe_thread.join();
  }
  return rc;
}

}  // namespace draguard::cli
