// The background audit of `draguard serve`: one replica at a time (a coordination.k8s.io/v1
// Lease) lists, page by page, every audited kind in the cluster, judges each object with
// JudgeObject, and publishes metrics and one wgpolicyk8s.io/v1alpha2 PolicyReport per namespace.
// Before the audited kinds it lists the ResourceClaims and ResourceSlices, so each bound Pod is
// also reported with what it was really allocated (allocation.h). Nothing keeps the objects:
// memory is one page, the capped report results, and the allocated claims and their devices as
// compact records.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "draguard/audit/report.h"
#include "draguard/engine/registry.h"
#include "draguard/kube/client.h"
#include "draguard/logging/logger.h"
#include "draguard/metrics/metrics.h"
#include "draguard/policy/policy.h"
#include "draguard/webhook/reviewer.h"

namespace draguard::topology {
class Snapshot;
}  // namespace draguard::topology

namespace draguard::audit {

/// Wall clock of the Lease and the schedule; injectable for tests.
using WallClock = std::function<std::chrono::system_clock::time_point()>;

/// Which Lease, and who this replica is.
struct LeaseOptions {
  std::string namespace_name;               ///< namespace of the Lease (the release namespace)
  std::string name = "draguard-audit";      ///< Lease name
  std::string identity;                     ///< holderIdentity of this replica (the pod name)
  std::chrono::seconds duration{60};        ///< leaseDurationSeconds; renewed every third of it
};

/// Leader election over one Lease with optimistic concurrency (resourceVersion preconditions):
/// acquire a missing Lease, renew our own, take over one that expired; a 409 means another
/// replica won. Not thread-safe (one audit thread uses it).
class LeaseElector {
 public:
  /// `client` must outlive the elector; `now` defaults to the system clock.
  LeaseElector(const kube::Client& client, LeaseOptions options, WallClock now = nullptr);
  /// One attempt; true while this replica holds the Lease. Never throws; an API error is false.
  bool TryAcquireOrRenew();
  /// Gives the Lease up when this replica holds it, as client-go's leader election does with
  /// ReleaseOnCancel: holderIdentity emptied, leaseDurationSeconds 1, acquireTime and renewTime
  /// now, leaseTransitions kept, so another replica takes it at its next attempt instead of after
  /// the Lease expires. A 409 reads the Lease again (three attempts). True when released, missing
  /// or held by another; false on an API error (then the Lease expires as usual).
  bool Release();
  /// Why the last attempt did not hold the Lease ("" when it did).
  const std::string& last_error() const { return last_error_; }
  /// The options in use.
  const LeaseOptions& options() const { return options_; }

 private:
  /// The Lease a GET answered, into `lease`; false (last_error_ says why) for an error answer or a
  /// body that is not a Lease.
  bool Decode(const kube::ApiResult& got, admission::Json* lease);

