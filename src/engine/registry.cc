#include "draguard/engine/registry.h"

#include <utility>

#include "rules/rules.h"

namespace draguard::engine {

void Registry::Add(std::unique_ptr<Rule> rule) {
  if (rule == nullptr || Find(rule->id()) != nullptr) return;
  rules_.push_back(std::move(rule));
}

const Rule* Registry::Find(std::string_view id) const {
  for (const auto& r : rules_) {
    if (r->id() == id) return r.get();
  }
  return nullptr;
}

Registry DefaultRegistry() {
  Registry r;
  r.Add(rules::MakeLegacyGpuResource());
  return r;
}

}  // namespace draguard::engine
