// `draguard audit` throughput: streaming a kubectl-style List dump (JSON and YAML) through the
// reader and judging every item, and the judgement alone. Items per second are reported. The
// allocation audit: claims, slices and Pods of 1,000 g4dn.metal nodes joined in the background
// audit's order and in kubectl's (Pods first), with the bytes the join holds.
#include <malloc.h>

#include <cstdlib>
#include <sstream>
#include <string>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "draguard/audit/allocation.h"
#include "draguard/audit/judge.h"
#include "draguard/audit/reader.h"
#include "draguard/engine/registry.h"
#include "draguard/dra/resource_slices.h"
#include "draguard/policy/store.h"
#include "draguard/topology/snapshot.h"
#include "draguard/webhook/reviewer.h"
#include "draguard/yamljson/yamljson.h"

namespace {

using nlohmann::json;

// A Pod as `kubectl get -o json` shows it (status and metadata included); every tenth one asks
// for a legacy GPU, every tenth one (offset) is a Deployment.
json Object(int i) {
  json limits = {{"cpu", "4"}, {"memory", "16Gi"}};
  if (i % 10 == 0) limits["nvidia.com/gpu"] = 1;
  json container = {{"name", "worker"},
                    {"image", "registry.example.com/team/app:1.2." + std::to_string(i % 50)},
                    {"env", json::array({{{"name", "MODE"}, {"value", "serve"}}, {{"name", "PORT"}, {"value", "8080"}}})},
                    {"ports", json::array({{{"containerPort", 8080}, {"protocol", "TCP"}}})},
                    {"resources", {{"limits", limits}, {"requests", limits}}}};
  json spec = {{"containers", json::array({container})},
               {"restartPolicy", "Always"},
               {"serviceAccountName", "default"},
               {"nodeName", "node-" + std::to_string(i % 100)}};
  json metadata = {{"name", "app-" + std::to_string(i)},
                   {"namespace", "team-" + std::to_string(i % 40)},
                   {"uid", "0b7f3c1e-0000-4000-8000-" + std::to_string(100000000000 + i)},
                   {"labels", {{"app", "app"}, {"pod-template-hash", "5d8f7c9b4"}}},
                   {"resourceVersion", std::to_string(1000 + i)}};
  if (i % 10 == 5) {
    json tmpl = {{"metadata", {{"labels", {{"app", "app"}}}}}, {"spec", spec}};
    return {{"apiVersion", "apps/v1"}, {"kind", "Deployment"}, {"metadata", metadata},
            {"spec", {{"replicas", 2}, {"template", tmpl}}}};
  }
  return {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", metadata}, {"spec", spec},
          {"status", {{"phase", "Running"}, {"podIP", "10.0.0.1"}, {"qosClass", "Guaranteed"}}}};
}

std::string Dump(int n, bool as_yaml) {
  json list = {{"apiVersion", "v1"}, {"kind", "List"}, {"items", json::array()}};
  for (int i = 0; i < n; ++i) list["items"].push_back(Object(i));
  if (!as_yaml) return list.dump();
  // kubectl -o yaml: "items:" then "- " entries at column 0.
  std::string out = "apiVersion: v1\nitems:\n";
  for (const auto& item : list["items"]) {
    std::string y = draguard::yamljson::ToYaml(item);
    bool first = true;
    for (std::size_t pos = 0; pos < y.size();) {
      std::size_t nl = y.find('\n', pos);
      out += (first ? "- " : "  ") + y.substr(pos, nl - pos) + "\n";
      first = false;
      pos = nl + 1;
    }
  }
  return out + "kind: List\nmetadata:\n  resourceVersion: \"\"\n";
}

struct Fixture {
  Fixture() {
    if (!store.LoadDefault().ok()) std::abort();
    policy = store.Current();
  }
  draguard::policy::PolicyStore store;
  std::shared_ptr<const draguard::policy::Policy> policy;
  draguard::engine::Registry registry = draguard::engine::DefaultRegistry();
  draguard::webhook::Reviewer reviewer{registry};
};

void StreamAndJudge(benchmark::State& state, bool as_yaml) {
  Fixture fx;
  draguard::audit::JudgeContext ctx{fx.reviewer, fx.registry, *fx.policy, nullptr, {}, "default"};
  const int n = 2000;
  const std::string dump = Dump(n, as_yaml);
  std::int64_t items = 0;
  for (auto _ : state) {
    std::istringstream in(dump);
    std::uint64_t denied = 0;
    draguard::audit::ReadStream(in, "dump", [&](draguard::audit::Document&& d) {
      auto v = draguard::audit::JudgeObject(std::move(d.object), ctx);
      denied += v.verdict == draguard::engine::Verdict::kDeny;
      ++items;
      return true;
    });
    benchmark::DoNotOptimize(denied);
  }
  state.SetItemsProcessed(items);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(dump.size()));
}

