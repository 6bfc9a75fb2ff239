// The review of /validate-topology (webhook/topology_review.h): a shape object as the exporter
// writes it is allowed; one whose content is not its name's, a mutable one or a relabelled one is
// denied with the reason, through the one response builder (uid echoed, 403); deletes and other
// kinds pass; bodies that are no AdmissionReview get 400.
#include "draguard/webhook/topology_review.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "draguard/kubetopo/shape_object.h"
#include "draguard/topology/loader.h"

namespace draguard::webhook {
namespace {

using nlohmann::json;

json ShapeObject() {
  static const json* object = [] {
    auto p = topology::ParseHwlocFile(std::string(DRAGUARD_TEST_DATA) +
                                      "/hwloc/aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml");
    EXPECT_TRUE(p.ok());
    auto o = kubetopo::MakeShapeObject(*p);
    EXPECT_TRUE(o.ok());
    return new json(json::parse(kubetopo::ShapeObjectJson(*o, "draguard-system")));
  }();
  return *object;
}

std::string Review(const json& object, const std::string& operation = "CREATE",
                   const json& kind = {{"group", ""}, {"version", "v1"}, {"kind", "ConfigMap"}}) {
  json req = {{"uid", "0d0c6a2e-0000-4000-8000-000000000046"},
              {"kind", kind},
              {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "configmaps"}}},
              {"namespace", "draguard-system"},
              {"name", object.is_object() ? object["metadata"].value("name", "") : ""},
              {"operation", operation},
              {"userInfo", {{"username", "system:serviceaccount:draguard-system:draguard-exporter"}}},
              {"object", operation == "DELETE" ? json(nullptr) : object},
              {"oldObject", operation == "CREATE" ? json(nullptr) : object}};
  return json{{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"request", req}}.dump();
}

json Response(const ReviewOutcome& out) {
  EXPECT_EQ(out.http_status, 200) << out.body;
  return json::parse(out.body)["response"];
}

TEST(TopologyReviewTest, WhatTheExporterWritesIsAllowed) {
  ReviewOutcome out = ReviewTopologyObject(Review(ShapeObject()), {});
  const json r = Response(out);
  EXPECT_EQ(r["uid"], "0d0c6a2e-0000-4000-8000-000000000046");
  EXPECT_EQ(r["allowed"], true);
  EXPECT_EQ(out.verdict, engine::Verdict::kAllow);
  EXPECT_EQ(out.kind_label, "ConfigMap");
  EXPECT_EQ(out.operation, "CREATE");
  EXPECT_EQ(Response(ReviewTopologyObject(Review(ShapeObject(), "UPDATE"), {}))["allowed"], true);
}

TEST(TopologyReviewTest, ContentNotItsNamesIsDeniedWithTheReason) {
  auto denied = [](const json& object, const std::string& reason) {
    ReviewOutcome out = ReviewTopologyObject(Review(object), {});
    const json r = Response(out);
    EXPECT_EQ(r["allowed"], false) << reason;
    EXPECT_EQ(r["status"]["code"], 403);
    const std::string message = r["status"]["message"];
    EXPECT_NE(message.find("not a valid shape object"), std::string::npos) << message;
    EXPECT_NE(message.find(reason), std::string::npos) << message;
    EXPECT_EQ(out.verdict, engine::Verdict::kDeny);
  };
  json o = ShapeObject();
  o["metadata"]["name"] = "draguard-shape-" + std::string(32, 'f');
  denied(o, "does not match the name");
  o = ShapeObject();
  o["immutable"] = false;
  denied(o, "not immutable");
  o = ShapeObject();
  o["metadata"]["labels"]["draguard.io/topology-shape"] = "ffffffffffffffff";
  denied(o, "labelled shape ffffffffffffffff");
  o = ShapeObject();
  o["binaryData"]["shape.gz"] = "!!";
  denied(o, "binaryData");
}

TEST(TopologyReviewTest, DeletesAndOtherKindsPass) {
  EXPECT_EQ(Response(ReviewTopologyObject(Review(ShapeObject(), "DELETE"), {}))["allowed"], true);
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"name", "p"}}}};
  EXPECT_EQ(Response(ReviewTopologyObject(Review(pod, "CREATE", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}), {}))["allowed"], true);
}

TEST(TopologyReviewTest, BadBodiesAre400) {
  ReviewOutcome out = ReviewTopologyObject("not json", {});
  EXPECT_EQ(out.http_status, 400);
  EXPECT_EQ(out.verdict, engine::Verdict::kError);
  out = ReviewTopologyObject(R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"})", {});
  EXPECT_EQ(out.http_status, 400);
}

}  // namespace
}  // namespace draguard::webhook
