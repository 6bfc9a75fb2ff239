// tls.mode=self: the webhook keeps its own CA and serving certificate in one Secret, injects the
// CA bundle into its own webhook configurations and rotates both, through the Kubernetes API.
// Several replicas converge on one Secret by optimistic concurrency (create → 409 → re-read;
// update with resourceVersion → 409 → re-read); there is no leader.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "draguard/certs/plan.h"
#include "draguard/kube/client.h"
#include "draguard/logging/logger.h"
#include "draguard/status.h"

namespace draguard::certs {

/// What SelfTls manages.
struct SelfTlsOptions {
  std::string namespace_name;                    ///< namespace of the Secret and the Service
  std::string secret_name;                       ///< the Secret (type kubernetes.io/tls + ca.crt, ca.key)
  std::string service_name;                      ///< the Service: the certificate's DNS names
  std::vector<std::string> extra_names;          ///< more SANs: DNS names or IP address literals
  std::vector<std::string> validating_webhooks;  ///< ValidatingWebhookConfiguration names to inject
  std::vector<std::string> mutating_webhooks;    ///< MutatingWebhookConfiguration names to inject
  RotationPolicy rotation;                       ///< lifetimes and thresholds
  std::function<TimePoint()> clock;              ///< null = std::chrono::system_clock::now
};

/// What one SyncOnce did.
struct SyncResult {
  Material material;              ///< the Secret's contents now
  std::vector<Decision> steps;    ///< the plan steps this replica applied (empty = reused)
  bool wrote_secret = false;      ///< this replica created or updated the Secret
  int configurations_updated = 0; ///< webhook configurations whose caBundle this call wrote
  std::vector<std::string> missing_configurations;  ///< configured names that do not exist (404)
};

/// The Secret, the caBundles and the served pair, reconciled by SyncOnce (and by a background
/// resync after Start). Thread-safe.
class SelfTls {
 public:
  /// Receives the serving pair and the CA bundle whenever the served certificate changes.
  using ServingCallback = std::function<Status(const PemPair& serving, const std::string& ca_bundle)>;

  /// `client` must outlive this object.
  SelfTls(const kube::Client& client, SelfTlsOptions options, ServingCallback on_serving,
          std::shared_ptr<logging::Logger> logger);
  /// Stops the background resync.
  ~SelfTls();
  SelfTls(const SelfTls&) = delete;
  SelfTls& operator=(const SelfTls&) = delete;

  /// One reconcile: read the Secret, apply the plan and write it back (retrying on conflicts),
  /// hand a changed serving pair to the callback, then set every webhook's caBundle.
  Result<SyncResult> SyncOnce();

  /// Resyncs every `period` (plus up to 10 % jitter) on a background thread until Stop().
  void Start(std::chrono::milliseconds period);
  /// Stops the background resync and waits for it.
  void Stop();

 private:
  Result<SyncResult> SyncSecret();
  Status InjectBundle(const std::string& kind, const std::string& name, const std::string& bundle_b64,
                      SyncResult& result);
  TimePoint Now() const;

  const kube::Client& client_;
  SelfTlsOptions options_;
  std::vector<std::string> dns_;
  ServingCallback on_serving_;
  std::shared_ptr<logging::Logger> logger_;
  std::mutex sync_mu_;            // one SyncOnce at a time
  std::string served_fingerprint_;  // guarded by sync_mu_
  // The Secret's contents after the last successful sync (guarded by sync_mu_): a deleted Secret
  // is recreated from them, so that the CA the webhook configurations trust stays the same.
  std::optional<Material> in_service_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace draguard::certs
