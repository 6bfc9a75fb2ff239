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

TEST(Policy, ActionForWithACursorAnswersAsWithoutInAnyOrder) {
  Policy p;
  p.rules["DG002"].action = Action::kWarn;
  p.rules["DG003"] = {};  // named without an action: the default
  p.rules["DG005"].action = Action::kAudit;
  const std::vector<std::string> orders[] = {
      {"DG001", "DG002", "DG003", "DG004", "DG005", "DG006"},
      {"DG006", "DG005", "DG002", "DG002", "DG001", "DG003"},
      {"DG005", "DG003", "DG005", "DG002"},
  };
  for (const auto& order : orders) {
    Policy::RuleCursor cursor = p.rules.begin();
    for (const auto& id : order) {
      EXPECT_EQ(p.ActionFor(id, Action::kDeny, cursor), p.ActionFor(id, Action::kDeny)) << id;
    }
  }
  Policy::RuleCursor cursor = p.rules.begin();
  EXPECT_EQ(p.ActionFor("DG002", Action::kDeny, cursor), Action::kWarn);
  EXPECT_EQ(p.ActionFor("DG003", Action::kDeny, cursor), Action::kDeny);
  EXPECT_EQ(p.ActionFor("DG005", Action::kOff, cursor), Action::kAudit);
  EXPECT_EQ(p.ActionFor("DG009", Action::kOff, cursor), Action::kOff);
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
        ErrorCase{"exception_not_a_list", "apiVersion: draguard.io/v1alpha1\nkind: Policy\nexceptions: {rules: [DG001]}\n", "policy.yaml:3:13: exceptions: must be a list of exceptions"},
        ErrorCase{"exception_no_rules", "apiVersion: draguard.io/v1alpha1\nkind: Policy\nexceptions:\n- {namespaces: [a], objectSelector: {}, reason: r}\n", "policy.yaml:4:3: exceptions[0].rules: is required"},
        ErrorCase{"exception_empty_rules", "apiVersion: draguard.io/v1alpha1\nkind: Policy\nexceptions:\n- {rules: [], namespaces: [a], objectSelector: {}, reason: r}\n", "exceptions[0].rules: must name at least one rule"},
        ErrorCase{"exception_bad_rule", "apiVersion: draguard.io/v1alpha1\nkind: Policy\nexceptions:\n- {rules: [DG001, gpu], namespaces: [a], objectSelector: {}, reason: r}\n", "policy.yaml:4:19: exceptions[0].rules[1]: \"gpu\" is not a rule ID"},
        ErrorCase{"exception_no_namespaces", "apiVersion: draguard.io/v1alpha1\nkind: Policy\nexceptions:\n- {rules: [DG001], objectSelector: {}, reason: r}\n", "exceptions[0].namespaces: is required"},
        ErrorCase{"exception_no_object", "apiVersion: draguard.io/v1alpha1\nkind: Policy\nexceptions:\n- {rules: [DG001], namespaces: [a], reason: r}\n", "exceptions[0]: needs objectNames or objectSelector"},
        ErrorCase{"exception_no_reason", "apiVersion: draguard.io/v1alpha1\nkind: Policy\nexceptions:\n- {rules: [DG001], namespaces: [a], objectNames: [b]}\n", "exceptions[0].reason: is required"},
        ErrorCase{"exception_blank_reason", "apiVersion: draguard.io/v1alpha1\nkind: Policy\nexceptions:\n- {rules: [DG001], namespaces: [a], objectNames: [b], reason: \" \"}\n", "exceptions[0].reason: must not be empty"},
        ErrorCase{"exception_bad_expiry", "apiVersion: draguard.io/v1alpha1\nkind: Policy\nexceptions:\n- {rules: [DG001], namespaces: [a], objectNames: [b], reason: r, expires: next week}\n", "exceptions[0].expires: \"next week\" is not an RFC 3339 time"},
        ErrorCase{"exception_bad_selector", "apiVersion: draguard.io/v1alpha1\nkind: Policy\nexceptions:\n- {rules: [DG001], namespaces: [a], objectSelector: {matchExpressions: [{key: k, operator: In}]}, reason: r}\n", "exceptions[0].objectSelector.matchExpressions[0].values: must be non-empty for In"},
        ErrorCase{"exception_unknown_key", "apiVersion: draguard.io/v1alpha1\nkind: Policy\nexceptions:\n- {rules: [DG001], namespace: a, objectNames: [b], reason: r}\n", "exceptions[0].namespace: unknown key"},
        ErrorCase{"exception_duplicate_name", "apiVersion: draguard.io/v1alpha1\nkind: Policy\nexceptions:\n- {name: x, rules: [DG001], namespaces: [a], objectNames: [b], reason: r}\n- {name: x, rules: [DG002], namespaces: [a], objectNames: [b], reason: r}\n", "exceptions[1].name: \"x\" is used by an earlier exception"},
        ErrorCase{"annotation_grant_no_namespaces", "apiVersion: draguard.io/v1alpha1\nkind: Policy\nannotationExceptions:\n- {users: [alice]}\n", "annotationExceptions[0].namespaces: is required"},
        ErrorCase{"annotation_grant_bad_rule", "apiVersion: draguard.io/v1alpha1\nkind: Policy\nannotationExceptions:\n- {namespaces: [a], rules: [dg1]}\n", "annotationExceptions[0].rules[0]: \"dg1\" is not a rule ID"},
        ErrorCase{"annotation_grant_unknown_key", "apiVersion: draguard.io/v1alpha1\nkind: Policy\nannotationExceptions:\n- {namespaces: [a], user: alice}\n", "annotationExceptions[0].user: unknown key"},
        ErrorCase{"device_classes_unknown_key",
                  "apiVersion: draguard.io/v1alpha1\nkind: Policy\ndeviceClasses: {gpus: [x]}\n",
                  "deviceClasses.gpus: unknown key"}),
    [](const ::testing::TestParamInfo<ErrorCase>& i) { return std::string(i.param.name); });

