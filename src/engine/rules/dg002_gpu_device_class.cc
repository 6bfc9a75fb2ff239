// DG002 gpu-device-class: GPU requests in claims use a configured NVIDIA DRA DeviceClass.
#include "draguard/cel/checker.h"
#include "rules/rules.h"
#include "rules/util.h"
#include "draguard/dra/selector_analysis.h"

namespace draguard::engine::rules {
namespace {

constexpr const char* kDriver = "gpu.nvidia.com";

// Whether the selectors of `alt` target the NVIDIA GPU driver: a device.driver comparison or a
// read of its attribute / capacity domain.
bool TargetsGpuDriver(const Alternative& alt) {
  for (const auto& s : alt.selectors) {
    auto ast = cel::Parse(s.expression);
    if (!ast.ok()) continue;
    if (ComparesDriver(*ast->root, kDriver)) return true;
    auto checked = cel::Check(*ast, cel::Env::Dra({true}));
    if (!checked.ok()) continue;
    for (const auto& r : checked->references) {
      if (r.domain == kDriver) return true;
    }
  }
  return false;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

class GpuDeviceClass final : public Rule {
 public:
  std::string_view id() const override { return "DG002"; }
  std::string_view name() const override { return "gpu-device-class"; }
  policy::Action default_action() const override { return policy::Action::kDeny; }

  RuleResult Evaluate(const RuleInput& input) const override {
    auto claim = FindClaim(input.request);
    if (!claim) return Skip();
    const auto& classes = input.policy.device_classes;
    std::string configured;
    for (const auto* list : {&classes.gpu, &classes.mig, &classes.passthrough}) {
      for (const auto& c : *list) configured += (configured.empty() ? "" : ", ") + c;
    }
    std::vector<Finding> findings;
    for (const auto& req : claim->requests) {
      for (const auto& alt : req.alternatives) {
        if (alt.device_class.empty() || classes.IsGpuClass(alt.device_class)) continue;
        bool gpu_like_name = EndsWith(alt.device_class, "gpu.nvidia.com");
        bool targets = TargetsGpuDriver(alt);
        if (!gpu_like_name && !targets) continue;
        Finding f;
        f.pointer = alt.pointer + "/deviceClassName";
        f.message = claim->owner + " " + Describe(alt) + " asks for NVIDIA GPUs through class \"" +
                    alt.device_class + "\", which is not a configured GPU class" +
                    (targets ? " (its selectors target driver gpu.nvidia.com)" : "");
        f.fix = "use deviceClassName " + configured + " (or add the class to the policy's deviceClasses)";
        findings.push_back(std::move(f));
      }
    }
    return Fail(std::move(findings));
  }
};

}  // namespace

std::unique_ptr<Rule> MakeGpuDeviceClass() { return std::make_unique<GpuDeviceClass>(); }

}  // namespace draguard::engine::rules
