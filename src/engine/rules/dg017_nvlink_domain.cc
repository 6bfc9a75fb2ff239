// DG017 nvlink-domain: on a cluster whose GPU nodes share NVLink domains across nodes (GB200/GB300
// NVL72 racks: a node's NVLink clique in the topology model), the GPU Pods of a multi-node job get
// multi-node NVLink only when they hold an IMEX channel of one ComputeDomain and run in one clique.
// Reported: a Pod or pod template of such a job that holds no channel; one that holds a channel
// but is not kept in one clique; a job unit with more Pods than the largest clique has nodes.
#include <algorithm>
#include <map>

#include "draguard/dra/claim_catalog.h"
#include "draguard/dra/nvlink_jobs.h"
#include "draguard/topology/model.h"
#include "rules/rules.h"
#include "rules/util.h"

namespace draguard::engine::rules {
namespace {

using admission::Json;

// What a pod spec holds: GPUs (legacy or DRA), and a ComputeDomain channel.
struct Holds {
  bool gpus = false;
  bool channel = false;
  std::string channel_claim;  // the pod claim name of the channel
  std::string unchecked;      // a claim whose content is not known, with why ("" when none)
};

Holds WhatSpecHolds(const PodSpecRef& spec, const RuleInput& input) {
  Holds h;
  for (const auto& c : Containers(spec)) h.gpus = h.gpus || RequestsLegacyGpus(c, input.policy);
  const std::string& ns = input.request.namespace_;
  for (const auto& c : PodClaims(spec)) {
    if (IsGeneratedTemplateName(c.template_name)) {
      h.gpus = true;  // generated templates hold GPUs (and NICs), never a channel
      continue;
    }
    if (dra::IsGeneratedChannelTemplateName(c.template_name)) {
      // The channel of a ComputeDomain /mutate created (mutation.computeDomains).
      if (!h.channel) h.channel = true, h.channel_claim = c.name;
      continue;
    }
    if (c.template_name.empty() && c.claim_name.empty()) continue;
    const bool by_template = !c.template_name.empty();
    const std::string what = by_template ? "template \"" + c.template_name + "\"" : "claim \"" + c.claim_name + "\"";
    if (input.claims == nullptr || ns.empty()) {
      if (h.unchecked.empty()) h.unchecked = what + " (API access is off)";
      continue;
    }
    const dra::ClaimLookup l = by_template ? input.claims->Template(ns, c.template_name) : input.claims->Claim(ns, c.claim_name);
    if (l.state == dra::ClaimLookup::State::kUnknown) {
      if (h.unchecked.empty()) h.unchecked = what + " (" + l.why + ")";
      continue;
    }
    if (l.state != dra::ClaimLookup::State::kFound) continue;
    for (const auto& r : l.summary->requests) {
      for (const auto& cls : r.classes) {
        if (input.policy.device_classes.IsGpuClass(cls)) h.gpus = true;
        if (dra::IsComputeDomainChannelClass(cls) && !h.channel) {
          h.channel = true;
          h.channel_claim = c.name;
        }
      }
    }
  }
  return h;
}

constexpr const char* kAffinityFix =
    "keep the job's Pods in one clique: a required podAffinity term {topologyKey: nvidia.com/gpu.clique, "
    "labelSelector: <the job's Pods>} (or the LeaderWorkerSet / JobSet exclusive-topology annotation, or Kueue's "
    "kueue.x-k8s.io/podset-required-topology, set to nvidia.com/gpu.clique)";

class NvlinkDomain final : public Rule {
 public:
  std::string_view id() const override { return "DG017"; }
  std::string_view name() const override { return "nvlink-domain"; }
  policy::Action default_action() const override { return policy::Action::kWarn; }

