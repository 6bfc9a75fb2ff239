// The one place that builds AdmissionResponses.
//
// Every response leaves through Complete(), which enforces the protocol's invariants: the uid is
// echoed, warnings respect the API server's limits, audit-annotation keys are valid, a deny carries
// a status, and a patch is only ever sent by the mutating webhook and only when non-empty.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "draguard/admission/review.h"

namespace draguard::admission {

/// Which webhook answers: only the mutating one may carry a patch.
enum class WebhookKind { kValidating, kMutating };

/// Longest warning kept intact; longer ones are cut with "...".
inline constexpr std::size_t kMaxWarningChars = 120;
/// Total warning budget; warnings past it are dropped (the API server drops them anyway).
inline constexpr std::size_t kMaxWarningBytesTotal = 4096;
/// Longest deny message; kubectl shows it on one screen.
inline constexpr std::size_t kMaxDenyMessageBytes = 1024;
/// Longest audit annotation value, in bytes (UTF-8 safe cut, "..." appended).
inline constexpr std::size_t kMaxAuditAnnotationValueBytes = 4096;

/// An allowing response.
AdmissionResponse Allowed();

/// A denying response with a status (403 Forbidden for policy denials).
AdmissionResponse Denied(std::string message, int code = 403, std::string reason = "Forbidden");

/// Appends a warning (limits are applied by Complete()).
void AddWarning(AdmissionResponse& response, std::string warning);

/// Sets an audit annotation (the key is normalised by Complete()).
void AddAuditAnnotation(AdmissionResponse& response, std::string key, std::string value);

/// Sets the JSON Patch (RFC 6902 array text). "[]" or "" means no patch.
void SetPatch(AdmissionResponse& response, std::string json_patch);

/// Final step for every response: echoes `uid`, applies all limits and invariants.
AdmissionResponse Complete(AdmissionResponse response, std::string_view uid, WebhookKind webhook);

/// True when `key` may be used as an auditAnnotations key: the name part of a qualified name
/// (≤ 63 chars of [A-Za-z0-9-_.], alphanumeric at both ends), since the API server prefixes it
/// with "<webhook-name>/".
bool IsValidAuditAnnotationKey(std::string_view key);

/// Turns any string into a valid audit-annotation key (lower-case, invalid chars → '-', ≤ 63).
std::string NormalizeAuditAnnotationKey(std::string_view key);

/// Applies the warning limits: each cut to kMaxWarningChars characters (UTF-8 safe), the list
/// cut where the total would pass kMaxWarningBytesTotal, duplicates removed.
std::vector<std::string> LimitWarnings(std::vector<std::string> warnings);

/// Cuts `text` to at most `max_bytes` bytes on a UTF-8 boundary, ending with "..." when cut.
std::string TruncateUtf8(std::string_view text, std::size_t max_bytes);

/// TruncateUtf8 of `text` in its own buffer: nothing is copied or allocated.
void TruncateUtf8InPlace(std::string& text, std::size_t max_bytes);

}  // namespace draguard::admission
