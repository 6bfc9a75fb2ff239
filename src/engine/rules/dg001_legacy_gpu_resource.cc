// DG001 legacy-gpu-resource: Pods and pod templates must not request device-plugin GPU resources.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "draguard/dra/pod_specs.h"
#include "draguard/str_cat.h"
#include "rules/rules.h"
#include "rules/util.h"

namespace draguard::engine::rules {
namespace {

using admission::Json;

std::string QuantityText(const Json& q) {
  if (q.is_string()) return q.get<std::string>();
  if (q.is_number_unsigned()) return std::to_string(q.get<std::uint64_t>());
  if (q.is_number_integer()) return std::to_string(q.get<std::int64_t>());
  if (q.is_number()) return q.dump();
  return "?";
}

constexpr const char* kFix =
    "request GPUs with a DRA ResourceClaimTemplate (class gpu.nvidia.com) in spec.resourceClaims";
constexpr const char* kMigFix =
    "request the MIG profile with a DRA ResourceClaimTemplate (class mig.nvidia.com, "
    "profile selector) in spec.resourceClaims";
constexpr const char* kSharingFix =
    "HAMi sharing limits are not enforced by DRA: request a DRA claim with a memory selector "
    "(class gpu.nvidia.com) or an MPS sharing config instead";

// HAMi's per-GPU sharing dimensions count memory / cores, not devices: no DeviceClass backs them.
bool IsSharingDimension(const std::string& name) {
  return name == "nvidia.com/gpumem" || name == "nvidia.com/gpucores" || name == "nvidia.com/gpumem-percentage";
}

struct Context {
  const policy::Policy& policy;
  std::string owner;        // `Deployment "web"` for templates
  std::string prefix;       // "" for Pods, `Deployment "web": ` for templates
  bool workload = false;
  std::vector<Finding>* findings;
  const std::string* refusal = nullptr;  // why /mutate would refuse the template's Pods, if it would
};

// Where a resources object is and whose it is: a JSON pointer and a description such as
// `container "c"`, put together only when the object has a finding (most have none).
struct Place {
  std::string_view at;      // the pointer of the container or pod spec
  std::string_view field;   // "resources", "resourcesPerNode"
  std::string_view kind;    // "container", "initContainer", ...; empty: `name` is the whole description
  std::string_view name;
  std::string pointer() const { return StrCat({at, "/", field}); }
  std::string who() const { return kind.empty() ? std::string(name) : StrCat({kind, " \"", name, "\""}); }
};

// Appends one finding per legacy entry of resources.{limits,requests} at `resources`.
void CheckResources(const Json& resources, const Place& place, const Context& ctx) {
  if (!resources.is_object()) return;
  std::string pointer;
  std::string who;
  for (const char* section : {"limits", "requests"}) {
    auto it = resources.find(section);
    if (it == resources.end() || !it->is_object()) continue;
    for (const auto& [name, qty] : it->items()) {
      const bool implicit = !ctx.policy.ImplicitGpuClass(name).empty();
      if (!implicit && !ctx.policy.IsLegacyResource(name)) continue;
      if (IsZeroQuantity(qty)) continue;
      // A limit and a request of the same resource are one finding, reported at the limit.
      if (std::string_view(section) == "requests") {
        auto lim = resources.find("limits");
        if (lim != resources.end() && lim->is_object() && lim->contains(name)) continue;
      }
      if (pointer.empty()) {
        pointer = place.pointer();
        who = place.who();
      }
      Finding f;
      f.pointer = StrCat({pointer, "/", section, "/", EscapePointerToken(name)});
      f.message = StrCat({ctx.prefix, who, " requests ", name, " (", section, ": ", QuantityText(qty), ")"});
      const std::string_view implicit_class = ctx.policy.ImplicitGpuClass(name);
      const bool mig = name.find("/mig-") != std::string::npos ||
                       std::find(ctx.policy.device_classes.mig.begin(), ctx.policy.device_classes.mig.end(),
                                 implicit_class) != ctx.policy.device_classes.mig.end();
      f.fix = IsSharingDimension(name) ? kSharingFix : mig ? kMigFix : kFix;
      // KEP-5004: the name may be backed by DRA through DeviceClass.extendedResourceName (or is
      // the implicit deviceclass.resource.kubernetes.io/<class> name): DRA-allocated, but still
      // without memory floor or topology constraint.
      if (!IsSharingDimension(name)) {
        switch (ctx.policy.extended_resource_mapping) {
          case policy::ExtendedResourceMapping::kAllow:
            continue;
          case policy::ExtendedResourceMapping::kWarn:
            f.cap = policy::Action::kWarn;
            f.message += "; if a DeviceClass maps it (extendedResourceName), it still has no memory floor or topology constraint";
            break;
          case policy::ExtendedResourceMapping::kDeny:
            if (implicit) f.message += " (DRA-backed through the class, but with no selector, memory floor or topology constraint)";
            break;
        }
      }
      if (ctx.workload && ctx.policy.mutation.enabled && ctx.refusal != nullptr) {
        // Its Pods would be refused: judged now, by the rule's action, rather than by failing
        // Pod creates later (under Kueue, after its quota is taken).
        f.message = StrCat({ctx.owner, ": ", name, " in ", who, " cannot be converted when its Pods are created (at ",
                            pointer, "): ", *ctx.refusal});
      } else if (ctx.workload && ctx.policy.mutation.enabled) {
        // Admission warnings are cut at 120 characters: say what happens first.
        f.cap = policy::Action::kWarn;
        f.message = StrCat({ctx.owner, ": ", name, " in ", who, " will be converted when its Pods are created (at ",
                            pointer, ")"});
      }
      ctx.findings->push_back(std::move(f));
    }
  }
}

class LegacyGpuResource final : public Rule {
 public:
  std::string_view id() const override { return kLegacyGpuResourceId; }
  std::string_view name() const override { return "legacy-gpu-resource"; }
  policy::Action default_action() const override { return policy::Action::kDeny; }

