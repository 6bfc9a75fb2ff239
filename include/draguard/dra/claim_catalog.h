// What a Pod review may know of the ResourceClaimTemplates and ResourceClaims a Pod references.
//
// A Pod names its claims (spec.resourceClaims) but carries none of their content, and rules do no
// I/O. Where API access is on, the server keeps a watch cache of both kinds (kubeclaims::ClaimCache) and
// hands the rules this read-only view: a compact summary per object (request names, device classes,
// numaNode constraints), never the object itself. Where the view cannot answer (off, or a kind not
// yet listed) rules keep the judgement they make without it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "draguard/admission/review.h"

namespace draguard::dra {

/// The part of a claim spec the Pod rules read.
struct ClaimSummary {
  /// One entry of spec.devices.requests.
  struct Request {
    std::string name;                  ///< the request's name
    std::vector<std::string> classes;  ///< deviceClassName of `exactly`, or of every firstAvailable subrequest
  };
  std::vector<Request> requests;
  /// The requests of each `matchAttribute: resource.kubernetes.io/numaNode` constraint (an empty
  /// list: every request of the claim).
  std::vector<std::vector<std::string>> numa_constraints;
  /// True when some constraint of `numa_constraints` holds both requests `a` and `b`.
  bool NumaAligned(std::string_view a, std::string_view b) const;
  /// Approximate bytes held (for the cache's memory bound).
  std::size_t Bytes() const;
};

/// The summary of a stored ResourceClaim or ResourceClaimTemplate (any served version); nullopt
/// when `object` is neither.
std::optional<ClaimSummary> SummarizeClaimObject(const admission::Json& object);

/// The answer to one lookup.
struct ClaimLookup {
  enum class State : uint8_t {
    kUnknown,  ///< the view cannot tell (API access off, the kind not listed yet, or over its bound)
    kAbsent,   ///< listed and watched: no such object
    kFound,    ///< `summary` is set
  };
  State state = State::kUnknown;
  std::shared_ptr<const ClaimSummary> summary;
  /// Why the view cannot tell (kUnknown), for findings: "API access is off", "not synced yet".
  std::string why;
};

/// The read-only view. Implementations are thread-safe; lookups never block on the network.
class ClaimCatalog {
 public:
  virtual ~ClaimCatalog() = default;
  /// The ResourceClaimTemplate `name` in `namespace_`.
  virtual ClaimLookup Template(std::string_view namespace_, std::string_view name) const = 0;
  /// The ResourceClaim `name` in `namespace_`.
  virtual ClaimLookup Claim(std::string_view namespace_, std::string_view name) const = 0;
};

}  // namespace draguard::dra
