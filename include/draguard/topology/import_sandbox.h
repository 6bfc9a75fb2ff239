// The fork sandbox around libhwloc: imports run in long-lived worker processes, so that a crash
// or hang of libhwloc on a hostile export costs one refused export, not the webhook.
//
// libhwloc's XML importer is not hardened against hostile input (mutated exports make 2.9
// dereference a NULL bitmap). Each worker is a forked child that imports the exports sent over a
// socketpair and returns each result through a validated binary encoding (export_codec.h); it
// is replaced when it crashes, hangs past LoaderLimits::import_timeout_ms or sends garbage, and
// the export it was working on is refused. The parent calls libhwloc only in a once-only
// warm-up before the first fork, so no hwloc/libxml2 lock can be held at fork time.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "draguard/status.h"
#include "draguard/topology/loader.h"

namespace draguard::topology {

/// Isolated import workers, reused across calls; what the Store uses (one slot per parse
/// thread). Forking once per slot instead of once per call avoids the copy-on-write storm a busy
/// parent suffers while children come and go. Thread-safe; at most `slots` imports run at once.
/// Workers start at their first import; the destructor stops them.
class ImportPool {
 public:
  /// Creates a pool with `slots` (>= 1) workers, started lazily.
  explicit ImportPool(unsigned slots);
  ~ImportPool();
  ImportPool(const ImportPool&) = delete;
  ImportPool& operator=(const ImportPool&) = delete;
  /// Screens and imports `xmls` on one worker (in this process when !limits.isolate); results
  /// (and `reasons`, optional) are parallel to `xmls`. A worker that dies on one export is
  /// replaced and the batch continues after it.
  std::vector<Result<ParsedExport>> ParseBatch(const std::vector<std::string_view>& xmls, const LoaderLimits& limits,
                                               std::vector<LoadErrorReason>* reasons = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace draguard::topology
