// CheckSatisfiable: claims against real hwloc exports (test/data/hwloc), through the simulated
// devices of draguard_dra.
#include "draguard/dra/satisfiability.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "draguard/topology/snapshot.h"
#include "rule_test_util.h"

namespace draguard::dra {
namespace {

using admission::Json;
using engine::testing::Claim;
using engine::testing::DefaultPolicy;
using engine::testing::Request;
using engine::testing::Template;

namespace fs = std::filesystem;
using Verdict = SatisfiabilityReport::Verdict;

constexpr const char* kG4dn = "aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml";
constexpr const char* kDgx2 = "hwloc_nvidia-dgx2h_2s-xeon8174_16xV100-SXM3_12xNVSwitch_nvlink-hetero.xml";
constexpr const char* kLassen = "llnl_lassen_ibm-ac922_2s-power9_4xV100-SXM2_cuda-nvml_4xmlx5.xml";
constexpr const char* kPascal = "llnl_pascal_relion-x1904gt_2s-e5-2695v4_2xP100-PCIe_cuda-nvml-opencl.xml";
constexpr const char* kClemson = "clemson-palmetto_dell-r740_2s-gold6248_2xV100-PCIe_cuda-nvml_mlx5.xml";
constexpr const char* kCorona = "llnl_corona_supermicro-4124gs_2s-epyc7402_8xMI50_rsmi-opencl.xml";

// A snapshot whose nodes are copies of exports: {{"node-a", kG4dn}, ...}.
std::shared_ptr<const topology::Snapshot> Cluster(const std::vector<std::pair<std::string, std::string>>& nodes) {
  static int n = 0;
  fs::path dir = fs::path(::testing::TempDir()) / ("sat-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
  fs::create_directories(dir);
  for (const auto& [name, file] : nodes) {
    fs::copy_file(fs::path(DRAGUARD_TEST_DATA) / "hwloc" / file, dir / (name + ".xml"),
                  fs::copy_options::overwrite_existing);
  }
  auto snap = topology::LoadSnapshot(dir.string());
  EXPECT_TRUE(snap.ok()) << snap.status().ToString();
  fs::remove_all(dir);
  return snap.ok() ? *snap : nullptr;
}

std::string Gpu(const std::string& name, int count, const std::string& selector = "") {
  std::string sel = selector.empty() ? "" : R"(,"selectors":[{"cel":{"expression":")" + selector + R"("}}])";
  return R"({"name":")" + name + R"(","exactly":{"deviceClassName":"gpu.nvidia.com","count":)" +
         std::to_string(count) + sel + "}}";
}

std::string Nic(const std::string& name, int count, const std::string& selector = "") {
  std::string sel = selector.empty() ? "" : R"(,"selectors":[{"cel":{"expression":")" + selector + R"("}}])";
  return R"({"name":")" + name + R"(","exactly":{"deviceClassName":"dranet","count":)" + std::to_string(count) + sel +
         "}}";
}

const std::string kPcie = R"({"matchAttribute":"resource.kubernetes.io/pcieRoot"})";

std::string Spec(const std::string& requests, const std::string& constraints = "") {
  return Template(R"({"devices":{"requests":[)" + requests + "]" +
                  (constraints.empty() ? "" : R"(,"constraints":[)" + constraints + "]") + "}}");
}

SatisfiabilityReport Check(const std::string& object, const topology::Snapshot& snap,
                           const policy::Policy& pol = policy::Policy{}) {
  return CheckSatisfiable(Json::parse(object), pol, snap);
}


const std::string kMem80 = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0";
const std::string kMem32 =
    "'memory' in device.capacity['gpu.nvidia.com'] && device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('32Gi')) >= 0";
const std::string kDriver550 = "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('550.0.0')) >= 0";

std::string Fingerprint(const topology::Snapshot& snap, const std::string& node) {
  return snap.Find(node)->shape->fingerprint;
}

TEST(Satisfiability, Count) {
  auto snap = Cluster({{"g4dn-a", kG4dn}, {"g4dn-b", kG4dn}, {"lassen", kLassen}});
  auto eight = Check(Spec(Gpu("gpus", 8)), *snap);
  EXPECT_EQ(eight.verdict, Verdict::kSatisfiable);
  EXPECT_EQ(eight.nodes, (std::vector<std::string>{"g4dn-a", "g4dn-b"}));
  EXPECT_TRUE(eight.unknown.empty());
  auto four = Check(Spec(Gpu("gpus", 4)), *snap);
  EXPECT_EQ(four.nodes, (std::vector<std::string>{"g4dn-a", "g4dn-b", "lassen"}));
  auto nine = Check(Spec(Gpu("gpus", 9)), *snap);
  ASSERT_EQ(nine.verdict, Verdict::kUnsatisfiable);
  EXPECT_TRUE(nine.nodes.empty());
  EXPECT_EQ(nine.message,
            "request \"gpus\" (9x gpu.nvidia.com): at most 8 of 9 GPUs qualify on one node (nodes g4dn-a, g4dn-b)");
  EXPECT_EQ(nine.pointer, "/spec/spec/devices/requests/0/exactly");
  EXPECT_NE(nine.hint.find("at most 8"), std::string::npos);
}

TEST(Satisfiability, FirstAvailable) {
  auto snap = Cluster({{"lassen", kLassen}});
  auto fa = [](int a, int b) {
    return Spec(R"({"name":"gpu","firstAvailable":[{"name":"many","deviceClassName":"gpu.nvidia.com","count":)" +
                std::to_string(a) + R"(},{"name":"few","deviceClassName":"gpu.nvidia.com","count":)" + std::to_string(b) +
                "}]}");
  };
  EXPECT_EQ(Check(fa(8, 2), *snap).verdict, Verdict::kSatisfiable);
  auto r = Check(fa(8, 6), *snap);
  ASSERT_EQ(r.verdict, Verdict::kUnsatisfiable);
  EXPECT_EQ(r.message, "request \"gpu/few\" (6x gpu.nvidia.com), the closest of 2 alternatives: at most 4 of 6 GPUs "
                       "qualify on one node (node lassen)");
  EXPECT_EQ(r.pointer, "/spec/spec/devices/requests/0/firstAvailable/1");
  // The alternative that fits first is used: 8 then 2 with a pcieRoot constraint on the second.
  auto constrained = Spec(R"({"name":"gpu","firstAvailable":[{"name":"many","deviceClassName":"gpu.nvidia.com","count":8},)"
                          R"({"name":"two","deviceClassName":"gpu.nvidia.com","count":2}]})",
                          R"({"requests":["gpu/two"],"matchAttribute":"resource.kubernetes.io/pcieRoot"})");
  EXPECT_EQ(Check(constrained, *snap).verdict, Verdict::kSatisfiable);
}

TEST(Satisfiability, MatchAttributePcieRoot) {
  auto snap = Cluster({{"g4dn-a", kG4dn}, {"g4dn-b", kG4dn}, {"dgx", kDgx2}});
  EXPECT_EQ(Check(Spec(Gpu("gpus", 2), kPcie), *snap).nodes, (std::vector<std::string>{"dgx", "g4dn-a", "g4dn-b"}));
  EXPECT_EQ(Check(Spec(Gpu("gpus", 4), kPcie), *snap).nodes, (std::vector<std::string>{"dgx"}));
  auto five = Check(Spec(Gpu("gpus", 5), kPcie), *snap);
  ASSERT_EQ(five.verdict, Verdict::kUnsatisfiable);
  EXPECT_EQ(five.message, "at most 4 of 5 GPUs under one PCIe root (matchAttribute resource.kubernetes.io/pcieRoot) on shape " +
                              Fingerprint(*snap, "dgx") + " (node dgx)");
  EXPECT_EQ(five.pointer, "/spec/spec/devices/constraints/0");
  auto g4 = Cluster({{"g4dn-a", kG4dn}, {"g4dn-b", kG4dn}});
  auto three = Check(Spec(Gpu("gpus", 3), kPcie), *g4);
  ASSERT_EQ(three.verdict, Verdict::kUnsatisfiable);
  EXPECT_EQ(three.message, "at most 2 of 3 GPUs under one PCIe root (matchAttribute resource.kubernetes.io/pcieRoot) on shape " +
                               Fingerprint(*g4, "g4dn-a") + " (nodes g4dn-a, g4dn-b)");
  // Two requests, each constrained on its own: two GPUs under one root and two under another.
  auto split = Spec(Gpu("a", 2) + "," + Gpu("b", 2),
                    R"({"requests":["a"],"matchAttribute":"resource.kubernetes.io/pcieRoot"},{"requests":["b"],"matchAttribute":"resource.kubernetes.io/pcieRoot"})");
  EXPECT_EQ(Check(split, *g4).verdict, Verdict::kSatisfiable);
}

TEST(Satisfiability, GpuAndNicUnderOneRoot) {
  auto claim = Spec(Gpu("gpus", 2) + "," + Nic("nic", 1),
                    R"({"requests":["gpus","nic"],"matchAttribute":"resource.kubernetes.io/pcieRoot"})");
  auto pascal = Cluster({{"pascal", kPascal}, {"g4dn", kG4dn}});
  auto ok = Check(claim, *pascal);
  EXPECT_EQ(ok.verdict, Verdict::kSatisfiable);
  EXPECT_EQ(ok.nodes, (std::vector<std::string>{"pascal"}));
  auto lassen = Cluster({{"lassen", kLassen}, {"g4dn", kG4dn}});
  auto r = Check(claim, *lassen);
  ASSERT_EQ(r.verdict, Verdict::kUnsatisfiable);
  EXPECT_NE(r.message.find("of 3 devices (2 GPUs + 1 NIC) under one PCIe root"), std::string::npos) << r.message;
  // Without the constraint the same claim fits both.
  EXPECT_EQ(Check(Spec(Gpu("gpus", 2) + "," + Nic("nic", 1)), *lassen).nodes.size(), 2u);
  // NIC selectors see the dranet attributes.
  EXPECT_EQ(Check(Spec(Nic("nic", 1, "device.attributes['dra.net'].rdma")), *lassen).nodes,
            (std::vector<std::string>{"g4dn", "lassen"}));
  EXPECT_EQ(Check(Spec(Nic("nic", 2, "device.attributes['dra.net'].rdma")), *lassen).nodes,
            (std::vector<std::string>{"lassen"}));
}

TEST(Satisfiability, DistinctDevicesAcrossRequests) {
  auto snap = Cluster({{"g4dn", kG4dn}});
  EXPECT_EQ(Check(Spec(Gpu("a", 4) + "," + Gpu("b", 4)), *snap).verdict, Verdict::kSatisfiable);
  auto r = Check(Spec(Gpu("a", 5) + "," + Gpu("b", 4)), *snap);
  ASSERT_EQ(r.verdict, Verdict::kUnsatisfiable);
  EXPECT_EQ(r.message, "no node fits the requests together (\"a\" x5, \"b\" x4: distinct devices); the largest node has "
                       "8 GPUs (node g4dn)");
  EXPECT_EQ(r.pointer, "/spec/spec/devices");
}

TEST(Satisfiability, DistinctAttribute) {
  auto snap = Cluster({{"g4dn", kG4dn}});
  auto distinct = [](int n) {
    return Spec(Gpu("gpus", n), R"({"distinctAttribute":"resource.kubernetes.io/pcieRoot"})");
  };
  EXPECT_EQ(Check(distinct(4), *snap).verdict, Verdict::kSatisfiable);
  auto r = Check(distinct(5), *snap);
  ASSERT_EQ(r.verdict, Verdict::kUnsatisfiable);
  EXPECT_NE(r.message.find("at most 4 of 5 GPUs with distinct values"), std::string::npos) << r.message;
}

TEST(Satisfiability, MemoryFloors) {
  // The V100-PCIE-32GB export reports 34072559616 bytes, less than 32Gi.
  auto clemson = Cluster({{"clemson", kClemson}, {"g4dn", kG4dn}});
  auto r = Check(Spec(Gpu("gpus", 1, kMem32)), *clemson);
  ASSERT_EQ(r.verdict, Verdict::kUnsatisfiable);
  EXPECT_EQ(r.message, "request \"gpus\" (1x gpu.nvidia.com): no GPU qualifies on any node — 'memory' >= 32Gi: the "
                       "largest GPU reports 34072559616 (~31.7Gi) on Tesla V100-PCIE-32GB (node clemson)");
  EXPECT_NE(r.hint.find("quantity('34072559616')"), std::string::npos) << r.hint;
  auto ok = Check(Spec(Gpu("gpus", 2, "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('31Gi')) >= 0")), *clemson);
  EXPECT_EQ(ok.nodes, (std::vector<std::string>{"clemson"}));
  // A node whose memory the export does not give (DGX-2H, nvml only) may match.
  auto dgx = Cluster({{"clemson", kClemson}, {"dgx", kDgx2}});
  auto maybe = Check(Spec(Gpu("gpus", 2, kMem80)), *dgx);
  EXPECT_EQ(maybe.verdict, Verdict::kSatisfiable);
  EXPECT_EQ(maybe.nodes, (std::vector<std::string>{"dgx"}));
  EXPECT_EQ(maybe.unknown, (std::vector<std::string>{"gpu.nvidia.com/memory"}));
}

TEST(Satisfiability, UnknownAttributes) {
  auto snap = Cluster({{"g4dn", kG4dn}});
  auto r = Check(Spec(Gpu("gpus", 2, kDriver550)), *snap);
  EXPECT_EQ(r.verdict, Verdict::kSatisfiable);
  EXPECT_EQ(r.unknown, (std::vector<std::string>{"gpu.nvidia.com/driverVersion"}));
  EXPECT_NE(r.message.find("gpu.nvidia.com/driverVersion"), std::string::npos);
  // Guarded reads are unknown too (the real driver publishes the attribute).
  auto guarded = Check(Spec(Gpu("gpus", 2, "'driverVersion' in device.attributes['gpu.nvidia.com'] && " + kDriver550)), *snap);
  EXPECT_EQ(guarded.verdict, Verdict::kSatisfiable);
  EXPECT_EQ(guarded.unknown, r.unknown);
  // A known attribute that rules every GPU out decides, whatever the unknown one would say.
  auto no = Check(Spec(Gpu("gpus", 1, "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-SXM4-80GB' && " +
                                          kDriver550)),
                  *snap);
  ASSERT_EQ(no.verdict, Verdict::kUnsatisfiable);
  EXPECT_NE(no.message.find("no GPU qualifies on any node — selector #1 (device.attributes['gpu.nvidia.com'].productName =="),
            std::string::npos)
      << no.message;
  // matchAttribute on an attribute the simulation does not know.
  auto match = Check(Spec(Gpu("gpus", 8), R"({"matchAttribute":"gpu.nvidia.com/driverVersion"})"), *snap);
  EXPECT_EQ(match.verdict, Verdict::kSatisfiable);
  EXPECT_EQ(match.unknown, (std::vector<std::string>{"gpu.nvidia.com/driverVersion"}));
  // A runtime error on a key nobody publishes: the device does not match.
  auto typo = Check(Spec(Gpu("gpus", 1, "device.attributes['gpu.nvidia.com'].index == 0")), *snap);
  ASSERT_EQ(typo.verdict, Verdict::kUnsatisfiable);
  EXPECT_NE(typo.message.find("selector #1 fails on every GPU: no such key: index"), std::string::npos) << typo.message;

}

TEST(Satisfiability, UuidSelectorsPerNode) {
  auto snap = Cluster({{"dgx", kDgx2}, {"lassen", kLassen}});
  const std::string two = "device.attributes['gpu.nvidia.com'].uuid in ['GPU-d3977428-7a30-086b-2e20-5c1eeed647c6', "
                          "'GPU-5bfda7ef-6aec-a775-5ae1-a1c3dcaef094']";
  EXPECT_EQ(Check(Spec(Gpu("gpus", 2, two)), *snap).nodes, (std::vector<std::string>{"dgx"}));
  auto r = Check(Spec(Gpu("gpus", 3, two)), *snap);
  ASSERT_EQ(r.verdict, Verdict::kUnsatisfiable);
  EXPECT_NE(r.message.find("at most 2 of 3 GPUs qualify on one node (node dgx)"), std::string::npos) << r.message;
}

TEST(Satisfiability, AllocationModeAll) {
  auto snap = Cluster({{"lassen", kLassen}});
  auto all = [](const std::string& sel) {
    std::string s = sel.empty() ? "" : R"(,"selectors":[{"cel":{"expression":")" + sel + R"("}}])";
    return Spec(R"({"name":"gpus","exactly":{"deviceClassName":"gpu.nvidia.com","allocationMode":"All")" + s + "}}");
  };
  EXPECT_EQ(Check(all(""), *snap).verdict, Verdict::kSatisfiable);
  auto r = Check(all("device.attributes['gpu.nvidia.com'].productName == 'Tesla T4'"), *snap);
  ASSERT_EQ(r.verdict, Verdict::kUnsatisfiable);
  EXPECT_NE(r.message.find("request \"gpus\" (all of gpu.nvidia.com): no GPU qualifies on any node"), std::string::npos)
      << r.message;
  // All GPUs under one root: lassen has two roots with two GPUs each.
  EXPECT_EQ(Check(Spec(R"({"name":"gpus","exactly":{"deviceClassName":"gpu.nvidia.com","allocationMode":"All"}})", kPcie),
                  *snap)
                .verdict,
            Verdict::kUnsatisfiable);
}

TEST(Satisfiability, ClassesThatCannotBeSimulated) {
  auto snap = Cluster({{"g4dn", kG4dn}, {"corona", kCorona}});
  auto mig = Spec(R"({"name":"mig","exactly":{"deviceClassName":"mig.nvidia.com","selectors":[{"cel":{"expression":"device.attributes['gpu.nvidia.com'].profile == '3g.40gb'"}}]}})");
  auto r = Check(mig, *snap);
  EXPECT_EQ(r.verdict, Verdict::kSatisfiable);
  EXPECT_EQ(r.nodes, (std::vector<std::string>{"g4dn"}));  // corona has AMD GPUs only
  // The g4dn export has no MIG mode: its real MIG devices are unknown.
  EXPECT_NE(r.message.find("MIG requests assumed to fit on node g4dn, whose export does not record the GPUs' MIG mode"),
            std::string::npos)
      << r.message;
  auto amd = Cluster({{"corona", kCorona}});
  auto none = Check(mig, *amd);
  ASSERT_EQ(none.verdict, Verdict::kUnsatisfiable);
  EXPECT_EQ(none.message, "request \"mig\" (1x mig.nvidia.com): no node of the topology model has an NVIDIA GPU");
  auto vfio = Check(Spec(R"({"name":"vm","exactly":{"deviceClassName":"vfio.gpu.nvidia.com"}})"), *snap);
  EXPECT_EQ(vfio.nodes, (std::vector<std::string>{"g4dn"}));
  EXPECT_NE(vfio.message.find("request \"vm\" (vfio.gpu.nvidia.com) is not simulated; assumed to fit every node with an NVIDIA GPU"),
            std::string::npos)
      << vfio.message;
  // Other classes fit every node; a claim of other classes only is skipped.
  auto other = Check(Spec(R"({"name":"cpu","exactly":{"deviceClassName":"dra.cpu"}})"), *snap);
  EXPECT_EQ(other.verdict, Verdict::kSkipped);
  EXPECT_EQ(other.skip_reason, "no GPU or NIC request");
  auto mixed = Check(Spec(Gpu("gpu", 1) + R"(,{"name":"cpu","exactly":{"deviceClassName":"dra.cpu"}})"), *snap);
  EXPECT_EQ(mixed.nodes, (std::vector<std::string>{"g4dn"}));
}

TEST(Satisfiability, Skipped) {
  auto empty = topology::Snapshot::Create({});
  auto r = Check(Spec(Gpu("gpus", 1)), *empty);
  EXPECT_EQ(r.verdict, Verdict::kSkipped);
  EXPECT_EQ(r.skip_reason, "the topology model has no nodes");
  auto snap = Cluster({{"g4dn", kG4dn}});
  auto pod = Check(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{}})", *snap);
  EXPECT_EQ(pod.verdict, Verdict::kSkipped);
}

TEST(Satisfiability, ClaimVersions) {
  auto snap = Cluster({{"lassen", kLassen}});
  auto beta1 = Template(R"({"devices":{"requests":[{"name":"g","deviceClassName":"gpu.nvidia.com","count":5}]}})", "v1beta1");
  auto r = Check(beta1, *snap);
  ASSERT_EQ(r.verdict, Verdict::kUnsatisfiable);
  EXPECT_EQ(r.pointer, "/spec/spec/devices/requests/0");
  auto claim = Claim(R"({"devices":{"requests":[{"name":"g","exactly":{"deviceClassName":"gpu.nvidia.com","count":4}}]}})");
  EXPECT_EQ(Check(claim, *snap).verdict, Verdict::kSatisfiable);
}

TEST(Satisfiability, NearestMissNamesAtMostThreeNodes) {
  std::vector<std::pair<std::string, std::string>> nodes;
  for (int i = 0; i < 5; ++i) nodes.emplace_back("g4dn-" + std::to_string(i), kG4dn);
  auto snap = Cluster(nodes);
  auto r = Check(Spec(Gpu("gpus", 9)), *snap);
  EXPECT_NE(r.message.find("(nodes g4dn-0, g4dn-1, g4dn-2 +2 more)"), std::string::npos) << r.message;
  std::string long_name(200, 'x');
  auto big = Check(Spec(R"({"name":")" + std::string(60, 'r') + R"(","exactly":{"deviceClassName":"gpu.nvidia.com","selectors":[{"cel":{"expression":"device.attributes['gpu.nvidia.com'].productName == ')" +
                        long_name + R"('"}}]}})"),
                   *snap);
  ASSERT_EQ(big.verdict, Verdict::kUnsatisfiable);
  EXPECT_LE(big.message.size(), 300u);
}

