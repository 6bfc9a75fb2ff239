// DG012 claim-api-version: table of pass / fail / skip cases, each action, exemption.
#include "rule_test_util.h"

namespace draguard::engine::testing {
namespace {

const std::string kSpec = R"({"devices":{"requests":[{"name":"g","exactly":{"deviceClassName":"gpu.nvidia.com"}}]}})";
const std::string kFlat = R"({"devices":{"requests":[{"name":"g","deviceClassName":"gpu.nvidia.com"}]}})";

TEST(Dg012, Table) {
  std::vector<Case> cases = {
      {"v1", Template(kSpec), RuleStatus::kPass, {}, ""},
      {"v1beta2", Template(kSpec, "v1beta2"), RuleStatus::kFail, {"/apiVersion"}, "resource.k8s.io/v1beta2"},
      {"v1beta1", Claim(kFlat, "v1beta1"), RuleStatus::kFail, {"/apiVersion"}, "--runtime-config"},
      {"v1alpha3", Template(kFlat, "v1alpha3"), RuleStatus::kFail, {}, "no longer serves"},
      {"pod_skipped", R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{}})", RuleStatus::kSkip, {}, ""},
  };
  for (const auto& c : cases) CheckCase("DG012", c);
}

TEST(Dg012, UsesTheOriginalRequestKind) {
  auto req = Request(Template(kSpec));
  req.request_kind = admission::GroupVersionKind{"resource.k8s.io", "v1beta1", "ResourceClaimTemplate"};
  EXPECT_EQ(RunRule("DG012", req, DefaultPolicy()).status, RuleStatus::kFail);
}

TEST(Dg012, ClaimUpdatesAreNotJudged) {
  auto req = Request(Template(kSpec, "v1beta2"), "team-a", admission::Operation::kUpdate);
  req.old_object = req.object;
  EXPECT_EQ(RunRule("DG012", req, DefaultPolicy()).status, RuleStatus::kSkip);
  EXPECT_EQ(RunRule("DG003", Request(Template(R"({"devices":{"requests":[{"name":"g","exactly":{"deviceClassName":"gpu.nvidia.com"}}]}})"),
                                     "team-a", admission::Operation::kUpdate), DefaultPolicy()).status,
            RuleStatus::kSkip);
}

TEST(Dg012, DefaultIsWarn) {
  auto d = Review(Request(Template(kSpec, "v1beta2")), DefaultPolicy());
  EXPECT_TRUE(Contains(d.warned_rules, "DG012"));
}

TEST(Dg012, ActionsAndExemption) { ExpectActionsAndExemption("DG012", Request(Template(kSpec, "v1beta2"))); }

}  // namespace
}  // namespace draguard::engine::testing
