// Multi-node GPU jobs: a Pod's job unit from the labels its controller writes, a template's Pods
// per unit, what keeps a pod spec in one NVLink clique, and the cliques of a topology model.
#include "draguard/dra/nvlink_jobs.h"

#include <gtest/gtest.h>

#include "draguard/topology/snapshot.h"

namespace draguard::dra {
namespace {

using admission::Json;

std::optional<NvlinkJob> PodJob(const std::string& metadata) {
  const Json m = Json::parse(metadata);
  return PodNvlinkJob(&m);
}

TEST(PodNvlinkJob, ReadsEachControllersLabels) {
  // LeaderWorkerSet: the group is the unit, its size the annotation.
  auto lws = PodJob(R"({"labels":{"leaderworkerset.sigs.k8s.io/name":"llm","leaderworkerset.sigs.k8s.io/group-index":"2",
      "leaderworkerset.sigs.k8s.io/worker-index":"1"},"annotations":{"leaderworkerset.sigs.k8s.io/size":"4"}})");
  ASSERT_TRUE(lws);
  EXPECT_EQ(lws->Key(), "LeaderWorkerSet/llm/group 2");
  EXPECT_EQ(lws->Describe(), "LeaderWorkerSet \"llm\" (group 2)");
  EXPECT_EQ(lws->pods, 4);
  // A group of one is no multi-node job.
  EXPECT_FALSE(PodJob(R"({"labels":{"leaderworkerset.sigs.k8s.io/name":"s"},"annotations":{"leaderworkerset.sigs.k8s.io/size":"1"}})"));
  // Before LeaderWorkerSet's own webhook set the leader's group index: the group key.
  auto leader = PodJob(R"({"labels":{"leaderworkerset.sigs.k8s.io/name":"llm","leaderworkerset.sigs.k8s.io/group-key":"abc"}})");
  ASSERT_TRUE(leader);
  EXPECT_EQ(leader->unit, "group abc");
  EXPECT_EQ(leader->pods, 0);

  // JobSet: at least one Pod per Job; one Job says nothing about its Pods.
  auto js = PodJob(R"({"labels":{"jobset.sigs.k8s.io/jobset-name":"train","jobset.sigs.k8s.io/global-replicas":"4"}})");
  ASSERT_TRUE(js);
  EXPECT_EQ(js->Key(), "JobSet/train");
  EXPECT_EQ(js->pods, 4);
  EXPECT_EQ(PodJob(R"({"labels":{"jobset.sigs.k8s.io/jobset-name":"t","jobset.sigs.k8s.io/global-replicas":"1"}})")->pods, 0);

  // Kubeflow training-operator jobs; an MPIJob's launcher is not part of the GPU job.
  auto mpi = PodJob(R"({"labels":{"training.kubeflow.org/job-name":"nccl","training.kubeflow.org/operator-name":"mpi-operator",
      "training.kubeflow.org/job-role":"worker"}})");
  ASSERT_TRUE(mpi);
  EXPECT_EQ(mpi->Key(), "MPIJob/nccl");
  EXPECT_FALSE(PodJob(R"({"labels":{"training.kubeflow.org/job-name":"nccl","training.kubeflow.org/operator-name":"mpi-operator",
      "training.kubeflow.org/job-role":"launcher"}})"));
  EXPECT_EQ(PodJob(R"({"labels":{"training.kubeflow.org/job-name":"p","training.kubeflow.org/operator-name":"pytorchjob-controller"}})")->kind,
            "PyTorchJob");

  // Indexed Job; a plain Job's Pod is none.
  auto indexed = PodJob(R"({"labels":{"batch.kubernetes.io/job-name":"idx","batch.kubernetes.io/job-completion-index":"3"}})");
  ASSERT_TRUE(indexed);
  EXPECT_EQ(indexed->Key(), "Job/idx");
  EXPECT_FALSE(PodJob(R"({"labels":{"batch.kubernetes.io/job-name":"plain"}})"));

  // Ray: workers only; a multi-host replica is its own unit.
  auto ray = PodJob(R"({"labels":{"ray.io/node-type":"worker","ray.io/cluster":"rc","ray.io/group":"gpu",
      "ray.io/worker-group-replica-name":"gpu-x1"}})");
  ASSERT_TRUE(ray);
  EXPECT_EQ(ray->Key(), "RayCluster/rc/worker group \"gpu\" replica \"gpu-x1\"");
  EXPECT_FALSE(PodJob(R"({"labels":{"ray.io/node-type":"head","ray.io/cluster":"rc"}})"));

  // Nothing, or malformed metadata.
  EXPECT_FALSE(PodJob(R"({"labels":{"app":"web"}})"));
  EXPECT_FALSE(PodJob(R"({"labels":["x"],"annotations":7})"));
  EXPECT_FALSE(PodNvlinkJob(nullptr));
  EXPECT_EQ(PodJob(R"({"labels":{"leaderworkerset.sigs.k8s.io/name":"x"},"annotations":{"leaderworkerset.sigs.k8s.io/size":"-4"}})")->pods, 0);
}

