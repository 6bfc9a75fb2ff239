// `draguard topology export` through the CLI: usage errors, an export of a generated node (sysfs
// tree + fake NVML, test/unit/topology/fake_node.h) written with -o and read back by
// `topology show`, the warning without NVML, and --publish refusing to run without a node.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../topology/fake_node.h"
#include "commands.h"

namespace draguard::cli {
namespace {

namespace fs = std::filesystem;

struct CliRun {
  int code;
  std::string out;
  std::string err;
};

CliRun Cli(std::vector<std::string> args) {
  std::ostringstream out, err;
  const int code = Topology(args, out, err);
  return {code, out.str(), err.str()};
}

class TopologyExportCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "draguard-export-cli-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    const topotest::FakeNode node = topotest::AllToAllNode();
    topotest::WriteSysfs(dir_ / "root", node);
    topotest::WriteScenario(dir_ / "scenario", node);
    setenv("HWLOC_FSROOT", (dir_ / "root").c_str(), 1);
    setenv("HWLOC_COMPONENTS", "-x86,-pci", 1);
    setenv("DRAGUARD_FAKE_NVML_SCENARIO", (dir_ / "scenario").c_str(), 1);
    uuid0_ = node.gpus[0].uuid;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
    unsetenv("HWLOC_FSROOT");
    unsetenv("HWLOC_COMPONENTS");
    unsetenv("DRAGUARD_FAKE_NVML_SCENARIO");
    unsetenv("NODE_NAME");
  }
  fs::path dir_;
  std::string uuid0_;
};

TEST_F(TopologyExportCliTest, UsageErrors) {
  EXPECT_EQ(Cli({"export", "--bogus"}).code, kExitUsage);
  EXPECT_EQ(Cli({"export", "extra"}).code, kExitUsage);
  EXPECT_EQ(Cli({"export", "-o"}).code, kExitUsage);
  const CliRun help = Cli({"export", "--help"});
  EXPECT_EQ(help.code, kExitOk);
  EXPECT_NE(help.out.find("--publish"), std::string::npos);
  unsetenv("NODE_NAME");
  const CliRun pub = Cli({"export", "--publish", "--namespace", "ns"});
  EXPECT_EQ(pub.code, kExitUsage);
  EXPECT_NE(pub.err.find("--node"), std::string::npos);
  EXPECT_EQ(Cli({"export", "--publish", "--node", "n", "--namespace", "ns", "--interval", "soon"}).code, kExitUsage);
}

TEST_F(TopologyExportCliTest, ExportToFileIsWhatShowReads) {
  const fs::path file = dir_ / "gpu-node-7.xml";
  const CliRun r = Cli({"export", "-o", file.string(), "--nvml-library", DRAGUARD_FAKE_NVML});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_TRUE(r.out.empty());
  const CliRun show = Cli({"show", "-f", file.string()});
  ASSERT_EQ(show.code, kExitOk) << show.err;
  const nlohmann::json j = nlohmann::json::parse(show.out);
  EXPECT_NE(show.out.find(uuid0_), std::string::npos);
  EXPECT_NE(show.out.find("NVLinkBandwidth"), std::string::npos);
  EXPECT_NE(show.out.find("gpu-node-7"), std::string::npos);
}

TEST_F(TopologyExportCliTest, WithoutNvmlStdoutGetsAPlainExportAndStderrAWarning) {
  const CliRun r = Cli({"export", "--nvml-library", (dir_ / "missing.so").string()});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.err.find("warning: NVML unavailable"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("<topology version=\"2.0\">"), std::string::npos);
  EXPECT_EQ(r.out.find("nvml0"), std::string::npos);
  const CliRun none = Cli({"export", "--no-nvml"});
  ASSERT_EQ(none.code, kExitOk);
  EXPECT_TRUE(none.err.empty()) << none.err;
}

}  // namespace
}  // namespace draguard::cli
