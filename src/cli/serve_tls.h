// Internal to the CLI: how `serve` obtains its serving certificate (serve_tls.cc).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "draguard/certs/self_tls.h"
#include "draguard/kube/client.h"
#include "draguard/logging/logger.h"
#include "draguard/server/server.h"
#include "draguard/status.h"
#include "serve_config.h"

namespace draguard::cli {

/// Without --tls-cert/--tls-key (and not tls.mode=self): a CA and a serving certificate in
/// --state-dir (generated, or reused while valid), installed in cfg.server.
Status PrepareTls(ServeConfig& cfg, logging::Logger& logger);

/// tls.mode=self: the serving pair comes from the Secret (certs::SelfTls), written into
/// <state-dir>/self-tls/ and hot-reloaded by the server.
class SelfTlsServing {
 public:
  /// Reads the Secret, Service and webhook names of cfg.tls_self (which must be set).
  SelfTlsServing(const ServeConfig& cfg, const kube::Client& client, std::shared_ptr<logging::Logger> logger);

  /// The files the server serves.
  std::string cert_path() const { return dir_ + "/tls.crt"; }
  std::string key_path() const { return dir_ + "/tls.key"; }
  std::string ca_path() const { return dir_ + "/ca.crt"; }

  /// The first sync, retried with a growing pause until `limit` (serve uses max(--kube-timeout × 6,
  /// 60 s) and exits on failure: the pod restarts and tries again).
  Status FirstSync(std::chrono::milliseconds limit);
  /// After the server started: later certificates are reloaded at once; resync in the background.
  void Run(server::Server& srv, std::chrono::milliseconds period);
  /// Stops the background resync.
  void Stop();

 private:
  Status Install(const certs::PemPair& p, const std::string& ca);

  std::string dir_;
  std::shared_ptr<logging::Logger> logger_;
  std::atomic<server::Server*> server_{nullptr};
  std::unique_ptr<certs::SelfTls> manager_;
};

}  // namespace draguard::cli
