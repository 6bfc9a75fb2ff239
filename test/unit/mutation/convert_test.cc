// ConvertPod / ConvertObject: the patch and the converted objects.
#include "draguard/mutation/mutation.h"
#include "testing.h"

namespace draguard::mutation {
namespace {

using testing::DefaultPolicy;
using testing::Json;
using testing::PodWith;

TEST(ConvertPod, PatchRemovesLegacyEntriesAndReferencesTheTemplate) {
  auto pol = DefaultPolicy();
  Json pod = PodWith({{"nvidia.com/gpu", 1}, {"cpu", "2"}});
  pod["spec"]["containers"][0]["resources"]["requests"] = {{"nvidia.com/gpu", 1}};
  auto c = ConvertPod(pod, "ml", pol, nullptr);
  ASSERT_EQ(c.outcome, PodConversion::Outcome::kConverted) << c.reason;
  ASSERT_EQ(c.templates.size(), 1u);
  const std::string name = c.templates[0].name;
  Json expected = R"([
    {"op": "remove", "path": "/spec/containers/0/resources/limits/nvidia.com~1gpu"},
    {"op": "remove", "path": "/spec/containers/0/resources/requests"},
    {"op": "add", "path": "/spec/containers/0/resources/claims", "value": [{"name": "draguard-gpu", "request": "gpu"}]}
  ])"_json;
  expected.push_back({{"op", "add"}, {"path", "/spec/resourceClaims"},
                      {"value", Json::array({{{"name", "draguard-gpu"}, {"resourceClaimTemplateName", name}}})}});
  EXPECT_EQ(c.patch, expected) << c.patch.dump(1);
  EXPECT_EQ(pod.patch(c.patch), c.pod);
  EXPECT_EQ(c.pod["spec"]["containers"][0]["resources"]["limits"], Json({{"cpu", "2"}}));
  EXPECT_NE(c.summary.find(name), std::string::npos);
}

// KEP-5004: every DeviceClass answers to deviceclass.resource.kubernetes.io/<class>; a GPU class's
// implicit name is converted like nvidia.com/gpu, into whole devices of that class.
TEST(ConvertPod, ImplicitNamesOfGpuClassesConvertLikeNvidiaComGpu) {
  auto pol = DefaultPolicy();
  const auto topo = testing::Topo(testing::kG4dn);
  auto legacy = ConvertPod(PodWith({{"nvidia.com/gpu", 2}, {"cpu", "2"}}), "ml", pol, topo.get());
  ASSERT_EQ(legacy.outcome, PodConversion::Outcome::kConverted) << legacy.reason;
  Json pod = PodWith({{"deviceclass.resource.kubernetes.io/gpu.nvidia.com", "2"}, {"cpu", "2"}});
  auto c = ConvertPod(pod, "ml", pol, topo.get());
  ASSERT_EQ(c.outcome, PodConversion::Outcome::kConverted) << c.reason;
  ASSERT_EQ(c.templates.size(), 1u);
  // The same template as for nvidia.com/gpu: the default GPU class is the policy's.
  EXPECT_EQ(c.templates[0].name, legacy.templates[0].name);
  EXPECT_EQ(c.pod["spec"]["containers"][0]["resources"]["limits"], Json({{"cpu", "2"}}));
  EXPECT_EQ(ConvertPod(c.pod, "ml", pol, topo.get()).outcome, PodConversion::Outcome::kUnchanged);

  // Another GPU class of the policy: its devices, in a template of its own.
  pol.device_classes.gpu = {"gpu.nvidia.com", "h100.example.com"};
  pol.fingerprint.clear();
  auto other = ConvertPod(PodWith({{"deviceclass.resource.kubernetes.io/h100.example.com", 1}}), "ml", pol, nullptr);
  ASSERT_EQ(other.outcome, PodConversion::Outcome::kConverted) << other.reason;
  ASSERT_EQ(other.templates.size(), 1u);
  EXPECT_EQ(other.templates[0].object["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"],
            "h100.example.com")
      << other.templates[0].object.dump();

  // The MIG class's implicit name names no profile; a passthrough class has no generated claim.
  auto mig = ConvertPod(PodWith({{"deviceclass.resource.kubernetes.io/mig.nvidia.com", 1}}), "ml", pol, nullptr);
  EXPECT_EQ(mig.outcome, PodConversion::Outcome::kRefused);
  EXPECT_NE(mig.reason.find("without saying which profile"), std::string::npos) << mig.reason;
  EXPECT_NE(mig.reason.find("nvidia.com/mig-<profile>"), std::string::npos) << mig.reason;
  auto vfio = ConvertPod(PodWith({{"deviceclass.resource.kubernetes.io/vfio.gpu.nvidia.com", 1}}), "ml", pol, nullptr);
  EXPECT_EQ(vfio.outcome, PodConversion::Outcome::kRefused);
  EXPECT_NE(vfio.reason.find("vfio.gpu.nvidia.com"), std::string::npos) << vfio.reason;
  // Another class's implicit name (CPUs) is not a GPU request: nothing to convert.
  EXPECT_EQ(ConvertPod(PodWith({{"deviceclass.resource.kubernetes.io/dra.cpu", 1}}), "ml", pol, nullptr).outcome,
            PodConversion::Outcome::kUnchanged);
}

TEST(ConvertPod, ConvertedPodsAndPodsWithoutLegacyRequestsAreUnchanged) {
  auto pol = DefaultPolicy();
  auto c = ConvertPod(PodWith({{"nvidia.com/gpu", 2}}), "ml", pol, testing::Topo(testing::kG4dn).get());
  ASSERT_EQ(c.outcome, PodConversion::Outcome::kConverted) << c.reason;
  auto again = ConvertPod(c.pod, "ml", pol, testing::Topo(testing::kG4dn).get());
  EXPECT_EQ(again.outcome, PodConversion::Outcome::kUnchanged);
  EXPECT_TRUE(again.patch.empty());
  EXPECT_EQ(ConvertPod(PodWith({{"cpu", 1}}), "ml", pol, nullptr).outcome, PodConversion::Outcome::kUnchanged);
  EXPECT_EQ(ConvertPod(Json("x"), "ml", pol, nullptr).outcome, PodConversion::Outcome::kUnchanged);
  EXPECT_EQ(ConvertPod(Json::object(), "ml", pol, nullptr).outcome, PodConversion::Outcome::kUnchanged);
}

// On a node whose export records MIG, the generated claim is checked against its GPU instances.
TEST(ConvertPod, MigRequestsAreCheckedAgainstTheExportedGpuInstances) {
  auto pol = DefaultPolicy();
  auto topo = testing::Topo(testing::kXeMig);
  auto two = ConvertPod(PodWith({{"nvidia.com/mig-3g.40gb", 2}}), "ml", pol, topo.get());
  ASSERT_EQ(two.outcome, PodConversion::Outcome::kConverted) << two.reason;
  ASSERT_EQ(two.templates.size(), 1u);
  const Json& devices = two.templates[0].object["spec"]["spec"]["devices"];
  EXPECT_EQ(devices["requests"][0]["exactly"]["deviceClassName"], "mig.nvidia.com");
  EXPECT_EQ(devices["requests"][0]["exactly"]["count"], 2);
  // Seven 1g.10gb fit; eight do not, and no GPU is split into 2g.20gb.
  EXPECT_EQ(ConvertPod(PodWith({{"nvidia.com/mig-1g.10gb", 7}}), "ml", pol, topo.get()).outcome,
            PodConversion::Outcome::kConverted);
  auto eight = ConvertPod(PodWith({{"nvidia.com/mig-1g.10gb", 8}}), "ml", pol, topo.get());
  ASSERT_EQ(eight.outcome, PodConversion::Outcome::kRefused);
  EXPECT_NE(eight.reason.find("at most 7 of 8 MIG devices qualify on one node"), std::string::npos) << eight.reason;
  auto absent = ConvertPod(PodWith({{"nvidia.com/mig-2g.20gb", 1}}), "ml", pol, topo.get());
  ASSERT_EQ(absent.outcome, PodConversion::Outcome::kRefused);
  EXPECT_NE(absent.reason.find("no MIG device qualifies on any node"), std::string::npos) << absent.reason;
  // Full GPUs: the node publishes only GPUs 2 and 3 whole.
  EXPECT_EQ(ConvertPod(PodWith({{"nvidia.com/gpu", 2}}), "ml", pol, topo.get()).outcome,
            PodConversion::Outcome::kConverted);
  auto three = ConvertPod(PodWith({{"nvidia.com/gpu", 3}}), "ml", pol, topo.get());
  ASSERT_EQ(three.outcome, PodConversion::Outcome::kRefused);
  EXPECT_NE(three.reason.find("no node has 3 GPUs"), std::string::npos) << three.reason;
}

