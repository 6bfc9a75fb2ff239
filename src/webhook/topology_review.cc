// The review of /validate-topology: see include/draguard/webhook/topology_review.h.
#include "draguard/webhook/topology_review.h"

#include "decode_step.h"
#include "draguard/kube/watch.h"
#include "draguard/kubetopo/shape_object.h"

namespace draguard::webhook {

ReviewOutcome ReviewTopologyObject(std::string_view body, const admission::DecodeLimits& limits,
                                   std::size_t readable_past_end) {
  ReviewOutcome out;
  std::optional<admission::AdmissionRequest> decoded =
      internal::DecodeStep(body, limits, admission::DecodeScope::kFull, nullptr, readable_past_end, out);
  if (!decoded) return out;
  const admission::AdmissionRequest& req = *decoded;
  out.kind_label = req.kind.group.empty() && req.kind.kind == "ConfigMap" ? "ConfigMap" : "other";

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
