// The draguard binary end to end: `serve` on embedded defaults (generated state folder, bundled
// policy), answers over verified TLS, exits 0 on SIGTERM; `review` prints what the server sends.
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "draguard/server/tls.h"
#include "draguard/yamljson/yamljson.h"
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

// A child process with its stdout on a pipe. Reads and waits give up after kHangLimit, so a
// hang fails the test in seconds; they never serve as synchronisation.
constexpr int kHangLimitMs = 30000;

struct Child {
  pid_t pid = -1;
  int out = -1;
  std::string pending;  // read but not yet returned

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
    c.out = fds[0];
    return c;
  }

  // Reads lines until one contains `needle` (returned, with its newline); "" at end of output or
  // when the child printed nothing for kHangLimitMs.
  std::string ReadUntil(const std::string& needle, std::string* all) {
    for (;;) {
      for (std::size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
        std::string line = pending.substr(0, nl + 1);
        pending.erase(0, nl + 1);
        *all += line;
        if (line.find(needle) != std::string::npos) return line;
      }
      pollfd p{out, POLLIN, 0};
      if (poll(&p, 1, kHangLimitMs) <= 0) {
        ADD_FAILURE() << "no output from the child for " << kHangLimitMs << " ms";
        return "";
      }
      char buf[8192];
      ssize_t n = read(out, buf, sizeof buf);
      if (n <= 0) {
        *all += pending;
        pending.clear();
        return "";
      }
      pending.append(buf, static_cast<std::size_t>(n));
    }
  }

  // The exit code (128 + signal when killed); a child still running after kHangLimitMs is killed
  // and the test fails.
  int Wait() {
    int status = 0;
    int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      if (poll(&p, 1, kHangLimitMs) <= 0) {
        ADD_FAILURE() << "the child did not exit within " << kHangLimitMs << " ms; killing it";
        kill(pid, SIGKILL);
      }
      close(pidfd);
    }
    waitpid(pid, &status, 0);
    if (out >= 0) close(out);
    out = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
};

// Runs the binary to completion with stdout and stderr captured apart (files in `cwd`).
struct RunResult {
  int code = -1;
  std::string out;
  std::string err;
};

RunResult RunCli(const std::vector<std::string>& args, const fs::path& cwd) {
  const fs::path out_file = cwd / ".run-stdout", err_file = cwd / ".run-stderr";
  pid_t pid = fork();
  if (pid == 0) {
    if (chdir(cwd.c_str()) != 0) _exit(127);
    FILE* o = std::freopen(out_file.c_str(), "w", stdout);
    FILE* e = std::freopen(err_file.c_str(), "w", stderr);
    if (o == nullptr || e == nullptr) _exit(127);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  RunResult r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = Slurp(out_file);
  r.err = Slurp(err_file);
  return r;
}

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
                             "--topology", file, "--node", "aws-g4dn-metal-2s-8259cl-8xt4-cuda-nvml-opencl-efa"},
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
                            "--topology", file, "--node", "aws-g4dn-metal-2s-8259cl-8xt4-cuda-nvml-opencl-efa"},
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

// --- convert / render / review --mutate ---------------------------------------------------------

const std::string kT4Topology =
    std::string(DRAGUARD_TEST_DATA) + "/hwloc/aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml";

// Every resourceClaimTemplateName the object's pod specs reference.
void CollectTemplateRefs(const nlohmann::json& v, std::vector<std::string>* out) {
  if (v.is_object()) {
    if (auto it = v.find("resourceClaimTemplateName"); it != v.end() && it->is_string()) out->push_back(*it);
    for (const auto& [k, item] : v.items()) CollectTemplateRefs(item, out);
  } else if (v.is_array()) {
    for (const auto& item : v) CollectTemplateRefs(item, out);
  }
}

// True when some container still requests or limits a legacy nvidia.com/ resource.
bool HasLegacyGpuResource(const nlohmann::json& v) {
  if (v.is_object()) {
    for (const char* section : {"requests", "limits"}) {
      if (auto it = v.find(section); it != v.end() && it->is_object()) {
        for (const auto& [k, item] : it->items()) {
          if (k.rfind("nvidia.com/", 0) == 0) return true;
        }
      }
    }
    for (const auto& [k, item] : v.items()) {
      if (HasLegacyGpuResource(item)) return true;
    }
  } else if (v.is_array()) {
    for (const auto& item : v) {
      if (HasLegacyGpuResource(item)) return true;
    }
  }
  return false;
}

