#include "draguard/admission/codec.h"

#include "draguard/admission/response.h"
#include "draguard/base64.h"
#include "draguard/json_string.h"
#include "draguard/truncate.h"
#include "envelope.h"
#include "fast_parse.h"

#include <utility>

namespace draguard::admission {
namespace {

// A nlohmann document as an envelope node (envelope.h).
class JsonNode {
 public:
  explicit JsonNode(Json* j) : j_(j) {}
  bool IsNull() const { return j_->is_null(); }
  bool IsObject() const { return j_->is_object(); }
  bool IsString() const { return j_->is_string(); }
  bool IsArray() const { return j_->is_array(); }
  bool IsBool() const { return j_->is_boolean(); }
  std::optional<JsonNode> Member(std::string_view key) const {
    auto it = j_->find(key);
    if (it == j_->end()) return std::nullopt;
    return JsonNode(&*it);
  }
  template <class F>
  void ForEachMember(F f) const {
    for (auto it = j_->begin(); it != j_->end(); ++it) f(std::string_view(it.key()), JsonNode(&*it));
  }
  std::string_view String() const { return j_->get_ref<const std::string&>(); }
  bool Bool() const { return j_->get<bool>(); }
  std::size_t Size() const { return j_->size(); }  // an array's length
  template <class F>
  bool ForEachElement(F f) const {
    for (auto& e : *j_) {
      if (!f(JsonNode(&e))) return false;
    }
    return true;
  }
  // Moved out, not copied: the reviewed objects are most of the body.
  Json Take(bool /*whole: the document is already as decoded*/) { return std::move(*j_); }
  Json TakeObject(bool whole) { return Take(whole); }

 private:
  Json* j_;
};

}  // namespace

namespace internal {

Result<Operation> ParseOperation(std::string_view op) {
  if (op == "CREATE") return Operation::kCreate;
  if (op == "UPDATE") return Operation::kUpdate;
  if (op == "DELETE") return Operation::kDelete;
  if (op == "CONNECT") return Operation::kConnect;
  return Status::InvalidArgument("request.operation \"" + Truncate(op) +
                                 "\" is not one of CREATE, UPDATE, DELETE, CONNECT");
}

}  // namespace internal

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

// The reference decode: nlohmann_json's parser, after the nesting check.
Result<AdmissionRequest> ReferenceDecode(std::string_view body, const DecodeLimits& limits) {
  if (JsonNestingDepth(body, limits.max_depth) > limits.max_depth) {
    return Status::ResourceExhausted("JSON nesting deeper than " +
                                     std::to_string(limits.max_depth) + " levels");
  }
  Json doc = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return Status::InvalidArgument("body is not valid JSON (malformed or truncated)");
  }
  return internal::DecodeEnvelope(JsonNode(&doc));
}

// simdjson validates the whole text and the nesting limit; what it refuses goes to the reference
// parser, so error messages and edge cases answer as before. One named result, returned in place.
Result<AdmissionRequest> DecodeFast(std::string_view body, const DecodeLimits& limits, DecodeScope scope,
                                    const DecodePool* pool, std::size_t readable_past_end) {
  bool refused = false;
  Result<AdmissionRequest> decoded =
      internal::FastDecode(body, readable_past_end, limits.max_depth, scope == DecodeScope::kRuleFields,
                           pool ? &pool->parsers() : nullptr, &refused);
  if (refused) decoded = ReferenceDecode(body, limits);
  return decoded;
}

}  // namespace

Result<AdmissionRequest> DecodeReview(std::string_view body, const DecodeLimits& limits, DecodeScope scope,
                                      const DecodePool* pool, std::size_t readable_past_end) {
  if (body.empty()) return Status::InvalidArgument("empty body: expected an AdmissionReview");
  if (body.size() > limits.max_bytes) {
    return Status::ResourceExhausted("body of " + std::to_string(body.size()) +
                                     " bytes exceeds the limit of " +
                                     std::to_string(limits.max_bytes));
  }
  if (limits.decoder == Decoder::kFast) return DecodeFast(body, limits, scope, pool, readable_past_end);
  return ReferenceDecode(body, limits);
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
