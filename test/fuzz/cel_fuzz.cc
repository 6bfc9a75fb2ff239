// libFuzzer target: parse + check + estimate the cost of + evaluate arbitrary input as a DRA
// selector (and in the standard environment), against a fixed device, with a small cost budget
// and a small review budget. Any crash, sanitizer
// report, hang or unbounded recursion is a bug; errors are expected outcomes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "draguard/cel/budget.h"
#include "draguard/cel/checker.h"
#include "draguard/cel/cost.h"
#include "draguard/cel/debug_string.h"
#include "draguard/cel/device.h"
#include "draguard/cel/evaluator.h"
#include "draguard/cel/parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace draguard::cel;
  std::string src(reinterpret_cast<const char*>(data), size);
  auto ast = Parse(src);
  if (!ast.ok()) return 0;
  (void)ToDebugString(*ast->root);
  Device d;
  d.driver = "gpu.nvidia.com";
  d.attributes["gpu.nvidia.com"]["type"] = std::string("gpu");
  d.attributes["gpu.nvidia.com"]["index"] = int64_t{0};
  d.attributes["gpu.nvidia.com"]["driverVersion"] = *Semver::Parse("550.54.15");
  d.capacity["gpu.nvidia.com"]["memory"] = *Quantity::Parse("81559Mi");
  EvalOptions opts;
  opts.cost_limit = 20000;
  // Unchecked evaluation exercises the runtime type errors too.
  Activation act;
  act.Bind("device", DeviceToValue(d));
  (void)Evaluate(*ast, act, opts);
  auto checked = Check(*ast, Env::Dra());
  if (checked.ok()) {
    (void)EstimateCost(*checked);
    (void)EvaluateSelector(*checked, d, opts);
    Budget budget(5000);
    EvalOptions shared = opts;
    shared.budget = &budget;
    (void)EvaluateSelector(*checked, d, shared);
    (void)EvaluateSelector(*checked, d, shared);
  }
  auto standard = Check(*ast, Env());
  if (standard.ok()) (void)EstimateCost(*standard);
  return 0;
}
