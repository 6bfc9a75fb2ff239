// `draguard uninstall-webhooks` against the fake API server: both configurations (and the
// self-mode Secret) deleted by name, a missing one counts as deleted, an API error is reported
// after trying the rest; usage errors.
#include <sstream>

#include "../kube/fake_apiserver.h"
#include "commands.h"

namespace draguard::cli {
namespace {

const std::string kVwc = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/dg";
const std::string kMwc = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/dg";
const std::string kSecret = "/api/v1/namespaces/dg-system/secrets/dg-tls";

class UninstallWebhooksTest : public kubetest::FakeApiServerTest {
 protected:
  void SetUp() override {
    FakeApiServerTest::SetUp();
    server_->PutObject(kVwc, {{"kind", "ValidatingWebhookConfiguration"}, {"metadata", {{"name", "dg"}}}});
    server_->PutObject(kMwc, {{"kind", "MutatingWebhookConfiguration"}, {"metadata", {{"name", "dg"}}}});
    server_->PutObject(kSecret, {{"kind", "Secret"}, {"metadata", {{"name", "dg-tls"}, {"namespace", "dg-system"}}}});
    server_->PutObject("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/other",
                       {{"kind", "ValidatingWebhookConfiguration"}, {"metadata", {{"name", "other"}}}});
  }
};

TEST_F(UninstallWebhooksTest, DeletesBothConfigurationsByName) {
  std::ostringstream out;
  Status st = DeleteWebhookConfigurations(*client_, {"dg"}, {"dg"}, "", "", out);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(server_->GetObject(kVwc).is_null());
  EXPECT_TRUE(server_->GetObject(kMwc).is_null());
  EXPECT_FALSE(server_->GetObject(kSecret).is_null());  // not asked for
  EXPECT_FALSE(server_->GetObject("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/other").is_null());
  EXPECT_NE(out.str().find("deleted ValidatingWebhookConfiguration dg"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("deleted MutatingWebhookConfiguration dg"), std::string::npos) << out.str();
  // Running again (a retried hook) finds nothing and still succeeds.
  std::ostringstream again;
  ASSERT_TRUE(DeleteWebhookConfigurations(*client_, {"dg"}, {"dg"}, "", "", again).ok());
  EXPECT_NE(again.str().find("already gone"), std::string::npos) << again.str();
}

TEST_F(UninstallWebhooksTest, AlsoDeletesTheSelfModeSecret) {
  std::ostringstream out;
  ASSERT_TRUE(DeleteWebhookConfigurations(*client_, {"dg"}, {}, "dg-system", "dg-tls", out).ok());
  EXPECT_TRUE(server_->GetObject(kSecret).is_null());
  EXPECT_FALSE(server_->GetObject(kMwc).is_null());
}

TEST_F(UninstallWebhooksTest, AnApiErrorIsReportedAfterTryingTheRest) {
  server_->InjectFault("DELETE", "^/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/dg$",
                       kubetest::Reply(403, kubetest::StatusBody(403, "Forbidden", "cannot delete")));
  std::ostringstream out;
  Status st = DeleteWebhookConfigurations(*client_, {"dg"}, {"dg"}, "", "", out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("ValidatingWebhookConfiguration dg"), std::string::npos) << st.message();
  EXPECT_FALSE(server_->GetObject(kVwc).is_null());
  EXPECT_TRUE(server_->GetObject(kMwc).is_null());
}

TEST(UninstallWebhooksUsage, BadArgumentsAreUsageErrors) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{}, {"--validating="}, {"--bogus"}, {"x"}, {"--validating", "a", "--secret", "s"}}) {
    std::ostringstream out, err;
    EXPECT_EQ(UninstallWebhooks(args, out, err), kExitUsage) << err.str();
    EXPECT_NE(err.str().find("usage: draguard uninstall-webhooks"), std::string::npos);
  }
}

TEST(SelftestUsage, BadArgumentsAreUsageErrors) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {}, {"--url", "http://x", "--ca-file", "c"}, {"--url", "https://x/validate", "--ca-file", "c"},
           {"--url", "https://x:99999", "--ca-file", "c"}, {"--url", "https://x"},
           {"--url", "https://x", "--ca-file", "c", "--expect", "maybe"},
           {"--url", "https://x", "--ca-file", "c", "--timeout", "0"}}) {
    std::ostringstream out, err;
    EXPECT_EQ(Selftest(args, out, err), kExitUsage) << err.str();
  }
}

}  // namespace
}  // namespace draguard::cli
