// ProfilePod: what legacy requests ask for.
#include "draguard/mutation/mutation.h"
#include "testing.h"

namespace draguard::mutation {
namespace {

using testing::DefaultPolicy;
using testing::Json;
using testing::PodWith;

TEST(ProfilePod, FullGpusFromLimitsAsStringOrNumber) {
  auto pol = DefaultPolicy();
  for (Json v : {Json("2"), Json(2)}) {
    auto p = ProfilePod(PodWith({{"nvidia.com/gpu", v}, {"cpu", "1"}}), pol);
    ASSERT_TRUE(p.ok()) << p.status().message();
    ASSERT_EQ(p->entries.size(), 1u);
    EXPECT_EQ(p->entries[0].request, "gpu");
    EXPECT_EQ(p->entries[0].profile.kind, RequestProfile::Kind::kGpu);
    EXPECT_EQ(p->entries[0].profile.count, 2);
    EXPECT_EQ(p->entries[0].profile.memory, pol.memory_minimum);
    EXPECT_FALSE(p->nic);
  }
}

TEST(ProfilePod, AnnotationsSetMemoryProductNicInterconnect) {
  auto pol = DefaultPolicy();
  auto p = ProfilePod(PodWith({{"nvidia.com/gpu", 4}},
                              {{"draguard.io/gpu-memory", "80G"},
                               {"draguard.io/gpu-product", "NVIDIA H100 80GB HBM3"},
                               {"draguard.io/nic", "rdma"},
                               {"draguard.io/interconnect", "nvlink"}}),
                      pol);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->entries[0].profile.memory, "80G");
  EXPECT_EQ(p->entries[0].profile.product, "NVIDIA H100 80GB HBM3");
  EXPECT_TRUE(p->nic);
  EXPECT_EQ(p->interconnect, "nvlink");
}

TEST(ProfilePod, BadAnnotationsAreRefusedWithTheKey) {
  auto pol = DefaultPolicy();
  struct Case { const char* key; const char* value; };
  for (Case c : {Case{"draguard.io/gpu-memory", "lots"}, Case{"draguard.io/gpu-memory", "1Mi"},
                 Case{"draguard.io/gpu-product", "x' || true || '"}, Case{"draguard.io/nic", "yes"},
                 Case{"draguard.io/interconnect", "infiniband"},
                 Case{"draguard.io/mps-active-thread-percentage", "150"}}) {
    auto p = ProfilePod(PodWith({{"nvidia.com/gpu", 1}}, {{c.key, c.value}}), pol);
    ASSERT_FALSE(p.ok()) << c.key << "=" << c.value;
    EXPECT_NE(p.status().message().find(c.key), std::string::npos) << p.status().message();
  }
}

TEST(ProfilePod, MigProfileFromResourceName) {
  auto p = ProfilePod(PodWith({{"nvidia.com/mig-3g.40gb", "1"}}), DefaultPolicy());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->entries[0].profile.kind, RequestProfile::Kind::kMig);
  EXPECT_EQ(p->entries[0].profile.mig_profile, "3g.40gb");
  EXPECT_TRUE(p->entries[0].profile.memory.empty());
}

TEST(ProfilePod, SharedIsDeniedByDefaultAndMpsWhenThePolicySaysSo) {
  auto pol = DefaultPolicy();
  auto denied = ProfilePod(PodWith({{"nvidia.com/gpu.shared", 1}}), pol);
  ASSERT_FALSE(denied.ok());
  EXPECT_NE(denied.status().message().find("MIG profile"), std::string::npos);
  pol.mutation.shared = policy::SharedMode::kMps;
  auto p = ProfilePod(PodWith({{"nvidia.com/gpu.shared", 4}}, {{"draguard.io/mps-pinned-memory", "4Gi"}}), pol);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->entries[0].profile.kind, RequestProfile::Kind::kShared);
  EXPECT_EQ(p->entries[0].profile.count, 1);
  EXPECT_EQ(p->entries[0].profile.mps_threads, 50);
  EXPECT_EQ(p->entries[0].profile.mps_memory, "4Gi");
}

