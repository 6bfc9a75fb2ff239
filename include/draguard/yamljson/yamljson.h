// YAML (and JSON, a subset of YAML) documents into JSON values, with Kubernetes-style scalar
// typing: plain scalars become bool / null / int / float when they look like one, quoted
// scalars stay strings. And back: JSON values as block-style YAML.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "draguard/status.h"

namespace draguard::yamljson {

/// Parses every document of a YAML stream (empty documents are skipped). Never throws; depth
/// is limited to 128 and the input to 16 MiB.
Result<std::vector<nlohmann::json>> ParseDocuments(std::string_view text);

/// One JSON value as a block-style YAML document (no leading "---", ends with a newline).
/// Strings that a YAML reader could retype ("true", "1", "0x1F", "null", "~", "yes", "on",
/// "1e3", "", "a: b", leading indicators, ...) are quoted, so ParseDocuments(ToYaml(v)) gives
/// back exactly `v` (object keys in nlohmann's order; integers and floats as nlohmann prints them).
std::string ToYaml(const nlohmann::json& value);

}  // namespace draguard::yamljson
