// DG003 memory-reservation: every full-GPU request bounds device memory from below.
#include "draguard/cel/checker.h"
#include "draguard/k8s/quantity.h"
#include "rules/rules.h"
#include "rules/util.h"
#include "draguard/dra/selector_analysis.h"

namespace draguard::engine::rules {
namespace {

constexpr const char* kDomain = "gpu.nvidia.com";
constexpr const char* kPitfall =
    "thresholds compare with the memory the driver reports (H100 80GB reports 81559Mi, so quantity('80Gi') "
    "excludes it; use '79Gi' or '80G')";

class MemoryReservation final : public Rule {
 public:
  std::string_view id() const override { return "DG003"; }
  std::string_view name() const override { return "memory-reservation"; }
  policy::Action default_action() const override { return policy::Action::kDeny; }

  RuleResult Evaluate(const RuleInput& input) const override {
    auto claim = FindClaim(input.request);
    if (!claim) return Skip();
    auto minimum = k8s::Quantity::Parse(input.policy.memory_minimum);
    if (!minimum.ok()) return Error("memoryReservation.minimum: " + minimum.status().message());
    // Devices that report 81559Mi (H100 80GB): a floor above this and at most 80Gi excludes them.
    auto h100 = k8s::Quantity::Parse("81559Mi");
    auto gi80 = k8s::Quantity::Parse("80Gi");
    bool applies = false;
    std::vector<Finding> findings;
    for (const auto& req : claim->requests) {
      for (const auto& alt : req.alternatives) {
        if (!InList(input.policy.device_classes.gpu, alt.device_class)) continue;
        applies = true;
        std::optional<LowerBound> bound;
        for (const auto& s : alt.selectors) {
          auto ast = cel::Parse(s.expression);
          if (!ast.ok()) continue;
          auto b = CapacityLowerBound(*ast->root, kDomain, "memory");
          if (b && (!bound || b->value.Compare(bound->value) > 0 ||
                    (b->value.Compare(bound->value) == 0 && b->strict))) {
            bound = b;
          }
        }
        Finding f;
        f.pointer = alt.pointer + (alt.selectors.empty() ? "/deviceClassName" : "/selectors");
        std::string who = claim->owner + " " + Describe(alt) + " (" + alt.device_class + ")";
        if (!bound) {
          f.message = who + " does not bound device memory from below";
          f.fix = "add a selector \"'memory' in device.capacity['gpu.nvidia.com'] && "
                  "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0\"; " +
                  std::string(kPitfall);
          findings.push_back(std::move(f));
          continue;
        }
        std::string op = bound->strict ? ">" : ">=";
        if (bound->value.Compare(*minimum) < 0) {
          f.message = who + " reserves memory " + op + " " + bound->value.ToString() +
                      ", below the policy minimum " + minimum->ToString();
          f.fix = "raise the memory floor to at least quantity('" + minimum->ToString() + "'); " + kPitfall;
          findings.push_back(std::move(f));
        } else if (bound->value.Compare(*h100) >= 0 && bound->value.Compare(*gi80) <= 0) {
          f.message = who + " reserves memory " + op + " " + bound->value.ToString() +
                      ", which excludes H100 80GB GPUs (they report 81559Mi)";
          f.fix = "use quantity('79Gi') or quantity('80G') when the 80 GB class is meant";
          f.cap = policy::Action::kWarn;
          findings.push_back(std::move(f));
        }
      }
    }
    if (!applies) return Skip();
    return Fail(std::move(findings));
  }
};

}  // namespace

std::unique_ptr<Rule> MakeMemoryReservation() { return std::make_unique<MemoryReservation>(); }

}  // namespace draguard::engine::rules
