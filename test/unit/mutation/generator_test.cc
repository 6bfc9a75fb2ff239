// GenerateTemplate: placement from the topology, selectors, names.
#include <filesystem>
#include <fstream>
#include <iostream>

#include "draguard/cel/checker.h"
#include "draguard/mutation/mutation.h"
#include "testing.h"

namespace draguard::mutation {
namespace {

using testing::DefaultPolicy;
using testing::Json;
using testing::Topo;

ClaimProfile Gpus(int64_t n, std::string memory = "1Gi", bool nic = false, std::string interconnect = "") {
  ClaimProfile p;
  RequestProfile r;
  r.count = n;
  r.memory = std::move(memory);
  p.entries.push_back({"gpu", r});
  p.nic = nic;
  p.interconnect = std::move(interconnect);
  return p;
}

const Json& Devices(const GeneratedTemplate& t) { return t.object["spec"]["spec"]["devices"]; }

// Every selector of the template compiles in the DRA environment.
void ExpectSelectorsCompile(const GeneratedTemplate& t) {
  for (const auto& req : Devices(t)["requests"]) {
    std::vector<Json> subs;
    if (req.contains("exactly")) subs.push_back(req["exactly"]);
    if (req.contains("firstAvailable")) for (const auto& s : req["firstAvailable"]) subs.push_back(s);
    for (const auto& s : subs) {
      for (const auto& sel : s["selectors"]) {
        auto c = cel::CompileSelector(sel["cel"]["expression"].get<std::string>());
        EXPECT_TRUE(c.ok()) << sel.dump() << ": " << c.status().message();
      }
    }
  }
}

TEST(GenerateTemplate, ObjectShapeLabelsAndContentAddressedName) {
  auto pol = DefaultPolicy();
  auto t = GenerateTemplate(Gpus(1), "ml", pol, nullptr);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->object["apiVersion"], "resource.k8s.io/v1");
  EXPECT_EQ(t->object["kind"], "ResourceClaimTemplate");
  EXPECT_EQ(t->object["metadata"]["namespace"], "ml");
  EXPECT_EQ(t->object["metadata"]["name"], t->name);
  EXPECT_EQ(t->object["metadata"]["labels"]["app.kubernetes.io/managed-by"], "draguard");
  EXPECT_EQ(t->object["metadata"]["annotations"]["draguard.io/profile"], "1x full GPU >= 1Gi");
  EXPECT_EQ(t->name.size(), std::string("draguard-").size() + 20);
  const Json& req = Devices(*t)["requests"][0];
  EXPECT_EQ(req["name"], "gpu");
  EXPECT_EQ(req["exactly"]["deviceClassName"], "gpu.nvidia.com");
  EXPECT_EQ(req["exactly"]["count"], 1);
  EXPECT_EQ(req["exactly"]["selectors"][0]["cel"]["expression"],
            "'memory' in device.capacity['gpu.nvidia.com'] && "
            "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('1Gi')) >= 0");
  EXPECT_FALSE(Devices(*t).contains("constraints"));
  // Same profile: same name in any namespace; another profile: another name.
  auto again = GenerateTemplate(Gpus(1), "other", pol, nullptr);
  EXPECT_EQ(again->name, t->name);
  EXPECT_NE(GenerateTemplate(Gpus(1, "2Gi"), "ml", pol, nullptr)->name, t->name);
  ExpectSelectorsCompile(*t);
}

TEST(GenerateTemplate, WithoutTopologyMultiGpuIsRefusedWithHowToProvideExports) {
  auto t = GenerateTemplate(Gpus(2), "ml", DefaultPolicy(), nullptr);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("no topology is loaded for any node"), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find("--topology-configmaps"), std::string::npos) << t.status().message();
  // A GPU and a NIC need a topology as well; one GPU does not.
  EXPECT_FALSE(GenerateTemplate(Gpus(1, "1Gi", true), "ml", DefaultPolicy(), nullptr).ok());
  EXPECT_TRUE(GenerateTemplate(Gpus(1), "ml", DefaultPolicy(), nullptr).ok());
  // Allowed by the policy: unaligned, with a note.
  auto pol = DefaultPolicy();
  pol.mutation.allow_unaligned = true;
  pol.fingerprint.clear();
  auto u = GenerateTemplate(Gpus(2), "ml", pol, nullptr);
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->placements[0], Placement::kUnaligned);
  EXPECT_FALSE(Devices(*u).contains("constraints"));
  ASSERT_FALSE(u->notes.empty());
  EXPECT_NE(u->notes[0].find("no topology"), std::string::npos);
}

