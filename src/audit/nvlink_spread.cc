#include "draguard/audit/nvlink_spread.h"

#include "draguard/dra/nvlink_jobs.h"
#include "draguard/dra/pod_specs.h"
#include "draguard/glob.h"
#include "draguard/topology/model.h"
#include "draguard/topology/snapshot.h"

namespace draguard::audit {
namespace {

using admission::Json;
using dra::Member;
using dra::StringMember;

// True when a container of the Pod asks for legacy GPU resources, or the Pod holds resource
// claims (its own, or the one kube-scheduler made for its extended resources).
bool UsesGpus(const Json& pod, const policy::Policy& policy) {
  const Json* spec = Member(&pod, "spec");
  const Json* claims = Member(spec, "resourceClaims");
  if ((claims != nullptr && claims->is_array() && !claims->empty()) ||
      Member(Member(&pod, "status"), "extendedResourceClaimStatus") != nullptr) {
    return true;
  }
  if (spec == nullptr || !spec->is_object()) return false;
  const dra::PodSpecRef ref = dra::MakePodSpecRef("/spec", spec, nullptr, false, "");
  for (const auto& c : dra::Containers(ref)) {
    if (dra::RequestsLegacyGpus(c, policy)) return true;
  }
  return false;
}

}  // namespace

NvlinkSpread::NvlinkSpread(const topology::Snapshot* topology, const policy::Policy& policy)
    : topology_(topology), policy_(policy) {}

void NvlinkSpread::AddPod(const Json& pod, const std::string& default_namespace) {
  if (topology_ == nullptr || !pod.is_object()) return;
  const std::string node_name = StringMember(Member(&pod, "spec"), "nodeName");
  if (node_name.empty()) return;
  const topology::NodeTopology* node = topology_->Find(node_name);
  if (node == nullptr || node->nvlink_clique.empty()) return;
  const Json* metadata = Member(&pod, "metadata");
  auto job = dra::PodNvlinkJob(metadata);
  if (!job || !UsesGpus(pod, policy_)) return;
  std::string ns = StringMember(metadata, "namespace");
  if (ns.empty()) ns = default_namespace;
  auto key = std::make_pair(ns, job->Key());
  auto it = units_.find(key);
  if (it == units_.end()) {
    if (units_.size() >= kMaxUnits) {
      ++dropped_;
      return;
    }
    it = units_.emplace(std::move(key), Unit{job->kind, job->name, job->unit, job->api_version, {}}).first;
  }
  ++it->second.cliques[node->nvlink_clique];
}

std::vector<ObjectVerdict> NvlinkSpread::Spread() const {
  std::vector<ObjectVerdict> out;
  policy::Action action = policy_.ActionFor("DG017", policy::Action::kWarn);
  if (action == policy::Action::kOff) return out;
  if (policy_.mode == policy::Mode::kAudit && action == policy::Action::kDeny) action = policy::Action::kAudit;
  for (const auto& [key, u] : units_) {
    if (u.cliques.size() < 2) continue;
    const std::string& ns = key.first;
    bool exempt = false;
    for (const auto& pattern : policy_.exemptions.namespaces) exempt = exempt || GlobMatch(pattern, ns);
    if (exempt) continue;
    std::size_t pods = 0;
    std::string where;
    for (const auto& [clique, n] : u.cliques) {
      pods += n;
      where += (where.empty() ? "" : ", ") + clique + ": " + std::to_string(n);
    }
    ObjectVerdict v;
    v.api_version = u.api_version;
    v.kind = u.kind;
    v.namespace_ = ns;
    v.name = u.name;
    v.verdict = action == policy::Action::kDeny   ? engine::Verdict::kDeny
                : action == policy::Action::kWarn ? engine::Verdict::kWarn
                                                  : engine::Verdict::kAudit;
    Finding f;
    f.rule = "DG017";
    f.name = "nvlink-domain";
    f.action = policy::ActionName(action);
    f.message = u.kind + " \"" + u.name + "\"" + (u.unit.empty() ? "" : " (" + u.unit + ")") + ": " +
                std::to_string(pods) + " running GPU Pods span " + std::to_string(u.cliques.size()) +
                " NVLink cliques (" + where + "): Pods in two cliques join two separate IMEX domains and NCCL between "
                "them goes over the network";
    f.fix = "keep the job's Pods in one clique (a required podAffinity on topologyKey nvidia.com/gpu.clique, see "
            "DG017); running Pods move only when they are recreated";
    v.findings.push_back(std::move(f));
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace draguard::audit
