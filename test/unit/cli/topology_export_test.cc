// `draguard topology export` through the CLI: usage errors, an export of a generated node (sysfs
// tree + fake NVML, test/unit/topology/fake_node.h) written with -o and read back by
// `topology show`, the warning without NVML, and --publish refusing to run without a node.
// `--publish -f FILE` against the kube tests' fake API server, reached through the in-cluster
// configuration with $DRAGUARD_SERVICEACCOUNT_DIR: publish (shape object and Node publication),
// republish of a changed file (--once and SIGHUP in the loop), a bad or missing file failing while
// the last published state stays.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "../kube/fake_apiserver.h"
#include "../topology/fake_node.h"
#include "commands.h"
#include "draguard/kube/watch.h"
#include "draguard/kubetopo/shape_object.h"
#include "draguard/topology/loader.h"

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

TEST(TopologyExportFileUsage, FileFlagErrors) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"export", "-f", "x.xml"},                       // without --publish
           {"export", "--file=x.xml", "-o", "out.xml"},     // without --publish
           {"export", "--publish", "-f"},                   // no value
           {"export", "--publish", "--file="},              // empty
           {"export", "--publish", "-f", "-"},              // standard input cannot be re-read
           {"export", "--publish", "-f", "x.xml", "--no-nvml"},
           {"export", "--publish", "-f", "x.xml", "--nvml-library", "lib.so"}}) {
    const CliRun r = Cli(args);
    EXPECT_EQ(r.code, kExitUsage) << args.back() << ": " << r.err;
    EXPECT_NE(r.err.find("usage: draguard topology export"), std::string::npos) << r.err;
  }
  const CliRun no_publish = Cli({"export", "-f", "x.xml"});
  EXPECT_NE(no_publish.err.find("needs --publish"), std::string::npos) << no_publish.err;
  const CliRun help = Cli({"export", "--help"});
  EXPECT_NE(help.out.find("-f, --file FILE"), std::string::npos);
}

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteAll(const fs::path& p, const std::string& text) {
  const fs::path tmp = p.string() + ".tmp";
  std::ofstream(tmp, std::ios::binary) << text;
  fs::rename(tmp, p);
}

// --publish -f FILE against the fake API server, through InClusterConfig as `draguard` itself
// uses it: KUBERNETES_SERVICE_HOST/PORT and $DRAGUARD_SERVICEACCOUNT_DIR (token, ca.crt and
// namespace of the fixture's directory).
class TopologyPublishFileTest : public kubetest::FakeApiServerTest {
 protected:
  static constexpr const char* kNode = "fake-node-1";
  static constexpr const char* kNodePath = "/api/v1/nodes/fake-node-1";
  static constexpr const char* kCms = "/api/v1/namespaces/sa-ns/configmaps/";

  void SetUp() override {
    FakeApiServerTest::SetUp();
    kubetest::WriteFile(dir_.path() / "namespace", "sa-ns\n");
    setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", std::to_string(server_->port()).c_str(), 1);
    setenv("DRAGUARD_SERVICEACCOUNT_DIR", dir_.path().c_str(), 1);
    unsetenv("POD_NAMESPACE");
    unsetenv("NODE_NAME");
    server_->PutObject(kNodePath, {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", kNode}}}});
    dgx_ = ReadAll(fs::path(DRAGUARD_SOURCE_DIR) / "deploy/examples/topology/example-dgx2h.xml");
    pcie_ = ReadAll(fs::path(DRAGUARD_SOURCE_DIR) / "deploy/examples/topology/example-pcie-2xp100.xml");
    ASSERT_FALSE(dgx_.empty());
    ASSERT_FALSE(pcie_.empty());
    file_ = dir_.path() / "node.xml";
  }
  void TearDown() override {
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    unsetenv("DRAGUARD_SERVICEACCOUNT_DIR");
    FakeApiServerTest::TearDown();
  }
  // The loader's fingerprint of `xml`, as the webhook computes it.
  static std::string Fingerprint(const std::string& xml) {
    topology::LoaderLimits limits;
    limits.require_pci = false;
    limits.isolate = false;  // the same fingerprint (LoaderTest.IsolatedAndInProcessImportsAgree), no wall-clock limit
    auto parsed = topology::ParseHwlocXml(xml, limits);
    EXPECT_TRUE(parsed.ok()) << parsed.status().message();
    return parsed.ok() ? parsed->shape.fingerprint : "";
  }
  // The shape fingerprint of the record the Node's annotation names, verified as the webhook
  // verifies it; "" while there is none.
  std::string PublishedShape() const {
    auto node = kube::ParseObject(server_->GetObject(kNodePath).dump());
    if (!node.ok()) return "";
    auto pub = kubetopo::ReadNodePublication(*node);
    if (!pub.ok()) return "";
    auto object = kube::ParseObject(server_->GetObject(kCms + std::string(kubetopo::kShapeObjectPrefix) + pub->shape_object).dump());
    if (!object.ok()) return "";
    topology::ShapeInterner interner;
    auto record = kubetopo::VerifyShapeObject(*object, interner);
    return record.ok() ? record->shape->fingerprint : "";
  }
  // The Node's shape label, "" while it has none (also while it has no labels at all).
  std::string ShapeLabel() const {
    const kubetest::json node = server_->GetObject(kNodePath);
    const kubetest::json::json_pointer p("/metadata/labels/draguard.io~1topology-shape");
    return node.contains(p) && node.at(p).is_string() ? node.at(p).get<std::string>() : "";
  }
  CliRun Once(const std::string& file) {
    return Cli({"export", "--publish", "--once", "--node", kNode, "-f", file});
  }

  std::string dgx_, pcie_;
  fs::path file_;
};

TEST_F(TopologyPublishFileTest, OncePublishesTheFileAndAChangedFileAgain) {
  WriteAll(file_, dgx_);
  CliRun r = Once(file_.string());
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("created draguard-shape-"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("published on the node"), std::string::npos) << r.out;
  EXPECT_EQ(PublishedShape(), Fingerprint(dgx_));  // in the service account's namespace
  EXPECT_EQ(ShapeLabel(), Fingerprint(dgx_));

  r = Once(file_.string());  // unchanged: nothing written
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("unchanged"), std::string::npos) << r.out;

  WriteAll(file_, pcie_);
  r = Cli({"export", "--publish", "--once", "--node", kNode, "--file", file_.string()});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("created draguard-shape-"), std::string::npos) << r.out;
  EXPECT_EQ(PublishedShape(), Fingerprint(pcie_));
  EXPECT_EQ(ShapeLabel(), Fingerprint(pcie_));
  EXPECT_NE(Fingerprint(pcie_), Fingerprint(dgx_));
}

