// Internal: regular expressions compiled once per checked expression (literal `matches`
// patterns), shared read-only by every evaluation. RE2 objects are thread-safe for matching.
#pragma once

#include <re2/re2.h>

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "draguard/cel/ast.h"

namespace draguard::cel {

/// Compiled patterns by source text (only valid patterns are stored).
struct CompiledRegexes {
  std::map<std::string, std::unique_ptr<re2::RE2>, std::less<>> by_pattern;  ///< pattern -> RE2
};

/// Compiles every literal pattern of a `matches` call in `root`.
std::shared_ptr<const CompiledRegexes> PrecompileRegexes(const Expr& root);

}  // namespace draguard::cel
