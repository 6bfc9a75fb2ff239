// Where the pod specs of a reviewed object are: a Pod's own spec, the pod templates of the
// built-in workloads and of the custom resources the policy lists. Shared by the rules and by
// offline conversion (`draguard convert`).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "draguard/admission/review.h"
#include "draguard/policy/policy.h"

namespace draguard::engine {

/// One pod spec inside an object.
struct PodSpecLocation {
  std::string spec_pointer;      ///< JSON Pointer of the PodSpec ("/spec", "/spec/template/spec")
  std::string metadata_pointer;  ///< JSON Pointer of the pod/template metadata; "" when none
  bool workload = false;         ///< a template (Pods are created from it later), not a Pod
};

/// The pod specs of `request.object` (CREATE/UPDATE only), per policy.customResources for CRDs.
std::vector<PodSpecLocation> LocatePodSpecs(const admission::AdmissionRequest& request, const policy::Policy& policy);

/// True when pod (or template) `labels` / `priority_class` put it in the latency-sensitive class.
bool InLatencySensitiveClass(const policy::Policy& policy, const std::map<std::string, std::string>& labels,
                             const std::string& priority_class);

}  // namespace draguard::engine
