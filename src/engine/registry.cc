#include "draguard/engine/registry.h"

#include <stdexcept>
#include <string>
#include <utility>

#include "rules/rules.h"

namespace draguard::engine {

void Registry::Add(std::unique_ptr<Rule> rule) {
  if (rule == nullptr) throw std::invalid_argument("Registry::Add: null rule");
  if (Find(rule->id()) != nullptr) {
    throw std::invalid_argument("Registry::Add: duplicate rule ID " + std::string(rule->id()));
  }
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
  // Most important first: the order of rules in deny messages.
  r.Add(rules::MakeLegacyGpuResource());
  r.Add(rules::MakeGpuDeviceClass());
  r.Add(rules::MakeMemoryReservation());
  r.Add(rules::MakeMigProfilePinned());
  r.Add(rules::MakeTopologyAlignment());
  r.Add(rules::MakeInterconnectDeclared());
  r.Add(rules::MakeLatencySensitiveIsolation());
  r.Add(rules::MakeSharingLimits());
  r.Add(rules::MakeNoAdminAccess());
  r.Add(rules::MakeNoAllocationModeAll());
  r.Add(rules::MakeSelectorValidity());
  r.Add(rules::MakeClaimApiVersion());
  r.Add(rules::MakeClaimStaticLimits());
  r.Add(rules::MakeUnsatisfiableClaim());
  r.Add(rules::MakePodClaimReferences());
  r.Add(rules::MakeGpuCpuAlignment());
  r.Add(rules::MakeNvlinkDomain());
  return r;
}

}  // namespace draguard::engine
