// Claims kube-scheduler makes for a Pod's extended resources (KEP-5004): admitted when a trusted
// scheduler creates them, judged like any claim when anyone else does.
#include "draguard/engine/scheduler_claims.h"

#include <gtest/gtest.h>

#include "draguard/engine/engine.h"
#include "rule_test_util.h"

namespace draguard::engine {
namespace {

using admission::Json;
using testing::Claim;
using testing::DefaultPolicy;
using testing::Request;

// The claim kube-scheduler v1.37 creates in PreBind (extendeddynamicresources.go): no selectors,
// constraints or config, so DG003 would deny it.
const std::string kSchedulerClaim = Claim(
    R"({"devices":{"requests":[{"name":"container-0-request-0","exactly":{"deviceClassName":"gpu.nvidia.com","allocationMode":"ExactCount","count":1}}]}})",
    "v1",
    R"({"generateName":"legacy-extended-resources-","namespace":"team-a",
        "annotations":{"resource.kubernetes.io/extended-resource-claim":"true"},
        "ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"legacy","uid":"u1","controller":true}]})");

admission::AdmissionRequest As(const std::string& object, const std::string& user) {
  auto r = Request(object);
  r.user_info.username = user;
  return r;
}

TEST(SchedulerClaims, ClassifiesByAnnotationAndCreator) {
  const policy::Policy pol = DefaultPolicy();
  EXPECT_EQ(ClassifySchedulerClaim(As(kSchedulerClaim, "system:kube-scheduler"), pol), SchedulerClaim::kScheduler);
  EXPECT_EQ(ClassifySchedulerClaim(As(kSchedulerClaim, "alice"), pol), SchedulerClaim::kOther);
  EXPECT_EQ(ClassifySchedulerClaim(As(kSchedulerClaim, ""), pol), SchedulerClaim::kOther);
  // A name that only resembles the scheduler's is not it.
  EXPECT_EQ(ClassifySchedulerClaim(As(kSchedulerClaim, "system:kube-scheduler2"), pol), SchedulerClaim::kOther);
  // Without the annotation, or with another value, it is any claim.
  auto plain = Request(Claim(R"({"devices":{"requests":[]}})"));
  plain.user_info.username = "system:kube-scheduler";
  EXPECT_EQ(ClassifySchedulerClaim(plain, pol), SchedulerClaim::kNone);
  auto r = As(kSchedulerClaim, "system:kube-scheduler");
  r.object["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"] = "True";
  EXPECT_EQ(ClassifySchedulerClaim(r, pol), SchedulerClaim::kNone);
  r.object["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"] = true;
  EXPECT_EQ(ClassifySchedulerClaim(r, pol), SchedulerClaim::kNone);
  // Only a CREATE of a ResourceClaim: a template with the annotation is a template.
  auto update = As(kSchedulerClaim, "system:kube-scheduler");
  update.operation = admission::Operation::kUpdate;
  EXPECT_EQ(ClassifySchedulerClaim(update, pol), SchedulerClaim::kNone);
  auto tmpl = As(kSchedulerClaim, "system:kube-scheduler");
  tmpl.kind.kind = "ResourceClaimTemplate";
  EXPECT_EQ(ClassifySchedulerClaim(tmpl, pol), SchedulerClaim::kNone);
  // The policy decides who is trusted.
  policy::Policy custom = pol;
  custom.trusted_schedulers = {"system:serviceaccount:kube-system:my-scheduler"};
  EXPECT_EQ(ClassifySchedulerClaim(As(kSchedulerClaim, "system:kube-scheduler"), custom), SchedulerClaim::kOther);
  EXPECT_EQ(ClassifySchedulerClaim(As(kSchedulerClaim, "system:serviceaccount:kube-system:my-scheduler"), custom),
            SchedulerClaim::kScheduler);
  custom.trusted_schedulers.clear();
  EXPECT_EQ(ClassifySchedulerClaim(As(kSchedulerClaim, "system:kube-scheduler"), custom), SchedulerClaim::kOther);
}

TEST(SchedulerClaims, ControllerPod) {
  EXPECT_EQ(ControllerPodOf(Json::parse(kSchedulerClaim)), "legacy");
  EXPECT_EQ(ControllerPodOf(Json::parse(R"({"metadata":{"ownerReferences":[{"kind":"Pod","name":"p"}]}})")), "");
  EXPECT_EQ(ControllerPodOf(Json::parse(R"({"metadata":{"ownerReferences":[{"kind":"Job","name":"j","controller":true}]}})")), "");
  EXPECT_EQ(ControllerPodOf(Json::parse(R"({"metadata":{"ownerReferences":"x"}})")), "");
  EXPECT_EQ(ControllerPodOf(Json::parse("[]")), "");
}

TEST(SchedulerClaims, TheSchedulersClaimIsAdmittedUnjudged) {
  const policy::Policy pol = DefaultPolicy();
  const Registry registry = DefaultRegistry();
  EngineResult result = Evaluate(RuleInput{As(kSchedulerClaim, "system:kube-scheduler"), pol, nullptr, {}}, registry);
  EXPECT_EQ(result.scheduler_claim, SchedulerClaim::kScheduler);
  EXPECT_TRUE(result.outcomes.empty());
  EXPECT_NE(result.exemption.find("system:kube-scheduler"), std::string::npos) << result.exemption;
  EXPECT_NE(result.exemption.find("Pod \"legacy\""), std::string::npos) << result.exemption;
  Decision d = Decide(result, pol);
  EXPECT_EQ(d.verdict, Verdict::kExempt);
  EXPECT_TRUE(d.response.allowed);
}

TEST(SchedulerClaims, TheAnnotationFromAnyoneElseChangesNothing) {
  const policy::Policy pol = DefaultPolicy();
  const Registry registry = DefaultRegistry();
  EngineResult result = Evaluate(RuleInput{As(kSchedulerClaim, "alice"), pol, nullptr, {}}, registry);
  EXPECT_EQ(result.scheduler_claim, SchedulerClaim::kOther);
  EXPECT_TRUE(result.exemption.empty());
  Decision d = Decide(result, pol);
  EXPECT_EQ(d.verdict, Verdict::kDeny);
  EXPECT_NE(std::find(d.denied_rules.begin(), d.denied_rules.end(), "DG003"), d.denied_rules.end());
  ASSERT_FALSE(d.response.warnings.empty());
  EXPECT_NE(d.response.warnings[0].find("ignored"), std::string::npos) << d.response.warnings[0];
  // In audit mode the same claim is admitted with the findings recorded, as any claim.
  policy::Policy audit = pol;
  audit.mode = policy::Mode::kAudit;
  EXPECT_EQ(Decide(Evaluate(RuleInput{As(kSchedulerClaim, "alice"), audit, nullptr, {}}, registry), audit).verdict,
            Verdict::kAudit);
}

}  // namespace
}  // namespace draguard::engine
