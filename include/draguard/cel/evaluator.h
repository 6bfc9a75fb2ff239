// CEL evaluator: runs a parsed (and normally checked) expression against variable bindings.
//
// Semantics follow cel-spec: commutative error absorption in `&&` / `||`, errors as values,
// `no such key` for missing map keys, overflow errors for int/uint arithmetic, numeric comparison
// across int/uint/double, RE2 regular expressions for `matches`, Kubernetes Quantity and Semver
// libraries, and a cost budget per evaluation so no expression can spin. The recursion depth of the
// evaluator is bounded by the parser's depth limit. Pure; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "draguard/cel/ast.h"
#include "draguard/cel/budget.h"
#include "draguard/cel/checker.h"
#include "draguard/cel/device.h"
#include "draguard/cel/value.h"
#include "draguard/status.h"

namespace draguard::cel {

/// Default runtime cost budget: the DRA CELSelectorExpressionMaxCost (1,000,000).
inline constexpr int64_t kDefaultCostLimit = 1000000;

/// Options of one evaluation.
struct EvalOptions {
  int64_t cost_limit = kDefaultCostLimit;  ///< evaluation stops with an error past this cost
  /// The review's budget (may be null), charged as the evaluation goes: once it is exhausted the
  /// evaluation stops with the error Budget::Reason() (never absorbed by `&&` / `||`).
  Budget* budget = nullptr;
};

/// Variable bindings of one evaluation (a small list; lookups are linear).
struct Activation {
  std::vector<std::pair<std::string, Value>> vars;  ///< name -> value
  /// Adds a binding.
  void Bind(std::string name, Value v) { vars.emplace_back(std::move(name), std::move(v)); }
};

/// Outcome of Evaluate: the value (an error value on runtime errors) and the cost spent.
struct EvalOutcome {
  Value value;       ///< result or error value
  int64_t cost = 0;  ///< cost units spent (one per node visited plus per-element costs)
};

/// Evaluates `ast` with `activation`. Never fails outright: runtime errors are error values.
EvalOutcome Evaluate(const Ast& ast, const Activation& activation, const EvalOptions& options = {});

/// Evaluates a compiled DRA selector against one device: true / false, or a Status whose message
/// is the CEL runtime error (e.g. "no such key: memory").
Result<bool> EvaluateSelector(const CheckedExpr& selector, const Device& device, const EvalOptions& options = {});

/// Like EvaluateSelector with the device already converted by DeviceToValue (convert once, then
/// evaluate many selectors against it).
Result<bool> EvaluateSelectorValue(const CheckedExpr& selector, const Value& device,
                                   const EvalOptions& options = {});

}  // namespace draguard::cel
