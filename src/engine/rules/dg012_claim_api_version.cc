// DG012 claim-api-version: claims and templates should use resource.k8s.io/v1.
#include "rules/rules.h"
#include "rules/util.h"

namespace draguard::engine::rules {
namespace {

class ClaimApiVersion final : public Rule {
 public:
  std::string_view id() const override { return "DG012"; }
  std::string_view name() const override { return "claim-api-version"; }
  policy::Action default_action() const override { return policy::Action::kWarn; }

  RuleResult Evaluate(const RuleInput& input) const override {
    auto claim = FindClaim(input.request);
    if (!claim) return Skip();
    // The version the client sent (requestKind, when the apiserver converted the object).
    std::string version = input.request.request_kind ? input.request.request_kind->version : claim->version;
    if (version == "v1") return Pass();
    Finding f;
    f.pointer = "/apiVersion";
    f.message = claim->owner + " uses resource.k8s.io/" + version +
                (version == "v1beta1" || version == "v1beta2"
                     ? ", which is served only when enabled with --runtime-config"
                     : ", which current Kubernetes no longer serves for claims") +
                " (v1 is GA since Kubernetes 1.34)";
    f.fix = version != "v1beta2"
                ? "use apiVersion resource.k8s.io/v1 and wrap each request's fields in exactly: {...}"
                : "use apiVersion resource.k8s.io/v1 (same shape as v1beta2)";
    return Fail({std::move(f)});
  }
};

}  // namespace

std::unique_ptr<Rule> MakeClaimApiVersion() { return std::make_unique<ClaimApiVersion>(); }

}  // namespace draguard::engine::rules
