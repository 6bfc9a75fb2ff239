#include "draguard/audit/background.h"

#include <algorithm>
#include <ctime>
#include <set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "draguard/audit/allocation.h"
#include "draguard/audit/nvlink_spread.h"
#include "draguard/engine/engine.h"

namespace draguard::audit {
namespace {

using admission::Json;
using std::chrono::system_clock;

constexpr const char* kReportsBase = "/apis/wgpolicyk8s.io/v1alpha2";
constexpr const char* kManagedBy = "app.kubernetes.io/managed-by";
constexpr const char* kDroppedAnnotation = "draguard.io/results-dropped";

// metav1.MicroTime: RFC 3339 with microseconds, UTC.
std::string MicroTime(system_clock::time_point t) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(us / 1000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  char frac[16];
  std::snprintf(frac, sizeof(frac), ".%06lldZ", static_cast<long long>(us % 1000000));
  return std::string(buf) + frac;
}

std::string Describe(const kube::ApiResult& r) {
  if (r.status == 0) return r.error.reason + ": " + r.error.message;
  return std::to_string(r.status) + " " + r.error.reason + (r.error.message.empty() ? "" : ": " + r.error.message);
}

// The part of a PolicyReport this audit owns; equal digests mean nothing to write.
std::size_t Digest(const Json& report) {
  Json content = {{"summary", report.value("summary", Json())}, {"results", report.value("results", Json())}};
  if (auto md = report.find("metadata"); md != report.end() && md->is_object()) {
    if (auto l = md->find("labels"); l != md->end() && l->is_object()) content["label"] = l->value(kManagedBy, "");
    if (auto a = md->find("annotations"); a != md->end() && a->is_object()) {
      content["dropped"] = a->value(kDroppedAnnotation, "");
    }
  }
  if (!content.contains("dropped")) content["dropped"] = "";
  return std::hash<std::string>{}(content.dump());
}

std::string KindName(const AuditedKind& k) { return k.group.empty() ? k.kind : k.kind + "." + k.group; }

constexpr int kReleaseAttempts = 3;  // a 409 while releasing: read the Lease again

}  // namespace

LeaseElector::LeaseElector(const kube::Client& client, LeaseOptions options, WallClock now)
    : client_(client), options_(std::move(options)), now_(now ? std::move(now) : WallClock(system_clock::now)) {}

bool LeaseElector::TryAcquireOrRenew() {
  const std::string collection =
      "/apis/coordination.k8s.io/v1/namespaces/" + kube::PathEscape(options_.namespace_name) + "/leases";
  const std::string path = collection + "/" + kube::PathEscape(options_.name);
  const auto now = now_();
  const std::string stamp = MicroTime(now);
  kube::ApiResult got = client_.Call({"GET", path});
  if (got.status == 404) {
    Json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                  {"kind", "Lease"},
                  {"metadata", {{"name", options_.name}, {"namespace", options_.namespace_name}}},
                  {"spec",
                   {{"holderIdentity", options_.identity},
                    {"leaseDurationSeconds", options_.duration.count()},
                    {"acquireTime", stamp},
                    {"renewTime", stamp},
                    {"leaseTransitions", 0}}}};
    kube::ApiResult created = client_.Call({"POST", collection, lease.dump()});
    last_error_ = created.ok() ? "" : "create Lease: " + Describe(created);
    return created.ok();
  }
  Json lease;
  if (!Decode(got, &lease)) return false;
  Json& spec = lease["spec"];
  if (!spec.is_object()) spec = Json::object();
  const std::string holder = spec.value("holderIdentity", "");
  if (holder != options_.identity) {
    const auto renewed = engine::ParseRfc3339(spec.value("renewTime", ""));
    const auto duration = std::chrono::seconds(spec.value("leaseDurationSeconds", options_.duration.count()));
    if (!holder.empty() && renewed && *renewed + duration > now) {
      last_error_ = "held by " + holder;
      return false;
    }
    // Free or expired: take it over.
    spec["holderIdentity"] = options_.identity;
    spec["acquireTime"] = stamp;
    spec["leaseTransitions"] = spec.value("leaseTransitions", 0) + 1;
  }
  spec["renewTime"] = stamp;
  spec["leaseDurationSeconds"] = options_.duration.count();
  // PUT carries metadata.resourceVersion: a concurrent writer makes it fail with 409.
  kube::ApiResult put = client_.Call({"PUT", path, lease.dump()});
  last_error_ = put.ok() ? "" : (put.status == 409 ? "Lease changed concurrently" : "update Lease: " + Describe(put));
  return put.ok();
}