TEST(GenerateTemplate, TwoT4sShareARootOnEveryG4dnRoot) {
  auto t = GenerateTemplate(Gpus(2), "ml", DefaultPolicy(), Topo(testing::kG4dn).get());
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->placements[0], Placement::kPcieRoot);
  EXPECT_TRUE(t->nodes.empty());  // every node can do it: no restriction
  // One root first; on a node whose roots have one free T4 each, two of one NUMA node.
  EXPECT_EQ(t->description, "2x full GPU >= 1Gi, same PCIe root, else NUMA-local, 3 alternatives first available");
  const Json& req = Devices(*t)["requests"][0];
  ASSERT_TRUE(req.contains("firstAvailable")) << req.dump();
  EXPECT_EQ(req["firstAvailable"][0]["name"], "pcie-1");
  EXPECT_EQ(req["firstAvailable"][1]["name"], "numa-1");
  EXPECT_EQ(Devices(*t)["constraints"][0]["requests"], Json::array({"gpu/pcie-1"}));
}

TEST(GenerateTemplate, FourT4sFallBackToNumaLocalRootSets) {
  auto t = GenerateTemplate(Gpus(4), "ml", DefaultPolicy(), Topo(testing::kG4dn).get());
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->placements[0], Placement::kNuma);
  const Json& req = Devices(*t)["requests"][0];
  ASSERT_TRUE(req.contains("firstAvailable")) << req.dump();
  ASSERT_EQ(req["firstAvailable"].size(), 2u);
  EXPECT_EQ(req["firstAvailable"][0]["name"], "numa-1");
  EXPECT_EQ(req["firstAvailable"][0]["count"], 4);
  EXPECT_EQ(req["firstAvailable"][0]["selectors"][1]["cel"]["expression"],
            "'pcieRoot' in device.attributes['resource.kubernetes.io'] && "
            "device.attributes['resource.kubernetes.io'].pcieRoot in ['pci0000:17', 'pci0000:34']");
  EXPECT_NE(req["firstAvailable"][1]["selectors"][1]["cel"]["expression"].get<std::string>().find(
                "['pci0000:e6', 'pci0000:f3']"),
            std::string::npos);
  EXPECT_FALSE(Devices(*t).contains("constraints"));
  ExpectSelectorsCompile(*t);
}

TEST(GenerateTemplate, EightT4sCannotBeAlignedAndSayWhy) {
  auto pol = DefaultPolicy();
  auto t = GenerateTemplate(Gpus(8), "ml", pol, Topo(testing::kG4dn).get());
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("no node can place 8 GPUs"), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find("4 on one NUMA node"), std::string::npos) << t.status().message();
  pol.mutation.allow_unaligned = true;
  pol.fingerprint.clear();  // changed in code: no longer the parsed document
  auto u = GenerateTemplate(Gpus(8), "ml", pol, Topo(testing::kG4dn).get());
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->placements[0], Placement::kUnaligned);
  EXPECT_FALSE(u->notes.empty());
}

TEST(GenerateTemplate, MoreGpusThanAnyNodeHasIsRefused) {
  auto t = GenerateTemplate(Gpus(16), "ml", DefaultPolicy(), Topo(testing::kG4dn).get());
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("no node has 16 GPUs"), std::string::npos) << t.status().message();
}

TEST(GenerateTemplate, RdmaNicMustShareTheGpusRoot) {
  // g4dn: the EFA NIC sits under a root without GPUs.
  auto g4 = GenerateTemplate(Gpus(1, "1Gi", true), "ml", DefaultPolicy(), Topo(testing::kG4dn).get());
  ASSERT_FALSE(g4.ok());
  EXPECT_NE(g4.status().message().find("RDMA NIC"), std::string::npos) << g4.status().message();
  // lassen: the mlx5 NICs have roots of their own (ground truth).
  EXPECT_FALSE(GenerateTemplate(Gpus(1, "1Gi", true), "ml", DefaultPolicy(), Topo(testing::kLassen).get()).ok());
  // pascal: both P100s and an mlx5 NIC under host bridge 0000:[00-0c].
  auto lassen = GenerateTemplate(Gpus(2, "1Gi", true), "ml", DefaultPolicy(), Topo(testing::kPascal).get());
  ASSERT_TRUE(lassen.ok()) << lassen.status().message();
  EXPECT_EQ(lassen->placements[0], Placement::kPcieRoot);
  const Json& devices = Devices(*lassen);
  ASSERT_EQ(devices["requests"].size(), 2u);
  EXPECT_EQ(devices["requests"][1]["name"], "gpu-nic");
  EXPECT_EQ(devices["requests"][1]["exactly"]["deviceClassName"], "dranet");
  EXPECT_EQ(devices["constraints"][0]["requests"], Json::array({"gpu", "gpu-nic"}));
  EXPECT_EQ(lassen->description, "2x full GPU >= 1Gi, same PCIe root as 1 RDMA NIC");
  ExpectSelectorsCompile(*lassen);
}

