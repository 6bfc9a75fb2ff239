// mutation.computeDomains: a converted Pod of a multi-node GPU job gets the IMEX channel of its
// unit's ComputeDomain (made by the reviewer through the API), a label naming the unit and a
// required podAffinity on nvidia.com/gpu.clique over it; single Pods and clusters without cliques
// stay as they were; sizes no clique holds and Pods with claims of their own are said.
#include "draguard/dra/nvlink_jobs.h"
#include "draguard/mutation/mutation.h"
#include "testing.h"

namespace draguard::mutation {
namespace {

using admission::Json;
using testing::DefaultPolicy;

// Two g4dn.metal nodes in one clique, one in another, one in none (the cliques are test values).
std::shared_ptr<const topology::Snapshot> Racks(std::size_t per_clique = 2) {
  auto base = testing::Topo(testing::kG4dn);
  std::vector<std::shared_ptr<const topology::NodeTopology>> nodes;
  for (std::size_t i = 0; i < 2 * per_clique + 1; ++i) {
    auto n = std::make_shared<topology::NodeTopology>(*base->nodes().front());
    n->name = "tray-" + std::to_string(i);
    if (i < 2 * per_clique) n->nvlink_clique = "0c6e5a52-4f7b-4e0a-9d43-3f1b7f2a9c10." + std::to_string(1 + i / per_clique);
    nodes.push_back(std::move(n));
  }
  return topology::Snapshot::Create(std::move(nodes));
}

policy::Policy Mode(const char* mode) {
  std::string yaml(policy::DefaultPolicyYaml());
  const std::size_t at = yaml.find("\nmutation:\n");
  yaml.insert(at + 11, std::string("  computeDomains: ") + mode + "\n");
  auto p = policy::ParsePolicy(yaml);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? *p : DefaultPolicy();
}

// A worker Pod of LeaderWorkerSet "llm" (group 0 of `size` Pods) with 4 legacy GPUs, controlled
// by the worker StatefulSet.
Json LwsPod(int size = 2) {
  Json pod = testing::PodWith({{"nvidia.com/gpu", 4}});
  pod["metadata"]["labels"] = {{"leaderworkerset.sigs.k8s.io/name", "llm"}, {"leaderworkerset.sigs.k8s.io/group-index", "0"}};
  pod["metadata"]["annotations"] = {{"leaderworkerset.sigs.k8s.io/size", std::to_string(size)}};
  pod["metadata"]["ownerReferences"] = Json::parse(
      R"([{"apiVersion":"apps/v1","kind":"StatefulSet","name":"llm-0","uid":"5f7c1d2e-0000-4000-8000-000000000001","controller":true}])");
  return pod;
}

TEST(ComputeDomains, AGroupGetsTheChannelOfItsComputeDomainAndOneClique) {
  auto c = ConvertPod(LwsPod(), "ml", Mode("auto"), Racks().get());
  ASSERT_EQ(c.outcome, PodConversion::Outcome::kConverted) << c.reason;
  ASSERT_EQ(c.compute_domains.size(), 1u);
  const GeneratedComputeDomain& cd = c.compute_domains[0];
  EXPECT_EQ(cd.name.rfind("draguard-cd-", 0), 0u);
  EXPECT_EQ(cd.name.size(), 12u + 20u);
  EXPECT_EQ(cd.channel_template, cd.name + "-channel");
  EXPECT_TRUE(dra::IsGeneratedChannelTemplateName(cd.channel_template));  // what DG015 and DG017 know it by
  EXPECT_EQ(cd.unit, "LeaderWorkerSet \"llm\" (group 0)");
  const std::string hash = cd.name.substr(12);
  EXPECT_EQ(cd.object["apiVersion"], "resource.nvidia.com/v1beta1");
  EXPECT_EQ(cd.object["kind"], "ComputeDomain");
  EXPECT_EQ(cd.object["metadata"]["namespace"], "ml");
  EXPECT_EQ(cd.object["metadata"]["labels"]["app.kubernetes.io/managed-by"], "draguard");
  EXPECT_EQ(cd.object["spec"], Json::parse(R"({"numNodes":0,"channel":{"resourceClaimTemplate":{"name":")" +
                                            cd.channel_template + R"("},"allocationMode":"Single"}})"));
  EXPECT_EQ(cd.object["metadata"]["ownerReferences"],
            Json::parse(R"([{"apiVersion":"apps/v1","kind":"StatefulSet","name":"llm-0","uid":"5f7c1d2e-0000-4000-8000-000000000001"}])"));
  // The Pod: its unit label, the clique affinity over it, the channel claim in the GPU container.
  EXPECT_EQ(c.pod["metadata"]["labels"][std::string(kNvlinkUnitLabel)], hash);
  EXPECT_EQ(c.pod["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"],
            Json::parse(R"([{"labelSelector":{"matchLabels":{"draguard.io/nvlink-unit":")" + hash +
                        R"("}},"topologyKey":"nvidia.com/gpu.clique"}])"));
  const Json& claims = c.pod["spec"]["resourceClaims"];
  ASSERT_EQ(claims.size(), 2u) << claims.dump();
  EXPECT_EQ(claims[1], Json({{"name", "draguard-channel"}, {"resourceClaimTemplateName", cd.channel_template}}));
  const Json& used = c.pod["spec"]["containers"][0]["resources"]["claims"];
  EXPECT_EQ(used.back(), Json({{"name", "draguard-channel"}})) << used.dump();
  EXPECT_NE(c.summary.find("IMEX channel of ComputeDomain " + cd.name), std::string::npos) << c.summary;
  // Every Pod of the unit names the same ComputeDomain; another group, or namespace, another.
  Json leader = LwsPod();
  leader["metadata"]["name"] = "llm-0";
  EXPECT_EQ(ConvertPod(leader, "ml", Mode("auto"), Racks().get()).compute_domains[0].name, cd.name);
  Json group1 = LwsPod();
  group1["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-index"] = "1";
  EXPECT_NE(ConvertPod(group1, "ml", Mode("auto"), Racks().get()).compute_domains[0].name, cd.name);
  EXPECT_NE(ConvertPod(LwsPod(), "other", Mode("auto"), Racks().get()).compute_domains[0].name, cd.name);
}

