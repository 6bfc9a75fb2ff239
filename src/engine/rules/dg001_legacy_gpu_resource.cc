// DG001 legacy-gpu-resource: Pods must not request device-plugin GPU resources.
#include <string>
#include <vector>

#include "pod_specs.h"
#include "rules/rules.h"

namespace draguard::engine::rules {
namespace {

using admission::Json;

std::string QuantityText(const Json& q) {
  if (q.is_string()) return q.get<std::string>();
  if (q.is_number()) return q.dump();
  return "?";
}

constexpr const char* kFix =
    "request GPUs with a DRA ResourceClaimTemplate (class gpu.nvidia.com) in spec.resourceClaims";
constexpr const char* kMigFix =
    "request the MIG profile with a DRA ResourceClaimTemplate (class mig.nvidia.com, "
    "profile selector) in spec.resourceClaims";

// Appends one finding per legacy entry of resources.{limits,requests} at `resources`.
void CheckResources(const Json& resources, const std::string& pointer, const std::string& who,
                    const policy::Policy& policy, std::vector<Finding>* findings) {
  if (!resources.is_object()) return;
  for (const char* section : {"limits", "requests"}) {
    auto it = resources.find(section);
    if (it == resources.end() || !it->is_object()) continue;
    for (const auto& [name, qty] : it->items()) {
      if (!policy.IsLegacyResource(name)) continue;
      // A limit and a request of the same resource are one finding, reported at the limit.
      if (std::string(section) == "requests") {
        auto lim = resources.find("limits");
        if (lim != resources.end() && lim->is_object() && lim->contains(name)) continue;
      }
      Finding f;
      f.pointer = pointer + "/" + section + "/" + EscapePointerToken(name);
      f.message = who + " requests " + name + " (" + section + ": " + QuantityText(qty) + ")";
      f.fix = name.find("/mig-") != std::string::npos ? kMigFix : kFix;
      findings->push_back(std::move(f));
    }
  }
}

class LegacyGpuResource final : public Rule {
 public:
  std::string_view id() const override { return "DG001"; }
  std::string_view name() const override { return "legacy-gpu-resource"; }
  policy::Action default_action() const override { return policy::Action::kDeny; }

  RuleResult Evaluate(const RuleInput& input) const override {
    const auto& req = input.request;
    // Extended resources of an existing Pod cannot change; only creation is judged.
    if (req.operation != admission::Operation::kCreate) return Skip();
    auto specs = FindPodSpecs(req);
    if (specs.empty()) return Skip();
    std::vector<Finding> findings;
    for (const auto& spec : specs) {
      for (const auto& c : Containers(spec)) {
        auto res = c.container->find("resources");
        if (res == c.container->end()) continue;
        std::string who = c.kind + " \"" + c.name + "\"";
        CheckResources(*res, c.pointer + "/resources", who, input.policy, &findings);
      }
      // Pod-level resources (PodLevelResources, Kubernetes 1.32+).
      auto pod_res = spec.spec->find("resources");
      if (pod_res != spec.spec->end()) {
        CheckResources(*pod_res, spec.pointer + "/resources", "pod-level spec.resources", input.policy,
                       &findings);
      }
    }
    return Fail(std::move(findings));
  }
};

}  // namespace

std::unique_ptr<Rule> MakeLegacyGpuResource() { return std::make_unique<LegacyGpuResource>(); }

}  // namespace draguard::engine::rules
