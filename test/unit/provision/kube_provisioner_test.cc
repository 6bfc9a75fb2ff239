// KubeTemplateProvisioner against the scripted fake API server of the kube tests
// (test/unit/kube/fake_apiserver.h, included by path): created, already there with the same or a
// different spec, API errors, timeout, cache hits, TTL expiry with a fake clock, single flight.
#include "draguard/provision/kube_provisioner.h"

#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <thread>
#include <vector>

#include "../kube/fake_apiserver.h"
#include "draguard/metrics/metrics.h"

namespace draguard::provision {
namespace {

using kubetest::FakeApiServer;
using kubetest::json;
using kubetest::MakeCert;
using kubetest::TempDir;
using kubetest::WriteFile;
using std::chrono::milliseconds;

json Spec(const std::string& device_class = "gpu.nvidia.com", int count = 2) {
  return {{"spec",
           {{"devices",
             {{"requests",
               json::array({{{"name", "gpu"},
                             {"exactly",
                              {{"deviceClassName", device_class},
                               {"count", count},
                               {"selectors", json::array({{{"cel", {{"expression", "device.driver == \"gpu.nvidia.com\""}}}}})}}}}})}}}}}};
}

mutation::GeneratedTemplate Template(const std::string& ns, const std::string& name, json spec = Spec()) {
  mutation::GeneratedTemplate t;
  t.name = name;
  t.object = {{"apiVersion", "resource.k8s.io/v1"},
              {"kind", "ResourceClaimTemplate"},
              {"metadata",
               {{"name", name}, {"namespace", ns}, {"labels", {{"app.kubernetes.io/managed-by", "draguard"}}}}},
              {"spec", std::move(spec)}};
  return t;
}

int Count(const std::vector<kubetest::Seen>& seen, const std::string& method) {
  int n = 0;
  for (const auto& s : seen) n += s.method == method;
  return n;
}

class ProvisionerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::signal(SIGPIPE, SIG_IGN);
    ca_ = MakeCert("test-ca", nullptr);
    auto leaf = MakeCert("kube-apiserver", &ca_);
    ca_file_ = (dir_.path() / "ca.crt").string();
    token_file_ = (dir_.path() / "token").string();
    WriteFile(ca_file_, ca_.cert);
    WriteFile(dir_.path() / "tls.crt", leaf.cert);
    WriteFile(dir_.path() / "tls.key", leaf.key);
    WriteFile(token_file_, "token-one\n");
    server_ = std::make_unique<FakeApiServer>((dir_.path() / "tls.crt").string(),
                                              (dir_.path() / "tls.key").string());
    client_ = std::make_unique<kube::Client>("127.0.0.1", server_->port(), ca_file_, token_file_);
  }
  void TearDown() override {
    client_.reset();
    server_.reset();
  }

  // Puts an object in the fake server directly (as if someone else made it).
  void Preload(const std::string& ns, const json& object) {
    auto r = client_->CreateResourceClaimTemplate(ns, object.dump());
    ASSERT_EQ(r.outcome, kube::CreateResult::Outcome::kCreated);
  }

  TempDir dir_;
  kubetest::Pem ca_;
  std::string ca_file_, token_file_;
  std::unique_ptr<FakeApiServer> server_;
  std::unique_ptr<kube::Client> client_;
};

TEST_F(ProvisionerTest, CreatesThenAnswersFromCache) {
  KubeTemplateProvisioner p(*client_);
  auto t = Template("team-a", "draguard-0123456789abcdef0123");
  Status s = p.Ensure("team-a", t, milliseconds(5000));
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto seen = server_->seen();
  ASSERT_EQ(Count(seen, "POST"), 1);
  EXPECT_EQ(seen[0].path, "/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaimtemplates");
  EXPECT_EQ(json::parse(seen[0].body), t.object);

  // Second call: the cache answers, no request at all.
  ASSERT_TRUE(p.Ensure("team-a", t, milliseconds(5000)).ok());
  EXPECT_EQ(server_->seen().size(), 1u);
  auto c = p.Counters();
  EXPECT_EQ(c.created, 1u);
  EXPECT_EQ(c.cache_hits, 1u);
  EXPECT_EQ(c.errors, 0u);
  EXPECT_EQ(p.cache_size(), 1u);

  // Same name in another namespace is another key.
  ASSERT_TRUE(p.Ensure("team-b", Template("team-b", t.name), milliseconds(5000)).ok());
  EXPECT_EQ(Count(server_->seen(), "POST"), 2);
}

