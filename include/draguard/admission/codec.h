// Decoding and encoding of AdmissionReview JSON.
//
// Decoding never throws: malformed input yields an InvalidArgument / ResourceExhausted status
// whose message says what was wrong. Accepted envelope versions: admission.k8s.io/v1 and
// admission.k8s.io/v1beta1 (same shape; the response echoes the version received).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "draguard/admission/review.h"
#include "draguard/status.h"

namespace draguard::admission {

/// The JSON parser a decode uses.
enum class Decoder {
  kFast,       ///< simdjson, falling back to kReference for any text it refuses (same answers)
  kReference,  ///< nlohmann_json's parser alone: the oracle of the differential tests
};

/// Limits applied while decoding untrusted bodies.
struct DecodeLimits {
  std::size_t max_bytes = 7 * 1024 * 1024;  ///< 2 objects × 3 MiB (etcd limit) + 1 MiB envelope
  std::size_t max_depth = 128;              ///< JSON nesting; real objects stay far below
  Decoder decoder = Decoder::kFast;         ///< which parser reads the body
};

/// How much of the reviewed objects a decode keeps.
enum class DecodeScope {
  kFull,        ///< every field (what a JSON patch is computed against)
  kRuleFields,  ///< without the subtrees no rule reads: metadata.managedFields and the container
                ///< fields env, envFrom, args, command, probes, lifecycle, ports, volumeMounts,
                ///< volumeDevices. The whole body is still validated. A request with an
                ///< oldObject is decoded whole (rules compare the two). kReference ignores it.
};

namespace internal {
class ParserPool;
}  // namespace internal

/// Parser buffers and documents reused across decodes, so that decoding a review of ordinary size
/// allocates no parser and few nodes (thread-safe; one parser per concurrent decode). Bodies up to
/// kPooledBodyBytes use a pooled parser; larger ones get one of their own, freed with the decode.
/// A reviewed object given back with Recycle is rebuilt in place by a later fast decode of a body
/// up to kRecycledBodyBytes: nodes of the same keys are kept and reassigned, the rest removed or
/// added, so the next review of a similar object allocates and frees only what differs.
class DecodePool {
 public:
  /// The largest body decoded with a pooled parser (whose buffers are kept: ~1 MiB each).
  static constexpr std::size_t kPooledBodyBytes = 64 * 1024;
  /// The most parsers kept; more concurrent decodes than this allocate and free their own. Also
  /// the most recycled documents kept.
  static constexpr std::size_t kMaxPooledParsers = 16;
  /// The largest body whose reviewed object is recycled, and whose decode rebuilds a recycled one:
  /// bounds what the kept documents hold (at most kMaxPooledParsers of them).
  static constexpr std::size_t kRecycledBodyBytes = 16 * 1024;

  /// An empty pool; parsers are made on first use.
  DecodePool();
  ~DecodePool();
  DecodePool(const DecodePool&) = delete;
  DecodePool& operator=(const DecodePool&) = delete;

  /// The parsers, for the decoder.
  internal::ParserPool& parsers() const { return *parsers_; }

  /// Keeps a decoded request's reviewed object (moved from `object`, which is left null) for a
  /// later decode to rebuild, when the body it came from had at most kRecycledBodyBytes and fewer
  /// than kMaxPooledParsers documents are kept; otherwise leaves `object` as it is.
  void Recycle(Json& object, std::size_t body_bytes) const;

 private:
  std::unique_ptr<internal::ParserPool> parsers_;
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

/// Bytes past the end of a body that, when they may be read, let the fast parser read the body
/// where it lies instead of copying it (its wide loads run over the end; the bytes are not used).
inline constexpr std::size_t kBodyPadding = 64;

/// Decodes an AdmissionReview request body; with a `pool`, the fast parser's buffers come from it.
/// `readable_past_end`: how many bytes after `body` are allocated and may be read (never written),
/// e.g. a std::string's spare capacity; at least kBodyPadding saves the parser a copy of the body.
Result<AdmissionRequest> DecodeReview(std::string_view body, const DecodeLimits& limits = {},
                                      DecodeScope scope = DecodeScope::kFull,
                                      const DecodePool* pool = nullptr, std::size_t readable_past_end = 0);

/// Encodes a response as an AdmissionReview of the given envelope apiVersion.
std::string EncodeReview(const AdmissionResponse& response, std::string_view api_version);

/// Encodes the JSON body sent with an HTTP error (400/413/415/...) for a request that could not
/// be reviewed: an AdmissionReview whose response carries the code and message, plus a top-level
/// "error" string. `uid` may be empty when the request could not be decoded that far. A message
/// longer than 4 KiB is truncated.
std::string EncodeHttpError(int http_code, std::string_view message, std::string_view uid = {});

}  // namespace draguard::admission
