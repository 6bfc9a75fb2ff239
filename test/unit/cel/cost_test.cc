// The compile-time cost estimate (cost.h) and the review budget (budget.h).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>

#include "draguard/cel/budget.h"
#include "draguard/cel/checker.h"
#include "draguard/cel/cost.h"
#include "draguard/cel/device.h"
#include "draguard/cel/evaluator.h"

namespace draguard::cel {
namespace {

uint64_t MaxCost(const std::string& expr, bool multi = false) {
  auto c = CompileSelector(expr, DraEnvOptions{multi});
  EXPECT_TRUE(c.ok()) << expr << ": " << c.status().message();
  if (!c.ok()) return 0;
  return EstimateCost(*c).max;
}

// Expected values of Kubernetes' TestCEL (staging/src/k8s.io/dynamic-resource-allocation/cel/
// compile_test.go, field expectCost: the estimated maximum cost the API server computes with
// cel-go's checker.Cost and the DRA size estimator). Only scenarios that run without the
// list-type-attributes gate (which our environment does not declare) are used.
TEST(CelCost, MatchesKubernetesCompileTest) {
  struct Case {
    const char* expr;
    uint64_t cost;
  } cases[] = {
      {"true", 0},
      {R"(device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0")))", 6},
      {R"(device.attributes["no-such-domain"]["noSuchAttr"].isGreaterThan(quantity("0")))", 6},
      {R"("no-such-domain" in device.attributes)", 3},
      {R"(device.driver == "")", 2},
      {R"(device.driver == "dra.example.com")", 4},
      {R"(device.attributes["dra.example.com"].name)", 4},
      {R"(device.attributes["dra.example.com"]["name"])", 4},
      {R"(cel.bind(dra, device.attributes["dra.example.com"], dra.name))", 15},
      {R"(device.attributes["dra.example.com"].name > 0)", 5},
      {R"(device.attributes["dra.example.com"].name == "fish")", 5},
      {R"(device.attributes["dra.example.com"].name.isGreaterThan(semver("0.0.1")))", 6},
      {R"(device.attributes["dra.example.com"].name.isGreaterThan(semver("v0.0.1", true)) && isSemver("v1.0.0", true))",
       7},
      {R"(device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki")))", 6},
      {R"("name" in device.capacity["dra.example.com"] && device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki")))",
       10},
      {R"(!("name" in device.capacity["dra.example.com"]) || device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki")))",
       11},
      {R"(device.capacity["dra.example.com"].quantity.isGreaterThan(quantity("1Ki")) &&
device.attributes["dra.example.com"].bool &&
device.attributes["dra.example.com"].int > 0 &&
device.attributes["dra.example.com"].string == "fish" &&
device.attributes["dra.example.com"].version.isGreaterThan(semver("0.0.1")) &&
device.capacity["dra.example.com"]["quantity"].isGreaterThan(quantity("1Ki")) &&
device.attributes["dra.example.com"]["bool"] &&
device.attributes["dra.example.com"]["int"] > 0 &&
device.attributes["dra.example.com"]["string"] == "fish" &&
device.attributes["dra.example.com"]["version"].isGreaterThan(semver("0.0.1")))",
       52},
      {R"(device.attributes["dra.example.com"].a && device.attributes["dra.example.com"].b && device.attributes["dra.example.com"].c)",
       12},
      {R"(device.attributes.exists_one(x, x == "dra.example.com"))", 164},
      {R"(device.attributes["dra.example.com"].exists_one(x, x == "services"))", 133},
      {R"(device.attributes["dra.example.com"].services.split("example").size() >= 2)", 19},
      {R"(device.attributes["dra.example.com"].services.matches("[^a]?sym"))", 18},
      {R"(device.capacity.exists_one(x, x == "dra.example.com"))", 164},
      {R"(device.capacity["dra.example.com"].exists_one(x, x == "memory"))", 133},
      // "expensive": seven nested all() over ten-element lists, over the limit.
      {"[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(y, "
       "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z2, "
       "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z3, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z4, "
       "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z5, int('1'.find('[0-9]*')) < 100)))))))",
       85555551},
  };
  for (const auto& c : cases) EXPECT_EQ(MaxCost(c.expr), c.cost) << c.expr;
  // "allow_multiple_allocations" (DRAConsumableCapacity).
  EXPECT_EQ(MaxCost("device.allowMultipleAllocations == true", true), 3u);
}