admission::AdmissionRequest Object(const std::string& group, const std::string& kind, const std::string& json) {
  admission::AdmissionRequest r;
  r.kind.group = group;
  r.kind.kind = kind;
  r.object = Json::parse(json);
  return r;
}

TEST(TemplateUnitPods, CountsEachKindsReplicas) {
  auto lws = Object("leaderworkerset.x-k8s.io", "LeaderWorkerSet",
                    R"({"spec":{"leaderWorkerTemplate":{"size":4,"leaderTemplate":{},"workerTemplate":{}}}})");
  EXPECT_EQ(TemplateUnitPods(lws, "/spec/leaderWorkerTemplate/leaderTemplate/spec"), 1);
  EXPECT_EQ(TemplateUnitPods(lws, "/spec/leaderWorkerTemplate/workerTemplate/spec"), 3);
  EXPECT_EQ(WorkloadNvlinkJob(lws, "/spec/leaderWorkerTemplate/workerTemplate/spec")->unit, "each group");
  auto lws_one_template = Object("leaderworkerset.x-k8s.io", "LeaderWorkerSet",
                                 R"({"spec":{"leaderWorkerTemplate":{"size":2,"workerTemplate":{}}}})");
  EXPECT_EQ(TemplateUnitPods(lws_one_template, "/spec/leaderWorkerTemplate/workerTemplate/spec"), 2);

  auto js = Object("jobset.x-k8s.io", "JobSet",
                   R"({"metadata":{"name":"t"},"spec":{"replicatedJobs":[{"replicas":2,"template":{"spec":{"parallelism":4,"template":{}}}},
                       {"template":{"spec":{"template":{}}}}]}})");
  EXPECT_EQ(TemplateUnitPods(js, "/spec/replicatedJobs/0/template/spec/template/spec"), 8);
  EXPECT_EQ(TemplateUnitPods(js, "/spec/replicatedJobs/1/template/spec/template/spec"), 1);
  EXPECT_EQ(WorkloadNvlinkJob(js, "/spec/replicatedJobs/0/template/spec/template/spec")->Describe(), "JobSet \"t\"");

  EXPECT_EQ(TemplateUnitPods(Object("batch", "Job", R"({"spec":{"completionMode":"Indexed","parallelism":4}})"), "/spec/template/spec"), 4);
  EXPECT_EQ(TemplateUnitPods(Object("batch", "Job", R"({"spec":{"parallelism":4}})"), "/spec/template/spec"), -1);
  EXPECT_EQ(TemplateUnitPods(Object("apps", "Deployment", R"({"spec":{"replicas":4}})"), "/spec/template/spec"), -1);

  auto pt = Object("kubeflow.org", "PyTorchJob",
                   R"({"spec":{"pytorchReplicaSpecs":{"Master":{"replicas":1,"template":{}},"Worker":{"replicas":3,"template":{}}}}})");
  EXPECT_EQ(TemplateUnitPods(pt, "/spec/pytorchReplicaSpecs/Worker/template/spec"), 3);
  EXPECT_EQ(TemplateUnitPods(pt, "/spec/pytorchReplicaSpecs/Master/template/spec"), 1);

  auto ray = Object("ray.io", "RayCluster",
                    R"({"spec":{"headGroupSpec":{"template":{}},"workerGroupSpecs":[{"groupName":"gpu","replicas":2,"numOfHosts":4,"template":{}}]}})");
  EXPECT_EQ(TemplateUnitPods(ray, "/spec/workerGroupSpecs/0/template/spec"), 8);
  EXPECT_EQ(TemplateUnitPods(ray, "/spec/headGroupSpec/template/spec"), -1);
  EXPECT_EQ(WorkloadNvlinkJob(ray, "/spec/workerGroupSpecs/0/template/spec")->unit, "worker group \"gpu\"");

  // Unreadable counts are no count; huge ones are capped, never overflow.
  EXPECT_EQ(TemplateUnitPods(Object("kubeflow.org", "MPIJob", R"({"spec":{"mpiReplicaSpecs":{"Worker":{"replicas":"2"}}}})"),
                             "/spec/mpiReplicaSpecs/Worker/template/spec"),
            -1);
  auto huge = Object("jobset.x-k8s.io", "JobSet",
                     R"({"spec":{"replicatedJobs":[{"replicas":9223372036854775807,"template":{"spec":{"parallelism":9000000000}}}]}})");
  EXPECT_EQ(TemplateUnitPods(huge, "/spec/replicatedJobs/0/template/spec/template/spec"), -1);
  EXPECT_EQ(TemplateUnitPods(js, "/spec/replicatedJobs/~x/template/spec/template/spec"), 1);  // malformed pointer: defaults
}

