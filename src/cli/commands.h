// Sub-commands of the draguard binary (internal to the CLI).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace draguard::cli {

/// Exit codes: 0 ok, 1 usage or configuration error, 2 runtime error.
inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 1;
inline constexpr int kExitRuntime = 2;

/// `draguard serve [flags]`.
int Serve(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
/// `draguard review [--mutate] -f FILE|- [--config FILE]`.
int Review(const std::vector<std::string>& args, std::istream& in, std::ostream& out,
           std::ostream& err);

/// `draguard cel eval EXPR --topology FILE|DIR --node NAME`.
int CelEvalOnTopology(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace draguard::cli