TEST_F(CliTest, ConvertLegacyDeploymentAndPod) {
  const fs::path legacy = fs::path(DRAGUARD_TEST_DATA) / "manifests/legacy";
  // Deployment + ConfigMap, then a Pod: three documents.
  std::ofstream(dir_ / "in.yaml") << Slurp(legacy / "vllm-project-production-stack__gpu-deployment.yaml")
                                  << "\n---\n" << Slurp(legacy / "NVIDIA-gpu-operator__gpu-pod.yaml");
  auto yaml = RunCli({DRAGUARD_BINARY, "convert", "-f", "in.yaml", "--topology-dir", kT4Topology}, dir_);
  ASSERT_EQ(yaml.code, 0) << yaml.err;
  EXPECT_EQ(yaml.out.rfind("---\n", 0), 0u) << yaml.out;
  EXPECT_EQ(yaml.out.find("nvidia.com/gpu:"), std::string::npos) << yaml.out;
  EXPECT_NE(yaml.err.find("2 converted"), std::string::npos) << yaml.err;

  auto json = RunCli({DRAGUARD_BINARY, "convert", "-f", "in.yaml", "--topology-dir", kT4Topology, "-o", "json"}, dir_);
  ASSERT_EQ(json.code, 0) << json.err;
  auto list = nlohmann::json::parse(json.out);
  ASSERT_EQ(list["kind"], "List");
  const auto& items = list["items"];
  ASSERT_GE(items.size(), 4u) << json.out;
  EXPECT_EQ(items[0]["kind"], "Deployment");
  EXPECT_EQ(items[1]["kind"], "ConfigMap");
  EXPECT_EQ(items[2]["kind"], "Pod");
  std::set<std::string> printed;
  for (std::size_t i = 3; i < items.size(); ++i) {
    EXPECT_EQ(items[i]["kind"], "ResourceClaimTemplate") << items[i].dump();
    EXPECT_EQ(items[i]["apiVersion"], "resource.k8s.io/v1");
    EXPECT_EQ(items[i]["metadata"]["namespace"], "default");
    EXPECT_TRUE(printed.insert(items[i]["metadata"]["name"].get<std::string>()).second) << "duplicate template";
  }
  for (std::size_t i : {0u, 2u}) {
    const auto& spec = i == 0 ? items[i]["spec"]["template"]["spec"] : items[i]["spec"];
    ASSERT_TRUE(spec.contains("resourceClaims")) << items[i].dump(2);
    std::vector<std::string> refs;
    CollectTemplateRefs(spec["resourceClaims"], &refs);
    ASSERT_FALSE(refs.empty()) << items[i].dump(2);
    for (const auto& r : refs) EXPECT_EQ(printed.count(r), 1u) << r << " is not printed";
    EXPECT_FALSE(HasLegacyGpuResource(items[i])) << items[i].dump(2);
  }
  // --config with the bundled policy's file gives the same result as the embedded default.
  auto input = RunCli({DRAGUARD_BINARY, "convert", "-f", "in.yaml", "--topology-dir", kT4Topology, "-o", "json",
                    "--config", std::string(DRAGUARD_SOURCE_DIR) + "/deploy/policy/default-policy.yaml"},
                   dir_);
  EXPECT_EQ(nlohmann::json::parse(input.out), list);

  // The YAML output parses (draguard reads it back), means the same as the JSON output, and is
  // already converted: converting it again changes nothing.
  std::ofstream(dir_ / "out.yaml") << yaml.out;
  auto again = RunCli({DRAGUARD_BINARY, "convert", "-f", "out.yaml", "--topology-dir", kT4Topology, "-o", "json"}, dir_);
  ASSERT_EQ(again.code, 0) << again.err;
  auto reread = nlohmann::json::parse(again.out);
  EXPECT_EQ(reread, list);
  EXPECT_NE(again.err.find("0 converted"), std::string::npos) << again.err;

  // A kind: List on stdin is expanded into its items.
  std::ofstream(dir_ / "list.json") << nlohmann::json({{"apiVersion", "v1"}, {"kind", "List"},
                                                       {"items", {items[2]}}}).dump();
  auto from_list = RunCli({DRAGUARD_BINARY, "convert", "-f", "list.json", "-o", "json"}, dir_);
  EXPECT_EQ(from_list.code, 0) << from_list.err;
  EXPECT_EQ(nlohmann::json::parse(from_list.out)["items"].size(), 1u) << from_list.out;
}

TEST_F(CliTest, ConvertRefusesWhatThePolicyDenies) {
  // nvidia.com/gpu.shared under the default policy (mutation.shared: deny).
  std::ofstream(dir_ / "shared.yaml") << R"(apiVersion: v1
kind: Pod
metadata: {name: shared, namespace: team-a}
spec:
  containers:
  - name: c
    image: cuda
    resources: {limits: {nvidia.com/gpu.shared: 1}}
---
apiVersion: v1
kind: Service
metadata: {name: svc}
spec: {ports: [{port: 80}]}
)";
  auto r = RunCli({DRAGUARD_BINARY, "convert", "-f", "shared.yaml", "--topology-dir", kT4Topology, "-o", "json"}, dir_);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("document 0 (Pod/shared)"), std::string::npos) << r.err;
  auto list = nlohmann::json::parse(r.out);
  ASSERT_EQ(list["items"].size(), 2u) << r.out;  // both documents, no template
  EXPECT_EQ(list["items"][0]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu.shared"], 1);
  EXPECT_EQ(list["items"][1]["kind"], "Service");
}

