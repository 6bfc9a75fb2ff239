// Custom resources of the wrong shape at configured pod-template / container paths: denied in
// enforce mode with the path and the expected type, a warning in audit mode; built-in kinds and
// Pods are left to the API server's typed decoding.
#include "draguard/engine/shape.h"

#include <gtest/gtest.h>

#include "draguard/engine/engine.h"
#include "rule_test_util.h"

namespace draguard::engine::testing {
namespace {

std::string PyTorchJob(const std::string& worker_spec) {
  return R"({"apiVersion":"kubeflow.org/v1","kind":"PyTorchJob","metadata":{"name":"train"},
             "spec":{"pytorchReplicaSpecs":{"Worker":{"replicas":2,"template":{"spec":)" + worker_spec + "}}}}}";
}

std::vector<std::string> Errors(const std::string& object, const policy::Policy& pol = DefaultPolicy()) {
  return CustomResourceShapeErrors(Request(object), pol);
}

TEST(CustomResourceShape, WellFormedAndAbsentFieldsPass) {
  EXPECT_TRUE(Errors(PyTorchJob(R"({"containers":[{"name":"t","image":"x","resources":{"limits":{"nvidia.com/gpu":1,"cpu":"2"}}}]})")).empty());
  EXPECT_TRUE(Errors(PyTorchJob(R"({"containers":[{"name":"t","resources":null}],"initContainers":null})")).empty());
  EXPECT_TRUE(Errors(R"({"apiVersion":"kubeflow.org/v1","kind":"PyTorchJob","metadata":{"name":"t"},"spec":{}})").empty());
}

TEST(CustomResourceShape, ContainersAsAnObject) {
  auto e = Errors(PyTorchJob(R"({"containers":{"name":"t","resources":{"limits":{"nvidia.com/gpu":1}}}})"));
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0], "/spec/pytorchReplicaSpecs/Worker/template/spec/containers must be a list of containers, not an object");
}

TEST(CustomResourceShape, LimitsAsAListAndOtherWrongTypes) {
  auto e = Errors(PyTorchJob(R"({"containers":[{"name":"t","resources":{"limits":[{"nvidia.com/gpu":1}],
      "requests":{"nvidia.com/gpu":{"n":1}}}}, "sidecar", {"name":7,"resources":"lots"}],
      "resources":{"requests":"1"}, "resourceClaims":{"a":1}})"));
  EXPECT_EQ(e, (std::vector<std::string>{
                   "/spec/pytorchReplicaSpecs/Worker/template/spec/containers/0/resources/limits must be a map of resource names to quantities, not a list",
                   "/spec/pytorchReplicaSpecs/Worker/template/spec/containers/0/resources/requests/nvidia.com~1gpu must be a quantity, not an object",
                   "/spec/pytorchReplicaSpecs/Worker/template/spec/containers/1 must be an object (a container), not a string",
                   "/spec/pytorchReplicaSpecs/Worker/template/spec/containers/2/name must be a string, not a number",
                   "/spec/pytorchReplicaSpecs/Worker/template/spec/containers/2/resources must be an object (resource requirements), not a string",
                   "/spec/pytorchReplicaSpecs/Worker/template/spec/resources/requests must be a map of resource names to quantities, not a string",
                   "/spec/pytorchReplicaSpecs/Worker/template/spec/resourceClaims must be a list, not an object",
               }));
}

TEST(CustomResourceShape, PathOfTheWrongType) {
  // `*` wants a map, `name[]` a list, a template an object.
  auto e = Errors(R"({"apiVersion":"kubeflow.org/v1","kind":"PyTorchJob","metadata":{"name":"t"},"spec":{"pytorchReplicaSpecs":[{"template":{}}]}})");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0], "/spec/pytorchReplicaSpecs must be an object, not a list");
  e = Errors(R"({"apiVersion":"ray.io/v1","kind":"RayCluster","metadata":{"name":"r"},"spec":{"headGroupSpec":{"template":"pod"},"workerGroupSpecs":{"template":{}}}})");
  EXPECT_EQ(e, (std::vector<std::string>{"/spec/headGroupSpec/template must be an object (a pod template), not a string",
                                         "/spec/workerGroupSpecs must be a list, not an object"}));
  e = Errors(R"({"apiVersion":"ray.io/v1","kind":"RayCluster","metadata":{"name":"r"},"spec":{"headGroupSpec":{"template":{"spec":[]}}}})");
  EXPECT_EQ(e, std::vector<std::string>{"/spec/headGroupSpec/template/spec must be an object (a pod spec), not a list"});
}

