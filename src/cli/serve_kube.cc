// `serve`'s Kubernetes API access and the template provisioner that uses it (serve_kube.h).
#include "serve_kube.h"

#include <algorithm>
#include <cstdlib>

namespace draguard::cli {

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

std::unique_ptr<kubeclaims::ClaimCache> StartClaimCache(const ServeConfig& cfg, const kube::Client* client,
                                                        metrics::Registry& registry,
                                                        const std::shared_ptr<logging::Logger>& logger) {
  if (client == nullptr) return nullptr;
  kubeclaims::ClaimCacheOptions options;
  options.watch.list_timeout = std::max(cfg.kube_timeout * 6, std::chrono::milliseconds(60000));
  options.on_error = [logger](const Status& st) {
    logger->Warn("claim cache: watch failed; the Pod rules judge without it until the next list",
                 {{"error", st.ToString()}});
  };
  auto cache = std::make_unique<kubeclaims::ClaimCache>(*client, options);
  cache->Start();
  auto& objects = registry.Gauge("draguard_claim_cache_objects",
                                 "ResourceClaimTemplates and ResourceClaims held by the claim cache.", {"kind"});
  auto& synced = registry.Gauge("draguard_claim_cache_synced",
                                "1 when the claim cache has listed the kind and answers lookups.", {"kind"});
  const kubeclaims::ClaimCache* c = cache.get();
  registry.AddCollector([c, &objects, &synced] {
    const auto report = [&](const char* kind, const kubeclaims::ClaimStore& store) {
      objects.Set({kind}, static_cast<double>(store.size()));
      synced.Set({kind}, store.synced() ? 1 : 0);
    };
    report("ResourceClaimTemplate", c->templates());
    report("ResourceClaim", c->claims());
  });
  logger->Info("claim cache started: ResourceClaimTemplates and ResourceClaims of every namespace are watched");
  return cache;
}

}  // namespace draguard::cli
