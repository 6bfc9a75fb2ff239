// Standard base64 (RFC 4648 §4, the alphabet with '+' and '/').
#pragma once

#include <string>
#include <string_view>

#include "draguard/status.h"

namespace draguard {

/// Encodes `data` with padding.
std::string Base64Encode(std::string_view data);

/// Decodes `data`. With `require_padding` the length must be a multiple of 4 (Go's
/// StdEncoding, used by Kubernetes); without it trailing '=' may be omitted. Any other
/// character, or padding inside the text, is an error.
Result<std::string> Base64Decode(std::string_view data, bool require_padding = true);

}  // namespace draguard