// 5,000 nodes of one shape: evaluated once per shape; with a UUID selector, once per node.
TEST(Satisfiability, ManyNodesOfOneShape) {
  auto one = Cluster({{"n", kDgx2}});
  std::vector<std::shared_ptr<const topology::NodeTopology>> nodes;
  for (int i = 0; i < 5000; ++i) {
    auto n = std::make_shared<topology::NodeTopology>(*one->nodes().front());
    n->name = "node-" + std::to_string(10000 + i);
    nodes.push_back(std::move(n));
  }
  auto snap = topology::Snapshot::Create(std::move(nodes));
  auto r = Check(Spec(Gpu("gpus", 4, "device.attributes['gpu.nvidia.com'].productName.startsWith('Tesla V100')"), kPcie), *snap);
  EXPECT_EQ(r.nodes.size(), 5000u);
  auto uuid = Check(Spec(Gpu("gpus", 2, "device.attributes['gpu.nvidia.com'].uuid != 'GPU-x'"), kPcie), *snap);
  EXPECT_EQ(uuid.nodes.size(), 5000u);
}

}  // namespace
}  // namespace draguard::dra

namespace draguard::dra {
namespace {

// The synthetic 4x H100 export with the MIG records the exporter writes (generate.py --mig):
// GPU 0 split into seven 1g.10gb instances, GPU 1 into two 3g.40gb, GPUs 2 and 3 MIG disabled.
const fs::path kMigExport = fs::path(DRAGUARD_TEST_DATA) / "hwloc-synthetic" / "xe8640-like_4xH100-SXM_mig.xml";

std::shared_ptr<const topology::Snapshot> MigCluster(bool with_plain_node) {
  fs::path dir = fs::path(::testing::TempDir()) / ("sat-mig-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(kMigExport, dir / "mig-a.xml", fs::copy_options::overwrite_existing);
  if (with_plain_node) {
    fs::copy_file(fs::path(DRAGUARD_TEST_DATA) / "hwloc" / kG4dn, dir / "g4dn.xml", fs::copy_options::overwrite_existing);
  }
  auto snap = topology::LoadSnapshot(dir.string());
  EXPECT_TRUE(snap.ok()) << snap.status().ToString();
  fs::remove_all(dir);
  return snap.ok() ? *snap : nullptr;
}

// A request for `count` MIG devices of `profile` (and `also`, a further CEL condition).
std::string Mig(const std::string& name, int count, const std::string& profile, const std::string& also = "") {
  return R"({"name":")" + name + R"(","exactly":{"deviceClassName":"mig.nvidia.com","count":)" + std::to_string(count) +
         R"(,"selectors":[{"cel":{"expression":"device.attributes['gpu.nvidia.com'].profile == ')" + profile + "'" +
         (also.empty() ? "" : " && " + also) + R"("}}]}})";
}

