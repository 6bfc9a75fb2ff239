// Reading an AdmissionReview's envelope (everything but the reviewed objects) from a parsed body,
// internal to the admission module. One template for both parsers, so that both give the same
// checks and the same messages: codec.cc reads nlohmann documents, fast_parse.cc reads simdjson's
// DOM directly (no document of the envelope is built).
//
// A Node is a small copyable handle on one value with:
//   bool IsNull() / IsObject() / IsString() / IsArray() / IsBool() const;
//   std::optional<Node> Member(std::string_view key) const;  // the last of duplicate keys
//   template <class F> void ForEachMember(F f) const;        // f(std::string_view key, Node), in order
//   std::string_view String() const;  bool Bool() const;
//   std::size_t Size() const;                                // an array's length, as a capacity hint
//   template <class F> bool ForEachElement(F f) const;       // f(Node) -> bool; false stops
//   Json Take(bool whole);  // the value as a document; !whole: the rule fields of a reviewed object
//   Json TakeObject(bool whole);  // as Take, for request.object (may reuse a recycled document)
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "draguard/admission/review.h"
#include "draguard/status.h"
#include "draguard/truncate.h"

namespace draguard::admission::internal {

/// The member `key` of `obj` unless absent or null.
template <typename Node>
std::optional<Node> Present(const Node& obj, std::string_view key) {
  std::optional<Node> v = obj.Member(key);
  if (v && v->IsNull()) return std::nullopt;
  return v;
}

/// The members of object `obj` named by `keys`, found in one pass (as Present finds each: the last
/// of duplicate keys, nullopt when absent or null).
template <typename Node, std::size_t N>
std::array<std::optional<Node>, N> PresentMembers(const Node& obj, const std::array<std::string_view, N>& keys) {
  std::array<std::optional<Node>, N> out;
  obj.ForEachMember([&](std::string_view key, const Node& value) {
    for (std::size_t i = 0; i < N; ++i) {
      if (key == keys[i]) {
        out[i] = value;
        break;
      }
    }
  });
  for (auto& v : out) {
    if (v && v->IsNull()) v.reset();
  }
  return out;
}

/// Reads the optional string field `key`, found as `v` (Present); a present non-string is an error.
template <typename Node>
Status ReadStringAt(const std::optional<Node>& v, std::string_view key, std::string* out, std::string_view where) {
  if (!v) return Status::Ok();
  if (!v->IsString()) {
    return Status::InvalidArgument(std::string(where) + "." + std::string(key) + " must be a string");
  }
  out->assign(v->String());
  return Status::Ok();
}

/// Reads an optional string field; a present non-string is an error.
template <typename Node>
Status ReadString(const Node& obj, std::string_view key, std::string* out, std::string_view where) {
  return ReadStringAt(Present(obj, key), key, out, where);
}

/// Reads the optional field `key`, found as `v` (Present), an object with three string members (a
/// kind or a resource).
template <typename T, typename Node>
Status ReadTriple(const std::optional<Node>& v, std::string_view key, std::optional<T>* out, std::string_view where,
                  std::string_view third, std::string T::*third_field) {
  if (!v) return Status::Ok();
  // "<where>.<key>", for messages only: built on the stack, since every review reads four triples.
  std::array<char, 64> path{};
  std::size_t n = where.copy(path.data(), path.size());
  if (n < path.size()) path[n++] = '.';
  n += key.copy(path.data() + n, path.size() - n);
  const std::string_view w(path.data(), n);
  if (!v->IsObject()) return Status::InvalidArgument(std::string(w) + " must be an object");
  T value;
  if (auto s = ReadString(*v, "group", &value.group, w); !s.ok()) return s;
  if (auto s = ReadString(*v, "version", &value.version, w); !s.ok()) return s;
  if (auto s = ReadString(*v, third, &(value.*third_field), w); !s.ok()) return s;
  *out = std::move(value);
  return Status::Ok();
}

/// Reads request.userInfo, found as `v` (Present).
template <typename Node>
Status ReadUserInfo(const std::optional<Node>& v, UserInfo* user) {
  if (!v) return Status::Ok();
  if (!v->IsObject()) return Status::InvalidArgument("request.userInfo must be an object");
  constexpr std::string_view w = "request.userInfo";
  if (auto s = ReadString(*v, "username", &user->username, w); !s.ok()) return s;
  if (auto s = ReadString(*v, "uid", &user->uid, w); !s.ok()) return s;
  if (std::optional<Node> groups = Present(*v, "groups")) {
    if (!groups->IsArray()) return Status::InvalidArgument(std::string(w) + ".groups must be a list");
    user->groups.reserve(groups->Size());
    bool strings = groups->ForEachElement([&](const Node& e) {
      if (!e.IsString()) return false;
      user->groups.emplace_back(e.String());
      return true;
    });
    if (!strings) return Status::InvalidArgument(std::string(w) + ".groups must be a list of strings");
  }
  if (std::optional<Node> node = Present(*v, "extra")) {
    if (!node->IsObject()) return Status::InvalidArgument("request.userInfo.extra must be a map");
    // Rare and small: read as a document, so that key order and duplicate keys are nlohmann's.
    const Json extra = node->Take(true);
    for (const auto& [k, vals] : extra.items()) {
      if (!vals.is_array()) return Status::InvalidArgument("request.userInfo.extra." + k + " must be a list");
      std::vector<std::string> list;
      for (const auto& e : vals) {
        if (!e.is_string()) return Status::InvalidArgument("request.userInfo.extra." + k + " must be strings");
        list.push_back(e.template get<std::string>());
      }
      user->extra.emplace(k, std::move(list));
    }
  }
  return Status::Ok();
}

/// The operation named `op`.
Result<Operation> ParseOperation(std::string_view op);

/// Reads the AdmissionReview `doc`: its checks, its envelope fields, and request.object,
/// request.oldObject and request.options as documents. A request with an oldObject keeps its
/// objects whole (rules compare the two); otherwise `Take(false)` may trim request.object.
template <typename Node>
Result<AdmissionRequest> DecodeEnvelope(Node doc) {
  if (!doc.IsObject()) return Status::InvalidArgument("body is not a JSON object");

  AdmissionRequest req;
  std::string kind;
  if (auto s = ReadString(doc, "apiVersion", &req.api_version, "AdmissionReview"); !s.ok()) return s;
  if (auto s = ReadString(doc, "kind", &kind, "AdmissionReview"); !s.ok()) return s;
  if (kind != "AdmissionReview") {
    return Status::InvalidArgument("kind is \"" + Truncate(kind) + "\", expected \"AdmissionReview\"");
  }
  if (req.api_version != kAdmissionV1 && req.api_version != kAdmissionV1beta1) {
    return Status::InvalidArgument("apiVersion \"" + Truncate(req.api_version) +
                                   "\" is not supported; use admission.k8s.io/v1");
  }
  std::optional<Node> request = doc.Member("request");
  if (!request || request->IsNull()) return Status::InvalidArgument("AdmissionReview has no request");
  if (!request->IsObject()) return Status::InvalidArgument("request must be an object");
  const Node& r = *request;

  // One pass over the request's members; the checks below keep their order.
  enum : std::size_t {
    kUid, kKind, kResource, kSubResource, kRequestKind, kRequestResource, kRequestSubResource, kName,
    kNamespace, kOperation, kUserInfo, kObject, kOldObject, kDryRun, kOptions, kFieldCount
  };
  static constexpr std::array<std::string_view, kFieldCount> kFields = {
      "uid", "kind", "resource", "subResource", "requestKind", "requestResource", "requestSubResource", "name",
      "namespace", "operation", "userInfo", "object", "oldObject", "dryRun", "options"};
  std::array<std::optional<Node>, kFieldCount> m = PresentMembers(r, kFields);

  constexpr std::string_view w = "request";
  if (auto s = ReadStringAt(m[kUid], "uid", &req.uid, w); !s.ok()) return s;
  if (req.uid.empty()) return Status::InvalidArgument("request.uid is missing");
  std::optional<GroupVersionKind> kind_field;
  if (auto s = ReadTriple(m[kKind], "kind", &kind_field, w, "kind", &GroupVersionKind::kind); !s.ok()) return s;
  if (!kind_field || kind_field->kind.empty()) return Status::InvalidArgument("request.kind is missing");
  req.kind = std::move(*kind_field);
  std::optional<GroupVersionResource> res;
  if (auto s = ReadTriple(m[kResource], "resource", &res, w, "resource", &GroupVersionResource::resource); !s.ok()) {
    return s;
  }
  if (res) req.resource = std::move(*res);
  if (auto s = ReadStringAt(m[kSubResource], "subResource", &req.sub_resource, w); !s.ok()) return s;
  if (auto s = ReadTriple(m[kRequestKind], "requestKind", &req.request_kind, w, "kind", &GroupVersionKind::kind);
      !s.ok()) {
    return s;
  }
  if (auto s = ReadTriple(m[kRequestResource], "requestResource", &req.request_resource, w, "resource",
                          &GroupVersionResource::resource);
      !s.ok()) {
    return s;
  }
  if (auto s = ReadStringAt(m[kRequestSubResource], "requestSubResource", &req.request_sub_resource, w); !s.ok()) {
    return s;
  }
  if (auto s = ReadStringAt(m[kName], "name", &req.name, w); !s.ok()) return s;
  if (auto s = ReadStringAt(m[kNamespace], "namespace", &req.namespace_, w); !s.ok()) return s;
  std::string op;
  if (auto s = ReadStringAt(m[kOperation], "operation", &op, w); !s.ok()) return s;
  if (op.empty()) return Status::InvalidArgument("request.operation is missing");
  auto parsed_op = ParseOperation(op);
  if (!parsed_op.ok()) return parsed_op.status();
  req.operation = *parsed_op;
  if (auto s = ReadUserInfo(m[kUserInfo], &req.user_info); !s.ok()) return s;
  std::optional<Node>& object = m[kObject];
  std::optional<Node>& old_object = m[kOldObject];
  if (object) {
    if (!object->IsObject()) return Status::InvalidArgument("request.object must be an object");
    req.object = object->TakeObject(old_object.has_value());
  }
  if (old_object) {
    if (!old_object->IsObject()) return Status::InvalidArgument("request.oldObject must be an object");
    req.old_object = old_object->Take(true);
  }
  if (const std::optional<Node>& v = m[kDryRun]) {
    if (!v->IsBool()) return Status::InvalidArgument("request.dryRun must be a boolean");
    req.dry_run = v->Bool();
  }
  if (std::optional<Node>& options = m[kOptions]) req.options = options->Take(true);
  if ((req.operation == Operation::kCreate || req.operation == Operation::kUpdate) && req.object.is_null()) {
    return Status::InvalidArgument(std::string("request.object is missing for ") + OperationName(req.operation));
  }
  return req;
}

}  // namespace draguard::admission::internal