bool LeaseElector::Decode(const kube::ApiResult& got, Json* lease) {
  if (!got.ok()) {
    last_error_ = "get Lease: " + Describe(got);
    return false;
  }
  *lease = Json::parse(got.body, nullptr, false);
  if (!lease->is_object() || !lease->contains("metadata")) {
    last_error_ = "get Lease: not a Lease";
    return false;
  }
  return true;
}

bool LeaseElector::Release() {
  const std::string path = "/apis/coordination.k8s.io/v1/namespaces/" + kube::PathEscape(options_.namespace_name) +
                           "/leases/" + kube::PathEscape(options_.name);
  for (int attempt = 0; attempt < kReleaseAttempts; ++attempt) {
    kube::ApiResult got = client_.Call({"GET", path});
    if (got.status == 404) return true;  // nothing to give up
    Json lease;
    if (!Decode(got, &lease)) return false;
    Json& spec = lease["spec"];
    if (!spec.is_object() || spec.value("holderIdentity", "") != options_.identity) return true;  // not ours
    // client-go's release (ReleaseOnCancel): no holder, a duration of one second, acquireTime and
    // renewTime now, leaseTransitions kept; the next attempt of another replica takes it.
    const std::string stamp = MicroTime(now_());
    spec["holderIdentity"] = "";
    spec["leaseDurationSeconds"] = 1;
    spec["acquireTime"] = stamp;
    spec["renewTime"] = stamp;
    kube::ApiResult put = client_.Call({"PUT", path, lease.dump()});
    if (put.ok()) {
      last_error_ = "released";
      return true;
    }
    last_error_ = put.status == 409 ? "Lease changed concurrently" : "update Lease: " + Describe(put);
    if (put.status != 409) return false;
  }
  return false;
}

struct BackgroundAudit::KindState {
  explicit KindState(std::size_t max_results) : reports(max_results) {}
  ReportBuilder reports;
  Summary summary;
  std::map<std::vector<std::string>, double> violations;  // {rule, action, namespace}
};

// One listing of a kind, page by page: `attempt` is called before the first page and again when
// the list is restarted after 410 Gone; `page` with the items of each page.
struct BackgroundAudit::Listing {
  std::string name;  // "Pod", "ResourceSlice.resource.k8s.io"
  std::string base;  // "/api/v1/pods"
  std::function<void()> attempt;
  std::function<void(Json& items)> page;
};

BackgroundAudit::BackgroundAudit(const kube::Client& client, const engine::Registry& registry, LeaseElector& elector,
                                 std::function<AuditSnapshots()> snapshots, metrics::AuditMetrics& metrics,
                                 std::shared_ptr<logging::Logger> logger, BackgroundOptions options, WallClock now)
    : client_(client),
      registry_(registry),
      reviewer_(registry),
      elector_(elector),
      snapshots_(std::move(snapshots)),
      metrics_(metrics),
      logger_(logger ? std::move(logger) : logging::Logger::Null()),
      options_(std::move(options)),
      now_(now ? std::move(now) : WallClock(system_clock::now)) {}

BackgroundAudit::~BackgroundAudit() { Stop(); }

