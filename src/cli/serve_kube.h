// Internal to the CLI: `serve`'s Kubernetes API access and the template provisioner that uses
// it (serve_kube.cc).
#pragma once

#include <memory>

#include "draguard/kube/client.h"
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

}  // namespace draguard::cli
