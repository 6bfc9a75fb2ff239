// DG005 topology-alignment: a claim that allocates several devices aligns them on one PCIe root
// or NUMA node (matchAttribute), places each request on chosen PCIe roots / GPUs by a selector, or
// declares NVLink for its GPUs (then every other device shares a root or NUMA node with one of
// those GPUs: rails). CPUs and NICs in a GPU claim are aligned with the GPUs the same way.
#include <map>
#include <set>

#include "rules/rules.h"
#include "rules/util.h"

namespace draguard::engine::rules {
namespace {

constexpr std::size_t kMaxCombinations = 4096;

// "gpus, cpus, nic": the names a constraint lists for `alts` (a subrequest as "main/sub").
std::string RequestList(const std::vector<const Alternative*>& alts) {
  std::string out;
  std::set<std::string> seen;
  for (const auto* a : alts) {
    if (!seen.insert(a->ref).second) continue;
    out += (out.empty() ? "" : ", ") + a->ref;
  }
  return out;
}

class TopologyAlignment final : public Rule {
 public:
  std::string_view id() const override { return "DG005"; }
  std::string_view name() const override { return "topology-alignment"; }
  policy::Action default_action() const override { return policy::Action::kDeny; }

  RuleResult Evaluate(const RuleInput& input) const override {
    auto claim = FindClaim(input.request);
    if (!claim) return Skip();
    const auto& pol = input.policy;
    bool gpu = false;
    for (const auto& r : claim->requests) {
      for (const auto& a : r.alternatives) gpu = gpu || pol.device_classes.IsGpuClass(a.device_class);
    }
    if (!gpu) return Skip();
    // Alternatives aligned on their own (pcieRoot / uuid selector restriction, or NVLink GPUs),
    // computed once: the combinations below reuse them.
    const bool nvlink = DeclaresNvlink(*claim);
    std::map<const Alternative*, bool> alone;
    for (const auto& r : claim->requests) {
      for (const auto& a : r.alternatives) {
        alone[&a] = (nvlink && pol.device_classes.IsGpuClass(a.device_class)) || SelectorAligned(a);
      }
    }
    auto aligned = [&](const std::vector<const Alternative*>& alts) {
      if (OneConstraintAligns(*claim, alts, pol)) return true;
      // Devices tied by pcieRoot / numaNode constraints share one root or NUMA node (transitively):
      // components. Aligned when there is one component, or each component holds a device aligned
      // alone (rails: a NIC on one root with an NVLink-declared GPU).
      std::vector<std::size_t> comp(alts.size());
      for (std::size_t i = 0; i < alts.size(); ++i) comp[i] = i;
      auto find = [&](std::size_t i) {
        while (comp[i] != i) i = comp[i] = comp[comp[i]];
        return i;
      };
      std::vector<bool> covered(alts.size(), false);
      for (const auto& c : claim->constraints) {
        std::size_t first = alts.size();
        for (std::size_t i = 0; i < alts.size(); ++i) {
          if (!AlignsWith(c, *alts[i], pol)) continue;
          covered[i] = true;
          if (first == alts.size()) first = i;
          comp[find(i)] = find(first);
        }
      }
      std::set<std::size_t> roots, anchored;
      for (std::size_t i = 0; i < alts.size(); ++i) {
        if (!covered[i] && !alone[alts[i]]) return false;
        roots.insert(find(i));
        if (alone[alts[i]]) anchored.insert(find(i));
      }
      return roots.size() == 1 || anchored.size() == roots.size();
    };
    std::vector<Finding> findings;
    std::size_t uncovered = 0;
    bool bounded = ForEachCombination(*claim, kMaxCombinations, [&](const Combination& combo) {
      std::vector<const Alternative*> counted;
      int64_t devices = 0;
      for (const auto* a : combo) {
        if (InList(pol.alignment_exempt_classes, a->device_class) || DeviceCount(*a) == 0) continue;
        counted.push_back(a);
        devices += DeviceCount(*a);
      }
      if (devices < 2 || aligned(counted)) return;
      if (uncovered++ > 0) return;  // one finding per claim; the count goes into the message
      Finding f;
      f.pointer = claim->spec_pointer + "/devices" + (claim->constraints.empty() ? "" : "/constraints");
      bool alternatives = false, cpus = false, nics = false;
      for (const auto* a : counted) {
        alternatives = alternatives || !a->name.empty();
        cpus = cpus || RoleOf(*a, pol) == DeviceRole::kCpu;
        nics = nics || RoleOf(*a, pol) == DeviceRole::kNic;
      }
      const std::string head = claim->owner + (alternatives ? " alternative " : " ") + "allocates " +
                               std::to_string(devices) + " devices (" + DescribeCombination(counted) + ")";
      if (!cpus && !nics) {
        f.message = head + " without a matchAttribute " + kPcieRoot + " constraint covering them";
        f.fix = "add constraints: [{requests: [...all of them...], matchAttribute: resource.kubernetes.io/pcieRoot}]";
      } else {
        // GPUs with CPUs: only the NUMA node is common to all (CPUs have no PCIe root of their
        // own). GPUs with NICs: GPUDirect RDMA wants the NIC on its GPU's root.
        f.message = head + " mixes GPUs with " + (cpus ? (nics ? "CPUs and NICs" : "CPUs") : "NICs") +
                    " without a matchAttribute " + kNumaNode + " or " + kPcieRoot + " constraint covering them";
        f.fix = "add constraints: [{requests: [" + RequestList(counted) + "], matchAttribute: " +
                (cpus ? kNumaNode : kPcieRoot) + "}]";
      }
      findings.push_back(std::move(f));
    });
    if (!bounded) return Error("more than 4096 firstAvailable combinations; cannot check alignment");
    if (uncovered > 1) {
      findings.front().message += " (and " + std::to_string(uncovered - 1) + " more firstAvailable combinations)";
    }
    return Fail(std::move(findings));
  }
};

}  // namespace

std::unique_ptr<Rule> MakeTopologyAlignment() { return std::make_unique<TopologyAlignment>(); }

}  // namespace draguard::engine::rules