TEST_F(CliTest, ConvertAndRenderUsageErrors) {
  std::ofstream(dir_ / "pod.yaml") << "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n";
  std::ofstream(dir_ / "bad.yaml") << "apiVersion: draguard.io/v1alpha1\nkind: Policy\nmodee: x\n";
  std::ofstream(dir_ / "garbage.yaml") << "a: [1, 2\n";
  const std::vector<std::vector<std::string>> usage = {
      {DRAGUARD_BINARY, "convert"},
      {DRAGUARD_BINARY, "convert", "-f", "missing.yaml"},
      {DRAGUARD_BINARY, "convert", "-f", "garbage.yaml"},
      {DRAGUARD_BINARY, "convert", "-f", "pod.yaml", "--bogus"},
      {DRAGUARD_BINARY, "convert", "-f", "pod.yaml", "-o", "xml"},
      {DRAGUARD_BINARY, "convert", "-f", "pod.yaml", "--config", "bad.yaml"},
      {DRAGUARD_BINARY, "convert", "-f", "pod.yaml", "--topology-dir", "no-such-dir"},
      {DRAGUARD_BINARY, "render", "extra"},
      {DRAGUARD_BINARY, "render", "-o", "xml"},
      {DRAGUARD_BINARY, "render", "--config", "bad.yaml"},
      {DRAGUARD_BINARY, "render", "--kueue", "--namespace", "team-a"},
      {DRAGUARD_BINARY, "render", "--kueue", "--config", "bad.yaml"},
  };
  for (const auto& args : usage) {
    auto r = RunCli(args, dir_);
    EXPECT_EQ(r.code, 2) << args[1] << " " << (args.size() > 2 ? args[2] : "") << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_FALSE(r.err.empty());
  }
  // Nothing to convert: printed as is, exit 0.
  auto noop = RunCli({DRAGUARD_BINARY, "convert", "-f", "pod.yaml"}, dir_);
  EXPECT_EQ(noop.code, 0) << noop.err;
  EXPECT_EQ(noop.out, "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers: []\n");
  // The bundled policy has an empty catalogue: nothing printed, exit 0.
  auto empty = RunCli({DRAGUARD_BINARY, "render"}, dir_);
  EXPECT_EQ(empty.code, 0) << empty.err;
  EXPECT_TRUE(empty.out.empty()) << empty.out;
  EXPECT_NE(empty.err.find("catalogue is empty"), std::string::npos) << empty.err;
}

// The bundled policy with `catalogue: []` replaced.
void WritePolicyWithCatalogue(const fs::path& path, const std::string& catalogue) {
  std::string policy = Slurp(fs::path(DRAGUARD_SOURCE_DIR) / "deploy/policy/default-policy.yaml");
  auto at = policy.find("  catalogue: []\n");
  ASSERT_NE(at, std::string::npos);
  policy.replace(at, std::string("  catalogue: []\n").size(), catalogue);
  std::ofstream(path) << policy;
}

TEST_F(CliTest, RenderTheCatalogue) {
  WritePolicyWithCatalogue(dir_ / "policy.yaml",
                           "  catalogue:\n  - {gpus: 1}\n  - {gpus: 2, memory: 8Gi}\n");
  const std::vector<std::string> args = {DRAGUARD_BINARY, "render",     "--config",    "policy.yaml",
                                         "--topology-dir", kT4Topology, "--namespace", "team-a",
                                         "--namespace",    "team-b",    "-o",          "json"};
  auto r = RunCli(args, dir_);
  ASSERT_EQ(r.code, 0) << r.err;
  auto list = nlohmann::json::parse(r.out);
  ASSERT_EQ(list["items"].size(), 4u) << r.out;
  std::map<std::string, std::set<std::string>> names;  // namespace -> names
  for (const auto& t : list["items"]) {
    EXPECT_EQ(t["kind"], "ResourceClaimTemplate");
    EXPECT_EQ(t["metadata"]["name"].get<std::string>().rfind("draguard-", 0), 0u);
    names[t["metadata"]["namespace"]].insert(t["metadata"]["name"]);
  }
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names["team-a"].size(), 2u);
  EXPECT_EQ(names["team-a"], names["team-b"]);  // content-addressed: same names per namespace
  // Stable across runs, byte for byte, in both formats.
  EXPECT_EQ(RunCli(args, dir_).out, r.out);
  auto yaml1 = RunCli({DRAGUARD_BINARY, "render", "--config", "policy.yaml", "--topology-dir", kT4Topology}, dir_);
  auto yaml2 = RunCli({DRAGUARD_BINARY, "render", "--config", "policy.yaml", "--topology-dir", kT4Topology}, dir_);
  ASSERT_EQ(yaml1.code, 0) << yaml1.err;
  EXPECT_EQ(yaml1.out, yaml2.out);
  EXPECT_EQ(yaml1.out.find("namespace:"), std::string::npos) << yaml1.out;  // for kubectl apply -n
  for (const auto& name : names["team-a"]) EXPECT_NE(yaml1.out.find("name: " + name), std::string::npos);

  // A profile no node can provide: error on stderr, exit 1, the others still printed.
  WritePolicyWithCatalogue(dir_ / "impossible.yaml", "  catalogue:\n  - {gpus: 1}\n  - {gpus: 32}\n");
  auto bad = RunCli({DRAGUARD_BINARY, "render", "--config", "impossible.yaml", "--topology-dir", kT4Topology,
                  "-o", "json"}, dir_);
  EXPECT_EQ(bad.code, 1) << bad.err;
  EXPECT_NE(bad.err.find("mutation.catalogue[1]"), std::string::npos) << bad.err;
  EXPECT_EQ(nlohmann::json::parse(bad.out)["items"].size(), 1u) << bad.out;
}

