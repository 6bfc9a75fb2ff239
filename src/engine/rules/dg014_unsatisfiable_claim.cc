// DG014 unsatisfiable-claim: a claim that no node of the topology model can allocate stays
// pending forever; say so at admission, with the nearest miss.
#include "draguard/dra/satisfiability.h"
#include "draguard/topology/snapshot.h"
#include "rules/rules.h"
#include "rules/util.h"

namespace draguard::engine::rules {
namespace {

class UnsatisfiableClaim final : public Rule {
 public:
  std::string_view id() const override { return "DG014"; }
  std::string_view name() const override { return "unsatisfiable-claim"; }
  policy::Action default_action() const override { return policy::Action::kDeny; }

  RuleResult Evaluate(const RuleInput& input) const override {
    if (input.topology == nullptr || input.topology->node_count() == 0) return Skip();
    // CREATE only, like every claim rule: the spec is immutable, and an UPDATE (a controller
    // removing a finalizer) must not be blocked because the topology changed since.
    auto claim = FindClaim(input.request);
    if (!claim) return Skip();
    auto report = dra::CheckSatisfiable(input.request.object, input.policy, *input.topology, input.cel_budget);
    if (report.budget_exhausted) return Error(report.skip_reason);
    switch (report.verdict) {
      case dra::SatisfiabilityReport::Verdict::kSkipped:
        return Skip();
      case dra::SatisfiabilityReport::Verdict::kSatisfiable:
        return Pass();  // also when only unknown attributes made it fit
      case dra::SatisfiabilityReport::Verdict::kUnsatisfiable:
        break;
    }
    Finding f;
    f.pointer = report.pointer.empty() ? claim->spec_pointer + "/devices" : report.pointer;
    f.message = claim->owner + " cannot be satisfied by any node of the topology model: " + report.message;
    f.fix = report.hint.empty() ? "relax the requests, selectors or constraints so that one node can allocate them"
                                : report.hint;
    std::vector<Finding> findings;
    findings.push_back(std::move(f));
    return Fail(std::move(findings));
  }
};

}  // namespace

std::unique_ptr<Rule> MakeUnsatisfiableClaim() { return std::make_unique<UnsatisfiableClaim>(); }

}  // namespace draguard::engine::rules
