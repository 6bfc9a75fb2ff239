// DG004 mig-profile-pinned: every MIG request selects exactly one fixed profile.
#include "draguard/cel/parser.h"
#include "rules/rules.h"
#include "rules/util.h"
#include "draguard/dra/selector_analysis.h"

namespace draguard::engine::rules {
namespace {

constexpr const char* kFix =
    "select one profile: \"device.attributes['gpu.nvidia.com'].profile == '3g.40gb'\"";

class MigProfilePinned final : public Rule {
 public:
  std::string_view id() const override { return "DG004"; }
  std::string_view name() const override { return "mig-profile-pinned"; }
  policy::Action default_action() const override { return policy::Action::kDeny; }

  RuleResult Evaluate(const RuleInput& input) const override {
    auto claim = FindClaim(input.request);
    if (!claim) return Skip();
    bool applies = false;
    std::vector<Finding> findings;
    for (const auto& req : claim->requests) {
      for (const auto& alt : req.alternatives) {
        if (!InList(input.policy.device_classes.mig, alt.device_class)) continue;
        applies = true;
        // All selectors must hold: intersect what each allows.
        std::optional<std::set<std::string>> profiles;
        for (const auto& s : alt.selectors) {
          auto ast = cel::Parse(s.expression);
          if (!ast.ok()) continue;
          auto v = AttributeValues(*ast->root, "gpu.nvidia.com", "profile");
          if (!v) continue;
          if (!profiles) {
            profiles = v;
          } else {
            std::set<std::string> both;
            for (const auto& p : *v) {
              if (profiles->count(p)) both.insert(p);
            }
            profiles = both;
          }
        }
        std::string who = claim->owner + " " + Describe(alt) + " (" + alt.device_class + ")";
        Finding f;
        f.pointer = alt.pointer + (alt.selectors.empty() ? "/deviceClassName" : "/selectors");
        f.fix = kFix;
        if (!profiles) {
          f.message = who + " does not pin a MIG profile, so memory and SMs depend on whatever slice is free";
        } else if (profiles->empty()) {
          f.message = who + " pins contradictory MIG profiles and can never be allocated";
        } else if (profiles->size() > 1) {
          std::string list;
          for (const auto& p : *profiles) list += (list.empty() ? "" : ", ") + p;
          f.message = who + " accepts " + std::to_string(profiles->size()) + " MIG profiles (" + list +
                      "); pin exactly one";
        } else {
          continue;
        }
        findings.push_back(std::move(f));
      }
    }
    if (!applies) return Skip();
    return Fail(std::move(findings));
  }
};

}  // namespace

std::unique_ptr<Rule> MakeMigProfilePinned() { return std::make_unique<MigProfilePinned>(); }

}  // namespace draguard::engine::rules
