// ClaimCache: the server's watch cache of ResourceClaimTemplates and ResourceClaims, behind the
// read-only dra::ClaimCatalog the Pod rules read (DG015, DG016).
//
// This small module is the only place that knows both draguard_kube (the watch) and draguard_dra
// (the summaries); neither depends on the other. One kube::Watcher per kind lists and watches every
// namespace; each object is summarised as it arrives (dra::SummarizeClaimObject: request names,
// device classes, numaNode constraints) and only the summary is kept, never the object. A kind
// answers kUnknown until its first list, after `max_objects` objects (the bound: the kind stops
// answering rather than grow), and after the watcher stops. Lookups take a shared lock and never
// touch the network. Watch errors are retried by the watcher (backoff, relist on 410); until the
// relist the last known view keeps answering.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "draguard/dra/claim_catalog.h"
#include "draguard/kube/client.h"
#include "draguard/kube/watch.h"
#include "draguard/status.h"

namespace draguard::kubeclaims {

/// The API version both kinds are watched in.
inline constexpr std::string_view kGroupVersion = "resource.k8s.io/v1";

/// What a ClaimCache watches and how much it keeps.
struct ClaimCacheOptions {
  /// Objects kept per kind at most; past that the kind answers kUnknown ("over its bound").
  std::size_t max_objects = 200000;
  /// Timeouts, backoff and paging of both watchers (resource and group are set per kind).
  kube::WatchOptions watch;
  /// Called for watcher errors (from a watcher thread); optional.
  std::function<void(const Status&)> on_error;
};

/// The summaries of one kind, keyed by namespace and name. Thread-safe. Fed by a watcher (as a
/// kube::WatchHandler) or directly (tests).
class ClaimStore final : public kube::WatchHandler {
 public:
  /// `kind` names the kind in `why` texts ("ResourceClaimTemplates"), `object_kind` is the kind of
  /// one object ("ResourceClaimTemplate"); past `max_objects` the store answers kUnknown.
  ClaimStore(std::string kind, std::string object_kind, std::size_t max_objects,
             std::function<void(const Status&)> on_error = nullptr);

  /// The lookup of dra::ClaimCatalog.
  dra::ClaimLookup Find(std::string_view namespace_, std::string_view name) const;
  /// Objects held.
  std::size_t size() const;
  /// Approximate bytes held by the summaries.
  std::size_t bytes() const;
  /// True once a complete list arrived (and the bound was not passed).
  bool synced() const;
  /// Marks the store as no longer watched: every lookup answers kUnknown.
  void Close();

  /// Replaces the store with the summaries of `all` (or marks it over its bound).
  void OnSync(std::vector<kube::Object> all) override;
  /// Adds or replaces one summary (an object that is not a claim spec is removed).
  void OnUpsert(const kube::Object& object) override;
  /// Removes one summary.
  void OnDelete(const kube::Object& object) override;
  /// Passes a watch error to the `on_error` callback.
  void OnError(const Status& status) override;

 private:
  using Key = std::string;  // namespace/name
  // Summarises `object`'s spec (Object::fields); null when it is not a claim or template spec.
  std::shared_ptr<const dra::ClaimSummary> Summarise(const kube::Object& object) const;

  const std::string kind_;
  const std::string object_kind_;
  const std::size_t max_objects_;
  std::function<void(const Status&)> on_error_;
  mutable std::shared_mutex mu_;
  std::map<Key, std::shared_ptr<const dra::ClaimSummary>, std::less<>> objects_;  // guarded by mu_
  std::size_t bytes_ = 0;      // guarded by mu_
  bool synced_ = false;        // guarded by mu_
  bool over_bound_ = false;    // guarded by mu_
  bool closed_ = false;        // guarded by mu_
};

/// The cache of both kinds. Thread-safe.
class ClaimCache final : public dra::ClaimCatalog {
 public:
  /// `client` must outlive the cache.
  ClaimCache(const kube::Client& client, ClaimCacheOptions options = {});
  /// Stops both watchers.
  ~ClaimCache() override;
  ClaimCache(const ClaimCache&) = delete;
  ClaimCache& operator=(const ClaimCache&) = delete;

  /// Starts both watchers (once).
  void Start();
  /// Stops both watchers; lookups answer kUnknown afterwards.
  void Stop();
  /// True once both kinds are listed.
  bool synced() const { return templates_.synced() && claims_.synced(); }
  /// The store of ResourceClaimTemplates (for metrics and tests).
  const ClaimStore& templates() const { return templates_; }
  /// The store of ResourceClaims (for metrics and tests).
  const ClaimStore& claims() const { return claims_; }

  /// The ResourceClaimTemplate `name` in `namespace_`, from the cache.
  dra::ClaimLookup Template(std::string_view namespace_, std::string_view name) const override;
  /// The ResourceClaim `name` in `namespace_`, from the cache.
  dra::ClaimLookup Claim(std::string_view namespace_, std::string_view name) const override;

 private:
  ClaimStore templates_;
  ClaimStore claims_;
  std::unique_ptr<kube::Watcher> template_watcher_;
  std::unique_ptr<kube::Watcher> claim_watcher_;
};

}  // namespace draguard::kubeclaims
