#include <algorithm>
#include <cctype>
#include <string>

#include "draguard/admission/response.h"
#include "draguard/engine/engine.h"
#include "draguard/str_cat.h"
#include "rules/rules.h"

namespace draguard::engine {
namespace {

// The strings below are built in one buffer each, sized first: a denied review builds several.
std::string AnnotationKey(const Rule& rule) {
  std::string key;
  key.reserve(rule.id().size() + 1 + rule.name().size());
  for (char c : rule.id()) key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  key += '-';
  key += rule.name();
  return key;
}

void AppendJoined(std::string& out, const std::vector<const Finding*>& findings) {
  for (std::size_t i = 0; i < findings.size(); ++i) {
    if (i > 0) out += "; ";
    out += findings[i]->message;
  }
}

std::string Header(const Rule& rule, std::size_t more = 0) {
  std::string out;
  out.reserve(rule.id().size() + rule.name().size() + 3 + more);
  out += rule.id();
  out += ' ';
  out += rule.name();
  out += ": ";
  return out;
}

// One denying rule: its findings split by effective action.
struct DenyEntry {
  const Rule* rule = nullptr;
  std::vector<const Finding*> findings;  // empty for a rule error
  std::string error;
};

// "DG001 legacy-gpu-resource: <findings>. Fix: <fix>"; compact drops all but the first finding.
std::string Sentence(const DenyEntry& e, bool compact) {
  std::size_t more = e.error.size() + 32;
  for (const auto* f : e.findings) more += f->message.size() + 2;
  if (!e.findings.empty()) more += e.findings.front()->fix.size() + 7;
  std::string s = Header(*e.rule, more);
  if (e.findings.empty()) {
    s += "could not be evaluated: ";
    s += e.error;
    return s;
  }
  if (compact) {
    s += e.findings.front()->message;
    if (e.findings.size() > 1) {
      s += " (+";
      s += std::to_string(e.findings.size() - 1);
      s += " more)";
    }
  } else {
    AppendJoined(s, e.findings);
  }
  if (!e.findings.front()->fix.empty()) {
    s += ". Fix: ";
    s += e.findings.front()->fix;
  }
  return s;
}

// Every denying rule, most important first, within admission::kMaxDenyMessageBytes bytes: full sentences when they
// fit, else one finding per rule, else the first rule's sentence cut short plus the other IDs.
std::string DenyMessage(const std::vector<DenyEntry>& entries) {
  for (bool compact : {false, true}) {
    std::string msg;
    for (const auto& e : entries) {
      if (!msg.empty()) msg += ' ';
      msg += Sentence(e, compact);
    }
    if (msg.size() <= admission::kMaxDenyMessageBytes) return msg;
  }
  std::string tail;
  for (std::size_t i = 1; i < entries.size(); ++i) {
    tail += (tail.empty() ? " Also denied by: " : ", ") + std::string(entries[i].rule->id());
  }
  std::string first = Sentence(entries.front(), true);
  std::size_t room = admission::kMaxDenyMessageBytes > tail.size() + 4 ? admission::kMaxDenyMessageBytes - tail.size() - 4 : 0;
  if (first.size() > room) first = admission::TruncateUtf8(first, room) + "...";
  return admission::TruncateUtf8(first + tail, admission::kMaxDenyMessageBytes);
}

// A request /mutate could not carry out, judged under the mutation rule: deny when the rule
// denies in enforce mode, else admit unchanged with a warning.
Decision MutationFailure(const std::string& message, const Rule& rule, const policy::Policy& policy) {
  Decision d;
  const std::string text = Header(rule) + message;
  const std::string id(rule.id());
  if (ModeAction(policy.ActionFor(id, rule.default_action()), policy) == policy::Action::kDeny) {
    d.response = admission::Denied(text);
    d.verdict = Verdict::kDeny;
    d.denied_rules = {id};
    return d;
  }
  d.response = admission::Allowed();
  admission::AddWarning(d.response, text);
  admission::AddAuditAnnotation(d.response, "mutation", text);
  d.verdict = Verdict::kWarn;
  d.warned_rules = {id};
  return d;
}

}  // namespace

const char* VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kAllow: return "allow";
    case Verdict::kDeny: return "deny";
    case Verdict::kWarn: return "warn";
    case Verdict::kAudit: return "audit";
    case Verdict::kExempt: return "exempt";
    case Verdict::kMutate: return "mutate";
    case Verdict::kError: return "error";
  }
  return "unknown";
}

