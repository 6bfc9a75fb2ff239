// `serve`'s background audit (serve_audit.h).
#include "serve_audit.h"

#include <unistd.h>

#include <cstdlib>

namespace draguard::cli {

Result<std::unique_ptr<audit::BackgroundAudit>> StartBackgroundAudit(
    const ServeConfig& cfg, const kube::Client* client, const engine::Registry& rules, const policy::PolicyStore& policies,
    const topology::Store& topology_store, metrics::Registry& registry, std::unique_ptr<audit::LeaseElector>& elector,
    std::unique_ptr<metrics::AuditMetrics>& audit_metrics, const std::shared_ptr<logging::Logger>& logger) {
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
  lease.duration = cfg.audit.lease_duration;
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

}  // namespace draguard::cli
