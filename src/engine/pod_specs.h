// Locating pod specs inside reviewed objects (internal to the engine module).
#pragma once

#include <string>
#include <vector>

#include "draguard/admission/review.h"

namespace draguard::engine {

/// A pod spec found in an object.
struct PodSpecRef {
  std::string pointer;                 ///< JSON Pointer of the spec, e.g. "/spec"
  const admission::Json* spec = nullptr;
};

/// A container found in a pod spec.
struct ContainerRef {
  std::string pointer;                 ///< e.g. "/spec/containers/0"
  std::string kind;                    ///< "container", "initContainer" or "sidecar"
  std::string name;                    ///< container name ("" when absent)
  const admission::Json* container = nullptr;
};

/// The pod specs of a Pod object (currently "/spec" of kind Pod).
std::vector<PodSpecRef> FindPodSpecs(const admission::AdmissionRequest& request);

/// containers and initContainers of a pod spec, in order.
std::vector<ContainerRef> Containers(const PodSpecRef& spec);

/// Escapes one JSON Pointer token ('~' → "~0", '/' → "~1").
std::string EscapePointerToken(const std::string& token);

}  // namespace draguard::engine
