// Claims kube-scheduler makes for a Pod's extended resources (KEP-5004).
//
// When a DeviceClass names an extended resource (spec.extendedResourceName, or the implicit
// deviceclass.resource.kubernetes.io/<class>), kube-scheduler serves a Pod's request for it from
// DRA devices: in PreBind it creates one ResourceClaim for the Pod (generateName
// "<pod>-extended-resources-", the annotation below, the Pod as controller owner, one `exactly`
// request per container and resource) through the API, as its own identity. That claim is the
// Pod's request, judged when the Pod was admitted; denying it leaves the Pod Pending for good, and
// mutating it makes the scheduler delete it. Pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "draguard/admission/review.h"
#include "draguard/policy/policy.h"

namespace draguard::engine {

/// The annotation kube-scheduler puts on the claims it makes (resourceapi.ExtendedResourceClaimAnnotation).
inline constexpr std::string_view kExtendedResourceClaimAnnotation = "resource.kubernetes.io/extended-resource-claim";

/// What a reviewed object is with regard to the annotation.
enum class SchedulerClaim : uint8_t {
  kNone,       ///< not a resource.k8s.io ResourceClaim carrying the annotation "true"
  kScheduler,  ///< carries it and was created by a trusted scheduler: the Pod's request
  kOther,      ///< carries it but was created by someone else (or by an unknown requester)
};

/// True when `object` is an object whose metadata.annotations has the annotation set to "true".
bool HasExtendedResourceClaimAnnotation(const admission::Json& object);

/// The name of the Pod that `object` names as its controller owner (kind Pod, controller true);
/// "" when none.
std::string ControllerPodOf(const admission::Json& object);

/// Classifies a request: a CREATE of a resource.k8s.io ResourceClaim with the annotation is
/// kScheduler when userInfo.username is one of policy.trusted_schedulers (exact match), else
/// kOther. Anything else is kNone.
SchedulerClaim ClassifySchedulerClaim(const admission::AdmissionRequest& request, const policy::Policy& policy);

/// "none", "scheduler" or "other".
const char* SchedulerClaimName(SchedulerClaim kind);

}  // namespace draguard::engine