policy::Action ModeAction(policy::Action action, const policy::Policy& policy) {
  if (policy.mode == policy::Mode::kAudit && action == policy::Action::kDeny) return policy::Action::kAudit;
  return action;
}

Decision Decide(const EngineResult& result, const policy::Policy& policy) {
  Decision d;
  d.response = admission::Allowed();
  if (!result.exemption.empty()) {
    d.verdict = Verdict::kExempt;
    admission::AddAuditAnnotation(d.response, "exempt", result.exemption);
    return d;
  }
  if (!result.rule_exemption.empty()) {
    admission::AddAuditAnnotation(d.response, "exempt-rules", result.rule_exemption);
  }
  std::string ignored;
  for (const auto& note : result.notes) {
    admission::AddWarning(d.response, note);
    ignored += (ignored.empty() ? "" : "; ") + note;
  }
  if (!ignored.empty()) admission::AddAuditAnnotation(d.response, "exempt-ignored", ignored);
  std::vector<DenyEntry> denies;
  for (const auto& o : result.outcomes) {
    const Rule& rule = *o.rule;
    const RuleResult& r = o.result;
    if (r.status == RuleStatus::kError) {
      d.error_rules.emplace_back(rule.id());
      admission::AddAuditAnnotation(d.response, AnnotationKey(rule), "error: " + r.error);
      const bool budget = std::find(result.budget_rules.begin(), result.budget_rules.end(), rule.id()) !=
                          result.budget_rules.end();
      if ((policy.rule_errors == policy::RuleErrorPolicy::kDeny || budget) &&
          policy.mode == policy::Mode::kEnforce) {
        d.denied_rules.emplace_back(rule.id());
        denies.push_back({&rule, {}, r.error});
      } else {
        admission::AddWarning(d.response,
                              std::string(rule.id()) + " could not be evaluated: " + r.error);
      }
      continue;
    }
    if (r.status != RuleStatus::kFail) continue;
    std::vector<const Finding*> by_action[4];
    for (const auto& f : r.findings) {
      by_action[static_cast<int>(EffectiveAction(ModeAction(o.action, policy), f))].push_back(&f);
    }
    std::string annotation;
    int groups = 0;
    for (int a = 0; a < 3; ++a) groups += by_action[a].empty() ? 0 : 1;
    for (int a = 0; a < 3; ++a) {
      if (by_action[a].empty()) continue;
      if (!annotation.empty()) annotation += " | ";
      annotation += policy::ActionName(static_cast<policy::Action>(a));
      annotation += ": ";
      AppendJoined(annotation, by_action[a]);
    }
    if (groups > 0) admission::AddAuditAnnotation(d.response, AnnotationKey(rule), annotation);
    if (!by_action[static_cast<int>(policy::Action::kDeny)].empty()) {
      d.denied_rules.emplace_back(rule.id());
      denies.push_back({&rule, by_action[static_cast<int>(policy::Action::kDeny)], ""});
    }
    if (!by_action[static_cast<int>(policy::Action::kWarn)].empty()) {
      d.warned_rules.emplace_back(rule.id());
      for (const auto* f : by_action[static_cast<int>(policy::Action::kWarn)]) {
        admission::AddWarning(d.response, StrCat({rule.id(), ": ", f->message}));
      }
    }
    if (!by_action[static_cast<int>(policy::Action::kAudit)].empty()) {
      d.audited_rules.emplace_back(rule.id());
    }
  }
  if (policy.mode == policy::Mode::kAudit) {
    admission::AddAuditAnnotation(d.response, "mode", "audit");
  }
  // A custom resource of the wrong shape hides its Pods from the rules: fail closed in enforce.
  std::string shape;
  for (const auto& e : result.shape_errors) shape += (shape.empty() ? "" : "; ") + e;
  const bool shape_denies = !shape.empty() && policy.mode == policy::Mode::kEnforce;
  if (!shape.empty()) {
    admission::AddAuditAnnotation(d.response, "custom-resource-shape", shape);
    if (!shape_denies) {
      for (const auto& e : result.shape_errors) admission::AddWarning(d.response, e);
    }
  }
  if (!d.denied_rules.empty() || shape_denies) {
    auto warnings = std::move(d.response.warnings);
    auto annotations = std::move(d.response.audit_annotations);
    std::string message = denies.empty() ? "" : DenyMessage(denies);
    if (shape_denies) {
      message += (message.empty() ? "" : " ") + ("malformed custom resource: " + shape +
                                                 " (draguard cannot check pod templates of the wrong shape)");
      message = admission::TruncateUtf8(message, admission::kMaxDenyMessageBytes);
    }
    d.response = admission::Denied(message);
    d.response.warnings = std::move(warnings);
    d.response.audit_annotations = std::move(annotations);
    d.verdict = Verdict::kDeny;
  } else if (!d.warned_rules.empty()) {
    d.verdict = Verdict::kWarn;
  } else if (!d.audited_rules.empty()) {
    d.verdict = Verdict::kAudit;
  } else {
    d.verdict = Verdict::kAllow;
  }
  admission::AddAuditAnnotation(d.response, "decision", VerdictName(d.verdict));
  return d;
}

