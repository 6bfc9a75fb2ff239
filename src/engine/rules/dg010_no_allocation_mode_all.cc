// DG010 no-allocation-mode-all: allocationMode All on GPU classes only where the policy allows.
#include "rules/rules.h"
#include "rules/util.h"

namespace draguard::engine::rules {
namespace {

class NoAllocationModeAll final : public Rule {
 public:
  std::string_view id() const override { return "DG010"; }
  std::string_view name() const override { return "no-allocation-mode-all"; }
  policy::Action default_action() const override { return policy::Action::kDeny; }

  RuleResult Evaluate(const RuleInput& input) const override {
    auto claim = FindClaim(input.request);
    if (!claim) return Skip();
    const std::string& ns = input.request.namespace_;
    std::vector<Finding> findings;
    for (const auto& req : claim->requests) {
      for (const auto& alt : req.alternatives) {
        if (!alt.all || !input.policy.device_classes.IsGpuClass(alt.device_class)) continue;
        if (NamespaceAllowed(input.policy.allocation_mode_all_namespaces, ns)) continue;
        Finding f;
        f.pointer = alt.pointer + "/allocationMode";
        f.message = claim->owner + " " + Describe(alt) + " uses allocationMode: All on class " +
                    alt.device_class + ", which takes every matching GPU on the node";
        f.fix = "use allocationMode: ExactCount with the count you need, or list the namespace in "
                "allocationModeAll.allowedNamespaces";
        findings.push_back(std::move(f));
      }
    }
    return Fail(std::move(findings));
  }
};

}  // namespace

std::unique_ptr<Rule> MakeNoAllocationModeAll() { return std::make_unique<NoAllocationModeAll>(); }

}  // namespace draguard::engine::rules
