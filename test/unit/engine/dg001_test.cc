// DG001 legacy-gpu-resource: table of pass / fail / skip cases and each action.
#include <gtest/gtest.h>

#include <map>

#include "draguard/engine/engine.h"
#include "draguard/engine/registry.h"
#include "rules/rules.h"

namespace draguard::engine {
namespace {

using admission::Json;

admission::AdmissionRequest PodRequest(Json spec, admission::Operation op = admission::Operation::kCreate) {
  admission::AdmissionRequest r;
  r.uid = "u";
  r.kind = {"", "v1", "Pod"};
  r.namespace_ = "team-a";
  r.operation = op;
  r.object = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"spec", std::move(spec)}};
  return r;
}

Json Container(const std::string& name, Json resources) {
  return {{"name", name}, {"image", "cuda"}, {"resources", std::move(resources)}};
}

RuleResult RunRule(const admission::AdmissionRequest& req, const policy::Policy& pol = {}) {
  auto rule = rules::MakeLegacyGpuResource();
  RuleInput in{req, pol};
  return rule->Evaluate(in);
}

struct Case {
  const char* name;
  Json spec;
  RuleStatus want;
  std::vector<std::string> pointers;
};

class Dg001 : public ::testing::TestWithParam<Case> {};

TEST_P(Dg001, Evaluates) {
  auto r = RunRule(PodRequest(GetParam().spec));
  EXPECT_EQ(r.status, GetParam().want);
  std::vector<std::string> got;
  for (const auto& f : r.findings) got.push_back(f.pointer);
  EXPECT_EQ(got, GetParam().pointers);
}

INSTANTIATE_TEST_SUITE_P(
    Table, Dg001,
    ::testing::Values(
        Case{"limit_int", {{"containers", {Container("a", {{"limits", {{"nvidia.com/gpu", 1}}}})}}},
             RuleStatus::kFail, {"/spec/containers/0/resources/limits/nvidia.com~1gpu"}},
        Case{"request_only_string", {{"containers", {Container("a", {{"requests", {{"nvidia.com/gpu", "2"}}}})}}},
             RuleStatus::kFail, {"/spec/containers/0/resources/requests/nvidia.com~1gpu"}},
        Case{"milli_quantity", {{"containers", {Container("a", {{"limits", {{"nvidia.com/gpu", "1000m"}}}})}}},
             RuleStatus::kFail, {"/spec/containers/0/resources/limits/nvidia.com~1gpu"}},
        Case{"limit_and_request_once",
             {{"containers", {Container("a", {{"limits", {{"nvidia.com/gpu", 1}}}, {"requests", {{"nvidia.com/gpu", 1}}}})}}},
             RuleStatus::kFail, {"/spec/containers/0/resources/limits/nvidia.com~1gpu"}},
        Case{"mig", {{"containers", {Container("a", {{"limits", {{"nvidia.com/mig-1g.10gb", 1}}}})}}},
             RuleStatus::kFail, {"/spec/containers/0/resources/limits/nvidia.com~1mig-1g.10gb"}},
        Case{"shared", {{"containers", {Container("a", {{"limits", {{"nvidia.com/gpu.shared", 1}}}})}}},
             RuleStatus::kFail, {"/spec/containers/0/resources/limits/nvidia.com~1gpu.shared"}},
        Case{"init_container",
             {{"containers", {Container("a", {{"limits", {{"cpu", 1}}}})}},
              {"initContainers", {Container("i", {{"limits", {{"nvidia.com/gpu", 1}}}})}}},
             RuleStatus::kFail, {"/spec/initContainers/0/resources/limits/nvidia.com~1gpu"}},
        Case{"pod_level", {{"containers", Json::array()}, {"resources", {{"limits", {{"nvidia.com/gpu", 8}}}}}},
             RuleStatus::kFail, {"/spec/resources/limits/nvidia.com~1gpu"}},
        Case{"cpu_only", {{"containers", {Container("a", {{"limits", {{"cpu", "1"}, {"memory", "1Gi"}}}})}}},
             RuleStatus::kPass, {}},
        Case{"lookalike_not_in_list", {{"containers", {Container("a", {{"limits", {{"nvidia.com/gpux", 1}}}})}}},
             RuleStatus::kPass, {}},
        Case{"dra_claims", {{"containers", {Container("a", {{"claims", {{{"name", "gpu"}}}}})}}},
             RuleStatus::kPass, {}},
        Case{"garbage_shapes", {{"containers", {1, "x", Json::object(), Container("a", "nope")}}},
             RuleStatus::kPass, {}}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

TEST(Dg001Rule, SkipsUpdatesAndNonPods) {
  Json spec = {{"containers", {Container("a", {{"limits", {{"nvidia.com/gpu", 1}}}})}}};
  EXPECT_EQ(RunRule(PodRequest(spec, admission::Operation::kUpdate)).status, RuleStatus::kSkip);
  auto req = PodRequest(spec);
  req.kind = {"apps", "v1", "Deployment"};
  EXPECT_EQ(RunRule(req).status, RuleStatus::kSkip);
}

TEST(Dg001Rule, HonoursTheConfiguredResourceList) {
  policy::Policy pol;
  pol.legacy_resources = {"amd.com/gpu"};
  Json spec = {{"containers", {Container("a", {{"limits", {{"nvidia.com/gpu", 1}, {"amd.com/gpu", 1}}}})}}};
  auto r = RunRule(PodRequest(spec), pol);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].pointer, "/spec/containers/0/resources/limits/amd.com~1gpu");
}

