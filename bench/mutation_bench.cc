// Mutation cost: /mutate of a legacy GPU Pod (with its template already known to the provisioner's
// cache) against /validate of the same body, and the conversion steps alone, on real topologies.
#include <chrono>
#include <cstdio>
#include <mutex>
#include <set>
#include <string>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "draguard/engine/registry.h"
#include "draguard/mutation/mutation.h"
#include "draguard/mutation/provisioner.h"
#include "draguard/policy/policy.h"
#include "draguard/topology/loader.h"
#include "draguard/topology/shape_record.h"
#include "draguard/topology/snapshot.h"
#include "draguard/webhook/reviewer.h"

namespace {

using nlohmann::json;
namespace dg = draguard;

// What the Kubernetes provisioner does on a cache hit: one lookup under a mutex.
class CachedProvisioner : public dg::mutation::TemplateProvisioner {
 public:
  dg::Status Ensure(std::string_view ns, const dg::mutation::GeneratedTemplate& t,
                    std::chrono::milliseconds) override {
    std::lock_guard<std::mutex> lock(mu_);
    known_.insert(std::string(ns) + "/" + t.name);
    return dg::Status::Ok();
  }

 private:
  std::mutex mu_;
  std::set<std::string> known_;
};

std::shared_ptr<const dg::topology::Snapshot> Topology(const char* file) {
  auto snap = dg::topology::LoadSnapshot(std::string(DRAGUARD_SOURCE_DIR) + "/test/data/hwloc/" + file);
  return snap.ok() ? *snap : nullptr;
}

const char* kG4dn = "aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml";
const char* kDgx = "hwloc_nvidia-dgx2h_2s-xeon8174_16xV100-SXM3_12xNVSwitch_nvlink-hetero.xml";
// 4x H100 SXM, each on its own root and NUMA node, all NVLinked, 3 RDMA NICs (synthetic export).
const char* kXe = "../hwloc-synthetic/xe8640-like_4xH100-SXM_4numa_nvlink-all_3xmlx5.xml";

json LegacyPod(int gpus, bool rdma = false) {
  json annotations = rdma ? json{{"draguard.io/nic", "rdma"}} : json::object();
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", "train-0"}, {"namespace", "team-a"}, {"labels", {{"app", "train"}}}, {"annotations", annotations}}},
          {"spec",
           {{"restartPolicy", "Never"},
            {"containers",
             json::array({{{"name", "worker"},
                           {"image", "nvcr.io/nvidia/pytorch:24.05-py3"},
                           {"resources", {{"limits", {{"cpu", "8"}, {"memory", "64Gi"}, {"nvidia.com/gpu", gpus}}}}}}})}}}};
}

