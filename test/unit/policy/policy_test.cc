#include "draguard/policy/policy.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "draguard/policy/store.h"

namespace draguard::policy {
namespace {

TEST(ParsePolicy, DefaultPolicyParses) {
  auto p = ParsePolicy(DefaultPolicyYaml(), "default");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->mode, Mode::kEnforce);
  EXPECT_TRUE(p->IsLegacyResource("nvidia.com/gpu"));
  EXPECT_TRUE(p->IsLegacyResource("nvidia.com/gpu.shared"));
  EXPECT_TRUE(p->IsLegacyResource("nvidia.com/mig-1g.10gb"));
  EXPECT_FALSE(p->IsLegacyResource("nvidia.com/gpux"));
  EXPECT_FALSE(p->IsLegacyResource("cpu"));
  EXPECT_EQ(p->exemptions.namespaces, std::vector<std::string>{"kube-system"});
  EXPECT_EQ(p->latency_sensitive.labels.at("draguard.io/workload-class"), "latency-sensitive");
  EXPECT_TRUE(p->mutation.enabled);
  EXPECT_EQ(p->mutation.templates, TemplateMode::kCreate);
  EXPECT_EQ(p->rule_errors, RuleErrorPolicy::kAllow);
}

TEST(ParsePolicy, EveryKeyFromTheProductDoc) {
  const char* yaml = R"(apiVersion: draguard.io/v1alpha1
kind: Policy
mode: audit
legacyResources: ["nvidia.com/gpu", "amd.com/gpu"]
rules:
  DG006: {action: warn}
  DG001: {action: off}
exemptions:
  namespaces: ["kube-system", "team-*"]
  users: ["system:serviceaccount:ops:*"]
  groups: ["admins"]
workloadClasses:
  latencySensitive:
    labels: {tier: realtime}
    priorityClassNames: [critical]
mutation:
  enabled: false
  templates: reference
ruleErrors: deny
)";
  auto p = ParsePolicy(yaml);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->mode, Mode::kAudit);
  EXPECT_TRUE(p->IsLegacyResource("amd.com/gpu"));
  EXPECT_EQ(p->ActionFor("DG006", Action::kDeny), Action::kWarn);
  EXPECT_EQ(p->ActionFor("DG001", Action::kDeny), Action::kOff);
  EXPECT_EQ(p->ActionFor("DG002", Action::kDeny), Action::kDeny);
  EXPECT_EQ(p->exemptions.users.front(), "system:serviceaccount:ops:*");
  EXPECT_EQ(p->latency_sensitive.priority_class_names.front(), "critical");
  EXPECT_FALSE(p->mutation.enabled);
  EXPECT_EQ(p->mutation.templates, TemplateMode::kReference);
  EXPECT_EQ(p->rule_errors, RuleErrorPolicy::kDeny);
}

struct ErrorCase {
  const char* name;
  const char* yaml;
  const char* want;  // substring of the message, including line:column
};

