// The background audit against the fake API server: thousands of objects over several pages, an
// expired continue token, a forbidden kind, PolicyReports written only when they change, the
// violation metric's namespace cap, and the Lease (acquire, take over, lose, release on stop).
#include "draguard/audit/background.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>

#include <gtest/gtest.h>

#include "../kube/fake_apiserver.h"
#include "draguard/dra/resource_slices.h"
#include "draguard/policy/store.h"
#include "draguard/topology/snapshot.h"

namespace draguard::audit {
namespace {

using nlohmann::json;
using std::chrono::seconds;
using std::chrono::system_clock;

constexpr const char* kLease = "/apis/coordination.k8s.io/v1/namespaces/draguard/leases/draguard-audit";
constexpr const char* kReports = "/apis/wgpolicyk8s.io/v1alpha2/namespaces/";

json GpuPod(const std::string& ns, const std::string& name, bool legacy) {
  json resources = legacy ? json{{"limits", {{"nvidia.com/gpu", "1"}}}} : json::object();
  return {{"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec", {{"containers", {{{"name", "c"}, {"image", "x"}, {"resources", resources}}}}}}};
}

class BackgroundAuditTest : public kubetest::FakeApiServerTest {
 protected:
  void SetUp() override {
    FakeApiServerTest::SetUp();
    ASSERT_TRUE(policies_.LoadDefault().ok());
    // Mutation off: every legacy GPU Pod is denied by DG001.
    policy_ = std::make_shared<policy::Policy>(*policies_.Current());
    policy_->mutation.enabled = false;
    policy_->fingerprint.clear();
    elector_ = std::make_unique<LeaseElector>(*client_, LeaseOptions{"draguard", "draguard-audit", "replica-a", seconds(60)},
                                              [this] { return Now(); });
  }

  system_clock::time_point Now() const { return base_ + seconds(offset_.load()); }

  std::unique_ptr<BackgroundAudit> Make(BackgroundOptions options = {}) {
    return std::make_unique<BackgroundAudit>(
        *client_, registry_, *elector_, [this] { return AuditSnapshots{policy_, topology_}; }, metrics_, nullptr,
        options, [this] { return Now(); });
  }

  // An audit over 50 Pods in 5 namespaces, listed in pages of 10, that took the Lease and ran once.
  std::unique_ptr<BackgroundAudit> PagedLeader() {
    PutPods(50, 5, 5);
    BackgroundOptions options;
    options.page_size = 10;
    auto audit = Make(options);
    EXPECT_TRUE(audit->Tick().ran);
    return audit;
  }

  // `n` Pods round-robin over `namespaces` namespaces; in each namespace every `legacy_every`-th
  // Pod (the first included) requests a legacy GPU.
  void PutPods(int n, int namespaces, int legacy_every) {
    for (int i = 0; i < n; ++i) {
      std::string ns = "team-" + std::to_string(i % namespaces);
      std::string name = "pod-" + std::to_string(i);
      server_->PutObject("/api/v1/namespaces/" + ns + "/pods/" + name, GpuPod(ns, name, (i / namespaces) % legacy_every == 0));
    }
  }

