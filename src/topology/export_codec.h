// Internal: binary encoding of a ParsedExport, used to hand the result of an isolated (forked)
// libhwloc import back to the parent process. Not a public or persistent format.
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

}  // namespace draguard::topology::internal