TEST(GenerateTemplate, NvlinkOnNvswitchNeedsNoRestrictionButIsDeclared) {
  auto t = GenerateTemplate(Gpus(8, "1Gi", false, "nvlink"), "ml", DefaultPolicy(), Topo(testing::kDgx2h).get());
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->placements[0], Placement::kNvlink);
  EXPECT_EQ(t->object["spec"]["metadata"]["annotations"]["draguard.io/interconnect"], "nvlink");
  EXPECT_TRUE(Devices(*t)["requests"][0].contains("exactly"));
}

TEST(GenerateTemplate, NvlinkPairsAreNamedByPciBusAddress) {
  auto t = GenerateTemplate(Gpus(2, "1Gi", false, "nvlink"), "ml", DefaultPolicy(), Topo(testing::kMinsky).get());
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->placements[0], Placement::kNvlink);
  const Json& req = Devices(*t)["requests"][0];
  ASSERT_TRUE(req.contains("firstAvailable")) << req.dump();
  ASSERT_EQ(req["firstAvailable"].size(), 2u);  // GPUs 0+1 and 2+3
  EXPECT_EQ(req["firstAvailable"][0]["selectors"].back()["cel"]["expression"],
            "'pciBusID' in device.attributes['resource.kubernetes.io'] && "
            "device.attributes['resource.kubernetes.io'].pciBusID in ['0002:01:00.0', '0003:01:00.0']");
  EXPECT_EQ(req.dump().find("uuid"), std::string::npos);  // UUIDs are per node (or sanitised)
  EXPECT_TRUE(t->nodes.empty());
  ExpectSelectorsCompile(*t);
  // Three NVLink-connected GPUs do not exist there.
  EXPECT_FALSE(GenerateTemplate(Gpus(3, "1Gi", false, "nvlink"), "ml", DefaultPolicy(), Topo(testing::kMinsky).get()).ok());
  // By default the pairs come first as well (they share a NUMA node too, so nothing is added).
  auto d = GenerateTemplate(Gpus(2), "ml", DefaultPolicy(), Topo(testing::kMinsky).get());
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->placements[0], Placement::kNvlink);
  EXPECT_EQ(Devices(*d)["requests"][0]["firstAvailable"].size(), 2u);
}

TEST(GenerateTemplate, MemoryFloorIsLoweredToWhatTheGpusReport) {
  // No topology: the NVML table knows the H100 80GB reports 81559Mi.
  auto t = GenerateTemplate(Gpus(1, "80Gi"), "ml", DefaultPolicy(), nullptr);
  ASSERT_TRUE(t.ok());
  EXPECT_NE(Devices(*t)["requests"][0]["exactly"]["selectors"][0]["cel"]["expression"].get<std::string>().find(
                "quantity('81559Mi')"),
            std::string::npos);
  ASSERT_FALSE(t->notes.empty());
  // r740: "32Gi" means the V100 32GB, which the export reports as 32494Mi.
  auto r = GenerateTemplate(Gpus(1, "32Gi"), "ml", DefaultPolicy(), Topo(testing::kR740).get());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NE(Devices(*r)["requests"][0]["exactly"]["selectors"][0]["cel"]["expression"].get<std::string>().find(
                "quantity('32494Mi')"),
            std::string::npos);
  // A floor no GPU comes near stays and is refused with the largest memory seen.
  auto big = GenerateTemplate(Gpus(1, "40Gi"), "ml", DefaultPolicy(), Topo(testing::kR740).get());
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find(">= 40Gi"), std::string::npos) << big.status().message();
}