TEST(ConvertPod, RetriesGiveTheSamePatchAndContainerNamesDoNotMatter) {
  auto pol = DefaultPolicy();
  Json a = PodWith({{"nvidia.com/gpu", 2}});
  Json b = a;
  b["spec"]["containers"][0]["name"] = "trainer";
  auto ca = ConvertPod(a, "ml", pol, testing::Topo(testing::kG4dn).get());
  auto ca2 = ConvertPod(a, "ml", pol, testing::Topo(testing::kG4dn).get());
  auto cb = ConvertPod(b, "ml", pol, testing::Topo(testing::kG4dn).get());
  EXPECT_EQ(ca.patch, ca2.patch);
  EXPECT_EQ(ca.templates[0].name, cb.templates[0].name);
}

TEST(ConvertPod, KeepsExistingClaimsAndAvoidsTheirNames) {
  auto pol = DefaultPolicy();
  Json pod = PodWith({{"nvidia.com/gpu", 1}});
  pod["spec"]["resourceClaims"] = Json::array({{{"name", "draguard-gpu"}, {"resourceClaimName", "shared-nic"}}});
  pod["spec"]["containers"][0]["resources"]["claims"] = Json::array({{{"name", "draguard-gpu"}}});
  auto c = ConvertPod(pod, "ml", pol, nullptr);
  ASSERT_EQ(c.outcome, PodConversion::Outcome::kConverted);
  const Json& rcs = c.pod["spec"]["resourceClaims"];
  ASSERT_EQ(rcs.size(), 2u);
  EXPECT_EQ(rcs[0], pod["spec"]["resourceClaims"][0]);
  EXPECT_EQ(rcs[1]["name"], "draguard-gpu-2");
  EXPECT_EQ(c.pod["spec"]["containers"][0]["resources"]["claims"],
            Json::array({{{"name", "draguard-gpu"}}, {{"name", "draguard-gpu-2"}, {"request", "gpu"}}}));
  EXPECT_EQ(pod.patch(c.patch), c.pod);
}

TEST(ConvertPod, NodeRestrictionIsAndedIntoEveryExistingTerm) {
  auto pol = DefaultPolicy();
  Json pod = PodWith({{"nvidia.com/gpu", 4}});
  pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] =
      R"([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
          {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}])"_json;
  auto c = ConvertPod(pod, "ml", pol, testing::Mixed().get());
  ASSERT_EQ(c.outcome, PodConversion::Outcome::kConverted) << c.reason;
  const Json& terms =
      c.pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  ASSERT_EQ(terms.size(), 2u);
  for (const auto& term : terms) {
    ASSERT_EQ(term["matchFields"].size(), 1u) << term.dump();
    EXPECT_EQ(term["matchFields"][0]["key"], "metadata.name");
    EXPECT_EQ(term["matchFields"][0]["values"], Json::array({"dgx-a"}));
    EXPECT_EQ(term["matchExpressions"].size(), 1u);
  }
  EXPECT_EQ(pod.patch(c.patch), c.pod);
  bool warned = false;
  for (const auto& w : c.warnings) warned = warned || w.find("restricted to nodes") != std::string::npos;
  EXPECT_TRUE(warned);
}

TEST(ConvertPod, SeveralNodesBecomeOneTermPerNodeBecauseMatchFieldsTakesOneValue) {
  Json pod = PodWith({{"nvidia.com/gpu", 2}}, {{"draguard.io/gpu-product", "Tesla T4"}});
  pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] =
      R"([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}])"_json;
  auto c = ConvertPod(pod, "ml", DefaultPolicy(), testing::Mixed().get());
  ASSERT_EQ(c.outcome, PodConversion::Outcome::kConverted) << c.reason;
  const Json& terms =
      c.pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  ASSERT_EQ(terms.size(), 2u) << terms.dump();
  EXPECT_EQ(terms[0]["matchFields"][0]["values"], Json::array({"g4dn-a"}));
  EXPECT_EQ(terms[1]["matchFields"][0]["values"], Json::array({"g4dn-b"}));
  for (const auto& term : terms) EXPECT_EQ(term["matchExpressions"][0]["key"], "zone");
}

TEST(ConvertPod, RestrictsOnlyWhenSomeNodesCannotAndPinsManyNodesByShape) {
  auto pol = DefaultPolicy();
  // The only node can do it: no restriction.
  auto one = ConvertPod(PodWith({{"nvidia.com/gpu", 8}}, {{"draguard.io/interconnect", "nvlink"}}), "ml", pol,
                        testing::Topo(testing::kDgx2h).get());
  ASSERT_EQ(one.outcome, PodConversion::Outcome::kConverted) << one.reason;
  EXPECT_FALSE(one.pod["spec"].contains("affinity"));
  // Mixed cluster, limit 0: pinned by the shape label instead of node names.
  pol.mutation.hostname_affinity_limit = 0;
  pol.fingerprint.clear();  // changed in code: no longer the parsed document
  auto c = ConvertPod(PodWith({{"nvidia.com/gpu", 4}}), "ml", pol, testing::Mixed().get());
  ASSERT_EQ(c.outcome, PodConversion::Outcome::kConverted) << c.reason;
  const Json& term =
      c.pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0];
  EXPECT_EQ(term["matchExpressions"][0]["key"], "draguard.io/topology-shape");
  EXPECT_EQ(term["matchExpressions"][0]["values"],
            Json::array({testing::Mixed()->Find("dgx-a")->shape->fingerprint}));
}

// Found by the real scheduler (test/cluster): in a cluster that mixes shapes, rails that only one
// shape can give were refused because another shape could misalign them; the Pod is pinned instead.
TEST(ConvertPod, RailsInAMixedClusterArePinnedToTheShapesThatGiveThem) {
  auto c = ConvertPod(PodWith({{"nvidia.com/gpu", 2}}, {{"draguard.io/nic", "rdma"}}), "ml", DefaultPolicy(),
                      testing::MixedRails().get());
  ASSERT_EQ(c.outcome, PodConversion::Outcome::kConverted) << c.reason;
  const Json& terms =
      c.pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  ASSERT_EQ(terms.size(), 1u) << terms.dump();
  EXPECT_EQ(terms[0]["matchFields"][0]["values"], Json::array({"xe-a"})) << terms.dump();
}

