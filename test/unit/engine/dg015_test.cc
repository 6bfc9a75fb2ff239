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

TEST(Dg015, ActionsAndExemption) { ExpectActionsAndExemption("DG015", Request(Pod(kGpu, R"({"name":"nope"})"))); }

}  // namespace
}  // namespace draguard::engine::testing
