#include "draguard/admission/codec.h"

#include "draguard/admission/response.h"
#include "draguard/base64.h"
#include "draguard/json_string.h"
#include "draguard/truncate.h"
#include "fast_parse.h"

#include <utility>

namespace draguard::admission {
namespace {

const Json* Field(const Json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// Reads an optional string field; a present non-string is an error.
Status GetString(const Json& obj, const char* key, std::string* out, const char* where) {
  const Json* v = Field(obj, key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_string()) {
    return Status::InvalidArgument(std::string(where) + "." + key + " must be a string");
  }
  *out = v->get<std::string>();
  return Status::Ok();
}

Status GetGvk(const Json& obj, const char* key, std::optional<GroupVersionKind>* out,
              const char* where) {
  const Json* v = Field(obj, key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_object()) {
    return Status::InvalidArgument(std::string(where) + "." + key + " must be an object");
  }
  GroupVersionKind gvk;
  std::string w = std::string(where) + "." + key;
  if (auto s = GetString(*v, "group", &gvk.group, w.c_str()); !s.ok()) return s;
  if (auto s = GetString(*v, "version", &gvk.version, w.c_str()); !s.ok()) return s;
  if (auto s = GetString(*v, "kind", &gvk.kind, w.c_str()); !s.ok()) return s;
  *out = std::move(gvk);
  return Status::Ok();
}

Status GetGvr(const Json& obj, const char* key, std::optional<GroupVersionResource>* out,
              const char* where) {
  const Json* v = Field(obj, key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_object()) {
    return Status::InvalidArgument(std::string(where) + "." + key + " must be an object");
  }
  GroupVersionResource gvr;
  std::string w = std::string(where) + "." + key;
  if (auto s = GetString(*v, "group", &gvr.group, w.c_str()); !s.ok()) return s;
  if (auto s = GetString(*v, "version", &gvr.version, w.c_str()); !s.ok()) return s;
  if (auto s = GetString(*v, "resource", &gvr.resource, w.c_str()); !s.ok()) return s;
  *out = std::move(gvr);
  return Status::Ok();
}

Status GetStringList(const Json& obj, const char* key, std::vector<std::string>* out,
                     const std::string& where) {
  const Json* v = Field(obj, key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_array()) return Status::InvalidArgument(where + "." + key + " must be a list");
  for (const auto& e : *v) {
    if (!e.is_string()) {
      return Status::InvalidArgument(where + "." + key + " must be a list of strings");
    }
    out->push_back(e.get<std::string>());
  }
  return Status::Ok();
}

Status DecodeUserInfo(const Json& req, UserInfo* user) {
  const Json* v = Field(req, "userInfo");
  if (v == nullptr) return Status::Ok();
  if (!v->is_object()) return Status::InvalidArgument("request.userInfo must be an object");
  const char* w = "request.userInfo";
  if (auto s = GetString(*v, "username", &user->username, w); !s.ok()) return s;
  if (auto s = GetString(*v, "uid", &user->uid, w); !s.ok()) return s;
  if (auto s = GetStringList(*v, "groups", &user->groups, w); !s.ok()) return s;
  if (const Json* extra = Field(*v, "extra"); extra != nullptr) {
    if (!extra->is_object()) return Status::InvalidArgument("request.userInfo.extra must be a map");
    for (const auto& [k, vals] : extra->items()) {
      std::vector<std::string> list;
      if (!vals.is_array()) {
        return Status::InvalidArgument("request.userInfo.extra." + k + " must be a list");
      }
      for (const auto& e : vals) {
        if (!e.is_string()) {
          return Status::InvalidArgument("request.userInfo.extra." + k + " must be strings");
        }
        list.push_back(e.get<std::string>());
      }
      user->extra.emplace(k, std::move(list));
    }
  }
  return Status::Ok();
}

Result<Operation> ParseOperation(const std::string& op) {
  if (op == "CREATE") return Operation::kCreate;
  if (op == "UPDATE") return Operation::kUpdate;
  if (op == "DELETE") return Operation::kDelete;
  if (op == "CONNECT") return Operation::kConnect;
  return Status::InvalidArgument("request.operation \"" + Truncate(op) +
                                 "\" is not one of CREATE, UPDATE, DELETE, CONNECT");
}

}  // namespace

AdmissionRequest CreateRequestFor(Json object, std::string_view default_namespace) {
  AdmissionRequest r;
  r.operation = Operation::kCreate;
  if (object.is_object()) {
    std::string api;
    if (auto it = object.find("apiVersion"); it != object.end() && it->is_string()) api = it->get<std::string>();
    auto slash = api.find('/');
    r.kind.group = slash == std::string::npos ? "" : api.substr(0, slash);
    r.kind.version = slash == std::string::npos ? api : api.substr(slash + 1);
    if (auto it = object.find("kind"); it != object.end() && it->is_string()) r.kind.kind = it->get<std::string>();
    if (auto md = object.find("metadata"); md != object.end() && md->is_object()) {
      if (auto n = md->find("name"); n != md->end() && n->is_string()) r.name = n->get<std::string>();
      if (auto ns = md->find("namespace"); ns != md->end() && ns->is_string()) r.namespace_ = ns->get<std::string>();
    }
  }
  if (r.namespace_.empty()) r.namespace_ = std::string(default_namespace);
  r.object = std::move(object);
  return r;
}

const char* OperationName(Operation op) {
  switch (op) {
    case Operation::kCreate: return "CREATE";
    case Operation::kUpdate: return "UPDATE";
    case Operation::kDelete: return "DELETE";
    case Operation::kConnect: return "CONNECT";
  }
  return "UNKNOWN";
}

std::size_t JsonNestingDepth(std::string_view text, std::size_t limit) {
  std::size_t depth = 0;
  std::size_t max_depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth) {
        max_depth = depth;
        if (max_depth > limit) return max_depth;
      }
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
  return max_depth;
}

namespace {

// The envelope checks and field reads, shared by both parsers.
Result<AdmissionRequest> DecodeDocument(Json doc) {
  if (!doc.is_object()) return Status::InvalidArgument("body is not a JSON object");

  AdmissionRequest req;
  std::string kind;
  if (auto s = GetString(doc, "apiVersion", &req.api_version, "AdmissionReview"); !s.ok()) return s;
  if (auto s = GetString(doc, "kind", &kind, "AdmissionReview"); !s.ok()) return s;
  if (kind != "AdmissionReview") {
    return Status::InvalidArgument("kind is \"" + Truncate(kind) + "\", expected \"AdmissionReview\"");
  }
  if (req.api_version != kAdmissionV1 && req.api_version != kAdmissionV1beta1) {
    return Status::InvalidArgument("apiVersion \"" + Truncate(req.api_version) +
                                   "\" is not supported; use admission.k8s.io/v1");
  }
  auto rit = doc.find("request");
  if (rit == doc.end() || rit->is_null()) return Status::InvalidArgument("AdmissionReview has no request");
  if (!rit->is_object()) return Status::InvalidArgument("request must be an object");
  Json* r = &*rit;

  const char* w = "request";
  if (auto s = GetString(*r, "uid", &req.uid, w); !s.ok()) return s;
  if (req.uid.empty()) return Status::InvalidArgument("request.uid is missing");
  std::optional<GroupVersionKind> kind_field;
  if (auto s = GetGvk(*r, "kind", &kind_field, w); !s.ok()) return s;
  if (!kind_field || kind_field->kind.empty()) {
    return Status::InvalidArgument("request.kind is missing");
  }
  req.kind = *kind_field;
  std::optional<GroupVersionResource> res;
  if (auto s = GetGvr(*r, "resource", &res, w); !s.ok()) return s;
  if (res) req.resource = *res;
  if (auto s = GetString(*r, "subResource", &req.sub_resource, w); !s.ok()) return s;
  if (auto s = GetGvk(*r, "requestKind", &req.request_kind, w); !s.ok()) return s;
  if (auto s = GetGvr(*r, "requestResource", &req.request_resource, w); !s.ok()) return s;
  if (auto s = GetString(*r, "requestSubResource", &req.request_sub_resource, w); !s.ok()) return s;
  if (auto s = GetString(*r, "name", &req.name, w); !s.ok()) return s;
  if (auto s = GetString(*r, "namespace", &req.namespace_, w); !s.ok()) return s;
  std::string op;
  if (auto s = GetString(*r, "operation", &op, w); !s.ok()) return s;
  if (op.empty()) return Status::InvalidArgument("request.operation is missing");
  auto parsed_op = ParseOperation(op);
  if (!parsed_op.ok()) return parsed_op.status();
  req.operation = *parsed_op;
  if (auto s = DecodeUserInfo(*r, &req.user_info); !s.ok()) return s;
  // The objects are moved out of the parsed document, not copied: they are most of the body.
  if (auto it = r->find("object"); it != r->end() && !it->is_null()) {
    if (!it->is_object()) return Status::InvalidArgument("request.object must be an object");
    req.object = std::move(*it);
  }
  if (auto it = r->find("oldObject"); it != r->end() && !it->is_null()) {
    if (!it->is_object()) return Status::InvalidArgument("request.oldObject must be an object");
    req.old_object = std::move(*it);
  }
  if (const Json* v = Field(*r, "dryRun")) {
    if (!v->is_boolean()) return Status::InvalidArgument("request.dryRun must be a boolean");
    req.dry_run = v->get<bool>();
  }
  if (auto it = r->find("options"); it != r->end() && !it->is_null()) req.options = std::move(*it);
  if ((req.operation == Operation::kCreate || req.operation == Operation::kUpdate) &&
      req.object.is_null()) {
    return Status::InvalidArgument(std::string("request.object is missing for ") +
                                   OperationName(req.operation));
  }
  return req;
}

}  // namespace

Result<AdmissionRequest> DecodeReview(std::string_view body, const DecodeLimits& limits, DecodeScope scope,
                                      const DecodePool* pool) {
  if (body.empty()) return Status::InvalidArgument("empty body: expected an AdmissionReview");
  if (body.size() > limits.max_bytes) {
    return Status::ResourceExhausted("body of " + std::to_string(body.size()) +
                                     " bytes exceeds the limit of " +
                                     std::to_string(limits.max_bytes));
  }
  if (limits.decoder == Decoder::kFast) {
    // simdjson validates the whole text and the nesting limit; what it refuses goes to the
    // reference parser below, so error messages and edge cases answer as before.
    if (auto doc = internal::FastParse(body, limits.max_depth, scope == DecodeScope::kRuleFields,
                                            pool ? &pool->parsers() : nullptr)) {
      return DecodeDocument(std::move(*doc));
    }
  }
  if (JsonNestingDepth(body, limits.max_depth) > limits.max_depth) {
    return Status::ResourceExhausted("JSON nesting deeper than " +
                                     std::to_string(limits.max_depth) + " levels");
  }
  Json doc = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return Status::InvalidArgument("body is not valid JSON (malformed or truncated)");
  }
  return DecodeDocument(std::move(doc));
}