  RuleResult Evaluate(const RuleInput& input) const override {
    if (input.topology == nullptr) return Skip();
    const dra::NvlinkDomains& domains = dra::NvlinkDomainsOf(*input.topology);
    if (domains.cliques == 0) return Skip();
    PodObjects scratch;
    const PodObjects& objects = PodObjectsOf(input, scratch);
    if (objects.specs.empty()) return Skip();

    // Each GPU pod spec of a multi-node job unit, with the unit and its GPU Pods.
    struct Member_ {
      const PodSpecRef* spec;
      Holds holds;
    };
    struct Unit {
      dra::NvlinkJob job;
      int64_t pods = 0;
      std::vector<Member_> members;
    };
    std::map<std::string, Unit> units;
    for (const auto& spec : objects.specs) {
      std::optional<dra::NvlinkJob> job;
      int64_t pods = 0;
      if (spec.workload) {
        const int64_t n = dra::TemplateUnitPods(input.request, spec.pointer);
        if (n <= 0) continue;
        job = dra::WorkloadNvlinkJob(input.request, spec.pointer);
        pods = n;
      } else {
        job = dra::PodNvlinkJob(spec.metadata);
        if (job) pods = job->pods;
      }
      if (!job) continue;
      Holds holds = WhatSpecHolds(spec, input);
      if (!holds.gpus) continue;
      Unit& u = units[job->Key()];
      u.job = *job;
      u.pods = spec.workload ? u.pods + pods : pods;
      u.members.push_back({&spec, std::move(holds)});
    }
    if (units.empty()) return Skip();

    const std::string cluster = std::to_string(domains.cliques) + (domains.cliques == 1 ? " NVLink clique" : " NVLink cliques") +
                                ", the largest of " + std::to_string(domains.largest) + " nodes";
    const Json* object_metadata = Member(&input.request.object, "metadata");
    std::vector<Finding> findings;
    bool judged = false;
    for (const auto& [key, u] : units) {
      if (u.pods < 2) continue;  // a single GPU Pod, or a Pod whose job size it does not carry
      judged = true;
      const std::string pods = std::to_string(u.pods) + " GPU Pods";
      for (const auto& m : u.members) {
        const PodSpecRef& spec = *m.spec;
        // Admission warnings are cut at 120 characters: who, then what is wrong.
        const std::string who =
            spec.workload ? spec.owner + " " + spec.pointer + " (" +
                                (u.job.unit == "each group" ? pods + " per group"
                                                            : (u.job.unit.empty() ? "" : u.job.unit + ", ") + pods) +
                                ")"
                          : "Pod of " + u.job.kind + " \"" + u.job.name + "\" (" +
                                (u.job.unit.empty() ? "" : u.job.unit + ", ") + pods + ")";
        if (u.pods > static_cast<int64_t>(domains.largest) && &m == &u.members.front()) {
          Finding f;
          f.pointer = spec.pointer;
          f.message = who + ": cannot share one NVLink domain, the largest clique has " + std::to_string(domains.largest) +
                      " nodes (a ComputeDomain channel is one per node)";
          f.fix = "run at most " + std::to_string(domains.largest) +
                  " Pods per NVLink domain (split the job into groups that each fit one clique), or accept NCCL "
                  "over the network between cliques";
          findings.push_back(std::move(f));
        }
        const std::string kept = dra::KeptInOneClique(spec.spec, spec.metadata, spec.workload ? object_metadata : nullptr);
        if (!m.holds.channel) {
          Finding f;
          f.pointer = spec.pointer + "/resourceClaims";
          if (!m.holds.unchecked.empty()) {
            f.message = who + ": whether claim " + m.holds.unchecked + " is a ComputeDomain channel was not checked";
            f.fix = "none needed; the claim is checked once the server's claim cache has listed it";
            f.cap = policy::Action::kAudit;
          } else {
            f.message = who + ": no ComputeDomain channel, so no IMEX domain: NCCL between the job's Pods falls back to "
                              "the network (" + cluster + ")";
            f.fix = "create a ComputeDomain (resource.nvidia.com/v1beta1) for the job and list its channel "
                    "ResourceClaimTemplate (spec.channel.resourceClaimTemplate.name) in spec.resourceClaims and the GPU "
                    "containers' resources.claims" +
                    std::string(kept.empty() ? "; " + std::string(kAffinityFix) : "");
          }
          findings.push_back(std::move(f));
        } else if (kept.empty()) {
          Finding f;
          f.pointer = spec.pointer + "/affinity";
          f.message = who + ": nothing keeps the job's Pods in one NVLink clique; Pods in two cliques join two separate "
                            "IMEX domains (channel: claim \"" + m.holds.channel_claim + "\")";
          f.fix = kAffinityFix;
          findings.push_back(std::move(f));
        }
      }
    }
    if (!judged) return Skip();
    return Fail(std::move(findings));
  }
};

}  // namespace

std::unique_ptr<Rule> MakeNvlinkDomain() { return std::make_unique<NvlinkDomain>(); }

}  // namespace draguard::engine::rules
