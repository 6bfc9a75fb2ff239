// The fast JSON parse of review bodies (simdjson), internal to the admission module: simdjson types
// stay in fast_parse.cc.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "draguard/admission/codec.h"
#include "draguard/admission/review.h"

namespace draguard::admission::internal {

/// Parses and validates the whole text with simdjson's DOM parser (UTF-8, structure, numbers,
/// nesting ≤ `max_depth`) and reads the review from it: the envelope straight from the parsed
/// text, the objects as documents. With `rule_fields_only`, the subtrees of request.object that no
/// rule reads are left out (they are still validated); a request with an oldObject is kept whole,
/// since rules compare the two objects. Sets `*refused` when simdjson refuses the text or cannot
/// represent it exactly (e.g. an integer past 64 bits, a byte order mark): the result is then an
/// error to discard, and the caller decodes the text with the reference parser, which gives
/// today's answer, error or not. With `pool`, a text of up to DecodePool::kPooledBodyBytes borrows
/// a parser from it instead of allocating one. With `readable_past_end` ≥ kBodyPadding the text
/// is parsed where it lies, else from a padded copy. The result is returned in place, so the
/// decoded request is moved only into it.
Result<AdmissionRequest> FastDecode(std::string_view text, std::size_t readable_past_end, std::size_t max_depth,
                                    bool rule_fields_only, ParserPool* pool, bool* refused);

/// Whether a member of a container object (an element of spec.containers, spec.initContainers or
/// spec.ephemeralContainers) is left out of a rule-fields decode.
bool IsSkippedContainerField(std::string_view key);

}  // namespace draguard::admission::internal
