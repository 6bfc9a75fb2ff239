#include "draguard/engine/scheduler_claims.h"

#include <algorithm>

namespace draguard::engine {

using admission::Json;

bool HasExtendedResourceClaimAnnotation(const Json& object) {
  if (!object.is_object()) return false;
  auto md = object.find("metadata");
  if (md == object.end() || !md->is_object()) return false;
  auto ann = md->find("annotations");
  if (ann == md->end() || !ann->is_object()) return false;
  auto it = ann->find(kExtendedResourceClaimAnnotation);
  return it != ann->end() && it->is_string() && it->get_ref<const std::string&>() == "true";
}

std::string ControllerPodOf(const Json& object) {
  if (!object.is_object()) return "";
  auto md = object.find("metadata");
  if (md == object.end() || !md->is_object()) return "";
  auto refs = md->find("ownerReferences");
  if (refs == md->end() || !refs->is_array()) return "";
  for (const auto& r : *refs) {
    if (!r.is_object()) continue;
    auto kind = r.find("kind");
    auto controller = r.find("controller");
    auto name = r.find("name");
    if (kind == r.end() || !kind->is_string() || *kind != "Pod") continue;
    if (controller == r.end() || !controller->is_boolean() || !controller->get<bool>()) continue;
    if (name == r.end() || !name->is_string()) continue;
    return name->get<std::string>();
  }
  return "";
}

SchedulerClaim ClassifySchedulerClaim(const admission::AdmissionRequest& req, const policy::Policy& policy) {
  if (req.operation != admission::Operation::kCreate) return SchedulerClaim::kNone;
  if (req.kind.group != "resource.k8s.io" || req.kind.kind != "ResourceClaim") return SchedulerClaim::kNone;
  if (!HasExtendedResourceClaimAnnotation(req.object)) return SchedulerClaim::kNone;
  const auto& trusted = policy.trusted_schedulers;
  const std::string& user = req.user_info.username;
  if (!user.empty() && std::find(trusted.begin(), trusted.end(), user) != trusted.end()) {
    return SchedulerClaim::kScheduler;
  }
  return SchedulerClaim::kOther;
}

const char* SchedulerClaimName(SchedulerClaim kind) {
  switch (kind) {
    case SchedulerClaim::kNone: return "none";
    case SchedulerClaim::kScheduler: return "scheduler";
    case SchedulerClaim::kOther: return "other";
  }
  return "none";
}

}  // namespace draguard::engine