// A shape whose GPUs have no memory figure (an hwloc 2.2 export with PCI devices only) must not
// take the rails of the shape that gives them away: the Pod is pinned to the shape that can
// place it, not refused because the other shape cannot.
TEST(ConvertPod, RailsBesideAShapeWithoutGpuMemoryArePinnedToTheShapeThatGivesThem) {
  auto snap = testing::Nodes({{"hwloc-synthetic/xe8640-like_4xH100-SXM_4numa_nvlink-all_3xmlx5.xml", "xe-a"},
                              {"hwloc-synthetic/a100-like_4xA100-SXM_4numa_pci-only_3xmlx5.xml", "a100-a"}});
  ASSERT_NE(snap, nullptr);
  auto c = ConvertPod(PodWith({{"nvidia.com/gpu", 2}}, {{"draguard.io/nic", "rdma"}}), "ml", DefaultPolicy(), snap.get());
  ASSERT_EQ(c.outcome, PodConversion::Outcome::kConverted) << c.reason;
  const Json& terms =
      c.pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  ASSERT_EQ(terms.size(), 1u) << terms.dump();
  EXPECT_EQ(terms[0]["matchFields"][0]["values"], Json::array({"xe-a"})) << terms.dump();
}

// mutation.numaAlignment numaNode: a NUMA-local request is one numaNode matchAttribute over its
// GPUs instead of a pcieRoot selector per NUMA node; a shape with one NUMA node (its GPUs publish
// no numaNode) keeps the selector.
TEST(ConvertPod, NumaAlignmentThroughTheStandardAttribute) {
  auto devices_of = [](const PodConversion& c) -> Json {
    EXPECT_EQ(c.outcome, PodConversion::Outcome::kConverted) << c.reason;
    return c.templates.empty() ? Json() : c.templates[0].object["spec"]["spec"]["devices"];
  };
  std::string yaml(policy::DefaultPolicyYaml());
  const std::size_t at = yaml.find("\nmutation:\n");
  ASSERT_NE(at, std::string::npos);
  yaml.insert(at + 11, "  numaAlignment: numaNode\n");
  auto parsed = policy::ParsePolicy(yaml);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const policy::Policy& numa = *parsed;
  ASSERT_EQ(numa.mutation.numa_alignment, policy::NumaAlignment::kNumaNode);
  // g4dn.metal: 8 T4 on two NUMA nodes, no NVLink.
  Json d = devices_of(ConvertPod(PodWith({{"nvidia.com/gpu", 4}}), "ml", numa, testing::Topo(testing::kG4dn).get()));
  ASSERT_EQ(d["constraints"].size(), 1u) << d.dump();
  EXPECT_EQ(d["constraints"][0]["matchAttribute"], "resource.kubernetes.io/numaNode") << d.dump();
  EXPECT_EQ(d["requests"][0]["exactly"]["count"], 4) << d.dump();
  EXPECT_EQ(d["requests"][0]["exactly"]["selectors"].dump().find("pcieRoot"), std::string::npos) << d.dump();
  // The default: a selector on the pcieRoot values of one NUMA node's roots, no numaNode.
  Json def = devices_of(ConvertPod(PodWith({{"nvidia.com/gpu", 4}}), "ml", DefaultPolicy(),
                                   testing::Topo(testing::kG4dn).get()));
  EXPECT_EQ(def.dump().find("numaNode"), std::string::npos) << def.dump();
  EXPECT_NE(def.dump().find("pcieRoot"), std::string::npos) << def.dump();
  // More GPUs than one NUMA node holds: no NUMA-local placement in either mode.
  auto eight = ConvertPod(PodWith({{"nvidia.com/gpu", 5}}), "ml", numa, testing::Topo(testing::kG4dn).get());
  EXPECT_EQ(eight.outcome, PodConversion::Outcome::kRefused) << eight.reason;
  EXPECT_NE(eight.reason.find("4 on one NUMA node"), std::string::npos) << eight.reason;
}

// The default policy with mutation.cpu in `mode` (and the numaNode alignment it needs).
policy::Policy CpuPolicy(const char* mode) {
  std::string yaml(policy::DefaultPolicyYaml());
  const std::size_t at = yaml.find("\nmutation:\n");
  EXPECT_NE(at, std::string::npos);
  yaml.insert(at + 11, std::string("  numaAlignment: numaNode\n  cpu: {mode: ") + mode + "}\n");
  yaml.erase(yaml.find("  cpu: {mode: none, deviceClass: dra.cpu}\n"), 42);
  auto parsed = policy::ParsePolicy(yaml);
  EXPECT_TRUE(parsed.ok()) << parsed.status().message();
  return parsed.ok() ? *parsed : DefaultPolicy();
}

// mutation.cpu: a container's whole CPUs move into the claim of its GPUs as request "cpu" (a count
// of devices, or dra.cpu/cpu capacity of one grouped device), tied to the GPUs by a numaNode
// matchAttribute; the container lists both requests and asks the kubelet for exactly those CPUs.
TEST(ConvertPod, CpusMoveIntoTheClaimOfTheGpus) {
  auto topo = testing::Topo(testing::kG4dn);  // 2 NUMA nodes of 48 CPUs, 4 T4 each
  for (const char* mode : {"grouped", "individual"}) {
    SCOPED_TRACE(mode);
    Json pod = PodWith({{"nvidia.com/gpu", 2}, {"cpu", "16"}, {"memory", "64Gi"}});
    pod["spec"]["containers"][0]["resources"]["requests"] = {{"cpu", "16"}};
    auto c = ConvertPod(pod, "ml", CpuPolicy(mode), topo.get());
    ASSERT_EQ(c.outcome, PodConversion::Outcome::kConverted) << c.reason;
    ASSERT_EQ(c.templates.size(), 1u);
    const Json& d = c.templates[0].object["spec"]["spec"]["devices"];
    const Json& cpu = d["requests"].back();
    EXPECT_EQ(cpu["name"], "cpu") << d.dump();
    EXPECT_EQ(cpu["exactly"]["deviceClassName"], "dra.cpu");
    if (std::string(mode) == "grouped") {
      EXPECT_EQ(cpu["exactly"]["count"], 1);
      EXPECT_EQ(cpu["exactly"]["capacity"]["requests"]["dra.cpu/cpu"], "16");
    } else {
      EXPECT_EQ(cpu["exactly"]["count"], 16);
      EXPECT_FALSE(cpu["exactly"].contains("capacity"));
    }
    EXPECT_EQ(d["constraints"].back(),
              Json({{"requests", {"gpu", "cpu"}}, {"matchAttribute", "resource.kubernetes.io/numaNode"}}))
        << d.dump();
    const Json& res = c.pod["spec"]["containers"][0]["resources"];
    EXPECT_EQ(res["claims"], Json::parse(R"([{"name":"draguard-gpu","request":"gpu"},{"name":"draguard-gpu","request":"cpu"}])"));
    EXPECT_EQ(res["requests"]["cpu"], "16");
    EXPECT_EQ(res["limits"]["cpu"], "16");
    EXPECT_NE(c.templates[0].description.find("16 CPUs on their NUMA node"), std::string::npos) << c.templates[0].description;
  }
  // A request below the limit: both become the request (dra-driver-cpu's container accounting).
  Json burst = PodWith({{"nvidia.com/gpu", 1}, {"cpu", "8"}});
  burst["spec"]["containers"][0]["resources"]["requests"] = {{"cpu", "4000m"}};
  auto b = ConvertPod(burst, "ml", CpuPolicy("grouped"), topo.get());
  ASSERT_EQ(b.outcome, PodConversion::Outcome::kConverted) << b.reason;
  EXPECT_EQ(b.pod["spec"]["containers"][0]["resources"]["limits"]["cpu"], "4");
  EXPECT_EQ(b.templates[0].object["spec"]["spec"]["devices"]["requests"].back()["exactly"]["capacity"]["requests"]
                             ["dra.cpu/cpu"], "4");
}

