// The `draguard topology ...` subcommands, callable without the main binary (the CLI's main
// forwards the words after `topology`).
//
//   topology show -f FILE|DIR [-o json|table] [--node NAME]
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace draguard::topology {

/// Runs a topology subcommand. `args` are the words after `topology`, e.g.
/// {"show", "-f", "/path/node.xml", "-o", "json"}. Writes results to `out` and diagnostics to
/// `err`. Returns 0 on success, 1 on a usage error, 2 on a runtime error (nothing loadable, an
/// unreadable path, an unknown --node).
int RunTopologyCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace draguard::topology