// render --kueue: the Kueue Configuration fragment for the policy, the same in YAML and JSON;
// notes on stderr for what in the policy works against Kueue; a class in two mappings is an error.
TEST_F(CliTest, RenderTheKueueConfiguration) {
  auto yaml = RunCli({DRAGUARD_BINARY, "render", "--kueue"}, dir_);
  ASSERT_EQ(yaml.code, 0) << yaml.err;
  EXPECT_NE(yaml.out.find("# Kueue"), std::string::npos) << yaml.out;
  EXPECT_NE(yaml.err.find("does not set mutation.kueue: true"), std::string::npos) << yaml.err;
  EXPECT_NE(yaml.err.find("numaAlignment is pcieRoots"), std::string::npos) << yaml.err;
  auto json = RunCli({DRAGUARD_BINARY, "render", "--kueue", "-o", "json"}, dir_);
  ASSERT_EQ(json.code, 0) << json.err;
  auto config = nlohmann::json::parse(json.out);
  EXPECT_EQ(config["kind"], "Configuration");
  EXPECT_EQ(config["resources"]["deviceClassMappings"][0],
            nlohmann::json({{"name", "nvidia.com/gpu"}, {"deviceClassNames", {"gpu.nvidia.com", "vfio.gpu.nvidia.com"}}}));
  for (const auto& m : config["resources"]["deviceClassMappings"]) {
    EXPECT_NE(yaml.out.find(m["name"].get<std::string>()), std::string::npos) << m.dump();
  }

  std::string policy = Slurp(fs::path(DRAGUARD_SOURCE_DIR) / "deploy/policy/default-policy.yaml");
  policy.replace(policy.find("kueue: false"), 12, "kueue: true");
  policy.replace(policy.find("numaAlignment: pcieRoots"), 24, "numaAlignment: numaNode");
  std::ofstream(dir_ / "kueue.yaml") << policy;
  auto quiet = RunCli({DRAGUARD_BINARY, "render", "--kueue", "--config", "kueue.yaml"}, dir_);
  EXPECT_EQ(quiet.code, 0) << quiet.err;
  EXPECT_TRUE(quiet.err.empty()) << quiet.err;
  policy.replace(policy.find("cpu: [dra.cpu]"), 14, "cpu: [dra.cpu, dranet]");
  std::ofstream(dir_ / "twice.yaml") << policy;
  auto twice = RunCli({DRAGUARD_BINARY, "render", "--kueue", "--config", "twice.yaml"}, dir_);
  EXPECT_EQ(twice.code, 2);
  EXPECT_TRUE(twice.out.empty()) << twice.out;
  EXPECT_NE(twice.err.find("DeviceClass dranet would be in Kueue's mappings"), std::string::npos) << twice.err;
}

TEST_F(CliTest, ReviewMutateShowsTheDecodedPatch) {
  const std::string file = std::string(DRAGUARD_TEST_DATA) + "/reviews/DG001/legacy-limit/request.json";
  auto r = RunCli({DRAGUARD_BINARY, "review", "--mutate", "-f", file, "--topology-dir",
                std::string(DRAGUARD_TEST_DATA) + "/hwloc"}, dir_);
  ASSERT_EQ(r.code, 0) << r.err;
  auto resp = nlohmann::json::parse(r.out);  // stdout: the response alone
  ASSERT_TRUE(resp["response"].contains("patch")) << r.out << r.err;
  const std::string header = "# patch (decoded from response.patch):\n";
  auto at = r.err.find(header);
  ASSERT_NE(at, std::string::npos) << r.err;
  auto ops = nlohmann::json::parse(r.err.substr(at + header.size()));
  ASSERT_TRUE(ops.is_array());
  ASSERT_FALSE(ops.empty());
  EXPECT_TRUE(ops[0].contains("op"));

  auto shown = RunCli({DRAGUARD_BINARY, "review", "--mutate", "--show-patch", "-f", file, "--topology-dir",
                    std::string(DRAGUARD_TEST_DATA) + "/hwloc"}, dir_);
  ASSERT_EQ(shown.code, 0) << shown.err;
  at = shown.out.find(header);
  ASSERT_NE(at, std::string::npos) << shown.out;
  EXPECT_EQ(nlohmann::json::parse(shown.out.substr(0, at)), resp);
  EXPECT_EQ(nlohmann::json::parse(shown.out.substr(at + header.size())), ops);
  EXPECT_EQ(shown.err.find(header), std::string::npos);
}

// --- audit ---------------------------------------------------------------------------------------

constexpr const char* kLegacyPod =
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: train\n  namespace: ml\nspec:\n  containers:\n  - name: c\n"
    "    image: x\n    resources:\n      limits:\n        nvidia.com/gpu: 1\n";
constexpr const char* kCleanPod =
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: c\n    image: x\n";
constexpr const char* kLegacyDeployment =
    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: serve\n  namespace: ml\nspec:\n  template:\n"
    "    spec:\n      containers:\n      - name: c\n        image: x\n        resources:\n          limits:\n"
    "            nvidia.com/gpu: 1\n";

