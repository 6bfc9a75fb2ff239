// Internal to the CLI: `serve`'s Kubernetes API access and the template provisioner that uses
// it (serve_kube.cc).
#pragma once

#include <memory>

#include "draguard/kube/client.h"
#include "draguard/kubeclaims/claim_cache.h"
#include "draguard/logging/logger.h"
#include "draguard/metrics/metrics.h"
#include "draguard/policy/store.h"
#include "draguard/provision/kube_provisioner.h"
#include "draguard/status.h"
#include "serve_config.h"

namespace draguard::cli {

/// Kubernetes API access: --kube=auto uses the in-cluster configuration when
/// KUBERNETES_SERVICE_HOST is set and runs without API access otherwise; on requires it; off
/// never uses it. --topology-configmaps and --tls-self-secret require it too. Null = no access.
Result<std::unique_ptr<kube::Client>> ConnectKube(const ServeConfig& cfg, logging::Logger& logger);

/// Template provisioning: with API access, /mutate creates the generated ResourceClaimTemplates
/// while the policy says mutation.templates: create (checked per request, so a hot-reloaded
/// policy switches it); without access they must exist already (`draguard render`). Null without
/// access.
std::unique_ptr<provision::KubeTemplateProvisioner> MakeProvisioner(const kube::Client* client,
                                                                    const policy::PolicyStore& policies,
                                                                    metrics::Registry& registry,
                                                                    logging::Logger& logger);

/// The watch cache of ResourceClaimTemplates and ResourceClaims the Pod rules read (DG015, DG016),
/// started; with its metrics (draguard_claim_cache_objects{kind}, draguard_claim_cache_synced{kind})
/// and watch errors logged. Null without API access (the rules then judge without it).
std::unique_ptr<kubeclaims::ClaimCache> StartClaimCache(const ServeConfig& cfg, const kube::Client* client,
                                                        metrics::Registry& registry,
                                                        const std::shared_ptr<logging::Logger>& logger);

}  // namespace draguard::cli