// Fractional or missing CPUs and plain init containers stay with the kubelet, with a warning; the
// template is then the one mutation.cpu none generates.
TEST(ConvertPod, CpusThatStayWithTheKubelet) {
  auto topo = testing::Topo(testing::kG4dn);
  auto none = ConvertPod(PodWith({{"nvidia.com/gpu", 2}}), "ml", DefaultPolicy(), topo.get());
  ASSERT_EQ(none.outcome, PodConversion::Outcome::kConverted) << none.reason;
  struct Case {
    Json pod;
    std::string note;
  };
  std::vector<Case> cases = {
      {PodWith({{"nvidia.com/gpu", 2}, {"cpu", "1500m"}}), "cpu 1500m is not a whole number of CPUs"},
      {PodWith({{"nvidia.com/gpu", 2}}), "no cpu request"},
  };
  for (const auto& k : cases) {
    auto c = ConvertPod(k.pod, "ml", CpuPolicy("grouped"), topo.get());
    ASSERT_EQ(c.outcome, PodConversion::Outcome::kConverted) << c.reason;
    ASSERT_EQ(c.templates.size(), 1u);
    EXPECT_EQ(c.templates[0].object["spec"]["spec"]["devices"].dump().find("dra.cpu"), std::string::npos);
    bool noted = false;
    for (const auto& w : c.warnings) noted = noted || w.find(k.note) != std::string::npos;
    EXPECT_TRUE(noted) << k.note << " in " << Json(c.warnings).dump();
  }
  Json init = PodWith({{"cpu", "1"}});
  init["spec"]["initContainers"] = Json::parse(
      R"([{"name":"prep","image":"x","resources":{"limits":{"nvidia.com/gpu":1,"cpu":"4"}}}])");
  auto i = ConvertPod(init, "ml", CpuPolicy("grouped"), topo.get());
  ASSERT_EQ(i.outcome, PodConversion::Outcome::kConverted) << i.reason;
  bool noted = false;
  for (const auto& w : i.warnings) noted = noted || w.find("\"prep\": a plain init container") != std::string::npos;
  EXPECT_TRUE(noted) << Json(i.warnings).dump();
  EXPECT_EQ(i.pod["spec"]["initContainers"][0]["resources"]["claims"],
            Json::parse(R"([{"name":"draguard-gpu","request":"gpu"}])"));
}

// Refusals with the numbers: GPUs that need several NUMA nodes, CPUs that no NUMA node next to the
// GPUs has.
TEST(ConvertPod, CpusThatNoNumaNodeCanHoldNextToTheGpus) {
  auto topo = testing::Topo(testing::kG4dn);
  auto many = ConvertPod(PodWith({{"nvidia.com/gpu", 8}, {"cpu", "8"}}), "ml", CpuPolicy("grouped"), topo.get());
  ASSERT_EQ(many.outcome, PodConversion::Outcome::kRefused);
  EXPECT_NE(many.reason.find("with 8 CPUs on their NUMA node (mutation.cpu); at most 4 of them on one NUMA node"),
            std::string::npos) << many.reason;
  EXPECT_NE(many.reason.find("the GPUs need several NUMA nodes"), std::string::npos) << many.reason;
  auto cpus = ConvertPod(PodWith({{"nvidia.com/gpu", 2}, {"cpu", "64"}}), "ml", CpuPolicy("individual"), topo.get());
  ASSERT_EQ(cpus.outcome, PodConversion::Outcome::kRefused);
  EXPECT_NE(cpus.reason.find("at most 48 CPUs on a NUMA node with 2 of the GPUs. Fix: ask for at most 48 CPUs"),
            std::string::npos) << cpus.reason;
  EXPECT_EQ(ConvertPod(PodWith({{"nvidia.com/gpu", 4}, {"cpu", "48"}}), "ml", CpuPolicy("grouped"), topo.get()).outcome,
            PodConversion::Outcome::kConverted);
}

// A GPU whose memory is a NUMA node of its own (POWER9 here, Grace alike) publishes that node as
// resource.kubernetes.io/numaNode: no numaNode constraint can tie it to CPUs or to another GPU,
// so none is written; GPUs of one socket are still aligned by the pcieRoots of its node.
TEST(ConvertPod, GpusWhoseMemoryIsANumaNodeAreNeverTiedByNumaNode) {
  auto topo = testing::Topo(testing::kPower9GpuMemory);
  auto two = ConvertPod(PodWith({{"nvidia.com/gpu", 2}}), "ml", DefaultPolicy(), topo.get());
  ASSERT_EQ(two.outcome, PodConversion::Outcome::kConverted) << two.reason;
  const std::string d = two.templates[0].object["spec"]["spec"]["devices"].dump();
  EXPECT_EQ(d.find("numaNode"), std::string::npos) << d;
  EXPECT_NE(d.find("pcieRoot"), std::string::npos) << d;
  // numaAlignment numaNode: the same pcieRoots of one NUMA node instead of a numaNode constraint.
  auto numa = ConvertPod(PodWith({{"nvidia.com/gpu", 2}}), "ml", CpuPolicy("none"), topo.get());
  ASSERT_EQ(numa.outcome, PodConversion::Outcome::kConverted) << numa.reason;
  EXPECT_EQ(numa.templates[0].object["spec"]["spec"]["devices"], two.templates[0].object["spec"]["spec"]["devices"]);
}

// mutation.cpu on GPUs whose memory is a NUMA node of its own (POWER9 here: CPU nodes 0 and 8, three
// GPUs each, memory nodes 250-255; Grace alike): each GPU its own request, the CPUs one, each with a
// subrequest per socket selecting its devices by numaNode, and numaNode constraints over the
// subrequests of two sockets, which fail when two sockets are chosen together.
TEST(ConvertPod, CpusOnTheSocketOfGpusWhoseMemoryIsANumaNode) {
  auto topo = testing::Topo(testing::kPower9GpuMemory);
  auto c = ConvertPod(PodWith({{"nvidia.com/gpu", 2}, {"cpu", "8"}}), "ml", CpuPolicy("grouped"), topo.get());
  ASSERT_EQ(c.outcome, PodConversion::Outcome::kConverted) << c.reason;
  const Json& d = c.templates[0].object["spec"]["spec"]["devices"];
  ASSERT_EQ(d["requests"].size(), 3u) << d.dump();
  const std::string in0 = "'numaNode' in device.attributes['resource.kubernetes.io'] && "
                          "device.attributes['resource.kubernetes.io'].numaNode in [";
  for (int i = 0; i < 2; ++i) {
    const Json& r = d["requests"][i];
    EXPECT_EQ(r["name"], "gpu-" + std::to_string(i));
    ASSERT_EQ(r["firstAvailable"].size(), 2u) << r.dump();
    EXPECT_EQ(r["firstAvailable"][0]["name"], "numa-1");
    EXPECT_EQ(r["firstAvailable"][0]["count"], 1);
    EXPECT_EQ(r["firstAvailable"][0]["selectors"].back()["cel"]["expression"], in0 + "253, 254, 255]");
    EXPECT_EQ(r["firstAvailable"][1]["selectors"].back()["cel"]["expression"], in0 + "250, 251, 252]");
  }
  const Json& cpu = d["requests"][2];
  EXPECT_EQ(cpu["name"], "cpu");
  EXPECT_EQ(cpu["firstAvailable"][0]["selectors"][0]["cel"]["expression"], in0 + "0]");
  EXPECT_EQ(cpu["firstAvailable"][1]["selectors"][0]["cel"]["expression"], in0 + "8]");
  EXPECT_EQ(cpu["firstAvailable"][1]["capacity"]["requests"]["dra.cpu/cpu"], "8");
  // 2 sockets, 2 GPUs: per ordered pair of sockets, one per GPU with the CPUs and one per GPU pair.
  ASSERT_EQ(d["constraints"].size(), 6u) << d["constraints"].dump();
  EXPECT_EQ(d["constraints"][0], Json::parse(R"({"requests":["gpu-0/numa-1","cpu/numa-2"],"matchAttribute":"resource.kubernetes.io/numaNode"})"));
  EXPECT_EQ(d["constraints"][2], Json::parse(R"({"requests":["gpu-0/numa-1","gpu-1/numa-2"],"matchAttribute":"resource.kubernetes.io/numaNode"})"));
  EXPECT_EQ(d["constraints"][5], Json::parse(R"({"requests":["gpu-0/numa-2","gpu-1/numa-1"],"matchAttribute":"resource.kubernetes.io/numaNode"})"));
  // The container lists every request (DG016 sees "cpu") and asks the kubelet for those CPUs.
  const Json& res = c.pod["spec"]["containers"][0]["resources"];
  EXPECT_EQ(res["claims"].size(), 3u) << res.dump();
  EXPECT_EQ(res["limits"]["cpu"], "8");
  // Four GPUs do not fit one socket (three each), and the message says so.
  auto four = ConvertPod(PodWith({{"nvidia.com/gpu", 4}, {"cpu", "8"}}), "ml", CpuPolicy("grouped"), topo.get());
  ASSERT_EQ(four.outcome, PodConversion::Outcome::kRefused);
  EXPECT_NE(four.reason.find("CPUs on their socket (mutation.cpu; the GPUs' memory is a NUMA node of its own, Grace and "
                             "POWER9): at most 3 of them on one socket"),
            std::string::npos)
      << four.reason;
  // Individual CPUs: a count per socket.
  auto ind = ConvertPod(PodWith({{"nvidia.com/gpu", 1}, {"cpu", "4"}}), "ml", CpuPolicy("individual"), topo.get());
  ASSERT_EQ(ind.outcome, PodConversion::Outcome::kConverted) << ind.reason;
  const Json& di = ind.templates[0].object["spec"]["spec"]["devices"];
  EXPECT_EQ(di["requests"][1]["firstAvailable"][0]["count"], 4) << di.dump();
  EXPECT_EQ(di["constraints"].size(), 2u);
}

