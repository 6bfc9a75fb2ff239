// Compile-time cost estimate of a checked CEL expression, as the Kubernetes API server computes it
// for DRA device selectors before it accepts a ResourceClaim.
//
// The estimator follows cel-go's checker.Cost (a [min, max] cost per node: 1 per identifier and
// map/struct field selection, 10 per list and 30 per map literal, the size-dependent costs of string
// and list functions, and for each comprehension the range size times the cost of one iteration),
// with Kubernetes' library.CostEstimator for the Kubernetes and string-extension functions, cel-go
// ext.Sets' estimates for `sets.*`, and the size bounds the DRA environment declares for `device`
// (dynamic-resource-allocation/cel compile.go): at most 32 domains and 32 names per map, domains
// of at most 63 characters, names of 32, the driver name 63, string and version values 64. Sizes the
// estimator cannot bound (e.g. the result of `lists.range`, for which cel-go declares no estimate)
// are unbounded, so iterating them is estimated at the maximum. Pure; thread-safe.
#pragma once

#include <cstdint>

#include "draguard/cel/checker.h"
#include "draguard/status.h"

namespace draguard::cel {

/// Kubernetes' CELSelectorExpressionMaxCost: the estimated cost a selector may have.
inline constexpr uint64_t kSelectorMaxCost = 1000000;

/// Kubernetes' message for a selector whose estimated cost exceeds the limit
/// (`<field>: Forbidden: too complex, exceeds cost limit`).
inline constexpr const char* kCostLimitMessage = "too complex, exceeds cost limit";

/// A cost range in CEL cost units; UINT64_MAX stands for unbounded.
struct CostEstimate {
  uint64_t min = 0;  ///< cheapest evaluation
  uint64_t max = 0;  ///< most expensive evaluation
};

/// The estimated cost of `expr` (which Check produced; the DRA size bounds apply to `device`).
CostEstimate EstimateCost(const CheckedExpr& expr);

/// OK when the estimated maximum cost of `expr` is at most `limit`; otherwise InvalidArgument
/// whose message is kCostLimitMessage followed by " (estimated cost N, limit L)".
Status CheckCost(const CheckedExpr& expr, uint64_t limit = kSelectorMaxCost);

}  // namespace draguard::cel
