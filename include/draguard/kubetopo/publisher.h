// Publisher: publishes one node's topology (`draguard topology export --publish`) as
// shape_object.h describes: the shape object of its record (created once, shared by every node
// with that record) and, in one merge patch of the Node, the shape label and the node's own facts.
//
// Order: the shape object exists (created, or found with exactly this content) before the Node
// points at it, and the label and the annotation are one write, so a reader never sees the label
// disagree with the published topology. Nothing is written when the object is there and the Node
// already carries this label and annotation: an unchanged export costs two GETs.
//
// Earlier releases published a whole export per node in the ConfigMap draguard-topology-<node>
// (labelled draguard.io/topology=hwloc, draguard.io/node=<node>). Once this node's publication is
// in place, the publisher deletes that ConfigMap of its node (once per publisher); readers take the
// Node's publication over it meanwhile (kubetopo/node_source.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "draguard/kube/client.h"
#include "draguard/kubetopo/shape_object.h"
#include "draguard/status.h"
#include "draguard/topology/loader.h"

namespace draguard::kubetopo {

/// Label selecting topology objects: "hwloc" on the per-node ConfigMaps of earlier releases,
/// "shape" on shape objects.
inline constexpr const char* kTopologyLabel = "draguard.io/topology";
/// Data key of a compressed export in binaryData (per-node ConfigMaps of earlier releases).
inline constexpr const char* kCompressedTopologyKey = "topology.xml.gz";

/// "draguard-topology-<node>": the per-node ConfigMap of earlier releases.
std::string ConfigMapNameFor(std::string_view node);

/// Options of a Publisher.
struct PublisherOptions {
  std::string node;            ///< Kubernetes node name (required)
  std::string namespace_name;  ///< release namespace (required)
  std::chrono::milliseconds deadline{10000};  ///< per API call
};

/// What one Publish did.
struct PublishResult {
  std::string shape_object;     ///< name of the node's shape object
  bool created = false;         ///< the shape object was created
  bool node_patched = false;    ///< the Node's label and annotation were written (one patch)
  bool legacy_deleted = false;  ///< the node's per-node ConfigMap of an earlier release was deleted
  /// Why that ConfigMap could not be deleted (tried again with the next Publish); empty when it
  /// was deleted, was not there, or is known gone.
  std::string legacy_error;
};

/// Publishes exports of one node. Thread-compatible (one Publish at a time).
class Publisher {
 public:
  /// `client` must outlive the publisher.
  Publisher(const kube::Client& client, PublisherOptions options);

  /// Makes the shape object of `parsed` exist and the Node carry its label and annotation, then
  /// (until it succeeds once) deletes the node's per-node ConfigMap of an earlier release. Fails (Unavailable for
  /// 5xx/429/transport errors, FailedPrecondition for RBAC and admission refusals or a shape object
  /// of this name with other content, NotFound when the Node is gone) without retrying; the caller
  /// backs off and calls again. On failure nothing published earlier is changed.
  Result<PublishResult> Publish(const topology::ParsedExport& parsed);

 private:
  Status EnsureShapeObject(const ShapeObject& object, PublishResult& result) const;
  void DeleteLegacyConfigMap(PublishResult& result);

  const kube::Client& client_;
  PublisherOptions options_;
  bool legacy_checked_ = false;  // the per-node ConfigMap of an earlier release is known gone
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
