// `serve`'s TLS preparation: the generated state-dir pair and tls.mode=self (serve_tls.h).
#include "serve_tls.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "draguard/server/server.h"
#include "draguard/server/tls.h"

namespace draguard::cli {

Status PrepareTls(ServeConfig& cfg, logging::Logger& logger) {
  if (cfg.tls_from_flags || cfg.tls_self) return Status::Ok();
  const std::string& ns = cfg.namespace_name;
  const std::string& service = cfg.service_name;
  std::vector<std::string> dns = {"localhost", service + "." + ns + ".svc", service + "." + ns + ".svc.cluster.local"};
  auto paths = server::EnsureStateCertificates(cfg.state_dir, dns, {"127.0.0.1", "::1"});
  if (!paths.ok()) return paths.status();
  cfg.server.tls_cert = paths->tls_cert;
  cfg.server.tls_key = paths->tls_key;
  logger.Info(paths->generated ? "generated CA and serving certificate" : "reusing CA and serving certificate",
              {{"stateDir", cfg.state_dir}, {"caCert", paths->ca_cert}, {"sans", dns}});
  return Status::Ok();
}

SelfTlsServing::SelfTlsServing(const ServeConfig& cfg, const kube::Client& client,
                               std::shared_ptr<logging::Logger> logger)
    : dir_(cfg.state_dir + "/self-tls"), logger_(std::move(logger)) {
  const SelfTlsConfig& self = *cfg.tls_self;
  certs::SelfTlsOptions o;
  // The Secret lives in the pod's own namespace (service account), else --namespace.
  o.namespace_name = client.config().namespace_name.empty() ? cfg.namespace_name : client.config().namespace_name;
  o.secret_name = self.secret;
  o.service_name = cfg.service_name;
  o.extra_names = self.extra_sans;
  o.validating_webhooks = self.validating;
  o.mutating_webhooks = self.mutating;
  o.rotation.ca_validity = std::chrono::hours(24) * self.ca_days;
  o.rotation.leaf_validity = std::chrono::hours(24) * self.cert_days;
  manager_ = std::make_unique<certs::SelfTls>(
      client, o, [this](const certs::PemPair& p, const std::string& ca) { return Install(p, ca); }, logger_);
}

Status SelfTlsServing::FirstSync(std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  std::chrono::milliseconds pause(500);
  for (;;) {
    auto r = manager_->SyncOnce();
    if (r.ok()) return Status::Ok();
    if (std::chrono::steady_clock::now() + pause >= until) {
      return Status(r.status().code(), "--tls-self-secret: " + r.status().message());
    }
    logger_->Warn("TLS Secret not ready yet; retrying", {{"error", r.status().message()}});
    std::this_thread::sleep_for(pause);  // a retry pause, not synchronisation
    pause = std::min(pause * 2, std::chrono::milliseconds(8000));
  }
}

void SelfTlsServing::Run(server::Server& srv, std::chrono::milliseconds period) {
  server_.store(&srv);
  manager_->Start(period);
}

void SelfTlsServing::Stop() {
  manager_->Stop();
  server_.store(nullptr);
}

Status SelfTlsServing::Install(const certs::PemPair& p, const std::string& ca) {
  DRAGUARD_RETURN_IF_ERROR(certs::WritePrivateFile(dir_, "tls.key", p.key_pem));
  DRAGUARD_RETURN_IF_ERROR(certs::WritePrivateFile(dir_, "tls.crt", p.cert_pem));
  DRAGUARD_RETURN_IF_ERROR(certs::WritePrivateFile(dir_, "ca.crt", ca));
  if (server::Server* srv = server_.load(); srv != nullptr) return srv->ReloadCertificates();
  return Status::Ok();
}

}  // namespace draguard::cli