TEST_F(CliTest, AuditExitCodesFollowWhatTheWebhookWouldDeny) {
  std::ofstream(dir_ / "no-mutation.yaml") << "apiVersion: draguard.io/v1alpha1\nkind: Policy\nmutation:\n  enabled: false\n";
  std::ofstream(dir_ / "clean.yaml") << kCleanPod << "---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\n";
  auto clean = RunCli({DRAGUARD_BINARY, "audit", "-f", "clean.yaml"}, dir_);
  EXPECT_EQ(clean.code, 0) << clean.err;
  EXPECT_NE(clean.out.find("No findings."), std::string::npos) << clean.out;
  EXPECT_NE(clean.out.find("1 objects judged, 1 of kinds draguard does not review"), std::string::npos) << clean.out;

  // Mutation on (the default): the Pod would be converted, the Deployment only warned about.
  std::ofstream(dir_ / "legacy.yaml") << kLegacyPod << "---\n" << kLegacyDeployment;
  auto converted = RunCli({DRAGUARD_BINARY, "audit", "-f", "legacy.yaml"}, dir_);
  EXPECT_EQ(converted.code, 0) << converted.out << converted.err;
  EXPECT_NE(converted.out.find("2 would be converted by /mutate"), std::string::npos) << converted.out;
  EXPECT_NE(converted.out.find("DG001/warn=1"), std::string::npos) << converted.out;
  auto strict = RunCli({DRAGUARD_BINARY, "audit", "-f", "legacy.yaml", "--fail-on", "warn"}, dir_);
  EXPECT_EQ(strict.code, 1) << strict.out;

  // Mutation off: both are denied; one table line per finding, with the field path.
  auto denied = RunCli({DRAGUARD_BINARY, "audit", "-f", "legacy.yaml", "--config", "no-mutation.yaml"}, dir_);
  EXPECT_EQ(denied.code, 1) << denied.out << denied.err;
  EXPECT_NE(denied.out.find("Pod"), std::string::npos);
  std::istringstream lines(denied.out);
  int rows = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find(" DG001 ") == std::string::npos) continue;
    ++rows;
    EXPECT_NE(line.find(" deny "), std::string::npos) << line;
    EXPECT_NE(line.find("ml/"), std::string::npos) << line;
    EXPECT_NE(line.find("(/spec/"), std::string::npos) << line;
  }
  EXPECT_EQ(rows, 2) << denied.out;

  // A malformed document is reported with file and index; the rest is still audited; exit 2.
  std::ofstream(dir_ / "broken.yaml") << kLegacyPod << "---\nkind: Pod\nmetadata: [x\n---\n" << kCleanPod;
  auto broken = RunCli({DRAGUARD_BINARY, "audit", "-f", "broken.yaml", "--config", "no-mutation.yaml"}, dir_);
  EXPECT_EQ(broken.code, 2) << broken.err;
  EXPECT_NE(broken.err.find("broken.yaml: document 1:"), std::string::npos) << broken.err;
  EXPECT_NE(broken.out.find("2 objects judged"), std::string::npos) << broken.out;
  EXPECT_NE(broken.out.find("ml/train"), std::string::npos) << broken.out;

  // Usage and input errors.
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"audit"}, {"audit", "-f", "clean.yaml", "-o", "xml"}, {"audit", "-f", "missing.yaml"},
           {"audit", "-f", "clean.yaml", "--fail-on", "never"}, {"audit", "-f", "clean.yaml", "--config", "nope.yaml"},
           {"audit", "-f", "clean.yaml", "--max-results", "0"}}) {
    std::vector<std::string> argv = {DRAGUARD_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = RunCli(argv, dir_);
    EXPECT_EQ(r.code, 2) << args.back() << ": " << r.err;
    EXPECT_NE(r.err.find("draguard audit: "), std::string::npos) << r.err;
  }
}

TEST_F(CliTest, AuditJsonAndPolicyReportOutputs) {
  std::ofstream(dir_ / "no-mutation.yaml") << "apiVersion: draguard.io/v1alpha1\nkind: Policy\nmutation:\n  enabled: false\n";
  // A kubectl-style JSON List dump.
  nlohmann::json pod = {{"apiVersion", "v1"}, {"kind", "Pod"},
                        {"metadata", {{"name", "p"}, {"namespace", "ml"}, {"uid", "u-1"}}},
                        {"spec", {{"containers", {{{"name", "c"}, {"image", "x"},
                                                   {"resources", {{"limits", {{"nvidia.com/gpu", 2}}}}}}}}}}};
  nlohmann::json list = {{"apiVersion", "v1"}, {"kind", "List"}, {"items", {pod, pod, pod}}};
  list["items"][1]["metadata"]["namespace"] = "web";
  list["items"][2]["spec"]["containers"][0].erase("resources");
  std::ofstream(dir_ / "dump.json") << list.dump();
  auto json = RunCli({DRAGUARD_BINARY, "audit", "-f", "dump.json", "--config", "no-mutation.yaml", "-o", "json"}, dir_);
  ASSERT_EQ(json.code, 1) << json.err;
  auto doc = nlohmann::json::parse(json.out);
  EXPECT_EQ(doc["kind"], "AuditReport");
  ASSERT_EQ(doc["results"].size(), 2u);
  EXPECT_EQ(doc["results"][0]["source"], "dump.json: document 0 item 0");
  EXPECT_EQ(doc["results"][0]["verdict"], "deny");
  EXPECT_EQ(doc["results"][0]["findings"][0]["rule"], "DG001");
  EXPECT_EQ(doc["summary"]["objects"], 3);
  EXPECT_EQ(doc["summary"]["verdicts"]["deny"], 2);
  EXPECT_NE(json.err.find("3 objects judged"), std::string::npos) << json.err;

  auto reports = RunCli({DRAGUARD_BINARY, "audit", "-f", "dump.json", "--config", "no-mutation.yaml", "-o",
                         "policyreport", "--max-results", "1"}, dir_);
  ASSERT_EQ(reports.code, 1) << reports.err;
  std::vector<std::string> kinds;
  std::istringstream docs(reports.out);
  std::string text = reports.out;
  EXPECT_EQ(text.rfind("---\n", 0), 0u);
  EXPECT_NE(text.find("apiVersion: wgpolicyk8s.io/v1alpha2\nkind: PolicyReport\n"), std::string::npos) << text;
  EXPECT_NE(text.find("namespace: ml"), std::string::npos);
  EXPECT_NE(text.find("namespace: web"), std::string::npos);
  EXPECT_NE(text.find("result: fail"), std::string::npos);
  EXPECT_NE(text.find("uid: u-1"), std::string::npos);

  // A whole directory of real manifests: something in it would be denied; nothing is malformed.
  auto dir = RunCli({DRAGUARD_BINARY, "audit", "-f", std::string(DRAGUARD_TEST_DATA) + "/manifests", "-o", "yaml"}, dir_);
  EXPECT_EQ(dir.code, 1) << dir.err;
  EXPECT_NE(dir.out.find("kind: AuditReport"), std::string::npos);
  EXPECT_NE(dir.err.find(" 0 malformed"), std::string::npos) << dir.err;
}

