// DG015 pod-claim-references: table of pass / fail / skip cases, each action, exemption.
#include "rule_test_util.h"

namespace draguard::engine::testing {
namespace {

std::string Pod(const std::string& claims, const std::string& container_claims, const std::string& init_claims = "") {
  std::string init = init_claims.empty() ? "" : R"(,"initContainers":[{"name":"i","resources":{"claims":[)" + init_claims + "]}}]";
  return R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"resourceClaims":[)" + claims +
         R"(],"containers":[{"name":"c","resources":{"claims":[)" + container_claims + "]}}]" + init + "}}";
}

const std::string kGpu = R"({"name":"gpu","resourceClaimTemplateName":"t"})";

TEST(Dg015, Table) {
  std::vector<Case> cases = {
      {"fine", Pod(kGpu, R"({"name":"gpu"})"), RuleStatus::kPass, {}, ""},
      {"request_subset", Pod(kGpu, R"({"name":"gpu","request":"nic"})"), RuleStatus::kPass, {}, ""},
      {"undeclared", Pod(kGpu, R"({"name":"gpus"})"), RuleStatus::kFail, {"/spec/containers/0/resources/claims/0/name"}, "does not declare"},
      {"undeclared_in_init", Pod(kGpu, R"({"name":"gpu"})", R"({"name":"other"})"), RuleStatus::kFail, {"/spec/initContainers/0/resources/claims/0/name"}, "initContainer \"i\""},
      {"both_sources", Pod(R"({"name":"gpu","resourceClaimName":"a","resourceClaimTemplateName":"t"})", R"({"name":"gpu"})"),
       RuleStatus::kFail, {"/spec/resourceClaims/0"}, "exactly one of"},
      {"no_source", Pod(R"({"name":"gpu"})", R"({"name":"gpu"})"), RuleStatus::kFail, {"/spec/resourceClaims/0"}, ""},
      {"removed_source_wrapper", Pod(R"({"name":"gpu","source":{"resourceClaimTemplateName":"t"}})", R"({"name":"gpu"})"),
       RuleStatus::kFail, {"/spec/resourceClaims/0/source"}, "removed source: wrapper"},
      {"duplicate_whole", Pod(kGpu, R"({"name":"gpu"},{"name":"gpu"})"), RuleStatus::kFail, {"/spec/containers/0/resources/claims/1"}, "more than once"},
      {"whole_and_part", Pod(kGpu, R"({"name":"gpu","request":"a"},{"name":"gpu"})"), RuleStatus::kFail, {"/spec/containers/0/resources/claims/1"}, ""},
      {"duplicate_part", Pod(kGpu, R"({"name":"gpu","request":"a"},{"name":"gpu","request":"a"})"), RuleStatus::kFail, {}, ""},
      {"two_parts_fine", Pod(kGpu, R"({"name":"gpu","request":"a"},{"name":"gpu","request":"b"})"), RuleStatus::kPass, {}, ""},
      {"subrequest_in_pod", Pod(kGpu, R"({"name":"gpu","request":"gpu/big"})"), RuleStatus::kFail, {"/spec/containers/0/resources/claims/0/request"}, "no \"req/sub\""},
      {"duplicate_entry", Pod(kGpu + "," + kGpu, R"({"name":"gpu"})"), RuleStatus::kFail, {"/spec/resourceClaims/1/name"}, ""},
      {"statefulset",
       R"({"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"s"},"spec":{"template":{"spec":{"containers":[{"name":"c","resources":{"claims":[{"name":"x"}]}}]}}}})",
       RuleStatus::kFail, {"/spec/template/spec/containers/0/resources/claims/0/name"}, "StatefulSet \"s\""},
      {"claim_object_skipped", Template(R"({"devices":{}})"), RuleStatus::kSkip, {}, ""},
  };
  for (const auto& c : cases) CheckCase("DG015", c);
}

TEST(Dg015, PodUpdateIsNotJudged) {
  auto req = Request(Pod(kGpu, R"({"name":"nope"})"), "team-a", admission::Operation::kUpdate);
  EXPECT_EQ(RunRule("DG015", req, DefaultPolicy()).status, RuleStatus::kSkip);
}

// With the server's claim cache: a reference to a template or claim that does not exist is a
// warning (the cache follows the API by a moment, and a Pod may come before its template).
TEST(Dg015, ReferencesToObjectsTheClaimCacheDoesNotHave) {
  FakeCatalog catalog;
  catalog.templates["team-a/t"] = Template(R"({"devices":{"requests":[]}})");
  catalog.claims["team-a/shared"] = Claim(R"({"devices":{"requests":[]}})");
  const policy::Policy pol = DefaultPolicy();
  auto run = [&](const std::string& claims, const dra::ClaimCatalog* c) {
    return RunRuleWith("DG015", Request(Pod(claims, R"({"name":"gpu"})")), pol, c);
  };
  EXPECT_EQ(run(kGpu, &catalog).status, RuleStatus::kPass);
  EXPECT_EQ(run(R"({"name":"gpu","resourceClaimName":"shared"})", &catalog).status, RuleStatus::kPass);
  RuleResult missing = run(R"({"name":"gpu","resourceClaimTemplateName":"gone"})", &catalog);
  ASSERT_EQ(missing.status, RuleStatus::kFail);
  ASSERT_EQ(missing.findings.size(), 1u);
  EXPECT_EQ(missing.findings[0].pointer, "/spec/resourceClaims/0/resourceClaimTemplateName");
  EXPECT_NE(missing.findings[0].message.find("ResourceClaimTemplate \"gone\", which does not exist in namespace team-a"),
            std::string::npos)
      << missing.findings[0].message;
  EXPECT_EQ(missing.findings[0].cap, policy::Action::kWarn);
  RuleResult claim = run(R"({"name":"gpu","resourceClaimName":"other"})", &catalog);
  ASSERT_EQ(claim.status, RuleStatus::kFail);
  EXPECT_EQ(claim.findings[0].pointer, "/spec/resourceClaims/0/resourceClaimName");
  // Templates draguard generates are made by /mutate itself: never looked up.
  EXPECT_EQ(run(R"({"name":"gpu","resourceClaimTemplateName":"draguard-0123456789abcdef0123"})", &catalog).status,
            RuleStatus::kPass);
  // A cache that has not listed yet, or none (API access off): today's judgement.
  catalog.synced = false;
  EXPECT_EQ(run(R"({"name":"gpu","resourceClaimTemplateName":"gone"})", &catalog).status, RuleStatus::kPass);
  EXPECT_EQ(run(R"({"name":"gpu","resourceClaimTemplateName":"gone"})", nullptr).status, RuleStatus::kPass);
  // The whole engine warns and admits.
  catalog.synced = true;
  RuleInput in{Request(Pod(R"({"name":"gpu","resourceClaimTemplateName":"gone"})", R"({"name":"gpu"})")), pol, nullptr, {}};
  in.claims = &catalog;
  Decision d = Decide(Evaluate(in, DefaultRegistry()), pol);
  EXPECT_TRUE(d.response.allowed);
  EXPECT_TRUE(Contains(d.warned_rules, "DG015"));
}

TEST(Dg015, ActionsAndExemption) { ExpectActionsAndExemption("DG015", Request(Pod(kGpu, R"({"name":"nope"})"))); }

}  // namespace
}  // namespace draguard::engine::testing