RunResult BackgroundAudit::Tick() {
  const auto now = now_();
  const bool held = elector_.TryAcquireOrRenew();
  last_renew_ = now;
  metrics_.leader.Set({}, held ? 1 : 0);
  if (held != leader_) {
    if (held) {
      logger_->Info("audit Lease acquired", {{"lease", elector_.options().name}});
    } else {
      logger_->Info("audit Lease not held", {{"lease", elector_.options().name}, {"reason", elector_.last_error()}});
    }
  }
  const bool was = leader_;
  leader_ = held;
  if (!held) return {};
  if (was && now - last_run_ < options_.interval) return {};
  last_run_ = now;
  return Run();
}

bool BackgroundAudit::StillLeader() {
  const auto now = now_();
  if (now - last_renew_ < elector_.options().duration / 3) return leader_;
  last_renew_ = now;
  leader_ = elector_.TryAcquireOrRenew();
  metrics_.leader.Set({}, leader_ ? 1 : 0);
  return leader_;
}

std::string BackgroundAudit::ServingVersion(const AuditedKind& kind, Discovery& discovery, std::string* reason,
                                           std::string* detail) {
  auto fetch = [&](const std::string& path) -> const std::pair<int, Json>& {
    auto it = discovery.find(path);
    if (it != discovery.end()) return it->second;
    kube::ApiResult r = client_.Call({"GET", path});
    Json doc = r.ok() ? Json::parse(r.body, nullptr, false) : Json();
    if (r.ok() && !doc.is_object()) doc = Json();
    return discovery[path] = {r.ok() ? 200 : r.status, std::move(doc)};
  };
  const std::string group_path = "/apis/" + kube::PathEscape(kind.group);
  const auto& [status, group] = fetch(group_path);
  if (!group.is_object() || !group.contains("preferredVersion")) {
    *reason = status == 404 ? "not-found" : status == 403 ? "forbidden" : "error";
    *detail = status == 200 ? "discovery without a preferred version" : "GET " + group_path + ": HTTP " + std::to_string(status);
    return "";
  }
  // The preferred version first, then the others in discovery's order: the CRDs of one group
  // have their own versions, so the preferred one need not serve every kind.
  std::vector<std::string> versions;
  if (group["preferredVersion"].is_object()) versions.push_back(group["preferredVersion"].value("version", ""));
  if (group.contains("versions") && group["versions"].is_array()) {
    for (const auto& v : group["versions"]) {
      std::string name = v.is_object() ? v.value("version", "") : "";
      if (std::find(versions.begin(), versions.end(), name) == versions.end()) versions.push_back(name);
    }
  }
  bool failed = false;
  for (const std::string& version : versions) {
    if (version.empty()) continue;
    const auto& [list_status, list] = fetch(group_path + "/" + kube::PathEscape(version));
    if (!list.is_object() || !list.contains("resources") || !list["resources"].is_array()) {
      failed = failed || list_status != 404;
      continue;
    }
    for (const auto& r : list["resources"]) {
      if (r.is_object() && r.value("name", "") == kind.resource) return version;
    }
  }
  *reason = failed ? "error" : "not-found";
  if (!failed) *detail = "no version of " + kind.group + " serves " + kind.resource;
  return "";
}

void BackgroundAudit::Skip(RunResult& result, const std::string& kind, const std::string& reason,
                           const std::string& detail) {
  result.skipped[kind] = reason;
  metrics_.skipped.Inc({kind, reason});
  if (reason == "not-found") {
    logger_->Debug("audit: kind not served, skipped", {{"kind", kind}});
  } else {
    logger_->Warn("audit: kind not listed, skipped", {{"kind", kind}, {"reason", reason}, {"error", detail}});
  }
}

