// The configuration of `draguard serve`, read from its flags: defaults and validation, no I/O.
#pragma once

#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "draguard/logging/logger.h"
#include "draguard/server/server.h"
#include "draguard/status.h"

namespace draguard::cli {

/// `--kube`: auto uses the in-cluster configuration when KUBERNETES_SERVICE_HOST is set; on
/// requires it; off never calls the API.
enum class KubeMode { kAuto, kOn, kOff };

/// tls.mode=self (`--tls-self-secret`): the CA and serving certificate live in a Secret that the
/// replicas keep themselves, and the CA bundle is injected into the named webhook configurations.
struct SelfTlsConfig {
  std::string secret;                   ///< --tls-self-secret: the Secret's name
  std::vector<std::string> validating;  ///< --tls-self-validating (repeatable): configurations to inject
  std::vector<std::string> mutating;    ///< --tls-self-mutating (repeatable)
  int ca_days = 3650;                   ///< --tls-self-ca-days: a new CA's lifetime
  int cert_days = 365;                  ///< --tls-self-cert-days: a new serving certificate's lifetime
  std::chrono::milliseconds resync{60000};  ///< --tls-self-resync seconds (plus up to 10 % jitter)
  std::vector<std::string> extra_sans;  ///< --tls-self-extra-sans: DNS names / IPs besides the Service's
};

/// The background audit of `serve` (--audit-*); off while `interval` is zero.
struct AuditServeConfig {
  std::chrono::seconds interval{0};  ///< --audit-interval; 0 = no background audit
  std::size_t page_size = 500;       ///< --audit-page-size (list `limit`)
  std::size_t max_results = 1000;    ///< --audit-max-results (results per PolicyReport)
  bool policy_reports = true;        ///< --audit-policy-reports on|off
  std::string lease_name;            ///< --audit-lease; "" = "<service-name>-audit"
  std::chrono::seconds lease_duration{60};  ///< --audit-lease-duration (leaseDurationSeconds)
};

/// Everything `draguard serve` takes from its flags (defaults = the documented defaults).
struct ServeConfig {
  /// --listen, --metrics-listen, the timeouts, --max-body, --workers, --max-queued,
  /// --reload-interval, --tls-cert/--tls-key, --client-ca, --client-cn.
  server::ServerOptions server;
  logging::Level log_level = logging::Level::kInfo;  ///< --log-level
  std::string namespace_name = "draguard";          ///< --namespace (SANs, always exempt)
  std::string service_name = "draguard";            ///< --service-name (SANs)
  std::string state_dir = ".draguard";              ///< --state-dir (generated CA and certificate)
  bool tls_from_flags = false;                      ///< --tls-cert/--tls-key given: nothing generated
  std::optional<std::string> policy_file;           ///< --config; unset = the bundled policy
  /// --topology-dir; "" = none, or the bundled examples for a local newcomer (TopologySourceFor);
  /// "bundled:examples" = the bundled examples by name.
  std::string topology_dir;
  std::string topology_configmaps;                  ///< --topology-configmaps namespace; "" = none
  KubeMode kube = KubeMode::kAuto;                  ///< --kube
  std::chrono::milliseconds kube_timeout{10000};    ///< --kube-timeout
  std::optional<SelfTlsConfig> tls_self;            ///< --tls-self-*; unset = not tls.mode=self
  AuditServeConfig audit;                           ///< --audit-*
};

/// The --topology-dir value that names the bundled example exports.
inline constexpr const char* kBundledExamples = "bundled:examples";

/// Where `draguard serve` reads the topology model from.
enum class TopologySource : uint8_t { kConfigMaps, kDirectory, kExamples, kNone };

/// The topology source of `cfg`. The bundled examples are a demo: they are used when named, or
/// when no source is configured and the process does not run in a cluster (`in_cluster`:
/// KUBERNETES_SERVICE_HOST is set), never otherwise.
TopologySource TopologySourceFor(const ServeConfig& cfg, bool in_cluster);

/// Every flag `serve` accepts (each takes a value).
const std::set<std::string>& ServeFlagNames();

/// Parses the words after `serve`. Pure: reads no file and no environment. A failure's message
/// names the flag and is meant to follow "draguard serve: ".
Result<ServeConfig> ParseServeConfig(const std::vector<std::string>& args);

}  // namespace draguard::cli