TEST(ComputeDomains, ModesAndClusters) {
  // off (the default): nothing beyond the GPUs.
  auto off = ConvertPod(LwsPod(), "ml", DefaultPolicy(), Racks().get());
  ASSERT_EQ(off.outcome, PodConversion::Outcome::kConverted);
  EXPECT_TRUE(off.compute_domains.empty());
  EXPECT_FALSE(off.pod["spec"].contains("affinity"));
  // auto on a cluster without cliques: the same.
  auto plain = ConvertPod(LwsPod(), "ml", Mode("auto"), testing::Topo(testing::kG4dn).get());
  ASSERT_EQ(plain.outcome, PodConversion::Outcome::kConverted);
  EXPECT_TRUE(plain.compute_domains.empty());
  // required there: refused, saying why.
  auto required = ConvertPod(LwsPod(), "ml", Mode("required"), testing::Topo(testing::kG4dn).get());
  ASSERT_EQ(required.outcome, PodConversion::Outcome::kRefused);
  EXPECT_NE(required.reason.find("mutation.computeDomains: required, but no node of the topology model is in an NVLink clique"),
            std::string::npos) << required.reason;
  // A Pod of no multi-node job is unchanged by it.
  auto single = ConvertPod(testing::PodWith({{"nvidia.com/gpu", 4}}), "ml", Mode("required"), Racks().get());
  ASSERT_EQ(single.outcome, PodConversion::Outcome::kConverted);
  EXPECT_TRUE(single.compute_domains.empty());
  // A group larger than every clique: auto converts it without, saying why; required refuses.
  auto big = ConvertPod(LwsPod(3), "ml", Mode("auto"), Racks().get());
  ASSERT_EQ(big.outcome, PodConversion::Outcome::kConverted);
  EXPECT_TRUE(big.compute_domains.empty());
  bool said = false;
  for (const auto& w : big.warnings) said = said || w.find("has 3 GPU Pods and the largest NVLink clique 2 nodes") != std::string::npos;
  EXPECT_TRUE(said) << Json(big.warnings).dump();
  EXPECT_EQ(ConvertPod(LwsPod(3), "ml", Mode("required"), Racks().get()).outcome, PodConversion::Outcome::kRefused);
  // Policy: a ComputeDomain needs templates made through the API.
  std::string yaml(policy::DefaultPolicyYaml());
  yaml.insert(yaml.find("\nmutation:\n") + 11, "  computeDomains: auto\n  templates: reference\n");
  yaml.erase(yaml.find("  templates: create\n"), 20);
  EXPECT_FALSE(policy::ParsePolicy(yaml).ok());
}

