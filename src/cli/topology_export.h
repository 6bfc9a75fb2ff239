// Internal to the CLI: the pieces `topology export` and its --publish loop share.
#pragma once

#include <ostream>
#include <string>

#include "flags.h"
#include "draguard/status.h"
#include "draguard/topology/exporter.h"
#include "draguard/topology/loader.h"

namespace draguard::cli {

/// An export and what the loader reads from it (as the webhook reads it).
struct ExportWithShape {
  topology::LocalExport local;
  topology::ParsedExport parsed;  ///< the loader's model of `local.xml`
  std::string fingerprint;        ///< parsed.shape.fingerprint
};

/// Exports this machine (ExportThisNode), prints its warnings to `err` and checks that the loader
/// accepts the result.
Result<ExportWithShape> ProduceExport(const topology::ExportOptions& options, std::ostream& err);

/// Reads the hwloc XML export in `path` (`topology export --publish -f`) and checks it as
/// ProduceExport checks its own export. The XML is kept as it is; `local.nvml_gpus` is 0.
/// Errors name the file.
Result<ExportWithShape> LoadExportFile(const std::string& path);

/// The --publish loop (topology_publish.cc); returns the exit code.
int TopologyPublish(const Flags& f, const topology::ExportOptions& options, std::ostream& out, std::ostream& err);

}  // namespace draguard::cli
