// The /mutate decision (engine::DecideMutation): every outcome of the facts the webhook gathers,
// under enforce and audit mode and under the mutation rule's action.
#include <gtest/gtest.h>

#include "draguard/engine/engine.h"

namespace draguard::engine {
namespace {

using Outcome = MutationFacts::Outcome;

const Registry& Rules() {
  static const Registry registry = DefaultRegistry();
  return registry;
}

MutationFacts Converted() {
  MutationFacts f;
  f.outcome = Outcome::kConverted;
  f.summary = "converted 1 container to DRA (draguard-abc)";
  f.warnings = {"memory floor lowered"};
  f.patch = R"([{"op":"add","path":"/spec/resourceClaims","value":[]}])";
  return f;
}

MutationFacts Failed(Outcome outcome) {
  MutationFacts f;
  f.outcome = outcome;
  f.reason = "connection refused";
  f.template_name = "ml/draguard-abc";
  f.template_description = "2x full GPU";
  return f;
}

policy::Policy Audit() {
  policy::Policy p;
  p.mode = policy::Mode::kAudit;
  return p;
}

TEST(DecideMutation, UnchangedIsAllowedWithNothingAdded) {
  Decision d = DecideMutation({}, Rules(), {});
  EXPECT_EQ(d.verdict, Verdict::kAllow);
  EXPECT_TRUE(d.response.allowed);
  EXPECT_TRUE(d.response.patch.empty());
  EXPECT_TRUE(d.response.warnings.empty());
  EXPECT_TRUE(d.response.audit_annotations.empty());
}

TEST(DecideMutation, ExemptIsAllowedAndSaysWhy) {
  MutationFacts f;
  f.outcome = Outcome::kExempt;
  f.reason = "namespace legacy-ns";
  for (const auto& pol : {policy::Policy{}, Audit()}) {
    Decision d = DecideMutation(f, Rules(), pol);
    EXPECT_EQ(d.verdict, Verdict::kExempt);
    EXPECT_TRUE(d.response.allowed);
    EXPECT_EQ(d.response.audit_annotations.at("mutation"), "not converted: exempt (namespace legacy-ns)");
    EXPECT_TRUE(d.response.patch.empty());
  }
}

TEST(DecideMutation, ConvertedIsPatchedWhenEnforcing) {
  Decision d = DecideMutation(Converted(), Rules(), {});
  EXPECT_EQ(d.verdict, Verdict::kMutate);
  EXPECT_TRUE(d.response.allowed);
  EXPECT_EQ(d.response.patch, Converted().patch);
  EXPECT_EQ(d.response.warnings, std::vector<std::string>{"draguard: memory floor lowered"});
  EXPECT_EQ(d.response.audit_annotations.at("mutation"), Converted().summary);
  EXPECT_TRUE(d.denied_rules.empty() && d.warned_rules.empty() && d.audited_rules.empty());
  // The conversion does not depend on DG001's action, only on the global mode.
  policy::Policy relaxed;
  relaxed.rules["DG001"].action = policy::Action::kWarn;
  EXPECT_EQ(DecideMutation(Converted(), Rules(), relaxed).verdict, Verdict::kMutate);
}

TEST(DecideMutation, ConvertedInAuditModeSaysWhatItWouldHaveDone) {
  Decision d = DecideMutation(Converted(), Rules(), Audit());
  EXPECT_EQ(d.verdict, Verdict::kAudit);
  EXPECT_TRUE(d.response.allowed);
  EXPECT_TRUE(d.response.patch.empty());
  EXPECT_EQ(d.response.warnings, std::vector<std::string>{"audit mode: draguard would have " + Converted().summary});
  EXPECT_EQ(d.response.audit_annotations.at("mutation"), "would have " + Converted().summary);
  EXPECT_EQ(d.audited_rules, std::vector<std::string>{"DG001"});
}

TEST(DecideMutation, EveryFailureDeniesUnderDG001WhenEnforcing) {
  const std::pair<Outcome, std::string> cases[] = {
      {Outcome::kRefused, "the Pod's legacy GPU requests cannot be converted to DRA: connection refused"},
      {Outcome::kTemplateMissing,
       "mutation.templates is reference and the catalogue has no template for 2x full GPU (ml/draguard-abc). Fix: "
       "add the profile to mutation.catalogue and apply `draguard render`"},
      {Outcome::kProvisioningFailed, "could not ensure ResourceClaimTemplate ml/draguard-abc: connection refused"},
  };
  for (const auto& [outcome, message] : cases) {
    Decision d = DecideMutation(Failed(outcome), Rules(), {});
    EXPECT_EQ(d.verdict, Verdict::kDeny) << message;
    EXPECT_FALSE(d.response.allowed);
    ASSERT_TRUE(d.response.status.has_value());
    EXPECT_EQ(d.response.status->code, 403);
    EXPECT_EQ(d.response.status->message, "DG001 legacy-gpu-resource: " + message);
    EXPECT_EQ(d.denied_rules, std::vector<std::string>{"DG001"});
    EXPECT_TRUE(d.response.patch.empty());
  }
}

TEST(DecideMutation, AFailureWarnsInAuditModeOrWhenDG001DoesNotDeny) {
  policy::Policy warn, off;
  warn.rules["DG001"].action = policy::Action::kWarn;
  off.rules["DG001"].action = policy::Action::kOff;
  for (const auto& pol : {Audit(), warn, off}) {
    Decision d = DecideMutation(Failed(Outcome::kProvisioningFailed), Rules(), pol);
    EXPECT_EQ(d.verdict, Verdict::kWarn);
    EXPECT_TRUE(d.response.allowed);
    const std::string text = "DG001 legacy-gpu-resource: could not ensure ResourceClaimTemplate ml/draguard-abc: "
                             "connection refused";
    EXPECT_EQ(d.response.warnings, std::vector<std::string>{text});
    EXPECT_EQ(d.response.audit_annotations.at("mutation"), text);
    EXPECT_EQ(d.warned_rules, std::vector<std::string>{"DG001"});
  }
}

// A DG001 with another name and default action: both come from the registry's rule.
class CustomLegacyRule final : public Rule {
 public:
  std::string_view id() const override { return "DG001"; }
  std::string_view name() const override { return "custom-name"; }
  policy::Action default_action() const override { return policy::Action::kWarn; }
  RuleResult Evaluate(const RuleInput&) const override { return Pass(); }
};

TEST(DecideMutation, TheRuleComesFromTheRegistry) {
  Registry custom;
  custom.Add(std::make_unique<CustomLegacyRule>());
  Decision d = DecideMutation(Failed(Outcome::kRefused), custom, {});
  EXPECT_EQ(d.verdict, Verdict::kWarn);
  ASSERT_EQ(d.response.warnings.size(), 1u);
  EXPECT_EQ(d.response.warnings[0].rfind("DG001 custom-name: ", 0), 0u) << d.response.warnings[0];
  policy::Policy deny;
  deny.rules["DG001"].action = policy::Action::kDeny;
  EXPECT_EQ(DecideMutation(Failed(Outcome::kRefused), custom, deny).verdict, Verdict::kDeny);
  // Without the rule nothing is judged: admitted unchanged.
  Registry empty;
  Decision none = DecideMutation(Failed(Outcome::kRefused), empty, {});
  EXPECT_EQ(none.verdict, Verdict::kAllow);
  EXPECT_TRUE(none.response.allowed);
  EXPECT_TRUE(none.response.warnings.empty());
  EXPECT_EQ(MutationRule(empty), nullptr);
  ASSERT_NE(MutationRule(Rules()), nullptr);
  EXPECT_EQ(MutationRule(Rules())->name(), "legacy-gpu-resource");
}

}  // namespace
}  // namespace draguard::engine
