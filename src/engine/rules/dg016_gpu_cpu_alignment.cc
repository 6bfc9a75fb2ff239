// DG016 gpu-cpu-alignment: a container that uses a Pod's DRA GPUs and gets exclusive CPUs from the
// kubelet (Guaranteed, whole CPUs) has CPUs placed without regard to its GPUs' NUMA node. The
// Pod shows a claim's content only for the templates draguard generates: GPUs, and CPUs only when
// the container lists the claim's CPU request (mutation.cpu).
#include <algorithm>
#include <functional>
#include <map>
#include <memory>

#include "draguard/dra/claim_catalog.h"
#include "rules/rules.h"
#include "rules/util.h"

namespace draguard::engine::rules {
namespace {

using admission::Json;

// True when `container` uses a CPU request of the generated claim `claim`: the conversion names
// it "cpu" (or "cpu-<i>" next to "gpu-<i>") and lists it in the container's resources.claims
// when mutation.cpu puts the container's CPUs in the claim of its GPUs.
// Under mutation.kueue (and mutation.cpu) the conversion lists the claim once, whole, as Kueue
// needs: the CPUs are then in it exactly when mutation.cpu is on, which the policy tells.
bool RequestsCpusOf(const ContainerRef& container, const std::string& claim, const policy::Policy& policy) {
  const Json* list = Member(Member(container.container, "resources"), "claims");
  if (list == nullptr || !list->is_array()) return false;
  const bool whole_holds_cpus = policy.mutation.kueue && policy.mutation.cpu.mode != policy::CpuMode::kNone;
  for (const auto& e : *list) {
    if (StringMember(&e, "name") != claim) continue;
    const std::string request = StringMember(&e, "request");
    if (request == "cpu" || request.rfind("cpu-", 0) == 0) return true;
    if (request.empty() && whole_holds_cpus) return true;
  }
  return false;
}

// A GPU claim of a pod spec: one draguard generated (its content is known from its name), or a
// hand-written template or claim the server's watch cache summarises.
struct GpuClaim {
  std::string what;  // `template draguard-…`, `template "t"`, `claim "c"`
  bool generated = false;
  std::shared_ptr<const dra::ClaimSummary> summary;  // hand-written: its requests
};

// The requests of `claim` a container uses: every request when it lists the claim without one.
std::vector<const dra::ClaimSummary::Request*> UsedRequests(const ContainerRef& c, const std::string& claim,
                                                            const dra::ClaimSummary& summary) {
  std::vector<const dra::ClaimSummary::Request*> out;
  const Json* list = Member(Member(c.container, "resources"), "claims");
  if (list == nullptr || !list->is_array()) return out;
  for (const auto& e : *list) {
    if (StringMember(&e, "name") != claim) continue;
    const std::string request = StringMember(&e, "request");
    for (const auto& r : summary.requests) {
      if (request.empty() || r.name == request) out.push_back(&r);
    }
  }
  return out;
}

bool AnyClass(const dra::ClaimSummary::Request& r, const std::function<bool(const std::string&)>& pred) {
  return std::any_of(r.classes.begin(), r.classes.end(), pred);
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
    const auto& classes = input.policy.device_classes;
    const std::string cpu_class = classes.cpu.empty() ? "dra.cpu" : classes.cpu.front();
    auto is_gpu = [&](const std::string& c) { return classes.IsGpuClass(c); };
    auto is_cpu = [&](const std::string& c) { return classes.IsCpuClass(c); };
    const std::string& ns = input.request.namespace_;
    std::vector<Finding> findings;
    bool judged = false;
    for (const auto& spec : objects.specs) {
      // Pod claim name -> GPU claim; hand-written claims the cache cannot tell about -> why.
      std::map<std::string, GpuClaim> gpu_claims;
      std::map<std::string, std::string> unknown;
      for (const auto& c : PodClaims(spec)) {
        if (IsGeneratedTemplateName(c.template_name)) {
          gpu_claims[c.name] = {"template " + c.template_name, true, nullptr};
          continue;
        }
        if (input.claims == nullptr || ns.empty() || (c.template_name.empty() && c.claim_name.empty())) continue;
        const bool by_template = !c.template_name.empty();
        const dra::ClaimLookup l = by_template ? input.claims->Template(ns, c.template_name)
                                               : input.claims->Claim(ns, c.claim_name);
        const std::string what = by_template ? "template \"" + c.template_name + "\"" : "claim \"" + c.claim_name + "\"";
        if (l.state == dra::ClaimLookup::State::kUnknown) {
          unknown[c.name] = what + " (" + l.why + ")";
        } else if (l.state == dra::ClaimLookup::State::kFound &&
                   std::any_of(l.summary->requests.begin(), l.summary->requests.end(),
                               [&](const auto& r) { return AnyClass(r, is_gpu); })) {
          gpu_claims[c.name] = {what, false, l.summary};
        }
      }
      if (gpu_claims.empty() && unknown.empty()) continue;
      judged = true;
      const std::string prefix = spec.workload ? spec.owner + " " + spec.pointer + ": " : "";
      for (const auto& c : Containers(spec)) {
        const int64_t cpus = ExclusiveCpus(spec, c);
        if (cpus == 0) continue;
        const std::string n = std::to_string(cpus);
        const std::string who = prefix + c.kind + " \"" + c.name + "\"";
        const Json* requests = Member(Member(c.container, "resources"), "requests");
        const std::string cpu_pointer =
            c.pointer + "/resources/" + (Member(requests, "cpu") != nullptr ? "requests" : "limits") + "/cpu";
        std::string claim, unchecked;
        for (const auto& name : ContainerClaimNames(c)) {
          auto g = gpu_claims.find(name);
          if (g != gpu_claims.end() && (g->second.generated || [&] {
                for (const auto* r : UsedRequests(c, name, *g->second.summary)) {
                  if (AnyClass(*r, is_gpu)) return true;
                }
                return false;
              }())) {
            claim = name;
            break;
          }
          if (unchecked.empty() && unknown.count(name) != 0) unchecked = name;
        }
        auto fix = [&](const std::string& where) {
          return "request the " + n + " CPUs in the GPUs' claim (" + where + "): a cpu request of DeviceClass " + cpu_class +
                 " (count: " + n + ", or capacity dra.cpu/cpu: " + n +
                 " in grouped mode) and constraints: [{requests: [gpu, cpu], matchAttribute: " + kNumaNode +
                 "}]; set the container's cpu as dra-driver-cpu documents (pod-level resources, or requests = "
                 "limits = " + n + ")";
        };
        if (claim.empty()) {
          if (!unchecked.empty()) {
            // Today's judgement stands without the content; the audit annotation says what was not seen.
            Finding f;
            f.pointer = cpu_pointer;
            f.message = who + " has " + n + " exclusive CPUs and uses claim \"" + unchecked + "\", " + unknown[unchecked] +
                        ": whether it holds GPUs and these CPUs was not checked";
            f.fix = "none needed; the claim is checked once the server's claim cache has listed it";
            f.cap = policy::Action::kAudit;
            findings.push_back(std::move(f));
          }
          continue;
        }
        const GpuClaim& g = gpu_claims[claim];
        Finding f;
        f.pointer = cpu_pointer;
        if (g.generated) {
          if (RequestsCpusOf(c, claim, input.policy)) continue;
        } else {
          // A hand-written claim: the container's CPU requests of it, aligned with its GPU requests.
          std::vector<const dra::ClaimSummary::Request*> gpus, cpus_in_claim;
          for (const auto* r : UsedRequests(c, claim, *g.summary)) {
            if (AnyClass(*r, is_gpu)) gpus.push_back(r);
            if (AnyClass(*r, is_cpu)) cpus_in_claim.push_back(r);
          }
          if (!cpus_in_claim.empty()) {
            std::string loose;
            for (const auto* gpu : gpus) {
              for (const auto* cpu : cpus_in_claim) {
                if (loose.empty() && !g.summary->NumaAligned(gpu->name, cpu->name)) {
                  loose = "request \"" + cpu->name + "\" and GPU request \"" + gpu->name + "\"";
                }
              }
            }
            if (loose.empty()) continue;
            f.message = who + " gets its CPUs from claim \"" + claim + "\" (" + g.what + "), but no matchAttribute " +
                        kNumaNode + " constraint holds " + loose + ": the CPUs may land on another NUMA node";
            f.fix = "add constraints: [{requests: [" + gpus.front()->name + ", " + cpus_in_claim.front()->name +
                    "], matchAttribute: " + kNumaNode + "}] to " + g.what;
            findings.push_back(std::move(f));
            continue;
          }
        }
        f.message = who + " has " + n + " exclusive CPUs outside claim \"" + claim + "\" of its GPUs" +
                    (g.generated ? "" : " (" + g.what + ")") + ": the kubelet pins them regardless of the GPUs' NUMA node";
        f.fix = fix(g.what);
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
