// tls.mode=self against the fake API server: first start, restart reusing the Secret, two
// replicas racing, leaf and CA rotation, a deleted Secret, a stripped caBundle, conflicts.
#include "draguard/certs/self_tls.h"

#include <atomic>

#include "../kube/fake_apiserver.h"
#include "draguard/base64.h"

namespace draguard::certs {
namespace {

using kubetest::json;
using Days = std::chrono::duration<int64_t, std::ratio<86400>>;

const std::string kSecretPath = "/api/v1/namespaces/dg-system/secrets/dg-tls";
const std::string kVwcPath = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/dg";
const std::string kMwcPath = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/dg";

json WebhookConfiguration(const std::string& kind, std::vector<std::string> names) {
  json hooks = json::array();
  for (const auto& n : names) {
    hooks.push_back({{"name", n}, {"clientConfig", {{"service", {{"name", "dg"}, {"namespace", "dg-system"}}}}}});
  }
  return {{"apiVersion", "admissionregistration.k8s.io/v1"}, {"kind", kind}, {"metadata", {{"name", "dg"}}},
          {"webhooks", hooks}};
}

class SelfTlsTest : public kubetest::FakeApiServerTest {
 protected:
  void SetUp() override {
    FakeApiServerTest::SetUp();
    server_->PutObject(kVwcPath, WebhookConfiguration("ValidatingWebhookConfiguration",
                                                      {"pods.validate.draguard.io", "workloads.validate.draguard.io"}));
    server_->PutObject(kMwcPath, WebhookConfiguration("MutatingWebhookConfiguration", {"pods.mutate.draguard.io"}));
  }

  // A manager (one replica) with its own view of time and of what it serves.
  struct Replica {
    std::unique_ptr<SelfTls> tls;
    std::vector<PemPair> served;
  };

  std::unique_ptr<Replica> NewReplica() {
    auto r = std::make_unique<Replica>();
    SelfTlsOptions o;
    o.namespace_name = "dg-system";
    o.secret_name = "dg-tls";
    o.service_name = "dg";
    o.validating_webhooks = {"dg"};
    o.mutating_webhooks = {"dg"};
    o.rotation.ca_validity = Days(300);
    o.rotation.leaf_validity = Days(30);
    o.clock = [this] { return now_.load(); };
    Replica* raw = r.get();
    r->tls = std::make_unique<SelfTls>(
        *client_, o,
        [raw](const PemPair& p, const std::string&) {
          raw->served.push_back(p);
          return Status::Ok();
        },
        nullptr);
    return r;
  }

  std::string SecretKey(const char* key) {
    json s = server_->GetObject(kSecretPath);
    return *Base64Decode(s["data"][key].get<std::string>());
  }

  // Every webhook of both configurations carries exactly `bundle`.
  void ExpectBundles(const std::string& bundle) {
    for (const auto& path : {kVwcPath, kMwcPath}) {
      json c = server_->GetObject(path);
      for (const auto& wh : c["webhooks"]) {
        ASSERT_TRUE(wh["clientConfig"].contains("caBundle")) << path;
        EXPECT_EQ(*Base64Decode(wh["clientConfig"]["caBundle"].get<std::string>()), bundle) << path;
      }
    }
  }

  std::atomic<TimePoint> now_{std::chrono::system_clock::from_time_t(1767225600)};
};

TEST_F(SelfTlsTest, FirstStartCreatesTheSecretAndInjectsTheBundle) {
  auto a = NewReplica();
  auto r = a->tls->SyncOnce();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->wrote_secret);
  EXPECT_EQ(r->configurations_updated, 2);
  json s = server_->GetObject(kSecretPath);
  EXPECT_EQ(s["type"], "kubernetes.io/tls");
  for (const char* k : {"tls.crt", "tls.key", "ca.crt", "ca.key"}) EXPECT_TRUE(s["data"].contains(k)) << k;
  auto leaf = Inspect(SecretKey("tls.crt"));
  ASSERT_TRUE(leaf.ok());
  EXPECT_EQ(leaf->dns, (std::vector<std::string>{"dg", "dg.dg-system", "dg.dg-system.svc",
                                                 "dg.dg-system.svc.cluster.local"}));
  ASSERT_EQ(a->served.size(), 1u);
  EXPECT_EQ(a->served[0].cert_pem, SecretKey("tls.crt"));
  ExpectBundles(SecretKey("ca.crt"));
  // A second sync changes nothing and writes nothing.
  int puts = server_->Count("PUT", "/");
  auto again = a->tls->SyncOnce();
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->wrote_secret);
  EXPECT_EQ(again->configurations_updated, 0);
  EXPECT_EQ(server_->Count("PUT", "/"), puts);
  EXPECT_EQ(a->served.size(), 1u);
}

