// Static analysis of DRA CEL selectors (internal to the engine module): which device-memory
// floor and which MIG profiles a selector guarantees, read from the parsed tree of draguard_cel.
#pragma once

#include <optional>
#include <set>
#include <string>

#include "draguard/cel/ast.h"
#include "draguard/k8s/quantity.h"

namespace draguard::dra {

/// A lower bound on a capacity: value ≥ `value` (or > when strict).
struct LowerBound {
  k8s::Quantity value;
  bool strict = false;
};

/// The lower bound that `root` (a selector that must be true) guarantees on
/// device.capacity[domain][name], or nullopt. `domain` also matches `device.capacity[device.driver]`.
/// Understands compareTo against quantity('..') with any comparison (either side), isGreaterThan,
/// isLessThan, negation, && (the stronger bound) and || (the weaker, if every branch bounds).
std::optional<LowerBound> CapacityLowerBound(const cel::Expr& root, const std::string& domain,
                                             const std::string& name);

/// The values `root` allows for the string attribute device.attributes[domain][name]:
/// nullopt when unconstrained, else the set (empty = contradictory). Understands ==, `in [..]`,
/// && (intersection) and || (union when every branch constrains).
std::optional<std::set<std::string>> AttributeValues(const cel::Expr& root, const std::string& domain,
                                                     const std::string& name);

/// The values a top-level conjunct of `root` restricts the attribute device.attributes[domain][name]
/// to: `== 'lit'` (either side) or `in ['lit', ...]`, string literals, or int literals as their
/// decimal text (`numaNode in [0, 8]`), intersected
/// over the conjuncts; nullopt when no top-level conjunct restricts it. Presence guards
/// (`'name' in device.attributes[domain] && ...`) are separate conjuncts and do not matter.
/// `device.attributes[device.driver]` counts as `domain` only when `driver_domain` is true.
std::optional<std::set<std::string>> ConjunctRestriction(const cel::Expr& root, const std::string& domain,
                                                         const std::string& name, bool driver_domain);

/// True when `root` contains `device.driver == '<driver>'` (either side) anywhere.
bool ComparesDriver(const cel::Expr& root, const std::string& driver);

}  // namespace draguard::dra
