// The draguard policy: what the webhook enforces and how strictly.
//
// A Policy is an immutable value parsed from YAML (apiVersion draguard.io/v1alpha1, kind Policy).
// Parsing reports unknown keys and wrong types with line and column; it never throws.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "draguard/status.h"

namespace draguard::policy {

/// Global enforcement mode: audit never denies.
enum class Mode { kEnforce, kAudit };

/// What a rule's findings do to the admission decision.
enum class Action { kDeny, kWarn, kAudit, kOff };

/// How a rule that cannot evaluate (kError) is treated.
enum class RuleErrorPolicy { kAllow, kDeny };

/// How mutation obtains the ResourceClaimTemplates it references.
enum class TemplateMode { kCreate, kReference };

/// "deny", "warn", "audit" or "off".
const char* ActionName(Action action);
/// Parses "deny" | "warn" | "audit" | "off".
std::optional<Action> ParseAction(std::string_view text);

/// Who and what is exempt from the policy.
struct Exemptions {
  std::vector<std::string> namespaces;  ///< names or globs ("*", "?")
  std::vector<std::string> users;       ///< userInfo.username, globs allowed
  std::vector<std::string> groups;      ///< userInfo.groups entries, globs allowed
};

/// How latency-sensitive workloads are recognised.
struct WorkloadClassSelector {
  std::map<std::string, std::string> labels;      ///< all must match (AND)
  std::vector<std::string> priority_class_names;  ///< any matches (OR with labels)
};

/// Mutation settings.
struct MutationConfig {
  bool enabled = true;                          ///< /mutate converts legacy requests
  TemplateMode templates = TemplateMode::kCreate;
};

/// Per-rule settings.
struct RuleConfig {
  std::optional<Action> action;  ///< overrides the rule's default action when set
};

/// A parsed, validated policy.
struct Policy {
  Mode mode = Mode::kEnforce;
  std::vector<std::string> legacy_resources = {"nvidia.com/gpu", "nvidia.com/gpu.shared",
                                               "nvidia.com/mig-*"};
  std::map<std::string, RuleConfig> rules;      ///< keyed by rule ID ("DG001")
  Exemptions exemptions;
  WorkloadClassSelector latency_sensitive;
  MutationConfig mutation;
  RuleErrorPolicy rule_errors = RuleErrorPolicy::kAllow;

  /// The action for `rule_id`: the override if any, else `default_action`.
  Action ActionFor(std::string_view rule_id, Action default_action) const;
  /// True when `resource_name` matches a legacyResources entry.
  bool IsLegacyResource(std::string_view resource_name) const;
};

/// Parses a policy document. `source` names the file in error messages.
Result<Policy> ParsePolicy(std::string_view yaml, std::string_view source = "policy");

/// The bundled default policy (deploy/policy/default-policy.yaml, embedded at build time).
std::string_view DefaultPolicyYaml();

/// Loads and parses a policy file.
Result<Policy> LoadPolicyFile(const std::string& path);

}  // namespace draguard::policy
