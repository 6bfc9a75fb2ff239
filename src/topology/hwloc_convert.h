// Internal: the conversion of what libhwloc read (hwloc_import.h) into the topology model, and
// the whole unsandboxed import (read + convert) that the import sandbox runs.
#pragma once

#include <string>

#include "draguard/status.h"
#include "draguard/topology/loader.h"
#include "hwloc_import.h"

namespace draguard::topology::internal {

/// Turns `raw` into a finalized export (without `xml_format`): recognises GPUs and NICs, picks
/// model, memory and UUID, places devices under PCIe roots and NUMA nodes, reads NVLink/XGMI.
/// Fails with kNoPci when limits.require_pci and the export has no PCI information.
Result<ParsedExport> ConvertTopology(const RawTopology& raw, const LoaderLimits& limits, LoadErrorReason* reason);

/// ReadHwlocXml then ConvertTopology, in this process; sets `xml_format` to `format`. On
/// failure `reason` receives why; on success it is left as it is.
Result<ParsedExport> ImportInProcess(const std::string& xml, const std::string& format, const LoaderLimits& limits,
                                     LoadErrorReason* reason);

}  // namespace draguard::topology::internal