std::string Review(const json& pod) {
  return json{{"apiVersion", "admission.k8s.io/v1"},
              {"kind", "AdmissionReview"},
              {"request",
               {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
                {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                {"namespace", "team-a"},
                {"operation", "CREATE"},
                {"userInfo", {{"username", "system:serviceaccount:kube-system:job-controller"}}},
                {"object", pod},
                {"dryRun", false}}}}
      .dump();
}

const dg::policy::Policy& Policy() {
  static const dg::policy::Policy p = dg::policy::ParsePolicy(dg::policy::DefaultPolicyYaml()).value();
  return p;
}

// The default policy with mutation.cpu grouped (CPUs in the claim of the GPUs, by numaNode).
const dg::policy::Policy& CpuPolicy() {
  static const dg::policy::Policy p =
      dg::policy::ParsePolicy("apiVersion: draguard.io/v1alpha1\nkind: Policy\n"
                              "mutation: {numaAlignment: numaNode, cpu: {mode: grouped}}\n")
          .value();
  return p;
}

const dg::engine::Registry& Rules() {
  static const dg::engine::Registry r = dg::engine::DefaultRegistry();
  return r;
}

// One review through the Reviewer; `mutate` selects the webhook.
void BM_Review(benchmark::State& state, const char* topo_file, int gpus, bool mutate, bool rdma = false) {
  static CachedProvisioner provisioner;
  static const dg::webhook::Reviewer reviewer(Rules(), {}, &provisioner);
  auto topo = topo_file ? Topology(topo_file) : nullptr;
  const std::string body = Review(LegacyPod(gpus, rdma));
  auto kind = mutate ? dg::admission::WebhookKind::kMutating : dg::admission::WebhookKind::kValidating;
  for (auto _ : state) {
    auto out = reviewer.Review(body, kind, Policy(), topo.get(), std::chrono::system_clock::time_point{},
                               std::chrono::steady_clock::now() + dg::webhook::kDefaultReviewTimeout);
    benchmark::DoNotOptimize(out);
  }
}
// A cluster of `nodes` nodes of eight shapes (node i has shape i mod 8, g4dn.metal among them),
// built as `serve` builds it from the nodes' publications: one record per shape, the node's own
// facts on top.
std::shared_ptr<const dg::topology::Snapshot> Cluster(int nodes) {
  static const char* kShapes[] = {
      kG4dn, kDgx, "llnl_lassen_ibm-ac922_2s-power9_4xV100-SXM2_cuda-nvml_4xmlx5.xml",
      "llnl_tioga_hpe-ex235a_epyc7a53_4numa_8xMI250X-GCD_rsmi_xgmi.xml",
      "clemson-palmetto_dell-r740_2s-gold6248_2xV100-PCIe_cuda-nvml_mlx5.xml",
      "llnl_corona_supermicro-4124gs_2s-epyc7402_8xMI50_rsmi-opencl.xml",
      "llnl_pascal_relion-x1904gt_2s-e5-2695v4_2xP100-PCIe_cuda-nvml-opencl.xml",
      "hwloc_ibm-power8-minsky_2s_4xP100-SXM2_nvlink-gpu-cpu-hetero.xml"};
  static dg::topology::ShapeInterner interner;
  std::vector<dg::topology::ShapeRecord> records;
  std::vector<dg::topology::NodeFacts> facts;
  for (const char* f : kShapes) {
    auto p = dg::topology::ParseHwlocFile(std::string(DRAGUARD_SOURCE_DIR) + "/test/data/hwloc/" + f);
    if (!p.ok()) return nullptr;
    records.push_back(dg::topology::DecodeShapeRecord(dg::topology::EncodeShapeRecord(*p), interner).value());
    facts.push_back(dg::topology::FactsOf(*p));
  }
  std::vector<std::shared_ptr<const dg::topology::NodeTopology>> all;
  for (int i = 0; i < nodes; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "gpu-%05d", i);
    all.push_back(dg::topology::MakeNodeTopology(records[i % 8], facts[i % 8], name, std::string("node ") + name, "1").value());
  }
  return dg::topology::Snapshot::Create(std::move(all), 1);
}

