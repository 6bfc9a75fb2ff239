// Internal to the CLI: `serve`'s background audit (serve_audit.cc).
#pragma once

#include <memory>

#include "draguard/audit/background.h"
#include "draguard/engine/registry.h"
#include "draguard/kube/client.h"
#include "draguard/logging/logger.h"
#include "draguard/metrics/metrics.h"
#include "draguard/policy/store.h"
#include "draguard/status.h"
#include "draguard/topology/store.h"
#include "serve_config.h"

namespace draguard::cli {

/// The background audit (--audit-interval): one replica at a time, chosen by a Lease in the
/// release namespace; null when off. Needs API access (checked here: --kube=auto may have none).
/// `elector` and `audit_metrics` receive what the audit uses and must outlive it.
Result<std::unique_ptr<audit::BackgroundAudit>> StartBackgroundAudit(
    const ServeConfig& cfg, const kube::Client* client, const engine::Registry& rules, const policy::PolicyStore& policies,
    const topology::Store& topology_store, metrics::Registry& registry, std::unique_ptr<audit::LeaseElector>& elector,
    std::unique_ptr<metrics::AuditMetrics>& audit_metrics, const std::shared_ptr<logging::Logger>& logger);

}  // namespace draguard::cli
