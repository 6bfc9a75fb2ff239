// DG016 gpu-cpu-alignment: a container that uses a Pod's DRA GPUs and gets exclusive CPUs from the
// kubelet (Guaranteed, whole CPUs) has CPUs placed without regard to its GPUs' NUMA node. The
// Pod shows a claim's content only for the templates draguard generates: GPUs, and CPUs only when
// the container lists the claim's CPU request (mutation.cpu).
#include <map>

#include "rules/rules.h"
#include "rules/util.h"

namespace draguard::engine::rules {
namespace {

using admission::Json;

// True when `container` uses a CPU request of the generated claim `claim`: the conversion names
// it "cpu" (or "cpu-<i>" next to "gpu-<i>") and lists it in the container's resources.claims
// when mutation.cpu puts the container's CPUs in the claim of its GPUs.
bool RequestsCpusOf(const ContainerRef& container, const std::string& claim) {
  const Json* list = Member(Member(container.container, "resources"), "claims");
  if (list == nullptr || !list->is_array()) return false;
  for (const auto& e : *list) {
    if (StringMember(&e, "name") != claim) continue;
    const std::string request = StringMember(&e, "request");
    if (request == "cpu" || request.rfind("cpu-", 0) == 0) return true;
  }
  return false;
}

class GpuCpuAlignment final : public Rule {
 public:
  std::string_view id() const override { return "DG016"; }
  std::string_view name() const override { return "gpu-cpu-alignment"; }
  policy::Action default_action() const override { return policy::Action::kWarn; }

  RuleResult Evaluate(const RuleInput& input) const override {
    PodObjects scratch;
    const PodObjects& objects = PodObjectsOf(input, scratch);
    if (objects.specs.empty()) return Skip();
    const auto& cpu_classes = input.policy.device_classes.cpu;
    const std::string cpu_class = cpu_classes.empty() ? "dra.cpu" : cpu_classes.front();
    std::vector<Finding> findings;
    bool judged = false;
    for (const auto& spec : objects.specs) {
      // Pod claim name -> generated template: GPU claims whose content the Pod tells.
      std::map<std::string, std::string> gpu_claims;
      for (const auto& c : PodClaims(spec)) {
        if (IsGeneratedTemplateName(c.template_name)) gpu_claims.emplace(c.name, c.template_name);
      }
      if (gpu_claims.empty()) continue;
      judged = true;
      const std::string prefix = spec.workload ? spec.owner + " " + spec.pointer + ": " : "";
      for (const auto& c : Containers(spec)) {
        std::string claim;
        for (const auto& n : ContainerClaimNames(c)) {
          if (gpu_claims.count(n) != 0) {
            claim = n;
            break;
          }
        }
        if (claim.empty() || RequestsCpusOf(c, claim)) continue;
        const int64_t cpus = ExclusiveCpus(spec, c);
        if (cpus == 0) continue;
        const std::string n = std::to_string(cpus);
        Finding f;
        const Json* requests = Member(Member(c.container, "resources"), "requests");
        f.pointer = c.pointer + "/resources/" + (Member(requests, "cpu") != nullptr ? "requests" : "limits") + "/cpu";
        f.message = prefix + c.kind + " \"" + c.name + "\" has " + n + " exclusive CPUs outside claim \"" + claim +
                    "\" of its GPUs: the kubelet pins them regardless of the GPUs' NUMA node";
        f.fix = "request the " + n + " CPUs in the GPUs' claim (template " + gpu_claims[claim] + "): a cpu request of DeviceClass " + cpu_class +
                " (count: " + n + ", or capacity dra.cpu/cpu: " + n +
                " in grouped mode) and constraints: [{requests: [gpu, cpu], matchAttribute: " + kNumaNode +
                "}]; set the container's cpu as dra-driver-cpu documents (pod-level resources, or requests = "
                "limits = " + n + ")";
        findings.push_back(std::move(f));
      }
    }
    if (!judged) return Skip();
    return Fail(std::move(findings));
  }
};

}  // namespace

std::unique_ptr<Rule> MakeGpuCpuAlignment() { return std::make_unique<GpuCpuAlignment>(); }

}  // namespace draguard::engine::rules