TEST(ProfilePod, HamiMemoryRaisesTheFloorAndSoftLimitsAreDroppedWithANote) {
  auto p = ProfilePod(PodWith({{"nvidia.com/gpu", 1}, {"nvidia.com/gpumem", 3000}, {"nvidia.com/gpucores", 30}}),
                      DefaultPolicy());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->entries[0].profile.memory, "3000Mi");
  ASSERT_EQ(p->notes.size(), 1u);
  EXPECT_NE(p->notes[0].find("nvidia.com/gpucores"), std::string::npos);
}

// Next to a MIG request the container gets the MIG device, not whole GPUs, and HAMi's gpumem
// cannot raise a floor (the profile fixes the memory): both say so.
TEST(ProfilePod, HamiKeysNextToMigSayWhatTheContainerGets) {
  auto p = ProfilePod(PodWith({{"nvidia.com/mig-3g.40gb", 1}, {"nvidia.com/gpumem", 3000}, {"nvidia.com/gpucores", 30}}),
                      DefaultPolicy());
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->notes.size(), 2u);
  EXPECT_NE(p->notes[0].find("whole MIG device (3g.40gb)"), std::string::npos) << p->notes[0];
  EXPECT_EQ(p->notes[0].find("whole GPUs"), std::string::npos) << p->notes[0];
  EXPECT_NE(p->notes[1].find("nvidia.com/gpumem (3000 MiB) was dropped"), std::string::npos) << p->notes[1];
}

TEST(ProfilePod, RefusesMixedKindsUnknownNamesAndOversizedCounts) {
  auto pol = DefaultPolicy();
  EXPECT_FALSE(ProfilePod(PodWith({{"nvidia.com/gpu", 1}, {"nvidia.com/mig-1g.10gb", 1}}), pol).ok());
  EXPECT_FALSE(ProfilePod(PodWith({{"nvidia.com/gpu-h100", 1}}), pol).ok());
  EXPECT_FALSE(ProfilePod(PodWith({{"nvidia.com/gpu", 33}}), pol).ok());
  EXPECT_FALSE(ProfilePod(PodWith({{"nvidia.com/gpu", "two"}}), pol).ok());
  EXPECT_FALSE(ProfilePod(PodWith({{"nvidia.com/mig-../etc", 1}}), pol).ok());
}

TEST(ProfilePod, ZeroCountsNeedNoRequest) {
  auto p = ProfilePod(PodWith({{"nvidia.com/gpu", 0}}), DefaultPolicy());
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->entries.empty());
}

TEST(ProfilePod, InitContainersReuseAnEqualRequestAndSidecarsGetTheirOwn) {
  Json pod = PodWith({{"nvidia.com/gpu", 1}});
  Json gpu = {{"resources", {{"limits", {{"nvidia.com/gpu", 1}}}}}};
  Json init = gpu;
  init["name"] = "warmup";
  Json sidecar = gpu;
  sidecar["name"] = "monitor";
  sidecar["restartPolicy"] = "Always";
  pod["spec"]["initContainers"] = Json::array({init, sidecar});
  std::vector<std::vector<std::string>> covered;
  auto p = ProfilePod(pod, DefaultPolicy(), &covered);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->entries.size(), 2u);
  EXPECT_EQ(p->entries[1].request, "gpu-1");
  ASSERT_EQ(covered.size(), 2u);
  EXPECT_EQ(covered[0], (std::vector<std::string>{"/spec/containers/0", "/spec/initContainers/0"}));
  EXPECT_EQ(covered[1], (std::vector<std::string>{"/spec/initContainers/1"}));
}

TEST(ProfilePod, LatencySensitiveFromLabels) {
  Json pod = PodWith({{"nvidia.com/gpu", 1}});
  pod["metadata"]["labels"] = {{"draguard.io/workload-class", "latency-sensitive"}};
  auto p = ProfilePod(pod, DefaultPolicy());
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->entries[0].profile.latency_sensitive);
}

TEST(ProfilePod, NicDefaultAppliesToMultiGpuPodsOnly) {
  auto pol = DefaultPolicy();
  pol.mutation.nic.default_for_multi_gpu = "rdma";
  EXPECT_FALSE(ProfilePod(PodWith({{"nvidia.com/gpu", 1}}), pol)->nic);
  EXPECT_TRUE(ProfilePod(PodWith({{"nvidia.com/gpu", 2}}), pol)->nic);
  EXPECT_FALSE(ProfilePod(PodWith({{"nvidia.com/gpu", 2}}, {{"draguard.io/nic", "none"}}), pol)->nic);
}

}  // namespace
}  // namespace draguard::mutation