BackgroundAudit::ListOutcome BackgroundAudit::List(const Listing& listing, RunResult& result) {
  for (int attempt = 0; attempt <= options_.max_restarts; ++attempt) {
    if (attempt > 0) ++result.restarts;
    listing.attempt();
    std::string token;
    bool gone = false;
    do {
      std::string path = listing.base + "?limit=" + std::to_string(options_.page_size);
      if (!token.empty()) path += "&continue=" + kube::PathEscape(token);
      kube::ApiResult page = client_.Call({"GET", path});
      if (page.status == 410) {
        logger_->Info("audit: list continuation expired; listing again", {{"kind", listing.name}});
        gone = true;
        break;
      }
      if (!page.ok()) {
        Skip(result, listing.name, page.status == 403 ? "forbidden" : page.status == 404 ? "not-found" : "error",
             Describe(page));
        return ListOutcome::kSkipped;
      }
      ++result.pages;
      Json list = Json::parse(page.body, nullptr, false);
      if (!list.is_object() || !list.contains("items") || !list["items"].is_array()) {
        Skip(result, listing.name, "error", "the list answer is not a List");
        return ListOutcome::kSkipped;
      }
      token = list.contains("metadata") && list["metadata"].is_object() ? list["metadata"].value("continue", "") : "";
      listing.page(list["items"]);
      list = Json();
      if (Stopping()) return ListOutcome::kStopped;
      if (!StillLeader()) return ListOutcome::kLost;
    } while (!token.empty());
    if (!gone) return ListOutcome::kDone;
  }
  Skip(result, listing.name, "expired",
       "the list continuation expired " + std::to_string(options_.max_restarts + 1) + " times");
  return ListOutcome::kGone;
}