  RuleResult Evaluate(const RuleInput& input) const override {
    PodObjects scratch;
    const PodObjects& objects = PodObjectsOf(input, scratch);
    if (objects.specs.empty() && objects.loose_containers.empty()) return Skip();
    std::vector<Finding> findings;
    for (const auto& spec : objects.specs) {
      Context ctx{input.policy, spec.owner, "", spec.workload, &findings};
      if (spec.workload) ctx.prefix = StrCat({spec.owner, " ", spec.pointer, ": "});
      if (spec.workload && input.template_refusals != nullptr) {
        auto it = input.template_refusals->find(spec.pointer);
        if (it != input.template_refusals->end()) ctx.refusal = &it->second;
      }
      for (const auto& c : Containers(spec)) {
        auto res = c.container->find("resources");
        if (res == c.container->end()) continue;
        CheckResources(*res, Place{c.pointer, "resources", c.kind, c.name}, ctx);
      }
      // Pod-level resources (PodLevelResources, Kubernetes 1.32+).
      auto pod_res = spec.spec->find("resources");
      if (pod_res != spec.spec->end()) {
        CheckResources(*pod_res, Place{spec.pointer, "resources", "", "pod-level spec.resources"}, ctx);
      }
    }
    for (const auto& c : objects.loose_containers) {
      Context ctx{input.policy, objects.owner, StrCat({objects.owner, " ", c.pointer, ": "}), true, &findings};
      // TrainJob's trainer carries resourcesPerNode instead of resources.
      for (const char* field : {"resources", "resourcesPerNode"}) {
        auto res = c.container->find(field);
        if (res != c.container->end()) CheckResources(*res, Place{c.pointer, field, "container", c.name}, ctx);
      }
    }
    return Fail(std::move(findings));
  }
};

}  // namespace

std::unique_ptr<Rule> MakeLegacyGpuResource() { return std::make_unique<LegacyGpuResource>(); }

}  // namespace draguard::engine::rules
