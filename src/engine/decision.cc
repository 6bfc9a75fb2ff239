#include "draguard/engine/engine.h"

#include <string>

namespace draguard::engine {
namespace {

std::string AnnotationKey(const Rule& rule) {
  std::string key(rule.id());
  for (auto& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return key + "-" + std::string(rule.name());
}

std::string JoinFindings(const RuleResult& r) {
  std::string out;
  for (const auto& f : r.findings) {
    if (!out.empty()) out += "; ";
    out += f.message;
  }
  return out;
}

// "DG001 legacy-gpu-resource: <findings>. Fix: <fix>".
std::string DenySentence(const Rule& rule, const RuleResult& r) {
  std::string s = std::string(rule.id()) + " " + std::string(rule.name()) + ": ";
  if (r.status == RuleStatus::kError) return s + "could not be evaluated: " + r.error;
  s += JoinFindings(r);
  if (!r.findings.empty() && !r.findings.front().fix.empty()) {
    s += ". Fix: " + r.findings.front().fix;
  }
  return s;
}

}  // namespace

Decision Decide(const EngineResult& result, const policy::Policy& policy) {
  Decision d;
  d.response = admission::Allowed();
  if (!result.exemption.empty()) {
    d.verdict = "exempt";
    admission::AddAuditAnnotation(d.response, "exempt", result.exemption);
    return d;
  }
  std::string deny_message;
  for (const auto& o : result.outcomes) {
    const Rule& rule = *o.rule;
    const RuleResult& r = o.result;
    if (r.status == RuleStatus::kError) {
      d.error_rules.emplace_back(rule.id());
      admission::AddAuditAnnotation(d.response, AnnotationKey(rule), "error: " + r.error);
      if (policy.rule_errors == policy::RuleErrorPolicy::kDeny &&
          policy.mode == policy::Mode::kEnforce) {
        d.denied_rules.emplace_back(rule.id());
        if (!deny_message.empty()) deny_message += " ";
        deny_message += DenySentence(rule, r);
      } else {
        admission::AddWarning(d.response,
                              std::string(rule.id()) + " could not be evaluated: " + r.error);
      }
      continue;
    }
    if (r.status != RuleStatus::kFail) continue;
    const char* action = policy::ActionName(o.action);
    admission::AddAuditAnnotation(d.response, AnnotationKey(rule),
                                  std::string(action) + ": " + JoinFindings(r));
    switch (o.action) {
      case policy::Action::kDeny:
        d.denied_rules.emplace_back(rule.id());
        if (!deny_message.empty()) deny_message += " ";
        deny_message += DenySentence(rule, r);
        break;
      case policy::Action::kWarn:
        d.warned_rules.emplace_back(rule.id());
        for (const auto& f : r.findings) {
          admission::AddWarning(d.response, std::string(rule.id()) + ": " + f.message);
        }
        break;
      case policy::Action::kAudit:
      case policy::Action::kOff:
        d.audited_rules.emplace_back(rule.id());
        break;
    }
  }
  if (policy.mode == policy::Mode::kAudit) {
    admission::AddAuditAnnotation(d.response, "mode", "audit");
  }
  if (!d.denied_rules.empty()) {
    auto warnings = std::move(d.response.warnings);
    auto annotations = std::move(d.response.audit_annotations);
    d.response = admission::Denied(deny_message);
    d.response.warnings = std::move(warnings);
    d.response.audit_annotations = std::move(annotations);
    d.verdict = "deny";
  } else if (!d.warned_rules.empty()) {
    d.verdict = "warn";
  } else if (!d.audited_rules.empty()) {
    d.verdict = "audit";
  } else {
    d.verdict = "allow";
  }
  admission::AddAuditAnnotation(d.response, "decision", d.verdict);
  return d;
}

}  // namespace draguard::engine