void BM_AuditJsonList(benchmark::State& state) { StreamAndJudge(state, false); }
void BM_AuditYamlList(benchmark::State& state) { StreamAndJudge(state, true); }

void BM_ReadJsonListOnly(benchmark::State& state) {
  const std::string dump = Dump(2000, false);
  std::int64_t items = 0;
  for (auto _ : state) {
    std::istringstream in(dump);
    draguard::audit::ReadStream(in, "dump", [&](draguard::audit::Document&& d) {
      benchmark::DoNotOptimize(d.object);
      ++items;
      return true;
    });
  }
  state.SetItemsProcessed(items);
}

void BM_JudgeOnly(benchmark::State& state) {
  Fixture fx;
  draguard::audit::JudgeContext ctx{fx.reviewer, fx.registry, *fx.policy, nullptr, {}, "default"};
  std::vector<json> objects;
  for (int i = 0; i < 100; ++i) objects.push_back(Object(i));
  std::int64_t items = 0;
  for (auto _ : state) {
    for (const auto& o : objects) {
      auto v = draguard::audit::JudgeObject(o, ctx);
      benchmark::DoNotOptimize(v);
      ++items;
    }
  }
  state.SetItemsProcessed(items);
}

// ---- The allocation audit ----------------------------------------------------------------------

constexpr int kNodes = 1000;
constexpr int kClaimsPerNode = 4;  // 2 GPUs each: the g4dn's 8 T4s

// 1,000 nodes with the g4dn.metal's topology, their ResourceSlices, 4 allocated claims of 2 GPUs per
// node (every other one kube-scheduler's, spread over both NUMA nodes) and the bound Pods using them.
struct Cluster {
  Cluster() {
    auto one = draguard::topology::LoadSnapshot(std::string(DRAGUARD_SOURCE_DIR) +
                                                "/test/data/hwloc/aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml");
    if (!one.ok()) std::abort();
    std::vector<std::shared_ptr<const draguard::topology::NodeTopology>> nodes;
    for (int n = 0; n < kNodes; ++n) {
      auto node = std::make_shared<draguard::topology::NodeTopology>(*(*one)->nodes().front());
      node->name = "gpu-node-" + std::to_string(n);
      nodes.push_back(node);
      auto s = draguard::dra::BuildResourceSlices(*node, node->name);
      if (!s.ok()) std::abort();
      for (const auto& d : s->drivers) slices.insert(slices.end(), d.slices.begin(), d.slices.end());
      for (int c = 0; c < kClaimsPerNode; ++c) {
        const bool scheduler = c % 2 == 1;
        const std::string name = node->name + "-claim-" + std::to_string(c);
        // Claims 0 and 2 take a root's pair; 1 and 3 one GPU of each NUMA node.
        static constexpr int kGpus[kClaimsPerNode][2] = {{0, 1}, {2, 4}, {6, 7}, {3, 5}};
        json results = json::array();
        for (int g : kGpus[c]) {
          results.push_back({{"request", scheduler ? "container-0-request-0" : "gpu"}, {"driver", "gpu.nvidia.com"},
                             {"pool", node->name}, {"device", "gpu-" + std::to_string(g)}});
        }
        json claim = {{"apiVersion", "resource.k8s.io/v1"}, {"kind", "ResourceClaim"},
                      {"metadata", {{"name", name}, {"namespace", "team-" + std::to_string(n % 40)}}},
                      {"spec", json::parse(R"({"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName":
                        "gpu.nvidia.com", "count": 2}}], "constraints": [{"matchAttribute": "resource.kubernetes.io/pcieRoot"}]}})")},
                      {"status", {{"allocation", {{"devices", {{"results", results}}}}}}}};
        json pod = {{"apiVersion", "v1"}, {"kind", "Pod"},
                    {"metadata", {{"name", name + "-pod"}, {"namespace", claim["metadata"]["namespace"]}, {"uid", "u-" + name}}},
                    {"spec", {{"nodeName", node->name}, {"containers", json::array({{{"name", "main"}, {"image", "x"}}})}}}};
        if (scheduler) {
          claim["spec"]["devices"].erase("constraints");
          claim["spec"]["devices"]["requests"][0]["name"] = "container-0-request-0";
          claim["metadata"]["annotations"] = {{"resource.kubernetes.io/extended-resource-claim", "true"}};
          pod["status"]["extendedResourceClaimStatus"] = {
              {"resourceClaimName", name},
              {"requestMappings", json::array({{{"containerName", "main"}, {"resourceName", "nvidia.com/gpu"},
                                                {"requestName", "container-0-request-0"}}})}};
        } else {
          pod["spec"]["resourceClaims"] = json::array({{{"name", "gpu"}, {"resourceClaimName", name}}});
          pod["spec"]["containers"][0]["resources"]["claims"] = json::array({{{"name", "gpu"}}});
        }
        claims.push_back(std::move(claim));
        pods.push_back(std::move(pod));
      }
    }
    topology = draguard::topology::Snapshot::Create(std::move(nodes));
  }
  std::shared_ptr<const draguard::topology::Snapshot> topology;
  std::vector<json> slices, claims, pods;
};