// A 2-GPU legacy Pod reviewed against a cluster of `nodes` nodes: what a replica answers at
// cluster scale, beside the same review against one node of each shape.
void BM_ReviewCluster(benchmark::State& state, int nodes, bool mutate) {
  static CachedProvisioner provisioner;
  static const dg::webhook::Reviewer reviewer(Rules(), {}, &provisioner);
  auto topo = Cluster(nodes);
  const std::string body = Review(LegacyPod(2));
  auto kind = mutate ? dg::admission::WebhookKind::kMutating : dg::admission::WebhookKind::kValidating;
  for (auto _ : state) {
    auto out = reviewer.Review(body, kind, Policy(), topo.get(), std::chrono::system_clock::time_point{},
                               std::chrono::steady_clock::now() + dg::webhook::kDefaultReviewTimeout);
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK_CAPTURE(BM_ReviewCluster, validate_2gpu_8_nodes, 8, false);
BENCHMARK_CAPTURE(BM_ReviewCluster, validate_2gpu_10000_nodes, 10000, false);
BENCHMARK_CAPTURE(BM_ReviewCluster, mutate_2gpu_8_nodes, 8, true);
BENCHMARK_CAPTURE(BM_ReviewCluster, mutate_2gpu_10000_nodes, 10000, true);

// One review under mutation.cpu grouped: the container's 8 CPUs go into the claim of its GPUs.
void BM_ReviewCpus(benchmark::State& state, const char* topo_file, int gpus, bool mutate) {
  static CachedProvisioner provisioner;
  static const dg::webhook::Reviewer reviewer(Rules(), {}, &provisioner);
  auto topo = topo_file ? Topology(topo_file) : nullptr;
  const std::string body = Review(LegacyPod(gpus));
  auto kind = mutate ? dg::admission::WebhookKind::kMutating : dg::admission::WebhookKind::kValidating;
  for (auto _ : state) {
    auto out = reviewer.Review(body, kind, CpuPolicy(), topo.get(), std::chrono::system_clock::time_point{},
                               std::chrono::steady_clock::now() + dg::webhook::kDefaultReviewTimeout);
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK_CAPTURE(BM_ReviewCpus, validate_2gpu_8cpu_g4dn, kG4dn, 2, false);
BENCHMARK_CAPTURE(BM_ReviewCpus, mutate_2gpu_8cpu_g4dn, kG4dn, 2, true);

BENCHMARK_CAPTURE(BM_Review, validate_1gpu_no_topology, nullptr, 1, false);
BENCHMARK_CAPTURE(BM_Review, mutate_1gpu_no_topology, nullptr, 1, true);
BENCHMARK_CAPTURE(BM_Review, validate_2gpu_g4dn, kG4dn, 2, false);
BENCHMARK_CAPTURE(BM_Review, mutate_2gpu_g4dn, kG4dn, 2, true);
BENCHMARK_CAPTURE(BM_Review, mutate_4gpu_numa_g4dn, kG4dn, 4, true);
BENCHMARK_CAPTURE(BM_Review, mutate_8gpu_dgx2h, kDgx, 8, true);
BENCHMARK_CAPTURE(BM_Review, validate_2gpu_xe8640, kXe, 2, false);
BENCHMARK_CAPTURE(BM_Review, mutate_2gpu_nvlink_xe8640, kXe, 2, true);
BENCHMARK_CAPTURE(BM_Review, mutate_3gpu_rails_xe8640, kXe, 3, true, true);
BENCHMARK_CAPTURE(BM_Review, mutate_2gpu_nvlink_pairs_minsky, "hwloc_ibm-power8-minsky_2s_4xP100-SXM2_nvlink-gpu-cpu-hetero.xml", 2, true);

// The conversion alone (profile, template, patch), without decoding or encoding.
void BM_ConvertPod(benchmark::State& state, const char* topo_file, int gpus) {
  auto topo = topo_file ? Topology(topo_file) : nullptr;
  const json pod = LegacyPod(gpus);
  for (auto _ : state) {
    auto c = dg::mutation::ConvertPod(pod, "team-a", Policy(), topo.get());
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK_CAPTURE(BM_ConvertPod, 1gpu_no_topology, nullptr, 1);
BENCHMARK_CAPTURE(BM_ConvertPod, 2gpu_g4dn, kG4dn, 2);
BENCHMARK_CAPTURE(BM_ConvertPod, 4gpu_numa_g4dn, kG4dn, 4);

// The steps of a conversion.
void BM_ProfilePod(benchmark::State& state) {
  const json pod = LegacyPod(2);
  for (auto _ : state) benchmark::DoNotOptimize(dg::mutation::ProfilePod(pod, Policy()));
}
BENCHMARK(BM_ProfilePod);

void BM_GenerateTemplate(benchmark::State& state, const char* topo_file, int gpus) {
  auto topo = topo_file ? Topology(topo_file) : nullptr;
  auto profile = dg::mutation::ProfilePod(LegacyPod(gpus), Policy()).value();
  for (auto _ : state) benchmark::DoNotOptimize(dg::mutation::GenerateTemplate(profile, "team-a", Policy(), topo.get()));
}
BENCHMARK_CAPTURE(BM_GenerateTemplate, 1gpu_no_topology, nullptr, 1);
BENCHMARK_CAPTURE(BM_GenerateTemplate, 2gpu_g4dn, kG4dn, 2);

void BM_Diff(benchmark::State& state) {
  const json pod = LegacyPod(1);
  auto c = dg::mutation::ConvertPod(pod, "team-a", Policy(), nullptr);
  for (auto _ : state) benchmark::DoNotOptimize(json::diff(pod, c.pod));
}
BENCHMARK(BM_Diff);

}  // namespace

BENCHMARK_MAIN();