// What each Pod was really allocated, from a dump of a real control plane (test/data/audit/
// allocation/PROVENANCE.md): Pods first, then claims, then slices, as kubectl lists them.
TEST_F(CliTest, AuditReportsWhatEachPodWasReallyAllocated) {
  const fs::path data = fs::path(DRAGUARD_TEST_DATA) / "audit" / "allocation";
  fs::create_directories(dir_ / "topology");
  fs::copy_file(fs::path(DRAGUARD_TEST_DATA) / "hwloc" / "aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml",
                dir_ / "topology" / "aws-g4dn-metal-2s-8259cl-8xt4-cuda-nvml-opencl-efa.xml");
  const std::string dump = (data / "dump.json").string();
  std::vector<std::string> base = {DRAGUARD_BINARY, "audit", "-f", dump, "--topology-dir", "topology",
                                   "--release-namespace", "draguard"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = base;
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunCli(argv, dir_);
  };

  auto json = with({"-o", "json"});
  ASSERT_EQ(json.code, 0) << json.err;
  nlohmann::json got = nlohmann::json::array();
  const nlohmann::json report = nlohmann::json::parse(json.out);
  for (auto r : report["results"]) {
    if (!r.contains("allocation")) continue;
    EXPECT_EQ(r["source"].get<std::string>().rfind(dump + ": document 0 item ", 0), 0u) << r["source"];
    r.erase("source");
    got.push_back(r);
  }
  const nlohmann::json want = nlohmann::json::parse(Slurp(data / "expected.json"));
  EXPECT_EQ(got, want) << nlohmann::json::diff(want, got).dump(1);
  EXPECT_NE(json.err.find("allocations: 3 Pods, 3 containers with GPUs: none=2 pcie-root=1; fail=0 warn=1"),
            std::string::npos)
      << json.err;

  // The table lists the spread allocation; --fail-on warn fails on it.
  auto table = with({});
  EXPECT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("alloc-audit/legacy"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(" alloc  warn   container \"c\": 2 GPUs (gpu-2, gpu-4)"), std::string::npos) << table.out;
  EXPECT_EQ(with({"--fail-on", "warn"}).code, 1);

  // PolicyReports: the spread one warns, the converted and the blocking claims' pass.
  auto reports = with({"-o", "policyreport"});
  ASSERT_EQ(reports.code, 0) << reports.err;
  std::vector<std::string> results;
  auto docs = yamljson::ParseDocuments(reports.out);
  ASSERT_TRUE(docs.ok()) << docs.status().message();
  for (const auto& doc : *docs) {
    if (!doc.is_object()) continue;  // the empty document before the first "---"
    for (const auto& r : doc["results"]) {
      if (r["rule"] == "allocation") {
        results.push_back(r["resources"][0]["namespace"].get<std::string>() + "/" +
                          r["resources"][0]["name"].get<std::string>() + " " + r["result"].get<std::string>() + " " +
                          r["properties"]["alignment"].get<std::string>());
      }
    }
  }
  std::sort(results.begin(), results.end());
  EXPECT_EQ(results, (std::vector<std::string>{"alloc-audit/converted pass pcie-root", "alloc-audit/legacy warn none",
                                               "draguard/blocker pass none"}));

  // Without the topology only what the slices publish: NVLink cannot be told, the spread still can.
  // (/mutate cannot convert the legacy 2-GPU Pod without a topology either: DG001 denies it.)
  auto blind = RunCli({DRAGUARD_BINARY, "audit", "-f", dump, "--release-namespace", "draguard", "-o", "json"}, dir_);
  ASSERT_EQ(blind.code, 1) << blind.err;
  EXPECT_NE(blind.err.find("allocations: 3 Pods, 3 containers with GPUs: pcie-root=1 unknown=2; fail=0 warn=1"),
            std::string::npos)
      << blind.err;
}

}  // namespace
}  // namespace draguard

// --- selftest (the chart's `helm test` Pod) and backstop --------------------------------------

