// CEL benchmarks: parse + check of a typical DRA selector, and evaluation against one device.
// Targets (issue 4): parse + check <= 10 us, evaluation <= 1 us per device.
#include <benchmark/benchmark.h>

#include <chrono>

#include "draguard/cel/budget.h"
#include "draguard/cel/checker.h"
#include "draguard/cel/cost.h"
#include "draguard/cel/device.h"
#include "draguard/cel/evaluator.h"
#include "draguard/cel/parser.h"

namespace {

using namespace draguard::cel;

// The NVIDIA GPU class selector plus a memory floor, as a claim would combine them.
constexpr const char* kSelector =
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu' && "
    "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0";

constexpr const char* kGuardedSelector =
    "'productName' in device.attributes['gpu.nvidia.com'] && "
    "device.attributes['gpu.nvidia.com'].productName.matches('^NVIDIA (H100|H200)') && "
    "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('550.0.0')) >= 0";

Device H100() {
  auto d = ParseDeviceJson(R"({"driver": "gpu.nvidia.com",
    "attributes": {"gpu.nvidia.com": {"type": {"string": "gpu"}, "productName": {"string": "NVIDIA H100 80GB HBM3"},
                                      "architecture": {"string": "Hopper"}, "uuid": {"string": "GPU-5e6f2a53"},
                                      "driverVersion": {"version": "550.54.15"},
                                      "cudaComputeCapability": {"version": "9.0.0"}},
                   "resource.kubernetes.io": {"pcieRoot": {"string": "pci0000:16"}}},
    "capacity": {"gpu.nvidia.com": {"memory": "81559Mi"}}})");
  return *d;
}

void BM_ParseCheckSelector(benchmark::State& state) {
  for (auto _ : state) {
    auto c = CompileSelector(kSelector);
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK(BM_ParseCheckSelector);

void BM_EstimateCost(benchmark::State& state) {
  auto c = CompileSelector(kSelector);
  for (auto _ : state) {
    auto est = EstimateCost(*c);
    benchmark::DoNotOptimize(est);
  }
}
BENCHMARK(BM_EstimateCost);

// The same evaluation charged to a review budget (one look at the budget per 1,000 units).
void BM_EvalSelectorWithBudget(benchmark::State& state) {
  auto c = CompileSelector(kSelector);
  Value dev = DeviceToValue(H100());
  Budget budget(0, std::chrono::steady_clock::now() + std::chrono::hours(1));  // no cost limit, a deadline
  EvalOptions opts;
  opts.budget = &budget;
  for (auto _ : state) {
    auto r = EvaluateSelectorValue(*c, dev, opts);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_EvalSelectorWithBudget);

void BM_ParseOnly(benchmark::State& state) {
  for (auto _ : state) {
    auto a = Parse(kSelector);
    benchmark::DoNotOptimize(a);
  }
}
BENCHMARK(BM_ParseOnly);

void BM_EvalSelectorOneDevice(benchmark::State& state) {
  auto c = CompileSelector(kSelector);
  Value dev = DeviceToValue(H100());
  for (auto _ : state) {
    auto r = EvaluateSelectorValue(*c, dev);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_EvalSelectorOneDevice);

void BM_EvalGuardedRegexSemver(benchmark::State& state) {
  auto c = CompileSelector(kGuardedSelector);
  Value dev = DeviceToValue(H100());
  for (auto _ : state) {
    auto r = EvaluateSelectorValue(*c, dev);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_EvalGuardedRegexSemver);

void BM_DeviceToValue(benchmark::State& state) {
  Device d = H100();
  for (auto _ : state) {
    Value v = DeviceToValue(d);
    benchmark::DoNotOptimize(v);
  }
}
BENCHMARK(BM_DeviceToValue);

}  // namespace

BENCHMARK_MAIN();
