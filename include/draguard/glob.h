// Shell-style glob matching used for resource names, namespaces and users.
#pragma once

#include <string_view>

namespace draguard {

/// True when `text` matches `pattern`, where '*' matches any run of characters (including
/// none) and '?' matches one character. Linear-time in practice (iterative backtracking).
bool GlobMatch(std::string_view pattern, std::string_view text);

}  // namespace draguard
