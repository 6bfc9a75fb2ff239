// `draguard convert --draw DIR` and `draguard review --mutate --draw DIR`: the placement pictures
// are written (one per converted or refused pod spec and node shape), named in stderr, and the
// flags are checked.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "commands.h"

namespace draguard::cli {
namespace {

namespace fs = std::filesystem;

// Exit code and stderr of `convert` (input on stdin) or `review`; stdout is not looked at.
using Outcome = std::pair<int, std::string>;

Outcome Convert(std::vector<std::string> args, const std::string& input) {
  std::istringstream in(input);
  std::ostringstream out, err;
  const int code = cli::Convert(args, in, out, err);
  return {code, err.str()};
}

Outcome Review(std::vector<std::string> args) {
  std::istringstream in;
  std::ostringstream out, err;
  const int code = cli::Review(args, in, out, err);
  return {code, err.str()};
}

std::set<std::string> Files(const fs::path& dir) {
  std::set<std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

std::string Slurp(const fs::path& p) {
  std::ifstream f(p);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

class DrawPlacementsCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("draguard-draw-cli-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "topo");
    fs::copy_file(std::string(DRAGUARD_TEST_DATA) + "/hwloc/aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml",
                  dir_ / "topo" / "g4dn-a.xml");
    fs::copy_file(std::string(DRAGUARD_TEST_DATA) +
                      "/hwloc/hwloc_nvidia-dgx2h_2s-xeon8174_16xV100-SXM3_12xNVSwitch_nvlink-hetero.xml",
                  dir_ / "topo" / "dgx-a.xml");
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

// Pods "four" (4 GPUs), "many" (12), "one" (1) and "cpu-only" (no GPU) in namespace ml.
std::string Pods() {
  std::string yaml;
  for (const auto& [name, limits] : std::vector<std::pair<std::string, std::string>>{
           {"four", "nvidia.com/gpu: 4"}, {"many", "nvidia.com/gpu: 12"}, {"one", "nvidia.com/gpu: 1"}, {"cpu-only", "cpu: 1"}}) {
    yaml += "---\napiVersion: v1\nkind: Pod\nmetadata: {name: " + name + ", namespace: ml}\nspec:\n  containers:\n"
            "  - {name: c, image: x, resources: {limits: {" + limits + "}}}\n";
  }
  return yaml;
}
const std::string kPods = Pods();

TEST_F(DrawPlacementsCliTest, ConvertDrawsConvertedAndRefusedPodSpecs) {
  const fs::path out = dir_ / "pictures";
  Outcome r = Convert({"-f", "-", "--topology-dir", (dir_ / "topo").string(), "--draw", out.string()}, kPods);
  EXPECT_EQ(r.first, 0) << r.second;  // 12 GPUs fit the DGX-2H
  // Four GPUs are pinned to the NVLink shape; one GPU may land on either shape.
  EXPECT_EQ(Files(out), (std::set<std::string>{"pod-four-dgx-a.svg", "pod-many-dgx-a.svg", "pod-one-dgx-a.svg",
                                               "pod-one-g4dn-a.svg"}));
  EXPECT_NE(r.second.find("drew " + (out / "pod-many-dgx-a.svg").string()), std::string::npos) << r.second;
  EXPECT_NE(Slurp(out / "pod-many-dgx-a.svg").find("data-requests=\"gpu\""), std::string::npos);

  // Only the g4dn: 12 GPUs are refused, and that picture carries the reason.
  fs::remove(dir_ / "topo" / "dgx-a.xml");
  const fs::path refused = dir_ / "refused";
  r = Convert({"-f", "-", "--topology-dir", (dir_ / "topo").string(), "--draw", refused.string()}, kPods);
  EXPECT_EQ(r.first, 1) << r.second;
  EXPECT_EQ(Files(refused), (std::set<std::string>{"pod-four-g4dn-a.svg", "pod-many-g4dn-a.svg", "pod-one-g4dn-a.svg"}));
  const std::string svg = Slurp(refused / "pod-many-g4dn-a.svg");
  EXPECT_NE(svg.find("<g class=\"miss\">"), std::string::npos);
  EXPECT_NE(svg.find("refused: container"), std::string::npos);

  // Without a topology there is no node to draw; without --draw nothing is written.
  const fs::path none = dir_ / "none";
  r = Convert({"-f", "-", "--draw", none.string()}, kPods);
  EXPECT_TRUE(Files(none).empty());
  EXPECT_EQ(r.second.find("drew"), std::string::npos);
}

TEST_F(DrawPlacementsCliTest, ConvertDrawErrors) {
  EXPECT_EQ(Convert({"-f", "-", "--draw"}, kPods).first, 2);
  EXPECT_EQ(Convert({"-f", "-", "--draw", ""}, kPods).first, 2);
  { std::ofstream(dir_ / "file") << "x"; }
  Outcome r = Convert({"-f", "-", "--topology-dir", (dir_ / "topo").string(), "--draw", (dir_ / "file").string()}, kPods);
  EXPECT_EQ(r.first, 2);
  EXPECT_NE(r.second.find("--draw"), std::string::npos) << r.second;
}

TEST_F(DrawPlacementsCliTest, ReviewMutateDraws) {
  const std::string review = std::string(DRAGUARD_TEST_DATA) + "/reviews/mutation/two-t4-same-root/request.json";
  const fs::path out = dir_ / "review";
  Outcome r = Review({"--mutate", "-f", review, "--topology-dir", (dir_ / "topo").string(), "--draw", out.string()});
  ASSERT_EQ(r.first, 0) << r.second;
  ASSERT_EQ(Files(out).size(), 1u) << r.second;
  const std::string name = *Files(out).begin();
  EXPECT_EQ(name.rfind("pod-", 0), 0u) << name;
  EXPECT_TRUE(name.ends_with("-dgx-a.svg")) << name;  // two GPUs: pinned to the NVLink shape
  EXPECT_NE(Slurp(out / name).find("converted, ResourceClaimTemplate draguard-"), std::string::npos);

  EXPECT_EQ(Review({"-f", review, "--draw", out.string()}).first, 1);  // --draw needs --mutate
  EXPECT_EQ(Review({"--mutate", "-f", review, "--draw", ""}).first, 1);
}

}  // namespace
}  // namespace draguard::cli
