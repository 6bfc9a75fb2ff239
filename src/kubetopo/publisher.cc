// Publisher: see include/draguard/kubetopo/publisher.h.
#include "draguard/kubetopo/publisher.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "draguard/base64.h"
#include "draguard/kubetopo/configmap_source.h"
#include "draguard/topology/model.h"

namespace draguard::kubetopo {
namespace {

using nlohmann::json;

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

Result<json> ParseObject(const std::string& what, const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::Internal(what + ": the API server answered no JSON object");
  return j;
}

std::string StringAt(const json& j, const json::json_pointer& p) {
  if (!j.contains(p)) return {};
  const json& v = j.at(p);
  return v.is_string() ? v.get<std::string>() : std::string();
}

// True when `existing` already is what `desired` asks for (labels and owner included).
bool UpToDate(const json& existing, const json& desired) {
  const json& em = existing.value("metadata", json::object());
  const json& dm = desired["metadata"];
  const json labels = em.value("labels", json::object());
  for (const auto& [k, v] : dm["labels"].items()) {
    if (!labels.contains(k) || labels[k] != v) return false;
  }
  bool owned = false;
  for (const json& o : em.value("ownerReferences", json::array())) {
    if (o.is_object() && o.value("uid", "") == dm["ownerReferences"][0]["uid"]) owned = true;
  }
  return owned && existing.value("data", json::object()) == desired.value("data", json::object()) &&
         existing.value("binaryData", json::object()) == desired.value("binaryData", json::object());
}

}  // namespace

std::string ConfigMapNameFor(std::string_view node) { return "draguard-topology-" + std::string(node); }

Publisher::Publisher(const kube::Client& client, PublisherOptions options)
    : client_(client), options_(std::move(options)) {}

Result<PublishResult> Publisher::Publish(const std::string& xml, const std::string& fingerprint) const {
  const std::string& node = options_.node;
  if (node.empty() || node.size() > 63) {
    return Status::InvalidArgument("node name \"" + node + "\" must be 1 to 63 characters (it is a label value)");
  }
  if (options_.namespace_name.empty()) return Status::InvalidArgument("no release namespace");
  const auto dl = options_.deadline;
  PublishResult result;

  // The Node: its uid for the ownerReference, its labels for the shape label.
  const std::string node_path = "/api/v1/nodes/" + kube::PathEscape(node);
  kube::ApiResult got_node = client_.Call(MakeCall("GET", node_path, "", "application/json", dl));
  if (!got_node.ok()) return CallError("GET node " + node, got_node);
  Result<json> node_obj = ParseObject("GET node " + node, got_node.body);
  if (!node_obj.ok()) return node_obj.status();
  const std::string uid = StringAt(*node_obj, json::json_pointer("/metadata/uid"));
  if (uid.empty()) return Status::Internal("node " + node + " has no metadata.uid");

  const std::string name = ConfigMapNameFor(node);
  json desired = {{"apiVersion", "v1"},
                  {"kind", "ConfigMap"},
                  {"metadata",
                   {{"name", name},
                    {"namespace", options_.namespace_name},
                    {"labels", {{kTopologyLabel, "hwloc"}, {kNodeLabel, node}}},
                    {"ownerReferences", json::array({{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node},
                                                       {"uid", uid}}})}}}};
  if (xml.size() > options_.compress_over) {
    Result<std::string> gz = Gzip(xml);
    if (!gz.ok()) return gz.status();
    desired["binaryData"] = {{kCompressedTopologyKey, Base64Encode(*gz)}};
    result.compressed = true;
  } else {
    desired["data"] = {{kTopologyKey, xml}};
  }

  const std::string cms = "/api/v1/namespaces/" + kube::PathEscape(options_.namespace_name) + "/configmaps";
  const std::string cm_path = cms + "/" + kube::PathEscape(name);
  kube::ApiResult got_cm = client_.Call(MakeCall("GET", cm_path, "", "application/json", dl));
  if (got_cm.status == 404) {
    kube::ApiResult created = client_.Call(MakeCall("POST", cms, desired.dump(), "application/json", dl));
    if (!created.ok()) return CallError("create configmap " + name, created);
    result.created = true;
  } else if (!got_cm.ok()) {
    return CallError("GET configmap " + name, got_cm);
  } else {
    Result<json> existing = ParseObject("GET configmap " + name, got_cm.body);
    if (!existing.ok()) return existing.status();
    if (!UpToDate(*existing, desired)) {
      // Replace content, keep foreign labels/annotations/owners; the resourceVersion makes a
      // concurrent change a 409 (retried by the caller with a fresh GET).
      json next = *existing;
      json& meta = next["metadata"];
      if (!meta["labels"].is_object()) meta["labels"] = json::object();
      for (const auto& [k, v] : desired["metadata"]["labels"].items()) meta["labels"][k] = v;
      json owners = json::array();
      for (const json& o : meta.value("ownerReferences", json::array())) {
        if (!(o.is_object() && o.value("kind", "") == "Node")) owners.push_back(o);
      }
      owners.push_back(desired["metadata"]["ownerReferences"][0]);
      meta["ownerReferences"] = owners;
      next.erase("data");
      next.erase("binaryData");
      if (desired.contains("data")) next["data"] = desired["data"];
      if (desired.contains("binaryData")) next["binaryData"] = desired["binaryData"];
      kube::ApiResult put = client_.Call(MakeCall("PUT", cm_path, next.dump(), "application/json", dl));
      if (!put.ok()) return CallError("update configmap " + name, put);
      result.updated = true;
    }
  }

  // The shape label, alone, and only when it differs.
  if (StringAt(*node_obj, json::json_pointer("/metadata/labels/" + std::string("draguard.io~1topology-shape"))) !=
      fingerprint) {
    const json patch = {{"metadata", {{"labels", {{std::string(topology::kShapeLabel), fingerprint}}}}}};
    kube::ApiResult patched =
        client_.Call(MakeCall("PATCH", node_path, patch.dump(), "application/merge-patch+json", dl));
    if (!patched.ok()) return CallError("label node " + node, patched);
    result.label_patched = true;
  }
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