// Derived by hand from cel-go checker/cost.go and Kubernetes library/cost.go.
TEST(CelCost, FollowsCelGoRules) {
  // Literals cost nothing, a list literal 10, a map literal 30 (common.ListCreateBaseCost, MapCreateBaseCost).
  EXPECT_EQ(MaxCost("[1, 2] == [1, 2]"), 10u + 10u + 1u);
  EXPECT_EQ(MaxCost("{'a': 1} == {'a': 1}"), 30u + 30u + 1u);
  // `x in list` is linear in the list (InList): 3 elements, plus the list literal.
  EXPECT_EQ(MaxCost("device.driver in ['a', 'b', 'c']"), 2u + 10u + 3u);
  // startsWith: a tenth of the argument's length, rounded up.
  EXPECT_EQ(MaxCost("device.driver.startsWith('gpu.nvidia.com')"), 2u + 2u);
  // contains: ceil(63 * 0.1) * ceil(3 * 0.1) for the 63-character driver name.
  EXPECT_EQ(MaxCost("device.driver.contains('gpu')"), 2u + 7u * 1u);
  // lowerAscii (Kubernetes): a traversal of the 64-character attribute bound; == then 0.4 -> 1.
  EXPECT_EQ(MaxCost("device.attributes['d'].s.lowerAscii() == 'abcd'"), 4u + 7u + 1u);
  // sets.contains (cel-go ext.Sets): the product of the sizes, plus one.
  EXPECT_EQ(MaxCost("sets.contains([1, 2], [1])"), 10u + 10u + 2u + 1u);
  // size() and the Kubernetes quantity functions are O(1).
  EXPECT_EQ(MaxCost("size(device.attributes['d']) > 2"), 3u + 1u + 1u);
  // has() costs its operand only (the API server's base environment: PresenceTestHasCost(false)).
  EXPECT_EQ(MaxCost("has(device.attributes.d)"), 2u);
  // Equality of Kubernetes types is priced at one (library.CostEstimator), not by size.
  EXPECT_EQ(MaxCost("device.capacity['d'].memory == quantity('80Gi')"), 4u + 1u + 1u);
  // A map over the 32 names of a domain, then a size check.
  EXPECT_EQ(MaxCost("device.attributes['d'].map(k, k).size() > 0"),
            // range 3, accu [] 10, result 1, 32 x (step @result + [k] = 1 + 1 + 10 + 1), size 1, > 1
            3u + 10u + 1u + 32u * 13u + 1u + 1u);
}

TEST(CelCost, UnboundedRangesAreRejected) {
  // lists.range has no size estimate (cel-go ext.Lists declares none): a macro over it is
  // unbounded, the nested bomb of the hostile-load report included.
  const char* bombs[] = {
      "lists.range(5000).map(x, x).size() > 0",
      "lists.range(5000).map(x, lists.range(5000).map(y, x * y)).size() > 0",
      "lists.range(3).all(i, i >= 0)",
  };
  for (const char* b : bombs) {
    auto c = CompileSelector(b);
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_EQ(EstimateCost(*c).max, std::numeric_limits<uint64_t>::max()) << b;
    Status s = CheckCost(*c);
    ASSERT_FALSE(s.ok()) << b;
    // Kubernetes' wording (pkg/apis/resource/validation validateCELSelector: field.Forbidden).
    EXPECT_EQ(s.message(), "too complex, exceeds cost limit (estimated cost unbounded, limit 1000000)");
  }
  // Without iterating it, lists.range is one call.
  EXPECT_EQ(MaxCost("size(lists.range(5000)) > 0"), 3u);
}

TEST(CelCost, LimitBoundary) {
  auto c = CompileSelector("device.driver == 'dra.example.com'");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(CheckCost(*c, 4).ok());
  Status s = CheckCost(*c, 3);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "too complex, exceeds cost limit (estimated cost 4, limit 3)");
}