// GPUs that need several NUMA nodes on an NVLink-complete shape: equal parts, each GPU part with
// its share of the CPUs on its own NUMA node (the DGX-2H export allows 2 CPUs per NUMA node).
TEST(ConvertPod, CpusSplitOverNumaNodesWithTheirGpus) {
  auto topo = testing::Topo(testing::kDgx2h);
  auto c = ConvertPod(PodWith({{"nvidia.com/gpu", 16}, {"cpu", "4"}}), "ml", CpuPolicy("individual"), topo.get());
  ASSERT_EQ(c.outcome, PodConversion::Outcome::kConverted) << c.reason;
  const Json& d = c.templates[0].object["spec"]["spec"]["devices"];
  ASSERT_EQ(d["requests"].size(), 4u) << d.dump();
  for (int i = 0; i < 2; ++i) {
    const std::string gpu = "gpu-part-" + std::to_string(i), cpu = "cpu-part-" + std::to_string(i);
    EXPECT_EQ(d["requests"][2 * i]["name"], gpu);
    EXPECT_EQ(d["requests"][2 * i]["exactly"]["count"], 8);
    EXPECT_EQ(d["requests"][2 * i + 1]["name"], cpu);
    EXPECT_EQ(d["requests"][2 * i + 1]["exactly"]["count"], 2);
    EXPECT_EQ(d["constraints"][i],
              Json({{"requests", {gpu, cpu}}, {"matchAttribute", "resource.kubernetes.io/numaNode"}})) << d.dump();
  }
  EXPECT_EQ(c.templates[0].object["spec"]["metadata"]["annotations"]["draguard.io/interconnect"], "nvlink");
  const Json& res = c.pod["spec"]["containers"][0]["resources"];
  EXPECT_EQ(res["claims"].size(), 4u) << res.dump();
  EXPECT_EQ(res["requests"]["cpu"], "4");
  // Uneven CPUs, or more CPUs than a NUMA node has: refused with why.
  for (const char* cpus : {"3", "16"}) {
    auto r = ConvertPod(PodWith({{"nvidia.com/gpu", 16}, {"cpu", cpus}}), "ml", CpuPolicy("individual"), topo.get());
    ASSERT_EQ(r.outcome, PodConversion::Outcome::kRefused) << cpus;
    EXPECT_NE(r.reason.find("no shape can split them into equal parts with their CPUs"), std::string::npos) << r.reason;
  }
  // g4dn: no NVLink, so no parts.
  auto g4 = ConvertPod(PodWith({{"nvidia.com/gpu", 8}, {"cpu", "8"}}), "ml", CpuPolicy("individual"),
                       testing::Topo(testing::kG4dn).get());
  EXPECT_EQ(g4.outcome, PodConversion::Outcome::kRefused) << g4.reason;
}

// Several GPU containers with CPUs: each claim is planned alone, then the Pod keeps only the
// shapes whose NUMA nodes hold all of them at once.
TEST(ConvertPod, CpusOfSeveralContainersMustFitTogether) {
  auto pod = [](int containers, int gpus, const char* cpus) {
    Json p = PodWith({{"nvidia.com/gpu", gpus}, {"cpu", cpus}});
    for (int i = 1; i < containers; ++i) {
      Json c = p["spec"]["containers"][0];
      c["name"] = "worker-" + std::to_string(i);
      p["spec"]["containers"].push_back(c);
    }
    return p;
  };
  auto g4dn = testing::Topo(testing::kG4dn);  // 2 NUMA nodes, 4 T4 and 48 CPUs each
  // Two containers of 4 GPUs and 40 CPUs: one per NUMA node. Three: no room.
  auto two = ConvertPod(pod(2, 4, "40"), "ml", CpuPolicy("grouped"), g4dn.get());
  EXPECT_EQ(two.outcome, PodConversion::Outcome::kConverted) << two.reason;
  auto three = ConvertPod(pod(3, 2, "40"), "ml", CpuPolicy("grouped"), g4dn.get());
  ASSERT_EQ(three.outcome, PodConversion::Outcome::kRefused);
  EXPECT_NE(three.reason.find("no node they may use has NUMA nodes for all their GPUs with their CPUs at once "
                              "(mutation.cpu: 2 GPUs with 40 CPUs, 2 GPUs with 40 CPUs, 2 GPUs with 40 CPUs"),
            std::string::npos) << three.reason;
  // In the mixed cluster the DGX-2H (2 CPUs per NUMA node) cannot take 8 CPUs, and a g4dn node
  // holds two of the four 4-GPU claims: refused, not pinned to the g4dn nodes.
  auto four = ConvertPod(pod(4, 4, "8"), "ml", CpuPolicy("grouped"), testing::Mixed().get());
  EXPECT_EQ(four.outcome, PodConversion::Outcome::kRefused) << four.reason;
  // Two 1-GPU containers with 2 CPUs fit both shapes (the DGX-2H on its two NUMA nodes).
  auto small = ConvertPod(pod(2, 1, "2"), "ml", CpuPolicy("grouped"), testing::Mixed().get());
  ASSERT_EQ(small.outcome, PodConversion::Outcome::kConverted) << small.reason;
  EXPECT_FALSE(small.pod["spec"].contains("affinity")) << small.pod["spec"].dump();
  // Three of them: the DGX-2H has two NUMA nodes of 2 CPUs, so the Pod is pinned to the g4dn nodes.
  auto three_small = ConvertPod(pod(3, 1, "2"), "ml", CpuPolicy("grouped"), testing::Mixed().get());
  ASSERT_EQ(three_small.outcome, PodConversion::Outcome::kConverted) << three_small.reason;
  const std::string affinity = three_small.pod["spec"]["affinity"].dump();
  EXPECT_NE(affinity.find("g4dn-a"), std::string::npos) << affinity;
  EXPECT_EQ(affinity.find("dgx-a"), std::string::npos) << affinity;
}

