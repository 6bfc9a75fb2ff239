#include "draguard/engine/engine.h"

#include <algorithm>
#include <cctype>
#include <exception>
#include <set>

#include "draguard/cel/budget.h"
#include "draguard/dra/pod_specs.h"
#include "draguard/glob.h"
#include "draguard/trim.h"

namespace draguard::engine {
namespace {

bool AnyGlob(const std::vector<std::string>& patterns, const std::string& value) {
  for (const auto& p : patterns) {
    if (GlobMatch(p, value)) return true;
  }
  return false;
}

// The object under review (the old object for DELETE).
const admission::Json& ReviewedObject(const admission::AdmissionRequest& req) {
  return req.object.is_object() ? req.object : req.old_object;
}

// Why the request is exempt from every rule, or "" when it is not.
std::string Exemption(const admission::AdmissionRequest& req, const policy::Policy& pol) {
  const auto& ex = pol.exemptions;
  if (!req.namespace_.empty() && AnyGlob(ex.namespaces, req.namespace_)) {
    return "namespace " + req.namespace_;
  }
  if (!req.user_info.username.empty() && AnyGlob(ex.users, req.user_info.username)) {
    return "user " + req.user_info.username;
  }
  for (const auto& g : req.user_info.groups) {
    if (AnyGlob(ex.groups, g)) return "group " + g;
  }
  if (!ex.object_selectors.empty()) {
    auto labels = dra::StringMapAt(ReviewedObject(req), {"metadata", "labels"});
    for (std::size_t i = 0; i < ex.object_selectors.size(); ++i) {
      if (ex.object_selectors[i].Matches(labels)) {
        return "labels match exemptions.objectSelectors[" + std::to_string(i) + "]";
      }
    }
  }
  return "";
}

// Reads the draguard.io/exempt annotations; fills out->exempted_rules / rule_exemption / notes.
void RuleExemptions(const RuleInput& input, const Registry& registry, EngineResult* out) {
  auto ann = dra::StringMapAt(ReviewedObject(input.request), {"metadata", "annotations"});
  auto it = ann.find(kExemptAnnotation);
  if (it == ann.end()) return;
  std::vector<std::string> ids;
  std::string list = it->second;
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t comma = list.find(',', start);
    std::string id = Trim(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (!id.empty()) {
      if (registry.Find(id) == nullptr) {
        out->notes.push_back(std::string(kExemptAnnotation) + " names unknown rule \"" + id + "\"; ignored");
      } else if (std::find(ids.begin(), ids.end(), id) == ids.end()) {
        ids.push_back(id);
      }
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (ids.empty()) return;
  auto reason = ann.find(kExemptReasonAnnotation);
  if (reason == ann.end() || Trim(reason->second).empty()) {
    out->notes.push_back(std::string(kExemptAnnotation) + " ignored: " + kExemptReasonAnnotation +
                         " is required");
    return;
  }
  std::string until_text;
  auto until = ann.find(kExemptUntilAnnotation);
  if (until != ann.end()) {
    auto t = ParseRfc3339(Trim(until->second));
    if (!t) {
      out->notes.push_back(std::string(kExemptAnnotation) + " ignored: " + kExemptUntilAnnotation + " \"" +
                           until->second + "\" is not an RFC 3339 time");
      return;
    }
    if (*t <= input.now) {
      out->notes.push_back(std::string(kExemptAnnotation) + " ignored: the exception expired at " +
                           until->second);
      return;
    }
    until_text = "; until " + Trim(until->second);
  }
  std::string joined;
  for (const auto& id : ids) joined += (joined.empty() ? "" : ",") + id;
  out->exempted_rules = ids;
  out->rule_exemption = joined + " (reason: " + Trim(reason->second) + until_text + ")";
}

int Digits(std::string_view s, std::size_t pos, std::size_t n, bool* ok) {
  int v = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (pos + i >= s.size() || !std::isdigit(static_cast<unsigned char>(s[pos + i]))) {
      *ok = false;
      return 0;
    }
    v = v * 10 + (s[pos + i] - '0');
  }
  return v;
}

}  // namespace

std::optional<std::chrono::system_clock::time_point> ParseRfc3339(std::string_view s) {
  // YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)
  bool ok = true;
  if (s.size() < 20) return std::nullopt;
  int y = Digits(s, 0, 4, &ok), mo = Digits(s, 5, 2, &ok), d = Digits(s, 8, 2, &ok);
  int h = Digits(s, 11, 2, &ok), mi = Digits(s, 14, 2, &ok), se = Digits(s, 17, 2, &ok);
  if (!ok || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') || s[13] != ':' ||
      s[16] != ':') {
    return std::nullopt;
  }
  std::size_t pos = 19;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    std::size_t digits = 0;
    while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) ++pos, ++digits;
    if (digits == 0) return std::nullopt;
  }
  int offset_min = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int sign = s[pos] == '-' ? -1 : 1;
    int oh = Digits(s, pos + 1, 2, &ok), om = Digits(s, pos + 4, 2, &ok);
    if (!ok || pos + 3 >= s.size() || s[pos + 3] != ':' || oh > 23 || om > 59) return std::nullopt;
    offset_min = sign * (oh * 60 + om);
    pos += 6;
  } else {
    return std::nullopt;
  }
  if (pos != s.size()) return std::nullopt;
  using namespace std::chrono;
  year_month_day ymd{year{y}, month{static_cast<unsigned>(mo)}, day{static_cast<unsigned>(d)}};
  if (!ymd.ok() || h > 23 || mi > 59 || se > 60) return std::nullopt;
  auto tp = sys_days(ymd) + hours(h) + minutes(mi) + seconds(se) - minutes(offset_min);
  return time_point_cast<system_clock::duration>(tp);
}

std::string ExemptionFrom(const RuleInput& input, const Registry& registry, std::string_view rule_id) {
  std::string global = Exemption(input.request, input.policy);
  if (!global.empty()) return global;
  EngineResult r;
  RuleExemptions(input, registry, &r);
  if (std::find(r.exempted_rules.begin(), r.exempted_rules.end(), rule_id) != r.exempted_rules.end()) {
    return r.rule_exemption;
  }
  return "";
}

EngineResult Evaluate(const RuleInput& given, const Registry& registry) {
  EngineResult out;
  out.exemption = Exemption(given.request, given.policy);
  if (!out.exemption.empty()) return out;
  // One CEL budget for every rule of the review.
  cel::Budget budget(given.policy.cel_cost_per_review, given.deadline);
  RuleInput input = given;
  if (input.cel_budget == nullptr) input.cel_budget = &budget;
  RuleExemptions(input, registry, &out);
  for (const auto& rule : registry.rules()) {
    const policy::Action action = input.policy.ActionFor(rule->id(), rule->default_action());
    if (action == policy::Action::kOff) continue;
    if (std::find(out.exempted_rules.begin(), out.exempted_rules.end(), rule->id()) !=
        out.exempted_rules.end()) {
      continue;
    }
    RuleOutcome o;
    o.rule = rule.get();
    o.action = action;
    try {
      o.result = rule->Evaluate(input);
    } catch (const std::exception& e) {
      o.result = Error(std::string("internal error: ") + e.what());
    } catch (...) {
      o.result = Error("internal error");
    }
    if (o.result.status == RuleStatus::kError && input.cel_budget->exhausted()) {
      out.budget_rules.emplace_back(rule->id());
    }
    out.outcomes.push_back(std::move(o));
  }
  return out;
}

}  // namespace draguard::engine
