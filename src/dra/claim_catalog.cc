#include "draguard/dra/claim_catalog.h"

#include <algorithm>

#include "draguard/dra/claims.h"

namespace draguard::dra {
namespace {

constexpr std::string_view kNumaNodeAttribute = "resource.kubernetes.io/numaNode";

// True when a constraint over `requests` covers main request `name` (itself, or a subrequest
// "name/sub" of it; an empty list covers every request).
bool Holds(const std::vector<std::string>& requests, std::string_view name) {
  if (requests.empty()) return true;
  return std::any_of(requests.begin(), requests.end(), [&](const std::string& r) {
    return r == name || (r.size() > name.size() && r.compare(0, name.size(), name) == 0 && r[name.size()] == '/');
  });
}

}  // namespace

bool ClaimSummary::NumaAligned(std::string_view a, std::string_view b) const {
  for (const auto& c : numa_constraints) {
    if (Holds(c, a) && Holds(c, b)) return true;
  }
  return false;
}

std::size_t ClaimSummary::Bytes() const {
  std::size_t n = sizeof(ClaimSummary);
  for (const auto& r : requests) {
    n += sizeof(Request) + r.name.capacity();
    for (const auto& c : r.classes) n += sizeof(std::string) + c.capacity();
  }
  for (const auto& c : numa_constraints) {
    n += sizeof(c);
    for (const auto& r : c) n += sizeof(std::string) + r.capacity();
  }
  return n;
}

std::optional<ClaimSummary> SummarizeClaimObject(const admission::Json& object) {
  if (!object.is_object()) return std::nullopt;
  const auto api = object.find("apiVersion");
  const auto kind = object.find("kind");
  if (api == object.end() || !api->is_string() || kind == object.end() || !kind->is_string()) return std::nullopt;
  const std::string& api_version = api->get_ref<const std::string&>();
  if (api_version.rfind("resource.k8s.io/", 0) != 0) return std::nullopt;
  // The claim views read a CREATE request; a stored object is read the same way.
  admission::AdmissionRequest req;
  req.kind = {"resource.k8s.io", api_version.substr(16), kind->get<std::string>()};
  req.operation = admission::Operation::kCreate;
  req.object = object;
  auto claim = FindClaim(req);
  if (!claim) return std::nullopt;
  ClaimSummary out;
  for (const auto& r : claim->requests) {
    ClaimSummary::Request s;
    s.name = r.name;
    for (const auto& alt : r.alternatives) {
      if (!alt.device_class.empty()) s.classes.push_back(alt.device_class);
    }
    out.requests.push_back(std::move(s));
  }
  for (const auto& c : claim->constraints) {
    if (c.match_attribute == kNumaNodeAttribute) out.numa_constraints.push_back(c.requests);
  }
  return out;
}

}  // namespace draguard::dra
