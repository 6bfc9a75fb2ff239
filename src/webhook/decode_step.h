// Internal to the webhook module: the first step every review shares (Reviewer::Review and
// ReviewTopologyObject): decode the body, check the request's bounds, and record the request's
// facts for the log.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "draguard/admission/codec.h"
#include "draguard/webhook/reviewer.h"

namespace draguard::webhook::internal {

/// Decodes `body` within `limits` (scope, pool and readable_past_end as for
/// admission::DecodeReview). On success fills `out`'s request facts (uid, kind, namespace, name,
/// operation, user, dryRun; not kind_label) and returns the request; otherwise fills `out` with
/// the answer (413 for an oversized body, else 400, verdict kError) and returns nullopt.
std::optional<admission::AdmissionRequest> DecodeStep(std::string_view body, const admission::DecodeLimits& limits,
                                                      admission::DecodeScope scope, const admission::DecodePool* pool,
                                                      std::size_t readable_past_end, ReviewOutcome& out);

}  // namespace draguard::webhook::internal
