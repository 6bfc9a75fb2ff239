// DG005 topology-alignment: table of pass / fail / skip / error cases, each action, exemption.
#include "rule_test_util.h"

namespace draguard::engine::testing {
namespace {

const std::string kGpus2 = R"({"name":"gpus","exactly":{"deviceClassName":"gpu.nvidia.com","count":2}})";
const std::string kNic = R"({"name":"nic","exactly":{"deviceClassName":"dranet"}})";
const std::string kPcie = R"({"matchAttribute":"resource.kubernetes.io/pcieRoot"})";

std::string Devices(const std::string& requests, const std::string& constraints = "") {
  return Template(R"({"devices":{"requests":[)" + requests + "]" +
                  (constraints.empty() ? "" : R"(,"constraints":[)" + constraints + "]") + "}}");
}

TEST(Dg005, Table) {
  std::vector<Case> cases = {
      {"single_gpu", Devices(R"({"name":"g","exactly":{"deviceClassName":"gpu.nvidia.com"}})"), RuleStatus::kPass, {}, ""},
      {"two_gpus_aligned_all", Devices(kGpus2, kPcie), RuleStatus::kPass, {}, ""},
      {"gpu_nic_aligned_named", Devices(kGpus2 + "," + kNic, R"({"requests":["gpus","nic"],"matchAttribute":"resource.kubernetes.io/pcieRoot"})"),
       RuleStatus::kPass, {}, ""},
      {"two_gpus_unaligned", Devices(kGpus2), RuleStatus::kFail, {"/spec/spec/devices"}, "allocates 2 devices"},
      {"gpu_nic_partial_constraint", Devices(kGpus2 + "," + kNic, R"({"requests":["gpus"],"matchAttribute":"resource.kubernetes.io/pcieRoot"})"),
       RuleStatus::kFail, {"/spec/spec/devices/constraints"}, "\"gpus\" x2, \"nic\""},
      {"other_attribute", Devices(kGpus2, R"({"matchAttribute":"gpu.nvidia.com/productName"})"), RuleStatus::kFail, {}, ""},
      {"unqualified_pcieRoot_does_not_count", Devices(kGpus2, R"({"matchAttribute":"pcieRoot"})"), RuleStatus::kFail, {}, ""},
      {"first_available_covered_alternative",
       Devices(R"({"name":"gpu","firstAvailable":[{"name":"big","deviceClassName":"gpu.nvidia.com"},{"name":"two","deviceClassName":"gpu.nvidia.com","count":2}]})",
               R"({"requests":["gpu/two"],"matchAttribute":"resource.kubernetes.io/pcieRoot"})"),
       RuleStatus::kPass, {}, ""},
      {"first_available_uncovered_alternative",
       Devices(R"({"name":"gpu","firstAvailable":[{"name":"big","deviceClassName":"gpu.nvidia.com"},{"name":"two","deviceClassName":"gpu.nvidia.com","count":2}]})"),
       RuleStatus::kFail, {}, "alternative allocates 2 devices (\"gpu/two\" x2)"},
      {"imex_channel_exempt", Devices(R"({"name":"g","exactly":{"deviceClassName":"gpu.nvidia.com"}},{"name":"ch","exactly":{"deviceClassName":"compute-domain-default-channel.nvidia.com"}})"),
       RuleStatus::kPass, {}, ""},
      {"nics_only_skipped", Devices(R"({"name":"nic","exactly":{"deviceClassName":"dranet","count":8}})"), RuleStatus::kSkip, {}, ""},
      {"v1beta1_flat", Template(R"({"devices":{"requests":[{"name":"g","deviceClassName":"gpu.nvidia.com","count":4}]}})", "v1beta1"),
       RuleStatus::kFail, {}, "allocates 4 devices"},
  };
  for (const auto& c : cases) CheckCase("DG005", c);
}

TEST(Dg005, ExemptClassesFromPolicy) {
  auto pol = DefaultPolicy();
  pol.alignment_exempt_classes.push_back("dranet");
  CheckCase("DG005", {"nic_exempt", Devices(R"({"name":"g","exactly":{"deviceClassName":"gpu.nvidia.com"}},)" + kNic),
                      RuleStatus::kPass, {}, ""}, pol);
}

TEST(Dg005, TooManyCombinationsIsAnError) {
  std::string reqs;
  for (int i = 0; i < 13; ++i) {
    if (i) reqs += ",";
    reqs += R"({"name":"r)" + std::to_string(i) +
            R"(","firstAvailable":[{"name":"a","deviceClassName":"gpu.nvidia.com"},{"name":"b","deviceClassName":"gpu.nvidia.com"}]})";
  }
  CheckCase("DG005", {"8192_combinations", Devices(reqs), RuleStatus::kError, {}, ""});
}

TEST(Dg005, ActionsAndExemption) { ExpectActionsAndExemption("DG005", Request(Devices(kGpus2))); }

}  // namespace
}  // namespace draguard::engine::testing
