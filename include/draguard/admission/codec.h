// Decoding and encoding of AdmissionReview JSON.
//
// Decoding never throws: malformed input yields an InvalidArgument / ResourceExhausted status
// whose message says what was wrong. Accepted envelope versions: admission.k8s.io/v1 and
// admission.k8s.io/v1beta1 (same shape; the response echoes the version received).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "draguard/admission/review.h"
#include "draguard/status.h"

namespace draguard::admission {

/// Limits applied while decoding untrusted bodies.
struct DecodeLimits {
  std::size_t max_bytes = 7 * 1024 * 1024;  ///< 2 objects × 3 MiB (etcd limit) + 1 MiB envelope
  std::size_t max_depth = 128;              ///< JSON nesting; real objects stay far below
};

/// The envelope apiVersion answered by default when the request's is unknown.
inline constexpr std::string_view kAdmissionV1 = "admission.k8s.io/v1";
/// The legacy envelope apiVersion, still accepted.
inline constexpr std::string_view kAdmissionV1beta1 = "admission.k8s.io/v1beta1";

/// Returns the maximum nesting depth of a JSON text (strings are skipped); stops counting past
/// `limit + 1`. Linear time, no allocation.
std::size_t JsonNestingDepth(std::string_view text, std::size_t limit);

/// The longest request.uid accepted: the API server sends a 36-byte UUID.
inline constexpr std::size_t kMaxUidBytes = 128;

/// Bounds of a decoded request checked before it is reviewed, logged or echoed: InvalidArgument
/// when request.uid is longer than kMaxUidBytes.
Status CheckRequestBounds(const AdmissionRequest& request);

/// Decodes an AdmissionReview request body.
Result<AdmissionRequest> DecodeReview(std::string_view body, const DecodeLimits& limits = {});

/// Encodes a response as an AdmissionReview of the given envelope apiVersion.
std::string EncodeReview(const AdmissionResponse& response, std::string_view api_version);

/// Encodes the JSON body sent with an HTTP error (400/413/415/...) for a request that could not
/// be reviewed: an AdmissionReview whose response carries the code and message, plus a top-level
/// "error" string. `uid` may be empty when the request could not be decoded that far. A message
/// longer than 4 KiB is truncated.
std::string EncodeHttpError(int http_code, std::string_view message, std::string_view uid = {});

}  // namespace draguard::admission