// A claim allocates at most 32 devices: in individual mode every CPU is one.
TEST(ConvertPod, IndividualCpusCountAgainstTheDeviceLimitOfAClaim) {
  auto g4dn = testing::Topo(testing::kG4dn);
  auto many = ConvertPod(PodWith({{"nvidia.com/gpu", 2}, {"cpu", "31"}}), "ml", CpuPolicy("individual"), g4dn.get());
  ASSERT_EQ(many.outcome, PodConversion::Outcome::kRefused);
  EXPECT_NE(many.reason.find("would allocate 33 devices, more than the 32 one claim can hold (in mutation.cpu "
                             "individual mode each CPU is a device). Fix: ask for at most 30 CPUs"),
            std::string::npos) << many.reason;
  EXPECT_EQ(ConvertPod(PodWith({{"nvidia.com/gpu", 2}, {"cpu", "30"}}), "ml", CpuPolicy("individual"), g4dn.get()).outcome,
            PodConversion::Outcome::kConverted);
  EXPECT_EQ(ConvertPod(PodWith({{"nvidia.com/gpu", 2}, {"cpu", "31"}}), "ml", CpuPolicy("grouped"), g4dn.get()).outcome,
            PodConversion::Outcome::kConverted);
}

// CpuPolicy(mode) where the NIC driver also publishes resource.kubernetes.io/numaNode (dranet
// after v1.4.0).
policy::Policy CpuPolicyStandardNic(const char* mode) {
  policy::Policy p = CpuPolicy(mode);
  p.mutation.nic.numa_attribute = policy::NicNumaAttribute::kStandard;
  p.fingerprint.clear();  // another policy than the file's: no memo shared with it
  return p;
}

// The XE8640-like server, whose GPUs each have an RDMA NIC (the fourth none) on a NUMA node of
// their own with one CPU, beside two shapes where 2 GPUs and 8 CPUs share a NUMA node but no RDMA
// NIC is under the GPUs' root: the node names the cluster test harness would give them.
std::shared_ptr<const topology::Snapshot> RailsBesideCpus() {
  static std::shared_ptr<const topology::Snapshot> snap =
      testing::Nodes({{"hwloc-synthetic/xe8640-like_4xH100-SXM_4numa_nvlink-all_3xmlx5.xml", "gpu-node-1"},
                      {std::string("hwloc/") + testing::kR740, "gpu-node-2"},
                      {std::string("hwloc/") + testing::kG4dn, "gpu-node-3"}});
  return snap;
}