TEST(Satisfiability, MigRequestsAreEvaluatedAgainstTheExportedGpuInstances) {
  auto snap = MigCluster(/*with_plain_node=*/false);
  ASSERT_NE(snap, nullptr);
  // Seven 1g.10gb instances on GPU 0, two 3g.40gb on GPU 1.
  EXPECT_EQ(Check(Spec(Mig("m", 7, "1g.10gb")), *snap).verdict, Verdict::kSatisfiable);
  auto eight = Check(Spec(Mig("m", 8, "1g.10gb")), *snap);
  ASSERT_EQ(eight.verdict, Verdict::kUnsatisfiable);
  EXPECT_EQ(eight.message.rfind("request \"m\" (8x mig.nvidia.com): at most 7 of 8 MIG devices qualify on one node (node mig-a)", 0),
            0u)
      << eight.message;
  // A profile no GPU is split into.
  auto other = Check(Spec(Mig("m", 1, "2g.20gb")), *snap);
  ASSERT_EQ(other.verdict, Verdict::kUnsatisfiable);
  EXPECT_NE(other.message.find("no MIG device qualifies on any node"), std::string::npos) << other.message;
  // The two 3g.40gb share GPU 1's PCIe root; one of each profile are on two roots.
  EXPECT_EQ(Check(Spec(Mig("m", 2, "3g.40gb"), kPcie), *snap).verdict, Verdict::kSatisfiable);
  auto split = Check(Spec(Mig("a", 1, "3g.40gb") + "," + Mig("b", 1, "1g.10gb"), kPcie), *snap);
  EXPECT_EQ(split.verdict, Verdict::kUnsatisfiable) << split.message;
  // Full GPUs: only GPUs 2 and 3 are published whole.
  EXPECT_EQ(Check(Spec(Gpu("g", 2)), *snap).verdict, Verdict::kSatisfiable);
  auto three = Check(Spec(Gpu("g", 3)), *snap);
  ASSERT_EQ(three.verdict, Verdict::kUnsatisfiable);
  EXPECT_NE(three.message.find("at most 2 of 3 GPUs"), std::string::npos) << three.message;
  // MIG and full GPUs in one claim are distinct devices of one node.
  EXPECT_EQ(Check(Spec(Mig("m", 7, "1g.10gb") + "," + Gpu("g", 2)), *snap).verdict, Verdict::kSatisfiable);
  // The parent UUID and the instance memory read as the driver publishes them.
  const std::string parent = "device.attributes['gpu.nvidia.com'].parentUUID.startsWith('GPU-')";
  auto by_parent = Check(Spec(Mig("m", 2, "3g.40gb", parent)), *snap);
  EXPECT_EQ(by_parent.verdict, Verdict::kSatisfiable) << by_parent.message;
  const std::string memory = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('39Gi')) >= 0";
  EXPECT_EQ(Check(Spec(Mig("m", 2, "3g.40gb", memory)), *snap).verdict, Verdict::kSatisfiable);
  const std::string too_much = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0";
  EXPECT_EQ(Check(Spec(Mig("m", 1, "3g.40gb", too_much)), *snap).verdict, Verdict::kUnsatisfiable);  // 40448Mi
}

