// DG007 latency-sensitive-isolation: latency-sensitive work gets GPUs nobody else time-shares.
#include "draguard/dra/pod_specs.h"
#include "rules/rules.h"
#include "rules/util.h"

namespace draguard::engine::rules {
namespace {

constexpr const char* kClassFix =
    "give latency-sensitive work an exclusive claim: no TimeSlicing, MPS only with "
    "defaultActiveThreadPercentage and a pinned memory limit, no sharing on MIG devices, "
    "a ResourceClaimTemplate instead of a shared ResourceClaim";

class LatencySensitiveIsolation final : public Rule {
 public:
  std::string_view id() const override { return "DG007"; }
  std::string_view name() const override { return "latency-sensitive-isolation"; }
  policy::Action default_action() const override { return policy::Action::kDeny; }

  RuleResult Evaluate(const RuleInput& input) const override {
    if (auto claim = FindClaim(input.request)) return EvaluateClaim(*claim, input.policy);
    PodObjects scratch;
    const PodObjects& objects = PodObjectsOf(input, scratch);
    if (objects.specs.empty()) return Skip();
    std::vector<Finding> findings;
    bool any = false;
    for (const auto& spec : objects.specs) {
      if (!IsLatencySensitive(input.policy, Member(spec.metadata, "labels"), StringMember(spec.spec, "priorityClassName"))) {
        continue;
      }
      any = true;
      const admission::Json* claims = Member(spec.spec, "resourceClaims");
      if (claims == nullptr || !claims->is_array()) continue;
      for (std::size_t i = 0; i < claims->size(); ++i) {
        std::string shared = StringMember(&(*claims)[i], "resourceClaimName");
        if (shared.empty()) continue;
        Finding f;
        f.pointer = spec.pointer + "/resourceClaims/" + std::to_string(i) + "/resourceClaimName";
        f.message = (spec.workload ? spec.owner + " " + spec.pointer + ": " : std::string()) +
                    "latency-sensitive pod uses the pre-existing claim \"" + shared +
                    "\", which other Pods can share";
        f.fix = "use resourceClaimTemplateName so every Pod gets its own claim";
        findings.push_back(std::move(f));
      }
    }
    if (!any) return Skip();
    return Fail(std::move(findings));
  }

 private:
  static RuleResult EvaluateClaim(const ClaimRef& claim, const policy::Policy& pol) {
    if (!IsLatencySensitive(pol, claim.labels, "")) return Skip();
    std::vector<Finding> findings;
    for (const auto& cfg : claim.configs) {
      auto s = ReadSharing(cfg);
      if (!s || !s->has_sharing) continue;
      bool mig = s->kind == "MigDeviceConfig";
      for (const auto* a : ConfigTargets(claim, cfg)) mig = mig || InList(pol.device_classes.mig, a->device_class);
      Finding f;
      f.pointer = cfg.parameters_pointer + "/sharing";
      f.fix = kClassFix;
      std::string who = claim.owner + " (latency-sensitive)";
      if (mig) {
        f.message = who + " shares a MIG device (sharing." + (s->strategy.empty() ? "?" : s->strategy) + ")";
      } else if (s->strategy == "TimeSlicing") {
        f.message = who + " time-slices its GPU with other processes";
      } else if (s->strategy == "MPS" && !(s->has_thread_percentage && s->has_pinned_limit)) {
        f.message = who + " uses MPS without both defaultActiveThreadPercentage and a pinned memory limit";
      } else {
        continue;
      }
      findings.push_back(std::move(f));
    }
    return Fail(std::move(findings));
  }
};

}  // namespace

std::unique_ptr<Rule> MakeLatencySensitiveIsolation() { return std::make_unique<LatencySensitiveIsolation>(); }

}  // namespace draguard::engine::rules