TEST(Dg001Rule, MessageNamesContainerResourceAndFix) {
  Json spec = {{"containers", {Container("trainer", {{"limits", {{"nvidia.com/gpu", 4}}}})}}};
  auto r = RunRule(PodRequest(spec));
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].message, "container \"trainer\" requests nvidia.com/gpu (limits: 4)");
  EXPECT_NE(r.findings[0].fix.find("gpu.nvidia.com"), std::string::npos);
}

TEST(Dg001Rule, EachFindingNamesItsOwnPlace) {
  Json sidecar = Container("proxy", {{"limits", {{"nvidia.com/gpu", 1}}}});
  sidecar["restartPolicy"] = "Always";
  Json spec = {{"containers",
                {Container("cpu", {{"limits", {{"cpu", 1}}}}),
                 Container("two", {{"limits", {{"nvidia.com/gpu", 1}, {"nvidia.com/mig-1g.10gb", 2}}}})}},
               {"initContainers", {sidecar}},
               {"resources", {{"requests", {{"nvidia.com/gpu", 1}}}}}};
  auto r = RunRule(PodRequest(spec));
  ASSERT_EQ(r.findings.size(), 4u);
  EXPECT_EQ(r.findings[0].pointer, "/spec/containers/1/resources/limits/nvidia.com~1gpu");
  EXPECT_EQ(r.findings[0].message, "container \"two\" requests nvidia.com/gpu (limits: 1)");
  EXPECT_EQ(r.findings[1].pointer, "/spec/containers/1/resources/limits/nvidia.com~1mig-1g.10gb");
  EXPECT_EQ(r.findings[1].message.rfind("container \"two\" requests nvidia.com/mig-1g.10gb (limits: 2)", 0), 0u);
  EXPECT_EQ(r.findings[2].pointer, "/spec/initContainers/0/resources/limits/nvidia.com~1gpu");
  EXPECT_EQ(r.findings[2].message, "sidecar \"proxy\" requests nvidia.com/gpu (limits: 1)");
  EXPECT_EQ(r.findings[3].pointer, "/spec/resources/requests/nvidia.com~1gpu");
  EXPECT_EQ(r.findings[3].message, "pod-level spec.resources requests nvidia.com/gpu (requests: 1)");
}

// With mutation on, a workload's legacy template only warns (its Pods will be converted), unless
// the webhook found that /mutate would refuse its Pods: then the rule's own action, with the
// reason, so the workload is refused at its CREATE rather than failing to create Pods later.
TEST(Dg001Rule, WorkloadTemplatesWhosePodsWouldBeRefusedTakeTheRulesAction) {
  admission::AdmissionRequest req;
  req.uid = "u";
  req.kind = {"batch", "v1", "Job"};
  req.namespace_ = "team-a";
  req.operation = admission::Operation::kCreate;
  req.object = {{"apiVersion", "batch/v1"},
                {"kind", "Job"},
                {"metadata", {{"name", "train"}}},
                {"spec", {{"template", {{"spec", {{"containers", {Container("trainer", {{"limits", {{"nvidia.com/gpu", 8}}}})}}}}}}}}};
  policy::Policy pol;
  auto rule = rules::MakeLegacyGpuResource();
  RuleInput in{req, pol};
  auto warned = rule->Evaluate(in);
  ASSERT_EQ(warned.findings.size(), 1u);
  EXPECT_EQ(warned.findings[0].cap, policy::Action::kWarn);
  EXPECT_NE(warned.findings[0].message.find("will be converted when its Pods are created"), std::string::npos);

  const std::map<std::string, std::string> refusals = {{"/spec/template/spec", "no node can place 8 GPUs"}};
  in.template_refusals = &refusals;
  auto refused = rule->Evaluate(in);
  ASSERT_EQ(refused.findings.size(), 1u);
  EXPECT_FALSE(refused.findings[0].cap.has_value());
  EXPECT_EQ(refused.findings[0].message,
            "Job \"train\": nvidia.com/gpu in container \"trainer\" cannot be converted when its Pods are created "
            "(at /spec/template/spec/containers/0/resources): no node can place 8 GPUs");
  EXPECT_EQ(EffectiveAction(policy::Action::kDeny, refused.findings[0]), policy::Action::kDeny);

  // Another template's refusal changes nothing here; without mutation the template is denied as such.
  const std::map<std::string, std::string> elsewhere = {{"/spec/jobTemplate/spec/template/spec", "x"}};
  in.template_refusals = &elsewhere;
  EXPECT_EQ(rule->Evaluate(in).findings[0].cap, policy::Action::kWarn);
  pol.mutation.enabled = false;
  auto off = rule->Evaluate(in);
  ASSERT_EQ(off.findings.size(), 1u);
  EXPECT_FALSE(off.findings[0].cap.has_value());
  EXPECT_NE(off.findings[0].message.find("requests nvidia.com/gpu"), std::string::npos) << off.findings[0].message;
}

TEST(Dg001Rule, IsInTheDefaultRegistry) {
  auto reg = DefaultRegistry();
  const Rule* r = reg.Find("DG001");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->name(), "legacy-gpu-resource");
  EXPECT_EQ(r->default_action(), policy::Action::kDeny);
}

}  // namespace
}  // namespace draguard::engine
