// Publisher: writes one node's hwloc export to its topology ConfigMap and labels the Node with
// the shape fingerprint (`draguard topology export --publish`).
//
// ConfigMap `draguard-topology-<node>` in the release namespace, labelled
// draguard.io/topology=hwloc and draguard.io/node=<node>, owned by the Node (an ownerReference
// with the Node's uid, so the garbage collector deletes it with the node). The export goes to
// data["topology.xml"], or gzip-compressed to binaryData["topology.xml.gz"] when it is over
// compress_over bytes (ConfigMaps are limited to 1 MiB); ConfigMapSource reads both. Nothing is
// written when the ConfigMap already holds exactly this content, these labels and the owner; the
// Node gets a JSON merge patch of the single label draguard.io/topology-shape only when its
// value differs.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "draguard/kube/client.h"
#include "draguard/status.h"

namespace draguard::kubetopo {

/// Label value selecting topology ConfigMaps (label draguard.io/topology).
inline constexpr const char* kTopologyLabel = "draguard.io/topology";
/// Data key of a compressed export in binaryData.
inline constexpr const char* kCompressedTopologyKey = "topology.xml.gz";
/// Exports over this many bytes are compressed (room left for metadata in the 1 MiB object).
inline constexpr size_t kCompressOver = 1000 * 1024;

/// "draguard-topology-<node>".
std::string ConfigMapNameFor(std::string_view node);

/// Options of a Publisher.
struct PublisherOptions {
  std::string node;            ///< Kubernetes node name (required)
  std::string namespace_name;  ///< release namespace (required)
  size_t compress_over = kCompressOver;
  std::chrono::milliseconds deadline{10000};  ///< per API call
};

/// What one Publish did.
struct PublishResult {
  bool created = false;        ///< the ConfigMap was created
  bool updated = false;        ///< the ConfigMap was replaced (content, labels or owner changed)
  bool compressed = false;     ///< the export went to binaryData gzip-compressed
  bool label_patched = false;  ///< the Node's shape label was set
};

/// Publishes exports of one node. Thread-compatible (one Publish at a time).
class Publisher {
 public:
  /// `client` must outlive the publisher.
  Publisher(const kube::Client& client, PublisherOptions options);

  /// Makes the ConfigMap hold `xml` and the Node carry `fingerprint`. Fails (Unavailable for
  /// 5xx/429/transport errors, FailedPrecondition for 409 and RBAC refusals, NotFound when the
  /// Node is gone) without retrying; the caller backs off and calls again.
  Result<PublishResult> Publish(const std::string& xml, const std::string& fingerprint) const;

 private:
  const kube::Client& client_;
  PublisherOptions options_;
};

/// Delay before retry number `failures` (1, 2, ...): base doubling up to `max`, then scaled by a
/// jitter factor in [0.5, 1.0) taken from `random` (any 64-bit value).
std::chrono::milliseconds PublishBackoff(uint32_t failures, uint64_t random,
                                         std::chrono::milliseconds base = std::chrono::seconds(1),
                                         std::chrono::milliseconds max = std::chrono::minutes(5));

/// gzip (RFC 1952) compression, deterministic (no timestamp or name in the header).
Result<std::string> Gzip(std::string_view data);
/// Decompresses gzip data; ResourceExhausted when the output would exceed `max_bytes`.
Result<std::string> Gunzip(std::string_view data, size_t max_bytes);

}  // namespace draguard::kubetopo
