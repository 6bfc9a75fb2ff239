// The explicit list of rules. No static self-registration: DefaultRegistry() names every rule.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "draguard/engine/rule.h"

namespace draguard::engine {

/// An ordered set of rules; order is the order of importance in deny messages.
class Registry {
 public:
  /// Adds a rule. A null rule or a duplicate ID is a programming error: throws std::invalid_argument.
  void Add(std::unique_ptr<Rule> rule);
  /// All rules in registration order.
  const std::vector<std::unique_ptr<Rule>>& rules() const { return rules_; }
  /// The rule with `id`, or null.
  const Rule* Find(std::string_view id) const;

 private:
  std::vector<std::unique_ptr<Rule>> rules_;
};

/// Every built-in rule, most important first.
Registry DefaultRegistry();

}  // namespace draguard::engine
