// Engine and decision: actions, global audit mode, rule errors and exemptions.
#include <stdexcept>

#include <gtest/gtest.h>

#include "draguard/engine/engine.h"

namespace draguard::engine {
namespace {

// A configurable fake rule.
class FakeRule final : public Rule {
 public:
  FakeRule(std::string id, RuleResult result, bool throws = false)
      : id_(std::move(id)), result_(std::move(result)), throws_(throws) {}
  std::string_view id() const override { return id_; }
  std::string_view name() const override { return "fake-rule"; }
  policy::Action default_action() const override { return policy::Action::kDeny; }
  RuleResult Evaluate(const RuleInput&) const override {
    if (throws_) throw std::runtime_error("boom");
    return result_;
  }

 private:
  std::string id_;
  RuleResult result_;
  bool throws_;
};

RuleResult Failing(const std::string& msg) { return Fail({{"/spec", msg, "fix it"}}); }

admission::AdmissionRequest Req(const std::string& ns = "team-a") {
  admission::AdmissionRequest r;
  r.uid = "u";
  r.namespace_ = ns;
  r.kind = {"", "v1", "Pod"};
  r.user_info.username = "alice";
  r.user_info.groups = {"devs"};
  return r;
}

Decision RunEngine(Registry& reg, const policy::Policy& pol, const admission::AdmissionRequest& req = Req()) {
  RuleInput in{req, pol};
  return Decide(Evaluate(in, reg), pol);
}

TEST(Decide, OneDenyOneWarnOneAudit) {
  Registry reg;
  reg.Add(std::make_unique<FakeRule>("DG001", Failing("a is bad")));
  reg.Add(std::make_unique<FakeRule>("DG002", Failing("b is iffy")));
  reg.Add(std::make_unique<FakeRule>("DG003", Failing("c is odd")));
  reg.Add(std::make_unique<FakeRule>("DG004", Pass()));
  policy::Policy pol;
  pol.rules["DG002"].action = policy::Action::kWarn;
  pol.rules["DG003"].action = policy::Action::kAudit;
  auto d = RunEngine(reg, pol);
  EXPECT_EQ(d.verdict, Verdict::kDeny);
  EXPECT_FALSE(d.response.allowed);
  EXPECT_EQ(d.denied_rules, std::vector<std::string>{"DG001"});
  EXPECT_EQ(d.warned_rules, std::vector<std::string>{"DG002"});
  EXPECT_EQ(d.audited_rules, std::vector<std::string>{"DG003"});
  EXPECT_EQ(d.response.status->message.rfind("DG001 fake-rule: a is bad", 0), 0u);
  EXPECT_EQ(d.response.warnings, std::vector<std::string>{"DG002: b is iffy"});
  EXPECT_EQ(d.response.audit_annotations.at("dg003-fake-rule"), "audit: c is odd");
}

TEST(Decide, DenyMessageListsEveryDenyingRuleInRegistryOrder) {
  Registry reg;
  reg.Add(std::make_unique<FakeRule>("DG001", Failing("first")));
  reg.Add(std::make_unique<FakeRule>("DG005", Failing("second")));
  auto d = RunEngine(reg, {});
  EXPECT_EQ(d.denied_rules, (std::vector<std::string>{"DG001", "DG005"}));
  const auto& m = d.response.status->message;
  EXPECT_LT(m.find("DG001"), m.find("DG005"));
}

TEST(Decide, AuditModeNeverDenies) {
  Registry reg;
  reg.Add(std::make_unique<FakeRule>("DG001", Failing("bad")));
  policy::Policy pol;
  pol.mode = policy::Mode::kAudit;
  auto d = RunEngine(reg, pol);
  EXPECT_TRUE(d.response.allowed);
  EXPECT_EQ(d.verdict, Verdict::kAudit);
  EXPECT_EQ(d.response.audit_annotations.at("mode"), "audit");
  EXPECT_EQ(d.response.audit_annotations.at("dg001-fake-rule"), "audit: bad");
}

TEST(Decide, TheGlobalModeIsAppliedByTheDecisionOnly) {
  Registry reg;
  reg.Add(std::make_unique<FakeRule>("DG001", Failing("bad")));
  policy::Policy pol;
  pol.mode = policy::Mode::kAudit;
  RuleInput in{Req(), pol};
  auto r = Evaluate(in, reg);
  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_EQ(r.outcomes[0].action, policy::Action::kDeny);  // as configured
  EXPECT_EQ(ModeAction(policy::Action::kDeny, pol), policy::Action::kAudit);
  EXPECT_EQ(ModeAction(policy::Action::kWarn, pol), policy::Action::kWarn);
  EXPECT_EQ(ModeAction(policy::Action::kDeny, policy::Policy{}), policy::Action::kDeny);
}

TEST(Decide, VerdictsHaveOneSpelling) {
  const std::pair<Verdict, std::string> names[] = {
      {Verdict::kAllow, "allow"}, {Verdict::kDeny, "deny"},     {Verdict::kWarn, "warn"},   {Verdict::kAudit, "audit"},
      {Verdict::kExempt, "exempt"}, {Verdict::kMutate, "mutate"}, {Verdict::kError, "error"},
  };
  for (const auto& [v, name] : names) EXPECT_EQ(VerdictName(v), name);
  Registry reg;
  reg.Add(std::make_unique<FakeRule>("DG001", Failing("bad")));
  EXPECT_EQ(RunEngine(reg, {}).response.audit_annotations.at("decision"), "deny");
}

TEST(Decide, OffRulesDoNotRun) {
  Registry reg;
  reg.Add(std::make_unique<FakeRule>("DG001", Failing("bad"), /*throws=*/true));
  policy::Policy pol;
  pol.rules["DG001"].action = policy::Action::kOff;
  RuleInput in{Req(), pol};
  EXPECT_TRUE(Evaluate(in, reg).outcomes.empty());
}

TEST(Decide, RuleErrorsAllowWithWarningByDefault) {
  Registry reg;
  reg.Add(std::make_unique<FakeRule>("DG001", Error("no topology")));
  auto d = RunEngine(reg, {});
  EXPECT_TRUE(d.response.allowed);
  EXPECT_EQ(d.error_rules, std::vector<std::string>{"DG001"});
  ASSERT_EQ(d.response.warnings.size(), 1u);
  EXPECT_EQ(d.response.warnings[0], "DG001 could not be evaluated: no topology");
}

TEST(Decide, RuleErrorsDenyWhenConfigured) {
  Registry reg;
  reg.Add(std::make_unique<FakeRule>("DG001", Error("no topology")));
  policy::Policy pol;
  pol.rule_errors = policy::RuleErrorPolicy::kDeny;
  auto d = RunEngine(reg, pol);
  EXPECT_FALSE(d.response.allowed);
  EXPECT_NE(d.response.status->message.find("could not be evaluated"), std::string::npos);
}

TEST(Evaluate, AThrowingRuleBecomesAnError) {
  Registry reg;
  reg.Add(std::make_unique<FakeRule>("DG001", Pass(), /*throws=*/true));
  RuleInput in{Req(), policy::Policy{}};
  auto r = Evaluate(in, reg);
  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_EQ(r.outcomes[0].result.status, RuleStatus::kError);
  EXPECT_NE(r.outcomes[0].result.error.find("boom"), std::string::npos);
}

TEST(Evaluate, ExemptionsByNamespaceGlobUserAndGroup) {
  Registry reg;
  reg.Add(std::make_unique<FakeRule>("DG001", Failing("bad")));
  policy::Policy pol;
  pol.exemptions.namespaces = {"kube-*"};
  auto d = RunEngine(reg, pol, Req("kube-system"));
  EXPECT_EQ(d.verdict, Verdict::kExempt);
  EXPECT_EQ(d.response.audit_annotations.at("exempt"), "namespace kube-system");
  pol.exemptions.namespaces.clear();
  pol.exemptions.users = {"ali*"};
  EXPECT_EQ(RunEngine(reg, pol).response.audit_annotations.at("exempt"), "user alice");
  pol.exemptions.users.clear();
  pol.exemptions.groups = {"devs"};
  EXPECT_EQ(RunEngine(reg, pol).response.audit_annotations.at("exempt"), "group devs");
  pol.exemptions.groups.clear();
  EXPECT_EQ(RunEngine(reg, pol).verdict, Verdict::kDeny);
}

}  // namespace
}  // namespace draguard::engine