TEST(GenerateTemplate, MigPinsTheProfileAndAlignsSeveralDevices) {
  ClaimProfile p;
  RequestProfile r;
  r.kind = RequestProfile::Kind::kMig;
  r.mig_profile = "3g.40gb";
  r.count = 2;
  p.entries.push_back({"gpu", r});
  auto t = GenerateTemplate(p, "ml", DefaultPolicy(), Topo(testing::kG4dn).get());
  ASSERT_TRUE(t.ok()) << t.status().message();
  const Json& ex = Devices(*t)["requests"][0]["exactly"];
  EXPECT_EQ(ex["deviceClassName"], "mig.nvidia.com");
  EXPECT_EQ(ex["selectors"][0]["cel"]["expression"],
            "'profile' in device.attributes['gpu.nvidia.com'] && "
            "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'");
  EXPECT_EQ(Devices(*t)["constraints"][0]["matchAttribute"], "resource.kubernetes.io/pcieRoot");
  EXPECT_FALSE(Devices(*t).contains("config"));
}

TEST(GenerateTemplate, SharedGetsABoundedMpsConfig) {
  ClaimProfile p;
  RequestProfile r;
  r.kind = RequestProfile::Kind::kShared;
  r.memory = "1Gi";
  r.mps_threads = 25;
  r.mps_memory = "8Gi";
  p.entries.push_back({"gpu", r});
  auto t = GenerateTemplate(p, "ml", DefaultPolicy(), nullptr);
  ASSERT_TRUE(t.ok());
  const Json& cfg = Devices(*t)["config"][0];
  EXPECT_EQ(cfg["requests"], Json::array({"gpu"}));
  EXPECT_EQ(cfg["opaque"]["driver"], "gpu.nvidia.com");
  EXPECT_EQ(cfg["opaque"]["parameters"]["kind"], "GpuConfig");
  EXPECT_EQ(cfg["opaque"]["parameters"]["sharing"]["strategy"], "MPS");
  EXPECT_EQ(cfg["opaque"]["parameters"]["sharing"]["mpsConfig"]["defaultActiveThreadPercentage"], 25);
  EXPECT_EQ(cfg["opaque"]["parameters"]["sharing"]["mpsConfig"]["defaultPinnedDeviceMemoryLimit"], "8Gi");
}

TEST(GenerateTemplate, LatencySensitiveTemplatesCarryTheClassLabels) {
  ClaimProfile p = Gpus(1);
  p.entries[0].profile.latency_sensitive = true;
  auto t = GenerateTemplate(p, "ml", DefaultPolicy(), nullptr);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->object["spec"]["metadata"]["labels"]["draguard.io/workload-class"], "latency-sensitive");
  EXPECT_FALSE(Devices(*t).contains("config"));
}

TEST(GenerateTemplate, MixedClusterRestrictsToTheShapesThatCanAlign) {
  auto snap = testing::Mixed();
  ASSERT_TRUE(snap);
  auto pol = DefaultPolicy();
  auto t = GenerateTemplate(Gpus(4), "ml", pol, snap.get());
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->placements[0], Placement::kNvlink);  // NVSwitch, and 4 GPUs per root first
  EXPECT_EQ(t->nodes, std::vector<std::string>{"dgx-a"});
  ASSERT_EQ(t->shapes.size(), 1u);
  EXPECT_EQ(t->shapes[0], snap->Find("dgx-a")->shape->fingerprint);
}

// The default policy with `from` replaced by `to` in its source, parsed.
policy::Policy DefaultPolicyWith(const std::string& from, const std::string& to) {
  std::string yaml(policy::DefaultPolicyYaml());
  const std::size_t at = yaml.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) yaml.replace(at, from.size(), to);
  auto p = policy::ParsePolicy(yaml);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? *p : policy::Policy{};
}

