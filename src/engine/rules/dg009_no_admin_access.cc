// DG009 no-admin-access: adminAccess only in namespaces the policy allows.
#include "rules/rules.h"
#include "rules/util.h"

namespace draguard::engine::rules {
namespace {

class NoAdminAccess final : public Rule {
 public:
  std::string_view id() const override { return "DG009"; }
  std::string_view name() const override { return "no-admin-access"; }
  policy::Action default_action() const override { return policy::Action::kDeny; }

  RuleResult Evaluate(const RuleInput& input) const override {
    const std::string& ns = input.request.namespace_;
    return NamespaceGatedFindings(
        input, input.policy.admin_access_namespaces, [](const Alternative& alt) { return alt.admin_access; },
        [&ns](const ClaimRef& claim, const Alternative& alt) {
          return GatedFinding{"adminAccess",
                              claim.owner + " " + Describe(alt) + " sets adminAccess: true in namespace \"" + ns +
                                  "\", which gives access to devices already allocated to other workloads",
                              "remove adminAccess, or list the namespace in the policy's adminAccess.allowedNamespaces "
                              "(it also needs the label resource.kubernetes.io/admin-access: \"true\")"};
        });
  }
};

}  // namespace

std::unique_ptr<Rule> MakeNoAdminAccess() { return std::make_unique<NoAdminAccess>(); }

}  // namespace draguard::engine::rules
