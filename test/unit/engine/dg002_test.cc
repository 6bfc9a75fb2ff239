// DG002 gpu-device-class: table of pass / fail / skip cases, each action, exemption.
#include "rule_test_util.h"

namespace draguard::engine::testing {
namespace {

const std::string kFull = R"({"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.nvidia.com"}}]}})";

TEST(Dg002, Table) {
  std::vector<Case> cases = {
      {"configured_class", Template(kFull), RuleStatus::kPass, {}, ""},
      {"mig_class", Template(R"({"devices":{"requests":[{"name":"m","exactly":{"deviceClassName":"mig.nvidia.com"}}]}})"),
       RuleStatus::kPass, {}, ""},
      {"vfio_class", Template(R"({"devices":{"requests":[{"name":"v","exactly":{"deviceClassName":"vfio.gpu.nvidia.com"}}]}})"),
       RuleStatus::kPass, {}, ""},
      {"custom_class_selecting_nvidia_driver",
       Template(R"({"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"my-gpus","selectors":[{"cel":{"expression":"device.driver == 'gpu.nvidia.com'"}}]}}]}})"),
       RuleStatus::kFail, {"/spec/spec/devices/requests/0/exactly/deviceClassName"}, "not a configured GPU class"},
      {"custom_class_reading_nvidia_attribute",
       Template(R"({"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"fast","selectors":[{"cel":{"expression":"device.attributes['gpu.nvidia.com'].productName == 'H100'"}}]}}]}})"),
       RuleStatus::kFail, {"/spec/spec/devices/requests/0/exactly/deviceClassName"}, "class \"fast\""},
      {"per_profile_class_not_configured",
       Template(R"({"devices":{"requests":[{"name":"m","exactly":{"deviceClassName":"mig-1g-12gb.gpu.nvidia.com"}}]}})"),
       RuleStatus::kFail, {"/spec/spec/devices/requests/0/exactly/deviceClassName"}, ""},
      {"first_available_subrequest",
       Template(R"({"devices":{"requests":[{"name":"g","firstAvailable":[{"name":"a","deviceClassName":"gpu.nvidia.com"},{"name":"b","deviceClassName":"x","selectors":[{"cel":{"expression":"device.driver == \"gpu.nvidia.com\""}}]}]}]}})"),
       RuleStatus::kFail, {"/spec/spec/devices/requests/0/firstAvailable/1/deviceClassName"}, "request \"g/b\""},
      {"v1beta1_flat", Template(R"({"devices":{"requests":[{"name":"gpu","deviceClassName":"x","selectors":[{"cel":{"expression":"device.driver == 'gpu.nvidia.com'"}}]}]}})", "v1beta1"),
       RuleStatus::kFail, {"/spec/spec/devices/requests/0/deviceClassName"}, ""},
      {"nic_class", Template(R"({"devices":{"requests":[{"name":"nic","exactly":{"deviceClassName":"dranet","selectors":[{"cel":{"expression":"device.driver == 'dra.net'"}}]}}]}})"),
       RuleStatus::kPass, {}, ""},
      {"unparsable_selector_is_not_an_error",
       Template(R"({"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"x","selectors":[{"cel":{"expression":"device.driver == "}}]}}]}})"),
       RuleStatus::kPass, {}, ""},
      {"pod_skipped", R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[]}})", RuleStatus::kSkip, {}, ""},
      {"garbage_shapes", Template(R"({"devices":{"requests":[1,"x",{"name":"a","exactly":"nope"}]}})"), RuleStatus::kPass, {}, ""},
  };
  for (const auto& c : cases) CheckCase("DG002", c);
}

TEST(Dg002, PolicyClassesAreHonoured) {
  auto pol = DefaultPolicy();
  pol.device_classes.gpu.push_back("fast");
  CheckCase("DG002", {"added", Template(R"({"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"fast","selectors":[{"cel":{"expression":"device.driver == 'gpu.nvidia.com'"}}]}}]}})"),
                      RuleStatus::kPass, {}, ""}, pol);
}

TEST(Dg002, ActionsAndExemption) {
  ExpectActionsAndExemption("DG002", Request(Template(
      R"({"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"x","selectors":[{"cel":{"expression":"device.driver == 'gpu.nvidia.com' && device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"}}]}}]}})")));
}

}  // namespace
}  // namespace draguard::engine::testing
