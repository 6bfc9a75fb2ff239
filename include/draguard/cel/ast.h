// CEL abstract syntax tree.
//
// The parser (parser.h) produces an Ast: a tree of Expr nodes that mirrors cel-spec's
// `google.api.expr.v1alpha1.Expr` (constants, identifiers, selections, calls, list / map / message
// literals and comprehensions). Operators are calls with cel-go's internal names (`_+_`, `_&&_`,
// `_[_]`, `!_`, `-_`, `_?_:_`, `@in`, ...). Every node carries the byte offset of the token it was
// built from, so later stages can report errors with a line, a column and a caret excerpt.
// Macros (`has`, `all`, `exists`, ...) are already expanded into Select / Comprehension nodes.
//
// An Ast is immutable after parsing and may be shared between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace draguard::cel {

/// Kind of an expression node.
enum class ExprKind : uint8_t {
  kConst,          ///< literal
  kIdent,          ///< identifier (variable or, before checking, a qualified-name prefix)
  kSelect,         ///< operand.field, or has(operand.field) when test_only
  kCall,           ///< function or operator call, optionally with a receiver (target)
  kList,           ///< [a, b, ...]
  kMap,            ///< {k: v, ...}
  kStruct,         ///< Message{field: v}: parsed, rejected by the checker
  kComprehension,  ///< expansion of a macro
};

/// Kind of a literal.
enum class ConstKind : uint8_t { kNull, kBool, kInt, kUint, kDouble, kString, kBytes };

/// Operator code of a call node, resolved by the parser so evaluation need not compare names.
/// kOther for every function that is not an operator.
enum class OpCode : uint8_t {
  kOther = 0, kAnd, kOr, kCond, kNotStrictlyFalse, kEq, kNe, kLt, kLe, kGt, kGe,
  kAdd, kSub, kMul, kDiv, kMod, kIndex, kIn, kNot, kNeg,
};

/// The OpCode of a function name ("_&&_" -> kAnd, ...; kOther for non-operators).
OpCode OpCodeOf(const std::string& function);

/// A literal value as written in the source.
struct Constant {
  ConstKind kind = ConstKind::kNull;  ///< which member is meaningful
  bool b = false;                     ///< kBool
  int64_t i = 0;                      ///< kInt
  uint64_t u = 0;                     ///< kUint
  double d = 0;                       ///< kDouble
  std::string s;                      ///< kString (UTF-8) and kBytes (raw bytes)
};

struct Expr;
/// Owning pointer to a node.
using ExprPtr = std::unique_ptr<Expr>;

/// One `key: value` entry of a map literal.
struct MapEntry {
  ExprPtr key;            ///< key expression
  ExprPtr value;          ///< value expression
  int32_t offset = 0;     ///< byte offset of the ':' token
  bool optional = false;  ///< `?key: value`: the value is an optional, the entry is omitted when empty
};

/// One `field: value` entry of a message literal.
struct StructField {
  std::string name;    ///< field name
  ExprPtr value;       ///< value expression
  int32_t offset = 0;  ///< byte offset of the field name
};

/// One node of the tree. Only the members that belong to `kind` are meaningful.
struct Expr {
  int64_t id = 0;                ///< unique within one Ast, assigned in creation order
  int32_t offset = 0;            ///< byte offset in the source of the node's token
  ExprKind kind = ExprKind::kConst;
  OpCode op = OpCode::kOther;    ///< kCall: operator code of `name`
  Constant constant;             ///< kConst
  std::string name;              ///< kIdent name, kSelect field, kCall function, kStruct type
  ExprPtr operand;               ///< kSelect operand, kCall receiver (null for global calls)
  bool test_only = false;        ///< kSelect produced by has()
  std::vector<ExprPtr> args;     ///< kCall arguments, kList elements
  std::vector<int32_t> optional_indices;  ///< kList: indices of `?elem` elements (optional syntax)
  std::vector<MapEntry> entries;       ///< kMap
  std::vector<StructField> fields;     ///< kStruct
  std::string iter_var;          ///< kComprehension: iteration variable
  std::string iter_var2;         ///< kComprehension: second variable of two-variable macros, or empty
  std::string accu_var;          ///< kComprehension: accumulator variable
  ExprPtr iter_range;            ///< kComprehension: the range
  ExprPtr accu_init;             ///< kComprehension: accumulator initial value
  ExprPtr loop_cond;             ///< kComprehension: condition checked before each step
  ExprPtr loop_step;             ///< kComprehension: next accumulator value
  ExprPtr result;                ///< kComprehension: result expression
};

/// Deep copy of a subtree (used by macros that repeat an argument).
ExprPtr CloneExpr(const Expr& e);

/// Converts a byte offset into a 1-based line and 1-based column counted in code points,
/// as cel-go reports positions.
struct SourcePosition {
  int line = 0;    ///< 1-based line
  int column = 0;  ///< 1-based column in Unicode code points
};

/// Computes the SourcePosition of `offset` in `source`. Offsets past the end map to the end.
SourcePosition PositionOf(const std::string& source, int32_t offset);

/// Formats "<line>:<col>: <message>\n | <source line>\n | ....^" as cel-go does.
std::string FormatSourceError(const std::string& source, int32_t offset, const std::string& message);

/// A parsed expression: its tree plus the source it came from.
struct Ast {
  std::string source;         ///< the original expression text
  std::shared_ptr<Expr> root; ///< the root node (shared so copies of an Ast are cheap)
  int max_depth = 0;          ///< depth of the tree (1 for a single node)
  int64_t node_count = 0;     ///< number of nodes created
};

}  // namespace draguard::cel
