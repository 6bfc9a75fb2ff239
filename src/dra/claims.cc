#include "draguard/dra/claims.h"

#include "draguard/dra/pod_specs.h"

namespace draguard::dra {
namespace {

using admission::Json;

std::vector<std::string> Strings(const Json* arr) {
  std::vector<std::string> out;
  if (arr == nullptr || !arr->is_array()) return out;
  for (const auto& e : *arr) {
    if (e.is_string()) out.push_back(e.get<std::string>());
  }
  return out;
}

// Reads the device-request fields shared by ExactDeviceRequest, DeviceSubRequest and v1beta1's
// flat DeviceRequest.
Alternative ReadAlternative(const Json& obj, const std::string& pointer, const std::string& main,
                            const std::string& sub) {
  Alternative a;
  a.name = sub;
  a.ref = sub.empty() ? main : main + "/" + sub;
  a.pointer = pointer;
  a.obj = &obj;
  a.device_class = StringMember(&obj, "deviceClassName");
  a.allocation_mode = StringMember(&obj, "allocationMode");
  a.all = a.allocation_mode == "All";
  if (const Json* c = Member(&obj, "count")) {
    a.count_set = true;
    if (c->is_number_integer()) a.count = c->get<int64_t>();
    else a.count = -1;  // malformed: reported by DG013
  }
  if (const Json* aa = Member(&obj, "adminAccess")) a.admin_access = aa->is_boolean() && aa->get<bool>();
  if (const Json* sels = Member(&obj, "selectors"); sels != nullptr && sels->is_array()) {
    a.selector_count = sels->size();
    for (std::size_t i = 0; i < sels->size(); ++i) {
      const Json* expr = Member(Member(&(*sels)[i], "cel"), "expression");
      if (expr == nullptr || !expr->is_string()) continue;
      a.selectors.push_back({expr->get<std::string>(), pointer + "/selectors/" + std::to_string(i) + "/cel/expression"});
    }
  }
  return a;
}

}  // namespace

std::string Describe(const Alternative& alt) { return "request \"" + alt.ref + "\""; }

std::string DriverOfClass(const policy::Policy& policy, const std::string& device_class) {
  return policy.device_classes.IsGpuClass(device_class) ? "gpu.nvidia.com" : "";
}

std::optional<ClaimRef> FindClaim(const admission::AdmissionRequest& request) {
  const auto& gvk = request.kind;
  if (gvk.group != "resource.k8s.io") return std::nullopt;
  if (gvk.kind != "ResourceClaim" && gvk.kind != "ResourceClaimTemplate") return std::nullopt;
  // The spec of claims and templates is immutable: an UPDATE changes metadata only (controllers
  // add and remove finalizers), and judging it again would block the cleanup of claims admitted
  // before the policy. Claims are judged when they are created.
  if (request.operation != admission::Operation::kCreate) return std::nullopt;
  const Json& obj = request.object;
  if (!obj.is_object()) return std::nullopt;
  ClaimRef c;
  c.kind = gvk.kind;
  c.version = gvk.version;
  std::string api = StringMember(&obj, "apiVersion");
  if (c.version.empty() && api.rfind("resource.k8s.io/", 0) == 0) c.version = api.substr(16);
  c.owner = OwnerName(request);
  c.labels = StringMapAt(obj, {"metadata", "labels"});
  c.annotations = StringMapAt(obj, {"metadata", "annotations"});
  const Json* spec = Member(&obj, "spec");
  c.spec_pointer = "/spec";
  if (gvk.kind == "ResourceClaimTemplate") {
    for (const auto& [k, v] : StringMapAt(obj, {"spec", "metadata", "labels"})) c.labels.emplace(k, v);
    for (const auto& [k, v] : StringMapAt(obj, {"spec", "metadata", "annotations"})) c.annotations.emplace(k, v);
    spec = Member(spec, "spec");
    c.spec_pointer = "/spec/spec";
  }
  const Json* devices = Member(spec, "devices");
  std::string dp = c.spec_pointer + "/devices";
  // v1alpha3 (1.31) and v1beta1 (1.32) have flat requests; v1beta2 and v1 wrap them in `exactly`.
  bool flat = c.version == "v1beta1" || c.version == "v1alpha3";
  if (const Json* reqs = Member(devices, "requests"); reqs != nullptr && reqs->is_array()) {
    for (std::size_t i = 0; i < reqs->size(); ++i) {
      const Json& r = (*reqs)[i];
      DeviceRequestRef ref;
      ref.pointer = dp + "/requests/" + std::to_string(i);
      ref.name = StringMember(&r, "name");
      ref.obj = &r;
      if (const Json* fa = Member(&r, "firstAvailable"); fa != nullptr && fa->is_array()) {
        ref.first_available = true;
        ref.first_available_count = fa->size();
        for (std::size_t j = 0; j < fa->size(); ++j) {
          if (!(*fa)[j].is_object()) continue;
          ref.alternatives.push_back(ReadAlternative((*fa)[j], ref.pointer + "/firstAvailable/" + std::to_string(j),
                                                     ref.name, StringMember(&(*fa)[j], "name")));
        }
      }
      if (flat) {
        if (!ref.first_available && r.is_object()) {
          ref.alternatives.push_back(ReadAlternative(r, ref.pointer, ref.name, ""));
        }
      } else if (const Json* ex = Member(&r, "exactly"); ex != nullptr && ex->is_object()) {
        ref.has_exactly = true;
        if (!ref.first_available) ref.alternatives.push_back(ReadAlternative(*ex, ref.pointer + "/exactly", ref.name, ""));
      }
      c.requests.push_back(std::move(ref));
    }
  }
  if (const Json* cons = Member(devices, "constraints"); cons != nullptr && cons->is_array()) {
    for (std::size_t i = 0; i < cons->size(); ++i) {
      const Json& e = (*cons)[i];
      ConstraintRef ref;
      ref.pointer = dp + "/constraints/" + std::to_string(i);
      ref.requests = Strings(Member(&e, "requests"));
      ref.match_attribute = StringMember(&e, "matchAttribute");
      ref.distinct_attribute = StringMember(&e, "distinctAttribute");
      c.constraints.push_back(std::move(ref));
    }
  }
  if (const Json* cfg = Member(devices, "config"); cfg != nullptr && cfg->is_array()) {
    for (std::size_t i = 0; i < cfg->size(); ++i) {
      const Json& e = (*cfg)[i];
      ConfigRef ref;
      ref.pointer = dp + "/config/" + std::to_string(i);
      ref.requests = Strings(Member(&e, "requests"));
      const Json* opaque = Member(&e, "opaque");
      ref.driver = StringMember(opaque, "driver");
      ref.parameters = Member(opaque, "parameters");
      ref.parameters_pointer = ref.pointer + "/opaque/parameters";
      c.configs.push_back(std::move(ref));
    }
  }
  return c;
}

}  // namespace draguard::dra