  const kube::Client& client_;
  LeaseOptions options_;
  WallClock now_;
  std::string last_error_;
};

/// How the background audit runs.
struct BackgroundOptions {
  std::chrono::seconds interval{600};  ///< time between the starts of two runs
  std::size_t page_size = 500;         ///< `limit` of each list call
  std::size_t max_results = 1000;      ///< results per PolicyReport (the summary counts all)
  std::size_t max_namespaces = 100;    ///< namespaces in draguard_audit_violations; the rest is "other"
  bool policy_reports = true;          ///< write PolicyReports when the CRD is installed
  std::string report_name = "draguard";  ///< name of the PolicyReport in each namespace
  int max_restarts = 3;                ///< list restarts of one kind after 410 Gone
};

/// What one run did.
struct RunResult {
  bool ran = false;        ///< false: this replica does not hold the Lease
  bool aborted = false;    ///< the Lease was lost during the run: nothing was published
  std::uint64_t pages = 0;     ///< list calls answered
  std::uint64_t restarts = 0;  ///< listings restarted after 410 Gone
  std::map<std::string, std::string> skipped;  ///< kind → forbidden | not-found | error
  Summary summary;             ///< what was judged
  bool reports_available = false;  ///< the PolicyReport API answered
  int created = 0, updated = 0, unchanged = 0, deleted = 0, failed = 0;  ///< PolicyReport writes
  double seconds = 0;          ///< duration of the run
};

/// The current policy and topology, taken at the start of every run.
struct AuditSnapshots {
  std::shared_ptr<const policy::Policy> policy;
  std::shared_ptr<const topology::Snapshot> topology;  ///< may be null
};

/// The background audit loop. Start() runs Tick() on its own thread every third of the Lease
/// duration until RequestStop() or Stop(); tests call Tick() or Run() directly. Stopping ends a
/// run between two pages (nothing is published) and releases the Lease when this replica holds
/// it, so a rolling update leaves no time without a leader.
class BackgroundAudit {
 public:
  /// Every reference must outlive the audit.
  BackgroundAudit(const kube::Client& client, const engine::Registry& registry, LeaseElector& elector,
                  std::function<AuditSnapshots()> snapshots, metrics::AuditMetrics& metrics,
                  std::shared_ptr<logging::Logger> logger, BackgroundOptions options, WallClock now = nullptr);
  /// Stops the thread.
  ~BackgroundAudit();
  BackgroundAudit(const BackgroundAudit&) = delete;
  BackgroundAudit& operator=(const BackgroundAudit&) = delete;

  /// Holds (or tries to take) the Lease and, as the holder, runs when due: at once after taking
  /// the Lease, then every `interval`.
  RunResult Tick();
  /// One full run now (the caller has checked the Lease); renews the Lease between pages and
  /// aborts without publishing when it is lost.
  RunResult Run();
  /// Starts the thread.
  void Start();
  /// Asks the thread to stop without waiting for it (serve calls it on SIGTERM): a run under way
  /// ends after its current page, and the thread releases the Lease on its way out.
  void RequestStop();
  /// Stops and joins the thread, and releases the Lease if it is still held (idempotent).
  void Stop();

 private:
  struct KindState;
  struct Listing;
  enum class ListOutcome : uint8_t { kDone, kGone, kSkipped, kLost, kStopped };
  /// Lists one kind page by page (restarting after 410 Gone); a kind that cannot be listed is
  /// skipped (Skip), kLost means the Lease was lost and kStopped that the audit is stopping.
  ListOutcome List(const Listing& listing, RunResult& result);
  /// Records, counts and logs a kind not listed.
  void Skip(RunResult& result, const std::string& kind, const std::string& reason, const std::string& detail);
  /// Discovery documents of one run by path: HTTP status and body (null unless a JSON object).
  using Discovery = std::map<std::string, std::pair<int, admission::Json>>;
  bool StillLeader();
  /// RequestStop() or Stop() was called.
  bool Stopping();
  /// Releases the Lease when this replica holds it (see LeaseElector::Release), and logs it.
  void ReleaseIfHeld();
  /// The version of a custom resource's group that serves it: the preferred version when it lists
  /// the resource, else the first other version of the group that does; "" with `reason`
  /// (not-found, forbidden, error) and `detail` when none does.
  std::string ServingVersion(const AuditedKind& kind, Discovery& discovery, std::string* reason, std::string* detail);
  void PublishMetrics(const RunResult& result, const std::map<std::vector<std::string>, double>& violations);
  void PublishReports(const ReportBuilder& reports, RunResult& result);

  const kube::Client& client_;
  const engine::Registry& registry_;
  webhook::Reviewer reviewer_;  // without a provisioner: judging never writes
  LeaseElector& elector_;
  std::function<AuditSnapshots()> snapshots_;
  metrics::AuditMetrics& metrics_;
  std::shared_ptr<logging::Logger> logger_;
  BackgroundOptions options_;
  WallClock now_;
  bool leader_ = false;
  std::chrono::system_clock::time_point last_run_{};
  std::chrono::system_clock::time_point last_renew_{};

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace draguard::audit
