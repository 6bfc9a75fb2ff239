// CEL type checker and the DRA selector environment.
//
// Check() infers a type for every node of a parsed Ast against an Env (declared variables plus the
// built-in function library) and reports, with positions, what the apiserver would reject:
// undeclared identifiers, undefined fields of `device`, calls with no matching overload, message
// construction, and a result that is not bool. For DRA selectors it also extracts every
// attribute / capacity reference with its domain and whether a presence test guards it, which is
// what the rule engine needs to catch misspelt attributes (accepted by the apiserver, fatal at
// scheduling time).
//
// Pure functions; Env and CheckedExpr are immutable after construction and thread-safe to share.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "draguard/cel/ast.h"
#include "draguard/cel/parser.h"
#include "draguard/status.h"

namespace draguard::cel {

/// Static type of an expression.
struct Type {
  /// Type kinds. kDyn accepts and produces anything; kDevice is `kubernetes.DRADevice`.
  enum class Kind : uint8_t {
    kDyn, kNull, kBool, kInt, kUint, kDouble, kString, kBytes, kList, kMap, kType, kQuantity, kSemver, kDevice,
    kOptional,  ///< optional_type(elem)
  };
  Kind kind = Kind::kDyn;             ///< the kind
  std::shared_ptr<const Type> elem;   ///< list element / map value type (null = dyn)
  std::shared_ptr<const Type> key;    ///< map key type (null = dyn)

  /// Simple types.
  static Type Of(Kind k) { return Type{k, nullptr, nullptr}; }
  /// list(elem)
  static Type ListOf(Type elem);
  /// map(key, value)
  static Type MapOf(Type key, Type value);
  /// optional_type(value)
  static Type OptionalOf(Type value);
  /// CEL spelling: "int", "list(string)", "map(string, dyn)", "kubernetes.Quantity".
  std::string ToString() const;
};

/// Options of the DRA environment (feature gates that change what selectors may use).
struct DraEnvOptions {
  /// DRAConsumableCapacity: declares `device.allowMultipleAllocations`.
  bool allow_multiple_allocations = false;
};

/// Variables visible to an expression. The function library is fixed (see docs/cel.md).
class Env {
 public:
  /// An environment with no variables (cel-spec's standard environment).
  Env() = default;
  /// The DRA selector environment: one variable `device` of type kubernetes.DRADevice.
  static Env Dra(const DraEnvOptions& options = {});
  /// Declares (or redeclares) a variable.
  void Declare(std::string name, Type type);
  /// The declared type of `name`, or null.
  const Type* Lookup(std::string_view name) const;
  /// Whether `device.allowMultipleAllocations` is declared.
  bool allow_multiple_allocations() const { return allow_multiple_allocations_; }
  /// Whether the result must be bool (true for DRA selectors).
  bool require_bool() const { return require_bool_; }
  /// Sets whether the result must be bool (or dyn).
  void set_require_bool(bool b) { require_bool_ = b; }

 private:
  std::vector<std::pair<std::string, Type>> vars_;
  bool allow_multiple_allocations_ = false;
  bool require_bool_ = false;
};

/// One read of `device.attributes[domain][name]` or `device.capacity[domain][name]`.
struct AttributeReference {
  /// Which map is read.
  enum class Kind : uint8_t { kAttribute, kCapacity };
  Kind kind = Kind::kAttribute;  ///< attributes or capacity
  /// The domain. When the expression indexes with `device.driver`, this is the driver the
  /// expression requires (`device.driver == '...'` in a top-level conjunct) or empty when unknown,
  /// and `domain_is_driver` is true.
  std::string domain;
  bool domain_is_driver = false;  ///< the domain is the device's driver (default domain)
  std::string name;               ///< attribute / capacity name within the domain
  /// True when a presence test (`'name' in ...`, `has(...)`) protects the read, or the read is an
  /// optional one (`.?name`, `[?'name']`), so a device without the attribute cannot make the
  /// selector fail with "no such key".
  bool guarded = false;
  bool presence_test = false;     ///< the reference is itself a presence test (has / in)
  int line = 0;                   ///< 1-based position of the read
  int column = 0;                 ///< 1-based column in code points
};

/// Regular expressions compiled at check time (opaque; defined in the implementation).
struct CompiledRegexes;
/// The builtin function each call node resolves to (opaque; defined in the implementation).
struct ResolvedCalls;

/// A type-checked expression ready for evaluation.
struct CheckedExpr {
  Ast ast;                                     ///< the parsed tree
  Type result_type;                            ///< type of the whole expression
  std::vector<AttributeReference> references;  ///< DRA attribute / capacity reads, in source order
  /// Literal `matches` patterns, compiled once and shared by all evaluations.
  std::shared_ptr<const CompiledRegexes> regexes;
  /// The checker's overload resolution, which the evaluator dispatches calls on.
  std::shared_ptr<const ResolvedCalls> calls;
  /// The type inferred for every node, indexed by Expr::id (the cost estimator reads it).
  std::shared_ptr<const std::vector<Type>> types;
};

/// Type-checks `ast` in `env`. Errors are InvalidArgument with "ERROR: <input>:L:C: ..." lines.
Result<CheckedExpr> Check(const Ast& ast, const Env& env);

/// Parse + Check with default parse options.
Result<CheckedExpr> Compile(std::string_view source, const Env& env, const ParseOptions& options = {});

/// Compiles a DRA device selector the way the apiserver does (DRA env, bool result).
Result<CheckedExpr> CompileSelector(std::string_view source, const DraEnvOptions& options = {});

}  // namespace draguard::cel