// Found measuring: with CPUs, rails that only the XE8640 gives were refused with the numbers of the
// shapes the CPUs left ("at most 0 NVLink-connected, 0 under one PCIe root with an RDMA NIC, 0 with
// an RDMA NIC each under its own root (shape … (node gpu-node-2))"), while the same Pod without
// CPUs converts to rails there. The refusal names the real reason and what would work.
TEST(ConvertPod, ANicThatFitsOnlyWhereItsCpusCannotIsTheReasonGiven) {
  const Json rdma = {{"draguard.io/nic", "rdma"}};
  auto without = ConvertPod(PodWith({{"nvidia.com/gpu", 2}}, rdma), "ml", CpuPolicy("grouped"), RailsBesideCpus().get());
  ASSERT_EQ(without.outcome, PodConversion::Outcome::kConverted) << without.reason;
  EXPECT_NE(without.pod["spec"]["affinity"].dump().find("gpu-node-1"), std::string::npos);
  auto c = ConvertPod(PodWith({{"nvidia.com/gpu", 2}, {"cpu", "8"}}, rdma), "ml", CpuPolicy("grouped"),
                      RailsBesideCpus().get());
  ASSERT_EQ(c.outcome, PodConversion::Outcome::kRefused);
  EXPECT_EQ(c.reason.find("at most 0 NVLink-connected"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("no node can place 2 GPUs matching >= 1Gi with an RDMA NIC each under its own PCIe root and "
                          "8 CPUs on their NUMA node (mutation.cpu): on the nodes that give the GPUs their NICs (shape " +
                          RailsBesideCpus()->Find("gpu-node-1")->shape->fingerprint +
                          " (node gpu-node-1)), each of those GPUs with its NIC is on a NUMA node of its own, so the 8 "
                          "CPUs cannot share one NUMA node with all 2 GPUs. Fix: ask for at most 2 CPUs, a multiple of 2 "
                          "(draguard then splits them per GPU, each GPU's share on its own NUMA node with its NIC), or "
                          "leave the NIC out (draguard.io/nic: none)"),
            std::string::npos)
      << c.reason;
  // The same on the XE8640 alone, where the CPUs fit no shape at all (KeepShapesWithCpus refuses).
  auto alone = ConvertPod(PodWith({{"nvidia.com/gpu", 2}, {"cpu", "8"}}, rdma), "ml", CpuPolicy("grouped"),
                          testing::Nodes({{"hwloc-synthetic/xe8640-like_4xH100-SXM_4numa_nvlink-all_3xmlx5.xml", "xe-a"}}).get());
  ASSERT_EQ(alone.outcome, PodConversion::Outcome::kRefused);
  EXPECT_NE(alone.reason.find("each of those GPUs with its NIC is on a NUMA node of its own"), std::string::npos)
      << alone.reason;
}

// What that refusal says would work: the CPUs split per GPU. Rails on NUMA nodes of their own are
// split like NUMA parts: a CPU request per group of rails, tied to them by numaNode.
TEST(ConvertPod, RailsThatNeedSeveralNumaNodesAreSplitWithTheirCpus) {
  const Json rdma = {{"draguard.io/nic", "rdma"}};
  for (const char* mode : {"grouped", "individual"}) {
    SCOPED_TRACE(mode);
    auto c = ConvertPod(PodWith({{"nvidia.com/gpu", 2}, {"cpu", "2"}}, rdma), "ml", CpuPolicy(mode), RailsBesideCpus().get());
    ASSERT_EQ(c.outcome, PodConversion::Outcome::kConverted) << c.reason;
    ASSERT_EQ(c.templates.size(), 1u);
    const Json& devices = c.templates[0].object["spec"]["spec"]["devices"];
    std::vector<std::string> names;
    for (const auto& r : devices["requests"]) names.push_back(r["name"]);
    EXPECT_EQ(names, (std::vector<std::string>{"gpu-rail-0", "gpu-rail-0-nic", "gpu-rail-1", "gpu-rail-1-nic",
                                               "cpu-part-0", "cpu-part-1"}));
    const Json& cpu = devices["requests"][4]["exactly"];
    if (std::string(mode) == "grouped") {
      EXPECT_EQ(cpu["capacity"]["requests"]["dra.cpu/cpu"], "1");
    } else {
      EXPECT_EQ(cpu["count"], 1);
    }
    const Json numa0 = {{"matchAttribute", "resource.kubernetes.io/numaNode"}, {"requests", {"gpu-rail-0", "cpu-part-0"}}};
    const Json numa1 = {{"matchAttribute", "resource.kubernetes.io/numaNode"}, {"requests", {"gpu-rail-1", "cpu-part-1"}}};
    const Json pair0 = {{"matchAttribute", "resource.kubernetes.io/pcieRoot"}, {"requests", {"gpu-rail-0", "gpu-rail-0-nic"}}};
    EXPECT_EQ(devices["constraints"], Json::array({pair0,
                                                   {{"matchAttribute", "resource.kubernetes.io/pcieRoot"},
                                                    {"requests", {"gpu-rail-1", "gpu-rail-1-nic"}}},
                                                   numa0, numa1}))
        << devices["constraints"].dump();
    // Only the XE8640 has the rails; the container lists every request and keeps its 2 CPUs.
    EXPECT_EQ(c.pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                   ["nodeSelectorTerms"][0]["matchFields"][0]["values"],
              Json::array({"gpu-node-1"}));
    const Json& res = c.pod["spec"]["containers"][0]["resources"];
    EXPECT_EQ(res["claims"].size(), 6u);
    EXPECT_EQ(res["requests"]["cpu"], "2");
    EXPECT_EQ(res["limits"]["cpu"], "2");
  }
  // 3 GPUs with 3 CPUs: the XE8640's three rails, one per NUMA node; 4 cannot (the fourth GPU has no NIC).
  auto three = ConvertPod(PodWith({{"nvidia.com/gpu", 3}, {"cpu", "3"}}, rdma), "ml", CpuPolicy("grouped"),
                          RailsBesideCpus().get());
  EXPECT_EQ(three.outcome, PodConversion::Outcome::kConverted) << three.reason;
  // CPUs that do not divide evenly are not split: refused with what would work.
  auto odd = ConvertPod(PodWith({{"nvidia.com/gpu", 2}, {"cpu", "3"}}, rdma), "ml", CpuPolicy("grouped"),
                        RailsBesideCpus().get());
  ASSERT_EQ(odd.outcome, PodConversion::Outcome::kRefused);
  EXPECT_NE(odd.reason.find("ask for at most 2 CPUs, a multiple of 2"), std::string::npos) << odd.reason;
}

// Where dranet publishes resource.kubernetes.io/numaNode (mutation.nic.numaAttribute: standard),
// NIC requests join the numaNode constraint of their GPUs and CPUs directly; with dranet v1.4.0
// (the default) they cannot (a matchAttribute over a device without the attribute is never met).
TEST(ConvertPod, NicsJoinTheNumaNodeConstraintWhereTheirDriverPublishesIt) {
  const Json rdma = {{"draguard.io/nic", "rdma"}};
  auto rails = ConvertPod(PodWith({{"nvidia.com/gpu", 2}, {"cpu", "2"}}, rdma), "ml", CpuPolicyStandardNic("grouped"),
                          RailsBesideCpus().get());
  ASSERT_EQ(rails.outcome, PodConversion::Outcome::kConverted) << rails.reason;
  const Json& constraints = rails.templates[0].object["spec"]["spec"]["devices"]["constraints"];
  EXPECT_NE(std::find(constraints.begin(), constraints.end(),
                      Json{{"matchAttribute", "resource.kubernetes.io/numaNode"},
                           {"requests", {"gpu-rail-0", "gpu-rail-0-nic", "cpu-part-0"}}}),
            constraints.end())
      << constraints.dump();
  // One GPU with its NIC under its root and a CPU on its NUMA node (no rails).
  auto one = ConvertPod(PodWith({{"nvidia.com/gpu", 1}, {"cpu", "1"}}, rdma), "ml", CpuPolicyStandardNic("grouped"),
                        RailsBesideCpus().get());
  ASSERT_EQ(one.outcome, PodConversion::Outcome::kConverted) << one.reason;
  const Json& one_constraints = one.templates[0].object["spec"]["spec"]["devices"]["constraints"];
  EXPECT_NE(std::find(one_constraints.begin(), one_constraints.end(),
                      Json{{"matchAttribute", "resource.kubernetes.io/numaNode"}, {"requests", {"gpu", "gpu-nic", "cpu"}}}),
            one_constraints.end())
      << one_constraints.dump();
  auto driver = ConvertPod(PodWith({{"nvidia.com/gpu", 1}, {"cpu", "1"}}, rdma), "ml", CpuPolicy("grouped"),
                           RailsBesideCpus().get());
  ASSERT_EQ(driver.outcome, PodConversion::Outcome::kConverted) << driver.reason;
  EXPECT_EQ(driver.templates[0].object["spec"]["spec"]["devices"]["constraints"].dump().find("\"gpu-nic\",\"cpu\""),
            std::string::npos);
  // Different policies, different templates: the memo keys apart.
  EXPECT_NE(driver.templates[0].name, one.templates[0].name);
}

// In a mixed cluster the Pod is restricted to the shapes with a NUMA node holding the GPUs and the
// CPUs: the DGX-2H export's cpuset allows 2 CPUs per NUMA node.
TEST(ConvertPod, CpusRestrictToTheShapesThatHoldThem) {
  auto c = ConvertPod(PodWith({{"nvidia.com/gpu", 2}, {"cpu", "16"}}), "ml", CpuPolicy("grouped"), testing::Mixed().get());
  ASSERT_EQ(c.outcome, PodConversion::Outcome::kConverted) << c.reason;
  const Json& terms = c.pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                              ["nodeSelectorTerms"];
  EXPECT_NE(terms.dump().find("g4dn-a"), std::string::npos) << terms.dump();
  EXPECT_NE(terms.dump().find("g4dn-b"), std::string::npos) << terms.dump();
  EXPECT_EQ(terms.dump().find("dgx-a"), std::string::npos) << terms.dump();
  auto two = ConvertPod(PodWith({{"nvidia.com/gpu", 2}, {"cpu", "2"}}), "ml", CpuPolicy("grouped"), testing::Mixed().get());
  ASSERT_EQ(two.outcome, PodConversion::Outcome::kConverted) << two.reason;
  EXPECT_NE(two.pod.dump().find("dgx-a"), std::string::npos) << two.pod.dump();
}

TEST(ConvertPod, RefusalsExplain) {
  auto c = ConvertPod(PodWith({{"nvidia.com/gpu", 8}}), "ml", DefaultPolicy(), testing::Topo(testing::kG4dn).get());
  EXPECT_EQ(c.outcome, PodConversion::Outcome::kRefused);
  EXPECT_NE(c.reason.find("request \"gpu\""), std::string::npos) << c.reason;
  EXPECT_TRUE(c.patch.empty());
  EXPECT_TRUE(c.templates.empty());
}

TEST(ConvertPod, ZeroCountsAreRemovedWithoutAClaim) {
  auto c = ConvertPod(PodWith({{"nvidia.com/gpu", 0}, {"cpu", 1}}), "ml", DefaultPolicy(), nullptr);
  ASSERT_EQ(c.outcome, PodConversion::Outcome::kConverted);
  EXPECT_TRUE(c.templates.empty());
  EXPECT_FALSE(c.pod["spec"].contains("resourceClaims"));
}

TEST(ConvertObject, ConvertsEveryPodTemplateOfAWorkload) {
  Json deploy = R"({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "ml"},
    "spec": {"template": {"metadata": {"labels": {"app": "web"}},
      "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}})"_json;
  auto r = ConvertObject(deploy, "default", DefaultPolicy(), nullptr);
  EXPECT_TRUE(r.changed);
  EXPECT_TRUE(r.errors.empty());
  ASSERT_EQ(r.templates.size(), 1u);
  EXPECT_EQ(r.templates[0].object["metadata"]["namespace"], "ml");
  const Json& spec = r.object["spec"]["template"]["spec"];
  EXPECT_EQ(spec["resourceClaims"][0]["resourceClaimTemplateName"], r.templates[0].name);
  EXPECT_FALSE(spec["containers"][0]["resources"].contains("limits"));
  EXPECT_EQ(r.object["spec"]["template"]["metadata"], deploy["spec"]["template"]["metadata"]);
  // Objects without pod specs pass through.
  auto cm = ConvertObject(R"({"apiVersion": "v1", "kind": "ConfigMap"})"_json, "default", DefaultPolicy(), nullptr);
  EXPECT_FALSE(cm.changed);
}

}  // namespace
}  // namespace draguard::mutation

namespace draguard::mutation {
namespace {

TEST(ConvertPod, EachContainerGetsItsOwnClaimAndTheyMustFitOneNodeTogether) {
  auto pol = testing::DefaultPolicy();
  Json pod = PodWith({{"nvidia.com/gpu", 1}});
  Json second = pod["spec"]["containers"][0];
  second["name"] = "helper";
  pod["spec"]["containers"].push_back(second);
  // r740 has two V100s: two one-GPU containers fit, each with its own claim.
  auto c = ConvertPod(pod, "ml", pol, testing::Topo(testing::kR740).get());
  ASSERT_EQ(c.outcome, PodConversion::Outcome::kConverted) << c.reason;
  ASSERT_EQ(c.templates.size(), 1u);  // equal profiles, one template
  const Json& rcs = c.pod["spec"]["resourceClaims"];
  ASSERT_EQ(rcs.size(), 2u);
  EXPECT_EQ(rcs[0]["resourceClaimTemplateName"], c.templates[0].name);
  EXPECT_EQ(rcs[1]["resourceClaimTemplateName"], c.templates[0].name);
  EXPECT_EQ(rcs[0]["name"], "draguard-gpu");
  EXPECT_EQ(rcs[1]["name"], "draguard-gpu-2");
  EXPECT_EQ(c.pod["spec"]["containers"][1]["resources"]["claims"][0]["name"], "draguard-gpu-2");
  // A third container does not fit any node.
  pod["spec"]["containers"].push_back(second);
  pod["spec"]["containers"][2]["name"] = "third";
  auto three = ConvertPod(pod, "ml", pol, testing::Topo(testing::kR740).get());
  EXPECT_EQ(three.outcome, PodConversion::Outcome::kRefused);
  EXPECT_NE(three.reason.find("no node can hold all their devices"), std::string::npos) << three.reason;
}

// KServe's predictor.model is a container whose parent (the predictor) takes pod-level claims.
TEST(ConvertObject, KserveModelContainerGetsItsClaimInThePredictor) {
  auto pol = DefaultPolicy();
  Json isvc = R"({"apiVersion":"serving.kserve.io/v1beta1","kind":"InferenceService","metadata":{"name":"m"},
    "spec":{"predictor":{"model":{"modelFormat":{"name":"huggingface"},
      "resources":{"limits":{"nvidia.com/gpu":"1","cpu":"4"}}}}}})"_json;
  auto c = ConvertObject(isvc, "ml", pol, nullptr);
  ASSERT_TRUE(c.errors.empty()) << c.errors[0];
  ASSERT_TRUE(c.changed);
  ASSERT_EQ(c.templates.size(), 1u);
  const Json& predictor = c.object["spec"]["predictor"];
  EXPECT_EQ(predictor["model"]["resources"]["limits"], Json({{"cpu", "4"}}));
  EXPECT_EQ(predictor["model"]["resources"]["claims"], Json::parse(R"([{"name":"draguard-gpu","request":"gpu"}])"));
  EXPECT_FALSE(predictor["model"].contains("name"));
  ASSERT_EQ(predictor["resourceClaims"].size(), 1u);
  EXPECT_EQ(predictor["resourceClaims"][0]["resourceClaimTemplateName"], c.templates[0].name);
}

// No place for claims (TrainJob's resourcesPerNode), or a path draguard does not know: reported
// with the path, never a silent pass.
TEST(ConvertObject, LegacyRequestsLeftAreErrorsNamingThePath) {
  auto pol = DefaultPolicy();
  Json train = R"({"apiVersion":"trainer.kubeflow.org/v1alpha1","kind":"TrainJob","metadata":{"name":"t"},
    "spec":{"trainer":{"resourcesPerNode":{"limits":{"nvidia.com/gpu":8}}}}})"_json;
  auto c = ConvertObject(train, "ml", pol, nullptr);
  ASSERT_EQ(c.errors.size(), 1u);
  EXPECT_NE(c.errors[0].find("/spec/trainer"), std::string::npos) << c.errors[0];
  EXPECT_NE(c.errors[0].find("requests nvidia.com/gpu"), std::string::npos) << c.errors[0];
  EXPECT_NE(c.errors[0].find("not convertible"), std::string::npos) << c.errors[0];
  Json nim = R"({"apiVersion":"apps.nvidia.com/v1alpha1","kind":"NIMService","metadata":{"name":"n"},
    "spec":{"resources":{"limits":{"nvidia.com/gpu":1}}}})"_json;
  EXPECT_EQ(ConvertObject(nim, "ml", pol, nullptr).errors.size(), 1u);
  Json unknown = R"({"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"t"},
    "spec":{"worker":{"resources":{"limits":{"nvidia.com/gpu":"2"}}},"idle":{"resources":{"limits":{"nvidia.com/gpu":"0"}}}}})"_json;
  auto u = ConvertObject(unknown, "ml", pol, nullptr);
  ASSERT_EQ(u.errors.size(), 1u);
  EXPECT_NE(u.errors[0].find("/spec/worker/resources/limits/nvidia.com~1gpu"), std::string::npos) << u.errors[0];
}

