// Shape objects and node publications: see include/draguard/kubetopo/shape_object.h.
#include "draguard/kubetopo/shape_object.h"

#include <openssl/evp.h>

#include <nlohmann/json.hpp>

#include "draguard/base64.h"
#include "draguard/kubetopo/publisher.h"
#include "draguard/topology/model.h"

namespace draguard::kubetopo {
namespace {

using nlohmann::json;

bool IsLowerHex(std::string_view s, size_t n) {
  if (s.size() != n) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// Longest string value of a node annotation field.
constexpr size_t kMaxFactBytes = 256;
// Most GPU UUIDs a node annotation may list.
constexpr size_t kMaxUuids = 1024;

// The string at `key` of `j` (absent: empty); false when present but not a short string.
bool FactString(const json& j, const char* key, std::string& out) {
  auto it = j.find(key);
  if (it == j.end()) return true;
  if (!it->is_string() || it->get_ref<const std::string&>().size() > kMaxFactBytes) return false;
  out = it->get<std::string>();
  return true;
}

}  // namespace

std::string RecordDigest(std::string_view record) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(record.data(), record.size(), md, &len, EVP_sha256(), nullptr) != 1 || len < 16) return {};
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < 16; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 15]);
  }
  return out;
}

Result<ShapeObject> MakeShapeObject(const topology::ParsedExport& parsed) {
  ShapeObject o;
  o.record = topology::EncodeShapeRecord(parsed);
  o.digest = RecordDigest(o.record);
  if (o.digest.empty()) return Status::Internal("SHA-256 of the shape record failed");
  o.name = kShapeObjectPrefix + o.digest;
  o.fingerprint = parsed.shape.fingerprint;
  Result<std::string> gz = Gzip(o.record);
  if (!gz.ok()) return gz.status();
  o.compressed = std::move(gz).value();
  return o;
}

std::string ShapeObjectJson(const ShapeObject& object, std::string_view namespace_name) {
  const json cm = {{"apiVersion", "v1"},
                   {"kind", "ConfigMap"},
                   {"metadata",
                    {{"name", object.name},
                     {"namespace", std::string(namespace_name)},
                     {"labels",
                      {{kTopologyLabel, kShapeObjectLabelValue}, {std::string(topology::kShapeLabel), object.fingerprint}}}}},
                   {"immutable", true},
                   {"binaryData", {{kShapeObjectKey, Base64Encode(object.compressed)}}}};
  return cm.dump();
}

Result<topology::ShapeRecord> VerifyShapeObject(const kube::Object& cm, topology::ShapeInterner& interner,
                                                const topology::ShapeRecordLimits& limits) {
  const std::string what = "shape object " + cm.namespace_name + "/" + cm.name;
  const std::string_view name(cm.name);
  const std::string_view prefix(kShapeObjectPrefix);
  if (name.substr(0, prefix.size()) != prefix || !IsLowerHex(name.substr(std::min(name.size(), prefix.size())), 32)) {
    return Status::InvalidArgument(what + ": the name must be " + std::string(prefix) + "<32 lower-case hex digits>");
  }
  const std::string digest(name.substr(prefix.size()));
  auto label = [&](const std::string& key) {
    auto it = cm.labels.find(key);
    return it == cm.labels.end() ? std::string() : it->second;
  };
  if (label(kTopologyLabel) != kShapeObjectLabelValue) {
    return Status::InvalidArgument(what + ": not labelled " + kTopologyLabel + "=" + kShapeObjectLabelValue);
  }
  const std::string fingerprint = label(std::string(topology::kShapeLabel));
  if (!IsLowerHex(fingerprint, 16)) {
    return Status::InvalidArgument(what + ": label " + std::string(topology::kShapeLabel) +
                                   " must be a shape fingerprint (16 lower-case hex digits)");
  }
  if (!cm.immutable) return Status::FailedPrecondition(what + ": not immutable");
  auto data = cm.binary_data.find(kShapeObjectKey);
  if (data == cm.binary_data.end() || cm.binary_data.size() != 1 || !cm.data.empty()) {
    return Status::InvalidArgument(what + ": must hold exactly binaryData." + kShapeObjectKey);
  }
  Result<std::string> record = Gunzip(data->second, limits.max_bytes);
  if (!record.ok()) return Status::InvalidArgument(what + ": " + record.status().message());
  if (RecordDigest(*record) != digest) {
    return Status::InvalidArgument(what + ": the content does not match the name (its digest is " +
                                   RecordDigest(*record) + ")");
  }
  Result<topology::ShapeRecord> decoded = topology::DecodeShapeRecord(*record, interner, limits);
  if (!decoded.ok()) return Status::InvalidArgument(what + ": " + decoded.status().message());
  if (decoded->shape->fingerprint != fingerprint) {
    return Status::InvalidArgument(what + ": labelled shape " + fingerprint + " but holds shape " +
                                   decoded->shape->fingerprint);
  }
  return decoded;
}

