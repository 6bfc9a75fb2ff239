#include "serve_config.h"

#include <cstdint>
#include <cstdlib>
#include <tuple>

#include "draguard/certs/pki.h"
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

std::chrono::milliseconds Millis(double secs) {
  return std::chrono::milliseconds(static_cast<int64_t>(secs * 1000));
}

// --listen, --metrics-listen.
Status ParseAddresses(const Flags& f, server::ServerOptions* opt) {
  if (auto st = server::ParseHostPort(f.Get("--listen", "127.0.0.1:8443"), &opt->host, &opt->port); !st.ok()) {
    return Status::InvalidArgument("--listen: " + st.message());
  }
  if (!f.Has("--metrics-listen")) return Status::Ok();
  if (auto st = server::ParseHostPort(f.Get("--metrics-listen"), &opt->metrics_host, &opt->metrics_port);
      !st.ok()) {
    return Status::InvalidArgument("--metrics-listen: " + st.message());
  }
  return Status::Ok();
}

// The durations in seconds; --keep-alive-timeout is rounded down to whole seconds, at least 1.
Status ParseDurations(const Flags& f, server::ServerOptions* opt) {
  struct SecondsFlag {
    const char* name;
    std::chrono::milliseconds* target;
  };
  std::chrono::milliseconds keep_alive{opt->keep_alive_timeout};
  for (SecondsFlag sf : {SecondsFlag{"--shutdown-delay", &opt->shutdown_delay},
                         SecondsFlag{"--read-timeout", &opt->read_timeout},
                         SecondsFlag{"--request-timeout", &opt->request_deadline},
                         SecondsFlag{"--keep-alive-timeout", &keep_alive},
                         SecondsFlag{"--reload-interval", &opt->reload_interval}}) {
    if (!f.Has(sf.name)) continue;
    double secs = 0;
    if (!ParseSeconds(f.Get(sf.name), &secs)) {
      return Status::InvalidArgument(std::string(sf.name) + " must be a number of seconds");
    }
    *sf.target = Millis(secs);
  }
  opt->keep_alive_timeout = std::chrono::duration_cast<std::chrono::seconds>(keep_alive);
  if (opt->keep_alive_timeout.count() < 1) opt->keep_alive_timeout = std::chrono::seconds(1);
  opt->write_timeout = opt->read_timeout;
  return Status::Ok();
}

// --max-body, --workers, --io-threads, --max-queued, --body-budget, --max-connections, --http2.
Status ParseCounts(const Flags& f, server::ServerOptions* opt) {
  for (auto [name, target] : {std::pair<const char*, std::size_t*>{"--max-body", &opt->max_body},
                              {"--workers", &opt->workers},
                              {"--io-threads", &opt->io_threads},
                              {"--inline-review-max-body", &opt->inline_review_max_body},
                              {"--max-queued", &opt->max_queued},
                              {"--body-budget", &opt->body_budget},
                              {"--max-connections", &opt->max_connections}}) {
    if (f.Has(name) && !ParseCount(f.Get(name), target)) {
      return Status::InvalidArgument(std::string(name) + " must be a non-negative integer");
    }
  }
  if (opt->max_body < 1024) return Status::InvalidArgument("--max-body must be at least 1024");
  const std::string h2 = f.Get("--http2", "true");
  if (h2 == "true" || h2 == "on") {
    opt->http2 = true;
  } else if (h2 == "false" || h2 == "off") {
    opt->http2 = false;
  } else {
    return Status::InvalidArgument("--http2 must be true or false");
  }
  return Status::Ok();
}

