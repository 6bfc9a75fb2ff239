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
    const auto& classes = input.policy.device_classes;
    return NamespaceGatedFindings(
        input, input.policy.allocation_mode_all_namespaces,
        [&classes](const Alternative& alt) { return alt.all && classes.IsGpuClass(alt.device_class); },
        [](const ClaimRef& claim, const Alternative& alt) {
          return GatedFinding{"allocationMode",
                              claim.owner + " " + Describe(alt) + " uses allocationMode: All on class " +
                                  alt.device_class + ", which takes every matching GPU on the node",
                              "use allocationMode: ExactCount with the count you need, or list the namespace in "
                              "allocationModeAll.allowedNamespaces"};
        });
  }
};

}  // namespace

std::unique_ptr<Rule> MakeNoAllocationModeAll() { return std::make_unique<NoAllocationModeAll>(); }

}  // namespace draguard::engine::rules
