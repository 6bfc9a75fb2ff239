// The running multi-node jobs whose Pods span NVLink cliques: the audit groups the bound GPU Pods
// of every job unit (dra::PodNvlinkJob: a LeaderWorkerSet group, a JobSet, a Kubeflow job, an
// Indexed Job, a Ray worker group) by the clique of their nodes in the topology model, and reports
// a unit in more than one clique as a DG017 finding on the job. Pods are reduced to a count per
// (unit, clique) as they are listed; nothing else is kept.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "draguard/admission/review.h"
#include "draguard/audit/judge.h"
#include "draguard/policy/policy.h"

namespace draguard::topology {
class Snapshot;
}  // namespace draguard::topology

namespace draguard::audit {

/// Groups bound GPU Pods of multi-node job units by NVLink clique. Not thread-safe.
class NvlinkSpread {
 public:
  /// Units remembered at most; Pods of further units are not counted (`dropped`).
  static constexpr std::size_t kMaxUnits = 100000;

  /// `topology` (may be null: nothing is counted) must outlive the object.
  NvlinkSpread(const topology::Snapshot* topology, const policy::Policy& policy);

  /// Counts one listed Pod when it is bound to a node that has a clique in the topology model,
  /// uses GPUs (legacy GPU resources, or any resource claim) and belongs to a job unit.
  /// `default_namespace` stands for a Pod without metadata.namespace.
  void AddPod(const admission::Json& pod, const std::string& default_namespace = "default");

  /// The units whose Pods run in more than one clique, as verdicts on their job objects with one
  /// DG017 finding each ("LeaderWorkerSet \"llm\" (group 0): 4 GPU Pods in 2 NVLink cliques: …"),
  /// by namespace and key; none when the policy turns DG017 off. The finding's action follows
  /// the policy (warn by default; deny becomes audit in audit mode), and namespaces the policy
  /// exempts are left out.
  std::vector<ObjectVerdict> Spread() const;

  /// Pods of units beyond kMaxUnits, not counted.
  std::size_t dropped() const { return dropped_; }

 private:
  struct Unit {
    std::string kind, name, unit, api_version;
    std::map<std::string, std::size_t> cliques;  // clique -> GPU Pods bound there
  };
  const topology::Snapshot* topology_;
  const policy::Policy& policy_;
  std::map<std::pair<std::string, std::string>, Unit> units_;  // (namespace, key)
  std::size_t dropped_ = 0;
};

}  // namespace draguard::audit
