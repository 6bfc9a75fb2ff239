// The draguard binary end to end: `serve` on embedded defaults (generated state folder, bundled
// policy), answers over verified TLS, exits 0 on SIGTERM; `review` prints what the server sends.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tls_client.h"

namespace draguard {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A child process with its stdout on a pipe.
struct Child {
  pid_t pid = -1;
  FILE* out = nullptr;

  static Child Spawn(const std::vector<std::string>& args, const fs::path& cwd) {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    Child c;
    c.pid = fork();
    if (c.pid == 0) {
      dup2(fds[1], 1);
      dup2(fds[1], 2);
      close(fds[0]);
      if (chdir(cwd.c_str()) != 0) _exit(127);
      std::vector<char*> argv;
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(fds[1]);
    c.out = fdopen(fds[0], "r");
    return c;
  }

  // Reads lines until one matches; every read blocks on the child's output, not on a clock.
  std::string ReadUntil(const std::string& needle, std::string* all) {
    char line[8192];
    while (fgets(line, sizeof line, out) != nullptr) {
      *all += line;
      if (std::string(line).find(needle) != std::string::npos) return line;
    }
    return "";
  }

  int Wait() {
    int status = 0;
    waitpid(pid, &status, 0);
    if (out != nullptr) fclose(out);
    out = nullptr;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
};

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("draguard-cli-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(CliTest, ServeOnEmbeddedDefaultsAnswersAndStopsOnSigterm) {
  auto child = Child::Spawn({DRAGUARD_BINARY, "serve", "--listen", "127.0.0.1:0", "--shutdown-delay", "0"},
                            dir_);
  std::string log;
  std::string line = child.ReadUntil("\"msg\":\"listening\"", &log);
  ASSERT_FALSE(line.empty()) << log;
  auto j = nlohmann::json::parse(line);
  std::string addr = j["address"];
  int port = std::stoi(addr.substr(addr.rfind(':') + 1));
  EXPECT_NE(j["try"].get<std::string>().find("curl --cacert .draguard/ca.crt"), std::string::npos);
  EXPECT_NE(log.find("generated CA and serving certificate"), std::string::npos);
  for (const char* f : {"ca.crt", "ca.key", "tls.crt", "tls.key"}) {
    auto perms = fs::status(dir_ / ".draguard" / f).permissions();
    EXPECT_EQ(perms & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write) << f;
  }
  // No key material in the log.
  EXPECT_EQ(log.find("PRIVATE KEY"), std::string::npos);

  testing::ClientOptions o;
  o.ca_file = (dir_ / ".draguard" / "ca.crt").string();
  std::string err;
  auto c = testing::TlsConnection::Connect(port, o, &err);
  ASSERT_NE(c, nullptr) << err;
  testing::HttpResponse r;
  std::string review = Slurp(fs::path(DRAGUARD_TEST_DATA) / "reviews/DG001/legacy-limit/request.json");
  ASSERT_TRUE(c->Request("POST", "/validate", review, &r));
  EXPECT_EQ(r.status, 200);
  auto resp = nlohmann::json::parse(r.body);
  EXPECT_EQ(resp["response"]["allowed"], false);
  EXPECT_EQ(resp["response"]["status"]["message"].get<std::string>().rfind("DG001", 0), 0u);
  c.reset();
  std::string decision = child.ReadUntil("\"msg\":\"admission\"", &log);
  ASSERT_FALSE(decision.empty()) << log;
  auto d = nlohmann::json::parse(decision);
  EXPECT_EQ(d["decision"], "deny");
  EXPECT_EQ(d["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
  EXPECT_EQ(d["kind"], "Pod");
  EXPECT_EQ(d["namespace"], "team-a");
  EXPECT_EQ(d["user"], "alice");
  EXPECT_EQ(d["rules"], nlohmann::json::array({"DG001"}));
  EXPECT_TRUE(d.contains("latency_us"));

  kill(child.pid, SIGTERM);
  std::string rest;
  child.ReadUntil("server stopped", &rest);
  EXPECT_EQ(child.Wait(), 0) << rest;

  // A second start reuses the state folder.
  auto again = Child::Spawn({DRAGUARD_BINARY, "serve", "--listen", "127.0.0.1:0", "--shutdown-delay", "0"}, dir_);
  std::string log2;
  ASSERT_FALSE(again.ReadUntil("\"msg\":\"listening\"", &log2).empty()) << log2;
  EXPECT_NE(log2.find("reusing CA and serving certificate"), std::string::npos) << log2;
  kill(again.pid, SIGINT);
  EXPECT_EQ(again.Wait(), 0);
}

TEST_F(CliTest, ReviewPrintsWhatTheServerSends) {
  auto child = Child::Spawn({DRAGUARD_BINARY, "review", "-f",
                             std::string(DRAGUARD_TEST_DATA) + "/reviews/DG001/legacy-limit/request.json"},
                            dir_);
  std::string out;
  child.ReadUntil("\x01", &out);
  EXPECT_EQ(child.Wait(), 0);
  auto got = nlohmann::json::parse(out);
  auto want = nlohmann::json::parse(Slurp(fs::path(DRAGUARD_TEST_DATA) / "reviews/DG001/legacy-limit/expected.json"));
  EXPECT_EQ(got, want);
}

TEST_F(CliTest, CelEvalAgainstTheSimulatedDevicesOfANode) {
  const std::string file = std::string(DRAGUARD_TEST_DATA) +
                           "/hwloc/aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml";
  // The two T4s under root complex pci0000:17 (ground truth), each reporting 15109 MiB.
  auto child = Child::Spawn({DRAGUARD_BINARY, "cel", "eval",
                             "device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:17' && "
                             "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('14Gi')) >= 0",
                             "--topology", file, "--node", "aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa"},
                            dir_);
  std::string out;
  child.ReadUntil("\x01", &out);
  EXPECT_EQ(child.Wait(), 0) << out;
  int true_count = 0, false_count = 0;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(": true") != std::string::npos) ++true_count;
    if (line.find(": false") != std::string::npos) ++false_count;
  }
  EXPECT_EQ(true_count, 2) << out;
  EXPECT_EQ(false_count, 6) << out;
  EXPECT_NE(out.find("gpu-0: true"), std::string::npos) << out;
  // 15Gi is above what a T4 reports: nothing qualifies.
  auto none = Child::Spawn({DRAGUARD_BINARY, "cel", "eval",
                            "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('15Gi')) >= 0",
                            "--topology", file, "--node", "aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa"},
                           dir_);
  out.clear();
  none.ReadUntil("\x01", &out);
  EXPECT_EQ(none.Wait(), 0);
  EXPECT_EQ(out.find(": true"), std::string::npos) << out;
  auto missing = Child::Spawn({DRAGUARD_BINARY, "cel", "eval", "true", "--topology", file, "--node", "nope"}, dir_);
  out.clear();
  missing.ReadUntil("\x01", &out);
  EXPECT_EQ(missing.Wait(), 2);
  EXPECT_NE(out.find("is not in"), std::string::npos) << out;
}

TEST_F(CliTest, ExitCodes) {
  auto usage = Child::Spawn({DRAGUARD_BINARY, "serve", "--bogus"}, dir_);
  std::string out;
  usage.ReadUntil("\x01", &out);
  EXPECT_EQ(usage.Wait(), 1) << out;
  std::ofstream(dir_ / "bad.yaml") << "apiVersion: draguard.io/v1alpha1\nkind: Policy\nmodee: x\n";
  auto bad_config = Child::Spawn({DRAGUARD_BINARY, "serve", "--config", "bad.yaml"}, dir_);
  out.clear();
  bad_config.ReadUntil("\x01", &out);
  EXPECT_EQ(bad_config.Wait(), 1);
  EXPECT_NE(out.find("bad.yaml:3:1: modee: unknown key"), std::string::npos) << out;
  std::ofstream(dir_ / "garbage.json") << "{nope";
  auto bad_review = Child::Spawn({DRAGUARD_BINARY, "review", "-f", "garbage.json"}, dir_);
  out.clear();
  bad_review.ReadUntil("\x01", &out);
  EXPECT_EQ(bad_review.Wait(), 2) << out;
  auto version = Child::Spawn({DRAGUARD_BINARY, "version"}, dir_);
  out.clear();
  version.ReadUntil("\x01", &out);
  EXPECT_EQ(version.Wait(), 0);
  EXPECT_EQ(out.rfind("draguard ", 0), 0u);
}

}  // namespace
}  // namespace draguard
