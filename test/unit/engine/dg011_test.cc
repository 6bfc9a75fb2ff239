// DG011 selector-validity: table of pass / fail / skip cases, each action, exemption.
#include "rule_test_util.h"

namespace draguard::engine::testing {
namespace {

std::string Sel(const std::string& expr, const std::string& klass = "gpu.nvidia.com") {
  nlohmann::json spec = {{"devices", {{"requests", {{{"name", "g"}, {"exactly", {{"deviceClassName", klass},
      {"selectors", {{{"cel", {{"expression", expr}}}}}}}}}}}}}};
  return Template(spec.dump());
}

const std::string kP = "/spec/spec/devices/requests/0/exactly/selectors/0/cel/expression";

TEST(Dg011, Table) {
  std::vector<Case> cases = {
      {"valid_product", Sel("device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"), RuleStatus::kPass, {}, ""},
      {"guarded_memory", Sel("'memory' in device.capacity['gpu.nvidia.com'] && device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"),
       RuleStatus::kPass, {}, ""},
      {"semver", Sel("device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('550.0.0')) >= 0"), RuleStatus::kPass, {}, ""},
      {"syntax_error", Sel("device.attributes['gpu.nvidia.com'].productName == "), RuleStatus::kFail, {kP}, "does not compile"},
      {"invented_field", Sel("device.topology.pcie.rootComplex == 'pci0000:00'"), RuleStatus::kFail, {kP}, "does not compile"},
      {"not_bool", Sel("device.driver"), RuleStatus::kFail, {kP}, "does not compile"},
      {"memorySize", Sel("device.capacity['gpu.nvidia.com'].memorySize.compareTo(quantity('40Gi')) >= 0"), RuleStatus::kFail, {kP}, "does not publish"},
      {"index_removed", Sel("device.attributes['gpu.nvidia.com'].index == 0"), RuleStatus::kFail, {kP}, "removed in v25.8"},
      {"minor_removed", Sel("device.attributes['gpu.nvidia.com'].minor == 0"), RuleStatus::kFail, {}, "v25.3.x"},
      {"pcieBusID_replaced", Sel("device.attributes['gpu.nvidia.com'].pcieBusID == '0000:01:00.0'"), RuleStatus::kFail, {}, "pciBusID"},
      {"pcieRoot_wrong_domain", Sel("device.attributes['gpu.nvidia.com'].pcieRoot == 'pci0000:00'"), RuleStatus::kFail, {}, "standard attribute"},
      {"memory_as_attribute", Sel("device.attributes['gpu.nvidia.com'].memory > 0"), RuleStatus::kFail, {}, "is a capacity"},
      {"profile_on_full_gpu", Sel("device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"), RuleStatus::kFail, {}, "does not publish for full GPUs"},
      {"profile_on_mig", Sel("device.attributes['gpu.nvidia.com'].profile == '1g.10gb'", "mig.nvidia.com"), RuleStatus::kPass, {}, ""},
      {"unknown_domain", Sel("device.attributes['nvidia.com'].productName == 'x'"), RuleStatus::kFail, {}, "no domain \"nvidia.com\""},
      {"unguarded_memory_warns", Sel("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"), RuleStatus::kFail, {kP}, "not every device publishes"},
      {"unguarded_pcieRoot_warns", Sel("device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:00'"), RuleStatus::kFail, {}, "guard"},
      {"guarded_pcieRoot", Sel("'pcieRoot' in device.attributes['resource.kubernetes.io'] && device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:00'"),
       RuleStatus::kPass, {}, ""},
      {"allow_multiple_allocations_gated", Sel("device.allowMultipleAllocations == true", "gpu.example.com"), RuleStatus::kFail, {}, "DRAConsumableCapacity"},
      {"other_driver_names_not_checked", Sel("device.attributes['gpu.example.com'].model == 'LATEST-GPU-MODEL'", "gpu.example.com"), RuleStatus::kPass, {}, ""},
      {"no_selectors_skipped", Template(R"({"devices":{"requests":[{"name":"g","exactly":{"deviceClassName":"gpu.nvidia.com"}}]}})"), RuleStatus::kSkip, {}, ""},
  };
  for (const auto& c : cases) CheckCase("DG011", c);
}

TEST(Dg011, UnguardedOptionalReadsWarnOthersDeny) {
  auto warn = RunRule("DG011", Request(Sel("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0")), DefaultPolicy());
  ASSERT_EQ(warn.findings.size(), 1u);
  EXPECT_EQ(warn.findings[0].cap, policy::Action::kWarn);
  EXPECT_NE(warn.findings[0].fix.find("'memory' in device.capacity['gpu.nvidia.com']"), std::string::npos);
  auto deny = RunRule("DG011", Request(Sel("device.attributes['gpu.nvidia.com'].index == 0")), DefaultPolicy());
  ASSERT_EQ(deny.findings.size(), 1u);
  EXPECT_FALSE(deny.findings[0].cap.has_value());
}

TEST(Dg011, ActionsAndExemption) { ExpectActionsAndExemption("DG011", Request(Sel("device.topology.numa == 0"))); }

}  // namespace
}  // namespace draguard::engine::testing
