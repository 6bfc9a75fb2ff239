// DG004 mig-profile-pinned: table of pass / fail / skip cases, each action, exemption.
#include "rule_test_util.h"

namespace draguard::engine::testing {
namespace {

std::string Mig(const std::string& expr) {
  std::string sel = expr.empty() ? "" : R"(,"selectors":[{"cel":{"expression":")" + expr + R"("}}])";
  return Template(R"({"devices":{"requests":[{"name":"mig","exactly":{"deviceClassName":"mig.nvidia.com")" + sel + "}}]}}");
}

const std::string kProfile = "device.attributes['gpu.nvidia.com'].profile";

TEST(Dg004, Table) {
  std::vector<Case> cases = {
      {"pinned", Mig(kProfile + " == '3g.40gb'"), RuleStatus::kPass, {}, ""},
      {"pinned_reversed_and_type", Mig("device.attributes['gpu.nvidia.com'].type == 'mig' && '1g.10gb' == " + kProfile), RuleStatus::kPass, {}, ""},
      {"pinned_index_form", Mig("device.attributes['gpu.nvidia.com']['profile'] == '1g.5gb'"), RuleStatus::kPass, {}, ""},
      {"in_single", Mig(kProfile + " in ['2g.20gb']"), RuleStatus::kPass, {}, ""},
      {"no_selector", Mig(""), RuleStatus::kFail, {"/spec/spec/devices/requests/0/exactly/deviceClassName"}, "does not pin a MIG profile"},
      {"capacity_range", Mig("device.capacity['gpu.nvidia.com'].multiprocessors.compareTo(quantity('10')) > 0"),
       RuleStatus::kFail, {"/spec/spec/devices/requests/0/exactly/selectors"}, "does not pin"},
      {"two_profiles_or", Mig(kProfile + " == '1g.10gb' || " + kProfile + " == '2g.20gb'"), RuleStatus::kFail, {}, "accepts 2 MIG profiles"},
      {"in_list", Mig(kProfile + " in ['1g.10gb', '2g.20gb', '3g.40gb']"), RuleStatus::kFail, {}, "accepts 3"},
      {"prefix_range", Mig(kProfile + ".startsWith('3g')"), RuleStatus::kFail, {}, "does not pin"},
      {"contradictory", Mig(kProfile + " == '1g.10gb' && " + kProfile + " == '2g.20gb'"), RuleStatus::kFail, {}, "contradictory"},
      {"full_gpu_skipped", Template(R"({"devices":{"requests":[{"name":"g","exactly":{"deviceClassName":"gpu.nvidia.com"}}]}})"), RuleStatus::kSkip, {}, ""},
      {"v1beta1_flat", Template(R"({"devices":{"requests":[{"name":"mig","deviceClassName":"mig.nvidia.com","selectors":[{"cel":{"expression":"device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"}}]}]}})", "v1beta1"),
       RuleStatus::kPass, {}, ""},
      {"first_available_one_unpinned",
       Template(R"({"devices":{"requests":[{"name":"m","firstAvailable":[{"name":"a","deviceClassName":"mig.nvidia.com","selectors":[{"cel":{"expression":"device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"}}]},{"name":"b","deviceClassName":"mig.nvidia.com"}]}]}})"),
       RuleStatus::kFail, {"/spec/spec/devices/requests/0/firstAvailable/1/deviceClassName"}, "request \"m/b\""},
      {"not_a_claim", R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}})", RuleStatus::kSkip, {}, ""},
  };
  for (const auto& c : cases) CheckCase("DG004", c);
}

TEST(Dg004, ActionsAndExemption) { ExpectActionsAndExemption("DG004", Request(Mig(""))); }

}  // namespace
}  // namespace draguard::engine::testing