namespace draguard {
namespace {

// Starts `serve` in `dir` (generated CA in dir/.draguard) and returns its HTTPS port.
int StartServe(Child* child, const fs::path& dir, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {DRAGUARD_BINARY, "serve", "--listen", "127.0.0.1:0", "--shutdown-delay", "0"};
  args.insert(args.end(), extra.begin(), extra.end());
  *child = Child::Spawn(args, dir);
  std::string log;
  std::string line = child->ReadUntil("\"msg\":\"listening\"", &log);
  EXPECT_FALSE(line.empty()) << log;
  if (line.empty()) return 0;
  std::string addr = nlohmann::json::parse(line)["address"];
  return std::stoi(addr.substr(addr.rfind(':') + 1));
}

TEST_F(CliTest, SelftestExpectsTheDg001DenialOverVerifiedTls) {
  Child srv;
  const int port = StartServe(&srv, dir_);
  ASSERT_GT(port, 0);
  const std::string ca = (dir_ / ".draguard" / "ca.crt").string();
  const std::string url = "https://localhost:" + std::to_string(port);
  RunResult ok = RunCli({DRAGUARD_BINARY, "selftest", "--url", url, "--ca-file", ca}, dir_);
  EXPECT_EQ(ok.code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("denied a legacy GPU Pod: DG001"), std::string::npos) << ok.out;
  // Also by IP (the default certificate has 127.0.0.1 as a SAN).
  EXPECT_EQ(RunCli({DRAGUARD_BINARY, "selftest", "--url", "https://127.0.0.1:" + std::to_string(port), "--ca-file", ca},
                   dir_).code, 0);
  // Enforce mode does not pass --expect audit.
  RunResult audit = RunCli({DRAGUARD_BINARY, "selftest", "--url", url, "--ca-file", ca, "--expect", "audit"}, dir_);
  EXPECT_EQ(audit.code, 2) << audit.out << audit.err;
  EXPECT_NE(audit.err.find("FAIL: audit mode denied"), std::string::npos) << audit.err;
  // A CA that did not sign the certificate fails the TLS verification.
  auto other = server::CreateCertificateAuthority("another-ca", 1);
  ASSERT_TRUE(other.ok());
  std::ofstream(dir_ / "other-ca.crt") << other->cert_pem;
  RunResult bad_ca = RunCli({DRAGUARD_BINARY, "selftest", "--url", url, "--ca-file", (dir_ / "other-ca.crt").string()}, dir_);
  EXPECT_EQ(bad_ca.code, 2) << bad_ca.out << bad_ca.err;
  EXPECT_NE(bad_ca.err.find("FAIL: no answer"), std::string::npos) << bad_ca.err;
  // Nothing listening.
  kill(srv.pid, SIGTERM);
  EXPECT_EQ(srv.Wait(), 0);
  RunResult down = RunCli({DRAGUARD_BINARY, "selftest", "--url", url, "--ca-file", ca, "--timeout", "2"}, dir_);
  EXPECT_EQ(down.code, 2) << down.out << down.err;
}

TEST_F(CliTest, SelftestAuditMode) {
  std::ofstream(dir_ / "audit.yaml") << "apiVersion: draguard.io/v1alpha1\nkind: Policy\nmode: audit\n";
  Child srv;
  const int port = StartServe(&srv, dir_, {"--config", "audit.yaml"});
  ASSERT_GT(port, 0);
  const std::string ca = (dir_ / ".draguard" / "ca.crt").string();
  const std::string url = "https://localhost:" + std::to_string(port);
  RunResult ok = RunCli({DRAGUARD_BINARY, "selftest", "--url", url, "--ca-file", ca, "--expect", "audit"}, dir_);
  EXPECT_EQ(ok.code, 0) << ok.out << ok.err;
  RunResult deny = RunCli({DRAGUARD_BINARY, "selftest", "--url", url, "--ca-file", ca}, dir_);
  EXPECT_EQ(deny.code, 2) << deny.out << deny.err;
  EXPECT_NE(deny.err.find("was allowed"), std::string::npos) << deny.err;
  kill(srv.pid, SIGTERM);
  EXPECT_EQ(srv.Wait(), 0);
}

TEST_F(CliTest, BackstopPrintsThePolicyAndItsBinding) {
  RunResult r = RunCli({DRAGUARD_BINARY, "backstop", "--name", "dg-backstop", "-o", "json"}, dir_);
  ASSERT_EQ(r.code, 0) << r.err;
  auto list = nlohmann::json::parse(r.out);
  ASSERT_EQ(list["items"].size(), 2u);
  EXPECT_EQ(list["items"][0]["kind"], "ValidatingAdmissionPolicy");
  EXPECT_EQ(list["items"][1]["spec"]["validationActions"], nlohmann::json::array({"Deny"}));
  std::ofstream(dir_ / "off.yaml") << "apiVersion: draguard.io/v1alpha1\nkind: Policy\nrules:\n  DG001: {action: off}\n";
  RunResult off = RunCli({DRAGUARD_BINARY, "backstop", "--config", "off.yaml"}, dir_);
  EXPECT_EQ(off.code, 0);
  EXPECT_EQ(off.out, "");
  EXPECT_NE(off.err.find("DG001 is off"), std::string::npos);
}

// The port of a `serve` child from its "listening" line (0 when it never listened).
int ListeningPort(Child& child, std::string* log) {
  std::string line = child.ReadUntil("\"msg\":\"listening\"", log);
  if (line.empty()) return 0;
  std::string addr = nlohmann::json::parse(line)["address"];
  return std::stoi(addr.substr(addr.rfind(':') + 1));
}

// One /validate of a plain Pod over TLS verified against the generated CA; its HTTP status.
int ValidatePlainPod(const fs::path& dir, int port) {
  testing::ClientOptions o;
  o.ca_file = (dir / ".draguard" / "ca.crt").string();
  std::string err;
  auto c = testing::TlsConnection::Connect(port, o, &err);
  if (c == nullptr) return 0;
  testing::HttpResponse r;
  std::string review = Slurp(fs::path(DRAGUARD_TEST_DATA) / "reviews/DG001/plain-pod-allowed/request.json");
  return c->Request("POST", "/validate", review, &r) ? r.status : 0;
}

// SIGHUP reloads, SIGUSR1/SIGUSR2 are logged and ignored: the process keeps serving; SIGQUIT
// drains like SIGTERM (exit 0).
TEST_F(CliTest, SighupReloadsAndOtherSignalsDoNotKillTheServer) {
  std::ofstream(dir_ / "policy.yaml") << Slurp(fs::path(DRAGUARD_SOURCE_DIR) / "deploy/policy/default-policy.yaml");
  auto child = Child::Spawn({DRAGUARD_BINARY, "serve", "--listen", "127.0.0.1:0", "--shutdown-delay", "0",
                             "--config", "policy.yaml", "--reload-interval", "3600"},
                            dir_);
  std::string log;
  const int port = ListeningPort(child, &log);
  ASSERT_GT(port, 0) << log;
  ASSERT_EQ(ValidatePlainPod(dir_, port), 200);

  kill(child.pid, SIGHUP);
  std::string line = child.ReadUntil("\"msg\":\"reloaded on SIGHUP\"", &log);
  ASSERT_FALSE(line.empty()) << log;
  auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["policy"], "ok");
  EXPECT_EQ(j["certificate"], "ok");
  EXPECT_EQ(j["topology"], "ok");
  EXPECT_NE(log.find("\"signal\":\"SIGHUP\""), std::string::npos) << log;
  EXPECT_EQ(ValidatePlainPod(dir_, port), 200);

