// DG013 claim-static-limits: table of pass / fail / skip cases, each action, exemption.
#include "rule_test_util.h"

namespace draguard::engine::testing {
namespace {

std::string Reqs(int n, const std::string& extra = "") {
  std::string r;
  for (int i = 0; i < n; ++i) {
    r += (i ? "," : "") + std::string(R"({"name":"r)") + std::to_string(i) + R"(","exactly":{"deviceClassName":"gpu.nvidia.com"}})";
  }
  return Template(R"({"devices":{"requests":[)" + r + "]" + extra + "}}");
}

TEST(Dg013, Table) {
  const std::string d = "/spec/spec/devices";
  std::vector<Case> cases = {
      {"fine", Reqs(2, R"(,"constraints":[{"requests":["r0","r1"],"matchAttribute":"resource.kubernetes.io/pcieRoot"}])"), RuleStatus::kPass, {}, ""},
      {"33_requests", Reqs(33), RuleStatus::kFail, {d + "/requests", d + "/requests"}, "33 requests (limit 32)"},
      {"bad_request_name", Template(R"({"devices":{"requests":[{"name":"GPU_0","exactly":{"deviceClassName":"gpu.nvidia.com"}}]}})"),
       RuleStatus::kFail, {d + "/requests/0/name"}, "not a DNS label"},
      {"duplicate_name", Template(R"({"devices":{"requests":[{"name":"g","exactly":{"deviceClassName":"gpu.nvidia.com"}},{"name":"g","exactly":{"deviceClassName":"gpu.nvidia.com"}}]}})"),
       RuleStatus::kFail, {d + "/requests/1/name"}, "two requests named"},
      {"both_exactly_and_first_available", Template(R"({"devices":{"requests":[{"name":"g","exactly":{"deviceClassName":"gpu.nvidia.com"},"firstAvailable":[{"name":"a","deviceClassName":"gpu.nvidia.com"}]}]}})"),
       RuleStatus::kFail, {d + "/requests/0"}, "exactly one of exactly and firstAvailable"},
      {"v1_flat_shape", Template(R"({"devices":{"requests":[{"name":"g","deviceClassName":"gpu.nvidia.com"}]}})"),
       RuleStatus::kFail, {d + "/requests/0"}, "must set exactly one of exactly and firstAvailable"},
      {"v1beta1_flat_fine", Template(R"({"devices":{"requests":[{"name":"g","deviceClassName":"gpu.nvidia.com","count":2}]}})", "v1beta1"), RuleStatus::kPass, {}, ""},
      {"v1beta1_class_and_first_available", Template(R"({"devices":{"requests":[{"name":"g","deviceClassName":"gpu.nvidia.com","firstAvailable":[{"name":"a","deviceClassName":"gpu.nvidia.com"}]}]}})", "v1beta1"),
       RuleStatus::kFail, {d + "/requests/0"}, "both deviceClassName and firstAvailable"},
      {"nine_alternatives", Template(R"({"devices":{"requests":[{"name":"g","firstAvailable":[{"name":"a1","deviceClassName":"x"},{"name":"a2","deviceClassName":"x"},{"name":"a3","deviceClassName":"x"},{"name":"a4","deviceClassName":"x"},{"name":"a5","deviceClassName":"x"},{"name":"a6","deviceClassName":"x"},{"name":"a7","deviceClassName":"x"},{"name":"a8","deviceClassName":"x"},{"name":"a9","deviceClassName":"x"}]}]}})"),
       RuleStatus::kFail, {d + "/requests/0/firstAvailable"}, "9 firstAvailable entries (limit 8)"},
      {"count_40", Template(R"({"devices":{"requests":[{"name":"g","exactly":{"deviceClassName":"gpu.nvidia.com","count":40}}]}})"),
       RuleStatus::kFail, {d + "/requests/0/exactly/count", d + "/requests"}, "a claim holds at most 32"},
      {"total_over_32", Template(R"({"devices":{"requests":[{"name":"a","exactly":{"deviceClassName":"gpu.nvidia.com","count":20}},{"name":"b","exactly":{"deviceClassName":"gpu.nvidia.com","count":20}}]}})"),
       RuleStatus::kFail, {d + "/requests"}, "up to 40 devices"},
      {"count_with_all", Template(R"({"devices":{"requests":[{"name":"g","exactly":{"deviceClassName":"gpu.nvidia.com","allocationMode":"All","count":1}}]}})"),
       RuleStatus::kFail, {d + "/requests/0/exactly/count"}, "count with allocationMode All"},
      {"count_zero", Template(R"({"devices":{"requests":[{"name":"g","exactly":{"deviceClassName":"gpu.nvidia.com","count":0}}]}})"), RuleStatus::kFail, {}, "positive"},
      {"missing_class", Template(R"({"devices":{"requests":[{"name":"g","exactly":{}}]}})"), RuleStatus::kFail, {d + "/requests/0/exactly/deviceClassName"}, "no deviceClassName"},
      {"unqualified_match", Reqs(2, R"(,"constraints":[{"matchAttribute":"pcieRoot"}])"), RuleStatus::kFail, {d + "/constraints/0/matchAttribute"}, "not fully qualified"},
      {"constraint_unknown_request", Reqs(2, R"(,"constraints":[{"requests":["r0","gpu"],"matchAttribute":"resource.kubernetes.io/pcieRoot"}])"),
       RuleStatus::kFail, {d + "/constraints/0/requests/1"}, "names request \"gpu\""},
      {"constraint_subrequest_ok", Template(R"({"devices":{"requests":[{"name":"g","firstAvailable":[{"name":"a","deviceClassName":"gpu.nvidia.com","count":2}]}],"constraints":[{"requests":["g/a"],"matchAttribute":"resource.kubernetes.io/pcieRoot"}]}})"),
       RuleStatus::kPass, {}, ""},
      {"constraint_neither", Reqs(1, R"(,"constraints":[{"requests":["r0"]}])"), RuleStatus::kFail, {d + "/constraints/0"}, "exactly one of matchAttribute"},
      {"config_unknown_request", Reqs(1, R"(,"config":[{"requests":["nope"],"opaque":{"driver":"gpu.nvidia.com","parameters":{}}}])"),
       RuleStatus::kFail, {d + "/config/0/requests/0"}, "config names request"},
      {"config_parameters_not_object", Reqs(1, R"(,"config":[{"opaque":{"driver":"gpu.nvidia.com","parameters":[1]}}])"),
       RuleStatus::kFail, {d + "/config/0/opaque/parameters"}, "JSON object"},
      {"not_a_claim", R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{}})", RuleStatus::kSkip, {}, ""},
  };
  for (const auto& c : cases) CheckCase("DG013", c);
}

TEST(Dg013, LongSelector) {
  nlohmann::json spec = nlohmann::json::parse(
      R"({"devices":{"requests":[{"name":"g","exactly":{"deviceClassName":"gpu.nvidia.com","selectors":[{"cel":{"expression":""}}]}}]}})");
  spec["devices"]["requests"][0]["exactly"]["selectors"][0]["cel"]["expression"] =
      "device.driver == '" + std::string(11000, 'a') + "'";
  CheckCase("DG013", {"11k", Template(spec.dump()), RuleStatus::kFail, {}, "limit 10240"});
}

TEST(Dg013, ActionsAndExemption) { ExpectActionsAndExemption("DG013", Request(Reqs(33))); }

}  // namespace
}  // namespace draguard::engine::testing