TEST_F(ProvisionerTest, AlreadyExistsWithSameSpecIncludingServerDefaults) {
  auto t = Template("team-a", "draguard-same");
  json theirs = t.object;
  // What the API server stores: defaulted fields added.
  theirs["spec"]["spec"]["devices"]["requests"][0]["exactly"]["allocationMode"] = "ExactCount";
  theirs["spec"]["metadata"] = json::object();
  theirs["metadata"]["uid"] = "1234";
  theirs["metadata"]["resourceVersion"] = "77";
  Preload("team-a", theirs);

  KubeTemplateProvisioner p(*client_);
  Status s = p.Ensure("team-a", t, milliseconds(5000));
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto seen = server_->seen();
  EXPECT_EQ(Count(seen, "POST"), 2);  // preload + ours (409)
  EXPECT_EQ(Count(seen, "GET"), 1);
  EXPECT_EQ(p.Counters().already_exists, 1u);
  // Cached now.
  ASSERT_TRUE(p.Ensure("team-a", t, milliseconds(5000)).ok());
  EXPECT_EQ(server_->seen().size(), seen.size());
}

TEST_F(ProvisionerTest, AlreadyExistsWithDifferentSpecIsFailedPrecondition) {
  auto t = Template("team-a", "draguard-diff");
  Preload("team-a", Template("team-a", "draguard-diff", Spec("gpu.nvidia.com", 4)).object);
  KubeTemplateProvisioner p(*client_);
  Status s = p.Ensure("team-a", t, milliseconds(5000));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "ResourceClaimTemplate team-a/draguard-diff exists with different content (not generated by draguard?)");
  EXPECT_EQ(p.cache_size(), 0u);
  auto c = p.Counters();
  EXPECT_EQ(c.errors, 1u);
  EXPECT_EQ(c.errors_by_reason["Conflict"], 1u);
}

TEST_F(ProvisionerTest, AlreadyExistsWithoutManagedByLabelIsFailedPrecondition) {
  auto t = Template("team-a", "draguard-label");
  json theirs = t.object;
  theirs["metadata"]["labels"] = {{"app.kubernetes.io/managed-by", "someone-else"}};
  Preload("team-a", theirs);
  KubeTemplateProvisioner p(*client_);
  EXPECT_EQ(p.Ensure("team-a", t, milliseconds(5000)).code(), StatusCode::kFailedPrecondition);
}

TEST_F(ProvisionerTest, ForbiddenAndServerErrors) {
  KubeTemplateProvisioner p(*client_);
  Status forbidden = p.Ensure("forbidden", Template("forbidden", "draguard-f"), milliseconds(5000));
  EXPECT_EQ(forbidden.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(forbidden.message().find("creating ResourceClaimTemplate forbidden/draguard-f"), std::string::npos)
      << forbidden.message();
  EXPECT_NE(forbidden.message().find("403"), std::string::npos) << forbidden.message();

  Status broken = p.Ensure("broken", Template("broken", "draguard-b"), milliseconds(5000));
  EXPECT_EQ(broken.code(), StatusCode::kUnavailable);
  EXPECT_NE(broken.message().find("500"), std::string::npos) << broken.message();

  auto c = p.Counters();
  EXPECT_EQ(c.errors, 2u);
  EXPECT_EQ(c.errors_by_reason["Forbidden"], 1u);
  EXPECT_EQ(c.errors_by_reason["InternalError"], 1u);
  EXPECT_EQ(p.cache_size(), 0u);
  // Errors are not cached: the next call asks again.
  (void)p.Ensure("broken", Template("broken", "draguard-b"), milliseconds(5000));
  EXPECT_EQ(Count(server_->seen(), "POST"), 3);
}

TEST_F(ProvisionerTest, TimeoutHonoursDeadline) {
  KubeTemplateProvisioner p(*client_);
  const auto t0 = std::chrono::steady_clock::now();
  Status s = p.Ensure("slow", Template("slow", "draguard-s"), milliseconds(300));
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "creating ResourceClaimTemplate slow/draguard-s: timeout after 300ms");
  EXPECT_LT(took, std::chrono::seconds(5));
  EXPECT_EQ(p.Counters().errors_by_reason["Timeout"], 1u);
  server_->ReleaseSlow();
}

TEST_F(ProvisionerTest, TtlExpiryWithInjectedClock) {
  std::atomic<int64_t> now_ms{0};
  ProvisionerOptions o;
  o.cache_ttl = std::chrono::minutes(10);
  o.clock = [&] { return std::chrono::steady_clock::time_point(milliseconds(now_ms.load())); };
  KubeTemplateProvisioner p(*client_, o);
  auto t = Template("team-a", "draguard-ttl");
  ASSERT_TRUE(p.Ensure("team-a", t, milliseconds(5000)).ok());
  now_ms = 9 * 60 * 1000;
  ASSERT_TRUE(p.Ensure("team-a", t, milliseconds(5000)).ok());
  EXPECT_EQ(server_->seen().size(), 1u);
  now_ms = 10 * 60 * 1000 + 1;
  ASSERT_TRUE(p.Ensure("team-a", t, milliseconds(5000)).ok());
  auto seen = server_->seen();
  EXPECT_EQ(Count(seen, "POST"), 2);  // asked again, 409
  EXPECT_EQ(Count(seen, "GET"), 1);   // and compared
  auto c = p.Counters();
  EXPECT_EQ(c.created, 1u);
  EXPECT_EQ(c.already_exists, 1u);
  EXPECT_EQ(c.cache_hits, 1u);
}

