// How a node's topology is stored in the cluster: one shape object per distinct shape record,
// shared by every node that has it, and a small publication on each Node.
//
// Shape object: an immutable ConfigMap in the release namespace,
//   name        draguard-shape-<digest>, digest = the first 16 bytes of the SHA-256 of the
//               record, in lower-case hex (32 digits);
//   labels      draguard.io/topology=shape, draguard.io/topology-shape=<shape fingerprint>;
//   immutable   true;
//   binaryData  shape.gz = the record (topology/shape_record.h), gzip-compressed.
// The name is the content's address: a reader recomputes the digest of what it decompresses and
// refuses an object whose content does not match its name, so no writer can give another shape
// content under a name, and an immutable object cannot be rewritten. (The 64-bit shape
// fingerprint is not collision-resistant and only labels the object.)
//
// Node publication: one merge patch of the Node sets, in the same write,
//   label       draguard.io/topology-shape=<shape fingerprint> (what converted Pods select);
//   annotation  draguard.io/topology={"shapeObject":"<digest>", "hostName":..., "hwlocVersion":...,
//               "xmlFormat":..., "gpuUUIDs":[...], "nvlinkClique":...} (topology::NodeFacts; empty
//               values left out);
//   label       nvidia.com/gpu.clique=<nvlinkClique>, when the node has one and nothing else
//               labels it (see publisher.h).
// The label and the annotation can therefore never disagree; the shape object is written first.
// Readers ignore keys they do not know, so later releases may add per-node facts without breaking
// earlier readers (nvlinkClique was added so).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "draguard/kube/watch.h"
#include "draguard/status.h"
#include "draguard/topology/loader.h"
#include "draguard/topology/shape_record.h"

namespace draguard::kubetopo {

/// Value of the label draguard.io/topology on shape objects.
inline constexpr const char* kShapeObjectLabelValue = "shape";
/// Name prefix of shape objects.
inline constexpr const char* kShapeObjectPrefix = "draguard-shape-";
/// binaryData key of the compressed record.
inline constexpr const char* kShapeObjectKey = "shape.gz";
/// Node annotation carrying the node's publication.
inline constexpr const char* kNodeAnnotation = "draguard.io/topology";
/// Longest node annotation a reader accepts (far above 256 GPU UUIDs).
inline constexpr size_t kMaxNodeAnnotationBytes = 64 * 1024;

/// A shape record ready to publish.
struct ShapeObject {
  std::string name;         ///< draguard-shape-<digest>
  std::string digest;       ///< 32 lower-case hex digits
  std::string fingerprint;  ///< the shape fingerprint (label draguard.io/topology-shape)
  std::string record;       ///< the record (uncompressed)
  std::string compressed;   ///< gzip of `record` (deterministic)
};

/// 32 lower-case hex digits: the first 16 bytes of SHA-256(`record`).
std::string RecordDigest(std::string_view record);

/// The shape object of `parsed` (its record, digest, name and compressed form).
Result<ShapeObject> MakeShapeObject(const topology::ParsedExport& parsed);

/// The ConfigMap (JSON text) that stores `object` in `namespace_name`.
std::string ShapeObjectJson(const ShapeObject& object, std::string_view namespace_name);

/// Checks a stored shape object and decodes its record: the name is the prefix and the digest of
/// the decompressed record, the labels are those above, it is immutable, the record decodes within
/// `limits` and the fingerprint of its shape is the label's. `interner` shares the decoded shape
/// and CPU list. InvalidArgument (or FailedPrecondition for a mutable object) naming the problem.
Result<topology::ShapeRecord> VerifyShapeObject(const kube::Object& config_map, topology::ShapeInterner& interner,
                                                const topology::ShapeRecordLimits& limits = {});

/// What a Node publishes.
struct NodePublication {
  std::string fingerprint;   ///< label draguard.io/topology-shape
  std::string shape_object;  ///< digest of its shape object
  topology::NodeFacts facts; ///< the node's own facts
  bool operator==(const NodePublication&) const = default;
};

/// The annotation value (compact JSON, keys in a fixed order, empty values left out).
std::string NodeAnnotation(const NodePublication& publication);

/// What a publication does with the node label topology::kCliqueLabel.
enum class CliqueLabelAction { kLeave, kSet, kRemove };

/// The exporter labels a node's NVLink clique only where nothing else does (GPU Feature Discovery
/// and the NVIDIA DRA driver set the same label from the same NVML call): it sets the label when it
/// is absent or still holds the clique of the node's previous publication (the exporter's own),
/// and removes it when the node has no clique any more and the label is its own. `current`: the
/// label's value, nullptr when absent; `published_before`: the clique of the Node's previous
/// publication ("" when none); `desired`: the clique published now ("" when none).
CliqueLabelAction DecideCliqueLabel(const std::string* current, std::string_view published_before,
                                    std::string_view desired);

/// The merge patch (JSON text) that sets the label and the annotation of `publication` at once,
/// and sets (to its clique) or removes the clique label as `clique` says.
std::string NodePublicationPatch(const NodePublication& publication,
                                 CliqueLabelAction clique = CliqueLabelAction::kLeave);

/// Reads a Node's publication from its label and annotation. NotFound when the Node has no
/// annotation (nothing published this way); InvalidArgument when either is malformed.
Result<NodePublication> ReadNodePublication(const kube::Object& node);

}  // namespace draguard::kubetopo