TEST(Satisfiability, MigWhereEveryExportRecordsMigDisabled) {
  // The same node with MIG disabled on every GPU (the instance records are then ignored).
  std::ifstream in(kMigExport);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string xml = ss.str();
  for (std::size_t at = 0; (at = xml.find("value=\"Enabled\"", at)) != std::string::npos;) xml.replace(at, 15, "value=\"Disabled\"");
  fs::path dir = fs::path(::testing::TempDir()) / ("sat-nomig-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "plain.xml") << xml;
  auto snap = topology::LoadSnapshot(dir.string());
  fs::remove_all(dir);
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  auto r = Check(Spec(Mig("m", 1, "1g.10gb")), **snap);
  ASSERT_EQ(r.verdict, Verdict::kUnsatisfiable);
  EXPECT_EQ(r.message, "request \"m\" (1x mig.nvidia.com): no node of the topology model has MIG enabled (the exports "
                       "record every GPU's MIG mode)");
  EXPECT_EQ(r.hint, "enable MIG on GPU nodes, or request full GPUs (class gpu.nvidia.com)");
}

TEST(Satisfiability, MigOnANodeWithoutMigModeIsAssumedToFit) {
  auto snap = MigCluster(/*with_plain_node=*/true);
  ASSERT_NE(snap, nullptr);
  auto r = Check(Spec(Mig("m", 8, "1g.10gb")), *snap);
  ASSERT_EQ(r.verdict, Verdict::kSatisfiable);
  EXPECT_EQ(r.nodes, (std::vector<std::string>{"g4dn"}));
  EXPECT_NE(r.message.find("MIG requests assumed to fit on node g4dn"), std::string::npos) << r.message;
}

}  // namespace
}  // namespace draguard::dra