TEST(CustomResourceShape, ConfiguredContainerPaths) {
  // KServe's predictor.model is a container-like object (customResources[].containers).
  auto e = Errors(R"({"apiVersion":"serving.kserve.io/v1beta1","kind":"InferenceService","metadata":{"name":"m"},
                      "spec":{"predictor":{"model":{"resources":{"limits":["nvidia.com/gpu"]}}}}})");
  EXPECT_EQ(e, std::vector<std::string>{"/spec/predictor/model/resources/limits must be a map of resource names to quantities, not a list"});
}

TEST(CustomResourceShape, BuiltInKindsPodsAndUnconfiguredKindsAreNotChecked) {
  EXPECT_TRUE(Errors(R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"spec":{"containers":{"a":1}}}}})").empty());
  EXPECT_TRUE(Errors(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":{"a":1}}})").empty());
  EXPECT_TRUE(Errors(R"({"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"p"},"spec":{"template":{"spec":{"containers":{}}}}})").empty());
  auto pol = DefaultPolicy();
  pol.custom_resources.clear();
  EXPECT_TRUE(Errors(PyTorchJob(R"({"containers":{}})"), pol).empty());
}

TEST(CustomResourceShape, UpdateChecksOnlyChangedTemplates) {
  auto bad = Json::parse(PyTorchJob(R"({"containers":{}})"));
  auto req = Request(bad.dump(), "team-a", admission::Operation::kUpdate);
  req.old_object = bad;
  EXPECT_TRUE(CustomResourceShapeErrors(req, DefaultPolicy()).empty());
  req.old_object = Json::parse(PyTorchJob(R"({"containers":[]})"));
  EXPECT_EQ(CustomResourceShapeErrors(req, DefaultPolicy()).size(), 1u);
}

TEST(CustomResourceShape, ErrorsAreCapped) {
  std::string containers;
  for (int i = 0; i < 20; ++i) containers += std::string(i ? "," : "") + "1";
  EXPECT_EQ(Errors(PyTorchJob(R"({"containers":[)" + containers + "]}")).size(), kMaxShapeErrors);
}

TEST(CustomResourceShape, DeniedInEnforceWarnedInAudit) {
  auto req = Request(PyTorchJob(R"({"containers":{"name":"t","resources":{"limits":{"nvidia.com/gpu":1}}}})"));
  auto pol = DefaultPolicy();
  auto d = Review(req, pol);
  EXPECT_EQ(d.verdict, Verdict::kDeny);
  ASSERT_TRUE(d.response.status.has_value());
  EXPECT_EQ(d.response.status->message,
            "malformed custom resource: PyTorchJob \"train\": /spec/pytorchReplicaSpecs/Worker/template/spec/containers "
            "must be a list of containers, not an object (draguard cannot check pod templates of the wrong shape)");
  EXPECT_EQ(d.response.audit_annotations.at("custom-resource-shape"),
            "PyTorchJob \"train\": /spec/pytorchReplicaSpecs/Worker/template/spec/containers must be a list of "
            "containers, not an object");
  pol.mode = policy::Mode::kAudit;
  auto a = Review(req, pol);
  EXPECT_TRUE(a.response.allowed);
  ASSERT_FALSE(a.response.warnings.empty());
  EXPECT_EQ(a.response.warnings[0].rfind("PyTorchJob \"train\": /spec/pytorchReplicaSpecs/Worker/template/spec/containers", 0), 0u)
      << a.response.warnings[0];
  EXPECT_EQ(a.response.audit_annotations.count("custom-resource-shape"), 1u);
  // An exempt namespace is not judged at all.
  pol.mode = policy::Mode::kEnforce;
  pol.exemptions.namespaces = {"team-a"};
  EXPECT_EQ(Review(req, pol).verdict, Verdict::kExempt);
}

TEST(CustomResourceShape, RuleDenialsComeFirst) {
  // A well-formed legacy worker next to a malformed one: DG001's message, then the shape error.
  auto req = Request(R"({"apiVersion":"kubeflow.org/v1","kind":"PyTorchJob","metadata":{"name":"train"},
      "spec":{"pytorchReplicaSpecs":{
        "Master":{"template":{"spec":{"containers":[{"name":"m","resources":{"limits":{"nvidia.com/gpu":1}}}]}}},
        "Worker":{"template":{"spec":{"containers":{"name":"w"}}}}}}})");
  auto pol = DefaultPolicy();
  pol.mutation.enabled = false;
  auto d = Review(req, pol);
  EXPECT_EQ(d.verdict, Verdict::kDeny);
  ASSERT_TRUE(d.response.status.has_value());
  EXPECT_EQ(d.response.status->message.rfind("DG001", 0), 0u) << d.response.status->message;
  EXPECT_NE(d.response.status->message.find("malformed custom resource: PyTorchJob \"train\": "
                                            "/spec/pytorchReplicaSpecs/Worker/template/spec/containers"),
            std::string::npos);
}

}  // namespace
}  // namespace draguard::engine::testing
