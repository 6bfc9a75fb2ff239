// The review of /validate-topology: see include/draguard/webhook/topology_review.h.
#include "draguard/webhook/topology_review.h"

#include "draguard/kube/watch.h"
#include "draguard/kubetopo/shape_object.h"
#include "draguard/truncate.h"

namespace draguard::webhook {

ReviewOutcome ReviewTopologyObject(std::string_view body, const admission::DecodeLimits& limits,
                                   std::size_t readable_past_end) {
  ReviewOutcome out;
  auto decoded = admission::DecodeReview(body, limits, admission::DecodeScope::kFull, nullptr, readable_past_end);
  if (!decoded.ok()) {
    const Status& st = decoded.status();
    out.http_status = st.code() == StatusCode::kResourceExhausted && body.size() > limits.max_bytes ? 413 : 400;
    out.error = Truncate(st.message(), 1024);
    out.verdict = engine::Verdict::kError;
    out.body = admission::EncodeHttpError(out.http_status, "invalid AdmissionReview: " + st.message());
    return out;
  }
  const admission::AdmissionRequest& req = *decoded;
  if (Status st = admission::CheckRequestBounds(req); !st.ok()) {
    out.http_status = 400;
    out.error = st.message();
    out.verdict = engine::Verdict::kError;
    out.body = admission::EncodeHttpError(400, "invalid AdmissionReview: " + st.message());
    return out;
  }
  out.uid = req.uid;
  out.kind = Truncate(req.kind.kind);
  out.kind_label = req.kind.group.empty() && req.kind.kind == "ConfigMap" ? "ConfigMap" : "other";
  out.namespace_ = Truncate(req.namespace_);
  out.name = Truncate(req.name);
  out.operation = admission::OperationName(req.operation);
  out.user = Truncate(req.user_info.username);
  out.dry_run = req.dry_run;

  admission::AdmissionResponse response = admission::Allowed();
  out.verdict = engine::Verdict::kAllow;
  const bool writes = req.operation == admission::Operation::kCreate || req.operation == admission::Operation::kUpdate;
  if (writes && req.kind.group.empty() && req.kind.kind == "ConfigMap" && req.sub_resource.empty()) {
    Result<kube::Object> object = kube::ParseObject(req.object.dump());
    Status verdict = object.status();
    if (object.ok()) {
      topology::ShapeInterner interner;
      Result<topology::ShapeRecord> record = kubetopo::VerifyShapeObject(*object, interner);
      verdict = record.status();
    }
    if (!verdict.ok()) {
      response = admission::Denied("draguard: not a valid shape object: " + verdict.message());
      out.verdict = engine::Verdict::kDeny;
    }
  }
  out.body = admission::EncodeReview(admission::Complete(std::move(response), req.uid, admission::WebhookKind::kValidating),
                                     req.api_version);
  return out;
}

}  // namespace draguard::webhook