TEST_F(ProvisionerTest, ForgetAndBoundedCache) {
  ProvisionerOptions o;
  o.cache_capacity = 2;
  KubeTemplateProvisioner p(*client_, o);
  for (const char* n : {"draguard-1", "draguard-2", "draguard-3"}) {
    ASSERT_TRUE(p.Ensure("ns", Template("ns", n), milliseconds(5000)).ok());
  }
  EXPECT_EQ(p.cache_size(), 2u);
  // draguard-1 was evicted (oldest): asks again.
  ASSERT_TRUE(p.Ensure("ns", Template("ns", "draguard-1"), milliseconds(5000)).ok());
  EXPECT_EQ(Count(server_->seen(), "POST"), 4);
  // draguard-1 is cached again; Forget drops it.
  p.Forget("ns", "draguard-1");
  ASSERT_TRUE(p.Ensure("ns", Template("ns", "draguard-1"), milliseconds(5000)).ok());
  EXPECT_EQ(Count(server_->seen(), "POST"), 5);
}

TEST_F(ProvisionerTest, ConcurrentEnsureOfOneKeySendsOnePost) {
  KubeTemplateProvisioner p(*client_);
  auto t = Template("slow", "draguard-sf");
  constexpr int kThreads = 6;
  std::vector<Status> results(kThreads);
  std::vector<std::thread> threads;
  threads.emplace_back([&] { results[0] = p.Ensure("slow", t, milliseconds(20000)); });
  // The leader's POST is being held by the fake server.
  ASSERT_TRUE(server_->WaitSeen([](const auto& s) { return Count(s, "POST") == 1; }));
  for (int i = 1; i < kThreads; ++i) {
    threads.emplace_back([&, i] { results[i] = p.Ensure("slow", t, milliseconds(20000)); });
  }
  // Every follower has joined the flight before the server answers.
  while (p.Counters().shared < kThreads - 1) std::this_thread::yield();
  server_->ReleaseSlow();
  for (auto& th : threads) th.join();
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << r.ToString();
  EXPECT_EQ(Count(server_->seen(), "POST"), 1);
  auto c = p.Counters();
  EXPECT_EQ(c.created, 1u);
  EXPECT_EQ(c.shared, static_cast<uint64_t>(kThreads - 1));
}

TEST_F(ProvisionerTest, MetricsExposition) {
  metrics::Registry registry;
  KubeTemplateProvisioner p(*client_);
  p.RegisterMetrics(registry);
  auto t = Template("team-a", "draguard-m");
  ASSERT_TRUE(p.Ensure("team-a", t, milliseconds(5000)).ok());
  ASSERT_TRUE(p.Ensure("team-a", t, milliseconds(5000)).ok());
  (void)p.Ensure("forbidden", Template("forbidden", "draguard-m"), milliseconds(5000));
  std::string text = registry.Render();
  EXPECT_NE(text.find("draguard_template_provision_total{outcome=\"created\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("draguard_template_provision_total{outcome=\"cached\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("draguard_template_provision_total{outcome=\"error\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("draguard_template_provision_errors_total{reason=\"Forbidden\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("draguard_template_provision_duration_seconds_count{outcome=\"created\"} 1"),
            std::string::npos)
      << text;
}

TEST(SpecMatchesTest, DefaultsAndDifferences) {
  json ours = Spec()["spec"];
  json theirs = ours;
  EXPECT_TRUE(SpecMatches(ours, theirs));
  theirs["devices"]["requests"][0]["exactly"]["allocationMode"] = "ExactCount";
  EXPECT_TRUE(SpecMatches(ours, theirs));
  theirs["devices"]["requests"][0]["exactly"]["adminAccess"] = true;
  EXPECT_FALSE(SpecMatches(ours, theirs));

  json all = ours;
  all["devices"]["requests"][0]["exactly"]["allocationMode"] = "All";
  EXPECT_FALSE(SpecMatches(ours, all));

  // count omitted by us, defaulted to 1 by the server.
  json no_count = ours;
  no_count["devices"]["requests"][0]["exactly"].erase("count");
  json defaulted = no_count;
  defaulted["devices"]["requests"][0]["exactly"]["count"] = 1;
  EXPECT_TRUE(SpecMatches(no_count, defaulted));
  defaulted["devices"]["requests"][0]["exactly"]["count"] = 2;
  EXPECT_FALSE(SpecMatches(no_count, defaulted));

  // Missing field on their side, different array length, number types.
  json missing = ours;
  missing["devices"]["requests"][0]["exactly"].erase("deviceClassName");
  EXPECT_FALSE(SpecMatches(ours, missing));
  json longer = ours;
  longer["devices"]["requests"].push_back(longer["devices"]["requests"][0]);
  EXPECT_FALSE(SpecMatches(ours, longer));
  EXPECT_TRUE(SpecMatches(json(2), json(2.0)));
  EXPECT_FALSE(SpecMatches(json("2"), json(2)));
}

}  // namespace
}  // namespace draguard::provision