class PolicyErrors : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(PolicyErrors, NameKeyLineAndColumn) {
  auto p = ParsePolicy(GetParam().yaml, "policy.yaml");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find(GetParam().want), std::string::npos) << p.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    All, PolicyErrors,
    ::testing::Values(
        ErrorCase{"unknown_top_key", "apiVersion: draguard.io/v1alpha1\nkind: Policy\nmoed: audit\n",
                  "policy.yaml:3:1: moed: unknown key \"moed\""},
        ErrorCase{"unknown_nested_key",
                  "apiVersion: draguard.io/v1alpha1\nkind: Policy\nmutation:\n  enabeld: true\n",
                  "policy.yaml:4:3: mutation.enabeld: unknown key"},
        ErrorCase{"bad_mode", "apiVersion: draguard.io/v1alpha1\nkind: Policy\nmode: strict\n",
                  "policy.yaml:3:7: mode: must be one of enforce | audit"},
        ErrorCase{"bad_action",
                  "apiVersion: draguard.io/v1alpha1\nkind: Policy\nrules:\n  DG001: {action: block}\n",
                  "policy.yaml:4:19: rules.DG001.action: must be one of deny | warn | audit | off"},
        ErrorCase{"bad_rule_id", "apiVersion: draguard.io/v1alpha1\nkind: Policy\nrules:\n  G1: {}\n",
                  "policy.yaml:4:3: rules.G1: rule IDs look like DG001"},
        ErrorCase{"list_expected",
                  "apiVersion: draguard.io/v1alpha1\nkind: Policy\nlegacyResources: nvidia.com/gpu\n",
                  "policy.yaml:3:18: legacyResources: must be a list of strings"},
        ErrorCase{"bool_expected",
                  "apiVersion: draguard.io/v1alpha1\nkind: Policy\nmutation: {enabled: maybe}\n",
                  "mutation.enabled: must be true or false"},
        ErrorCase{"wrong_api_version", "apiVersion: v1\nkind: Policy\n", "policy.yaml:1:13: apiVersion"},
        ErrorCase{"missing_kind", "apiVersion: draguard.io/v1alpha1\n", "kind: is required"},
        ErrorCase{"empty", "", "policy is empty"},
        ErrorCase{"not_a_map", "- a\n- b\n", "must be a mapping"},
        ErrorCase{"yaml_syntax", "apiVersion: draguard.io/v1alpha1\nkind: [Policy\n", "policy.yaml:3:1: invalid YAML"},
        ErrorCase{"bad_mapping_mode", "apiVersion: draguard.io/v1alpha1\nkind: Policy\nextendedResourceMapping: maybe\n",
                  "policy.yaml:3:26: extendedResourceMapping: must be one of deny | warn | allow"},
        ErrorCase{"bad_memory_minimum", "apiVersion: draguard.io/v1alpha1\nkind: Policy\nmemoryReservation: {minimum: lots}\n",
                  "memoryReservation.minimum: \"lots\" is not a non-negative quantity"},
        ErrorCase{"custom_resource_bad_path",
                  "apiVersion: draguard.io/v1alpha1\nkind: Policy\ncustomResources:\n- {group: a, kind: B, podTemplates: [\"spec..t\"]}\n",
                  "customResources[0]: invalid path \"spec..t\""},
        ErrorCase{"custom_resource_no_kind",
                  "apiVersion: draguard.io/v1alpha1\nkind: Policy\ncustomResources:\n- {group: a, podTemplates: [spec.t]}\n",
                  "customResources[0].kind: is required"},
        ErrorCase{"selector_bad_operator",
                  "apiVersion: draguard.io/v1alpha1\nkind: Policy\nexemptions:\n  objectSelectors:\n  - matchExpressions: [{key: a, operator: Is}]\n",
                  "exemptions.objectSelectors[0].matchExpressions[0].operator: must be one of In | NotIn | Exists | DoesNotExist"},
        ErrorCase{"device_classes_unknown_key",
                  "apiVersion: draguard.io/v1alpha1\nkind: Policy\ndeviceClasses: {gpus: [x]}\n",
                  "deviceClasses.gpus: unknown key"}),
    [](const ::testing::TestParamInfo<ErrorCase>& i) { return std::string(i.param.name); });

TEST(Policy, DefaultPolicyFileMatchesTheBuiltInDefaults) {
  auto p = ParsePolicy(DefaultPolicyYaml(), "default");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  Policy builtin;
  EXPECT_EQ(p->legacy_resources, builtin.legacy_resources);
  EXPECT_EQ(p->custom_resources.size(), builtin.custom_resources.size());
  for (std::size_t i = 0; i < p->custom_resources.size() && i < builtin.custom_resources.size(); ++i) {
    EXPECT_EQ(p->custom_resources[i].kind, builtin.custom_resources[i].kind);
    EXPECT_EQ(p->custom_resources[i].pod_templates, builtin.custom_resources[i].pod_templates);
    EXPECT_EQ(p->custom_resources[i].containers, builtin.custom_resources[i].containers);
    EXPECT_EQ(p->custom_resources[i].container_claims, builtin.custom_resources[i].container_claims);
  }
  EXPECT_EQ(p->mutation.interconnect, builtin.mutation.interconnect);
  EXPECT_EQ(p->device_classes.gpu, builtin.device_classes.gpu);
  EXPECT_EQ(p->device_classes.mig, builtin.device_classes.mig);
  EXPECT_EQ(p->device_classes.passthrough, builtin.device_classes.passthrough);
  EXPECT_EQ(p->alignment_exempt_classes, builtin.alignment_exempt_classes);
  EXPECT_EQ(p->memory_minimum, builtin.memory_minimum);
  EXPECT_EQ(p->extended_resource_mapping, ExtendedResourceMapping::kDeny);
  EXPECT_TRUE(p->IsLegacyResource("nvidia.com/gpumem"));
  EXPECT_TRUE(p->IsLegacyResource("nvidia.com/gpu-10gb"));
}

