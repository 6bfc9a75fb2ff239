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
    auto claim = FindClaim(input.request);
    if (!claim) return Skip();
    const std::string& ns = input.request.namespace_;
    std::vector<Finding> findings;
    for (const auto& req : claim->requests) {
      for (const auto& alt : req.alternatives) {
        if (!alt.admin_access) continue;
        if (NamespaceAllowed(input.policy.admin_access_namespaces, ns)) continue;
        Finding f;
        f.pointer = alt.pointer + "/adminAccess";
        f.message = claim->owner + " " + Describe(alt) + " sets adminAccess: true in namespace \"" + ns +
                    "\", which gives access to devices already allocated to other workloads";
        f.fix = "remove adminAccess, or list the namespace in the policy's adminAccess.allowedNamespaces "
                "(it also needs the label resource.kubernetes.io/admin-access: \"true\")";
        findings.push_back(std::move(f));
      }
    }
    return Fail(std::move(findings));
  }
};

}  // namespace

std::unique_ptr<Rule> MakeNoAdminAccess() { return std::make_unique<NoAdminAccess>(); }

}  // namespace draguard::engine::rules
