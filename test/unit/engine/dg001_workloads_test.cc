// DG001 on workloads and custom resources, extendedResourceMapping, and the engine's exemptions
// (label selectors, draguard.io/exempt with reason and expiry).
#include "rule_test_util.h"

namespace draguard::engine::testing {
namespace {

const std::string kGpuContainer = R"({"name":"cuda","image":"x","resources":{"limits":{"nvidia.com/gpu":1}}})";
const std::string kTemplate = R"({"metadata":{"labels":{"app":"a"}},"spec":{"containers":[)" + kGpuContainer + "]}}";

std::string Object(const std::string& api, const std::string& kind, const std::string& spec) {
  return R"({"apiVersion":")" + api + R"(","kind":")" + kind + R"(","metadata":{"name":"w"},"spec":)" + spec + "}";
}

struct Workload {
  const char* name;
  std::string object;
  std::string pointer;  // of the finding
};

TEST(Dg001Workloads, EveryBuiltInKindAndDefaultCustomResource) {
  const std::string lim = "/resources/limits/nvidia.com~1gpu";
  std::vector<Workload> cases = {
      {"deployment", Object("apps/v1", "Deployment", R"({"template":)" + kTemplate + "}"), "/spec/template/spec/containers/0" + lim},
      {"statefulset", Object("apps/v1", "StatefulSet", R"({"template":)" + kTemplate + "}"), "/spec/template/spec/containers/0" + lim},
      {"daemonset", Object("apps/v1", "DaemonSet", R"({"template":)" + kTemplate + "}"), "/spec/template/spec/containers/0" + lim},
      {"replicaset", Object("apps/v1", "ReplicaSet", R"({"template":)" + kTemplate + "}"), "/spec/template/spec/containers/0" + lim},
      {"replicationcontroller", Object("v1", "ReplicationController", R"({"template":)" + kTemplate + "}"), "/spec/template/spec/containers/0" + lim},
      {"job", Object("batch/v1", "Job", R"({"template":)" + kTemplate + "}"), "/spec/template/spec/containers/0" + lim},
      {"cronjob", Object("batch/v1", "CronJob", R"({"jobTemplate":{"spec":{"template":)" + kTemplate + "}}}"),
       "/spec/jobTemplate/spec/template/spec/containers/0" + lim},
      {"podtemplate", R"({"apiVersion":"v1","kind":"PodTemplate","metadata":{"name":"w"},"template":)" + kTemplate + "}", "/template/spec/containers/0" + lim},
      {"pytorchjob", Object("kubeflow.org/v1", "PyTorchJob", R"({"pytorchReplicaSpecs":{"Worker":{"replicas":2,"template":)" + kTemplate + "}}}"),
       "/spec/pytorchReplicaSpecs/Worker/template/spec/containers/0" + lim},
      {"tfjob", Object("kubeflow.org/v1", "TFJob", R"({"tfReplicaSpecs":{"PS":{"template":)" + kTemplate + "}}}"), "/spec/tfReplicaSpecs/PS/template/spec/containers/0" + lim},
      {"mpijob", Object("kubeflow.org/v2beta1", "MPIJob", R"({"mpiReplicaSpecs":{"Worker":{"template":)" + kTemplate + "}}}"),
       "/spec/mpiReplicaSpecs/Worker/template/spec/containers/0" + lim},
      {"raycluster", Object("ray.io/v1", "RayCluster", R"({"headGroupSpec":{"template":{"spec":{"containers":[]}}},"workerGroupSpecs":[{"template":)" + kTemplate + "}]}"),
       "/spec/workerGroupSpecs/0/template/spec/containers/0" + lim},
      {"rayjob", Object("ray.io/v1", "RayJob", R"({"rayClusterSpec":{"headGroupSpec":{"template":)" + kTemplate + "}}}"),
       "/spec/rayClusterSpec/headGroupSpec/template/spec/containers/0" + lim},
      {"rayservice", Object("ray.io/v1", "RayService", R"({"rayClusterConfig":{"workerGroupSpecs":[{},{"template":)" + kTemplate + "}]}}"),
       "/spec/rayClusterConfig/workerGroupSpecs/1/template/spec/containers/0" + lim},
      {"leaderworkerset", Object("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", R"({"leaderWorkerTemplate":{"workerTemplate":)" + kTemplate + "}}"),
       "/spec/leaderWorkerTemplate/workerTemplate/spec/containers/0" + lim},
      {"jobset", Object("jobset.x-k8s.io/v1alpha2", "JobSet", R"({"replicatedJobs":[{"name":"w","template":{"spec":{"template":)" + kTemplate + "}}}]}"),
       "/spec/replicatedJobs/0/template/spec/template/spec/containers/0" + lim},
      {"inferenceservice_pod_spec", Object("serving.kserve.io/v1beta1", "InferenceService", R"({"predictor":{"containers":[)" + kGpuContainer + "]}}"),
       "/spec/predictor/containers/0" + lim},
      {"inferenceservice_model", Object("serving.kserve.io/v1beta1", "InferenceService", R"({"predictor":{"model":{"modelFormat":{"name":"x"},"resources":{"limits":{"nvidia.com/gpu":"1"}}}}})"),
       "/spec/predictor/model" + lim},
      {"volcano_job", Object("batch.volcano.sh/v1alpha1", "Job", R"({"tasks":[{"name":"t","template":)" + kTemplate + "}]}"),
       "/spec/tasks/0/template/spec/containers/0" + lim},
      {"trainjob_resources_per_node", Object("trainer.kubeflow.org/v1alpha1", "TrainJob", R"({"trainer":{"resourcesPerNode":{"limits":{"nvidia.com/gpu":2}}}})"),
       "/spec/trainer/resourcesPerNode/limits/nvidia.com~1gpu"},
  };
  for (const auto& c : cases) {
    auto r = RunRule("DG001", Request(c.object), DefaultPolicy());
    EXPECT_EQ(Pointers(r), std::vector<std::string>{c.pointer}) << c.name;
    ASSERT_FALSE(r.findings.empty()) << c.name;
    EXPECT_NE(r.findings[0].message.find(" \"w\""), std::string::npos) << c.name << ": " << r.findings[0].message;
    EXPECT_NE(r.findings[0].message.find("will be converted when its Pods are created"), std::string::npos) << c.name;
  }
}

TEST(Dg001Workloads, WarnWithMutationDenyWithout) {
  auto req = Request(Object("apps/v1", "Deployment", R"({"template":)" + kTemplate + "}"));
  auto pol = DefaultPolicy();
  auto warned = Review(req, pol);
  EXPECT_EQ(warned.verdict, Verdict::kWarn);
  EXPECT_TRUE(warned.response.allowed);
  pol.mutation.enabled = false;
  auto denied = Review(req, pol);
  EXPECT_EQ(denied.verdict, Verdict::kDeny);
  ASSERT_TRUE(denied.response.status.has_value());
  EXPECT_EQ(denied.response.status->message.rfind("DG001 legacy-gpu-resource: Deployment \"w\" /spec/template/spec: container \"cuda\" requests nvidia.com/gpu", 0), 0u)
      << denied.response.status->message;
  // A rule set to audit stays audit even though the workload finding is capped at warn.
  pol.mutation.enabled = true;
  pol.rules["DG001"].action = policy::Action::kAudit;
  EXPECT_EQ(Review(req, pol).verdict, Verdict::kAudit);
}

TEST(Dg001Workloads, UpdateJudgesOnlyChangedTemplates) {
  auto req = Request(Object("apps/v1", "Deployment", R"({"replicas":3,"template":)" + kTemplate + "}"), "team-a",
                     admission::Operation::kUpdate);
  req.old_object = Json::parse(Object("apps/v1", "Deployment", R"({"replicas":1,"template":)" + kTemplate + "}"));
  EXPECT_EQ(RunRule("DG001", req, DefaultPolicy()).status, RuleStatus::kSkip);  // scaling passes
  req.old_object["spec"]["template"]["spec"]["containers"][0]["resources"] = Json::object();
  EXPECT_EQ(RunRule("DG001", req, DefaultPolicy()).status, RuleStatus::kFail);  // the GPU was added
}

TEST(Dg001Workloads, CustomResourcesFromPolicy) {
  auto pol = DefaultPolicy();
  pol.custom_resources = {{"example.com", "Trainer", {"spec.groups[].roles.*.podTemplate"}, {}}};
  auto req = Request(Object("example.com/v1", "Trainer", R"({"groups":[{"roles":{"a":{"podTemplate":)" + kTemplate + "}}}]}"));
  auto r = RunRule("DG001", req, pol);
  EXPECT_EQ(Pointers(r), std::vector<std::string>{"/spec/groups/0/roles/a/podTemplate/spec/containers/0/resources/limits/nvidia.com~1gpu"});
  // Replacing the list drops the defaults.
  EXPECT_EQ(RunRule("DG001", Request(Object("kubeflow.org/v1", "PyTorchJob", R"({"pytorchReplicaSpecs":{"W":{"template":)" + kTemplate + "}}}")), pol).status,
            RuleStatus::kSkip);
  auto bad = policy::ParsePolicy("apiVersion: draguard.io/v1alpha1\nkind: Policy\ncustomResources:\n- {group: a, kind: B, podTemplates: [\"spec..x\"]}\n");
  EXPECT_FALSE(bad.ok());
}

TEST(Dg001Workloads, LookAlikesZeroAndExtendedResourceMapping) {
  auto pod = [](const std::string& limits) {
    return R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","resources":{"limits":)" + limits + "}}]}}";
  };
  auto pol = DefaultPolicy();
  auto hami = RunRule("DG001", Request(pod(R"({"nvidia.com/gpumem":"1024","nvidia.com/gpucores":30,"nvidia.com/gpumem-percentage":40})")), pol);
  EXPECT_EQ(hami.findings.size(), 3u);
  EXPECT_EQ(RunRule("DG001", Request(pod(R"({"nvidia.com/gpu-10gb":1})")), pol).status, RuleStatus::kFail);
  EXPECT_EQ(RunRule("DG001", Request(pod(R"({"nvidia.com/gpu":0})")), pol).status, RuleStatus::kPass);
  EXPECT_EQ(RunRule("DG001", Request(pod(R"({"nvidia.com/gpu":"0"})")), pol).status, RuleStatus::kPass);
  auto implicit = RunRule("DG001", Request(pod(R"({"deviceclass.resource.kubernetes.io/gpu.nvidia.com":1})")), pol);
  ASSERT_EQ(implicit.findings.size(), 1u);
  EXPECT_NE(implicit.findings[0].message.find("DRA-backed"), std::string::npos);
  pol.extended_resource_mapping = policy::ExtendedResourceMapping::kWarn;
  auto d = Review(Request(pod(R"({"nvidia.com/gpu":1})")), pol);
  EXPECT_EQ(d.verdict, Verdict::kWarn);
  auto h = Review(Request(pod(R"({"nvidia.com/gpumem":1})")), pol);
  EXPECT_EQ(h.verdict, Verdict::kDeny);  // sharing dimensions cannot be DRA-backed
  pol.extended_resource_mapping = policy::ExtendedResourceMapping::kAllow;
  EXPECT_EQ(RunRule("DG001", Request(pod(R"({"nvidia.com/gpu":1})")), pol).status, RuleStatus::kPass);
}

TEST(Dg001Workloads, ActionsAndExemption) {
  ExpectActionsAndExemption("DG001", Request(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[)" + kGpuContainer + "]}}"));
}

// Engine-level exemptions.
const std::string kPod = R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"team":"infra"}},"spec":{"containers":[)" + kGpuContainer + "]}}";

