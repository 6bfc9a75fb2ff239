// DG016 gpu-cpu-alignment: table of pass / fail / skip cases, each action, exemption, and the Pods
// draguard's conversion produces.
#include "draguard/dra/pod_specs.h"
#include "draguard/mutation/mutation.h"
#include "draguard/topology/snapshot.h"
#include "rule_test_util.h"

namespace draguard::engine::testing {
namespace {

const std::string kGenerated = "draguard-0123456789abcdef0123";

// A Pod whose containers are `containers` (JSON text) and whose claim "draguard-gpu" references
// the template `tmpl`; `pod_resources` is spec.resources ("" = none).
std::string Pod(const std::string& containers, const std::string& tmpl = kGenerated,
                const std::string& pod_resources = "", const std::string& init = "") {
  return R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{)" +
         (pod_resources.empty() ? "" : R"("resources":)" + pod_resources + ",") +
         R"("resourceClaims":[{"name":"draguard-gpu","resourceClaimTemplateName":")" + tmpl + R"("}],)" +
         (init.empty() ? "" : R"("initContainers":[)" + init + "],") + R"("containers":[)" + containers + "]}}";
}

// A container named `name` with `resources` members (JSON text, without braces) and, when `gpu`,
// a reference to the GPU claim.
std::string Container(const std::string& name, const std::string& resources, bool gpu = true) {
  std::string claims = gpu ? R"("claims":[{"name":"draguard-gpu","request":"gpu"}])" : "";
  std::string sep = !resources.empty() && !claims.empty() ? "," : "";
  return R"({"name":")" + name + R"(","resources":{)" + resources + sep + claims + "}}";
}

std::string Equal(const std::string& cpu, const std::string& memory = R"("64Gi")") {
  return R"("requests":{"cpu":)" + cpu + R"(,"memory":)" + memory + R"(},"limits":{"cpu":)" + cpu +
         R"(,"memory":)" + memory + "}";
}

TEST(Dg016, Table) {
  const std::string pinned = Container("trainer", Equal(R"("8")"));
  std::vector<Case> cases = {
      {"guaranteed_whole_cpus", Pod(pinned), RuleStatus::kFail, {"/spec/containers/0/resources/requests/cpu"},
       "container \"trainer\" has 8 exclusive CPUs"},
      {"millicores_whole", Pod(Container("t", Equal(R"("8000m")"))), RuleStatus::kFail, {}, "has 8 exclusive CPUs"},
      {"json_number", Pod(Container("t", Equal("4", "17179869184"))), RuleStatus::kFail, {}, "has 4 exclusive CPUs"},
      {"limits_only", Pod(Container("t", R"("limits":{"cpu":"2","memory":"8Gi"})")), RuleStatus::kFail,
       {"/spec/containers/0/resources/limits/cpu"}, "has 2 exclusive CPUs"},
      {"fractional_cpus_shared_pool", Pod(Container("t", Equal(R"("1500m")"))), RuleStatus::kPass, {}, ""},
      {"burstable", Pod(Container("t", R"("requests":{"cpu":"4","memory":"8Gi"},"limits":{"cpu":"8","memory":"8Gi"})")),
       RuleStatus::kPass, {}, ""},
      {"no_memory_limit", Pod(Container("t", R"("requests":{"cpu":"4"},"limits":{"cpu":"4"})")), RuleStatus::kPass, {}, ""},
      {"other_container_burstable", Pod(pinned + "," + Container("log", R"("requests":{"cpu":"100m"})", false)),
       RuleStatus::kPass, {}, ""},
      {"pinned_container_without_gpus", Pod(Container("a", Equal(R"("2")")) + "," + Container("b", Equal(R"("4")"), false)),
       RuleStatus::kFail, {"/spec/containers/0/resources/requests/cpu"}, "container \"a\" has 2"},
      {"gpu_sidecar", Pod(Container("main", Equal(R"("1")"), false), kGenerated, "", Container("agent", Equal(R"("2")"))),
       RuleStatus::kFail, {"/spec/initContainers/0/resources/requests/cpu"}, "initContainer \"agent\" has 2"},
      {"cpus_in_the_gpu_claim",
       Pod(R"({"name":"t","resources":{)" + Equal(R"("8")") +
           R"(,"claims":[{"name":"draguard-gpu","request":"gpu"},{"name":"draguard-gpu","request":"cpu"}]}})"),
       RuleStatus::kPass, {}, ""},
      {"cpus_of_entry_1_in_the_gpu_claim",
       Pod(R"({"name":"t","resources":{)" + Equal(R"("8")") +
           R"(,"claims":[{"name":"draguard-gpu","request":"gpu-1"},{"name":"draguard-gpu","request":"cpu-1"}]}})"),
       RuleStatus::kPass, {}, ""},
      {"cpu_request_of_another_claim",
       Pod(R"({"name":"t","resources":{)" + Equal(R"("8")") +
           R"(,"claims":[{"name":"draguard-gpu","request":"gpu"},{"name":"cpus","request":"cpu"}]}})"),
       RuleStatus::kFail, {}, "has 8 exclusive CPUs"},
      {"hand_written_template_unknown", Pod(pinned, "gpu-2x"), RuleStatus::kSkip, {}, ""},
      {"name_not_a_content_address", Pod(pinned, "draguard-0123456789ABCDEF0123"), RuleStatus::kSkip, {}, ""},
      {"name_too_short", Pod(pinned, "draguard-0123"), RuleStatus::kSkip, {}, ""},
      // Pod-level resources decide the QoS class; the container is pinned only with its own
      // requests equal to its limits.
      {"pod_level_guaranteed_container_unset", Pod(Container("t", ""), kGenerated, "{" + Equal(R"("8")") + "}"),
       RuleStatus::kPass, {}, ""},
      {"pod_level_guaranteed_container_equal", Pod(pinned, kGenerated, "{" + Equal(R"("16")", R"("128Gi")") + "}"),
       RuleStatus::kFail, {}, "has 8 exclusive CPUs"},
      {"pod_level_burstable", Pod(pinned, kGenerated, R"({"requests":{"cpu":"8"}})"), RuleStatus::kPass, {}, ""},
      {"unreadable_quantity", Pod(Container("t", Equal(R"("eight")"))), RuleStatus::kPass, {}, ""},
      {"negative_quantity", Pod(Container("t", Equal(R"("-2")"))), RuleStatus::kPass, {}, ""},
      {"deployment_template",
       R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"spec":{)"
       R"("resourceClaims":[{"name":"draguard-gpu","resourceClaimTemplateName":")" + kGenerated + R"("}],)"
       R"("containers":[)" + pinned + "]}}}}",
       RuleStatus::kFail, {"/spec/template/spec/containers/0/resources/requests/cpu"}, "Deployment \"d\" /spec/template/spec: container"},
      {"claim_object_skipped", Template(R"({"devices":{}})"), RuleStatus::kSkip, {}, ""},
  };
  for (const auto& c : cases) CheckCase("DG016", c);
}

TEST(Dg016, MessageSaysWhatToAdd) {
  auto r = RunRule("DG016", Request(Pod(Container("trainer", Equal(R"("8")")))), DefaultPolicy());
  ASSERT_EQ(r.findings.size(), 1u);
  const auto& f = r.findings[0];
  EXPECT_NE(f.message.find("outside claim \"draguard-gpu\" of its GPUs"), std::string::npos) << f.message;
  EXPECT_NE(f.fix.find("(template " + kGenerated + ")"), std::string::npos) << f.fix;
  EXPECT_NE(f.fix.find("cpu request of DeviceClass dra.cpu (count: 8"), std::string::npos) << f.fix;
  EXPECT_NE(f.fix.find("matchAttribute: resource.kubernetes.io/numaNode"), std::string::npos) << f.fix;
  // The class named is the policy's first CPU class.
  auto pol = DefaultPolicy();
  pol.device_classes.cpu = {"cpus.example.com"};
  auto other = RunRule("DG016", Request(Pod(Container("trainer", Equal(R"("8")")))), pol);
  ASSERT_EQ(other.findings.size(), 1u);
  EXPECT_NE(other.findings[0].fix.find("DeviceClass cpus.example.com"), std::string::npos) << other.findings[0].fix;
}

// Hand-written templates and claims, read from the server's claim cache: a GPU claim without the
// container's CPUs is reported like a generated one; CPUs in the claim must share a numaNode
// constraint with the GPUs; a cold cache says what it could not check (audit only).
TEST(Dg016, HandWrittenClaimsFromTheClaimCache) {
  const policy::Policy pol = DefaultPolicy();
  FakeCatalog catalog;
  const std::string gpu = R"({"name":"gpu","exactly":{"deviceClassName":"gpu.nvidia.com","count":2}})";
  const std::string cpu = R"({"name":"cpu","exactly":{"deviceClassName":"dra.cpu","count":8}})";
  catalog.templates["team-a/gpus"] = Template(R"({"devices":{"requests":[)" + gpu + "]}}");
  catalog.templates["team-a/gpus-cpus"] = Template(R"({"devices":{"requests":[)" + gpu + "," + cpu +
                                                   R"(],"constraints":[{"requests":["gpu","cpu"],"matchAttribute":"resource.kubernetes.io/numaNode"}]}})");
  catalog.templates["team-a/gpus-cpus-loose"] = Template(R"({"devices":{"requests":[)" + gpu + "," + cpu + "]}}");
  catalog.templates["team-a/nics"] = Template(R"({"devices":{"requests":[{"name":"nic","exactly":{"deviceClassName":"dranet"}}]}})");
  catalog.claims["team-a/shared-gpus"] = Claim(R"({"devices":{"requests":[)" + gpu + "]}}");
  const std::string pinned = Equal(R"("8")");
  auto pod = [&](const std::string& source, const std::string& container_claims) {
    return Request(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"resourceClaims":[{"name":"g",)" +
                   source + R"(}],"containers":[{"name":"t","resources":{)" + pinned + R"(,"claims":[)" +
                   container_claims + "]}}]}}");
  };
  auto run = [&](const admission::AdmissionRequest& r) { return RunRuleWith("DG016", r, pol, &catalog); };

  RuleResult outside = run(pod(R"("resourceClaimTemplateName":"gpus")", R"({"name":"g"})"));
  ASSERT_EQ(outside.status, RuleStatus::kFail);
  ASSERT_EQ(outside.findings.size(), 1u);
  EXPECT_NE(outside.findings[0].message.find("8 exclusive CPUs outside claim \"g\" of its GPUs (template \"gpus\")"),
            std::string::npos)
      << outside.findings[0].message;
  EXPECT_NE(outside.findings[0].fix.find("(template \"gpus\")"), std::string::npos) << outside.findings[0].fix;
  EXPECT_FALSE(outside.findings[0].cap.has_value());
  // The same through a ResourceClaim referenced by name.
  EXPECT_EQ(run(pod(R"("resourceClaimName":"shared-gpus")", R"({"name":"g","request":"gpu"})")).status, RuleStatus::kFail);
  // CPUs in the claim, held with the GPUs by a numaNode constraint: nothing to report.
  EXPECT_EQ(run(pod(R"("resourceClaimTemplateName":"gpus-cpus")", R"({"name":"g"})")).status, RuleStatus::kPass);
  EXPECT_EQ(run(pod(R"("resourceClaimTemplateName":"gpus-cpus")", R"({"name":"g","request":"gpu"},{"name":"g","request":"cpu"})")).status,
            RuleStatus::kPass);
  // Only the GPU request of it: the CPUs stay with the kubelet.
  EXPECT_EQ(run(pod(R"("resourceClaimTemplateName":"gpus-cpus")", R"({"name":"g","request":"gpu"})")).status, RuleStatus::kFail);
  // CPUs in the claim without a constraint that holds them with the GPUs.
  RuleResult loose = run(pod(R"("resourceClaimTemplateName":"gpus-cpus-loose")", R"({"name":"g"})"));
  ASSERT_EQ(loose.status, RuleStatus::kFail);
  EXPECT_NE(loose.findings[0].message.find("no matchAttribute resource.kubernetes.io/numaNode constraint holds request \"cpu\""),
            std::string::npos)
      << loose.findings[0].message;
  // A claim without GPUs, and a template the cache knows is absent (DG015's): not this rule's.
  EXPECT_EQ(run(pod(R"("resourceClaimTemplateName":"nics")", R"({"name":"g"})")).status, RuleStatus::kSkip);
  EXPECT_EQ(run(pod(R"("resourceClaimTemplateName":"gone")", R"({"name":"g"})")).status, RuleStatus::kSkip);
  // Without a cache (API access off): as before, hand-written claims are not judged.
  EXPECT_EQ(RunRuleWith("DG016", pod(R"("resourceClaimTemplateName":"gpus")", R"({"name":"g"})"), pol, nullptr).status,
            RuleStatus::kSkip);
  // A cache that has not listed yet: an audit-only finding says what was not checked.
  catalog.synced = false;
  RuleResult cold = run(pod(R"("resourceClaimTemplateName":"gpus")", R"({"name":"g"})"));
  ASSERT_EQ(cold.status, RuleStatus::kFail);
  EXPECT_EQ(cold.findings[0].cap, policy::Action::kAudit);
  EXPECT_NE(cold.findings[0].message.find("not listed yet"), std::string::npos) << cold.findings[0].message;
  EXPECT_NE(cold.findings[0].message.find("was not checked"), std::string::npos) << cold.findings[0].message;
}

TEST(Dg016, PodUpdateIsNotJudged) {
  auto req = Request(Pod(Container("t", Equal(R"("8")"))), "team-a", admission::Operation::kUpdate);
  EXPECT_EQ(RunRule("DG016", req, DefaultPolicy()).status, RuleStatus::kSkip);
}

TEST(Dg016, WarnsByDefault) {
  auto d = Review(Request(Pod(Container("t", Equal(R"("8")")))), DefaultPolicy());
  EXPECT_TRUE(Contains(d.warned_rules, "DG016"));
  EXPECT_TRUE(d.response.allowed);
}

TEST(Dg016, ActionsAndExemption) { ExpectActionsAndExemption("DG016", Request(Pod(Container("t", Equal(R"("8")"))))); }

// The rule recognises the templates draguard's conversion generates: a converted Guaranteed Pod
// with whole CPUs is reported, the same Pod with fractional CPUs is not.
TEST(Dg016, ConvertedPods) {
  auto pol = DefaultPolicy();
  auto convert = [&](const std::string& cpu) {
    Json pod = Json::parse(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"team-a"},)"
                           R"("spec":{"containers":[{"name":"trainer","resources":{"limits":{"nvidia.com/gpu":1,"cpu":")" +
                           cpu + R"(","memory":"16Gi"},"requests":{"cpu":")" + cpu + R"(","memory":"16Gi"}}}]}})");
    auto c = mutation::ConvertPod(pod, "team-a", pol, nullptr);
    EXPECT_EQ(c.outcome, mutation::PodConversion::Outcome::kConverted) << c.reason;
    EXPECT_EQ(c.templates.size(), 1u);
    if (!c.templates.empty()) EXPECT_TRUE(dra::IsGeneratedTemplateName(c.templates[0].name)) << c.templates[0].name;
    return RunRule("DG016", Request(c.pod.dump()), pol);
  };
  auto whole = convert("4");
  EXPECT_EQ(whole.status, RuleStatus::kFail);
  ASSERT_EQ(whole.findings.size(), 1u);
  EXPECT_NE(whole.findings[0].message.find("has 4 exclusive CPUs"), std::string::npos) << whole.findings[0].message;
  EXPECT_EQ(convert("3500m").status, RuleStatus::kPass);
}

