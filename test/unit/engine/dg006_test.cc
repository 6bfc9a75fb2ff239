// DG006 interconnect-declared: table of pass / fail / skip cases, each action, exemption.
#include "rule_test_util.h"

namespace draguard::engine::testing {
namespace {

const std::string kTwo = R"({"devices":{"requests":[{"name":"gpus","exactly":{"deviceClassName":"gpu.nvidia.com","count":2}}]}})";

TEST(Dg006, Table) {
  std::vector<Case> cases = {
      {"single_gpu", Template(R"({"devices":{"requests":[{"name":"g","exactly":{"deviceClassName":"gpu.nvidia.com"}}]}})"), RuleStatus::kSkip, {}, ""},
      {"two_gpus_undeclared", Template(kTwo), RuleStatus::kFail, {"/metadata/annotations"}, "up to 2 GPUs"},
      {"two_gpus_pcie_constraint", Template(R"({"devices":{"requests":[{"name":"gpus","exactly":{"deviceClassName":"gpu.nvidia.com","count":2}}],"constraints":[{"matchAttribute":"resource.kubernetes.io/pcieRoot"}]}})"),
       RuleStatus::kPass, {}, ""},
      {"annotation_nvlink", Template(kTwo, "v1", R"({"name":"t","annotations":{"draguard.io/interconnect":"nvlink"}})"), RuleStatus::kPass, {}, ""},
      {"annotation_on_template_metadata",
       R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaimTemplate","metadata":{"name":"t"},"spec":{"metadata":{"annotations":{"draguard.io/interconnect":"any"}},"spec":)" + kTwo + "}}",
       RuleStatus::kPass, {}, ""},
      {"annotation_invalid", Template(kTwo, "v1", R"({"name":"t","annotations":{"draguard.io/interconnect":"infiniband"}})"),
       RuleStatus::kFail, {"/metadata/annotations/draguard.io~1interconnect", "/metadata/annotations"}, "not nvlink, pcie or any"},
      {"two_mig_requests", Template(R"({"devices":{"requests":[{"name":"a","exactly":{"deviceClassName":"mig.nvidia.com"}},{"name":"b","exactly":{"deviceClassName":"mig.nvidia.com"}}]}})"),
       RuleStatus::kFail, {}, ""},
      {"nics_only", Template(R"({"devices":{"requests":[{"name":"n","exactly":{"deviceClassName":"dranet","count":4}}]}})"), RuleStatus::kSkip, {}, ""},
      {"pod_skipped", R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{}})", RuleStatus::kSkip, {}, ""},
  };
  for (const auto& c : cases) CheckCase("DG006", c);
}

TEST(Dg006, DefaultIsWarn) {
  auto d = Review(Request(Template(kTwo, "v1", R"({"name":"t"})")), DefaultPolicy());
  EXPECT_TRUE(Contains(d.warned_rules, "DG006"));
  EXPECT_FALSE(Contains(d.denied_rules, "DG006"));
}

TEST(Dg006, ActionsAndExemption) { ExpectActionsAndExemption("DG006", Request(Template(kTwo))); }

}  // namespace
}  // namespace draguard::engine::testing
