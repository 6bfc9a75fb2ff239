// mutation.computeDomains: the ComputeDomain, IMEX channel claim and clique affinity of a
// converted Pod of a multi-node GPU job (internal.h, AddComputeDomain).
#include <algorithm>

#include "draguard/dra/nvlink_jobs.h"
#include "draguard/topology/model.h"
#include "draguard/topology/snapshot.h"
#include "internal.h"

namespace draguard::mutation::internal {
namespace {

using admission::Json;

// The owner the unit's ComputeDomain is garbage-collected with: a JobSet by the labels its
// controller sets (a JobSet's Jobs come and go while it runs), else the Pod's controller (a Job,
// a StatefulSet of a LeaderWorkerSet, a Kubeflow job, a RayCluster); null when neither is known.
Json OwnerOf(const Json& metadata) {
  const std::string jobset = dra::StringMember(dra::Member(&metadata, "labels"), "jobset.sigs.k8s.io/jobset-name");
  const std::string jobset_uid = dra::StringMember(dra::Member(&metadata, "labels"), "jobset.sigs.k8s.io/jobset-uid");
  if (!jobset.empty() && !jobset_uid.empty()) {
    return {{"apiVersion", "jobset.x-k8s.io/v1alpha2"}, {"kind", "JobSet"}, {"name", jobset}, {"uid", jobset_uid}};
  }
  const Json* refs = dra::Member(&metadata, "ownerReferences");
  if (refs == nullptr || !refs->is_array()) return nullptr;
  for (const auto& r : *refs) {
    const Json* controller = dra::Member(&r, "controller");
    if (controller == nullptr || !controller->is_boolean() || !controller->get<bool>()) continue;
    Json owner;
    for (const char* key : {"apiVersion", "kind", "name", "uid"}) {
      const std::string v = dra::StringMember(&r, key);
      if (v.empty()) return nullptr;
      owner[key] = v;
    }
    return owner;  // not the controller of the ComputeDomain; no blockOwnerDeletion (needs finalizer rights)
  }
  return nullptr;
}

bool HasClaims(const Json& pod) {
  const Json* claims = dra::Member(dra::Member(&pod, "spec"), "resourceClaims");
  return claims != nullptr && claims->is_array() && !claims->empty();
}

}  // namespace

std::string AddComputeDomain(const Json& original, std::string_view namespace_name,
                             const std::vector<std::string>& gpu_containers, const policy::Policy& policy,
                             const topology::Snapshot* topology, PodConversion* out) {
  const policy::ComputeDomainMode mode = policy.mutation.compute_domains;
  if (mode == policy::ComputeDomainMode::kOff) return "";
  const Json* metadata = dra::Member(&original, "metadata");
  const std::optional<dra::NvlinkJob> job = dra::PodNvlinkJob(metadata);
  if (!job) return "";
  const dra::NvlinkDomains none;
  const dra::NvlinkDomains& domains = topology != nullptr ? dra::NvlinkDomainsOf(*topology) : none;
  const std::string unit_words = job->Describe();
  if (domains.cliques == 0) {
    if (mode == policy::ComputeDomainMode::kAuto) return "";
    return "mutation.computeDomains: required, but no node of the topology model is in an NVLink clique "
           "(nvidia.com/gpu.clique), so the Pods of " + unit_words + " cannot share an NVLink domain";
  }
  if (job->pods > static_cast<int64_t>(domains.largest)) {
    const std::string why = unit_words + " has " + std::to_string(job->pods) +
                            " GPU Pods and the largest NVLink clique " + std::to_string(domains.largest) +
                            " nodes (a ComputeDomain channel is one per node), so its Pods cannot share one NVLink domain";
    if (mode == policy::ComputeDomainMode::kRequired) return "mutation.computeDomains: required, but " + why;
    out->warnings.push_back("no ComputeDomain: " + why);
    return "";
  }
  const std::string ns(namespace_name);
  const std::string hash = Sha256Hex(ns + "/" + job->Key(), 10);
  Json& pod = out->pod;
  // ConvertPod refused an affinity whose levels are not of the API's types.
  Json& terms = pod["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
  if (terms.is_null()) terms = Json::array();
  pod["metadata"]["labels"][std::string(kNvlinkUnitLabel)] = hash;
  // The unit's Pods in one clique: the first Pod matches its own term and goes anywhere with a
  // clique; the others follow it. Nodes without the clique label satisfy no term.
  Json term = {{"labelSelector", {{"matchLabels", {{std::string(kNvlinkUnitLabel), hash}}}}},
               {"topologyKey", std::string(topology::kCliqueLabel)}};
  if (std::find(terms.begin(), terms.end(), term) == terms.end()) terms.push_back(std::move(term));

  if (HasClaims(original)) {
    // A Pod with claims of its own (NVIDIA's ComputeDomain demo holds its channel beside legacy
    // GPUs): a second channel would need a second channel device per node, which no node has.
    out->warnings.push_back("kept in one NVLink clique with the other Pods of " + unit_words +
                            "; it holds claims of its own, so no ComputeDomain channel was added");
    out->summary += "; kept in one NVLink clique";
    return "";
  }
  GeneratedComputeDomain cd;
  cd.name = std::string(kNamePrefix) + "cd-" + hash;
  cd.channel_template = cd.name + "-channel";
  cd.unit = unit_words;
  Json meta = {{"name", cd.name},
               {"namespace", ns},
               {"labels", {{"app.kubernetes.io/managed-by", "draguard"}, {std::string(kNvlinkUnitLabel), hash}}},
               {"annotations", {{"draguard.io/job", unit_words}}}};
  Json owner = metadata != nullptr ? OwnerOf(*metadata) : Json(nullptr);
  if (owner.is_null()) {
    out->warnings.push_back("ComputeDomain " + cd.name + " has no owner the Pod names: it stays after " + unit_words +
                            " is deleted");
  } else {
    meta["ownerReferences"] = Json::array({std::move(owner)});
  }
  cd.object = {{"apiVersion", "resource.nvidia.com/v1beta1"},
               {"kind", "ComputeDomain"},
               {"metadata", std::move(meta)},
               {"spec",
                {{"numNodes", 0},
                 {"channel", {{"resourceClaimTemplate", {{"name", cd.channel_template}}}, {"allocationMode", "Single"}}}}}};
  Json& claims = pod["spec"]["resourceClaims"];
  if (!claims.is_array()) claims = Json::array();
  claims.push_back({{"name", std::string(kChannelClaimName)}, {"resourceClaimTemplateName", cd.channel_template}});
  for (const auto& pointer : gpu_containers) {
    Json& list = pod[Json::json_pointer(pointer)]["resources"]["claims"];
    if (!list.is_array()) list = Json::array();
    list.push_back({{"name", std::string(kChannelClaimName)}});
  }
  out->summary += "; IMEX channel of ComputeDomain " + cd.name + " (" + unit_words + "), one NVLink clique";
  out->compute_domains.push_back(std::move(cd));
  return "";
}

}  // namespace draguard::mutation::internal
