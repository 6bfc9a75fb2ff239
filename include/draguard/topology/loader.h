// Loading one hwloc XML export (`lstopo --of xml`) into the topology model.
//
// The bytes are first screened without a full parse (size cap, XML-ness, entity declarations,
// nesting depth, dialect), then imported with libhwloc 2.x following the recipe in
// docs/topology.md (I/O filter KEEP_ALL, INCLUDE_DISALLOWED, distances kept, errors checked at
// set_xmlbuffer and load) inside the import sandbox (import_sandbox.h), converted into a Shape
// and the hwloc topology destroyed. No hwloc type leaves the loader. Functions here are
// thread-safe: separate calls share no mutable state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "draguard/status.h"
#include "draguard/topology/model.h"

namespace draguard::topology {

/// Limits applied before and during parsing. The defaults are far above any real export (the
/// largest known one, a 24-socket SGI UV2000 with full I/O, is 335 KB and 14 levels deep).
struct LoaderLimits {
  size_t max_bytes = 16u << 20;  ///< refuse larger exports before parsing (16 MiB)
  uint32_t max_depth = 256;      ///< refuse deeper element nesting before parsing
  bool require_pci = true;       ///< refuse exports without any PCI object (`lstopo --no-io`)
  /// Run the libhwloc import in a forked worker process (import_sandbox.h). libhwloc's XML
  /// importer is not hardened against hostile input (mutated exports crash hwloc 2.9), so a crash
  /// or hang there must cost one refused export, not the webhook.
  bool isolate = true;
  /// Wall-clock budget of one isolated import; a worker over it is killed and replaced.
  uint32_t import_timeout_ms = 10000;
};

/// Why an export was refused; used as the `reason` label of load error metrics.
enum class LoadErrorReason : uint8_t {
  kNone = 0,
  kEmpty,               ///< zero bytes or only whitespace
  kTooLarge,            ///< over LoaderLimits::max_bytes
  kNotXml,              ///< does not start like an XML document / no <topology> root
  kEntity,              ///< DTD internal subset or entity declaration (entity expansion)
  kTooDeep,             ///< nesting deeper than LoaderLimits::max_depth
  kUnsupportedVersion,  ///< hwloc XML 3.x (or an unknown version)
  kMalformed,           ///< libhwloc refused the document (truncated, invalid, ...)
  kNoPci,               ///< no PCI information (exported with --no-io)
  kIo,                  ///< the file could not be read
  kConflict,            ///< another export claims the same node (counted, not a refusal)
};
/// Number of LoadErrorReason values (for counters indexed by reason).
inline constexpr size_t kLoadErrorReasonCount = 11;
/// Stable snake_case name of a reason ("too_large", "unsupported_version", ...).
const char* LoadErrorReasonName(LoadErrorReason reason);

/// One successfully parsed export, before interning: the caller owns the Shape.
struct ParsedExport {
  Shape shape;                          ///< finalized (derived answers + fingerprint computed)
  std::string host_name;                ///< `HostName` info; empty when absent
  std::string hwloc_version;            ///< `hwlocVersion` info; empty when absent
  std::string xml_format;               ///< "1.x" or "2.0"
  std::vector<std::string> gpu_uuids;   ///< parallel to shape.gpus; empty string when unknown
  /// The NVLink clique of the GPUs (`NVIDIAGPUClique` infos of nvml OS devices, which draguard's
  /// exporter writes from NVML): the one value they all give; empty when none gives one, they
  /// disagree, or a value is malformed. Per node (see NodeTopology::nvlink_clique).
  std::string nvlink_clique;
  /// Parallel to shape.numa_nodes: OS index of the CPU package holding the node, kNoIndex when
  /// none; empty when no node has one. Per node, not hardware of the shape (see NodeTopology).
  std::vector<uint32_t> numa_packages;
  /// The logical CPUs, ascending OS index (see LogicalCpu); per node, not hardware of the shape.
  CpuList cpus;
};

/// Parses one export on a one-worker ImportPool made for this call (a fork per call when
/// isolated). On failure returns a Status whose message names the problem (and, for v3 files,
/// the fix); `reason` (optional) receives the LoadErrorReason (kNone on success).
Result<ParsedExport> ParseHwlocXml(std::string_view xml, const LoaderLimits& limits = {},
                                   LoadErrorReason* reason = nullptr);

/// Reads `path` (refusing files over limits.max_bytes before reading them) and parses it.
Result<ParsedExport> ParseHwlocFile(const std::string& path, const LoaderLimits& limits = {},
                                    LoadErrorReason* reason = nullptr);

/// The cheap pre-parse screen on its own (exposed for tests and the fuzzer). On success
/// `format_out` (optional) receives "1.x" or "2.0".
Status ScreenHwlocXml(std::string_view xml, const LoaderLimits& limits, LoadErrorReason* reason,
                      std::string* format_out = nullptr);

/// Node name implied by an export file name: "<node>.hwloc.xml" or "<node>.xml" -> "<node>" as a
/// Kubernetes node name (k8s::NodeNameFrom: kept when it is one, else lower case with `_`, `.`,
/// `+` and every other character but [a-z0-9-] as '-'); empty for other names (hidden files,
/// other extensions, stems with nothing left).
std::string NodeNameFromFileName(std::string_view file_name);

}  // namespace draguard::topology
