// Multi-node GPU jobs and NVLink domains across nodes (GB200/GB300 NVL72 racks): which Pods and pod
// templates belong to one distributed job, read from what the job controllers write (labels,
// annotations, replica counts), whether a pod spec is kept in one NVLink clique, and the cliques a
// topology model knows. Pure functions over the reviewed objects; the clique summary is computed
// once per topology snapshot.
//
// A job spans NVLink domains unless its Pods hold an IMEX channel of one ComputeDomain (the NVIDIA
// DRA driver's resource.nvidia.com/v1beta1, DeviceClass compute-domain-default-channel.nvidia.com)
// and run on nodes of one clique (node label nvidia.com/gpu.clique).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "draguard/admission/review.h"
#include "draguard/dra/pod_specs.h"

namespace draguard::topology {
class Snapshot;
}  // namespace draguard::topology

namespace draguard::dra {

/// The DeviceClasses of ComputeDomain IMEX channels: the one the NVIDIA driver's chart installs
/// (compute-domain-default-channel.nvidia.com) and the name its controller also knows.
bool IsComputeDomainChannelClass(std::string_view device_class);

/// True when `name` is the channel ResourceClaimTemplate of a ComputeDomain draguard creates
/// (mutation.computeDomains): "draguard-cd-", 20 lower-case hex digits, "-channel". The NVIDIA
/// driver's controller makes it once the ComputeDomain exists, so a Pod may name it before it does.
bool IsGeneratedChannelTemplateName(std::string_view name);

/// The Pods of a multi-node job that must share one NVLink domain: a whole job, or one group of it
/// (a LeaderWorkerSet group, a multi-host Ray replica).
struct NvlinkJob {
  std::string kind;  ///< the job's kind: "LeaderWorkerSet", "JobSet", "PyTorchJob", "MPIJob", "Job", "RayCluster", ...
  std::string api_version;  ///< the apiVersion its controller serves ("leaderworkerset.x-k8s.io/v1"); "" when not known
  std::string name;  ///< the job object's name (a RayCluster's: its cluster)
  std::string unit;  ///< "" for the whole job, else which part: "group 2", "worker group \"gpu\" replica \"r-1\""
  int64_t pods = 0;  ///< the unit's Pods when the object says (counting only GPU templates for a workload); 0: not known
  /// "<kind>/<name>" and "/<unit>" when set: Pods with equal keys in one namespace are one unit.
  std::string Key() const;
  /// `LeaderWorkerSet "train" (group 2)` for messages.
  std::string Describe() const;
};

/// The multi-node job unit a Pod belongs to, from the labels and annotations of `pod_metadata`
/// (its metadata object) that the job controllers set:
/// - LeaderWorkerSet: leaderworkerset.sigs.k8s.io/name, group-index (unit: the group), and the
///   annotation leaderworkerset.sigs.k8s.io/size (the group's Pods);
/// - JobSet (and Kubeflow TrainJob, which runs as one): jobset.sigs.k8s.io/jobset-name, Pods known
///   only as at least global-replicas when that is over 1;
/// - Kubeflow training-operator jobs (PyTorchJob, MPIJob, TFJob, ...): training.kubeflow.org/job-name
///   with operator-name; an MPIJob's launcher (job-role launcher) is not part of it;
/// - an Indexed Job's Pods (batch.kubernetes.io/job-completion-index, job-name);
/// - a Ray worker (ray.io/node-type worker): its cluster and group (unit: a multi-host replica,
///   ray.io/worker-group-replica-name, when set).
/// nullopt for any other Pod. Pod counts the Pod does not carry are 0.
std::optional<NvlinkJob> PodNvlinkJob(const admission::Json* pod_metadata);

/// Pods per unit that the pod template at `spec_pointer` of a reviewed multi-node job object
/// makes (its replicas, times parallelism / numOfHosts where the kind has them; a LeaderWorkerSet's
/// leader template 1 and its worker template size-1, or size without a leader template). -1 when
/// the object is not a kind of multi-node job (LeaderWorkerSet, JobSet, Indexed batch Job,
/// Kubeflow *Job, RayCluster / RayJob / RayService worker groups, Volcano Job) or the template not
/// one of its units' (a Ray head, a non-Indexed Job).
int64_t TemplateUnitPods(const admission::AdmissionRequest& request, std::string_view spec_pointer);

/// The multi-node job of a reviewed workload object, without its pod count: kind and name, unit
/// "" except a LeaderWorkerSet's ("each group") and a Ray worker group's ("worker group \"g\"").
/// nullopt when TemplateUnitPods would give -1 for every template.
std::optional<NvlinkJob> WorkloadNvlinkJob(const admission::AdmissionRequest& request, std::string_view spec_pointer);

/// How the pod spec `spec` (with its pod or template metadata, and the metadata of the object that
/// holds it, either may be null) keeps the job's Pods in one NVLink clique, or "" when nothing does:
/// a required podAffinity term on topologyKey nvidia.com/gpu.clique, a nodeSelector on that label,
/// a required nodeAffinity whose every term pins it to one value, or the annotations by which
/// LeaderWorkerSet, JobSet (alpha.jobset.sigs.k8s.io/exclusive-topology) and Kueue
/// (kueue.x-k8s.io/podset-required-topology) place a group in one domain of that label.
std::string KeptInOneClique(const admission::Json* spec, const admission::Json* pod_metadata,
                            const admission::Json* object_metadata);

/// The NVLink cliques of a topology model (NodeTopology::nvlink_clique): how many, and their nodes.
struct NvlinkDomains {
  std::size_t cliques = 0;         ///< distinct cliques
  std::size_t largest = 0;         ///< nodes of the largest clique
  std::size_t clique_nodes = 0;    ///< nodes that are in some clique
};

/// NvlinkDomains of `snapshot`, computed on the first call for it and kept with it.
const NvlinkDomains& NvlinkDomainsOf(const topology::Snapshot& snapshot);

}  // namespace draguard::dra