// TemplateRefusals: the templates of a workload whose Pods /mutate would refuse, by the pointer
// of their spec; converted templates, templates without legacy requests and Pods are not listed.
TEST(TemplateRefusals, NameTheTemplatesWhosePodsWouldBeRefused) {
  const auto pol = DefaultPolicy();
  const auto g4dn = testing::Topo(testing::kG4dn);
  auto job = [](Json limits) {
    return Json{{"apiVersion", "batch/v1"},
                {"kind", "Job"},
                {"metadata", {{"name", "train"}, {"namespace", "ml"}}},
                {"spec", {{"template", {{"spec", testing::PodWith(std::move(limits))["spec"]}}}}}};
  };
  auto eight = TemplateRefusals(admission::CreateRequestFor(job({{"nvidia.com/gpu", 8}})), pol, g4dn.get());
  ASSERT_EQ(eight.size(), 1u);
  ASSERT_EQ(eight.begin()->first, "/spec/template/spec");
  EXPECT_NE(eight.begin()->second.find("no node can place 8 GPUs"), std::string::npos) << eight.begin()->second;
  EXPECT_TRUE(TemplateRefusals(admission::CreateRequestFor(job({{"nvidia.com/gpu", 4}})), pol, g4dn.get()).empty());
  EXPECT_TRUE(TemplateRefusals(admission::CreateRequestFor(job({{"cpu", 4}})), pol, g4dn.get()).empty());
  // A Pod's own spec is /mutate's to judge.
  EXPECT_TRUE(TemplateRefusals(admission::CreateRequestFor(testing::PodWith({{"nvidia.com/gpu", 8}})), pol, g4dn.get())
                  .empty());
  // A CronJob's template, by its own pointer.
  Json cron = {{"apiVersion", "batch/v1"},
               {"kind", "CronJob"},
               {"metadata", {{"name", "nightly"}, {"namespace", "ml"}}},
               {"spec", {{"jobTemplate", job({{"nvidia.com/gpu", 8}})}}}};
  auto c = TemplateRefusals(admission::CreateRequestFor(cron), pol, g4dn.get());
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c.begin()->first, "/spec/jobTemplate/spec/template/spec");
}

}  // namespace
}  // namespace draguard::mutation
