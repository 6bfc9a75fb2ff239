// Sub-commands of the draguard binary (internal to the CLI).
#pragma once

#include <istream>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "draguard/status.h"

namespace draguard::policy {
class PolicyStore;
struct Policy;
}  // namespace draguard::policy
namespace draguard::topology {
class Store;
class Snapshot;
}  // namespace draguard::topology
namespace draguard::kube {
class Client;
}  // namespace draguard::kube

namespace draguard::cli {

/// Exit codes: 0 ok, 1 usage or configuration error, 2 runtime error.
inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 1;
inline constexpr int kExitRuntime = 2;

/// The whole usage text of the binary (`draguard help`).
std::string UsageText();
/// The usage lines and flag section of one subcommand (`draguard CMD --help`); the whole text
/// for an unknown command.
std::string CommandUsage(const std::string& command);

/// `draguard serve [flags]`.
int Serve(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
/// `draguard review [--mutate [--show-patch] [--draw DIR]] -f FILE|- [--config FILE]`.
int Review(const std::vector<std::string>& args, std::istream& in, std::ostream& out,
           std::ostream& err);

/// `draguard convert -f FILE|- [--config F] [--topology-dir DIR|FILE] [--namespace NS] [-o yaml|json]
/// [--draw DIR]` (--draw: the placement pictures, WritePlacementPictures).
/// Exit codes: 0 converted or nothing to convert, 1 something not convertible, 2 usage/input error.
int Convert(const std::vector<std::string>& args, std::istream& in, std::ostream& out, std::ostream& err);
/// `draguard audit -f FILE|DIR|- [-f ...] [--config F] [--topology-dir D] [-o table|json|yaml|policyreport]`.
/// Exit codes: 0 nothing denied, 1 something denied (--fail-on warn|audit tightens), 2 usage,
/// input or policy error.
int Audit(const std::vector<std::string>& args, std::istream& in, std::ostream& out, std::ostream& err);
/// `draguard render [--config F] [--topology-dir DIR|FILE] [--namespace NS]... [-o yaml|json]`.
/// Exit codes: 0 ok (also for an empty catalogue), 1 a profile cannot be generated, 2 usage error.
int Render(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
/// `draguard cel check EXPR [--allow-multiple-allocations]`: compiles EXPR as a DRA device selector;
/// prints "OK" and one line per attribute/capacity reference, or the error with a caret.
/// `draguard cel eval EXPR --device JSON|@FILE [--allow-multiple-allocations] [--cost-limit N]`:
/// prints true, false or "error: CEL runtime error: ...".
/// `draguard cel eval EXPR --topology FILE|DIR --node NAME`: one line per simulated device of NAME.
/// Exit codes: 0 ok (also when eval prints false), 1 usage error, 2 parse, check, evaluation or
/// topology error.
int Cel(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
/// `draguard topology show -f FILE|DIR [-o json|table] [--node NAME]`.
/// Exit codes: 0 ok, 1 usage error, 2 nothing loadable, an unreadable path or an unknown --node.
int Topology(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
/// `draguard topology export [-o FILE] [--nvml-library PATH] [--no-nvml]` (args[0] == "export").
/// Exit codes: 0 ok (also without NVML), 1 usage error, 2 libhwloc or write failure.
int TopologyExport(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
/// `draguard topology draw -f FILE|DIR [-o FILE.svg|DIR] [--node NAME]` (args[0] == "draw"): one
/// SVG per node (topology/draw.h). Exit codes: 0 ok, 1 usage error (also several nodes without
/// -o DIR), 2 nothing loadable, an unknown --node or a write failure.
int TopologyDraw(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

/// `draguard backstop [--config F] [--name NAME] [--namespace NS] [-o yaml|json]`: the
/// ValidatingAdmissionPolicy + binding that enforce DG001 in-tree. Exit codes: 0 ok (nothing
/// printed when DG001 is off), 1 usage error or bad policy, 2 generated CEL does not compile.
int Backstop(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

/// `draguard uninstall-webhooks [--validating NAME]... [--mutating NAME]... [--secret NAME
/// --namespace NS]`: deletes them through the in-cluster API (the chart's pre-delete hook); an
/// object already gone counts as deleted. Exit codes: 0 all gone, 1 usage error, 2 API error.
int UninstallWebhooks(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
/// The work of UninstallWebhooks on `client`: DELETE each configuration (and the Secret when
/// `secret` is set); 404 is success. Returns the first failure after trying every object.
Status DeleteWebhookConfigurations(const kube::Client& client, const std::vector<std::string>& validating,
                                   const std::vector<std::string>& mutating, const std::string& secret_namespace,
                                   const std::string& secret, std::ostream& out);
/// `draguard selftest --url https://HOST[:PORT] --ca-file FILE [--expect deny|audit]`: posts a
/// legacy-GPU Pod review to HOST/validate over TLS verified against FILE and HOST; exit 0 only on
/// the DG001 denial (or, with --expect audit, its audit annotation). 1 usage error, 2 failure.
int Selftest(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// ---- Shared by the offline commands (review, convert, render); defined in offline_io.cc. ----
struct Flags;

/// Loads `--config FILE` into `policies`, or the built-in default policy without --config. On
/// failure prints "draguard COMMAND: <why>" to `err` and returns false.
bool LoadCliPolicy(const Flags& f, policy::PolicyStore& policies, const std::string& command, std::ostream& err);
/// The topology of `convert` and `render` (`--topology-dir`): a directory of exports, one export
/// file, "bundled:examples" (the demo machines, by name only), or (no flag) none; loaded once,
/// not watched. On failure prints
/// "draguard COMMAND: --topology-dir: <why>" to `err` and returns null.
std::unique_ptr<topology::Store> LoadCliTopology(const Flags& f, const std::string& command, std::ostream& err);
/// Largest `-f FILE` the offline commands read.
inline constexpr std::size_t kMaxCliInputBytes = std::size_t{256} << 20;
/// The input of `-f FILE`: the file's bytes (at most kMaxCliInputBytes, regular files only; errors
/// from ReadFile), or all of `in` for "-".
Result<std::string> ReadCliInput(const std::string& file, std::istream& in);
/// The `-o` / `--output` format (default yaml). Anything but yaml or json: prints
/// `draguard COMMAND: -o must be yaml or json, not "X"` to `err` and returns "".
std::string CliOutputFormat(const Flags& f, const std::string& command, std::ostream& err);
/// Prints `objects` as one v1 List (format "json", indented by 2) or as YAML documents, each after
/// "---" and, where `comments[i]` is not empty, a "# comments[i]" line.
void PrintObjects(std::ostream& out, const std::string& format, std::vector<nlohmann::json> objects,
                  const std::vector<std::string>& comments = {});
/// `--draw DIR` of convert and review --mutate: writes mutation::DrawPlacements(object, ...) to
/// DIR/<picture name>.svg, a name already in `written` getting "-2", "-3", ...; prints
/// "draguard COMMAND: drew PATH" per file to `err`. False (error printed) when a file cannot be
/// written.
bool WritePlacementPictures(const std::string& dir, const nlohmann::json& object, const std::string& namespace_name,
                            const policy::Policy& policy, const topology::Snapshot* topology,
                            const std::string& command, std::set<std::string>& written, std::ostream& err);
/// Writes `svg` to DIR/<name>.svg (DIR is created when missing; characters of `name` other than
/// letters, digits, '.', '_' and '-' become '_'). Returns the path written.
Result<std::string> WriteSvgFile(const std::string& dir, const std::string& name, const std::string& svg);


}  // namespace draguard::cli