std::string NodeAnnotation(const NodePublication& p) {
  json j = json::object();
  j["shapeObject"] = p.shape_object;
  if (!p.facts.host_name.empty()) j["hostName"] = p.facts.host_name;
  if (!p.facts.hwloc_version.empty()) j["hwlocVersion"] = p.facts.hwloc_version;
  if (!p.facts.xml_format.empty()) j["xmlFormat"] = p.facts.xml_format;
  if (!p.facts.gpu_uuids.empty()) j["gpuUUIDs"] = p.facts.gpu_uuids;
  if (!p.facts.nvlink_clique.empty()) j["nvlinkClique"] = p.facts.nvlink_clique;
  // Invalid UTF-8 from an export is replaced rather than refused.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

CliqueLabelAction DecideCliqueLabel(const std::string* current, std::string_view published_before,
                                    std::string_view desired) {
  const bool ours = current == nullptr || (!published_before.empty() && *current == published_before);
  if (!ours) return CliqueLabelAction::kLeave;  // set by someone else (or by hand)
  if (desired.empty()) return current != nullptr ? CliqueLabelAction::kRemove : CliqueLabelAction::kLeave;
  return current != nullptr && *current == desired ? CliqueLabelAction::kLeave : CliqueLabelAction::kSet;
}

std::string NodePublicationPatch(const NodePublication& p, CliqueLabelAction clique) {
  json labels = {{std::string(topology::kShapeLabel), p.fingerprint}};
  if (clique == CliqueLabelAction::kSet && !p.facts.nvlink_clique.empty()) {
    labels[std::string(topology::kCliqueLabel)] = p.facts.nvlink_clique;
  } else if (clique == CliqueLabelAction::kRemove) {
    labels[std::string(topology::kCliqueLabel)] = nullptr;  // merge patch: delete
  }
  const json patch = {{"metadata", {{"labels", std::move(labels)}, {"annotations", {{kNodeAnnotation, NodeAnnotation(p)}}}}}};
  return patch.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<NodePublication> ReadNodePublication(const kube::Object& node) {
  auto a = node.annotations.find(kNodeAnnotation);
  if (a == node.annotations.end()) return Status::NotFound("node " + node.name + " has no annotation " + kNodeAnnotation);
  const std::string what = "node " + node.name + " annotation " + kNodeAnnotation;
  if (a->second.size() > kMaxNodeAnnotationBytes) return Status::InvalidArgument(what + ": too long");
  const json j = json::parse(a->second, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::InvalidArgument(what + ": not a JSON object");
  NodePublication p;
  auto l = node.labels.find(std::string(topology::kShapeLabel));
  if (l == node.labels.end() || !IsLowerHex(l->second, 16)) {
    return Status::InvalidArgument("node " + node.name + ": label " + std::string(topology::kShapeLabel) +
                                   " missing or not a shape fingerprint");
  }
  p.fingerprint = l->second;
  if (!FactString(j, "shapeObject", p.shape_object) || !IsLowerHex(p.shape_object, 32)) {
    return Status::InvalidArgument(what + ": shapeObject must be 32 lower-case hex digits");
  }
  if (!FactString(j, "hostName", p.facts.host_name) || !FactString(j, "hwlocVersion", p.facts.hwloc_version) ||
      !FactString(j, "xmlFormat", p.facts.xml_format)) {
    return Status::InvalidArgument(what + ": hostName, hwlocVersion and xmlFormat must be short strings");
  }
  if (!FactString(j, "nvlinkClique", p.facts.nvlink_clique) ||
      (!p.facts.nvlink_clique.empty() && !topology::IsNvlinkClique(p.facts.nvlink_clique))) {
    return Status::InvalidArgument(what + ": nvlinkClique must be <cluster UUID>.<clique id> (as nvidia.com/gpu.clique)");
  }
  if (auto u = j.find("gpuUUIDs"); u != j.end()) {
    if (!u->is_array() || u->size() > kMaxUuids) return Status::InvalidArgument(what + ": gpuUUIDs must be a list");
    for (const json& s : *u) {
      if (!s.is_string() || s.get_ref<const std::string&>().size() > kMaxFactBytes) {
        return Status::InvalidArgument(what + ": gpuUUIDs must hold short strings");
      }
      p.facts.gpu_uuids.push_back(s.get<std::string>());
    }
  }
  return p;
}

}  // namespace draguard::kubetopo
