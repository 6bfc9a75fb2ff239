#include "draguard/engine/engine.h"

#include <exception>

#include "draguard/glob.h"

namespace draguard::engine {
namespace {

bool AnyGlob(const std::vector<std::string>& patterns, const std::string& value) {
  for (const auto& p : patterns) {
    if (GlobMatch(p, value)) return true;
  }
  return false;
}

// Why the request is exempt from every rule, or "" when it is not.
std::string Exemption(const admission::AdmissionRequest& req, const policy::Policy& pol) {
  const auto& ex = pol.exemptions;
  if (!req.namespace_.empty() && AnyGlob(ex.namespaces, req.namespace_)) {
    return "namespace " + req.namespace_;
  }
  if (!req.user_info.username.empty() && AnyGlob(ex.users, req.user_info.username)) {
    return "user " + req.user_info.username;
  }
  for (const auto& g : req.user_info.groups) {
    if (AnyGlob(ex.groups, g)) return "group " + g;
  }
  return "";
}

}  // namespace

EngineResult Evaluate(const RuleInput& input, const Registry& registry) {
  EngineResult out;
  out.exemption = Exemption(input.request, input.policy);
  if (!out.exemption.empty()) return out;
  for (const auto& rule : registry.rules()) {
    policy::Action action = input.policy.ActionFor(rule->id(), rule->default_action());
    if (action == policy::Action::kOff) continue;
    if (input.policy.mode == policy::Mode::kAudit && action == policy::Action::kDeny) {
      action = policy::Action::kAudit;
    }
    RuleOutcome o;
    o.rule = rule.get();
    o.action = action;
    try {
      o.result = rule->Evaluate(input);
    } catch (const std::exception& e) {
      o.result = Error(std::string("internal error: ") + e.what());
    } catch (...) {
      o.result = Error("internal error");
    }
    out.outcomes.push_back(std::move(o));
  }
  return out;
}

}  // namespace draguard::engine
