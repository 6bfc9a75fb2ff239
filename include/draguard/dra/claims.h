// ResourceClaim / ResourceClaimTemplate views, shared by the rules and the satisfiability check.
//
// Reads resource.k8s.io v1, v1beta2 (requests wrap ExactDeviceRequest in `exactly`) and v1beta1
// and v1alpha3 (flat requests, `firstAvailable` as a sibling) into one shape, keeping the JSON Pointer of every
// field so findings point at the object as it was sent.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "draguard/admission/review.h"
#include "draguard/policy/policy.h"

namespace draguard::dra {

/// One CEL selector of a request.
struct SelectorRef {
  std::string expression;  ///< selectors[i].cel.expression
  std::string pointer;     ///< pointer of the expression string
};

/// One way to satisfy a request: the ExactDeviceRequest, or one firstAvailable subrequest.
struct Alternative {
  std::string name;          ///< subrequest name; "" for an exact request
  std::string ref;           ///< "req" or "req/sub", as constraints and configs name it
  std::string pointer;       ///< pointer of the object that holds deviceClassName
  const admission::Json* obj = nullptr;
  std::string device_class;  ///< deviceClassName ("" when missing)
  std::vector<SelectorRef> selectors;
  std::size_t selector_count = 0;  ///< entries of `selectors`, including malformed ones
  bool all = false;          ///< allocationMode: All
  std::string allocation_mode;  ///< as written ("" = ExactCount)
  bool count_set = false;    ///< count present
  int64_t count = 1;         ///< count (1 when unset)
  bool admin_access = false; ///< adminAccess: true
};

/// One entry of spec.devices.requests.
struct DeviceRequestRef {
  std::string name;
  std::string pointer;              ///< pointer of the request
  const admission::Json* obj = nullptr;  ///< the request object
  bool first_available = false;     ///< alternatives come from firstAvailable
  bool has_exactly = false;         ///< v1/v1beta2: the `exactly` member is present
  std::size_t first_available_count = 0;  ///< entries of firstAvailable
  std::vector<Alternative> alternatives;
};

/// One entry of spec.devices.constraints.
struct ConstraintRef {
  std::string pointer;
  std::vector<std::string> requests;  ///< empty = every request
  std::string match_attribute;
  std::string distinct_attribute;
};

/// One entry of spec.devices.config.
struct ConfigRef {
  std::string pointer;
  std::vector<std::string> requests;   ///< empty = every request
  std::string driver;                  ///< opaque.driver
  const admission::Json* parameters = nullptr;  ///< opaque.parameters
  std::string parameters_pointer;
};

/// A claim or a template's claim spec.
struct ClaimRef {
  std::string kind;          ///< "ResourceClaim" or "ResourceClaimTemplate"
  std::string version;       ///< "v1", "v1beta2", "v1beta1" or "v1alpha3" (the shape read)
  std::string owner;         ///< `ResourceClaimTemplate "name"`
  std::string spec_pointer;  ///< pointer of the ResourceClaimSpec ("/spec" or "/spec/spec")
  std::vector<DeviceRequestRef> requests;
  std::vector<ConstraintRef> constraints;
  std::vector<ConfigRef> configs;
  std::map<std::string, std::string> labels;       ///< object labels (+ template spec.metadata)
  std::map<std::string, std::string> annotations;  ///< object annotations (+ template spec.metadata)
};

/// The claim in a ResourceClaim / ResourceClaimTemplate CREATE request, else nullopt (the spec is
/// immutable, so UPDATEs are not judged).
std::optional<ClaimRef> FindClaim(const admission::AdmissionRequest& request);

/// The driver domain whose attributes a GPU class's devices publish ("gpu.nvidia.com"), or "".
std::string DriverOfClass(const policy::Policy& policy, const std::string& device_class);

/// Short "request "gpu"" or "request "gpu/big"" description.
std::string Describe(const Alternative& alt);

}  // namespace draguard::dra