  policy::PolicyStore policies_;
  std::shared_ptr<policy::Policy> policy_;
  std::shared_ptr<const topology::Snapshot> topology_;
  engine::Registry registry_ = engine::DefaultRegistry();
  metrics::Registry metrics_registry_;
  metrics::AuditMetrics metrics_{metrics_registry_};
  std::unique_ptr<LeaseElector> elector_;
  system_clock::time_point base_ = system_clock::now();
  std::atomic<int> offset_{0};
};

// The CRDs of one group have their own versions: KServe's InferenceService is served as v1beta1
// (the group's preferred version), its LLMInferenceService only as v1alpha1. Each kind is listed
// in a version that serves it, not skipped as not-found.
TEST_F(BackgroundAuditTest, ListsACustomResourceInAVersionThatServesItNotOnlyThePreferredOne) {
  policy_->custom_resources.clear();
  policy_->custom_resources.push_back({"serving.kserve.io", "InferenceService"});
  policy_->custom_resources.push_back({"serving.kserve.io", "LLMInferenceService"});
  server_->InjectFault("GET", "/apis/serving\\.kserve\\.io",
                       {200, R"({"kind":"APIGroup","name":"serving.kserve.io",
                         "versions":[{"groupVersion":"serving.kserve.io/v1beta1","version":"v1beta1"},
                                     {"groupVersion":"serving.kserve.io/v1alpha1","version":"v1alpha1"}],
                         "preferredVersion":{"groupVersion":"serving.kserve.io/v1beta1","version":"v1beta1"}})"});
  server_->InjectFault("GET", "/apis/serving\\.kserve\\.io/v1beta1",
                       {200, R"({"kind":"APIResourceList","groupVersion":"serving.kserve.io/v1beta1",
                         "resources":[{"name":"inferenceservices","namespaced":true,"kind":"InferenceService","verbs":["list"]}]})"});
  server_->InjectFault("GET", "/apis/serving\\.kserve\\.io/v1alpha1",
                       {200, R"({"kind":"APIResourceList","groupVersion":"serving.kserve.io/v1alpha1",
                         "resources":[{"name":"llminferenceservices","namespaced":true,"kind":"LLMInferenceService","verbs":["list"]}]})"});
  server_->PutObject("/apis/serving.kserve.io/v1alpha1/namespaces/team-0/llminferenceservices/chat",
                     {{"metadata", {{"name", "chat"}, {"namespace", "team-0"}}}, {"spec", json::object()}});
  auto audit = Make();
  RunResult r = audit->Tick();
  ASSERT_TRUE(r.ran);
  EXPECT_EQ(r.skipped.count("InferenceService.serving.kserve.io"), 0u);
  EXPECT_EQ(r.skipped.count("LLMInferenceService.serving.kserve.io"), 0u);
  EXPECT_EQ(r.summary.objects, 1u);  // the LLMInferenceService
  EXPECT_GE(server_->Count("GET", "/apis/serving.kserve.io/v1alpha1/llminferenceservices"), 1);
  EXPECT_EQ(server_->Count("GET", "/apis/serving.kserve.io/v1beta1/llminferenceservices"), 0);
  // Discovery is read once per run for the two kinds of the group.
  EXPECT_EQ(server_->Count("GET", "/apis/serving.kserve.io/v1beta1/inferenceservices"), 1);
}

TEST_F(BackgroundAuditTest, JudgesThousandsOfObjectsOverPagesAndWritesReportsOnlyWhenTheyChange) {
  PutPods(2500, 25, 5);  // 500 legacy Pods, 20 per namespace
  server_->PutObject("/apis/apps/v1/namespaces/team-0/deployments/web",
                     {{"metadata", {{"name", "web"}, {"namespace", "team-0"}}},
                      {"spec", {{"template", GpuPod("team-0", "t", true)}}}});
  BackgroundOptions options;
  options.page_size = 400;
  options.max_results = 5;
  auto audit = Make(options);
  RunResult r = audit->Tick();
  ASSERT_TRUE(r.ran);
  EXPECT_FALSE(r.aborted);
  EXPECT_EQ(r.summary.objects, 2501u);
  EXPECT_EQ(r.summary.denied(), 501u);
  EXPECT_GE(r.pages, 7u);  // 2500 Pods in pages of 400, plus one page per other kind
  EXPECT_GE(server_->Count("GET", "/api/v1/pods"), 7);
  EXPECT_TRUE(r.reports_available);
  EXPECT_EQ(r.created, 25);
  // Custom resources whose API is not served are skipped as not-found, not as errors.
  EXPECT_EQ(r.skipped.count("PyTorchJob.kubeflow.org"), 1u);
  EXPECT_EQ(r.skipped["PyTorchJob.kubeflow.org"], "not-found");
  // ... and leave the run complete: nothing installed went unaudited.
  EXPECT_EQ(metrics_.runs.Value({"complete"}), 1);
  EXPECT_EQ(metrics_.runs.Value({"partial"}), 0);

  json report = server_->GetObject(std::string(kReports) + "team-0/policyreports/draguard");
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report["kind"], "PolicyReport");
  EXPECT_EQ(report["results"].size(), 5u);  // capped
  EXPECT_EQ(report["summary"]["fail"], 21);  // 20 Pods + the Deployment's template
  EXPECT_EQ(report["summary"]["pass"], 80);
  EXPECT_EQ(report["metadata"]["annotations"]["draguard.io/results-dropped"], "16");