TEST(ParsePolicy, Exceptions) {
  auto p = ParsePolicy(R"(apiVersion: draguard.io/v1alpha1
kind: Policy
exceptions:
- name: vendor-bench
  rules: [DG001, DG005]
  namespaces: [team-a, "lab-*"]
  objectNames: [bench]
  reason: "vendor benchmark, TICKET-42"
  expires: 2026-03-01T00:00:00Z
- rules: [DG003]
  namespaces: [infra]
  objectSelector:
    matchLabels: {tier: infra}
    matchExpressions: [{key: owner, operator: Exists}]
  reason: burn-in
annotationExceptions:
- namespaces: [research-*]
- namespaces: [team-a]
  users: [alice]
  groups: [gpu-admins]
  rules: [DG005]
)", "policy.yaml");
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->exceptions.size(), 2u);
  const auto& a = p->exceptions[0];
  EXPECT_EQ(a.name, "vendor-bench");
  EXPECT_EQ(a.rules, (std::vector<std::string>{"DG001", "DG005"}));
  EXPECT_EQ(a.namespaces, (std::vector<std::string>{"team-a", "lab-*"}));
  EXPECT_EQ(a.object_names, std::vector<std::string>{"bench"});
  EXPECT_FALSE(a.object_selector.has_value());
  EXPECT_EQ(a.reason, "vendor benchmark, TICKET-42");
  ASSERT_TRUE(a.expires.has_value());
  EXPECT_EQ(*a.expires, *ParseRfc3339("2026-03-01T00:00:00Z"));
  EXPECT_EQ(a.expires_text, "2026-03-01T00:00:00Z");
  const auto& b = p->exceptions[1];
  EXPECT_EQ(b.name, "exceptions[1]");
  ASSERT_TRUE(b.object_selector.has_value());
  EXPECT_EQ(b.object_selector->match_labels.at("tier"), "infra");
  EXPECT_FALSE(b.expires.has_value());
  ASSERT_EQ(p->annotation_exceptions.size(), 2u);
  EXPECT_EQ(p->annotation_exceptions[0].namespaces, std::vector<std::string>{"research-*"});
  EXPECT_TRUE(p->annotation_exceptions[0].users.empty());
  EXPECT_TRUE(p->annotation_exceptions[0].rules.empty());
  EXPECT_EQ(p->annotation_exceptions[1].users, std::vector<std::string>{"alice"});
  EXPECT_EQ(p->annotation_exceptions[1].groups, std::vector<std::string>{"gpu-admins"});
  EXPECT_EQ(p->annotation_exceptions[1].rules, std::vector<std::string>{"DG005"});
}