  // A broken policy on SIGHUP is refused; the old one keeps serving.
  std::ofstream(dir_ / "policy.yaml") << "apiVersion: draguard.io/v1alpha1\nkind: Policy\nmodee: x\n";
  kill(child.pid, SIGHUP);
  line = child.ReadUntil("\"msg\":\"reloaded on SIGHUP\"", &log);
  ASSERT_FALSE(line.empty()) << log;
  EXPECT_NE(nlohmann::json::parse(line)["policy"].get<std::string>().find("modee: unknown key"), std::string::npos)
      << line;
  EXPECT_EQ(ValidatePlainPod(dir_, port), 200);

  for (int sig : {SIGUSR1, SIGUSR2}) {
    kill(child.pid, sig);
    line = child.ReadUntil("\"action\":\"ignored\"", &log);
    ASSERT_FALSE(line.empty()) << log;
    EXPECT_NE(line.find(sig == SIGUSR1 ? "SIGUSR1" : "SIGUSR2"), std::string::npos) << line;
    EXPECT_EQ(ValidatePlainPod(dir_, port), 200);
  }

  kill(child.pid, SIGQUIT);
  ASSERT_FALSE(child.ReadUntil("server stopped", &log).empty()) << log;
  EXPECT_EQ(child.Wait(), 0) << log;
  EXPECT_NE(log.find("\"signal\":\"SIGQUIT\""), std::string::npos) << log;
}

// A FIFO (or any non-regular file) as --config is refused at once, at start and when it
// replaces the watched file; nothing blocks and SIGTERM still drains.
TEST_F(CliTest, AFifoAsConfigIsRefusedWithoutHanging) {
  ASSERT_EQ(::mkfifo((dir_ / "fifo.yaml").c_str(), 0600), 0);
  RunResult r = RunCli({DRAGUARD_BINARY, "serve", "--listen", "127.0.0.1:0", "--config", "fifo.yaml"}, dir_);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("fifo.yaml: not a regular file"), std::string::npos) << r.err;

  std::ofstream(dir_ / "policy.yaml") << Slurp(fs::path(DRAGUARD_SOURCE_DIR) / "deploy/policy/default-policy.yaml");
  auto child = Child::Spawn({DRAGUARD_BINARY, "serve", "--listen", "127.0.0.1:0", "--shutdown-delay", "0",
                             "--config", "policy.yaml", "--reload-interval", "0.02"},
                            dir_);
  std::string log;
  const int port = ListeningPort(child, &log);
  ASSERT_GT(port, 0) << log;
  fs::rename(dir_ / "fifo.yaml", dir_ / "policy.yaml");  // the watcher sees a FIFO now
  std::string line = child.ReadUntil("\"msg\":\"policy refused", &log);
  ASSERT_FALSE(line.empty()) << log;
  EXPECT_NE(line.find("not a regular file"), std::string::npos) << line;
  EXPECT_EQ(ValidatePlainPod(dir_, port), 200);
  kill(child.pid, SIGHUP);  // a reload on request does not block either
  ASSERT_FALSE(child.ReadUntil("\"msg\":\"reloaded on SIGHUP\"", &log).empty()) << log;
  kill(child.pid, SIGTERM);
  ASSERT_FALSE(child.ReadUntil("server stopped", &log).empty()) << log;
  EXPECT_EQ(child.Wait(), 0) << log;
}

// Every subcommand answers --help and -h with exit 0 and its usage on stdout.
TEST_F(CliTest, EverySubcommandAcceptsHelp) {
  for (const char* cmd : {"serve", "review", "convert", "render", "audit", "cel", "backstop", "uninstall-webhooks",
                          "selftest", "topology", "version"}) {
    for (const char* flag : {"--help", "-h"}) {
      RunResult r = RunCli({DRAGUARD_BINARY, cmd, flag}, dir_);
      EXPECT_EQ(r.code, 0) << cmd << " " << flag << ": " << r.err;
      EXPECT_NE(r.out.find("draguard"), std::string::npos) << cmd << " " << flag;
      EXPECT_EQ(r.err.find("unknown flag"), std::string::npos) << cmd << " " << flag << ": " << r.err;
    }
  }
  RunResult serve = RunCli({DRAGUARD_BINARY, "serve", "--help"}, dir_);
  for (const char* flag : {"--max-queued", "--reload-interval", "--tls-required-names", "--audit-interval"}) {
    EXPECT_NE(serve.out.find(flag), std::string::npos) << flag << "\n" << serve.out;
  }
  RunResult help = RunCli({DRAGUARD_BINARY, "help"}, dir_);
  EXPECT_NE(help.out.find("--max-queued"), std::string::npos);
  EXPECT_NE(help.out.find("--reload-interval"), std::string::npos);
}

}  // namespace
}  // namespace draguard
