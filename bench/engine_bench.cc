// Rules-engine benchmarks: the full default rule set (Evaluate + Decide) on a typical DRA Pod
// review, a legacy Pod review, a typical ResourceClaimTemplate and a large one (32 requests, each
// with selectors, one pcieRoot constraint and MPS config). Decoding and encoding the
// AdmissionReview are not included (see webhook_bench.cc).
#include <benchmark/benchmark.h>

#include <string>

#include "draguard/engine/engine.h"
#include "draguard/engine/registry.h"
#include "draguard/policy/policy.h"

namespace {

using draguard::admission::AdmissionRequest;
using draguard::admission::Json;
using namespace draguard;

AdmissionRequest Request(Json object) {
  AdmissionRequest r = draguard::admission::CreateRequestFor(std::move(object), "ml-team");
  r.uid = "bench";
  r.namespace_ = "ml-team";
  r.user_info.username = "system:serviceaccount:ml-team:trainer";
  r.user_info.groups = {"system:serviceaccounts", "system:authenticated"};
  return r;
}

// dra-reference §7(c): a Pod with two containers using one template, plus realistic noise.
Json DraPod() {
  return Json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "trainer-0", "namespace": "ml-team",
                 "labels": {"app": "trainer", "team": "ml", "version": "v3"},
                 "annotations": {"prometheus.io/scrape": "true"}},
    "spec": {
      "resourceClaims": [{"name": "accel", "resourceClaimTemplateName": "gpu2-nic1-same-pcieroot"}],
      "initContainers": [{"name": "fetch", "image": "busybox:1.36", "command": ["sh", "-c", "true"],
                          "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}],
      "containers": [
        {"name": "trainer", "image": "nvcr.io/nvidia/pytorch:25.01-py3", "command": ["sleep", "infinity"],
         "env": [{"name": "NCCL_DEBUG", "value": "INFO"}, {"name": "OMP_NUM_THREADS", "value": "8"}],
         "resources": {"requests": {"cpu": "8", "memory": "64Gi"}, "limits": {"cpu": "8", "memory": "64Gi"},
                       "claims": [{"name": "accel"}]},
         "volumeMounts": [{"name": "data", "mountPath": "/data"}]},
        {"name": "net-sidecar", "image": "busybox:1.36", "command": ["sleep", "infinity"],
         "resources": {"claims": [{"name": "accel", "request": "nic"}]}}],
      "volumes": [{"name": "data", "emptyDir": {}}],
      "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}})");
}

Json LegacyPod() {
  return Json::parse(R"({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "cuda", "namespace": "ml-team"},
    "spec": {"containers": [{"name": "cuda", "image": "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0",
             "resources": {"limits": {"nvidia.com/gpu": 1}}}]}})");
}

// dra-reference §7(a).
Json TypicalTemplate() {
  return Json::parse(R"({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
    "metadata": {"name": "gpu2-nic1-same-pcieroot", "namespace": "ml-team"},
    "spec": {"spec": {"devices": {
      "requests": [
        {"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 2,
          "selectors": [{"cel": {"expression": "'memory' in device.capacity['gpu.nvidia.com'] && device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0"}}]}},
        {"name": "nic", "exactly": {"deviceClassName": "dranet", "count": 1,
          "selectors": [{"cel": {"expression": "'rdma' in device.attributes['dra.net'] && device.attributes['dra.net'].rdma == true"}}]}}],
      "constraints": [{"requests": ["gpus", "nic"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}]}}}})");
}

// 32 requests (the API maximum), each a full GPU with a guarded memory floor and a product
// selector, one constraint over all of them and one MPS config per 8 requests.
Json LargeTemplate() {
  Json requests = Json::array(), names = Json::array(), config = Json::array();
  for (int i = 0; i < 32; ++i) {
    std::string name = "gpu-" + std::to_string(i);
    names.push_back(name);
    requests.push_back({{"name", name},
                        {"exactly",
                         {{"deviceClassName", "gpu.nvidia.com"},
                          {"count", 1},
                          {"selectors",
                           {{{"cel", {{"expression", "'memory' in device.capacity['gpu.nvidia.com'] && "
                                                     "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('" +
                                                         std::to_string(16 + i) + "Gi')) >= 0"}}}},
                            {{"cel", {{"expression", "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H') && "
                                                     "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('550.0.0')) >= 0"}}}}}}}}});
  }
  for (int g = 0; g < 4; ++g) {
    Json reqs = Json::array();
    for (int i = g * 8; i < g * 8 + 8; ++i) reqs.push_back("gpu-" + std::to_string(i));
    config.push_back({{"requests", reqs},
                      {"opaque",
                       {{"driver", "gpu.nvidia.com"},
                        {"parameters",
                         {{"apiVersion", "resource.nvidia.com/v1beta1"},
                          {"kind", "GpuConfig"},
                          {"sharing",
                           {{"strategy", "MPS"},
                            {"mpsConfig", {{"defaultActiveThreadPercentage", 50}, {"defaultPinnedDeviceMemoryLimit", "10Gi"}}}}}}}}}});
  }
  Json constraints = Json::array({{{"requests", names}, {"matchAttribute", "resource.kubernetes.io/pcieRoot"}}});
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaimTemplate"},
          {"metadata", {{"name", "big"}, {"namespace", "ml-team"}, {"annotations", {{"draguard.io/interconnect", "nvlink"}}}}},
          {"spec", {{"spec", {{"devices", {{"requests", requests}, {"constraints", constraints}, {"config", config}}}}}}}};
}

void Run(benchmark::State& state, const Json& object) {
  static const engine::Registry registry = engine::DefaultRegistry();
  static const policy::Policy pol = *policy::ParsePolicy(policy::DefaultPolicyYaml(), "default");
  AdmissionRequest req = Request(object);
  std::string verdict;
  for (auto _ : state) {
    engine::RuleInput in{req, pol, nullptr, {}};
    engine::Decision d = engine::Decide(engine::Evaluate(in, registry), pol);
    benchmark::DoNotOptimize(d.response.allowed);
    verdict = engine::VerdictName(d.verdict);
  }
  state.SetLabel(verdict);
}

void BM_DraPodReview(benchmark::State& s) { Run(s, DraPod()); }
void BM_LegacyPodReview(benchmark::State& s) { Run(s, LegacyPod()); }
void BM_TypicalTemplate(benchmark::State& s) { Run(s, TypicalTemplate()); }
void BM_LargeTemplate32Requests(benchmark::State& s) { Run(s, LargeTemplate()); }

BENCHMARK(BM_DraPodReview);
BENCHMARK(BM_LegacyPodReview);
BENCHMARK(BM_TypicalTemplate);
BENCHMARK(BM_LargeTemplate32Requests);

}  // namespace

BENCHMARK_MAIN();
