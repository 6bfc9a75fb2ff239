// The CEL budget of one admission review: a total of cost units shared by every selector the
// review evaluates, and the review's deadline.
//
// The evaluator charges its cost to the budget as it goes (every kBudgetCheckUnits units it adds
// what it spent and reads the clock), so a review full of expensive selectors stops within a few
// thousand units of the limit or of the deadline instead of running each selector to its own
// per-expression limit. Not thread-safe: one budget belongs to one review on one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace draguard::cel {

/// Default total cost of one review: ten selectors at Kubernetes' per-selector maximum.
inline constexpr int64_t kDefaultReviewCostLimit = 10000000;
/// Units the evaluator may spend between two looks at the budget (total and clock).
inline constexpr int64_t kBudgetCheckUnits = 1000;

/// Why a budget is exhausted.
enum class BudgetStop : uint8_t { kNone, kCost, kDeadline };

/// Cost units and time left for one review.
class Budget {
 public:
  /// `cost_limit` units in total (<= 0: unlimited) until `deadline`.
  explicit Budget(int64_t cost_limit = kDefaultReviewCostLimit,
                  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max())
      : limit_(cost_limit), deadline_(deadline) {}

  /// Adds `units` and checks the total and the deadline; false once exhausted (and from then on).
  bool Spend(int64_t units);
  /// Whether the budget is exhausted (by cost or by the deadline).
  bool exhausted() const { return stop_ != BudgetStop::kNone; }
  /// Why it is exhausted.
  BudgetStop stop() const { return stop_; }
  /// Units spent so far.
  int64_t spent() const { return spent_; }
  /// The limit in units (<= 0: unlimited).
  int64_t limit() const { return limit_; }
  /// The error message of an exhausted budget ("" while not exhausted), e.g. "CEL cost budget of
  /// the review exhausted (10000000 units)".
  std::string Reason() const;

 private:
  int64_t limit_;
  std::chrono::steady_clock::time_point deadline_;
  int64_t spent_ = 0;
  BudgetStop stop_ = BudgetStop::kNone;
};

}  // namespace draguard::cel
