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
        ErrorCase{"yaml_syntax", "apiVersion: draguard.io/v1alpha1\nkind: [Policy\n", "policy.yaml:3:1: invalid YAML"}),
    [](const ::testing::TestParamInfo<ErrorCase>& i) { return std::string(i.param.name); });

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
