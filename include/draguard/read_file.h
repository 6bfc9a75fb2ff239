// Reading a whole small file (certificates, keys, tokens, policy and topology files, manifests).
#pragma once

#include <cstddef>
#include <string>

#include "draguard/status.h"

namespace draguard {

/// Reads the regular file at `path` whole, at most `max_bytes` (default 1 MiB). Never blocks on a
/// FIFO or device: anything but a regular file is refused. NotFound when it cannot be opened
/// ("cannot open PATH: reason"), InvalidArgument when it is not a regular file, ResourceExhausted
/// when it is larger than `max_bytes` ("PATH: larger than N bytes").
Result<std::string> ReadFile(const std::string& path, std::size_t max_bytes = std::size_t{1} << 20);

}  // namespace draguard
