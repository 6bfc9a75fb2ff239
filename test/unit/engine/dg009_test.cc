// DG009 no-admin-access: table of pass / fail / skip cases, each action, exemption.
#include "rule_test_util.h"

namespace draguard::engine::testing {
namespace {

const std::string kAdmin = Template(R"({"devices":{"requests":[{"name":"g","exactly":{"deviceClassName":"gpu.nvidia.com","adminAccess":true,"allocationMode":"All"}}]}})");

TEST(Dg009, Table) {
  std::vector<Case> cases = {
      {"admin_access", kAdmin, RuleStatus::kFail, {"/spec/spec/devices/requests/0/exactly/adminAccess"}, "namespace \"team-a\""},
      {"admin_false", Template(R"({"devices":{"requests":[{"name":"g","exactly":{"deviceClassName":"gpu.nvidia.com","adminAccess":false}}]}})"), RuleStatus::kPass, {}, ""},
      {"any_class", Template(R"({"devices":{"requests":[{"name":"n","exactly":{"deviceClassName":"dranet","adminAccess":true}}]}})"), RuleStatus::kFail, {}, ""},
      {"v1beta1_flat", Template(R"({"devices":{"requests":[{"name":"g","deviceClassName":"gpu.nvidia.com","adminAccess":true}]}})", "v1beta1"),
       RuleStatus::kFail, {"/spec/spec/devices/requests/0/adminAccess"}, ""},
      {"not_a_claim", R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{}})", RuleStatus::kSkip, {}, ""},
  };
  for (const auto& c : cases) CheckCase("DG009", c);
}

TEST(Dg009, AllowedNamespaces) {
  auto pol = DefaultPolicy();
  pol.admin_access_namespaces = {"gpu-operator", "monitoring-*"};
  CheckCase("DG009", {"allowed", kAdmin, RuleStatus::kPass, {}, ""}, pol, "monitoring-dcgm");
  CheckCase("DG009", {"other", kAdmin, RuleStatus::kFail, {}, ""}, pol, "team-a");
}

TEST(Dg009, ActionsAndExemption) { ExpectActionsAndExemption("DG009", Request(kAdmin)); }

}  // namespace
}  // namespace draguard::engine::testing
