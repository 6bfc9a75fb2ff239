// `draguard topology export`: this machine's hwloc XML export, enriched from NVML; with
// --publish, kept current in the node's topology ConfigMap (kubetopo/publisher.h).
#include <cstdio>
#include <fstream>

#include "commands.h"
#include "flags.h"
#include "draguard/topology/exporter.h"
#include "draguard/topology/loader.h"
#include "draguard/write_file.h"
#include "topology_export.h"

namespace draguard::cli {
namespace {

constexpr const char* kExportUsage =
    "usage: draguard topology export [-o FILE] [--nvml-library PATH] [--no-nvml]\n"
    "  -o, --output FILE       write the export to FILE (default: standard output)\n"
    "      --nvml-library PATH NVML library to load (default: $DRAGUARD_NVML_LIBRARY, else libnvidia-ml.so.1)\n"
    "      --no-nvml           do not load NVML (a plain libhwloc export)\n"
    "      --publish           keep ConfigMap draguard-topology-<node> and the Node's shape label current:\n"
    "        --node NAME           the Kubernetes node (default: $NODE_NAME)\n"
    "        --namespace NS        release namespace (default: the service account namespace, $POD_NAMESPACE)\n"
    "        --interval DURATION   re-export period (default 10m; SIGHUP re-exports at once)\n"
    "        --probe-listen H:P    plain-HTTP /readyz, /healthz, /metrics (default 0.0.0.0:8081; \"\" = none)\n"
    "        --once                publish once and exit (exit code 2 when it failed)\n";

}  // namespace

Result<ExportWithShape> ProduceExport(const topology::ExportOptions& options, std::ostream& err) {
  Result<topology::LocalExport> exp = topology::ExportThisNode(options);
  if (!exp.ok()) return exp.status();
  for (const std::string& w : exp->warnings) err << "topology export: warning: " << w << "\n";
  // The export must be one the loader accepts (as the webhook will read it).
  topology::LoaderLimits limits;
  limits.require_pci = false;
  Result<topology::ParsedExport> parsed = topology::ParseHwlocXml(exp->xml, limits);
  if (!parsed.ok()) return Status::Internal("the export does not load back: " + parsed.status().message());
  return ExportWithShape{std::move(exp).value(), parsed->shape.fingerprint};
}

int TopologyExport(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  Flags f = ParseFlags(rest, {"-o", "--output", "--nvml-library", "--node", "--namespace", "--interval", "--probe-listen"},
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
