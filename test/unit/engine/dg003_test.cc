// DG003 memory-reservation: table of pass / fail / skip / error cases, each action, exemption.
#include "rule_test_util.h"

namespace draguard::engine::testing {
namespace {

std::string Gpu(const std::string& expr, const std::string& klass = "gpu.nvidia.com") {
  std::string sel = expr.empty() ? "" : R"(,"selectors":[{"cel":{"expression":")" + expr + R"("}}])";
  return Template(R"({"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":")" + klass + "\"" + sel + "}}]}}");
}

const std::string kMem = "device.capacity['gpu.nvidia.com'].memory";

TEST(Dg003, Table) {
  std::vector<Case> cases = {
      {"compareTo_ge_0", Gpu(kMem + ".compareTo(quantity('40Gi')) >= 0"), RuleStatus::kPass, {}, ""},
      {"guarded", Gpu("'memory' in device.capacity['gpu.nvidia.com'] && " + kMem + ".compareTo(quantity('79Gi')) >= 0"),
       RuleStatus::kPass, {}, ""},
      {"compareTo_gt_0", Gpu(kMem + ".compareTo(quantity('40Gi')) > 0"), RuleStatus::kPass, {}, ""},
      {"compareTo_eq_1", Gpu(kMem + ".compareTo(quantity('40Gi')) == 1"), RuleStatus::kPass, {}, ""},
      {"literal_left", Gpu("0 <= " + kMem + ".compareTo(quantity('40Gi'))"), RuleStatus::kPass, {}, ""},
      {"reversed_receiver", Gpu("quantity('40Gi').compareTo(" + kMem + ") <= 0"), RuleStatus::kPass, {}, ""},
      {"isGreaterThan", Gpu(kMem + ".isGreaterThan(quantity('40Gi'))"), RuleStatus::kPass, {}, ""},
      {"not_isLessThan", Gpu("!" + kMem + ".isLessThan(quantity('40Gi'))"), RuleStatus::kPass, {}, ""},
      {"index_form", Gpu("device.capacity['gpu.nvidia.com']['memory'].compareTo(quantity('40Gi')) >= 0"), RuleStatus::kPass, {}, ""},
      {"driver_domain", Gpu("device.capacity[device.driver].memory.compareTo(quantity('40Gi')) >= 0"), RuleStatus::kPass, {}, ""},
      {"or_both_bounded", Gpu("(" + kMem + ".compareTo(quantity('40Gi')) >= 0 && device.attributes['gpu.nvidia.com'].productName == 'A') || " + kMem + ".isGreaterThan(quantity('70Gi'))"),
       RuleStatus::kPass, {}, ""},
      {"no_selector", Gpu(""), RuleStatus::kFail, {"/spec/spec/devices/requests/0/exactly/deviceClassName"}, "does not bound device memory"},
      {"upper_bound_only", Gpu(kMem + ".compareTo(quantity('40Gi')) <= 0"), RuleStatus::kFail, {}, "does not bound"},
      {"isLessThan", Gpu(kMem + ".isLessThan(quantity('40Gi'))"), RuleStatus::kFail, {}, ""},
      {"compareTo_ne_1", Gpu(kMem + ".compareTo(quantity('40Gi')) != 1"), RuleStatus::kFail, {}, ""},
      {"or_one_side_unbounded", Gpu(kMem + ".compareTo(quantity('40Gi')) >= 0 || device.attributes['gpu.nvidia.com'].productName == 'A'"),
       RuleStatus::kFail, {}, ""},
      {"product_name_only", Gpu("device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100'"),
       RuleStatus::kFail, {"/spec/spec/devices/requests/0/exactly/selectors"}, "(gpu.nvidia.com)"},
      {"other_domain_memory", Gpu("device.capacity['example.com'].memory.compareTo(quantity('40Gi')) >= 0"), RuleStatus::kFail, {}, ""},
      {"below_minimum", Gpu(kMem + ".compareTo(quantity('512Mi')) >= 0"), RuleStatus::kFail, {}, "below the policy minimum 1Gi"},
      {"h100_pitfall_warns", Gpu(kMem + ".compareTo(quantity('80Gi')) >= 0"), RuleStatus::kFail, {}, "excludes H100 80GB"},
      {"mig_skipped", Gpu("", "mig.nvidia.com"), RuleStatus::kSkip, {}, ""},
      {"vfio_skipped", Gpu("", "vfio.gpu.nvidia.com"), RuleStatus::kSkip, {}, ""},
      {"first_available_each",
       Template(R"({"devices":{"requests":[{"name":"gpu","firstAvailable":[{"name":"big","deviceClassName":"gpu.nvidia.com","selectors":[{"cel":{"expression":"device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('140Gi')) >= 0"}}]},{"name":"small","deviceClassName":"gpu.nvidia.com","count":2}]}]}})"),
       RuleStatus::kFail, {"/spec/spec/devices/requests/0/firstAvailable/1/deviceClassName"}, "request \"gpu/small\""},
      {"v1beta1_flat", Template(R"({"devices":{"requests":[{"name":"gpu","deviceClassName":"gpu.nvidia.com"}]}})", "v1beta1"),
       RuleStatus::kFail, {"/spec/spec/devices/requests/0/deviceClassName"}, ""},
      {"claim_not_template", Claim(R"({"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.nvidia.com"}}]}})"),
       RuleStatus::kFail, {"/spec/devices/requests/0/exactly/deviceClassName"}, "ResourceClaim \"c\""},
      {"pod_skipped", R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{}})", RuleStatus::kSkip, {}, ""},
  };
  for (const auto& c : cases) CheckCase("DG003", c);
}

TEST(Dg003, H100PitfallIsAWarningNotADeny) {
  auto r = RunRule("DG003", Request(Gpu(kMem + ".compareTo(quantity('80Gi')) >= 0")), DefaultPolicy());
  ASSERT_EQ(r.findings.size(), 1u);
  ASSERT_TRUE(r.findings[0].cap.has_value());
  EXPECT_EQ(*r.findings[0].cap, policy::Action::kWarn);
  auto d = Review(Request(Gpu(kMem + ".compareTo(quantity('80Gi')) >= 0")), DefaultPolicy());
  EXPECT_TRUE(d.response.allowed);
  EXPECT_TRUE(Contains(d.warned_rules, "DG003"));
}

TEST(Dg003, PolicyMinimumAndError) {
  auto pol = DefaultPolicy();
  pol.memory_minimum = "48Gi";
  CheckCase("DG003", {"above_40", Gpu(kMem + ".compareTo(quantity('40Gi')) >= 0"), RuleStatus::kFail, {}, "below the policy minimum 48Gi"}, pol);
  pol.memory_minimum = "not-a-quantity";
  CheckCase("DG003", {"bad_minimum", Gpu(""), RuleStatus::kError, {}, ""}, pol);
  auto parsed = policy::ParsePolicy("apiVersion: draguard.io/v1alpha1\nkind: Policy\nmemoryReservation: {minimum: lots}\n");
  EXPECT_FALSE(parsed.ok());
}

TEST(Dg003, ActionsAndExemption) { ExpectActionsAndExemption("DG003", Request(Gpu(""))); }

}  // namespace
}  // namespace draguard::engine::testing
