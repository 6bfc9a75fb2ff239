// The CEL budget of one review. See include/draguard/cel/budget.h.
#include "draguard/cel/budget.h"

namespace draguard::cel {

bool Budget::Spend(int64_t units) {
  if (stop_ != BudgetStop::kNone) return false;
  if (units > 0) spent_ = units > INT64_MAX - spent_ ? INT64_MAX : spent_ + units;
  if (limit_ > 0 && spent_ > limit_) {
    stop_ = BudgetStop::kCost;
  } else if (deadline_ != std::chrono::steady_clock::time_point::max() &&
             std::chrono::steady_clock::now() >= deadline_) {
    stop_ = BudgetStop::kDeadline;
  }
  return stop_ == BudgetStop::kNone;
}

std::string Budget::Reason() const {
  switch (stop_) {
    case BudgetStop::kNone: return "";
    case BudgetStop::kCost:
      return "CEL cost budget of the review exhausted (" + std::to_string(limit_) + " units)";
    case BudgetStop::kDeadline:
      return "review deadline reached during CEL evaluation (" + std::to_string(spent_) + " units spent)";
  }
  return "";
}

}  // namespace draguard::cel
