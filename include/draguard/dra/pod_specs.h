// Locating pod specs and containers inside reviewed objects: used by the rules and by the
// conversion of legacy requests (`/mutate`, `draguard convert`).
//
// Pods, the pod templates of every built-in workload (Deployment, StatefulSet, DaemonSet,
// ReplicaSet, ReplicationController, Job, CronJob, PodTemplate) and of the custom resources the
// policy lists. On UPDATE only templates that changed are returned (Pod specs cannot change the
// fields the rules judge, so Pods are judged on CREATE only).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "draguard/admission/review.h"
#include "draguard/policy/policy.h"

namespace draguard::dra {

/// A container found in a pod spec (or a container-like object of a custom resource).
struct ContainerRef {
  std::string pointer;                 ///< e.g. "/spec/containers/0"
  std::string kind;                    ///< "container", "initContainer" or "sidecar"
  std::string name;                    ///< container name ("" when absent)
  const admission::Json* container = nullptr;
  /// A custom resource's container whose parent object takes pod-level claims
  /// (customResources[].containerClaims: parent).
  bool claims_in_parent = false;
};

/// A pod spec found in an object. Made by MakePodSpecRef, which lists its containers once for
/// every rule that reads them.
struct PodSpecRef {
  std::string pointer;                  ///< JSON Pointer of the spec, e.g. "/spec/template/spec"
  const admission::Json* spec = nullptr;
  const admission::Json* metadata = nullptr;  ///< metadata of the pod / template, or null
  bool workload = false;                ///< a template (its Pods are created later), not a Pod
  std::string owner;                    ///< "" for a Pod, else e.g. `Deployment "web"`
  std::vector<ContainerRef> containers; ///< containers and initContainers of `spec`, in order
};

/// The pod spec `spec` (an object) at `pointer`, with its containers listed.
PodSpecRef MakePodSpecRef(std::string pointer, const admission::Json* spec, const admission::Json* metadata,
                          bool workload, std::string owner);

/// Everything pod-like in a reviewed object.
struct PodObjects {
  std::vector<PodSpecRef> specs;       ///< pod specs (a Pod's own spec or templates)
  /// Container-like objects of custom resources (policy customResources[].containers).
  std::vector<ContainerRef> loose_containers;
  std::string owner;                   ///< `Kind "name"` of the reviewed object
  bool workload = false;               ///< the object is not a Pod
};

/// The pod specs of the reviewed object, per the policy's customResources for CRDs.
PodObjects FindPodObjects(const admission::AdmissionRequest& request, const policy::Policy& policy);

/// One pod spec inside an object, by JSON Pointer (for patches).
struct PodSpecLocation {
  std::string spec_pointer;      ///< JSON Pointer of the PodSpec ("/spec", "/spec/template/spec")
  std::string metadata_pointer;  ///< JSON Pointer of the pod/template metadata; "" when none
  bool workload = false;         ///< a template (Pods are created from it later), not a Pod
};

/// The pod specs of `request.object` as pointers (FindPodObjects' specs).
std::vector<PodSpecLocation> LocatePodSpecs(const admission::AdmissionRequest& request, const policy::Policy& policy);

/// The pod specs only.
std::vector<PodSpecRef> FindPodSpecs(const admission::AdmissionRequest& request, const policy::Policy& policy);

/// containers and initContainers of a pod spec, in order (listed when the ref was made).
inline const std::vector<ContainerRef>& Containers(const PodSpecRef& spec) { return spec.containers; }

/// Escapes one JSON Pointer token ('~' → "~0", '/' → "~1").
std::string EscapePointerToken(const std::string& token);

/// The string-valued entries of the object at `path` (e.g. {"metadata", "labels"}).
std::map<std::string, std::string> StringMapAt(const admission::Json& root,
                                               std::initializer_list<const char*> path);

/// The member `key` of `obj` when obj is an object and has it, else null.
const admission::Json* Member(const admission::Json* obj, const char* key);

/// The string at obj[key], or "".
std::string StringMember(const admission::Json* obj, const char* key);

/// `Kind "name"` of the reviewed object (name from metadata.name, else the request name).
std::string OwnerName(const admission::AdmissionRequest& request);

/// True when the pod / template / object labels put it in the latency-sensitive class.
bool IsLatencySensitive(const policy::Policy& policy, const std::map<std::string, std::string>& labels,
                        const std::string& priority_class);

/// IsLatencySensitive of a pod or template whose metadata.labels is `labels` (null or not an
/// object: none), read where they are; only string values count, as in the map.
bool IsLatencySensitive(const policy::Policy& policy, const admission::Json* labels, std::string_view priority_class);

/// Splits a dotted policy path ("spec.template.spec", "*" for any array element) into segments.
std::vector<std::string> SplitPath(const std::string& path);

/// One entry of a pod spec's spec.resourceClaims.
struct PodClaimRef {
  std::string name;           ///< the name containers use in resources.claims
  std::string template_name;  ///< resourceClaimTemplateName ("" when not set)
  std::string claim_name;     ///< resourceClaimName ("" when not set)
  std::string pointer;        ///< pointer of the entry
};

/// The object entries of `spec`'s spec.resourceClaims, in order.
std::vector<PodClaimRef> PodClaims(const PodSpecRef& spec);

/// The pod claim names `container` lists in resources.claims, in order, each once.
std::vector<std::string> ContainerClaimNames(const ContainerRef& container);

/// True when `name` has the form of the ResourceClaimTemplates draguard generates: "draguard-"
/// followed by 20 lower-case hex digits (the content address of the template). They hold GPU
/// requests (full GPUs, one MIG profile or an MPS-shared GPU) and, with NIC requests, nothing else.
bool IsGeneratedTemplateName(std::string_view name);

/// True when a quantity asks for nothing (0, "0", "0m").
bool IsZeroQuantity(const admission::Json& quantity);

/// True when `container` asks for GPUs the legacy way: a resources.limits or requests entry that
/// Policy::IsLegacyGpuRequest names, with a quantity that is not zero.
bool RequestsLegacyGpus(const ContainerRef& container, const policy::Policy& policy);

/// True when the pod spec is in the Guaranteed QoS class as far as its cpu and memory decide it,
/// judged container by container (stricter than the kubelet, which compares sums): with pod-level
/// spec.resources for cpu or memory, both have positive limits and requests equal to them;
/// otherwise every container and init container does. A missing request counts as its limit (the
/// API server defaults it so for Pods).
bool IsGuaranteed(const PodSpecRef& spec);

/// The CPUs the kubelet's static CPU manager policy pins for `container`: its cpu request when the
/// pod is Guaranteed (IsGuaranteed), the container's own cpu and memory requests equal their
/// limits, and the cpu request is a whole number; 0 otherwise (also for unreadable quantities).
int64_t ExclusiveCpus(const PodSpecRef& spec, const ContainerRef& container);

}  // namespace draguard::dra
