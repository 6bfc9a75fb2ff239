// DG010 no-allocation-mode-all: table of pass / fail / skip cases, each action, exemption.
#include "rule_test_util.h"

namespace draguard::engine::testing {
namespace {

const std::string kAll = Template(R"({"devices":{"requests":[{"name":"g","exactly":{"deviceClassName":"gpu.nvidia.com","allocationMode":"All"}}]}})");

TEST(Dg010, Table) {
  std::vector<Case> cases = {
      {"all_gpus", kAll, RuleStatus::kFail, {"/spec/spec/devices/requests/0/exactly/allocationMode"}, "takes every matching GPU"},
      {"exact_count", Template(R"({"devices":{"requests":[{"name":"g","exactly":{"deviceClassName":"gpu.nvidia.com","allocationMode":"ExactCount","count":2}}]}})"), RuleStatus::kPass, {}, ""},
      {"all_nics_fine", Template(R"({"devices":{"requests":[{"name":"n","exactly":{"deviceClassName":"dranet","allocationMode":"All"}}]}})"), RuleStatus::kPass, {}, ""},
      {"all_mig", Template(R"({"devices":{"requests":[{"name":"m","exactly":{"deviceClassName":"mig.nvidia.com","allocationMode":"All"}}]}})"), RuleStatus::kFail, {}, ""},
      {"v1beta1_flat", Template(R"({"devices":{"requests":[{"name":"g","deviceClassName":"gpu.nvidia.com","allocationMode":"All"}]}})", "v1beta1"),
       RuleStatus::kFail, {"/spec/spec/devices/requests/0/allocationMode"}, ""},
      {"first_available", Template(R"({"devices":{"requests":[{"name":"g","firstAvailable":[{"name":"a","deviceClassName":"gpu.nvidia.com","allocationMode":"All"}]}]}})"),
       RuleStatus::kFail, {"/spec/spec/devices/requests/0/firstAvailable/0/allocationMode"}, ""},
      {"not_a_claim", R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{}})", RuleStatus::kSkip, {}, ""},
  };
  for (const auto& c : cases) CheckCase("DG010", c);
}

TEST(Dg010, AllowedNamespaces) {
  auto pol = DefaultPolicy();
  pol.allocation_mode_all_namespaces = {"gpu-operator"};
  CheckCase("DG010", {"allowed", kAll, RuleStatus::kPass, {}, ""}, pol, "gpu-operator");
}

TEST(Dg010, ActionsAndExemption) { ExpectActionsAndExemption("DG010", Request(kAll)); }

}  // namespace
}  // namespace draguard::engine::testing