const Rule* MutationRule(const Registry& registry) { return registry.Find(rules::kLegacyGpuResourceId); }

Decision DecideMutation(const MutationFacts& facts, const Registry& registry, const policy::Policy& policy) {
  using Outcome = MutationFacts::Outcome;
  Decision d;
  d.response = admission::Allowed();
  const Rule* found = MutationRule(registry);
  if (found == nullptr) return d;
  const Rule& rule = *found;
  switch (facts.outcome) {
    case Outcome::kUnchanged:
      return d;
    case Outcome::kExempt:
      admission::AddAuditAnnotation(d.response, "mutation", "not converted: exempt (" + facts.reason + ")");
      d.verdict = Verdict::kExempt;
      return d;
    case Outcome::kRefused:
      return MutationFailure("the Pod's legacy GPU requests cannot be converted to DRA: " + facts.reason, rule,
                             policy);
    case Outcome::kTemplateMissing:
      return MutationFailure("mutation.templates is reference and the catalogue has no template for " +
                                 facts.template_description + " (" + facts.template_name +
                                 "). Fix: add the profile to mutation.catalogue and apply `draguard render`",
                             rule, policy);
    case Outcome::kProvisioningFailed:
      return MutationFailure("could not ensure ResourceClaimTemplate " + facts.template_name + ": " + facts.reason,
                             rule, policy);
    case Outcome::kConverted:
      break;
  }
  if (policy.mode == policy::Mode::kAudit) {
    admission::AddWarning(d.response, "audit mode: draguard would have " + facts.summary);
    admission::AddAuditAnnotation(d.response, "mutation", "would have " + facts.summary);
    d.verdict = Verdict::kAudit;
    d.audited_rules = {std::string(rule.id())};
    return d;
  }
  admission::SetPatch(d.response, facts.patch);
  for (const auto& w : facts.warnings) admission::AddWarning(d.response, "draguard: " + w);
  admission::AddAuditAnnotation(d.response, "mutation", facts.summary);
  d.verdict = Verdict::kMutate;
  return d;
}

}  // namespace draguard::engine