RunResult BackgroundAudit::Run() {
  RunResult result;
  result.ran = true;
  const auto started = std::chrono::steady_clock::now();
  AuditSnapshots snap = snapshots_();
  if (!snap.policy) {
    logger_->Error("audit run skipped: no policy loaded");
    result.aborted = true;
    metrics_.runs.Inc({"aborted"});
    return result;
  }
  JudgeContext ctx{reviewer_, registry_, *snap.policy, snap.topology.get(), now_(), "default"};
  SchedulerClaimIndex scheduler_claims;  // filled by the Pods, listed first (AuditedKinds)
  ctx.scheduler_claims = &scheduler_claims;
  ReportBuilder reports(options_.max_results);
  std::map<std::vector<std::string>, double> violations;
  std::map<metrics::LabelValues, double> allocations;  // {alignment, origin, result}
  Discovery discovery;
  auto aborted = [&](ListOutcome outcome) {
    result.aborted = true;
    metrics_.runs.Inc({"aborted"});
    if (outcome == ListOutcome::kLost) {
      logger_->Warn("audit run aborted: the Lease was lost", {{"lease", elector_.options().name}});
    } else {
      logger_->Info("audit run stopped: shutting down", {{"lease", elector_.options().name}});
    }
    return result;
  };

  // What Pods were really allocated: the allocated claims, then the devices they name in the
  // ResourceSlices; each Pod is joined with them when it is judged below.
  AllocationJoin join(snap.topology.get());
  bool allocation_inputs = true;
  static constexpr std::pair<const char*, const char*> kAllocationKinds[] = {{"ResourceClaim", "resourceclaims"},
                                                                              {"ResourceSlice", "resourceslices"}};
  for (const auto& entry : kAllocationKinds) {
    const char* kind = entry.first;
    const bool slices = std::string_view(entry.second) == "resourceslices";
    Listing listing{std::string(kind) + ".resource.k8s.io", std::string("/apis/resource.k8s.io/v1/") + entry.second,
                    [] {}, [&](Json& items) {
                      for (auto& item : items) {
                        if (!item.is_object()) continue;
                        item["kind"] = kind;
                        item["apiVersion"] = "resource.k8s.io/v1";
                        if (slices) {
                          join.AddSlice(item);
                        } else {
                          join.AddClaim(item);
                        }
                      }
                    }};
    const ListOutcome outcome = List(listing, result);
    if (outcome == ListOutcome::kLost || outcome == ListOutcome::kStopped) return aborted(outcome);
    allocation_inputs = allocation_inputs && outcome == ListOutcome::kDone;
    if (!slices) join.ClaimsComplete();
  }
  join.InputsComplete();

  for (const AuditedKind& listed : AuditedKinds(*snap.policy)) {
    AuditedKind kind = listed;
    const std::string name = KindName(kind);
    if (kind.version.empty()) {
      // A custom resource: a version of its group that serves it (discovery); 404 = not installed.
      std::string reason, detail;
      kind.version = ServingVersion(kind, discovery, &reason, &detail);
      if (kind.version.empty()) {
        Skip(result, name, reason, detail);
        continue;
      }
    }
    const std::string api_version = kind.group.empty() ? kind.version : kind.group + "/" + kind.version;
    const bool pods = kind.group.empty() && kind.kind == "Pod";
    std::unique_ptr<KindState> state;
    std::unique_ptr<NvlinkSpread> spread;  // Pods: the job units that span NVLink cliques
    std::map<metrics::LabelValues, double> kind_allocations;
    Listing listing;
    listing.name = name;
    listing.base = (kind.group.empty() ? "/api/" + kind.version : "/apis/" + kind.group + "/" + kind.version) + "/" +
                   kind.resource;
    listing.attempt = [&] {
      state = std::make_unique<KindState>(options_.max_results);
      if (pods) spread = std::make_unique<NvlinkSpread>(snap.topology.get(), *snap.policy);
      kind_allocations.clear();
    };
    const AllocationJoin::Sink allocated = [&](PodAllocation&& a) {
      state->summary.AddAllocation(a);
      state->reports.AddAllocation(a);
      for (const auto& c : a.containers) kind_allocations[{AlignmentName(c.alignment), ClaimOriginName(c.origin), c.result}] += 1;
    };
    listing.page = [&](Json& items) {
      std::uint64_t judged = 0;
      for (auto& item : items) {
        ++state->summary.documents;
        if (!item.is_object()) {
          ++state->summary.malformed;
          continue;
        }
        // List answers leave kind and apiVersion out of their items.
        if (!item.contains("kind")) item["kind"] = kind.kind;
        if (!item.contains("apiVersion")) item["apiVersion"] = api_version;
        try {
          if (pods && allocation_inputs) join.AddPod(item, allocated);
          if (spread) spread->AddPod(item);
          ObjectVerdict v = JudgeObject(std::move(item), ctx);
          state->summary.Add(v);
          state->reports.Add(v);
          for (const auto& f : v.findings) state->violations[{f.rule, f.action, v.namespace_}] += 1;
          ++judged;
        } catch (const std::exception& e) {
          ++state->summary.malformed;
          logger_->Debug("audit: object could not be judged", {{"kind", name}, {"error", std::string(e.what())}});
        }
      }
      metrics_.objects.Inc({}, static_cast<double>(judged));
    };
    const ListOutcome outcome = List(listing, result);
    if (outcome == ListOutcome::kLost || outcome == ListOutcome::kStopped) return aborted(outcome);
    if (outcome != ListOutcome::kDone) continue;
    if (spread) {
      for (const ObjectVerdict& v : spread->Spread()) {
        state->summary.AddSpread(v);
        state->reports.Add(v);
        for (const auto& f : v.findings) state->violations[{f.rule, f.action, v.namespace_}] += 1;
      }
    }
    result.summary.Merge(state->summary);
    reports.Merge(state->reports);
    for (const auto& [k, n] : state->violations) violations[k] += n;
    for (const auto& [k, n] : kind_allocations) allocations[k] += n;
  }

  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (options_.policy_reports) PublishReports(reports, result);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  PublishMetrics(result, violations);
  // Without the claims or the slices the allocations are not known: the last known stay.
  if (allocation_inputs) metrics_.allocations.Replace(allocations);
  std::vector<std::string> skipped;
  for (const auto& [k, why] : result.skipped) skipped.push_back(k + "=" + why);
  logger_->Info("audit run", {{"objects", static_cast<int64_t>(result.summary.objects)},
                              {"denied", static_cast<int64_t>(result.summary.denied())},
                              {"pages", static_cast<int64_t>(result.pages)},
                              {"restarts", static_cast<int64_t>(result.restarts)},
                              {"skipped", skipped},
                              {"allocationPods", static_cast<int64_t>(result.summary.allocation_pods)},
                              {"allocationsFailed", static_cast<int64_t>(result.summary.allocation_results("fail"))},
                              {"allocationsWarned", static_cast<int64_t>(result.summary.allocation_results("warn"))},
                              {"allocationClaims", static_cast<int64_t>(join.stats().claims)},
                              {"allocationDevices", static_cast<int64_t>(join.stats().devices)},
                              {"allocationDropped", static_cast<int64_t>(join.stats().dropped)},
                              {"reportsCreated", static_cast<int64_t>(result.created)},
                              {"reportsUpdated", static_cast<int64_t>(result.updated)},
                              {"reportsUnchanged", static_cast<int64_t>(result.unchanged)},
                              {"reportsDeleted", static_cast<int64_t>(result.deleted)},
                              {"seconds", result.seconds}});
  return result;
}

