// `draguard cel ...`: command-line access to the CEL module, wired into main by the CLI module.
//
//   draguard cel check EXPR [--allow-multiple-allocations]
//       Compiles EXPR as a DRA device selector; prints "OK" and one line per attribute/capacity
//       reference (kind, domain/name, guarded or UNGUARDED, position), or the error with a caret.
//   draguard cel eval EXPR --device JSON|@FILE [--allow-multiple-allocations] [--cost-limit N]
//       Compiles and evaluates EXPR against one device (JSON form in device.h); prints true, false
//       or "error: CEL runtime error: ...".
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace draguard::cel {

/// Exit codes of RunCelCommand.
inline constexpr int kCelExitOk = 0;
inline constexpr int kCelExitUsage = 1;
inline constexpr int kCelExitError = 2;

/// Runs `draguard cel <args...>` (args are the words after "cel"). Writes results to `out` and
/// diagnostics to `err`. Returns 0 on success (also when eval prints false), 1 on a usage error,
/// 2 on a parse, check or evaluation error.
int RunCelCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace draguard::cel
