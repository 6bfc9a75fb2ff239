// Semantic Versioning 2.0.0 values for CEL (`semver()`), as the Kubernetes semver library
// (k8s.io/apiserver/pkg/cel/library/semverlib.go, backed by blang/semver/v4) defines them:
// strict parsing, precedence comparison that ignores build metadata, and an optional
// normalisation (leading "v", missing minor/patch, leading zeros) for `semver(s, true)`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "draguard/status.h"

namespace draguard::cel {

/// A parsed semantic version.
struct Semver {
  uint64_t major = 0;               ///< MAJOR
  uint64_t minor = 0;               ///< MINOR
  uint64_t patch = 0;               ///< PATCH
  std::vector<std::string> pre;     ///< pre-release identifiers
  std::vector<std::string> build;   ///< build metadata identifiers (ignored for precedence)

  /// Parses a strict SemVer 2.0.0 string ("1.2.3-rc.1+build"). With `normalize`, first strips a
  /// leading "v", pads missing minor/patch with 0 and drops leading zeros, as semver(s, true) does.
  static Result<Semver> Parse(std::string_view s, bool normalize = false);
  /// -1, 0 or 1 by SemVer precedence.
  int Compare(const Semver& other) const;
  /// "MAJOR.MINOR.PATCH[-pre][+build]".
  std::string ToString() const;
};

}  // namespace draguard::cel
