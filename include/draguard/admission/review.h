// Plain data types of the admission.k8s.io AdmissionReview protocol.
//
// An AdmissionRequest is what the API server asks; an AdmissionResponse is what we answer.
// The object under review is kept as an `admission::Json` (nlohmann::json), the project's document
// model for Kubernetes objects: the DRA model, the engine and its rules, the mutation, the
// provisioner and the offline commands all read and write objects through it (see "The document
// model" in docs/architecture.md).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace draguard::admission {

/// The JSON document model used for reviewed objects.
using Json = nlohmann::json;

/// API group, version and kind of an object (metav1.GroupVersionKind).
struct GroupVersionKind {
  std::string group;    ///< "" for the core group
  std::string version;  ///< e.g. "v1"
  std::string kind;     ///< e.g. "Pod"
};

/// API group, version and resource (metav1.GroupVersionResource).
struct GroupVersionResource {
  std::string group;     ///< "" for the core group
  std::string version;   ///< e.g. "v1"
  std::string resource;  ///< e.g. "pods"
};

/// authenticationv1.UserInfo of the requesting user.
struct UserInfo {
  std::string username;                                     ///< e.g. "system:serviceaccount:ns:sa"
  std::string uid;                                          ///< opaque user id
  std::vector<std::string> groups;                          ///< group memberships
  std::map<std::string, std::vector<std::string>> extra;    ///< authenticator-provided extras
};

/// Operation that triggered the review.
enum class Operation { kCreate, kUpdate, kDelete, kConnect };

/// "CREATE", "UPDATE", "DELETE" or "CONNECT".
const char* OperationName(Operation op);

/// A decoded admission.k8s.io AdmissionReview request.
struct AdmissionRequest {
  std::string api_version;   ///< envelope apiVersion as received (echoed in the response)
  std::string uid;           ///< must be echoed in the response
  GroupVersionKind kind;     ///< kind as converted for this webhook
  GroupVersionResource resource;
  std::string sub_resource;
  std::optional<GroupVersionKind> request_kind;           ///< original kind (matchPolicy: Equivalent)
  std::optional<GroupVersionResource> request_resource;   ///< original resource
  std::string request_sub_resource;
  std::string name;          ///< empty on CREATE with generateName
  std::string namespace_;    ///< empty for cluster-scoped objects
  Operation operation = Operation::kCreate;
  UserInfo user_info;
  Json object;               ///< null for DELETE
  Json old_object;           ///< null for CREATE and CONNECT
  bool dry_run = false;      ///< true: nothing is persisted; no side effects allowed
  Json options;              ///< Create/Update/DeleteOptions; null for CONNECT
};

/// metav1.Status carried by a denied response.
struct ResponseStatus {
  int code = 403;            ///< HTTP-like code; 403 for policy denials
  std::string reason;        ///< machine-readable reason, e.g. "Forbidden"
  std::string message;       ///< human message; starts with the rule IDs for policy denials
};

/// An AdmissionReview response. Build it only through admission/response.h.
struct AdmissionResponse {
  std::string uid;                                      ///< copied from the request
  bool allowed = true;
  std::optional<ResponseStatus> status;                 ///< set when denied
  std::vector<std::string> warnings;                    ///< each ≤ 120 chars, ≤ 4 KiB total
  std::map<std::string, std::string> audit_annotations; ///< keys are valid qualified-name parts
  std::string patch;                                    ///< RFC 6902 JSON array text; empty = none
};

/// A CREATE request for a bare object, as offline tools and checks review manifests: kind from
/// apiVersion/kind, name from metadata.name, namespace from metadata.namespace or `default_namespace`.
AdmissionRequest CreateRequestFor(Json object, std::string_view default_namespace = "default");

}  // namespace draguard::admission