TEST_F(SelfTlsTest, RestartReusesTheSecret) {
  ASSERT_TRUE(NewReplica()->tls->SyncOnce().ok());
  const std::string crt = SecretKey("tls.crt");
  auto b = NewReplica();
  auto r = b->tls->SyncOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->wrote_secret);
  EXPECT_TRUE(r->steps.empty());
  ASSERT_EQ(b->served.size(), 1u);
  EXPECT_EQ(b->served[0].cert_pem, crt);
}

TEST_F(SelfTlsTest, TwoReplicasRacingConvergeOnOneSecret) {
  auto a = NewReplica();
  auto b = NewReplica();
  // Deterministic race: b's first read misses the Secret that a creates, so b's create gets
  // 409 AlreadyExists and b must re-read and use a's Secret.
  ASSERT_TRUE(a->tls->SyncOnce().ok());
  server_->InjectFault("GET", "^/api/v1/namespaces/dg-system/secrets/dg-tls$",
                       kubetest::Reply(404, kubetest::StatusBody(404, "NotFound", "secrets \"dg-tls\" not found")));
  auto r = b->tls->SyncOnce();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->wrote_secret);
  EXPECT_EQ(server_->Count("POST", "/api/v1/namespaces/dg-system/secrets"), 2);
  ASSERT_EQ(b->served.size(), 1u);
  EXPECT_EQ(b->served[0].cert_pem, a->served[0].cert_pem);

  // And a real race: both replicas at once on an empty store.
  server_->RemoveObject(kSecretPath);
  auto c = NewReplica();
  auto d = NewReplica();
  Result<SyncResult> rc = Status::Internal("unset"), rd = Status::Internal("unset");
  std::thread tc([&] { rc = c->tls->SyncOnce(); });
  std::thread td([&] { rd = d->tls->SyncOnce(); });
  tc.join();
  td.join();
  ASSERT_TRUE(rc.ok()) << rc.status().message();
  ASSERT_TRUE(rd.ok()) << rd.status().message();
  ASSERT_EQ(c->served.size(), 1u);
  ASSERT_EQ(d->served.size(), 1u);
  EXPECT_EQ(c->served[0].cert_pem, d->served[0].cert_pem);
  EXPECT_EQ(c->served[0].cert_pem, SecretKey("tls.crt"));
  ExpectBundles(SecretKey("ca.crt"));
}

TEST_F(SelfTlsTest, UpdateConflictIsRetriedWithTheNewVersion) {
  auto a = NewReplica();
  ASSERT_TRUE(a->tls->SyncOnce().ok());
  now_ = now_.load() + Days(21);  // leaf due
  server_->InjectFault("PUT", "^/api/v1/namespaces/dg-system/secrets/dg-tls$",
                       kubetest::Reply(409, kubetest::StatusBody(409, "Conflict", "the object has been modified")));
  auto r = a->tls->SyncOnce();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->wrote_secret);
  EXPECT_EQ(server_->Count("PUT", kSecretPath), 2);
  ASSERT_EQ(a->served.size(), 2u);
  EXPECT_EQ(a->served[1].cert_pem, SecretKey("tls.crt"));
}

TEST_F(SelfTlsTest, LeafRotationKeepsTheBundle) {
  auto a = NewReplica();
  auto b = NewReplica();
  ASSERT_TRUE(a->tls->SyncOnce().ok());
  ASSERT_TRUE(b->tls->SyncOnce().ok());
  const std::string ca = SecretKey("ca.crt");
  const std::string old_leaf = SecretKey("tls.crt");
  now_ = now_.load() + Days(21);
  auto r = a->tls->SyncOnce();
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->steps.size(), 1u);
  EXPECT_EQ(r->steps[0].action, Action::kRenewLeaf);
  EXPECT_EQ(r->configurations_updated, 0);  // same CA: no caBundle change
  EXPECT_EQ(SecretKey("ca.crt"), ca);
  EXPECT_NE(SecretKey("tls.crt"), old_leaf);
  // The other replica picks the renewed certificate up on its next resync without writing.
  auto rb = b->tls->SyncOnce();
  ASSERT_TRUE(rb.ok());
  EXPECT_FALSE(rb->wrote_secret);
  ASSERT_EQ(b->served.size(), 2u);
  EXPECT_EQ(b->served[1].cert_pem, SecretKey("tls.crt"));
}