// --client-ca and --client-cn (repeatable, comma-separated).
Status ParseClientCertificates(const Flags& f, server::ServerOptions* opt) {
  opt->client_ca = f.Get("--client-ca");
  if (auto it = f.values.find("--client-cn"); it != f.values.end()) {
    for (const auto& v : it->second) {
      std::size_t start = 0;
      while (start <= v.size()) {
        std::size_t comma = v.find(',', start);
        std::string cn = v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (!cn.empty()) opt->client_cns.push_back(cn);
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    }
  }
  if (!opt->client_cns.empty() && opt->client_ca.empty()) {
    return Status::InvalidArgument("--client-cn needs --client-ca");
  }
  return Status::Ok();
}

// --kube, --kube-timeout, and the topology source (--topology-configmaps, --topology-dir).
Status ParseKubeAndTopology(const Flags& f, ServeConfig* cfg) {
  const std::string kube_mode = f.Get("--kube", "auto");
  if (kube_mode == "auto") {
    cfg->kube = KubeMode::kAuto;
  } else if (kube_mode == "on") {
    cfg->kube = KubeMode::kOn;
  } else if (kube_mode == "off") {
    cfg->kube = KubeMode::kOff;
  } else {
    return Status::InvalidArgument("--kube must be auto, on or off");
  }
  if (f.Has("--kube-timeout")) {
    double secs = 0;
    if (!ParseSeconds(f.Get("--kube-timeout"), &secs) || secs <= 0) {
      return Status::InvalidArgument("--kube-timeout must be a positive number of seconds");
    }
    cfg->kube_timeout = Millis(secs);
  }
  cfg->topology_configmaps = f.Get("--topology-configmaps");
  cfg->topology_dir = f.Get("--topology-dir");
  if (f.Has("--topology-configmaps") && cfg->topology_configmaps.empty()) {
    return Status::InvalidArgument("--topology-configmaps needs a namespace");
  }
  if (!cfg->topology_configmaps.empty() && f.Has("--topology-dir")) {
    return Status::InvalidArgument("--topology-configmaps and --topology-dir exclude each other");
  }
  if (!cfg->topology_configmaps.empty() && cfg->kube == KubeMode::kOff) {
    return Status::InvalidArgument("--topology-configmaps needs Kubernetes API access (not --kube=off)");
  }
  return Status::Ok();
}

}  // namespace

TopologySource TopologySourceFor(const ServeConfig& cfg, bool in_cluster) {
  if (!cfg.topology_configmaps.empty()) return TopologySource::kConfigMaps;
  if (cfg.topology_dir == kBundledExamples) return TopologySource::kExamples;
  if (!cfg.topology_dir.empty()) return TopologySource::kDirectory;
  return in_cluster ? TopologySource::kNone : TopologySource::kExamples;
}