void BackgroundAudit::PublishMetrics(const RunResult& result,
                                     const std::map<std::vector<std::string>, double>& violations) {
  // Bounded cardinality: the namespaces with the most findings keep their label, the rest is "other".
  std::map<std::string, double> per_ns;
  for (const auto& [k, n] : violations) per_ns[k[2]] += n;
  std::vector<std::pair<double, std::string>> ranked;
  for (const auto& [ns, n] : per_ns) ranked.emplace_back(-n, ns);
  std::sort(ranked.begin(), ranked.end());
  std::set<std::string> kept;
  for (std::size_t i = 0; i < ranked.size() && i < options_.max_namespaces; ++i) kept.insert(ranked[i].second);
  std::map<metrics::LabelValues, double> series;
  for (const auto& [k, n] : violations) {
    series[{k[0], k[1], kept.count(k[2]) != 0 ? k[2] : "other"}] += n;
  }
  metrics_.violations.Replace(series);
  metrics_.duration.Set({}, result.seconds);
  metrics_.last_run.Set({}, std::chrono::duration<double>(now_().time_since_epoch()).count());
  // A kind that is not served (its CRD not installed) leaves nothing unaudited.
  const bool partial = std::any_of(result.skipped.begin(), result.skipped.end(),
                                   [](const auto& kv) { return kv.second != "not-found"; });
  metrics_.runs.Inc({partial ? "partial" : "complete"});
}