TEST(Policy, NewKeysParse) {
  auto p = ParsePolicy(R"(apiVersion: draguard.io/v1alpha1
kind: Policy
extendedResourceMapping: allow
deviceClasses: {gpu: [gpu.nvidia.com, fast], mig: [], passthrough: []}
memoryReservation: {minimum: 40Gi}
topologyAlignment: {exemptClasses: [dranet]}
adminAccess: {allowedNamespaces: [gpu-operator]}
allocationModeAll: {allowedNamespaces: ["monitoring-*"]}
exemptions:
  objectSelectors:
  - matchLabels: {tier: infra}
    matchExpressions: [{key: team, operator: In, values: [sre]}]
customResources:
- {group: example.com, kind: Trainer, podTemplates: ["spec.roles.*.template", "spec.groups[].template"]}
)");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->extended_resource_mapping, ExtendedResourceMapping::kAllow);
  EXPECT_TRUE(p->device_classes.IsGpuClass("fast"));
  EXPECT_EQ(p->memory_minimum, "40Gi");
  EXPECT_EQ(p->alignment_exempt_classes, std::vector<std::string>{"dranet"});
  ASSERT_EQ(p->exemptions.object_selectors.size(), 1u);
  EXPECT_TRUE(p->exemptions.object_selectors[0].Matches({{"tier", "infra"}, {"team", "sre"}}));
  EXPECT_FALSE(p->exemptions.object_selectors[0].Matches({{"tier", "infra"}, {"team", "ml"}}));
  ASSERT_EQ(p->custom_resources.size(), 1u);
  EXPECT_EQ(p->custom_resources[0].pod_templates.size(), 2u);
}

TEST(PolicyStore, BadReloadKeepsLastGoodPolicy) {
  auto dir = std::filesystem::temp_directory_path() / ("draguard-policy-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto file = (dir / "policy.yaml").string();
  std::ofstream(file) << "apiVersion: draguard.io/v1alpha1\nkind: Policy\nmode: audit\n";
  int ok = 0, bad = 0;
  PolicyStore store({"draguard-system"}, [&](const Status& s) { (s.ok() ? ok : bad)++; });
  ASSERT_TRUE(store.LoadFile(file).ok());
  auto first = store.Current();
  EXPECT_EQ(first->mode, Mode::kAudit);
  EXPECT_NE(std::find(first->exemptions.namespaces.begin(), first->exemptions.namespaces.end(),
                      "draguard-system"),
            first->exemptions.namespaces.end());
  std::ofstream(file, std::ios::trunc) << "apiVersion: draguard.io/v1alpha1\nkind: Policy\nmode: nope\n";
  EXPECT_FALSE(store.Reload().ok());
  EXPECT_EQ(store.Current(), first);  // same snapshot object still served
  std::ofstream(file, std::ios::trunc) << "apiVersion: draguard.io/v1alpha1\nkind: Policy\nmode: enforce\n";
  EXPECT_TRUE(store.Reload().ok());
  EXPECT_EQ(store.Current()->mode, Mode::kEnforce);
  EXPECT_EQ(first->mode, Mode::kAudit);  // readers holding the old snapshot are unaffected
  EXPECT_EQ(ok, 2);
  EXPECT_EQ(bad, 1);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace draguard::policy

namespace draguard::policy {
namespace {

TEST(ParsePolicy, ReadinessCanRequireTopology) {
  auto p = ParsePolicy("apiVersion: draguard.io/v1alpha1\nkind: Policy\nreadiness: {requireTopology: true}\n");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->require_topology_for_readiness);
  auto d = ParsePolicy(DefaultPolicyYaml());
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->require_topology_for_readiness);
  auto bad = ParsePolicy("apiVersion: draguard.io/v1alpha1\nkind: Policy\nreadiness:\n  requireTopolgy: true\n", "p.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("p.yaml:4:3: readiness.requireTopolgy: unknown key"), std::string::npos)
      << bad.status().message();
}

TEST(ParsePolicy, CelCostPerReview) {
  auto d = ParsePolicy(DefaultPolicyYaml());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->cel_cost_per_review, Policy{}.cel_cost_per_review);
  EXPECT_EQ(d->cel_cost_per_review, 10000000);
  auto p = ParsePolicy("apiVersion: draguard.io/v1alpha1\nkind: Policy\ncelCostPerReview: 250000\n");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->cel_cost_per_review, 250000);
  auto low = ParsePolicy("apiVersion: draguard.io/v1alpha1\nkind: Policy\ncelCostPerReview: 10\n", "p.yaml");
  ASSERT_FALSE(low.ok());
  EXPECT_NE(low.status().message().find("p.yaml:3:"), std::string::npos) << low.status().message();
  EXPECT_NE(low.status().message().find("celCostPerReview"), std::string::npos) << low.status().message();
}

}  // namespace
}  // namespace draguard::policy