TEST(Exemptions, LabelSelector) {
  auto pol = DefaultPolicy();
  policy::LabelSelector sel;
  sel.match_expressions.push_back({"team", "In", {"infra", "sre"}});
  pol.exemptions.object_selectors.push_back(sel);
  auto d = Review(Request(kPod), pol);
  EXPECT_EQ(d.verdict, Verdict::kExempt);
  EXPECT_EQ(d.response.audit_annotations["exempt"], "labels match exemptions.objectSelectors[0]");
  pol.exemptions.object_selectors[0].match_expressions[0].op = "NotIn";
  EXPECT_EQ(Review(Request(kPod), pol).verdict, Verdict::kDeny);
}

TEST(Exemptions, AnnotationWithExpiry) {
  auto pol = DefaultPolicy();
  pol.annotation_exceptions = {{{"*"}, {}, {}, {}}};
  auto req = Request(kPod);
  auto& ann = req.object["metadata"]["annotations"];
  ann["draguard.io/exempt"] = "DG001";
  ann["draguard.io/exempt-reason"] = "TICKET-1";
  ann["draguard.io/exempt-until"] = "2026-03-01T00:00:00Z";
  auto before = *ParseRfc3339("2026-02-28T23:59:59Z");
  auto d = Review(req, pol, before);
  EXPECT_EQ(d.verdict, Verdict::kAllow);
  EXPECT_EQ(d.response.audit_annotations["exempt-rules"], "DG001 (annotation: TICKET-1; until 2026-03-01T00:00:00Z)");
  auto after = *ParseRfc3339("2026-03-01T00:00:01+00:00");
  auto expired = Review(req, pol, after);
  EXPECT_EQ(expired.verdict, Verdict::kDeny);
  ASSERT_FALSE(expired.response.warnings.empty());
  EXPECT_NE(expired.response.warnings[0].find("expired"), std::string::npos);
  ann["draguard.io/exempt-until"] = "next week";
  auto bad = Review(req, pol, before);
  EXPECT_EQ(bad.verdict, Verdict::kDeny);
  EXPECT_NE(bad.response.warnings[0].find("RFC 3339"), std::string::npos);
}

