// Publisher: see include/draguard/kubetopo/publisher.h.
#include "draguard/kubetopo/publisher.h"

#include <algorithm>

#include "draguard/kube/watch.h"
#include "draguard/topology/model.h"

namespace draguard::kubetopo {
namespace {

Status CallError(const std::string& what, const kube::ApiResult& r) {
  const Status s = r.error.ToStatus();
  return Status(s.code(), what + ": " + s.message());
}

kube::ApiCall MakeCall(std::string method, std::string path, std::string body, std::string type,
                       std::chrono::milliseconds deadline) {
  kube::ApiCall c(std::move(method), std::move(path), std::move(body), std::move(type));
  c.deadline = deadline;
  return c;
}

}  // namespace

std::string ConfigMapNameFor(std::string_view node) { return "draguard-topology-" + std::string(node); }

Publisher::Publisher(const kube::Client& client, PublisherOptions options)
    : client_(client), options_(std::move(options)) {}

// The shape object exists with exactly this record: created, or found (its content compared
// after decompression, so another zlib's bytes do not count as a difference).
Status Publisher::EnsureShapeObject(const ShapeObject& object, PublishResult& result) const {
  const auto dl = options_.deadline;
  const std::string cms = "/api/v1/namespaces/" + kube::PathEscape(options_.namespace_name) + "/configmaps";
  const std::string path = cms + "/" + kube::PathEscape(object.name);
  for (int attempt = 0; attempt < 2; ++attempt) {
    kube::ApiResult got = client_.Call(MakeCall("GET", path, "", "application/json", dl));
    if (got.status == 404) {
      kube::ApiResult created =
          client_.Call(MakeCall("POST", cms, ShapeObjectJson(object, options_.namespace_name), "application/json", dl));
      if (created.ok()) {
        result.created = true;
        return Status::Ok();
      }
      // Another node of this shape created it in between: read it.
      if (created.status == 409 && created.error.reason == "AlreadyExists") continue;
      return CallError("create shape object " + object.name, created);
    }
    if (!got.ok()) return CallError("GET shape object " + object.name, got);
    Result<kube::Object> existing = kube::ParseObject(got.body);
    if (!existing.ok()) return Status::Internal("GET shape object " + object.name + ": " + existing.status().message());
    auto data = existing->binary_data.find(kShapeObjectKey);
    Result<std::string> record =
        data == existing->binary_data.end() ? Result<std::string>(Status::NotFound("no " + std::string(kShapeObjectKey)))
                                            : Gunzip(data->second, object.record.size() + 1);
    if (!record.ok() || *record != object.record || !existing->immutable) {
      return Status::FailedPrecondition("shape object " + options_.namespace_name + "/" + object.name +
                                        " exists with other content (not written by draguard's exporter?); "
                                        "delete it to let the exporter create it");
    }
    return Status::Ok();
  }
  return Status::Unavailable("shape object " + object.name + " was created and deleted again meanwhile");
}

// Deletes this node's per-node ConfigMap of an earlier release, once per publisher. A failure is
// reported in the result and tried again with the next Publish: it does not fail the publication.
void Publisher::DeleteLegacyConfigMap(PublishResult& result) {
  if (legacy_checked_) return;
  const std::string name = ConfigMapNameFor(options_.node);
  const std::string path =
      "/api/v1/namespaces/" + kube::PathEscape(options_.namespace_name) + "/configmaps/" + kube::PathEscape(name);
  kube::ApiResult deleted = client_.Call(MakeCall("DELETE", path, "", "application/json", options_.deadline));
  if (deleted.ok()) {
    result.legacy_deleted = true;
  } else if (deleted.status != 404) {
    result.legacy_error = CallError("delete the earlier release's configmap " + name, deleted).message();
    return;
  }
  legacy_checked_ = true;
}

Result<PublishResult> Publisher::Publish(const topology::ParsedExport& parsed) {
  const std::string& node = options_.node;
  if (node.empty() || node.size() > 253) {
    return Status::InvalidArgument("node name \"" + node + "\" must be 1 to 253 characters");
  }
  if (options_.namespace_name.empty()) return Status::InvalidArgument("no release namespace");
  Result<ShapeObject> object = MakeShapeObject(parsed);
  if (!object.ok()) return object.status();
  PublishResult result;
  result.shape_object = object->name;

  // The Node first: it must exist (a GET also tells whether its publication is current).
  const std::string node_path = "/api/v1/nodes/" + kube::PathEscape(node);
  kube::ApiResult got_node = client_.Call(MakeCall("GET", node_path, "", "application/json", options_.deadline));
  if (!got_node.ok()) return CallError("GET node " + node, got_node);
  Result<kube::Object> current = kube::ParseObject(
      got_node.body, {{std::string(topology::kShapeLabel), std::string(topology::kCliqueLabel)}, {kNodeAnnotation}, false});
  if (!current.ok()) return Status::Internal("GET node " + node + ": " + current.status().message());

  if (Status s = EnsureShapeObject(*object, result); !s.ok()) return s;

  NodePublication desired;
  desired.fingerprint = object->fingerprint;
  desired.shape_object = object->digest;
  desired.facts = topology::FactsOf(parsed);
  auto label = current->labels.find(std::string(topology::kShapeLabel));
  auto annotation = current->annotations.find(kNodeAnnotation);
  auto clique_label = current->labels.find(std::string(topology::kCliqueLabel));
  Result<NodePublication> before = ReadNodePublication(*current);
  const CliqueLabelAction clique = DecideCliqueLabel(
      clique_label != current->labels.end() ? &clique_label->second : nullptr,
      before.ok() ? std::string_view(before->facts.nvlink_clique) : std::string_view(), desired.facts.nvlink_clique);
  const bool up_to_date = label != current->labels.end() && label->second == desired.fingerprint &&
                          annotation != current->annotations.end() && annotation->second == NodeAnnotation(desired) &&
                          clique == CliqueLabelAction::kLeave;
  if (!up_to_date) {
    // Labels and annotation in one write: they never disagree.
    kube::ApiResult patched = client_.Call(MakeCall("PATCH", node_path, NodePublicationPatch(desired, clique),
                                                    "application/merge-patch+json", options_.deadline));
    if (!patched.ok()) return CallError("publish on node " + node, patched);
    result.node_patched = true;
  }
  DeleteLegacyConfigMap(result);
  return result;
}

std::chrono::milliseconds PublishBackoff(uint32_t failures, uint64_t random, std::chrono::milliseconds base,
                                         std::chrono::milliseconds max) {
  if (failures == 0) return std::chrono::milliseconds(0);
  const uint32_t shift = std::min<uint32_t>(failures - 1, 30);
  const auto raw = std::min<int64_t>(base.count() << shift, max.count());
  // Jitter in [0.5, 1.0): spreads a fleet that failed together.
  // 52 random bits scaled to [0, 0.5): 0.5 + x stays below 1.0 exactly in a double.
  const double factor = 0.5 + static_cast<double>(random >> 12) / static_cast<double>(uint64_t{1} << 53);
  return std::chrono::milliseconds(static_cast<int64_t>(static_cast<double>(raw) * factor));
}

}  // namespace draguard::kubetopo
