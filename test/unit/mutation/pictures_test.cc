// mutation::DrawPlacements and dra::PlaceClaim: which pictures a conversion gives and what they
// mark, on the mixed snapshots of testing.h.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>
#include <vector>

#include "draguard/dra/devices.h"
#include "draguard/dra/satisfiability.h"
#include "draguard/mutation/mutation.h"
#include "draguard/mutation/pictures.h"
#include "testing.h"

namespace draguard::mutation {
namespace {

using testing::Json;

std::vector<std::string> Names(const std::vector<PlacementPicture>& pictures) {
  std::vector<std::string> out;
  for (const auto& p : pictures) out.push_back(p.name);
  return out;
}

// The bus ids of the GPU boxes carrying `attr` (data-requests or data-miss).
std::set<std::string> GpusWith(const std::string& svg, const std::string& attr) {
  std::set<std::string> out;
  static const std::regex box(R"re(<g class="gpu" data-bus-id="([^"]+)"([^>]*)>)re");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), box); it != std::sregex_iterator(); ++it) {
    if ((*it)[2].str().find(attr) != std::string::npos) out.insert((*it)[1].str());
  }
  return out;
}

TEST(PicturesTest, RailsArePinnedAndMarkOnlyGpusWithANicUnderTheirRoot) {
  const auto pol = testing::DefaultPolicy();
  const Json pod = testing::PodWith({{"nvidia.com/gpu", 2}}, {{"draguard.io/nic", "rdma"}});
  ASSERT_EQ(ConvertPod(pod, "ml", pol, testing::MixedRails().get()).outcome, PodConversion::Outcome::kConverted);
  const auto pictures = DrawPlacements(pod, "ml", pol, testing::MixedRails().get());
  ASSERT_EQ(Names(pictures), std::vector<std::string>{"pod-p-xe-a"});
  const std::string& svg = pictures[0].svg;
  // GPU3 of the XE8640-like node has no RDMA NIC under its root: no rail can take it.
  EXPECT_EQ(GpusWith(svg, "data-requests=\"gpu-rail-0, gpu-rail-1\""),
            (std::set<std::string>{"0000:18:00.0", "0000:66:00.0", "0000:9c:00.0"}));
  EXPECT_EQ(GpusWith(svg, "data-requests").size(), 3u);
  EXPECT_NE(svg.find("may land on xe-a"), std::string::npos);
  EXPECT_NE(svg.find("NIC ibp0 · RDMA</text><text x=\"") , std::string::npos);
  EXPECT_EQ(svg.find("class=\"miss\""), std::string::npos);
  EXPECT_EQ(DrawPlacements(pod, "ml", pol, testing::MixedRails().get())[0].svg, svg);  // deterministic
}

TEST(PicturesTest, UnpinnedPodIsDrawnOnEveryShapeItMayLandOn) {
  const auto pol = testing::DefaultPolicy();
  const Json pod = testing::PodWith({{"nvidia.com/gpu", 1}});
  const auto pictures = DrawPlacements(pod, "ml", pol, testing::Mixed().get());
  ASSERT_EQ(pictures.size(), 2u);
  for (const auto& p : pictures) {
    if (p.name == "pod-p-dgx-a") {
      EXPECT_EQ(GpusWith(p.svg, "data-requests=\"gpu\"").size(), 16u);
    } else {
      EXPECT_EQ(p.name, "pod-p-g4dn-a");
      EXPECT_EQ(GpusWith(p.svg, "data-requests=\"gpu\"").size(), 8u);
      EXPECT_NE(p.svg.find("may land on g4dn-a, g4dn-b"), std::string::npos);
    }
  }
}

// mutation.cpu: the NUMA nodes where the claim's CPU requests can take their CPUs (those of the
// GPUs tied to them by numaNode) are marked with the requests.
TEST(PicturesTest, CpuRequestsMarkTheNumaNodesOfTheirGpus) {
  std::string yaml(policy::DefaultPolicyYaml());
  yaml.erase(yaml.find("  cpu: {mode: none, deviceClass: dra.cpu}\n"), 42);
  yaml.insert(yaml.find("\nmutation:\n") + 11, "  numaAlignment: numaNode\n  cpu: {mode: grouped}\n");
  auto pol = policy::ParsePolicy(yaml);
  ASSERT_TRUE(pol.ok()) << pol.status().message();
  static const std::regex numa(R"re(<g class="numa" data-numa="(\d+)"( data-requests="([^"]*)")?)re");
  auto marked = [](const std::string& svg) {
    std::vector<std::string> out;
    for (auto it = std::sregex_iterator(svg.begin(), svg.end(), numa); it != std::sregex_iterator(); ++it) {
      out.push_back((*it)[1].str() + ":" + (*it)[3].str());
    }
    return out;
  };
  const auto one = DrawPlacements(testing::PodWith({{"nvidia.com/gpu", 2}, {"cpu", "16"}}), "ml", *pol,
                                  testing::Topo(testing::kG4dn).get());
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(marked(one[0].svg), (std::vector<std::string>{"0:cpu", "1:cpu"}));
  const auto parts = DrawPlacements(testing::PodWith({{"nvidia.com/gpu", 16}, {"cpu", "4"}}), "ml", *pol,
                                    testing::Topo(testing::kDgx2h).get());
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(marked(parts[0].svg), (std::vector<std::string>{"0:cpu-part-0, cpu-part-1", "1:cpu-part-0, cpu-part-1"}));
  // Without mutation.cpu no NUMA node is marked.
  const auto none = DrawPlacements(testing::PodWith({{"nvidia.com/gpu", 2}, {"cpu", "16"}}), "ml",
                                   testing::DefaultPolicy(), testing::Topo(testing::kG4dn).get());
  ASSERT_EQ(none.size(), 1u);
  EXPECT_EQ(marked(none[0].svg), (std::vector<std::string>{"0:", "1:"}));
}

TEST(PicturesTest, RefusalShowsTheReasonAndTheNearestMiss) {
  const auto pol = testing::DefaultPolicy();
  const Json pod = testing::PodWith({{"nvidia.com/gpu", 2}}, {{"draguard.io/interconnect", "nvlink"}});
  const auto snap = testing::Topo(testing::kG4dn);
  const PodConversion c = ConvertPod(pod, "ml", pol, snap.get());
  ASSERT_EQ(c.outcome, PodConversion::Outcome::kRefused);
  const auto pictures = DrawPlacements(pod, "ml", pol, snap.get());
  ASSERT_EQ(pictures.size(), 1u);
  const std::string& svg = pictures[0].svg;
  EXPECT_NE(svg.find("class=\"miss\""), std::string::npos);
  EXPECT_NE(svg.find("refused: container"), std::string::npos);
  EXPECT_NE(svg.find("NVLink-connected"), std::string::npos);  // the reason, wrapped over lines
  // Without the NVLink alignment any two T4s would do: all eight are the nearest miss.
  EXPECT_EQ(GpusWith(svg, "data-miss=\"true\"").size(), 8u);
}

TEST(PicturesTest, NothingToDrawWithoutTopologyOrConversion) {
  const auto pol = testing::DefaultPolicy();
  EXPECT_TRUE(DrawPlacements(testing::PodWith({{"nvidia.com/gpu", 1}}), "ml", pol, nullptr).empty());
  EXPECT_TRUE(DrawPlacements(testing::PodWith({{"cpu", 1}}), "ml", pol, testing::Mixed().get()).empty());
  EXPECT_TRUE(DrawPlacements(Json::array(), "ml", pol, testing::Mixed().get()).empty());
}

// PlaceClaim on its own: a GPU and an RDMA NIC under one PCIe root. The g4dn's EFA NIC shares its
// root with no GPU, so nothing can be received; on the XE8640-like node GPUs 0-2 can.
TEST(PlaceClaimTest, ConstraintsDecideWhatEachRequestCanReceive) {
  const auto pol = testing::DefaultPolicy();
  const Json claim = Json::parse(R"({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
    "metadata": {"name": "t", "namespace": "ml"},
    "spec": {"spec": {"devices": {
      "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}},
                   {"name": "nic", "exactly": {"deviceClassName": "dranet", "count": 1,
                     "selectors": [{"cel": {"expression": "device.attributes[\"dra.net\"].rdma == true"}}]}}],
      "constraints": [{"requests": ["gpu", "nic"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}]}}}})");
  const auto g4dn = testing::Topo(testing::kG4dn);
  const dra::ClaimPlacement none = dra::PlaceClaim(claim, pol, *g4dn, *g4dn->nodes().front());
  EXPECT_FALSE(none.satisfiable);
  ASSERT_EQ(none.requests.size(), 2u);
  EXPECT_TRUE(none.requests[0].devices.empty());

  const auto rails = testing::MixedRails();
  const dra::ClaimPlacement xe = dra::PlaceClaim(claim, pol, *rails, *rails->Find("xe-a"));
  ASSERT_TRUE(xe.satisfiable);
  ASSERT_EQ(xe.requests.size(), 2u);
  EXPECT_EQ(xe.requests[0].name, "gpu");
  std::vector<uint32_t> gpus;
  for (std::size_t d : xe.requests[0].devices) gpus.push_back((*xe.devices)[d].index);
  EXPECT_EQ(gpus, (std::vector<uint32_t>{0, 1, 2}));
  for (std::size_t d : xe.requests[1].devices) EXPECT_EQ((*xe.devices)[d].kind, dra::DeviceKind::kNic);
  EXPECT_FALSE(xe.requests[1].devices.empty());
}

}  // namespace
}  // namespace draguard::mutation
