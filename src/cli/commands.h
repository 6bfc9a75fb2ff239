// Sub-commands of the draguard binary (internal to the CLI).
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "draguard/status.h"

namespace draguard::topology {
class Store;
}  // namespace draguard::topology

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

/// `draguard convert -f FILE|- [--config F] [--topology-dir DIR|FILE] [--namespace NS] [-o yaml|json]`.
/// Exit codes: 0 converted or nothing to convert, 1 something not convertible, 2 usage/input error.
int Convert(const std::vector<std::string>& args, std::istream& in, std::ostream& out, std::ostream& err);
/// `draguard render [--config F] [--topology-dir DIR|FILE] [--namespace NS]... [-o yaml|json]`.
/// Exit codes: 0 ok (also for an empty catalogue), 1 a profile cannot be generated, 2 usage error.
int Render(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
/// The topology of `convert` and `render`: a directory of exports, one export file, or (empty
/// path) the bundled examples; loaded once, not watched. Defined in convert.cc.
Result<std::unique_ptr<topology::Store>> LoadCliTopology(const std::string& path);

/// `draguard cel eval EXPR --topology FILE|DIR --node NAME`.
int CelEvalOnTopology(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace draguard::cli