Value BombDevice() {
  auto d = ParseDeviceJson(R"({"driver": "gpu.nvidia.com"})");
  EXPECT_TRUE(d.ok());
  return DeviceToValue(*d);
}

// The selector of the CEL-bomb claim: tens of millions of units each if left alone.
constexpr const char* kBomb = "lists.range(5000).map(x, lists.range(5000).map(y, x + y)).size() > 0";

TEST(CelBudget, StopsEvaluationAtTheReviewCostLimit) {
  auto c = CompileSelector(kBomb);
  ASSERT_TRUE(c.ok());
  Budget budget(100000);
  EvalOptions opts;
  opts.budget = &budget;
  Value dev = BombDevice();
  auto r = EvaluateSelectorValue(*c, dev, opts);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "CEL cost budget of the review exhausted (100000 units)");
  EXPECT_TRUE(budget.exhausted());
  EXPECT_EQ(budget.stop(), BudgetStop::kCost);
  // Stopped within one check interval (plus one list operation) of the limit, far below the
  // per-expression limit of 1,000,000.
  EXPECT_LE(budget.spent(), 100000 + kBudgetCheckUnits + 5000);
  // Every later evaluation stops at once, spending nothing.
  int64_t spent = budget.spent();
  auto again = EvaluateSelectorValue(*c, dev, opts);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(budget.spent(), spent);
  auto cheap = CompileSelector("device.driver == 'gpu.nvidia.com'");
  ASSERT_TRUE(cheap.ok());
  EXPECT_FALSE(EvaluateSelectorValue(*cheap, dev, opts).ok());
}

TEST(CelBudget, StopsAtThePassedDeadline) {
  auto c = CompileSelector(kBomb);
  ASSERT_TRUE(c.ok());
  // A deadline already passed: the first look at the clock stops the evaluation.
  Budget budget(0, std::chrono::steady_clock::now() - std::chrono::seconds(1));
  EvalOptions opts;
  opts.budget = &budget;
  auto r = EvaluateSelectorValue(*c, BombDevice(), opts);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(budget.stop(), BudgetStop::kDeadline);
  EXPECT_NE(r.status().message().find("review deadline reached during CEL evaluation"), std::string::npos);
  EXPECT_LE(budget.spent(), kBudgetCheckUnits + 5000);
}

TEST(CelBudget, SharedAcrossSelectorsAndNeverAbsorbed) {
  auto c = CompileSelector("device.driver == 'gpu.nvidia.com' || lists.range(100).map(x, x).size() > 0");
  ASSERT_TRUE(c.ok());
  Budget budget(2500);
  EvalOptions opts;
  opts.budget = &budget;
  Value dev = BombDevice();
  int ok = 0;
  for (int i = 0; i < 1000 && !budget.exhausted(); ++i) {
    if (EvaluateSelectorValue(*c, dev, opts).ok()) ++ok;
  }
  EXPECT_TRUE(budget.exhausted());
  EXPECT_GT(ok, 0);
  // The budget error is never absorbed: `error || true` is true for other errors, not for this one.
  auto absorbed = CompileSelector("lists.range(100000).map(x, x).size() > 0 || true");
  ASSERT_TRUE(absorbed.ok());
  Budget small(1500);
  opts.budget = &small;
  auto r = EvaluateSelectorValue(*absorbed, dev, opts);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(small.stop(), BudgetStop::kCost);
}

TEST(CelBudget, UnlimitedWithoutBudget) {
  auto c = CompileSelector("lists.range(100).map(x, x).size() == 100");
  ASSERT_TRUE(c.ok());
  Budget budget(0);  // no cost limit, no deadline
  EvalOptions opts;
  opts.budget = &budget;
  auto r = EvaluateSelectorValue(*c, BombDevice(), opts);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(*r);
  EXPECT_FALSE(budget.exhausted());
  EXPECT_GT(budget.spent(), 100);
}

}  // namespace
}  // namespace draguard::cel