void BackgroundAudit::PublishReports(const ReportBuilder& reports, RunResult& result) {
  const std::string base = kReportsBase;
  kube::ApiResult probe = client_.Call({"GET", base + "/policyreports?limit=1"});
  if (!probe.ok()) {
    if (probe.status == 404) {
      logger_->Debug("audit: the PolicyReport API is not installed; no reports written");
    } else {
      logger_->Warn("audit: PolicyReports not written", {{"error", Describe(probe)}});
    }
    return;
  }
  result.reports_available = true;
  // Our reports as they are: namespace → (resourceVersion, digest).
  std::map<std::string, std::pair<std::string, std::size_t>> existing;
  std::string token;
  for (int restarts = 0;;) {
    std::string path = base + "/policyreports?labelSelector=" + kube::PathEscape(std::string(kManagedBy) + "=draguard") +
                       "&limit=100";
    if (!token.empty()) path += "&continue=" + kube::PathEscape(token);
    kube::ApiResult page = client_.Call({"GET", path});
    if (page.status == 410 && restarts++ < options_.max_restarts) {
      existing.clear();
      token.clear();
      continue;
    }
    Json list = page.ok() ? Json::parse(page.body, nullptr, false) : Json();
    if (!page.ok() || !list.is_object() || !list.contains("items")) {
      ++result.failed;
      metrics_.reports.Inc({"error"});
      logger_->Warn("audit: existing PolicyReports not listed; none written", {{"error", Describe(page)}});
      return;
    }
    for (const auto& item : list["items"]) {
      const Json& md = item.value("metadata", Json::object());
      if (md.value("name", "") != options_.report_name) continue;
      existing[md.value("namespace", "")] = {md.value("resourceVersion", ""), Digest(item)};
    }
    token = list.contains("metadata") ? list["metadata"].value("continue", "") : "";
    if (token.empty()) break;
  }

  auto count = [&](const char* op, int& n) {
    ++n;
    metrics_.reports.Inc({op});
  };
  for (Json& report : reports.Reports(options_.report_name, {{kManagedBy, "draguard"}})) {
    const std::string ns = report["metadata"].value("namespace", "");
    if (ns.empty()) continue;  // every audited kind is namespaced
    const std::string collection = base + "/namespaces/" + kube::PathEscape(ns) + "/policyreports";
    const std::string path = collection + "/" + kube::PathEscape(options_.report_name);
    auto it = existing.find(ns);
    std::string rv;
    if (it != existing.end()) {
      rv = it->second.first;
      const bool same = it->second.second == Digest(report);
      existing.erase(it);
      if (same) {
        count("unchanged", result.unchanged);
        continue;
      }
    } else {
      kube::ApiResult created = client_.Call({"POST", collection, report.dump()});
      if (created.ok()) {
        count("create", result.created);
        continue;
      }
      if (created.status != 409) {
        count("error", result.failed);
        logger_->Warn("audit: PolicyReport not created", {{"namespace", ns}, {"error", Describe(created)}});
        continue;
      }
    }
    // Update with the resourceVersion we saw; on a conflict read it again and retry once.
    bool done = false;
    for (int attempt = 0; attempt < 2 && !done; ++attempt) {
      if (rv.empty() || attempt > 0) {
        kube::ApiResult cur = client_.Call({"GET", path});
        Json obj = cur.ok() ? Json::parse(cur.body, nullptr, false) : Json();
        if (!obj.is_object()) break;
        rv = obj["metadata"].value("resourceVersion", "");
        if (Digest(obj) == Digest(report)) {
          count("unchanged", result.unchanged);
          done = true;
          break;
        }
      }
      report["metadata"]["resourceVersion"] = rv;
      kube::ApiResult put = client_.Call({"PUT", path, report.dump()});
      if (put.ok()) {
        count("update", result.updated);
        done = true;
      } else if (put.status != 409) {
        break;
      }
    }
    if (!done) {
      count("error", result.failed);
      logger_->Warn("audit: PolicyReport not updated", {{"namespace", ns}});
    }
  }
  // Namespaces without audited objects any more: their reports go.
  for (const auto& [ns, entry] : existing) {
    kube::ApiResult del = client_.Call(
        {"DELETE", base + "/namespaces/" + kube::PathEscape(ns) + "/policyreports/" + kube::PathEscape(options_.report_name)});
    if (del.ok() || del.status == 404) {
      count("delete", result.deleted);
    } else {
      count("error", result.failed);
    }
  }
}

void BackgroundAudit::Start() {
  thread_ = std::thread([this] {
    const auto period = std::max<std::chrono::seconds>(std::chrono::seconds(1), elector_.options().duration / 3);
    for (;;) {
      try {
        Tick();
      } catch (const std::exception& e) {
        logger_->Error("audit tick failed", {{"error", std::string(e.what())}});
      }
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, period, [this] { return stop_; })) break;
    }
    ReleaseIfHeld();
  });
}

void BackgroundAudit::RequestStop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
}

void BackgroundAudit::Stop() {
  RequestStop();
  if (thread_.joinable()) thread_.join();
  ReleaseIfHeld();  // without a thread (Tick called directly), or when its release failed
}

bool BackgroundAudit::Stopping() {
  std::lock_guard<std::mutex> lock(mu_);
  return stop_;
}

void BackgroundAudit::ReleaseIfHeld() {
  if (!leader_) return;
  leader_ = false;
  metrics_.leader.Set({}, 0);
  if (elector_.Release()) {
    logger_->Info("audit Lease released", {{"lease", elector_.options().name}});
  } else {
    logger_->Warn("audit Lease not released; it expires after leaseDurationSeconds",
                  {{"lease", elector_.options().name}, {"error", elector_.last_error()}});
  }
}

}  // namespace draguard::audit
