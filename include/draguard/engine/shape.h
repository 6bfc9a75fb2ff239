// The shape of configured custom resources. The API server decodes Pods and built-in workloads
// into typed structs, so a container list that is an object never reaches the webhook; a custom
// resource's schema may leave those fields untyped (x-kubernetes-preserve-unknown-fields). Where
// the policy says a custom resource holds pod templates or containers (customResources), a value
// of the wrong type there would hide legacy requests from every rule, so it is reported.
#pragma once

#include <string>
#include <vector>

#include "draguard/admission/review.h"
#include "draguard/policy/policy.h"

namespace draguard::engine {

/// At most this many shape errors are reported per object.
inline constexpr std::size_t kMaxShapeErrors = 8;

/// Values of the wrong type at the configured pod-template and container paths of a custom
/// resource (customResources of `policy`), each as `<JSON Pointer> must be <type>, not <type>`:
/// the path itself (a map for `*`, a list for `name[]`), pod templates and specs, containers,
/// resources, limits / requests (maps of quantities). Absent and null values are fine. Pods and
/// built-in kinds are never checked; on UPDATE only templates that changed are. Pure.
std::vector<std::string> CustomResourceShapeErrors(const admission::AdmissionRequest& request,
                                                   const policy::Policy& policy);

}  // namespace draguard::engine