// Templates are remembered per topology snapshot: a policy that differs in any field the generator
// reads gets its own template under the same snapshot, not the one generated for the other policy.
TEST(GenerateTemplate, AnotherPolicyIsNotServedTheTemplateOfTheFirstUnderTheSameSnapshot) {
  // Templates are remembered by the policy's fingerprint: equal documents share them.
  EXPECT_FALSE(DefaultPolicy().fingerprint.empty());
  EXPECT_EQ(DefaultPolicy().fingerprint, DefaultPolicy().fingerprint);
  EXPECT_NE(DefaultPolicyWith("unaligned: deny", "unaligned: allow").fingerprint, DefaultPolicy().fingerprint);
  auto mixed = testing::Mixed();
  ASSERT_TRUE(mixed);
  // A field the generator writes into its output: node names up to the limit, else shapes.
  auto pinned = GenerateTemplate(Gpus(4), "ml", DefaultPolicy(), mixed.get());
  auto by_shape = GenerateTemplate(Gpus(4), "ml", DefaultPolicyWith("hostnameAffinityLimit: 8",
                                                                     "hostnameAffinityLimit: 0"), mixed.get());
  ASSERT_TRUE(pinned.ok() && by_shape.ok());
  EXPECT_EQ(pinned->nodes, std::vector<std::string>{"dgx-a"});
  EXPECT_TRUE(by_shape->nodes.empty());
  EXPECT_EQ(by_shape->shapes, pinned->shapes);

  // A field only the satisfiability check reads: listing the NIC class among the GPU classes makes
  // the NIC request a GPU request, which no GPU can satisfy.
  auto pascal = Topo(testing::kPascal);
  ASSERT_TRUE(GenerateTemplate(Gpus(2, "1Gi", true), "ml", DefaultPolicy(), pascal.get()).ok());
  auto nic_as_gpu = GenerateTemplate(Gpus(2, "1Gi", true), "ml",
                                     DefaultPolicyWith("gpu: [gpu.nvidia.com]", "gpu: [gpu.nvidia.com, dranet]"),
                                     pascal.get());
  ASSERT_FALSE(nic_as_gpu.ok());
  EXPECT_NE(nic_as_gpu.status().message().find("cannot be satisfied"), std::string::npos)
      << nic_as_gpu.status().message();

  // Label maps that flatten to the same "key=value" text are different policies.
  ClaimProfile latency = Gpus(1);
  latency.entries[0].profile.latency_sensitive = true;
  const std::string labels = "labels: {draguard.io/workload-class: latency-sensitive}";
  auto a = GenerateTemplate(latency, "ml", DefaultPolicyWith(labels, "labels: {a=b: c}"), pascal.get());
  auto b = GenerateTemplate(latency, "ml", DefaultPolicyWith(labels, "labels: {a: b=c}"), pascal.get());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->object["spec"]["metadata"]["labels"]["a=b"], "c");
  EXPECT_EQ(b->object["spec"]["metadata"]["labels"]["a"], "b=c");
  EXPECT_NE(a->name, b->name);
}

// mutation.kueue, with `numa_alignment` (numaNode unless said otherwise).
policy::Policy KueuePolicy(const std::string& numa_alignment = "numaNode") {
  std::string yaml(policy::DefaultPolicyYaml());
  yaml.replace(yaml.find("kueue: false"), 12, "kueue: true");
  yaml.replace(yaml.find("numaAlignment: pcieRoots"), 24, "numaAlignment: " + numa_alignment);
  auto p = policy::ParsePolicy(yaml);
  EXPECT_TRUE(p.ok()) << p.status().message();
  EXPECT_TRUE(p->mutation.kueue);
  return p.ok() ? *p : policy::Policy{};
}

// The GPU request of a template (the first request).
const Json& GpuRequestOf(const GeneratedTemplate& t) { return Devices(t)["requests"][0]; }

