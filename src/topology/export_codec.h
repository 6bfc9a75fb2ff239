// Internal: binary encodings of a ParsedExport.
//   * The worker encoding hands the result of an isolated (forked) libhwloc import back to the
//     parent process; not persistent.
//   * The shape record (shape_record.h) is what identical nodes share: the shared fields and the
//     shape, without the node's own fields; it is stored, so its magic names its version.
#pragma once

#include <string>
#include <string_view>

#include "draguard/status.h"
#include "draguard/topology/loader.h"

namespace draguard::topology::internal {

/// Encodes the hardware fields of a shape (not `derived`/`fingerprint`); integers little-endian.
std::string EncodeShape(const Shape& s);
/// Encodes the hardware fields and identity of `p` (not `derived`/`fingerprint`).
std::string EncodeExport(const ParsedExport& p);
/// Decodes EncodeExport output, validating every length and index; runs FinalizeShape.
Result<ParsedExport> DecodeExport(std::string_view bytes);
/// Encodes the shared fields (packages, CPUs) and the shape of `p`, not its node's own fields.
std::string EncodeRecord(const ParsedExport& p);
/// Decodes EncodeRecord output, validating every length and index, allocating at most `budget`
/// bytes for lists and strings; the node's own fields stay empty (gpu_uuids one empty string per
/// GPU). Does not run FinalizeShape. InvalidArgument with the reason otherwise.
Result<ParsedExport> DecodeRecord(std::string_view bytes, size_t budget);

}  // namespace draguard::topology::internal
