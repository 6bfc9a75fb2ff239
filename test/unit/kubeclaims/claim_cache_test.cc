#include "draguard/kubeclaims/claim_cache.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>

#include "../kube/fake_apiserver.h"

namespace draguard::kubeclaims {
namespace {

using dra::ClaimLookup;
using nlohmann::json;

// The spec of a claim with a GPU request and a CPU request on one NUMA node (as dra-driver-cpu
// users write it), or without the constraint.
json ClaimSpec(bool numa) {
  json spec = {{"devices",
                {{"requests",
                  {{{"name", "gpu"}, {"exactly", {{"deviceClassName", "gpu.nvidia.com"}, {"count", 1}}}},
                   {{"name", "cpu"}, {"exactly", {{"deviceClassName", "dra.cpu"}, {"count", 8}}}}}}}}};
  if (numa) {
    spec["devices"]["constraints"] = {{{"requests", {"gpu", "cpu"}}, {"matchAttribute", "resource.kubernetes.io/numaNode"}}};
  }
  return spec;
}

// A stored object as the watcher delivers it: metadata and the spec as JSON text.
kube::Object Stored(const std::string& ns, const std::string& name, const json& spec) {
  kube::Object o;
  o.namespace_name = ns;
  o.name = name;
  o.fields["spec"] = spec.dump();
  return o;
}

TEST(ClaimStore, AnswersOnlyOnceListedAndWithinItsBound) {
  ClaimStore store("ResourceClaims", "ResourceClaim", 2);
  auto cold = store.Find("ml", "c");
  EXPECT_EQ(cold.state, ClaimLookup::State::kUnknown);
  EXPECT_EQ(cold.why, "the ResourceClaims are not listed yet");

  store.OnSync({Stored("ml", "c", ClaimSpec(true)), Stored("ml", "broken", json("not a spec"))});
  EXPECT_TRUE(store.synced());
  EXPECT_EQ(store.size(), 1u);  // what is not a claim spec is not kept
  auto found = store.Find("ml", "c");
  ASSERT_EQ(found.state, ClaimLookup::State::kFound);
  ASSERT_EQ(found.summary->requests.size(), 2u);
  EXPECT_EQ(found.summary->requests[0].classes, std::vector<std::string>{"gpu.nvidia.com"});
  EXPECT_TRUE(found.summary->NumaAligned("gpu", "cpu"));
  EXPECT_EQ(store.Find("ml", "other").state, ClaimLookup::State::kAbsent);
  EXPECT_EQ(store.Find("other", "c").state, ClaimLookup::State::kAbsent);
  EXPECT_GT(store.bytes(), 0u);

  // An update replaces the summary; a delete removes it.
  store.OnUpsert(Stored("ml", "c", ClaimSpec(false)));
  EXPECT_FALSE(store.Find("ml", "c").summary->NumaAligned("gpu", "cpu"));
  store.OnUpsert(Stored("ml", "d", ClaimSpec(true)));
  EXPECT_EQ(store.size(), 2u);
  store.OnDelete(Stored("ml", "d", {}));
  EXPECT_EQ(store.Find("ml", "d").state, ClaimLookup::State::kAbsent);

  // Past the bound the store stops answering rather than grow, until a list fits again.
  store.OnUpsert(Stored("ml", "d", ClaimSpec(true)));
  store.OnUpsert(Stored("ml", "e", ClaimSpec(true)));
  auto over = store.Find("ml", "c");
  EXPECT_EQ(over.state, ClaimLookup::State::kUnknown);
  EXPECT_EQ(over.why, "the cache of ResourceClaims is over its bound of 2 objects");
  EXPECT_FALSE(store.synced());
  EXPECT_EQ(store.bytes(), 0u);
  store.OnSync({Stored("ml", "a", ClaimSpec(true)), Stored("ml", "b", ClaimSpec(true)), Stored("ml", "c", ClaimSpec(true))});
  EXPECT_EQ(store.Find("ml", "a").state, ClaimLookup::State::kUnknown);
  store.OnSync({Stored("ml", "a", ClaimSpec(true))});
  EXPECT_EQ(store.Find("ml", "a").state, ClaimLookup::State::kFound);

  store.Close();
  auto closed = store.Find("ml", "a");
  EXPECT_EQ(closed.state, ClaimLookup::State::kUnknown);
  EXPECT_EQ(closed.why, "the ResourceClaims watch has stopped");
  store.OnSync({Stored("ml", "a", ClaimSpec(true))});  // a late event changes nothing
  EXPECT_EQ(store.Find("ml", "a").state, ClaimLookup::State::kUnknown);
}

TEST(ClaimStore, ReadsTheClaimSpecOfATemplate) {
  ClaimStore store("ResourceClaimTemplates", "ResourceClaimTemplate", 10);
  store.OnSync({Stored("ml", "t", json{{"spec", ClaimSpec(true)}})});
  auto t = store.Find("ml", "t");
  ASSERT_EQ(t.state, ClaimLookup::State::kFound);
  EXPECT_TRUE(t.summary->NumaAligned("cpu", "gpu"));
}

class ClaimCacheTest : public kubetest::FakeApiServerTest {
 protected:
  // Polls `done` until it holds or 10 s pass.
  static bool Eventually(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }
  static constexpr const char* kApi = "/apis/resource.k8s.io/v1";
};

// Both kinds are listed and watched in every namespace of resource.k8s.io/v1; lookups follow
// creations and deletions.
TEST_F(ClaimCacheTest, ListsAndWatchesBothKindsInEveryNamespace) {
  server_->PutObject(std::string(kApi) + "/namespaces/ml/resourceclaimtemplates/train",
                     {{"apiVersion", "resource.k8s.io/v1"},
                      {"kind", "ResourceClaimTemplate"},
                      {"metadata", {{"name", "train"}, {"namespace", "ml"}, {"labels", {{"team", "a"}}}}},
                      {"spec", {{"spec", ClaimSpec(true)}}}});
  ClaimCacheOptions options;
  options.watch.backoff.initial = std::chrono::milliseconds(10);
  ClaimCache cache(*client_, options);
  EXPECT_EQ(cache.Template("ml", "train").state, ClaimLookup::State::kUnknown);
  cache.Start();
  ASSERT_TRUE(Eventually([&] { return cache.synced(); }));
  auto t = cache.Template("ml", "train");
  ASSERT_EQ(t.state, ClaimLookup::State::kFound);
  EXPECT_TRUE(t.summary->NumaAligned("gpu", "cpu"));
  EXPECT_EQ(cache.Claim("ml", "train").state, ClaimLookup::State::kAbsent);

  server_->PutObject(std::string(kApi) + "/namespaces/other/resourceclaims/c",
                     {{"apiVersion", "resource.k8s.io/v1"},
                      {"kind", "ResourceClaim"},
                      {"metadata", {{"name", "c"}, {"namespace", "other"}}},
                      {"spec", ClaimSpec(false)}});
  ASSERT_TRUE(Eventually([&] { return cache.Claim("other", "c").state == ClaimLookup::State::kFound; }));
  EXPECT_FALSE(cache.Claim("other", "c").summary->NumaAligned("gpu", "cpu"));
  server_->RemoveObject(std::string(kApi) + "/namespaces/ml/resourceclaimtemplates/train");
  ASSERT_TRUE(Eventually([&] { return cache.Template("ml", "train").state == ClaimLookup::State::kAbsent; }));

  bool listed_templates = false, listed_claims = false;
  for (const auto& s : server_->seen()) {
    listed_templates |= s.path == std::string(kApi) + "/resourceclaimtemplates";
    listed_claims |= s.path == std::string(kApi) + "/resourceclaims";
  }
  EXPECT_TRUE(listed_templates);
  EXPECT_TRUE(listed_claims);

  cache.Stop();
  EXPECT_EQ(cache.Claim("other", "c").state, ClaimLookup::State::kUnknown);
}

// Without RBAC for the kinds the cache never answers, and says why through its error callback.
TEST_F(ClaimCacheTest, AForbiddenListLeavesTheCacheCold) {
  server_->AcceptTokens({"another-token"});
  std::mutex mu;
  std::vector<std::string> errors;
  ClaimCacheOptions options;
  options.watch.backoff.initial = std::chrono::milliseconds(10);
  options.watch.backoff.max = std::chrono::milliseconds(20);
  options.on_error = [&](const Status& st) {
    std::lock_guard<std::mutex> l(mu);
    errors.push_back(st.ToString());
  };
  ClaimCache cache(*client_, options);
  cache.Start();
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> l(mu);
    return errors.size() >= 2;
  }));
  EXPECT_FALSE(cache.synced());
  auto cold = cache.Template("ml", "train");
  EXPECT_EQ(cold.state, ClaimLookup::State::kUnknown);
  EXPECT_EQ(cold.why, "the ResourceClaimTemplates are not listed yet");
  cache.Stop();
  std::lock_guard<std::mutex> l(mu);
  EXPECT_NE(errors[0].find("LIST resourceclaim"), std::string::npos) << errors[0];
}

}  // namespace
}  // namespace draguard::kubeclaims