  // Metrics: objects, violations per namespace, last run.
  EXPECT_EQ(metrics_.objects.Value({}), 2501);
  EXPECT_EQ(metrics_.violations.Value({"DG001", "deny", "team-0"}), 21);
  EXPECT_EQ(metrics_.violations.Value({"DG001", "deny", "team-3"}), 20);
  EXPECT_GT(metrics_.last_run.Value({}), 0);
  EXPECT_EQ(metrics_.leader.Value({}), 1);

  // Nothing changed: the next run (one interval later) writes nothing.
  const int puts = server_->Count("PUT", kReports), posts = server_->Count("POST", kReports);
  offset_ += 600;
  RunResult again = audit->Tick();
  ASSERT_TRUE(again.ran);
  EXPECT_EQ(again.unchanged, 25);
  EXPECT_EQ(again.created + again.updated + again.deleted, 0);
  EXPECT_EQ(server_->Count("PUT", kReports), puts);
  EXPECT_EQ(server_->Count("POST", kReports), posts);

  // Not due yet: a tick only renews the Lease.
  offset_ += 20;
  EXPECT_FALSE(audit->Tick().ran);

  // One namespace fixed, one emptied: one update, one delete.
  for (int i = 1; i < 2500; i += 25) server_->RemoveObject("/api/v1/namespaces/team-1/pods/pod-" + std::to_string(i));
  server_->PutObject("/api/v1/namespaces/team-2/pods/pod-2", GpuPod("team-2", "pod-2", false));
  offset_ += 600;
  RunResult third = audit->Tick();
  EXPECT_EQ(third.updated, 1);
  EXPECT_EQ(third.deleted, 1);
  EXPECT_EQ(third.unchanged, 23);
  EXPECT_TRUE(server_->GetObject(std::string(kReports) + "team-1/policyreports/draguard").is_null());
  EXPECT_EQ(metrics_.violations.Value({"DG001", "deny", "team-1"}), 0);
}

TEST_F(BackgroundAuditTest, AnExpiredContinueTokenRestartsTheListWithoutCountingTwice) {
  PutPods(30, 3, 3);
  // The first page carries a token from before the expiry: the next page answers 410 Gone.
  server_->ExpireContinueTokens();
  json first = {{"kind", "PodList"}, {"apiVersion", "v1"}, {"metadata", {{"continue", "0:2"}}},
                {"items", {GpuPod("team-0", "pod-0", true), GpuPod("team-1", "pod-1", false)}}};
  server_->InjectFault("GET", "/api/v1/pods", kubetest::Reply(200, first.dump()));
  BackgroundOptions options;
  options.page_size = 7;
  auto audit = Make(options);
  RunResult r = audit->Tick();
  ASSERT_TRUE(r.ran);
  EXPECT_EQ(r.restarts, 1u);
  EXPECT_EQ(r.summary.objects, 30u);
  EXPECT_EQ(r.summary.denied(), 12u);
  EXPECT_TRUE(r.skipped.count("Pod") == 0);
}

TEST_F(BackgroundAuditTest, AForbiddenKindIsSkippedCountedAndTheRestAudited) {
  PutPods(10, 2, 2);
  server_->PutObject("/apis/batch/v1/namespaces/team-0/jobs/j",
                     {{"metadata", {{"name", "j"}, {"namespace", "team-0"}}},
                      {"spec", {{"template", GpuPod("team-0", "t", true)}}}});
  json forbidden = {{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"}, {"reason", "Forbidden"},
                    {"code", 403}, {"message", "jobs.batch is forbidden"}};
  server_->InjectFault("GET", "/apis/batch/v1/jobs", kubetest::Reply(403, forbidden.dump()));
  auto audit = Make();
  RunResult r = audit->Tick();
  ASSERT_TRUE(r.ran);
  EXPECT_FALSE(r.aborted);
  EXPECT_EQ(r.skipped["Job.batch"], "forbidden");
  EXPECT_EQ(r.summary.objects, 10u);  // the Pods; the Job was not listed
  EXPECT_EQ(metrics_.skipped.Value({"Job.batch", "forbidden"}), 1);
  EXPECT_EQ(metrics_.runs.Value({"partial"}), 1);
  // The next run lists it again.
  offset_ += 600;
  RunResult next = audit->Tick();
  EXPECT_EQ(next.skipped.count("Job.batch"), 0u);
  EXPECT_EQ(next.summary.objects, 11u);
}

TEST_F(BackgroundAuditTest, WithoutThePolicyReportApiOnlyMetricsArePublished) {
  PutPods(4, 1, 2);
  json nf = {{"kind", "Status"}, {"apiVersion", "v1"}, {"code", 404}, {"reason", "NotFound"}};
  server_->InjectFault("GET", "/apis/wgpolicyk8s.io/v1alpha2/policyreports", kubetest::Reply(404, nf.dump()));
  auto audit = Make();
  RunResult r = audit->Tick();
  EXPECT_FALSE(r.reports_available);
  EXPECT_EQ(r.created, 0);
  EXPECT_TRUE(server_->ObjectPaths("/apis/wgpolicyk8s.io").empty());
  EXPECT_EQ(metrics_.violations.Value({"DG001", "deny", "team-0"}), 2);
}

TEST_F(BackgroundAuditTest, ViolationNamespacesAreCappedIntoOther) {
  PutPods(10, 10, 1);  // one legacy Pod in each of 10 namespaces
  server_->PutObject("/api/v1/namespaces/team-0/pods/extra", GpuPod("team-0", "extra", true));
  BackgroundOptions options;
  options.max_namespaces = 3;
  options.policy_reports = false;
  auto audit = Make(options);
  audit->Tick();
  EXPECT_EQ(metrics_.violations.Value({"DG001", "deny", "team-0"}), 2);  // the largest keeps its label
  EXPECT_EQ(metrics_.violations.Value({"DG001", "deny", "other"}), 7);
  std::string text = metrics_registry_.Render();
  int series = 0;
  for (std::size_t p = 0; (p = text.find("draguard_audit_violations{", p)) != std::string::npos; ++p) ++series;
  EXPECT_EQ(series, 4);
}

TEST_F(BackgroundAuditTest, OneReplicaAuditsAndALostLeaseAbortsTheRun) {
  auto audit = PagedLeader();
  json lease = server_->GetObject(kLease);
  EXPECT_EQ(lease["spec"]["holderIdentity"], "replica-a");
  EXPECT_EQ(lease["spec"]["leaseDurationSeconds"], 60);

  // A second replica does not get the Lease while it is renewed.
  LeaseElector other(*client_, LeaseOptions{"draguard", "draguard-audit", "replica-b", seconds(60)},
                     [this] { return Now(); });
  EXPECT_FALSE(other.TryAcquireOrRenew());
  EXPECT_NE(other.last_error().find("replica-a"), std::string::npos);

  // replica-b takes the Lease over (as after replica-a stopped renewing); replica-a's next run
  // renews between pages, finds it lost and publishes nothing.
  offset_ += 120;
  ASSERT_TRUE(other.TryAcquireOrRenew());
  EXPECT_EQ(server_->GetObject(kLease)["spec"]["leaseTransitions"], 1);
  const int writes = server_->Count("PUT", kReports) + server_->Count("POST", kReports);
  offset_ += 30;
  RunResult r = audit->Run();
  EXPECT_TRUE(r.aborted);
  EXPECT_EQ(server_->Count("PUT", kReports) + server_->Count("POST", kReports), writes);
  EXPECT_EQ(metrics_.runs.Value({"aborted"}), 1);
  EXPECT_EQ(metrics_.leader.Value({}), 0);
  EXPECT_FALSE(audit->Tick().ran);

  // A concurrent writer between our read and our write: the precondition fails (409) and the
  // attempt counts as lost, it never overwrites.
  json conflict = {{"kind", "Status"}, {"apiVersion", "v1"}, {"code", 409}, {"reason", "Conflict"}};
  server_->InjectFault("PUT", kLease, kubetest::Reply(409, conflict.dump()));
  EXPECT_FALSE(other.TryAcquireOrRenew());
  EXPECT_NE(other.last_error().find("concurrently"), std::string::npos);
  EXPECT_TRUE(other.TryAcquireOrRenew());
}

// The allocation audit in the cluster: claims and slices listed in pages before the Pods; the
// scheduler's claim spread over the g4dn's NUMA nodes is a warning in the Pod's report and in
// draguard_audit_allocations; only the allocated devices of the slices are held.
TEST_F(BackgroundAuditTest, ReportsWhatEachPodWasReallyAllocated) {
  // The export as the node "g4dn" (a snapshot names nodes after their files).
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / ("background-topology-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(fs::path(DRAGUARD_TEST_DATA) / "hwloc" / "aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml",
                dir / "g4dn.xml", fs::copy_options::overwrite_existing);
  auto snap = topology::LoadSnapshot(dir.string());
  fs::remove_all(dir);
  ASSERT_TRUE(snap.ok());
  topology_ = *snap;
  const auto& node = *topology_->nodes().front();
  const std::string name = node.name;
  ASSERT_EQ(name, "g4dn");
  auto slices = dra::BuildResourceSlices(node, name);
  ASSERT_TRUE(slices.ok());
  for (const auto& d : slices->drivers) {
    for (const auto& sl : d.slices) {
      server_->PutObject("/apis/resource.k8s.io/v1/resourceslices/" + sl["metadata"]["name"].get<std::string>(), sl);
    }
  }
  auto claim = [&](const std::string& claim_name, const std::vector<std::string>& devices, bool scheduler) {
    json results = json::array();
    for (const auto& d : devices) {
      results.push_back({{"request", "container-0-request-0"}, {"driver", "gpu.nvidia.com"}, {"pool", name}, {"device", d}});
    }
    json c = {{"metadata", {{"name", claim_name}, {"namespace", "team-0"}}},
              {"spec", {{"devices", {{"requests", {{{"name", "container-0-request-0"},
                                                    {"exactly", {{"deviceClassName", "gpu.nvidia.com"}, {"count", devices.size()}}}}}}}}}},
              {"status", {{"allocation", {{"devices", {{"results", results}}}}}}}};
    if (scheduler) c["metadata"]["annotations"] = {{"resource.kubernetes.io/extended-resource-claim", "true"}};
    server_->PutObject("/apis/resource.k8s.io/v1/namespaces/team-0/resourceclaims/" + claim_name, c);
  };
  auto pod = [&](const std::string& pod_name, const std::string& claim_name) {
    json p = GpuPod("team-0", pod_name, false);
    p["spec"]["nodeName"] = name;
    p["status"]["extendedResourceClaimStatus"] = {
        {"resourceClaimName", claim_name},
        {"requestMappings", {{{"containerName", "c"}, {"resourceName", "nvidia.com/gpu"}, {"requestName", "container-0-request-0"}}}}};
    server_->PutObject("/api/v1/namespaces/team-0/pods/" + pod_name, p);
  };
  claim("spread-x", {"gpu-3", "gpu-4"}, true);
  pod("spread", "spread-x");
  claim("close-x", {"gpu-0", "gpu-1"}, true);
  pod("close", "close-x");
  claim("one-x", {"gpu-7"}, true);
  pod("one", "one-x");
  PutPods(6, 1, 100);  // Pods without GPUs
  BackgroundOptions options;
  options.page_size = 2;
  auto audit = Make(options);
  RunResult r = audit->Tick();
  ASSERT_TRUE(r.ran);
  EXPECT_EQ(r.skipped.count("ResourceClaim.resource.k8s.io") + r.skipped.count("ResourceSlice.resource.k8s.io"), 0u);
  EXPECT_EQ(r.summary.allocation_pods, 3u);
  EXPECT_EQ(r.summary.allocation_results("warn"), 1u);
  EXPECT_GE(server_->Count("GET", "/apis/resource.k8s.io/v1/resourceslices"), 1);
  EXPECT_EQ(metrics_.allocations.Value({"none", "scheduler", "warn"}), 1);
  EXPECT_EQ(metrics_.allocations.Value({"pcie-root", "scheduler", "pass"}), 1);
  EXPECT_EQ(metrics_.allocations.Value({"single", "scheduler", "pass"}), 1);

  json report = server_->GetObject(std::string(kReports) + "team-0/policyreports/draguard");
  ASSERT_TRUE(report.is_object());
  std::vector<std::string> seen;
  for (const auto& res : report["results"]) {
    if (res["rule"] != "allocation") continue;
    seen.push_back(res["resources"][0]["name"].get<std::string>() + "=" + res["result"].get<std::string>());
    if (res["result"] == "warn") {
      EXPECT_EQ(res["properties"]["devices"], "gpu.nvidia.com/" + name + "/gpu-3, gpu.nvidia.com/" + name + "/gpu-4");
      EXPECT_EQ(res["properties"]["alignment"], "none");
      EXPECT_EQ(res["properties"]["origin"], "scheduler");
    }
  }
  // The one-GPU Pod is counted, not reported.
  EXPECT_EQ(seen, (std::vector<std::string>{"spread=warn", "close=pass"}));

  // ResourceSlices not listable: the run is partial, allocations are not analysed and the metric
  // keeps the last known values.
  json forbidden = {{"kind", "Status"}, {"apiVersion", "v1"}, {"code", 403}, {"reason", "Forbidden"}};
  server_->InjectFault("GET", "/apis/resource\\.k8s\\.io/v1/resourceslices", kubetest::Reply(403, forbidden.dump()));
  offset_ += 600;
  RunResult next = audit->Tick();
  ASSERT_TRUE(next.ran);
  EXPECT_EQ(next.skipped["ResourceSlice.resource.k8s.io"], "forbidden");
  EXPECT_EQ(next.summary.allocation_pods, 0u);
  EXPECT_EQ(metrics_.allocations.Value({"none", "scheduler", "warn"}), 1);
  EXPECT_EQ(metrics_.runs.Value({"partial"}), 1);
}

// A running multi-node job whose GPU Pods span two NVLink cliques: a DG017 result on the job in
// its namespace's report, and in draguard_audit_violations.
TEST_F(BackgroundAuditTest, ReportsAJobWhosePodsSpanNvlinkCliques) {
  std::vector<std::shared_ptr<const topology::NodeTopology>> nodes;
  auto shape = std::make_shared<const topology::Shape>();
  for (const auto& [name, clique] : std::vector<std::pair<std::string, std::string>>{
           {"tray-a", "6f1c2e3a-0b4d-4c5e-8f9a-1b2c3d4e5f60.1"}, {"tray-b", "6f1c2e3a-0b4d-4c5e-8f9a-1b2c3d4e5f60.2"}}) {
    auto n = std::make_shared<topology::NodeTopology>();
    n->name = name;
    n->nvlink_clique = clique;
    n->shape = shape;
    nodes.push_back(std::move(n));
  }
  topology_ = topology::Snapshot::Create(std::move(nodes));
  for (const auto& [pod_name, node] : std::vector<std::pair<std::string, std::string>>{{"llm-0", "tray-a"}, {"llm-0-1", "tray-b"}}) {
    json p = GpuPod("team-0", pod_name, true);
    p["metadata"]["labels"] = {{"leaderworkerset.sigs.k8s.io/name", "llm"}, {"leaderworkerset.sigs.k8s.io/group-index", "0"}};
    p["spec"]["nodeName"] = node;
    server_->PutObject("/api/v1/namespaces/team-0/pods/" + pod_name, p);
  }
  BackgroundOptions options;
  options.page_size = 1;  // the two Pods arrive in two pages
  auto audit = Make(options);
  RunResult r = audit->Tick();
  ASSERT_TRUE(r.ran);
  EXPECT_EQ(r.summary.nvlink_spread, 1u);
  EXPECT_EQ(metrics_.violations.Value({"DG017", "warn", "team-0"}), 1);
  json report = server_->GetObject(std::string(kReports) + "team-0/policyreports/draguard");
  ASSERT_TRUE(report.is_object());
  int found = 0;
  for (const auto& res : report["results"]) {
    if (res["rule"] != "DG017") continue;
    ++found;
    EXPECT_EQ(res["result"], "warn");
    EXPECT_EQ(res["resources"][0]["kind"], "LeaderWorkerSet");
    EXPECT_EQ(res["resources"][0]["name"], "llm");
    EXPECT_NE(res["message"].get<std::string>().find("2 running GPU Pods span 2 NVLink cliques"), std::string::npos);
  }
  EXPECT_EQ(found, 1);
}

TEST_F(BackgroundAuditTest, StartAndStopTheThread) {
  auto audit = Make();
  audit->Start();
  ASSERT_TRUE(server_->WaitSeen([](const std::vector<kubetest::Seen>& s) {
    for (const auto& x : s) {
      if (x.method == "POST" && x.path.find("/leases") != std::string::npos) return true;
    }
    return false;
  }));
  audit->Stop();
  audit->Stop();
  // Stopping released the Lease (see the next test).
  EXPECT_EQ(server_->GetObject(kLease)["spec"]["holderIdentity"], "");
}

// A rolling update stops the holder (SIGTERM): it releases the Lease as client-go's
// ReleaseOnCancel does, and another replica takes it at its next attempt, at the same instant,
// instead of after leaseDurationSeconds.
TEST_F(BackgroundAuditTest, StoppingReleasesTheLeaseSoAnotherReplicaTakesItAtOnce) {
  auto audit = Make();
  ASSERT_TRUE(audit->Tick().ran);
  ASSERT_EQ(metrics_.leader.Value({}), 1);
  LeaseElector other(*client_, LeaseOptions{"draguard", "draguard-audit", "replica-b", seconds(60)},
                     [this] { return Now(); });
  ASSERT_FALSE(other.TryAcquireOrRenew());
  const json held = server_->GetObject(kLease);

  audit->Stop();
  json lease = server_->GetObject(kLease);
  EXPECT_EQ(lease["spec"]["holderIdentity"], "");
  EXPECT_EQ(lease["spec"]["leaseDurationSeconds"], 1);
  EXPECT_EQ(lease["spec"]["leaseTransitions"], held["spec"]["leaseTransitions"]);
  EXPECT_NE(lease["metadata"]["resourceVersion"], held["metadata"]["resourceVersion"]);
  EXPECT_EQ(metrics_.leader.Value({}), 0);

  // No clock moves: the Lease is free now.
  ASSERT_TRUE(other.TryAcquireOrRenew()) << other.last_error();
  lease = server_->GetObject(kLease);
  EXPECT_EQ(lease["spec"]["holderIdentity"], "replica-b");
  EXPECT_EQ(lease["spec"]["leaseDurationSeconds"], 60);
  EXPECT_EQ(lease["spec"]["leaseTransitions"], held["spec"]["leaseTransitions"].get<int>() + 1);

  // Releasing a Lease another replica holds changes nothing; a 409 reads the Lease again.
  LeaseElector a(*client_, LeaseOptions{"draguard", "draguard-audit", "replica-a", seconds(60)}, [this] { return Now(); });
  const int puts = server_->Count("PUT", kLease);
  EXPECT_TRUE(a.Release());
  EXPECT_EQ(server_->Count("PUT", kLease), puts);
  json conflict = {{"kind", "Status"}, {"apiVersion", "v1"}, {"code", 409}, {"reason", "Conflict"}};
  server_->InjectFault("PUT", kLease, kubetest::Reply(409, conflict.dump()));
  EXPECT_TRUE(other.Release());
  EXPECT_EQ(server_->Count("PUT", kLease), puts + 2);
  EXPECT_EQ(server_->GetObject(kLease)["spec"]["holderIdentity"], "");
}

// Stopping (serve's SIGTERM) ends a run under way after its current page without publishing; the
// Lease is released on the way out.
TEST_F(BackgroundAuditTest, ARequestedStopEndsTheRunAndReleasesTheLease) {
  auto audit = PagedLeader();
  const int writes = server_->Count("PUT", kReports) + server_->Count("POST", kReports);
  audit->RequestStop();
  RunResult r = audit->Run();
  EXPECT_TRUE(r.aborted);
  EXPECT_EQ(r.pages, 1u);
  EXPECT_EQ(server_->Count("PUT", kReports) + server_->Count("POST", kReports), writes);
  EXPECT_EQ(server_->GetObject(kLease)["spec"]["holderIdentity"], "replica-a");  // released on the way out
  audit->Stop();
  EXPECT_EQ(server_->GetObject(kLease)["spec"]["holderIdentity"], "");
}

}  // namespace
}  // namespace draguard::audit
