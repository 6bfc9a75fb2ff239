// DG017 nvlink-domain: Pods and pod templates of multi-node GPU jobs on a cluster whose nodes
// share NVLink domains (cliques in the topology model) hold a ComputeDomain channel and are kept
// in one clique; a job unit larger than every clique is reported.
#include <gtest/gtest.h>

#include "draguard/topology/snapshot.h"
#include "rule_test_util.h"

namespace draguard::engine::testing {
namespace {

// A topology model of `cliques` (per node: its clique, "" for none). Only the cliques matter here.
std::shared_ptr<const topology::Snapshot> Cluster(const std::vector<std::string>& cliques) {
  std::vector<std::shared_ptr<const topology::NodeTopology>> nodes;
  auto shape = std::make_shared<const topology::Shape>();
  for (std::size_t i = 0; i < cliques.size(); ++i) {
    auto n = std::make_shared<topology::NodeTopology>();
    n->name = "tray-" + std::to_string(i);
    n->nvlink_clique = cliques[i];
    n->shape = shape;
    nodes.push_back(std::move(n));
  }
  return topology::Snapshot::Create(std::move(nodes));
}

const std::string kA = "6f1c2e3a-0b4d-4c5e-8f9a-1b2c3d4e5f60.1";
const std::string kB = "6f1c2e3a-0b4d-4c5e-8f9a-1b2c3d4e5f60.2";

// Two racks of four trays each.
const topology::Snapshot& Racks() {
  static const auto kSnap = Cluster({kA, kA, kA, kA, kB, kB, kB, kB, ""});
  return *kSnap;
}

RuleResult RunDg017(const admission::AdmissionRequest& req, const topology::Snapshot* snap = &Racks(),
               const dra::ClaimCatalog* claims = nullptr, const policy::Policy& pol = DefaultPolicy()) {
  static const Registry kRegistry = DefaultRegistry();
  const Rule* rule = kRegistry.Find("DG017");
  EXPECT_NE(rule, nullptr);
  RuleInput in{req, pol, snap, {}};
  in.claims = claims;
  return rule->Evaluate(in);
}

const std::string kLwsWorker =
    R"("labels":{"leaderworkerset.sigs.k8s.io/name":"llm","leaderworkerset.sigs.k8s.io/group-index":"0"},)"
    R"("annotations":{"leaderworkerset.sigs.k8s.io/size":"4"})";

// A Pod with `metadata` members, spec.resourceClaims `claims` and extra spec members `extra`,
// one container asking for 4 legacy GPUs (`legacy`) or using the pod claim "gpu".
std::string Pod(const std::string& metadata, const std::string& claims = "", const std::string& extra = "",
                bool legacy = true) {
  const std::string resources = legacy ? R"({"limits":{"nvidia.com/gpu":4}})" : R"({"claims":[{"name":"gpu"}]})";
  return R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p",)" + metadata + R"(},"spec":{)" +
         (claims.empty() ? "" : R"("resourceClaims":[)" + claims + "],") + extra +
         R"("containers":[{"name":"worker","resources":)" + resources + "}]}}";
}

const std::string kChannelRef = R"({"name":"channel","resourceClaimTemplateName":"job-channel"})";
const std::string kGpuRef = R"({"name":"gpu","resourceClaimTemplateName":"draguard-0123456789abcdef0123"})";
const std::string kCliqueAffinity =
    R"("affinity":{"podAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[)"
    R"({"topologyKey":"nvidia.com/gpu.clique","labelSelector":{"matchLabels":{"leaderworkerset.sigs.k8s.io/name":"llm"}}}]}},)";

FakeCatalog ChannelCatalog() {
  FakeCatalog c;
  c.templates["team-a/job-channel"] =
      Template(R"({"devices":{"requests":[{"name":"channel","exactly":{"deviceClassName":"compute-domain-default-channel.nvidia.com"}}]}})");
  c.templates["team-a/nics"] = Template(R"({"devices":{"requests":[{"name":"nic","exactly":{"deviceClassName":"dranet"}}]}})");
  return c;
}

TEST(Dg017, LegacyPodOfAGroupHoldsNoChannel) {
  auto r = RunDg017(Request(Pod(kLwsWorker)));
  ASSERT_EQ(r.status, RuleStatus::kFail);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].pointer, "/spec/resourceClaims");
  EXPECT_EQ(r.findings[0].message,
            "Pod of LeaderWorkerSet \"llm\" (group 0, 4 GPU Pods): no ComputeDomain channel, so no IMEX domain: NCCL "
            "between the job's Pods falls back to the network (2 NVLink cliques, the largest of 4 nodes)");
  EXPECT_NE(r.findings[0].fix.find("create a ComputeDomain (resource.nvidia.com/v1beta1)"), std::string::npos);
  EXPECT_NE(r.findings[0].fix.find("topologyKey: nvidia.com/gpu.clique"), std::string::npos) << r.findings[0].fix;
  EXPECT_FALSE(r.findings[0].cap.has_value());
}

