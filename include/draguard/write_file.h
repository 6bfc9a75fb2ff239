// Writing a whole file atomically and safely: keys, certificates, exports.
#pragma once

#include <string>

#include "draguard/status.h"

namespace draguard {

/// Writes `data` to `path` atomically: a new temporary file created with O_CREAT|O_EXCL (mkstemp,
/// so no planted file or symlink is ever opened) in the same directory with mode `mode`, written,
/// fsync()ed and renamed over `path` (a symlink at `path` is replaced, not followed). On failure
/// the temporary file is removed and `path` is unchanged.
Status WriteFileAtomic(const std::string& path, const std::string& data, unsigned mode = 0600);

}  // namespace draguard