std::string EncodeReview(const AdmissionResponse& response, std::string_view api_version) {
  // Written directly, in the order and bytes of the sorted document nlohmann_json would dump
  // (members by name; the codec tests compare the two).
  std::string out;
  out.reserve(160 + response.uid.size() + (response.status ? response.status->message.size() : 0) +
              response.patch.size() * 4 / 3);
  out += R"({"apiVersion":)";
  AppendJsonString(out, api_version.empty() ? kAdmissionV1 : api_version);
  out += R"(,"kind":"AdmissionReview","response":{"allowed":)";
  out += response.allowed ? "true" : "false";
  if (!response.audit_annotations.empty()) {
    out += R"(,"auditAnnotations":{)";
    bool first = true;
    for (const auto& [key, value] : response.audit_annotations) {
      if (!first) out.push_back(',');
      first = false;
      AppendJsonString(out, key);
      out.push_back(':');
      AppendJsonString(out, value);
    }
    out.push_back('}');
  }
  if (!response.patch.empty()) {
    // The builder guarantees patch is only set on mutating responses.
    out += R"(,"patch":")";
    out += draguard::Base64Encode(response.patch);
    out += R"(","patchType":"JSONPatch")";
  }
  if (response.status) {
    out += R"(,"status":{"code":)";
    out += std::to_string(response.status->code);
    if (!response.status->message.empty()) {
      out += R"(,"message":)";
      AppendJsonString(out, response.status->message);
    }
    if (!response.status->reason.empty()) {
      out += R"(,"reason":)";
      AppendJsonString(out, response.status->reason);
    }
    out.push_back('}');
  }
  out += R"(,"uid":)";
  AppendJsonString(out, response.uid);
  if (!response.warnings.empty()) {
    out += R"(,"warnings":[)";
    for (std::size_t i = 0; i < response.warnings.size(); ++i) {
      if (i) out.push_back(',');
      AppendJsonString(out, response.warnings[i]);
    }
    out.push_back(']');
  }
  out += "}}";
  return out;
}

Status CheckRequestBounds(const AdmissionRequest& request) {
  if (request.uid.size() > kMaxUidBytes) {
    return Status::InvalidArgument("request.uid is " + std::to_string(request.uid.size()) +
                                   " bytes long; a Kubernetes uid has at most " + std::to_string(kMaxUidBytes));
  }
  return Status::Ok();
}

std::string EncodeHttpError(int http_code, std::string_view message_in, std::string_view uid) {
  const std::string message = Truncate(message_in, 4096);
  Json st = Json::object();
  st["code"] = http_code;
  st["status"] = "Failure";
  st["message"] = message;
  Json r = Json::object();
  r["uid"] = std::string(uid);
  r["allowed"] = false;
  r["status"] = st;
  Json doc = Json::object();
  doc["apiVersion"] = std::string(kAdmissionV1);
  doc["kind"] = "AdmissionReview";
  doc["response"] = std::move(r);
  doc["error"] = message;
  return doc.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace draguard::admission