TEST(KeptInOneClique, NamesWhatKeepsThePods) {
  auto kept = [](const std::string& spec, const std::string& meta = "{}", const std::string& object_meta = "{}") {
    const Json s = Json::parse(spec), m = Json::parse(meta), o = Json::parse(object_meta);
    return KeptInOneClique(&s, &m, &o);
  };
  EXPECT_EQ(kept(R"({"affinity":{"podAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[
      {"topologyKey":"nvidia.com/gpu.clique","labelSelector":{"matchLabels":{"job":"x"}}}]}}})"),
            "a required podAffinity on nvidia.com/gpu.clique");
  EXPECT_EQ(kept(R"({"affinity":{"podAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[
      {"weight":1,"podAffinityTerm":{"topologyKey":"nvidia.com/gpu.clique"}}]}}})"),
            "");
  EXPECT_EQ(kept(R"({"nodeSelector":{"nvidia.com/gpu.clique":"u.1"}})"), "nodeSelector nvidia.com/gpu.clique");
  const std::string pin = R"({"key":"nvidia.com/gpu.clique","operator":"In","values":["u.1"]})";
  EXPECT_EQ(kept(R"({"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[
      {"matchExpressions":[)" + pin + "]}]}}}}"),
            "a required nodeAffinity on one nvidia.com/gpu.clique");
  // A second term without the pin lets the Pod elsewhere.
  EXPECT_EQ(kept(R"({"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[
      {"matchExpressions":[)" + pin + R"(]},{"matchExpressions":[{"key":"a","operator":"Exists"}]}]}}}})"),
            "");
  EXPECT_EQ(kept("{}", "{}", R"({"annotations":{"leaderworkerset.sigs.k8s.io/exclusive-topology":"nvidia.com/gpu.clique"}})"),
            "the annotation leaderworkerset.sigs.k8s.io/exclusive-topology");
  EXPECT_EQ(kept("{}", R"({"annotations":{"kueue.x-k8s.io/podset-required-topology":"nvidia.com/gpu.clique"}})"),
            "the annotation kueue.x-k8s.io/podset-required-topology");
  EXPECT_EQ(kept("{}", R"({"annotations":{"kueue.x-k8s.io/podset-required-topology":"kubernetes.io/hostname"}})"), "");
  EXPECT_EQ(KeptInOneClique(nullptr, nullptr, nullptr), "");
}

TEST(IsGeneratedChannelTemplateName, OnlyDraguardsComputeDomainChannels) {
  EXPECT_TRUE(IsGeneratedChannelTemplateName("draguard-cd-0123456789abcdef0123-channel"));
  EXPECT_FALSE(IsGeneratedChannelTemplateName("draguard-cd-0123456789abcdef012-channel"));   // 19 digits
  EXPECT_FALSE(IsGeneratedChannelTemplateName("draguard-cd-0123456789ABCDEF0123-channel"));  // upper case
  EXPECT_FALSE(IsGeneratedChannelTemplateName("draguard-cd-0123456789abcdef0123"));
  EXPECT_FALSE(IsGeneratedChannelTemplateName("nvbandwidth-test-compute-domain-1-channel"));
  EXPECT_FALSE(IsGeneratedChannelTemplateName(""));
}

TEST(NvlinkDomainsOf, CountsCliquesAndTheirNodes) {
  std::vector<std::shared_ptr<const topology::NodeTopology>> nodes;
  auto shape = std::make_shared<const topology::Shape>();
  for (const auto& [name, clique] : std::vector<std::pair<std::string, std::string>>{
           {"a1", "c.1"}, {"a2", "c.1"}, {"a3", "c.1"}, {"b1", "c.2"}, {"plain", ""}}) {
    auto n = std::make_shared<topology::NodeTopology>();
    n->name = name;
    n->nvlink_clique = clique;
    n->shape = shape;
    nodes.push_back(n);
  }
  auto snap = topology::Snapshot::Create(nodes);
  const NvlinkDomains& d = NvlinkDomainsOf(*snap);
  EXPECT_EQ(d.cliques, 2u);
  EXPECT_EQ(d.largest, 3u);
  EXPECT_EQ(d.clique_nodes, 4u);
  EXPECT_EQ(&NvlinkDomainsOf(*snap), &d);  // computed once per snapshot
  EXPECT_EQ(NvlinkDomainsOf(*topology::Snapshot::Create({})).cliques, 0u);
}

}  // namespace
}  // namespace draguard::dra
