// DG007 latency-sensitive-isolation: table of pass / fail / skip cases, each action, exemption.
#include "rule_test_util.h"

namespace draguard::engine::testing {
namespace {

const std::string kLs = R"({"name":"t","labels":{"draguard.io/workload-class":"latency-sensitive"}})";

std::string WithConfig(const std::string& klass, const std::string& params, const std::string& md = kLs) {
  return Template(R"({"devices":{"requests":[{"name":"g","exactly":{"deviceClassName":")" + klass +
                      R"("}}],"config":[{"requests":["g"],"opaque":{"driver":"gpu.nvidia.com","parameters":)" + params + "}}]}}",
                  "v1", md);
}

const std::string kTs = R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing"}})";
const std::string kMpsFull = R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":50,"defaultPinnedDeviceMemoryLimit":"10Gi"}}})";
const std::string kMpsBare = R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS"}})";
const std::string kMigMps = R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":"MigDeviceConfig","sharing":{"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":50,"defaultPinnedDeviceMemoryLimit":"5Gi"}}})";

std::string Pod(const std::string& labels, const std::string& claim_entry, const std::string& priority = "") {
  return R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":)" + labels + R"(},"spec":{)" +
         (priority.empty() ? "" : R"("priorityClassName":")" + priority + R"(",)") +
         R"("resourceClaims":[)" + claim_entry + R"(],"containers":[{"name":"c","resources":{"claims":[{"name":"gpu"}]}}]}})";
}

TEST(Dg007, Table) {
  std::vector<Case> cases = {
      {"ls_time_slicing", WithConfig("gpu.nvidia.com", kTs), RuleStatus::kFail, {"/spec/spec/devices/config/0/opaque/parameters/sharing"}, "time-slices"},
      {"ls_mps_with_limits", WithConfig("gpu.nvidia.com", kMpsFull), RuleStatus::kPass, {}, ""},
      {"ls_mps_without_limits", WithConfig("gpu.nvidia.com", kMpsBare), RuleStatus::kFail, {}, "MPS without both"},
      {"ls_mig_sharing", WithConfig("mig.nvidia.com", kMigMps), RuleStatus::kFail, {}, "shares a MIG device"},
      {"ls_exclusive", Template(R"({"devices":{"requests":[{"name":"g","exactly":{"deviceClassName":"gpu.nvidia.com"}}]}})", "v1", kLs), RuleStatus::kPass, {}, ""},
      {"not_ls_claim_skipped", WithConfig("gpu.nvidia.com", kTs, R"({"name":"t"})"), RuleStatus::kSkip, {}, ""},
      {"ls_pod_shared_claim", Pod(R"({"draguard.io/workload-class":"latency-sensitive"})", R"({"name":"gpu","resourceClaimName":"shared"})"),
       RuleStatus::kFail, {"/spec/resourceClaims/0/resourceClaimName"}, "pre-existing claim \"shared\""},
      {"ls_pod_template", Pod(R"({"draguard.io/workload-class":"latency-sensitive"})", R"({"name":"gpu","resourceClaimTemplateName":"t"})"),
       RuleStatus::kPass, {}, ""},
      {"other_pod_skipped", Pod(R"({})", R"({"name":"gpu","resourceClaimName":"shared"})"), RuleStatus::kSkip, {}, ""},
      {"deployment_template_labels",
       R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"metadata":{"labels":{"draguard.io/workload-class":"latency-sensitive"}},"spec":{"resourceClaims":[{"name":"gpu","resourceClaimName":"shared"}],"containers":[{"name":"c"}]}}}})",
       RuleStatus::kFail, {"/spec/template/spec/resourceClaims/0/resourceClaimName"}, "Deployment \"d\""},
  };
  for (const auto& c : cases) CheckCase("DG007", c);
}

TEST(Dg007, PriorityClassSelectsTheClass) {
  auto pol = DefaultPolicy();
  pol.latency_sensitive.priority_class_names = {"realtime"};
  CheckCase("DG007", {"priority", Pod(R"({})", R"({"name":"gpu","resourceClaimName":"shared"})", "realtime"),
                      RuleStatus::kFail, {}, ""}, pol);
}

TEST(Dg007, PodLabelsAreReadAsTheSelectorNeedsThem) {
  auto pol = DefaultPolicy();
  pol.latency_sensitive.labels = {{"tier", "rt"}, {"team", "a"}};  // every selector label must match
  const std::string shared = R"({"name":"gpu","resourceClaimName":"shared"})";
  const std::vector<Case> cases = {
      {"all_match", Pod(R"({"team":"a","tier":"rt","other":"x"})", shared), RuleStatus::kFail, {}, ""},
      {"one_missing", Pod(R"({"tier":"rt"})", shared), RuleStatus::kSkip, {}, ""},
      {"one_differs", Pod(R"({"tier":"rt","team":"b"})", shared), RuleStatus::kSkip, {}, ""},
      {"not_a_string", Pod(R"({"tier":"rt","team":1})", shared), RuleStatus::kSkip, {}, ""},
      {"last_duplicate_wins", Pod(R"({"tier":"x","team":"a","tier":"rt"})", shared), RuleStatus::kFail, {}, ""},
      {"labels_not_an_object", Pod(R"(["tier","rt"])", shared), RuleStatus::kSkip, {}, ""},
  };
  for (const auto& c : cases) CheckCase("DG007", c, pol);
}

TEST(Dg007, ActionsAndExemption) { ExpectActionsAndExemption("DG007", Request(WithConfig("gpu.nvidia.com", kTs))); }

}  // namespace
}  // namespace draguard::engine::testing
