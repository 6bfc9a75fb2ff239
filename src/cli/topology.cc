// `draguard topology show`: the topology model of hwloc exports as JSON or a table.
#include "commands.h"
#include "draguard/topology/format.h"
#include "draguard/topology/snapshot.h"

namespace draguard::cli {
namespace {

constexpr const char* kUsage =
    "usage: draguard topology show -f FILE|DIR [-o json|table] [--node NAME]\n"
    "  -f, --file FILE|DIR   hwloc XML export, or a directory of <node>.xml / <node>.hwloc.xml files\n"
    "  -o, --output FORMAT   json (default) or table\n"
    "      --node NAME       show only this node\n"
    "usage: draguard topology export [-o FILE] [--nvml-library PATH] [--no-nvml]   (see export --help)\n";

int Show(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string path;
  std::string output = "json";
  std::string node;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string& dst) {
      if (i + 1 >= args.size()) return false;
      dst = args[++i];
      return true;
    };
    bool ok = true;
    if (a == "-f" || a == "--file") {
      ok = value(path);
    } else if (a.rfind("--file=", 0) == 0) {
      path = a.substr(7);
    } else if (a == "-o" || a == "--output") {
      ok = value(output);
    } else if (a.rfind("--output=", 0) == 0) {
      output = a.substr(9);
    } else if (a == "--node") {
      ok = value(node);
    } else if (a.rfind("--node=", 0) == 0) {
      node = a.substr(7);
    } else if (a == "-h" || a == "--help") {
      out << kUsage;
      return kExitOk;
    } else {
      err << "topology show: unknown argument \"" << a << "\"\n" << kUsage;
      return kExitUsage;
    }
    if (!ok) {
      err << "topology show: " << a << " needs a value\n" << kUsage;
      return kExitUsage;
    }
  }
  if (path.empty()) {
    err << "topology show: -f FILE|DIR is required\n" << kUsage;
    return kExitUsage;
  }
  if (output != "json" && output != "table") {
    err << "topology show: unknown output format \"" << output << "\" (json or table)\n";
    return kExitUsage;
  }
  std::vector<topology::LoadProblem> problems;
  auto snap = topology::LoadSnapshot(path, topology::LoaderLimits{}, &problems);
  if (!snap.ok()) {
    err << "topology show: " << snap.status().message() << "\n";
    return kExitRuntime;
  }
  for (const topology::LoadProblem& p : problems) {
    err << "topology show: warning: " << (p.reason == topology::LoadErrorReason::kConflict ? "" : "skipped ")
        << p.status.message() << "\n";
  }
  const topology::Snapshot& s = *snap.value();
  if (!node.empty() && s.Find(node) == nullptr) {
    err << "topology show: node \"" << node << "\" not found in " << path << "\n";
    return kExitRuntime;
  }
  if (s.node_count() == 0) {
    err << "topology show: no loadable hwloc export in " << path << "\n";
    return kExitRuntime;
  }
  out << (output == "json" ? topology::FormatJson(s, node) : topology::FormatTable(s, node));
  return kExitOk;
}

}  // namespace

int Topology(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    (args.empty() ? err : out) << kUsage;
    return args.empty() ? kExitUsage : kExitOk;
  }
  if (args[0] == "show") return Show(args, out, err);
  if (args[0] == "export") return TopologyExport(args, out, err);
  err << "topology: unknown subcommand \"" << args[0] << "\"\n" << kUsage;
  return kExitUsage;
}

}  // namespace draguard::cli