TEST(ParsePolicy, AnnotationExceptionsAreOffByDefault) {
  auto p = ParsePolicy(DefaultPolicyYaml(), "default");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->annotation_exceptions.empty());
  EXPECT_TRUE(p->exceptions.empty());
  EXPECT_TRUE(Policy{}.annotation_exceptions.empty());
}

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
  EXPECT_EQ(p->device_classes.cpu, builtin.device_classes.cpu);
  EXPECT_EQ(p->mutation.cpu.mode, builtin.mutation.cpu.mode);
  EXPECT_EQ(p->mutation.cpu.device_class, builtin.mutation.cpu.device_class);
  EXPECT_EQ(p->mutation.nic.numa_attribute, builtin.mutation.nic.numa_attribute);
  EXPECT_EQ(p->mutation.nic.numa_attribute, NicNumaAttribute::kDriver);  // dranet v1.4.0
  EXPECT_FALSE(p->rules.count("DG016"));  // its action follows mutation.cpu.mode
  EXPECT_EQ(p->alignment_exempt_classes, builtin.alignment_exempt_classes);
  EXPECT_EQ(p->memory_minimum, builtin.memory_minimum);
  EXPECT_EQ(p->extended_resource_mapping, ExtendedResourceMapping::kDeny);
  EXPECT_TRUE(p->IsLegacyResource("nvidia.com/gpumem"));
  EXPECT_TRUE(p->IsLegacyResource("nvidia.com/gpu-10gb"));
  EXPECT_EQ(p->trusted_schedulers, builtin.trusted_schedulers);
  EXPECT_EQ(p->trusted_schedulers, std::vector<std::string>{"system:kube-scheduler"});
}

TEST(Policy, ImplicitNamesOfGpuClassesAreLegacyGpuRequests) {
  Policy p;
  EXPECT_EQ(p.ImplicitGpuClass("deviceclass.resource.kubernetes.io/gpu.nvidia.com"), "gpu.nvidia.com");
  EXPECT_EQ(p.ImplicitGpuClass("deviceclass.resource.kubernetes.io/mig.nvidia.com"), "mig.nvidia.com");
  EXPECT_EQ(p.ImplicitGpuClass("deviceclass.resource.kubernetes.io/vfio.gpu.nvidia.com"), "vfio.gpu.nvidia.com");
  EXPECT_EQ(p.ImplicitGpuClass("deviceclass.resource.kubernetes.io/dra.cpu"), "");
  EXPECT_EQ(p.ImplicitGpuClass("deviceclass.resource.kubernetes.io/"), "");
  EXPECT_EQ(p.ImplicitGpuClass("gpu.nvidia.com"), "");
  EXPECT_TRUE(p.IsLegacyGpuRequest("deviceclass.resource.kubernetes.io/gpu.nvidia.com"));
  EXPECT_TRUE(p.IsLegacyGpuRequest("nvidia.com/gpu"));
  EXPECT_FALSE(p.IsLegacyGpuRequest("deviceclass.resource.kubernetes.io/dra.cpu"));
  EXPECT_FALSE(p.IsLegacyResource("deviceclass.resource.kubernetes.io/gpu.nvidia.com"));
  p.device_classes.gpu = {"h100.example.com"};
  EXPECT_TRUE(p.IsLegacyGpuRequest("deviceclass.resource.kubernetes.io/h100.example.com"));
  EXPECT_FALSE(p.IsLegacyGpuRequest("deviceclass.resource.kubernetes.io/gpu.nvidia.com"));
}

TEST(ParsePolicy, TrustedSchedulers) {
  auto p = ParsePolicy("apiVersion: draguard.io/v1alpha1\nkind: Policy\n"
                       "trustedSchedulers: [system:kube-scheduler, \"system:serviceaccount:kube-system:my-scheduler\"]\n");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->trusted_schedulers,
            (std::vector<std::string>{"system:kube-scheduler", "system:serviceaccount:kube-system:my-scheduler"}));
  auto none = ParsePolicy("apiVersion: draguard.io/v1alpha1\nkind: Policy\ntrustedSchedulers: []\n");
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->trusted_schedulers.empty());
  auto glob = ParsePolicy("apiVersion: draguard.io/v1alpha1\nkind: Policy\ntrustedSchedulers: [\"system:*\"]\n",
                          "policy.yaml");
  ASSERT_FALSE(glob.ok());
  EXPECT_NE(glob.status().message().find("policy.yaml:3:"), std::string::npos) << glob.status().ToString();
  EXPECT_NE(glob.status().message().find("trustedSchedulers[0]: must be an exact username"), std::string::npos)
      << glob.status().ToString();
}

