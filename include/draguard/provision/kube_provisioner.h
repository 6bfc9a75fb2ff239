// KubeTemplateProvisioner: mutation::TemplateProvisioner on top of kube::Client, for generated
// ResourceClaimTemplates and the ComputeDomains of multi-node jobs (mutation.computeDomains) alike.
//
// Ensure(ns, tmpl, deadline):
//   1. (ns, name) in the cache of templates known to be present → OK, no API call.
//   2. POST the template. 201 → cache, OK.
//   3. 409 AlreadyExists → GET it and compare `spec` (SpecMatches) and, when ours carries it, the
//      label app.kubernetes.io/managed-by. Same → cache, OK; different → FailedPrecondition.
//      (A 404 on that GET — deleted in between — leads to one more POST.)
//   4. Any other answer → the ApiError as a Status (ApiError::ToStatus()); a transport timeout →
//      Unavailable "creating ResourceClaimTemplate ns/name: timeout after Nms".
// Templates are content-addressed (the name is a hash of the content), so the same name with a
// different spec means someone else made an object with that name.
//
// Concurrency: Ensure is thread-safe. Concurrent calls for one key share a single API exchange
// (single flight): one caller POSTs, the others wait for its result, each up to its own deadline.
// The cache is bounded (oldest entries evicted first) and entries expire after a TTL so that a
// template deleted by someone is re-created eventually; Forget() drops one entry at once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "draguard/admission/review.h"
#include "draguard/kube/client.h"
#include "draguard/mutation/provisioner.h"
#include "draguard/status.h"

namespace draguard::metrics {
class Registry;
class HistogramFamily;
}  // namespace draguard::metrics

namespace draguard::provision {

/// Label every generated template carries (checked on an existing object when ours has it).
inline constexpr std::string_view kManagedByLabel = "app.kubernetes.io/managed-by";

/// Provisioner options.
struct ProvisionerOptions {
  std::size_t cache_capacity = 10000;            ///< entries; the oldest is evicted beyond this
  std::chrono::milliseconds cache_ttl{600000};   ///< an entry is trusted this long (10 min)
  kube::Clock clock;                             ///< null = steady_clock::now (TTL only)
};

/// Cumulative counters (for metrics and tests).
struct ProvisionerCounters {
  uint64_t created = 0;         ///< POST answered 201
  uint64_t already_exists = 0;  ///< POST answered 409 and the existing object matched
  uint64_t cache_hits = 0;      ///< answered from the cache without an API call
  uint64_t shared = 0;          ///< waited for a concurrent caller's exchange (single flight)
  uint64_t errors = 0;          ///< calls that returned an error
  uint64_t retries = 0;         ///< API calls repeated after a transient error (refused, 429, 5xx)
  /// errors by reason: "Timeout", "Forbidden", "Conflict" (different content), "InternalError", ...
  std::map<std::string, uint64_t> errors_by_reason;
};

/// Whether a failed template API call is worth another try within the review's deadline: no
/// answer at all (refused, reset, TLS: an apiserver restarting or a connection cut), 429 and 5xx;
/// 401 and 403 only `after_outage` (an earlier call of the same exchange got no answer): a
/// restarted apiserver refuses requests until its RBAC caches have synced, while a real RBAC gap
/// must fail at once. The deadline itself ("Timeout", "Canceled") and every other answer are final.
bool IsTransient(const kube::ApiError& error, bool after_outage);

/// True when `theirs` (a spec read from the API server) matches `ours` (the generated spec):
/// every field we set is present and equal in theirs (numbers compared by value, arrays element
/// by element), and every field only they have is a known server-side default:
/// `allocationMode: ExactCount`, `count: 1`, toleration `operator: Equal`, or an empty
/// object/array/null.
bool SpecMatches(const admission::Json& ours, const admission::Json& theirs);

/// The Kubernetes-backed provisioner. Thread-safe.
class KubeTemplateProvisioner : public mutation::TemplateProvisioner {
 public:
  /// `client` must outlive the provisioner.
  explicit KubeTemplateProvisioner(const kube::Client& client, ProvisionerOptions options = {});
  ~KubeTemplateProvisioner() override;

  Status Ensure(std::string_view namespace_name, const mutation::GeneratedTemplate& tmpl,
                std::chrono::milliseconds deadline) override;

  /// As Ensure, for a ComputeDomain (resource.nvidia.com/v1beta1): created, or already there
  /// with the same spec and draguard's label; cached under its own key.
  Status EnsureComputeDomain(std::string_view namespace_name, const mutation::GeneratedComputeDomain& cd,
                             std::chrono::milliseconds deadline) override;

  /// Drops (ns, name) from the cache, so the next Ensure asks the API server again.
  void Forget(std::string_view namespace_name, std::string_view name);
  /// Entries in the cache (expired ones included until they are looked up or evicted).
  std::size_t cache_size() const;
  /// A copy of the counters.
  ProvisionerCounters Counters() const;

  /// Registers draguard_template_provision_total{outcome="created|exists|cached|error"},
  /// draguard_template_provision_errors_total{reason} and the latency histogram
  /// draguard_template_provision_duration_seconds{outcome} (API exchanges only, not cache hits)
  /// in `registry`. Call at most once; the registry must outlive the provisioner's use.
  void RegisterMetrics(metrics::Registry& registry);

 private:
  struct Flight;
  /// What one Ensure makes: its kind (for messages), collection path, name and object.
  struct Target {
    std::string kind;
    std::string collection;
    std::string name;
    const admission::Json* object = nullptr;
    std::string where;  // "ns/name", for messages
  };
  Status EnsureObject(const Target& target, const std::string& key, std::chrono::milliseconds deadline);
  struct CacheEntry {
    std::chrono::steady_clock::time_point expires;
    std::list<std::string>::iterator order;
  };
  std::chrono::steady_clock::time_point Now() const;
  bool CacheLookup(const std::string& key);   // requires mu_
  void CacheInsert(const std::string& key);   // requires mu_
  Status Exchange(const Target& target, const std::string& key, std::chrono::milliseconds deadline,
                  std::string* outcome, std::string* error_reason);
  void CountError(const std::string& reason);  // requires mu_

  const kube::Client& client_;
  ProvisionerOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, CacheEntry> cache_;                 // guarded by mu_
  std::list<std::string> order_;                            // insertion order; guarded by mu_
  std::map<std::string, std::shared_ptr<Flight>> flights_;  // in-flight keys; guarded by mu_
  ProvisionerCounters counters_;                            // guarded by mu_
  metrics::HistogramFamily* latency_ = nullptr;             // set once before use
};

}  // namespace draguard::provision
