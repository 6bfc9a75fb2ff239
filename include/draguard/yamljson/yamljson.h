// YAML (and JSON, a subset of YAML) documents into JSON values, with Kubernetes-style scalar
// typing: plain scalars become bool / null / int / float when they look like one, quoted
// scalars stay strings.
#pragma once

#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "draguard/status.h"

namespace draguard::yamljson {

/// Parses every document of a YAML stream (empty documents are skipped). Never throws; depth
/// is limited to 128 and the input to 16 MiB.
Result<std::vector<nlohmann::json>> ParseDocuments(std::string_view text);

}  // namespace draguard::yamljson