namespace {

// --tls-cert and --tls-key (together, or neither: then generated in --state-dir).
Status ParseTls(const Flags& f, ServeConfig* cfg) {
  if (f.Has("--tls-cert") != f.Has("--tls-key")) {
    return Status::InvalidArgument("--tls-cert and --tls-key go together");
  }
  cfg->tls_from_flags = f.Has("--tls-cert");
  cfg->server.tls_cert = f.Get("--tls-cert");
  cfg->server.tls_key = f.Get("--tls-key");
  return Status::Ok();
}

// The values of a repeatable flag whose values are comma-separated lists, in order, empty
// entries dropped.
std::vector<std::string> ListValues(const Flags& f, const char* flag) {
  std::vector<std::string> out;
  auto it = f.values.find(flag);
  if (it == f.values.end()) return out;
  for (const auto& v : it->second) {
    std::size_t start = 0;
    for (;;) {
      const std::size_t comma = v.find(',', start);
      std::string name = v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (!name.empty()) out.push_back(std::move(name));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return out;
}

// --tls-self-secret and its companions (tls.mode=self): needs API access, excludes --tls-cert.
Status ParseSelfTls(const Flags& f, ServeConfig* cfg) {
  const bool any = f.Has("--tls-self-validating") || f.Has("--tls-self-mutating") || f.Has("--tls-self-ca-days") ||
                   f.Has("--tls-self-cert-days") || f.Has("--tls-self-resync") || f.Has("--tls-self-extra-sans");
  if (!f.Has("--tls-self-secret")) {
    if (any) return Status::InvalidArgument("--tls-self-* flags need --tls-self-secret");
    return Status::Ok();
  }
  SelfTlsConfig self;
  self.secret = f.Get("--tls-self-secret");
  if (self.secret.empty()) return Status::InvalidArgument("--tls-self-secret needs a Secret name");
  if (cfg->tls_from_flags) return Status::InvalidArgument("--tls-self-secret and --tls-cert/--tls-key exclude each other");
  if (cfg->kube == KubeMode::kOff) return Status::InvalidArgument("--tls-self-secret needs Kubernetes API access (not --kube=off)");
  for (auto [flag, target] : {std::pair<const char*, std::vector<std::string>*>{"--tls-self-validating", &self.validating},
                              {"--tls-self-mutating", &self.mutating}}) {
    if (auto it = f.values.find(flag); it != f.values.end()) {
      for (const auto& v : it->second) {
        if (v.empty()) return Status::InvalidArgument(std::string(flag) + " needs a name");
        target->push_back(v);
      }
    }
  }
  for (auto [flag, target] : {std::pair<const char*, int*>{"--tls-self-ca-days", &self.ca_days},
                              {"--tls-self-cert-days", &self.cert_days}}) {
    std::size_t v = 0;
    if (f.Has(flag) && (!ParseCount(f.Get(flag), &v) || v < 1 || v > 36500)) {
      return Status::InvalidArgument(std::string(flag) + " must be a number of days (1-36500)");
    }
    if (f.Has(flag)) *target = static_cast<int>(v);
  }
  if (self.cert_days > self.ca_days) {
    return Status::InvalidArgument("--tls-self-cert-days must not exceed --tls-self-ca-days");
  }
  for (const auto& name : ListValues(f, "--tls-self-extra-sans")) {
    const bool dns =
        name.size() <= 253 && name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-.") == std::string::npos;
    if (!dns && certs::CanonicalIp(name).empty()) {
      return Status::InvalidArgument("--tls-self-extra-sans: " + name +
                                     " is neither a lower-case DNS name nor an IP address");
    }
    self.extra_sans.push_back(name);
  }
  if (f.Has("--tls-self-resync")) {
    double secs = 0;
    if (!ParseSeconds(f.Get("--tls-self-resync"), &secs) || secs < 1) {
      return Status::InvalidArgument("--tls-self-resync must be a number of seconds (at least 1)");
    }
    self.resync = Millis(secs);
  }
  cfg->tls_self = std::move(self);
  return Status::Ok();
}

// --audit-interval, --audit-page-size, --audit-max-results, --audit-policy-reports, --audit-lease,
// --audit-lease-duration.
Status ParseAudit(const Flags& f, ServeConfig* cfg) {
  AuditServeConfig& a = cfg->audit;
  if (f.Has("--audit-interval")) {
    double secs = 0;
    if (!ParseSeconds(f.Get("--audit-interval"), &secs) || (secs != 0 && secs < 10)) {
      return Status::InvalidArgument("--audit-interval must be 0 (off) or 10 to 86400 seconds");
    }
    a.interval = std::chrono::seconds(static_cast<int64_t>(secs));
  }
  for (auto [name, target, max] : {std::tuple<const char*, std::size_t*, std::size_t>{"--audit-page-size", &a.page_size, 5000},
                                   {"--audit-max-results", &a.max_results, 10000}}) {
    if (!f.Has(name)) continue;
    if (!ParseCount(f.Get(name), target) || *target == 0 || *target > max) {
      return Status::InvalidArgument(std::string(name) + " must be 1 to " + std::to_string(max));
    }
  }
  const std::string reports = f.Get("--audit-policy-reports", "on");
  if (reports != "on" && reports != "off") return Status::InvalidArgument("--audit-policy-reports must be on or off");
  a.policy_reports = reports == "on";
  a.lease_name = f.Get("--audit-lease");
  if (f.Has("--audit-lease-duration")) {
    double secs = 0;
    if (!ParseSeconds(f.Get("--audit-lease-duration"), &secs) || secs < 6 || secs > 3600) {
      return Status::InvalidArgument("--audit-lease-duration must be 6 to 3600 seconds");
    }
    a.lease_duration = std::chrono::seconds(static_cast<int64_t>(secs));
  }
  if (a.interval.count() > 0 && cfg->kube == KubeMode::kOff) {
    return Status::InvalidArgument("--audit-interval needs Kubernetes API access (not --kube=off)");
  }
  return Status::Ok();
}

// --tls-required-names (repeatable, comma-separated; "" = no check); by default the name the API
// server dials, <service>.<namespace>.svc, when --service-name is given (as the chart does).
Status ParseRequiredNames(const Flags& f, ServeConfig* cfg) {
  auto it = f.values.find("--tls-required-names");
  if (it == f.values.end()) {
    if (f.Has("--service-name")) {
      cfg->server.tls_required_names = {cfg->service_name + "." + cfg->namespace_name + ".svc"};
    }
    return Status::Ok();
  }
  auto& names = cfg->server.tls_required_names.emplace();
  for (const auto& name : ListValues(f, "--tls-required-names")) {
    if (name.size() > 253 || name.find_first_of(" \t/:") != std::string::npos) {
      return Status::InvalidArgument("--tls-required-names: " + name + " is not a DNS name");
    }
    names.push_back(name);
  }
  return Status::Ok();
}

}  // namespace

const std::set<std::string>& ServeFlagNames() {
  static const std::set<std::string> kNames = {
      "--listen", "--state-dir", "--service-name", "--namespace", "--tls-cert", "--tls-key", "--tls-required-names",
      "--client-ca", "--client-cn", "--config", "--topology-dir", "--metrics-listen", "--shutdown-delay",
      "--log-level", "--max-body", "--read-timeout", "--request-timeout", "--keep-alive-timeout", "--workers",
      "--io-threads", "--inline-review-max-body", "--body-budget", "--max-connections", "--max-queued", "--http2", "--reload-interval", "--kube", "--kube-timeout", "--topology-configmaps",
      "--tls-self-secret", "--tls-self-validating", "--tls-self-mutating", "--tls-self-ca-days",
      "--tls-self-cert-days", "--tls-self-resync", "--tls-self-extra-sans", "--audit-interval", "--audit-page-size", "--audit-max-results",
      "--audit-policy-reports", "--audit-lease", "--audit-lease-duration"};
  return kNames;
}

Result<ServeConfig> ParseServeConfig(const std::vector<std::string>& args) {
  Flags f = ParseFlags(args, ServeFlagNames(), {});
  if (!f.error.empty() || !f.positional.empty()) {
    return Status::InvalidArgument(
        (f.error.empty() ? "unexpected argument " + f.positional.front() : f.error) + " (see draguard help)");
  }
  ServeConfig cfg;
  auto level = logging::ParseLevel(f.Get("--log-level", "info"));
  if (!level.ok()) return Status::InvalidArgument("--log-level: " + level.status().message());
  cfg.log_level = *level;
  DRAGUARD_RETURN_IF_ERROR(ParseAddresses(f, &cfg.server));
  DRAGUARD_RETURN_IF_ERROR(ParseDurations(f, &cfg.server));
  DRAGUARD_RETURN_IF_ERROR(ParseCounts(f, &cfg.server));
  DRAGUARD_RETURN_IF_ERROR(ParseClientCertificates(f, &cfg.server));
  DRAGUARD_RETURN_IF_ERROR(ParseKubeAndTopology(f, &cfg));
  DRAGUARD_RETURN_IF_ERROR(ParseTls(f, &cfg));
  DRAGUARD_RETURN_IF_ERROR(ParseSelfTls(f, &cfg));
  DRAGUARD_RETURN_IF_ERROR(ParseAudit(f, &cfg));
  cfg.namespace_name = f.Get("--namespace", "draguard");
  cfg.service_name = f.Get("--service-name", "draguard");
  DRAGUARD_RETURN_IF_ERROR(ParseRequiredNames(f, &cfg));
  cfg.state_dir = f.Get("--state-dir", ".draguard");
  if (f.Has("--config")) cfg.policy_file = f.Get("--config");
  return cfg;
}

}  // namespace draguard::cli