TEST_F(TopologyPublishFileTest, ABadOrMissingFileFailsAndLeavesThePublishedState) {
  WriteAll(file_, dgx_);
  ASSERT_EQ(Once(file_.string()).code, kExitOk);
  const std::string label = ShapeLabel();
  const size_t calls_before = server_->seen().size();

  WriteAll(file_, "<topology version=\"2.0\"><object type=\"Machine\">");  // truncated
  CliRun r = Once(file_.string());
  EXPECT_EQ(r.code, kExitRuntime);
  EXPECT_NE(r.err.find(file_.string() + ": not an export the loader accepts"), std::string::npos) << r.err;
  WriteAll(file_, "not xml at all");
  r = Once(file_.string());
  EXPECT_EQ(r.code, kExitRuntime);
  EXPECT_NE(r.err.find(file_.string()), std::string::npos) << r.err;
  r = Once((dir_.path() / "missing.xml").string());
  EXPECT_EQ(r.code, kExitRuntime);
  EXPECT_NE(r.err.find("missing.xml"), std::string::npos) << r.err;
  EXPECT_EQ(server_->seen().size(), calls_before);  // no API call at all for a bad file
  EXPECT_EQ(PublishedShape(), Fingerprint(dgx_));
  EXPECT_EQ(ShapeLabel(), label);
}

TEST_F(TopologyPublishFileTest, TheLoopRereadsTheFileOnSighup) {
  WriteAll(file_, dgx_);
  std::ostringstream out, err;
  int rc = -1;
  std::atomic<bool> started{false};
  pthread_t loop_thread{};
  std::thread loop([&] {
    loop_thread = pthread_self();
    started = true;
    rc = Topology({"export", "--publish", "--node", kNode, "-f", file_.string(), "--interval", "1h",
                   "--probe-listen", ""},
                  out, err);
  });
  // Wait for the Node's publication of `xml` (label and annotation are one write).
  auto wait_for = [&](const std::string& xml) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    auto done = [&] { return PublishedShape() == Fingerprint(xml) && ShapeLabel() == Fingerprint(xml); };
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return done();
  };
  // After the first publish the loop's signal mask is in place: the signals below are
  // thread-directed, so only its sigtimedwait sees them.
  const bool first = wait_for(dgx_) && started.load();
  EXPECT_TRUE(first);
  if (first) {
    WriteAll(file_, pcie_);
    pthread_kill(loop_thread, SIGHUP);
    EXPECT_TRUE(wait_for(pcie_));
    EXPECT_EQ(ShapeLabel(), Fingerprint(pcie_));
  }
  while (!started.load()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  pthread_kill(loop_thread, SIGTERM);
  loop.join();
  EXPECT_EQ(rc, kExitOk) << err.str();
  EXPECT_NE(out.str().find("published on the node"), std::string::npos) << out.str();
}

}  // namespace
}  // namespace draguard::cli
