// Renders an Ast in cel-go's debug form (`common/debug.ToDebugString`), with the node-kind
// adorner used by cel-go's parser tests (`^#*expr.Expr_CallExpr#`, ...). The conformance harness
// compares this rendering with the expected ASTs of the cel-spec parsing suites.
#pragma once

#include <string>

#include "draguard/cel/ast.h"

namespace draguard::cel {

/// cel-go debug string of `e`, each node followed by its kind adornment.
std::string ToDebugString(const Expr& e);

/// Formats a double like Go's strconv.FormatFloat(v, 'f', -1, 64).
std::string FormatGoFloat(double v);

/// Quotes a string like Go's strconv.Quote.
std::string GoQuote(const std::string& s);

}  // namespace draguard::cel