TEST(Dg017, OnlyOnClustersWithNvlinkDomains) {
  const auto req = Request(Pod(kLwsWorker));
  EXPECT_EQ(RunDg017(req, nullptr).status, RuleStatus::kSkip);                       // no topology model
  EXPECT_EQ(RunDg017(req, Cluster({"", ""}).get()).status, RuleStatus::kSkip);       // no clique
  EXPECT_EQ(RunDg017(req, Cluster({kA, ""}).get()).status, RuleStatus::kFail);       // one clique is enough
}

TEST(Dg017, SinglePodsAndPodsWithoutGpusAreNotJudged) {
  EXPECT_EQ(RunDg017(Request(Pod(R"("labels":{"app":"x"})"))).status, RuleStatus::kSkip);
  EXPECT_EQ(RunDg017(Request(Pod(R"("labels":{"leaderworkerset.sigs.k8s.io/name":"s"},"annotations":{"leaderworkerset.sigs.k8s.io/size":"1"})")))
                .status,
            RuleStatus::kSkip);
  // A Pod that does not carry its job's size (a PyTorchJob worker): its template is judged instead.
  EXPECT_EQ(RunDg017(Request(Pod(R"("labels":{"training.kubeflow.org/job-name":"p","training.kubeflow.org/operator-name":"pytorchjob-controller"})")))
                .status,
            RuleStatus::kSkip);
  const std::string no_gpu = R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p",)" + kLwsWorker +
                             R"(},"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"1"}}}]}})";
  EXPECT_EQ(RunDg017(Request(no_gpu)).status, RuleStatus::kSkip);
  // nvidia.com/gpu: 0 asks for nothing.
  const std::string zero = R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p",)" + kLwsWorker +
                           R"(},"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"0"}}}]}})";
  EXPECT_EQ(RunDg017(Request(zero)).status, RuleStatus::kSkip);
}

TEST(Dg017, ChannelHoldersAreKeptInOneClique) {
  FakeCatalog catalog = ChannelCatalog();
  auto holder = RunDg017(Request(Pod(kLwsWorker, kGpuRef + "," + kChannelRef, "", false)), &Racks(), &catalog);
  ASSERT_EQ(holder.status, RuleStatus::kFail);
  ASSERT_EQ(holder.findings.size(), 1u);
  EXPECT_EQ(holder.findings[0].pointer, "/spec/affinity");
  EXPECT_EQ(holder.findings[0].message,
            "Pod of LeaderWorkerSet \"llm\" (group 0, 4 GPU Pods): nothing keeps the job's Pods in one NVLink clique; Pods "
            "in two cliques join two separate IMEX domains (channel: claim \"channel\")");

  EXPECT_EQ(RunDg017(Request(Pod(kLwsWorker, kGpuRef + "," + kChannelRef, kCliqueAffinity, false)), &Racks(), &catalog).status,
            RuleStatus::kPass);
  // NVIDIA's demo shape: legacy GPUs beside the channel, kept by the LeaderWorkerSet's annotation.
  const std::string exclusive =
      kLwsWorker.substr(0, kLwsWorker.size() - 1) + R"(,"leaderworkerset.sigs.k8s.io/exclusive-topology":"nvidia.com/gpu.clique"})";
  EXPECT_EQ(RunDg017(Request(Pod(exclusive, kChannelRef)), &Racks(), &catalog).status, RuleStatus::kPass);
  // A claim of another class is no channel.
  auto nics = RunDg017(Request(Pod(kLwsWorker, R"({"name":"n","resourceClaimTemplateName":"nics"})")), &Racks(), &catalog);
  ASSERT_EQ(nics.findings.size(), 1u);
  EXPECT_EQ(nics.findings[0].pointer, "/spec/resourceClaims");
}

// A Pod /mutate converted under mutation.computeDomains: the channel of the ComputeDomain it
// created (whose template the driver's controller has not made yet) and the clique affinity pass
// without any lookup; DG015 does not report the template as missing either.
TEST(Dg017, PodsConvertedWithAComputeDomainPass) {
  const std::string channel = R"({"name":"draguard-channel","resourceClaimTemplateName":"draguard-cd-0123456789abcdef0123-channel"})";
  const auto req = Request(Pod(kLwsWorker, kGpuRef + "," + channel, kCliqueAffinity, false));
  FakeCatalog empty;  // synced, and nothing in it
  EXPECT_EQ(RunDg017(req, &Racks(), &empty).status, RuleStatus::kPass);
  EXPECT_EQ(RunDg017(req).status, RuleStatus::kPass);
  EXPECT_EQ(RunRuleWith("DG015", req, DefaultPolicy(), &empty).status, RuleStatus::kPass);
  // Another name of that shape is looked up as usual.
  const auto other = Request(Pod(kLwsWorker, kGpuRef + R"(,{"name":"c","resourceClaimTemplateName":"cd-channel"})", "", false));
  EXPECT_EQ(RunRuleWith("DG015", other, DefaultPolicy(), &empty).status, RuleStatus::kFail);
}