const Cluster& TheCluster() {
  static const Cluster c;
  return c;
}

std::size_t HeapInUse() { return mallinfo2().uordblks; }

// The background audit's order: claims, then slices (only allocated devices held), then each Pod
// analysed as it comes. Items: Pods.
void BM_AllocationBackgroundOrder(benchmark::State& state) {
  const Cluster& c = TheCluster();
  std::int64_t pods = 0, warned = 0;
  double held = 0, claim_bytes = 0;
  for (auto _ : state) {
    const std::size_t before = HeapInUse();
    draguard::audit::AllocationJoin join(c.topology.get());
    for (const auto& x : c.claims) join.AddClaim(x);
    claim_bytes = static_cast<double>(HeapInUse() - before) / static_cast<double>(c.claims.size());
    join.ClaimsComplete();
    for (const auto& x : c.slices) join.AddSlice(x);
    join.InputsComplete();
    held = static_cast<double>(HeapInUse() - before);
    for (const auto& p : c.pods) {
      join.AddPod(p, [&](draguard::audit::PodAllocation&& a) { warned += a.containers[0].result == "warn"; });
      ++pods;
    }
  }
  state.SetItemsProcessed(pods);
  state.counters["held_bytes"] = held;
  state.counters["bytes_per_claim"] = claim_bytes;  // the claim alone
  state.counters["bytes_per_claim_with_devices"] = held / static_cast<double>(c.claims.size());
  benchmark::DoNotOptimize(warned);
}

// kubectl's order (pods, resourceclaims, resourceslices): every Pod waits, every locatable device
// is held; the bytes held are reported per waiting Pod and per device.
void BM_AllocationPodsFirst(benchmark::State& state) {
  const Cluster& c = TheCluster();
  std::int64_t pods = 0;
  double waiting = 0, devices = 0, device_bytes = 0;
  for (auto _ : state) {
    draguard::audit::AllocationJoin join(c.topology.get());
    auto sink = [&](draguard::audit::PodAllocation&& a) { benchmark::DoNotOptimize(a); };
    std::size_t before = HeapInUse();
    for (const auto& p : c.pods) join.AddPod(p, sink);
    waiting = static_cast<double>(HeapInUse() - before) / static_cast<double>(c.pods.size());
    for (const auto& x : c.claims) join.AddClaim(x);
    before = HeapInUse();
    for (const auto& x : c.slices) join.AddSlice(x);
    devices = static_cast<double>(join.stats().devices);
    device_bytes = static_cast<double>(HeapInUse() - before) / devices;
    join.Finish(sink);
    pods += static_cast<std::int64_t>(c.pods.size());
  }
  state.SetItemsProcessed(pods);
  state.counters["bytes_per_waiting_pod"] = waiting;
  state.counters["devices_held"] = devices;
  state.counters["bytes_per_device"] = device_bytes;
}

BENCHMARK(BM_AuditJsonList)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AuditYamlList)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReadJsonListOnly)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_JudgeOnly)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AllocationBackgroundOrder)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AllocationPodsFirst)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
