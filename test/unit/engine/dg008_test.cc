// DG008 sharing-limits: table of pass / fail / skip cases, each action, exemption.
#include "rule_test_util.h"

namespace draguard::engine::testing {
namespace {

std::string Cfg(const std::string& params, const std::string& driver = "gpu.nvidia.com", const std::string& md = R"({"name":"t"})") {
  return Template(R"({"devices":{"requests":[{"name":"g","exactly":{"deviceClassName":"gpu.nvidia.com"}}],"config":[{"opaque":{"driver":")" +
                      driver + R"(","parameters":)" + params + "}}]}}",
                  "v1", md);
}

std::string Gpu(const std::string& sharing, const std::string& kind = "GpuConfig") {
  return R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":")" + kind + R"(","sharing":)" + sharing + "}";
}

TEST(Dg008, Table) {
  const std::string p = "/spec/spec/devices/config/0/opaque/parameters";
  std::vector<Case> cases = {
      {"mps_complete", Cfg(Gpu(R"({"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":50,"defaultPinnedDeviceMemoryLimit":"10Gi"}})")), RuleStatus::kPass, {}, ""},
      {"mps_per_device", Cfg(Gpu(R"({"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":25,"defaultPerDevicePinnedMemoryLimit":{"0":"5Gi"}}})")), RuleStatus::kPass, {}, ""},
      {"mps_missing_both", Cfg(Gpu(R"({"strategy":"MPS"})")), RuleStatus::kFail, {p + "/sharing"}, "without defaultActiveThreadPercentage and a pinned memory limit"},
      {"mps_missing_pinned", Cfg(Gpu(R"({"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":50}})")), RuleStatus::kFail, {p + "/sharing/mpsConfig"}, "defaultPinnedDeviceMemoryLimit"},
      {"mps_percentage_range", Cfg(Gpu(R"({"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":150,"defaultPinnedDeviceMemoryLimit":"1Gi"}})")),
       RuleStatus::kFail, {p + "/sharing/mpsConfig/defaultActiveThreadPercentage"}, "0-100"},
      {"mps_bad_quantity", Cfg(Gpu(R"({"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":5,"defaultPinnedDeviceMemoryLimit":"ten gigs"}})")),
       RuleStatus::kFail, {p + "/sharing/mpsConfig/defaultPinnedDeviceMemoryLimit"}, "not a quantity"},
      {"time_slicing_warns", Cfg(Gpu(R"({"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Long"}})")), RuleStatus::kFail, {p + "/sharing/strategy"}, "time-slices"},
      {"bad_interval", Cfg(Gpu(R"({"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Forever"}})")), RuleStatus::kFail, {p + "/sharing/timeSlicingConfig/interval", p + "/sharing/strategy"}, ""},
      {"mig_time_slicing_config", Cfg(Gpu(R"({"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Short"}})", "MigDeviceConfig")),
       RuleStatus::kFail, {p + "/sharing/timeSlicingConfig"}, "MigDeviceConfig"},
      {"unknown_top_field", Cfg(R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharring":{}})"), RuleStatus::kFail, {p + "/sharring"}, "unknown field \"sharring\""},
      {"unknown_mps_field", Cfg(Gpu(R"({"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":5,"defaultPinnedDeviceMemoryLimit":"1Gi","maxClients":4}})")),
       RuleStatus::kFail, {p + "/sharing/mpsConfig/maxClients"}, ""},
      {"unknown_kind", Cfg(R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuClaimParameters"})"), RuleStatus::kFail, {p + "/kind"}, ""},
      {"wrong_api_version", Cfg(R"({"apiVersion":"gpu.resource.nvidia.com/v1alpha1","kind":"GpuConfig"})"), RuleStatus::kFail, {p + "/apiVersion"}, ""},
      {"bad_strategy", Cfg(Gpu(R"({"strategy":"Exclusive"})")), RuleStatus::kFail, {p + "/sharing/strategy"}, "not TimeSlicing or MPS"},
      {"no_sharing", Cfg(R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig"})"), RuleStatus::kPass, {}, ""},
      {"compute_domain_channel", Cfg(R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":"ComputeDomainChannelConfig","domainID":"x","allocationMode":"Single"})", "compute-domain.nvidia.com"),
       RuleStatus::kPass, {}, ""},
      {"other_driver_skipped", Cfg(R"({"anything":1})", "gpu.example.com"), RuleStatus::kSkip, {}, ""},
      {"parameters_not_object", Cfg(R"("text")"), RuleStatus::kFail, {p}, ""},
  };
  for (const auto& c : cases) CheckCase("DG008", c);
}

TEST(Dg008, TimeSlicingIsAWarningOutsideTheLatencySensitiveClass) {
  auto req = Request(Cfg(Gpu(R"({"strategy":"TimeSlicing"})")));
  auto d = Review(req, DefaultPolicy());
  EXPECT_TRUE(Contains(d.warned_rules, "DG008"));
  EXPECT_FALSE(Contains(d.denied_rules, "DG008"));
  // In the class, DG007 denies and DG008 does not warn twice.
  auto ls = Request(Cfg(Gpu(R"({"strategy":"TimeSlicing"})"), "gpu.nvidia.com",
                        R"({"name":"t","labels":{"draguard.io/workload-class":"latency-sensitive"}})"));
  auto r = RunRule("DG008", ls, DefaultPolicy());
  EXPECT_EQ(r.status, RuleStatus::kPass);
}

TEST(Dg008, ActionsAndExemption) { ExpectActionsAndExemption("DG008", Request(Cfg(Gpu(R"({"strategy":"MPS"})")))); }

}  // namespace
}  // namespace draguard::engine::testing
