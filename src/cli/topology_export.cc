// `draguard topology export`: this machine's hwloc XML export, enriched from NVML; with
// --publish, kept current in the cluster as the node's shape object and Node publication
// (kubetopo/publisher.h); with --publish -f FILE, a given export file published instead.
#include <cstdio>
#include <fstream>

#include "commands.h"
#include "flags.h"
#include "draguard/read_file.h"
#include "draguard/topology/exporter.h"
#include "draguard/topology/loader.h"
#include "draguard/write_file.h"
#include "topology_export.h"

namespace draguard::cli {
namespace {

constexpr const char* kExportUsage =
    "usage: draguard topology export [-o FILE] [--nvml-library PATH] [--no-nvml]\n"
    "       draguard topology export --publish [-f FILE] [--node NAME] [--namespace NS] [--interval DURATION]\n"
    "                                [--probe-listen HOST:PORT] [--once]\n"
    "  -o, --output FILE       write the export to FILE (default: standard output)\n"
    "      --nvml-library PATH NVML library to load (default: $DRAGUARD_NVML_LIBRARY, else libnvidia-ml.so.1)\n"
    "      --no-nvml           do not load NVML (a plain libhwloc export)\n"
    "      --publish           keep the node's topology published: its shape object draguard-shape-<digest>\n"
    "                          and, on its Node, the shape label and the annotation draguard.io/topology:\n"
    "        -f, --file FILE       publish this hwloc XML export instead of exporting this machine\n"
    "                              (re-read every interval and on SIGHUP; not with the NVML flags)\n"
    "        --node NAME           the Kubernetes node (default: $NODE_NAME)\n"
    "        --namespace NS        release namespace (default: the service account namespace, $POD_NAMESPACE)\n"
    "        --interval DURATION   re-export period (default 10m; SIGHUP re-exports at once)\n"
    "        --probe-listen H:P    plain-HTTP /readyz, /healthz, /metrics (default 0.0.0.0:8081; \"\" = none)\n"
    "        --once                publish once and exit (exit code 2 when it failed)\n";

// The loader's limits for an export about to be published (PCI information optional).
topology::LoaderLimits ExportLimits() {
  topology::LoaderLimits limits;
  limits.require_pci = false;
  return limits;
}

// The loader's model of `xml` when it accepts it (as the webhook would read it).
Result<topology::ParsedExport> Checked(std::string_view xml) { return topology::ParseHwlocXml(xml, ExportLimits()); }

}  // namespace

Result<ExportWithShape> ProduceExport(const topology::ExportOptions& options, std::ostream& err) {
  Result<topology::LocalExport> exp = topology::ExportThisNode(options);
  if (!exp.ok()) return exp.status();
  for (const std::string& w : exp->warnings) err << "topology export: warning: " << w << "\n";
  // The export must be one the loader accepts (as the webhook would read it).
  Result<topology::ParsedExport> parsed = Checked(exp->xml);
  if (!parsed.ok()) return Status::Internal("the export does not load back: " + parsed.status().message());
  std::string fingerprint = parsed->shape.fingerprint;
  return ExportWithShape{std::move(exp).value(), std::move(parsed).value(), std::move(fingerprint)};
}

Result<ExportWithShape> LoadExportFile(const std::string& path) {
  Result<std::string> xml = ReadFile(path, ExportLimits().max_bytes);
  if (!xml.ok()) return Status(xml.status().code(), path + ": " + xml.status().message());
  Result<topology::ParsedExport> parsed = Checked(*xml);
  if (!parsed.ok()) {
    return Status::InvalidArgument(path + ": not an export the loader accepts: " + parsed.status().message());
  }
  ExportWithShape exp;
  exp.local.xml = std::move(xml).value();
  exp.fingerprint = parsed->shape.fingerprint;
  exp.parsed = std::move(parsed).value();
  return exp;
}

int TopologyExport(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  Flags f = ParseFlags(rest,
                       {"-o", "--output", "--nvml-library", "--node", "--namespace", "--interval", "--probe-listen", "-f",
                        "--file"},
                       {"--no-nvml", "--publish", "--once", "-h", "--help"});
  if (f.Has("-h") || f.Has("--help")) {
    out << kExportUsage;
    return kExitOk;
  }
  if (!f.error.empty() || !f.positional.empty()) {
    err << "topology export: " << (f.error.empty() ? "unexpected argument \"" + f.positional[0] + "\"" : f.error)
        << "\n" << kExportUsage;
    return kExitUsage;
  }
  if (f.Has("-f") || f.Has("--file")) {
    const std::string file = f.Get("--file", f.Get("-f"));
    std::string problem;
    if (!f.Has("--publish")) {
      problem = "-f/--file publishes a given export and needs --publish (to check or view a file: draguard topology show -f FILE)";
    } else if (file.empty() || file == "-") {
      problem = "-f/--file needs a file name (it is re-read every interval; standard input is not)";
    } else if (f.Has("--nvml-library") || f.Has("--no-nvml")) {
      problem = "-f/--file publishes the file as it is: --nvml-library and --no-nvml do not apply";
    }
    if (!problem.empty()) {
      err << "topology export: " << problem << "\n" << kExportUsage;
      return kExitUsage;
    }
  }
  topology::ExportOptions options;
  options.use_nvml = !f.Has("--no-nvml");
  options.nvml_library = f.Get("--nvml-library");
  if (f.Has("--publish")) return TopologyPublish(f, options, out, err);
  Result<ExportWithShape> exp = ProduceExport(options, err);
  if (!exp.ok()) {
    err << "topology export: " << exp.status().message() << "\n";
    return kExitRuntime;
  }
  const std::string path = f.Get("--output", f.Get("-o", "-"));
  if (path == "-") {
    out << exp->local.xml;
    return kExitOk;
  }
  if (Status s = WriteFileAtomic(path, exp->local.xml, 0644); !s.ok()) {
    err << "topology export: " << s.message() << "\n";
    return kExitRuntime;
  }
  return kExitOk;
}

}  // namespace draguard::cli
