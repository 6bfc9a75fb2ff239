// CEL-bomb ResourceClaim reviews, shared by the reviewer budget tests and the server's hostile-load
// test (which includes this file by path).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace draguard::test_support {

/// The nested lists.range bomb of the hostile-load report: unbounded by the cost estimate, so it
/// is refused before it is evaluated.
inline const std::string kRangeBomb = "lists.range(5000).map(x, lists.range(5000).map(y, x + y)).size() > 0";

/// Four nested all() over ten-element lists: 125,551 estimated units, under the per-selector limit
/// (so the API server accepts it), about 100,000 units per device when evaluated.
inline const std::string kLiteralBomb =
    "[0,1,2,3,4,5,6,7,8,9].all(a, [0,1,2,3,4,5,6,7,8,9].all(b, [0,1,2,3,4,5,6,7,8,9].all(c, "
    "[0,1,2,3,4,5,6,7,8,9].all(d, a + b + c + d >= 0))))";

/// An AdmissionReview (uid `uid`) of a ResourceClaim CREATE with 32 requests of one GPU, each with
/// 32 copies of `selector` after a memory floor (so the claim is otherwise well-formed).
inline std::string CelBombReview(const std::string& uid, const std::string& selector) {
  using Json = nlohmann::json;
  Json requests = Json::array();
  for (int r = 0; r < 32; ++r) {
    Json sels = Json::array();
    sels.push_back({{"cel",
                     {{"expression", "'memory' in device.capacity['gpu.nvidia.com'] && "
                                     "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('8Gi')) >= 0"}}}});
    for (int s = 1; s < 32; ++s) sels.push_back({{"cel", {{"expression", selector}}}});
    requests.push_back({{"name", "r" + std::to_string(r)},
                        {"exactly", {{"deviceClassName", "gpu.nvidia.com"}, {"count", 1}, {"selectors", sels}}}});
  }
  Json claim = {{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceClaim"},
                {"metadata", {{"name", "bomb"}, {"namespace", "ml"}}},
                {"spec", {{"devices", {{"requests", requests}}}}}};
  Json req = {{"uid", uid},
              {"kind", {{"group", "resource.k8s.io"}, {"version", "v1"}, {"kind", "ResourceClaim"}}},
              {"resource", {{"group", "resource.k8s.io"}, {"version", "v1"}, {"resource", "resourceclaims"}}},
              {"namespace", "ml"},
              {"name", "bomb"},
              {"operation", "CREATE"},
              {"userInfo", {{"username", "mallory"}}},
              {"object", claim}};
  return Json{{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"request", req}}.dump();
}

}  // namespace draguard::test_support
