// The policy backstop of DG001: a ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1)
// that the API server evaluates in-tree, so legacy GPU Pods are rejected even while the webhook
// is unreachable (failurePolicy Ignore). Generated from the policy: legacyResources, the implicit
// deviceclass.resource.kubernetes.io/<class> names, extendedResourceMapping, exemptions
// (namespaces, users, groups, objectSelectors) and the draguard.io/exempt annotation, with the
// validation actions following DG001's action and the global mode. The chart template
// backstop.yaml renders the same CEL text (checked by the chart test).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "draguard/admission/review.h"
#include "draguard/policy/policy.h"
#include "draguard/status.h"

namespace draguard::engine {

/// The CEL of the backstop.
struct Backstop {
  /// matchConditions (name, expression): all must be true for the policy to apply.
  std::vector<std::pair<std::string, std::string>> match_conditions;
  std::string validation;            ///< true = the Pod passes
  std::string message;               ///< the rejection message
  std::vector<std::string> actions;  ///< binding validationActions; empty = DG001 is off (no backstop)
};

/// The backstop for `policy`. InvalidArgument when a glob contains a character the generated
/// CEL cannot carry (quotes, backslashes, brackets, '^').
Result<Backstop> MakeBackstop(const policy::Policy& policy);

/// The ValidatingAdmissionPolicy and its binding, both named `name`; empty when DG001 is off.
std::vector<admission::Json> BackstopObjects(const Backstop& backstop, const std::string& name);

}  // namespace draguard::engine