TEST_F(SelfTlsTest, CaRotationOverlapsBothCasInTheBundle) {
  auto a = NewReplica();
  ASSERT_TRUE(a->tls->SyncOnce().ok());
  const std::string old_ca = SecretKey("ca.crt");
  // Day 195: a fresh leaf (renewed), then day 201: the CA is due.
  now_ = now_.load() + Days(195);
  ASSERT_TRUE(a->tls->SyncOnce().ok());
  const std::string leaf_before = SecretKey("tls.crt");
  now_ = now_.load() + Days(6);
  auto r = a->tls->SyncOnce();
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->steps.size(), 1u);
  EXPECT_EQ(r->steps[0].action, Action::kRotateCa);
  auto bundle = SplitBundle(SecretKey("ca.crt"));
  ASSERT_TRUE(bundle.ok());
  ASSERT_EQ(bundle->size(), 2u);
  EXPECT_EQ((*bundle)[1], *SplitBundle(old_ca)->begin());
  EXPECT_EQ(SecretKey("tls.crt"), leaf_before);  // still served until the bundle propagated
  ExpectBundles(SecretKey("ca.crt"));
  // After the propagation delay the leaf comes from the new CA; both CAs stay trusted.
  now_ = now_.load() + std::chrono::minutes(11);
  auto r2 = a->tls->SyncOnce();
  ASSERT_TRUE(r2.ok());
  ASSERT_EQ(r2->steps.size(), 1u);
  EXPECT_EQ(r2->steps[0].action, Action::kRenewLeaf);
  EXPECT_TRUE(SignedBy(SecretKey("tls.crt"), (*bundle)[0]));
  EXPECT_EQ(SplitBundle(SecretKey("ca.crt"))->size(), 2u);
}

TEST_F(SelfTlsTest, DeletedSecretIsRecreatedAndStrippedBundleReinjected) {
  auto a = NewReplica();
  ASSERT_TRUE(a->tls->SyncOnce().ok());
  const std::string first_ca = SecretKey("ca.crt");
  json vwc = server_->GetObject(kVwcPath);
  vwc["webhooks"][1]["clientConfig"].erase("caBundle");
  server_->PutObject(kVwcPath, vwc);
  auto r = a->tls->SyncOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->wrote_secret);
  EXPECT_EQ(r->configurations_updated, 1);
  ExpectBundles(first_ca);

  // Deleted while serving: recreated with the CA and certificate in service, so that neither the
  // bundles nor what any replica serves changes.
  const std::string first_crt = SecretKey("tls.crt");
  server_->RemoveObject(kSecretPath);
  auto r2 = a->tls->SyncOnce();
  ASSERT_TRUE(r2.ok());
  EXPECT_TRUE(r2->wrote_secret);
  ASSERT_FALSE(r2->steps.empty());
  EXPECT_EQ(r2->steps[0].reason, "the Secret was deleted; recreated with the CA in service");
  EXPECT_EQ(SecretKey("ca.crt"), first_ca);
  EXPECT_EQ(SecretKey("tls.crt"), first_crt);
  EXPECT_EQ(r2->configurations_updated, 0);
  ExpectBundles(first_ca);
  EXPECT_EQ(a->served.size(), 1u);

  // A replica that has served nothing yet finds no Secret: it creates a new CA.
  server_->RemoveObject(kSecretPath);
  auto fresh = NewReplica();
  auto r3 = fresh->tls->SyncOnce();
  ASSERT_TRUE(r3.ok());
  EXPECT_TRUE(r3->wrote_secret);
  EXPECT_NE(SecretKey("ca.crt"), first_ca);
  EXPECT_EQ(r3->configurations_updated, 2);
  ExpectBundles(SecretKey("ca.crt"));
}

TEST_F(SelfTlsTest, WebhookConflictIsRetriedAndMissingConfigurationReported) {
  auto a = NewReplica();
  server_->InjectFault("PUT", "^/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/dg$",
                       kubetest::Reply(409, kubetest::StatusBody(409, "Conflict", "the object has been modified")));
  auto r = a->tls->SyncOnce();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->configurations_updated, 2);
  ExpectBundles(SecretKey("ca.crt"));
  server_->RemoveObject(kMwcPath);
  auto r2 = a->tls->SyncOnce();
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->missing_configurations, std::vector<std::string>{"dg"});
}

TEST_F(SelfTlsTest, ApiErrorsAreReturned) {
  auto a = NewReplica();
  server_->InjectFault("GET", "^/api/v1/namespaces/dg-system/secrets/dg-tls$",
                       kubetest::Reply(403, kubetest::StatusBody(403, "Forbidden", "secrets is forbidden")));
  auto r = a->tls->SyncOnce();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("Forbidden"), std::string::npos) << r.status().message();
  EXPECT_TRUE(a->served.empty());
}

}  // namespace
}  // namespace draguard::certs