TEST(Exemptions, Rfc3339) {
  EXPECT_TRUE(ParseRfc3339("2026-01-31T10:00:00.123456Z").has_value());
  EXPECT_EQ(*ParseRfc3339("2026-01-31T12:00:00+02:00"), *ParseRfc3339("2026-01-31T10:00:00Z"));
  EXPECT_FALSE(ParseRfc3339("2026-02-30T00:00:00Z").has_value());
  EXPECT_FALSE(ParseRfc3339("2026-01-31 10:00:00Z").has_value());
  EXPECT_FALSE(ParseRfc3339("2026-01-31T10:00:00").has_value());
}

TEST(Decision, DenyMessageStaysUnderOneKiBAndListsEveryRule) {
  std::string containers;
  for (int i = 0; i < 40; ++i) {
    containers += (i ? "," : "") + std::string(R"({"name":"container-with-a-long-name-)") + std::to_string(i) +
                  R"(","resources":{"limits":{"nvidia.com/gpu":1},"claims":[{"name":"missing"}]}})";
  }
  auto d = Review(Request(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[)" + containers + "]}}"), DefaultPolicy());
  ASSERT_TRUE(d.response.status.has_value());
  const auto& msg = d.response.status->message;
  EXPECT_LE(msg.size(), admission::kMaxDenyMessageBytes);
  EXPECT_EQ(msg.rfind("DG001", 0), 0u);
  EXPECT_NE(msg.find("DG015"), std::string::npos);
}

}  // namespace
}  // namespace draguard::engine::testing
