// CEL parser: source text to Ast (ast.h).
//
// A hand-written recursive-descent parser for the grammar of cel-spec `doc/langdef.md`, producing
// the same tree as cel-go (including its balanced trees for chains of `&&` / `||`, its handling of
// signed numeric literals and its macro expansions). Hostile input is bounded: the expression
// length, the tree depth (which also bounds the recursion of the parser and of every later pass
// over the tree) and the number of nodes are all limited, and exceeding a limit is an error, never
// a crash. Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "draguard/cel/ast.h"
#include "draguard/status.h"

namespace draguard::cel {

/// Maximum expression length in bytes: the DRA limit `CELSelectorExpressionMaxLength` (10 Ki).
inline constexpr size_t kMaxExpressionLength = 10 * 1024;
/// Default maximum tree depth (cel-go's default parser recursion limit).
inline constexpr int kDefaultMaxDepth = 250;

/// Options of Parse.
struct ParseOptions {
  size_t max_length = kMaxExpressionLength;  ///< longer input is rejected before lexing
  int max_depth = kDefaultMaxDepth;          ///< deeper trees are rejected
  int64_t max_nodes = 100000;                ///< more nodes are rejected
  /// Expand the two-variable comprehension macros (cel-go ext.TwoVarComprehensions): the
  /// three-argument forms of `all`, `exists`, `existsOne` / `exists_one`, and `transformList`,
  /// `transformMap`, `transformMapEntry`. Kubernetes enables them; cel-go's parser tests do not.
  bool extension_macros = true;
  /// Expand `cel.bind(var, init, expr)` (cel-go ext.Bindings, enabled by Kubernetes' DRA env).
  bool bind_macro = true;
  /// Optional syntax (`a.?b`, `a[?b]`, `[?x]`, `{?k: v}`) and the `optMap` / `optFlatMap` macros
  /// (cel-go OptionalTypes, part of the Kubernetes base environment). When false they are
  /// reported as unsupported syntax, as in cel-go's parser tests.
  bool optional_syntax = true;
};

/// One parse error.
struct Diagnostic {
  int32_t offset = -1;  ///< byte offset, or -1 when the error has no position (limits)
  int line = -1;        ///< 1-based line, or -1
  int column = 0;       ///< 1-based column in code points, or 0
  std::string message;  ///< what was wrong / expected
};

/// Outcome of ParseDetailed: an Ast, or the errors sorted by position.
struct ParseOutcome {
  bool ok = false;                     ///< true when `ast` is valid
  Ast ast;                             ///< the tree when ok
  std::vector<Diagnostic> errors;      ///< the errors when !ok (at least one)
};

/// Parses `source`; reports every error found with its position.
ParseOutcome ParseDetailed(std::string_view source, const ParseOptions& options = {});

/// Parses `source`. On failure the Status is InvalidArgument (ResourceExhausted for limits) and
/// its message holds each error as "ERROR: <input>:L:C: message" plus a caret excerpt.
Result<Ast> Parse(std::string_view source, const ParseOptions& options = {});

/// Formats diagnostics as cel-go does ("ERROR: <input>:1:5: ...\n | src\n | ....^").
std::string FormatDiagnostics(const std::string& source, const std::vector<Diagnostic>& errors);

}  // namespace draguard::cel
