// DG006 interconnect-declared: a multi-GPU claim states its interconnect intent.
#include "rules/rules.h"
#include "rules/util.h"

namespace draguard::engine::rules {
namespace {

constexpr const char* kAnnotation = "draguard.io/interconnect";
constexpr std::size_t kMaxCombinations = 4096;

class InterconnectDeclared final : public Rule {
 public:
  std::string_view id() const override { return "DG006"; }
  std::string_view name() const override { return "interconnect-declared"; }
  policy::Action default_action() const override { return policy::Action::kWarn; }

  RuleResult Evaluate(const RuleInput& input) const override {
    auto claim = FindClaim(input.request);
    if (!claim) return Skip();
    const auto& pol = input.policy;
    std::vector<Finding> findings;
    auto ann = claim->annotations.find(kAnnotation);
    bool declared = false;
    if (ann != claim->annotations.end()) {
      if (ann->second == "nvlink" || ann->second == "pcie" || ann->second == "any") {
        declared = true;
      } else {
        Finding f;
        f.pointer = "/metadata/annotations/draguard.io~1interconnect";
        f.message = claim->owner + " annotation " + kAnnotation + " is \"" + ann->second +
                    "\", not nvlink, pcie or any";
        f.fix = "set draguard.io/interconnect to nvlink, pcie or any";
        findings.push_back(std::move(f));
      }
    }
    int64_t max_gpus = 0;
    bool multi_uncovered = false;
    bool bounded = ForEachCombination(*claim, kMaxCombinations, [&](const Combination& combo) {
      std::vector<const Alternative*> gpus;
      int64_t n = 0;
      for (const auto* a : combo) {
        if (!pol.device_classes.IsGpuClass(a->device_class)) continue;
        gpus.push_back(a);
        n += DeviceCount(*a);
      }
      max_gpus = std::max(max_gpus, n);
      if (n >= 2 && !PcieRootCovers(*claim, gpus)) multi_uncovered = true;
    });
    if (!bounded) return Error("more than 4096 firstAvailable combinations");
    if (max_gpus < 2) return findings.empty() ? Skip() : Fail(std::move(findings));
    if (multi_uncovered && !declared) {
      Finding f;
      f.pointer = "/metadata/annotations";
      f.message = claim->owner + " allocates up to " + std::to_string(max_gpus) +
                  " GPUs without declaring the interconnect it relies on";
      f.fix = "constrain the GPUs with matchAttribute resource.kubernetes.io/pcieRoot (PCIe peer-to-peer) or "
              "annotate the claim draguard.io/interconnect: nvlink|pcie|any";
      findings.push_back(std::move(f));
    }
    return Fail(std::move(findings));
  }
};

}  // namespace

std::unique_ptr<Rule> MakeInterconnectDeclared() { return std::make_unique<InterconnectDeclared>(); }

}  // namespace draguard::engine::rules
