#include "draguard/admission/codec.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace draguard::admission {
namespace {

std::string ReadData(const std::string& rel) {
  std::ifstream in(std::string(DRAGUARD_TEST_DATA) + "/" + rel);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(DecodeReview, DecodesEveryFieldOfARealReview) {
  auto r = DecodeReview(ReadData("reviews/DG001/legacy-limit/request.json"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->api_version, "admission.k8s.io/v1");
  EXPECT_EQ(r->uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
  EXPECT_EQ(r->kind.group, "");
  EXPECT_EQ(r->kind.version, "v1");
  EXPECT_EQ(r->kind.kind, "Pod");
  EXPECT_EQ(r->resource.resource, "pods");
  ASSERT_TRUE(r->request_kind.has_value());
  EXPECT_EQ(r->request_kind->kind, "Pod");
  ASSERT_TRUE(r->request_resource.has_value());
  EXPECT_EQ(r->request_resource->resource, "pods");
  EXPECT_EQ(r->namespace_, "team-a");
  EXPECT_EQ(r->name, "cuda-vectoradd");
  EXPECT_EQ(r->operation, Operation::kCreate);
  EXPECT_EQ(r->user_info.username, "alice");
  ASSERT_EQ(r->user_info.groups.size(), 2u);
  EXPECT_EQ(r->user_info.groups[1], "system:authenticated");
  ASSERT_EQ(r->user_info.extra.count("scopes"), 1u);
  EXPECT_FALSE(r->dry_run);
  EXPECT_TRUE(r->object.is_object());
  EXPECT_TRUE(r->old_object.is_null());
  EXPECT_EQ(r->options["kind"], "CreateOptions");
}

TEST(DecodeReview, AcceptsV1beta1Envelope) {
  std::string body = R"({"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview",
    "request":{"uid":"u","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"DELETE",
    "oldObject":{"kind":"Pod"},"dryRun":true}})";
  auto r = DecodeReview(body);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->api_version, "admission.k8s.io/v1beta1");
  EXPECT_EQ(r->operation, Operation::kDelete);
  EXPECT_TRUE(r->dry_run);
  EXPECT_TRUE(r->object.is_null());
}

struct BadCase {
  const char* name;
  std::string body;
  const char* expect_in_message;
};

class DecodeBad : public ::testing::TestWithParam<BadCase> {};

TEST_P(DecodeBad, IsRejectedWithAClearMessage) {
  auto r = DecodeReview(GetParam().body);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(GetParam().expect_in_message), std::string::npos)
      << r.status().message();
}

std::string Deep(int n) { return std::string(n, '[') + std::string(n, ']'); }

INSTANTIATE_TEST_SUITE_P(
    All, DecodeBad,
    ::testing::Values(
        BadCase{"empty", "", "empty body"},
        BadCase{"not_json", "hello", "not valid JSON"},
        BadCase{"truncated", R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionRev)", "not valid JSON"},
        BadCase{"array", "[1,2]", "not a JSON object"},
        BadCase{"wrong_kind", R"({"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{}})", "expected \"AdmissionReview\""},
        BadCase{"wrong_version", R"({"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview","request":{}})", "not supported"},
        BadCase{"no_request", R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"})", "has no request"},
        BadCase{"request_not_object", R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":3})", "request must be an object"},
        BadCase{"no_uid", R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"kind":{"kind":"Pod"},"operation":"CREATE","object":{}}})", "uid is missing"},
        BadCase{"uid_number", R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":5}})", "uid must be a string"},
        BadCase{"bad_operation", R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"kind":"Pod"},"operation":"PATCH"}})", "not one of CREATE"},
        BadCase{"create_without_object", R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"kind":"Pod"},"operation":"CREATE"}})", "object is missing"},
        BadCase{"deep_nesting", R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":)" + Deep(100000) + "}", "nesting deeper"},
        BadCase{"groups_not_list", R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"kind":"Pod"},"operation":"DELETE","userInfo":{"groups":"x"}}})", "groups must be a list"}),
    [](const ::testing::TestParamInfo<BadCase>& i) { return std::string(i.param.name); });

TEST(DecodeReview, RejectsBodiesOverTheLimit) {
  DecodeLimits limits;
  limits.max_bytes = 64;
  auto r = DecodeReview(std::string(65, ' '), limits);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
}

TEST(JsonNestingDepth, IgnoresBracketsInsideStrings) {
  EXPECT_EQ(JsonNestingDepth(R"({"a":"[[[[{{{{\"[["})", 100), 1u);
  EXPECT_EQ(JsonNestingDepth(R"([[[]],[]])", 100), 3u);
}

TEST(EncodeReview, EchoesTheEnvelopeVersion) {
  AdmissionResponse r;
  r.uid = "abc";
  auto j = nlohmann::json::parse(EncodeReview(r, "admission.k8s.io/v1beta1"));
  EXPECT_EQ(j["apiVersion"], "admission.k8s.io/v1beta1");
  EXPECT_EQ(j["kind"], "AdmissionReview");
  EXPECT_EQ(j["response"]["uid"], "abc");
  EXPECT_EQ(j["response"]["allowed"], true);
  EXPECT_FALSE(j["response"].contains("patch"));
  EXPECT_FALSE(j["response"].contains("patchType"));
  EXPECT_FALSE(j["response"].contains("status"));
}

TEST(EncodeHttpError, SaysWhatWasWrong) {
  auto j = nlohmann::json::parse(EncodeHttpError(400, "body is not valid JSON", "u1"));
  EXPECT_EQ(j["error"], "body is not valid JSON");
  EXPECT_EQ(j["response"]["status"]["code"], 400);
  EXPECT_EQ(j["response"]["uid"], "u1");
  EXPECT_EQ(j["response"]["allowed"], false);
}

}  // namespace
}  // namespace draguard::admission
