// One CEL budget per review: CEL-bomb ResourceClaims (32 requests x 32 selectors) through the
// Reviewer, as the API server sends them. A selector the API server would reject by its estimated
// cost is never evaluated; selectors that pass the estimate but are expensive together stop at the
// review's budget or deadline: deny in enforce mode, admit with a warning in audit mode.
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "draguard/engine/registry.h"
#include "draguard/topology/snapshot.h"
#include "draguard/webhook/reviewer.h"
#include "cel_bomb.h"

namespace draguard::webhook {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using std::chrono::steady_clock;

const engine::Registry& Rules() {
  static const engine::Registry registry = engine::DefaultRegistry();
  return registry;
}

// Two g4dn nodes (8 T4 each): DG014 evaluates every selector against their simulated GPUs.
const topology::Snapshot* Topology() {
  static const std::shared_ptr<const topology::Snapshot> kSnap = [] {
    fs::path dir = fs::path(::testing::TempDir()) / ("budget-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    for (const char* name : {"g4dn-a", "g4dn-b"}) {
      fs::copy_file(fs::path(DRAGUARD_TEST_DATA) / "hwloc" / "aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml",
                    dir / (std::string(name) + ".xml"), fs::copy_options::overwrite_existing);
    }
    auto snap = topology::LoadSnapshot(dir.string());
    fs::remove_all(dir);
    EXPECT_TRUE(snap.ok()) << snap.status().ToString();
    return snap.ok() ? *snap : nullptr;
  }();
  return kSnap.get();
}

using draguard::test_support::kLiteralBomb;
using draguard::test_support::kRangeBomb;

std::string BombReview(const std::string& selector) { return draguard::test_support::CelBombReview("u-bomb", selector); }

// Only the two rules that read selectors, so the decision is theirs alone.
policy::Policy SelectorRulesOnly(policy::Mode mode, int64_t cost_per_review = 1000000) {
  policy::Policy pol;
  pol.mode = mode;
  pol.cel_cost_per_review = cost_per_review;
  for (const auto& rule : Rules().rules()) {
    std::string id(rule->id());
    if (id != "DG011" && id != "DG014") pol.rules[id].action = policy::Action::kOff;
  }
  return pol;
}

struct Answer {
  ReviewOutcome out;
  Json response;
};

// The default deadline is far off, so that only the cost budget stops a review (a sanitizer build
// evaluates slowly enough to reach the server's 10 s deadline first).
Answer Validate(const std::string& body, const policy::Policy& pol,
                steady_clock::time_point deadline = steady_clock::now() + std::chrono::minutes(10)) {
  Answer a;
  Reviewer reviewer(Rules());
  a.out = reviewer.Review(body, admission::WebhookKind::kValidating, pol, Topology(), std::chrono::system_clock::now(),
                          deadline);
  EXPECT_EQ(a.out.http_status, 200) << a.out.body;
  a.response = Json::parse(a.out.body)["response"];
  EXPECT_EQ(a.response["uid"], "u-bomb");
  return a;
}

std::string ResultOf(const Answer& a, const std::string& rule) {
  for (const auto& m : a.out.rule_metrics) {
    if (m.rule == rule) return std::string(m.result);
  }
  return "";
}

std::string Warnings(const Json& response) {
  std::string all;
  for (const auto& w : response.value("warnings", Json::array())) all += w.get<std::string>() + "\n";
  return all;
}

TEST(ReviewerBudget, RangeBombIsRejectedByTheEstimateBeforeEvaluation) {
  Answer a = Validate(BombReview(kRangeBomb), SelectorRulesOnly(policy::Mode::kEnforce));
  EXPECT_FALSE(a.response["allowed"].get<bool>());
  EXPECT_EQ(a.out.verdict, engine::Verdict::kDeny);
  const std::string msg = a.response["status"]["message"].get<std::string>();
  EXPECT_EQ(msg.rfind("DG011 selector-validity: ", 0), 0u) << msg;
  EXPECT_NE(msg.find("spec.devices.requests[0].exactly.selectors[1].cel.expression: Forbidden: too complex, exceeds "
                     "cost limit"),
            std::string::npos)
      << msg;
  // Never evaluated: DG014 did not simulate the request, so the budget was not touched.
  EXPECT_EQ(ResultOf(a, "DG014"), "pass");
}

TEST(ReviewerBudget, RangeBombInAuditModeIsAdmitted) {
  Answer a = Validate(BombReview(kRangeBomb), SelectorRulesOnly(policy::Mode::kAudit));
  EXPECT_TRUE(a.response["allowed"].get<bool>());
  EXPECT_EQ(a.out.verdict, engine::Verdict::kAudit);
  EXPECT_NE(a.response["auditAnnotations"].dump().find("too complex, exceeds cost limit"), std::string::npos);
}

TEST(ReviewerBudget, ExpensiveSelectorsStopAtTheReviewBudgetAndDenyInEnforce) {
  Answer a = Validate(BombReview(kLiteralBomb), SelectorRulesOnly(policy::Mode::kEnforce));
  EXPECT_FALSE(a.response["allowed"].get<bool>());
  EXPECT_EQ(a.out.verdict, engine::Verdict::kDeny);
  EXPECT_EQ(a.response["status"]["message"].get<std::string>(),
            "DG014 unsatisfiable-claim: could not be evaluated: CEL cost budget of the review exhausted (1000000 "
            "units)");
  EXPECT_EQ(ResultOf(a, "DG011"), "pass");  // every selector is under the estimated limit
  EXPECT_EQ(ResultOf(a, "DG014"), "error");
}

TEST(ReviewerBudget, ExpensiveSelectorsInAuditModeAreAdmittedWithAWarning) {
  Answer a = Validate(BombReview(kLiteralBomb), SelectorRulesOnly(policy::Mode::kAudit));
  EXPECT_TRUE(a.response["allowed"].get<bool>());
  EXPECT_EQ(Warnings(a.response), "DG014 could not be evaluated: CEL cost budget of the review exhausted (1000000 units)\n");
}

TEST(ReviewerBudget, ExpensiveSelectorsStopAtTheDefaultBudget) {
  Answer a = Validate(BombReview(kLiteralBomb), SelectorRulesOnly(policy::Mode::kEnforce, policy::Policy{}.cel_cost_per_review));
  EXPECT_FALSE(a.response["allowed"].get<bool>());
  EXPECT_NE(a.response["status"]["message"].get<std::string>().find("CEL cost budget of the review exhausted (10000000 units)"),
            std::string::npos);
}

TEST(ReviewerBudget, StopsAtTheReviewDeadline) {
  // The deadline has already passed (the server derives it from ?timeout=): the first look at
  // the clock inside the evaluator stops the review.
  Answer a = Validate(BombReview(kLiteralBomb), SelectorRulesOnly(policy::Mode::kEnforce, 0),
                      steady_clock::now() - std::chrono::seconds(1));
  EXPECT_FALSE(a.response["allowed"].get<bool>());
  EXPECT_NE(a.response["status"]["message"].get<std::string>().find("review deadline reached during CEL evaluation"),
            std::string::npos)
      << a.response.dump();
}

TEST(ReviewerBudget, CheapClaimIsJudgedInFull) {
  // 1024 cheap selectors fit the budget: DG014 reaches its verdict (32 GPUs do not fit an
  // 8-GPU node).
  Answer a = Validate(BombReview("device.attributes['gpu.nvidia.com'].productName.startsWith('Tesla')"),
                      SelectorRulesOnly(policy::Mode::kEnforce));
  EXPECT_EQ(ResultOf(a, "DG014"), "fail") << a.out.body;
  const std::string msg = a.response["status"]["message"].get<std::string>();
  EXPECT_EQ(msg.rfind("DG014 unsatisfiable-claim: ", 0), 0u) << msg;
  EXPECT_EQ(msg.find("budget"), std::string::npos) << msg;
}

}  // namespace
}  // namespace draguard::webhook