TEST(ComputeDomains, OwnersAndPodsWithClaimsOfTheirOwn) {
  // A JobSet's Pod: owned by the JobSet its labels name (its Jobs come and go).
  Json js = testing::PodWith({{"nvidia.com/gpu", 4}});
  js["metadata"]["labels"] = {{"jobset.sigs.k8s.io/jobset-name", "train"},
                              {"jobset.sigs.k8s.io/jobset-uid", "6b1c0000-0000-4000-8000-000000000002"},
                              {"jobset.sigs.k8s.io/global-replicas", "2"}};
  auto j = ConvertPod(js, "ml", Mode("auto"), Racks().get());
  ASSERT_EQ(j.compute_domains.size(), 1u);
  EXPECT_EQ(j.compute_domains[0].object["metadata"]["ownerReferences"][0]["kind"], "JobSet");
  EXPECT_EQ(j.compute_domains[0].object["metadata"]["ownerReferences"][0]["uid"], "6b1c0000-0000-4000-8000-000000000002");
  // An Indexed Job's Pod without an owner reference: no owner, and a warning.
  Json idx = testing::PodWith({{"nvidia.com/gpu", 4}});
  idx["metadata"]["labels"] = {{"batch.kubernetes.io/job-name", "idx"}, {"batch.kubernetes.io/job-completion-index", "0"}};
  auto i = ConvertPod(idx, "ml", Mode("auto"), Racks().get());
  ASSERT_EQ(i.compute_domains.size(), 1u);
  EXPECT_FALSE(i.compute_domains[0].object["metadata"].contains("ownerReferences"));
  bool warned = false;
  for (const auto& w : i.warnings) warned = warned || w.find("stays after Job \"idx\" is deleted") != std::string::npos;
  EXPECT_TRUE(warned) << Json(i.warnings).dump();
  // NVIDIA's demo shape: legacy GPUs beside a channel claim of its own: kept, with the affinity.
  Json demo = LwsPod();
  demo["spec"]["resourceClaims"] = Json::parse(R"([{"name":"compute-domain-channel","resourceClaimTemplateName":"nvb-channel"}])");
  demo["spec"]["containers"][0]["resources"]["claims"] = Json::parse(R"([{"name":"compute-domain-channel"}])");
  auto d = ConvertPod(demo, "ml", Mode("auto"), Racks().get());
  ASSERT_EQ(d.outcome, PodConversion::Outcome::kConverted) << d.reason;
  EXPECT_TRUE(d.compute_domains.empty());
  EXPECT_EQ(d.pod["spec"]["resourceClaims"][0]["name"], "compute-domain-channel");
  EXPECT_EQ(d.pod["spec"]["resourceClaims"].size(), 2u);  // its channel and draguard's GPUs
  EXPECT_TRUE(d.pod["spec"]["affinity"]["podAffinity"].contains("requiredDuringSchedulingIgnoredDuringExecution"));
  // An affinity of the wrong type (only a request that bypassed the API server) is refused, not
  // replaced, whether or not a ComputeDomain or node restriction would be added.
  Json odd = LwsPod();
  odd["spec"]["affinity"] = "anywhere";
  auto o = ConvertPod(odd, "ml", Mode("auto"), Racks().get());
  ASSERT_EQ(o.outcome, PodConversion::Outcome::kRefused);
  EXPECT_EQ(o.reason, "spec.affinity is not an object");
  EXPECT_EQ(ConvertPod(odd, "ml", DefaultPolicy(), testing::Mixed().get()).reason, "spec.affinity is not an object");
  odd["spec"]["affinity"] = Json::parse(R"({"nodeAffinity":[]})");
  EXPECT_EQ(ConvertPod(odd, "ml", DefaultPolicy(), testing::Mixed().get()).reason, "spec.affinity.nodeAffinity is not an object");
  odd["spec"]["affinity"] = Json::parse(R"({"podAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{}}})");
  EXPECT_EQ(ConvertPod(odd, "ml", Mode("auto"), Racks().get()).reason,
            "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution is not a list");
  // Converting twice (reinvocation) adds nothing: the legacy requests are gone.
  EXPECT_EQ(ConvertPod(d.pod, "ml", Mode("auto"), Racks().get()).outcome, PodConversion::Outcome::kUnchanged);
}

}  // namespace
}  // namespace draguard::mutation