TEST(Policy, NewKeysParse) {
  auto p = ParsePolicy(R"(apiVersion: draguard.io/v1alpha1
kind: Policy
extendedResourceMapping: allow
deviceClasses: {gpu: [gpu.nvidia.com, fast], mig: [], passthrough: [], cpu: [cpus.example.com]}
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
  EXPECT_TRUE(p->device_classes.IsCpuClass("cpus.example.com"));
  EXPECT_FALSE(p->device_classes.IsCpuClass("dra.cpu"));
  EXPECT_FALSE(p->device_classes.IsGpuClass("cpus.example.com"));
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

// mutation.cpu: modes, the class joins deviceClasses.cpu, DG016 denies unless the policy says
// otherwise, and a mode needs the numaNode alignment.
TEST(ParsePolicy, MutationCpu) {
  const std::string head = "apiVersion: draguard.io/v1alpha1\nkind: Policy\n";
  auto p = ParsePolicy(head + "mutation: {numaAlignment: numaNode, cpu: {mode: grouped, deviceClass: cpus.example}}\n");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->mutation.cpu.mode, CpuMode::kGrouped);
  EXPECT_TRUE(p->device_classes.IsCpuClass("cpus.example"));
  EXPECT_TRUE(p->device_classes.IsCpuClass("dra.cpu"));
  EXPECT_EQ(p->ActionFor("DG016", Action::kWarn), Action::kDeny);
  auto warn = ParsePolicy(head + "rules: {DG016: {action: warn}}\n"
                                 "mutation: {numaAlignment: numaNode, cpu: {mode: individual}}\n");
  ASSERT_TRUE(warn.ok()) << warn.status().ToString();
  EXPECT_EQ(warn->mutation.cpu.mode, CpuMode::kIndividual);
  EXPECT_EQ(warn->ActionFor("DG016", Action::kWarn), Action::kWarn);
  auto none = ParsePolicy(head + "mutation: {cpu: {mode: none}}\n");
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none->ActionFor("DG016", Action::kWarn), Action::kWarn);
  auto roots = ParsePolicy(head + "mutation: {cpu: {mode: grouped}}\n", "p.yaml");
  ASSERT_FALSE(roots.ok());
  EXPECT_NE(roots.status().message().find("needs mutation.numaAlignment: numaNode"), std::string::npos)
      << roots.status().message();
  auto bad = ParsePolicy(head + "mutation: {numaAlignment: numaNode, cpu: {mode: pinned}}\n", "p.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("mutation.cpu.mode"), std::string::npos) << bad.status().message();
  auto key = ParsePolicy(head + "mutation: {cpu: {mod: grouped}}\n", "p.yaml");
  ASSERT_FALSE(key.ok());
  EXPECT_NE(key.status().message().find("mutation.cpu.mod: unknown key"), std::string::npos) << key.status().message();
}

// mutation.nic.numaAttribute: the NUMA attribute the NIC driver's release publishes.
TEST(ParsePolicy, MutationNicNumaAttribute) {
  const std::string head = "apiVersion: draguard.io/v1alpha1\nkind: Policy\n";
  auto standard = ParsePolicy(head + "mutation: {nic: {numaAttribute: standard}}\n");
  ASSERT_TRUE(standard.ok()) << standard.status().ToString();
  EXPECT_EQ(standard->mutation.nic.numa_attribute, NicNumaAttribute::kStandard);
  EXPECT_EQ(standard->mutation.nic.driver, "dra.net");  // the other nic keys keep their defaults
  auto driver = ParsePolicy(head + "mutation: {nic: {driver: net.example, numaAttribute: driver}}\n");
  ASSERT_TRUE(driver.ok()) << driver.status().ToString();
  EXPECT_EQ(driver->mutation.nic.numa_attribute, NicNumaAttribute::kDriver);
  auto bad = ParsePolicy(head + "mutation:\n  nic: {numaAttribute: v1.5.0}\n", "p.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("mutation.nic.numaAttribute"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("p.yaml:4:"), std::string::npos) << bad.status().message();
}

// mutation.kueue: a boolean, off by default.
TEST(ParsePolicy, MutationKueue) {
  const std::string head = "apiVersion: draguard.io/v1alpha1\nkind: Policy\n";
  auto def = ParsePolicy(head);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_FALSE(def->mutation.kueue);
  auto on = ParsePolicy(head + "mutation: {kueue: true, numaAlignment: numaNode}\n");
  ASSERT_TRUE(on.ok()) << on.status().ToString();
  EXPECT_TRUE(on->mutation.kueue);
  auto bad = ParsePolicy(head + "mutation: {kueue: sometimes}\n", "p.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("p.yaml:3:"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("mutation.kueue"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace draguard::policy