// mutation.kueue: every GPU request is one `exactly` request (Kueue v0.19 refuses firstAvailable),
// in the alignment that the most nodes can use, then the most GPU sets.
TEST(GenerateTemplate, KueueWritesOneRequestInTheAlignmentMostNodesCanUse) {
  const auto g4dn = Topo(testing::kG4dn);
  // Two T4s: one root first, else NUMA-local (firstAvailable) without; one numaNode constraint
  // (which every pair under one root also meets) with.
  auto plain = GenerateTemplate(Gpus(2), "ml", DefaultPolicyWith("numaAlignment: pcieRoots", "numaAlignment: numaNode"),
                                g4dn.get());
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  ASSERT_TRUE(GpuRequestOf(*plain).contains("firstAvailable")) << GpuRequestOf(*plain).dump();
  auto two = GenerateTemplate(Gpus(2), "ml", KueuePolicy(), g4dn.get());
  ASSERT_TRUE(two.ok()) << two.status().message();
  EXPECT_FALSE(GpuRequestOf(*two).contains("firstAvailable")) << GpuRequestOf(*two).dump();
  EXPECT_EQ(GpuRequestOf(*two)["exactly"]["count"], 2);
  EXPECT_EQ(Devices(*two)["constraints"],
            Json::array({{{"requests", {"gpu"}}, {"matchAttribute", "resource.kubernetes.io/numaNode"}}}));
  EXPECT_EQ(two->placements[0], Placement::kNuma);
  EXPECT_EQ(two->description, "2x full GPU >= 1Gi, NUMA-local");
  EXPECT_TRUE(two->nodes.empty() && two->shapes.empty());
  ExpectSelectorsCompile(*two);
  // Four: the one alignment without Kueue too.
  auto four = GenerateTemplate(Gpus(4), "ml", KueuePolicy(), g4dn.get());
  ASSERT_TRUE(four.ok()) << four.status().message();
  EXPECT_EQ(Devices(*four)["constraints"][0]["matchAttribute"], "resource.kubernetes.io/numaNode");
  EXPECT_EQ(GpuRequestOf(*four)["exactly"]["count"], 4);

  // DGX-2H (NVSwitch): any GPUs will do; without Kueue one root comes first.
  const auto dgx = Topo(testing::kDgx2h);
  auto nv = GenerateTemplate(Gpus(2), "ml", KueuePolicy(), dgx.get());
  ASSERT_TRUE(nv.ok()) << nv.status().message();
  EXPECT_FALSE(GpuRequestOf(*nv).contains("firstAvailable")) << GpuRequestOf(*nv).dump();
  EXPECT_FALSE(Devices(*nv).contains("constraints")) << Devices(*nv).dump();
  EXPECT_EQ(nv->placements[0], Placement::kNvlink);
  EXPECT_EQ(nv->object["spec"]["metadata"]["annotations"]["draguard.io/interconnect"], "nvlink");

  // Two g4dn.metal and a DGX-2H, 4 GPUs: without Kueue, NVLink first pins the Pod to the DGX-2H;
  // with it, the numaNode constraint every node can meet.
  auto mixed = testing::Mixed();
  auto pinned = GenerateTemplate(Gpus(4), "ml", DefaultPolicyWith("numaAlignment: pcieRoots", "numaAlignment: numaNode"),
                                 mixed.get());
  ASSERT_TRUE(pinned.ok()) << pinned.status().message();
  EXPECT_EQ(pinned->nodes, std::vector<std::string>{"dgx-a"});
  auto everywhere = GenerateTemplate(Gpus(4), "ml", KueuePolicy(), mixed.get());
  ASSERT_TRUE(everywhere.ok()) << everywhere.status().message();
  EXPECT_TRUE(everywhere->nodes.empty() && everywhere->shapes.empty()) << everywhere->object.dump();
  EXPECT_EQ(Devices(*everywhere)["constraints"][0]["matchAttribute"], "resource.kubernetes.io/numaNode");
}

// With pcieRoots, a NUMA-local placement is a selector on one NUMA node's roots: one of them alone
// would leave the other NUMA node's GPUs unused, so mutation.kueue refuses and says what to set.
TEST(GenerateTemplate, KueueRefusesWhereOnlyAlternativesCoveringPartOfANodeAlign) {
  const auto g4dn = Topo(testing::kG4dn);
  auto four = GenerateTemplate(Gpus(4), "ml", KueuePolicy("pcieRoots"), g4dn.get());
  ASSERT_FALSE(four.ok());
  const std::string why = four.status().message();  // a copy: status() returns by value
  EXPECT_NE(why.find("no node can place 4 GPUs matching >= 1Gi in one alignment without firstAvailable"),
            std::string::npos) << why;
  EXPECT_NE(why.find("the PCIe roots of one NUMA node"), std::string::npos) << why;
  EXPECT_NE(why.find("Fix: set mutation.numaAlignment: numaNode"), std::string::npos) << why;
  // Two T4s share a root on every root of the node: one constraint covers all of them.
  auto two = GenerateTemplate(Gpus(2), "ml", KueuePolicy("pcieRoots"), g4dn.get());
  ASSERT_TRUE(two.ok()) << two.status().message();
  EXPECT_FALSE(GpuRequestOf(*two).contains("firstAvailable"));
  EXPECT_EQ(Devices(*two)["constraints"][0]["matchAttribute"], "resource.kubernetes.io/pcieRoot");
  // Minsky: NVLink pairs by bus address cover half the GPUs each; numaNode covers both NUMA nodes.
  const auto minsky = Topo(testing::kMinsky);
  auto pair = GenerateTemplate(Gpus(2, "1Gi", false, "nvlink"), "ml", KueuePolicy(), minsky.get());
  ASSERT_FALSE(pair.ok());
  EXPECT_NE(pair.status().message().find("one NVLink clique"), std::string::npos) << pair.status().message();
  auto numa = GenerateTemplate(Gpus(2), "ml", KueuePolicy(), minsky.get());
  ASSERT_TRUE(numa.ok()) << numa.status().message();
  EXPECT_EQ(Devices(*numa)["constraints"][0]["matchAttribute"], "resource.kubernetes.io/numaNode");
}

