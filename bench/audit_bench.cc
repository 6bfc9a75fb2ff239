// `draguard audit` throughput: streaming a kubectl-style List dump (JSON and YAML) through the
// reader and judging every item, and the judgement alone. Items per second are reported.
#include <cstdlib>
#include <sstream>
#include <string>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "draguard/audit/judge.h"
#include "draguard/audit/reader.h"
#include "draguard/engine/registry.h"
#include "draguard/policy/store.h"
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

BENCHMARK(BM_AuditJsonList)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AuditYamlList)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReadJsonListOnly)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_JudgeOnly)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