TEST(Dg017, ClaimsTheCacheCannotTellAreAuditOnly) {
  FakeCatalog cold = ChannelCatalog();
  cold.synced = false;
  auto r = RunDg017(Request(Pod(kLwsWorker, kChannelRef)), &Racks(), &cold);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].cap, policy::Action::kAudit);
  EXPECT_EQ(r.findings[0].message,
            "Pod of LeaderWorkerSet \"llm\" (group 0, 4 GPU Pods): whether claim template \"job-channel\" (not listed yet) "
            "is a ComputeDomain channel was not checked");
  // Without API access the same.
  auto offline = RunDg017(Request(Pod(kLwsWorker, kChannelRef)));
  ASSERT_EQ(offline.findings.size(), 1u);
  EXPECT_EQ(offline.findings[0].cap, policy::Action::kAudit);
}

TEST(Dg017, AUnitLargerThanEveryCliqueIsReported) {
  const std::string eight = R"("labels":{"leaderworkerset.sigs.k8s.io/name":"big","leaderworkerset.sigs.k8s.io/group-index":"0"},)"
                            R"("annotations":{"leaderworkerset.sigs.k8s.io/size":"8"})";
  FakeCatalog catalog = ChannelCatalog();
  auto r = RunDg017(Request(Pod(eight, kChannelRef, kCliqueAffinity)), &Racks(), &catalog);
  ASSERT_EQ(r.status, RuleStatus::kFail);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].pointer, "/spec");
  EXPECT_EQ(r.findings[0].message,
            "Pod of LeaderWorkerSet \"big\" (group 0, 8 GPU Pods): cannot share one NVLink domain, the largest clique has 4 "
            "nodes (a ComputeDomain channel is one per node)");
}

TEST(Dg017, WorkloadTemplatesCountTheirGpuPods) {
  // An MPIJob: the launcher holds no GPU and is not judged; 2 workers make a multi-node job.
  const std::string mpi = R"({"apiVersion":"kubeflow.org/v2beta1","kind":"MPIJob","metadata":{"name":"nccl"},"spec":{"mpiReplicaSpecs":{
      "Launcher":{"replicas":1,"template":{"spec":{"containers":[{"name":"l"}]}}},
      "Worker":{"replicas":2,"template":{"spec":{"containers":[{"name":"w","resources":{"limits":{"nvidia.com/gpu":4}}}]}}}}}})";
  auto r = RunDg017(Request(mpi));
  ASSERT_EQ(r.status, RuleStatus::kFail);
  EXPECT_EQ(Pointers(r), std::vector<std::string>{"/spec/mpiReplicaSpecs/Worker/template/spec/resourceClaims"});
  EXPECT_EQ(r.findings[0].message.substr(0, 95),
            "MPIJob \"nccl\" /spec/mpiReplicaSpecs/Worker/template/spec (2 GPU Pods): no ComputeDomain channel");
  // One worker: a single GPU Pod.
  std::string one = mpi;
  one.replace(one.find(R"("replicas":2)"), 12, R"("replicas":1)");
  EXPECT_EQ(RunDg017(Request(one)).status, RuleStatus::kSkip);

  // A JobSet of 2 Jobs x 2 Pods, kept in one clique by its exclusive-topology annotation, with a channel.
  FakeCatalog catalog = ChannelCatalog();
  const std::string js = R"({"apiVersion":"jobset.x-k8s.io/v1alpha2","kind":"JobSet","metadata":{"name":"train",
      "annotations":{"alpha.jobset.sigs.k8s.io/exclusive-topology":"nvidia.com/gpu.clique"}},"spec":{"replicatedJobs":[
      {"name":"w","replicas":2,"template":{"spec":{"parallelism":2,"template":{"spec":{"resourceClaims":[)" + kGpuRef + "," +
                         kChannelRef + R"(],"containers":[{"name":"w","resources":{"claims":[{"name":"gpu"},{"name":"channel"}]}}]}}}}}]}})";
  EXPECT_EQ(RunDg017(Request(js), &Racks(), &catalog).status, RuleStatus::kPass);
  // A Deployment's replicas are no multi-node job.
  const std::string deploy = R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":8,
      "template":{"spec":{"containers":[{"name":"w","resources":{"limits":{"nvidia.com/gpu":1}}}]}}}})";
  EXPECT_EQ(RunDg017(Request(deploy)).status, RuleStatus::kSkip);
}

TEST(Dg017, WarnsByDefault) {
  const Registry registry = DefaultRegistry();
  const Rule* rule = registry.Find("DG017");
  ASSERT_NE(rule, nullptr);
  EXPECT_EQ(rule->default_action(), policy::Action::kWarn);
  EXPECT_EQ(rule->name(), "nvlink-domain");
}

}  // namespace
}  // namespace draguard::engine::testing