// No template generated under mutation.kueue has firstAvailable: every export of test/data, 1 to
// 8 GPUs, with and without an RDMA NIC, both NUMA alignments. A request refused under Kueue that
// converts without it is refused for Kueue's reason.
TEST(GenerateTemplate, KueueNeverWritesFirstAvailable) {
  namespace fs = std::filesystem;
  std::vector<std::pair<std::string, std::shared_ptr<const topology::Snapshot>>> topologies;
  for (const char* dir : {"hwloc", "hwloc-synthetic", "hwloc-derived"}) {
    for (const auto& e : fs::directory_iterator(fs::path(DRAGUARD_TEST_DATA) / dir)) {
      if (e.path().extension() != ".xml") continue;
      auto snap = topology::LoadSnapshot(e.path().string());  // exports without PCI devices do not load
      if (snap.ok()) topologies.emplace_back(e.path().filename().string(), *snap);
    }
  }
  ASSERT_GE(topologies.size(), 15u);
  int converted = 0, refused_for_kueue = 0, first_available_without = 0;
  for (const std::string numa : {"numaNode", "pcieRoots"}) {
    const auto kueue = KueuePolicy(numa);
    const auto without = DefaultPolicyWith("numaAlignment: pcieRoots", "numaAlignment: " + numa);
    for (const auto& [f, topo] : topologies) {
      for (int n = 1; n <= 8; ++n) {
        for (bool nic : {false, true}) {
          auto t = GenerateTemplate(Gpus(n, "1Gi", nic), "ml", kueue, topo.get());
          auto w = GenerateTemplate(Gpus(n, "1Gi", nic), "ml", without, topo.get());
          if (w.ok() && w->object.dump().find("firstAvailable") != std::string::npos) ++first_available_without;
          if (t.ok()) {
            ++converted;
            EXPECT_EQ(t->object.dump().find("firstAvailable"), std::string::npos) << f << " " << n << " " << nic;
            ExpectSelectorsCompile(*t);
          } else if (w.ok()) {
            ++refused_for_kueue;
            EXPECT_NE(t.status().message().find("mutation.kueue"), std::string::npos)
                << f << " " << n << " " << nic << ": " << t.status().message();
          }
        }
      }
    }
  }
  EXPECT_GT(first_available_without, 10);  // the sweep reaches what mutation.kueue changes
  EXPECT_GT(converted, 50);
  EXPECT_GT(refused_for_kueue, 0);
  std::cout << "mutation.kueue sweep: " << converted << " converted, " << refused_for_kueue
            << " refused for Kueue, " << first_available_without << " with firstAvailable without it\n";
}

TEST(RenderCatalogue, OneTemplatePerProfileAndErrorsForImpossibleOnes) {
  auto pol = DefaultPolicy();
  policy::CatalogueProfile a;
  a.gpus = 2;
  policy::CatalogueProfile b;
  b.mig = "1g.10gb";
  policy::CatalogueProfile c;
  c.gpus = 32;
  pol.mutation.catalogue = {a, b, a, c};
  pol.fingerprint.clear();  // changed in code: no longer the parsed document
  std::vector<std::string> errors;
  auto ts = RenderCatalogue(pol, Topo(testing::kG4dn).get(), "", &errors);
  EXPECT_EQ(ts.size(), 2u);  // duplicates collapse
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("mutation.catalogue[3]"), std::string::npos);
  EXPECT_FALSE(ts[0].object["metadata"].contains("namespace"));
}

}  // namespace
}  // namespace draguard::mutation
