// Factories of the built-in rules (internal to the engine module).
#pragma once

#include <memory>

#include "draguard/engine/rule.h"

namespace draguard::engine::rules {

/// DG001 legacy-gpu-resource: no device-plugin GPU resources in Pods.
std::unique_ptr<Rule> MakeLegacyGpuResource();

}  // namespace draguard::engine::rules