// With mutation.cpu the conversion puts the CPUs in the claim: the converted Pod passes DG016 and
// DG015, its template DG005 (GPUs and CPUs tied by the numaNode constraint).
TEST(Dg016, PodsConvertedWithCpusInTheClaimPass) {
  auto parsed = policy::ParsePolicy("apiVersion: draguard.io/v1alpha1\nkind: Policy\n"
                                    "mutation: {numaAlignment: numaNode, cpu: {mode: grouped}}\n");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const policy::Policy& pol = *parsed;
  auto topo = topology::LoadSnapshot(std::string(DRAGUARD_TEST_DATA) +
                                     "/hwloc/aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml");
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  Json pod = Json::parse(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"team-a"},)"
                         R"("spec":{"containers":[{"name":"trainer","resources":{"limits":{"nvidia.com/gpu":2,"cpu":"8",)"
                         R"("memory":"16Gi"},"requests":{"cpu":"8","memory":"16Gi"}}}]}})");
  auto c = mutation::ConvertPod(pod, "team-a", pol, topo->get());
  ASSERT_EQ(c.outcome, mutation::PodConversion::Outcome::kConverted) << c.reason;
  ASSERT_EQ(c.templates.size(), 1u);
  EXPECT_EQ(RunRule("DG016", Request(c.pod.dump()), pol).status, RuleStatus::kPass);
  EXPECT_EQ(RunRule("DG015", Request(c.pod.dump()), pol).status, RuleStatus::kPass);
  auto dg005 = RunRule("DG005", Request(c.templates[0].object.dump()), pol);
  EXPECT_EQ(dg005.status, RuleStatus::kPass) << (dg005.findings.empty() ? "" : dg005.findings[0].message);
  // Parts over NUMA nodes (16 GPUs and 4 CPUs on the DGX-2H) pass DG005 and DG016 as well.
  auto dgx = topology::LoadSnapshot(std::string(DRAGUARD_TEST_DATA) +
                                    "/hwloc/hwloc_nvidia-dgx2h_2s-xeon8174_16xV100-SXM3_12xNVSwitch_nvlink-hetero.xml");
  ASSERT_TRUE(dgx.ok()) << dgx.status().ToString();
  Json big = pod;
  big["spec"]["containers"][0]["resources"] = Json::parse(R"({"limits":{"nvidia.com/gpu":16,"cpu":"4"}})");
  auto parts = mutation::ConvertPod(big, "team-a", pol, dgx->get());
  ASSERT_EQ(parts.outcome, mutation::PodConversion::Outcome::kConverted) << parts.reason;
  EXPECT_EQ(RunRule("DG016", Request(parts.pod.dump()), pol).status, RuleStatus::kPass);
  EXPECT_EQ(RunRule("DG015", Request(parts.pod.dump()), pol).status, RuleStatus::kPass);
  auto parts005 = RunRule("DG005", Request(parts.templates[0].object.dump()), pol);
  EXPECT_EQ(parts005.status, RuleStatus::kPass) << (parts005.findings.empty() ? "" : parts005.findings[0].message);
  // The same template without the numaNode constraint over GPUs and CPUs mixes them unaligned.
  Json bare = c.templates[0].object;
  Json& constraints = bare["spec"]["spec"]["devices"]["constraints"];
  constraints.erase(constraints.size() - 1);
  auto unaligned = RunRule("DG005", Request(bare.dump()), pol);
  EXPECT_EQ(unaligned.status, RuleStatus::kFail);
  ASSERT_FALSE(unaligned.findings.empty());
  EXPECT_NE(unaligned.findings[0].message.find("mixes GPUs with CPUs"), std::string::npos) << unaligned.findings[0].message;

  // Under mutation.kueue the container lists the claim once, whole (Kueue v0.19's Workload keys a
  // container's claims by name alone): the CPUs are in it, and DG016 knows it from the policy.
  auto kueue_parsed = policy::ParsePolicy("apiVersion: draguard.io/v1alpha1\nkind: Policy\n"
                                          "mutation: {numaAlignment: numaNode, kueue: true, cpu: {mode: grouped}}\n");
  ASSERT_TRUE(kueue_parsed.ok()) << kueue_parsed.status().ToString();
  auto kc = mutation::ConvertPod(pod, "team-a", *kueue_parsed, topo->get());
  ASSERT_EQ(kc.outcome, mutation::PodConversion::Outcome::kConverted) << kc.reason;
  EXPECT_EQ(kc.pod["spec"]["containers"][0]["resources"]["claims"], Json::parse(R"([{"name":"draguard-gpu"}])"));
  EXPECT_EQ(RunRule("DG016", Request(kc.pod.dump()), *kueue_parsed).status, RuleStatus::kPass);
  EXPECT_EQ(RunRule("DG015", Request(kc.pod.dump()), *kueue_parsed).status, RuleStatus::kPass);
  // A whole-claim reference without mutation.cpu says nothing of CPUs: still reported.
  auto no_cpu = policy::ParsePolicy("apiVersion: draguard.io/v1alpha1\nkind: Policy\nmutation: {kueue: true}\n");
  ASSERT_TRUE(no_cpu.ok()) << no_cpu.status().ToString();
  EXPECT_EQ(RunRule("DG016", Request(kc.pod.dump()), *no_cpu).status, RuleStatus::kFail);
}

}  // namespace
}  // namespace draguard::engine::testing
