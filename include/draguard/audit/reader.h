// Streaming reader of manifests and cluster dumps for the audit: YAML streams (one document at a
// time, `kind: List` items one at a time), JSON values and JSON Lists (items one at a time through
// a SAX parser), files and directories. Memory is bounded by the largest document or item, never
// by the input.
#pragma once

#include <cstdint>
#include <functional>
#include <istream>
#include <optional>
#include <string>

#include "draguard/admission/review.h"
#include "draguard/status.h"

namespace draguard::audit {

/// One document (or List item) read from a source.
struct Document {
  std::string source;                ///< file path, or "-" for standard input
  std::size_t index = 0;             ///< 0-based document index in the source
  std::optional<std::size_t> item;   ///< 0-based item index when the document is a List
  admission::Json object;            ///< the parsed value (null when `error` is set)
  std::string error;                 ///< non-empty: the document is malformed and why
  std::uint64_t offset = 0;          ///< bytes of the source consumed so far (for progress)
  /// "FILE: document N" or "FILE: document N item M".
  std::string Where() const;
};

/// Receives each document; returning false stops the reading.
using DocumentSink = std::function<bool(Document&&)>;

/// Limits of the reader.
struct ReadLimits {
  std::size_t max_document_bytes = std::size_t{16} << 20;  ///< one YAML document or List item (16 MiB)
};

/// Reads every document of `in` (YAML, or JSON when the first character is '{' or '['). A
/// malformed YAML document is passed on with `error` set and reading goes on with the next one;
/// malformed JSON ends the source (also passed on as an error document). Never throws.
void ReadStream(std::istream& in, const std::string& source, const DocumentSink& sink, ReadLimits limits = {});

/// Reads a file, or every *.yaml, *.yml and *.json file below a directory (recursively, in path
/// order). NotFound / InvalidArgument for a path that cannot be read; documents go to `sink`.
Status ReadPath(const std::string& path, const DocumentSink& sink, ReadLimits limits = {});

}  // namespace draguard::audit
