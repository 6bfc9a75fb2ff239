#include "draguard/engine/exceptions.h"

#include <algorithm>

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

bool Contains(const std::vector<std::string>& list, std::string_view id) {
  return std::find(list.begin(), list.end(), id) != list.end();
}

std::string JoinIds(const std::vector<std::string>& ids) {
  std::string out;
  for (const auto& id : ids) out += (out.empty() ? "" : ",") + id;
  return out;
}

// The rule IDs of the draguard.io/exempt annotation, known ones only, in order; unknown ones are notes.
std::vector<std::string> AnnotationRules(const std::string& list, const Registry& registry,
                                         std::vector<std::string>* notes) {
  std::vector<std::string> ids;
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t comma = list.find(',', start);
    std::string id = Trim(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (!id.empty()) {
      if (registry.Find(id) == nullptr) {
        notes->push_back(std::string(kExemptAnnotation) + " names unknown rule \"" + id + "\"; ignored");
      } else if (!Contains(ids, id)) {
        ids.push_back(id);
      }
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return ids;
}

void PolicyExceptions(const ExceptionSubject& s, const policy::Policy& pol, const Registry& registry,
                      std::chrono::system_clock::time_point now, ExceptionDecision* out) {
  for (const auto& ex : pol.exceptions) {
    if (!ExceptionMatches(ex, s)) continue;
    if (ExceptionExpired(ex, now)) {
      out->notes.push_back("exception \"" + ex.name + "\" (" + JoinIds(ex.rules) + ") expired at " +
                           ex.expires_text + "; not applied");
      continue;
    }
    std::vector<std::string> applied;
    for (const auto& id : ex.rules) {
      if (registry.Find(id) == nullptr) {
        out->notes.push_back("exception \"" + ex.name + "\" names unknown rule \"" + id + "\"; ignored");
      } else if (!Contains(out->exempted_rules, id)) {
        applied.push_back(id);
        out->exempted_rules.push_back(id);
      }
    }
    if (applied.empty()) continue;
    std::string until = ex.expires ? "; until " + ex.expires_text : "";
    out->records.push_back(JoinIds(applied) + " (exception \"" + ex.name + "\": " + Trim(ex.reason) + until + ")");
  }
}

void AnnotationExceptions(const ExceptionSubject& s, const policy::Policy& pol, const Registry& registry,
                          std::chrono::system_clock::time_point now, ExceptionDecision* out) {
  auto it = s.annotations.find(kExemptAnnotation);
  if (it == s.annotations.end()) return;
  std::vector<std::string> ids = AnnotationRules(it->second, registry, &out->notes);
  if (ids.empty()) return;
  auto reason = s.annotations.find(kExemptReasonAnnotation);
  if (reason == s.annotations.end() || Trim(reason->second).empty()) {
    out->notes.push_back(std::string(kExemptAnnotation) + " ignored: " + kExemptReasonAnnotation + " is required");
    return;
  }
  std::string until_text;
  if (auto until = s.annotations.find(kExemptUntilAnnotation); until != s.annotations.end()) {
    auto t = policy::ParseRfc3339(Trim(until->second));
    if (!t) {
      out->notes.push_back(std::string(kExemptAnnotation) + " ignored: " + kExemptUntilAnnotation + " \"" +
                           until->second + "\" is not an RFC 3339 time");
      return;
    }
    if (*t <= now) {
      out->notes.push_back(std::string(kExemptAnnotation) + " ignored: the exception expired at " + until->second);
      return;
    }
    until_text = "; until " + Trim(until->second);
  }
  std::vector<std::string> allowed, refused;
  for (const auto& id : ids) {
    if (Contains(out->exempted_rules, id)) continue;  // already granted by a policy exception
    (AnnotationExceptionAllowed(pol, s, id) ? allowed : refused).push_back(id);
  }
  if (!refused.empty()) {
    out->notes.push_back(std::string(kExemptAnnotation) + " ignored for " + JoinIds(refused) +
                         ": the policy does not allow annotation exceptions here");
  }
  if (allowed.empty()) return;
  for (const auto& id : allowed) out->exempted_rules.push_back(id);
  out->records.push_back(JoinIds(allowed) + " (annotation: " + Trim(reason->second) + until_text + ")");
}

}  // namespace

bool ExceptionsMayApply(const admission::AdmissionRequest& req, const policy::Policy& policy) {
  if (!policy.exceptions.empty()) return true;
  const admission::Json& obj = req.object.is_object() ? req.object : req.old_object;
  return dra::Member(dra::Member(dra::Member(&obj, "metadata"), "annotations"), kExemptAnnotation) != nullptr;
}

ExceptionSubject SubjectOf(const admission::AdmissionRequest& req) {
  const admission::Json& obj = req.object.is_object() ? req.object : req.old_object;
  ExceptionSubject s;
  s.namespace_ = req.namespace_;
  const admission::Json* name = nullptr;
  if (obj.is_object()) {
    auto m = obj.find("metadata");
    if (m != obj.end() && m->is_object()) {
      auto n = m->find("name");
      if (n != m->end() && n->is_string()) name = &*n;
    }
  }
  s.name = name != nullptr && !name->get_ref<const std::string&>().empty() ? name->get<std::string>() : req.name;
  s.labels = dra::StringMapAt(obj, {"metadata", "labels"});
  s.annotations = dra::StringMapAt(obj, {"metadata", "annotations"});
  s.username = req.user_info.username;
  s.groups = req.user_info.groups;
  return s;
}

bool ExceptionMatches(const policy::PolicyException& ex, const ExceptionSubject& s) {
  if (s.namespace_.empty() || !AnyGlob(ex.namespaces, s.namespace_)) return false;
  if (!ex.object_names.empty() && (s.name.empty() || !AnyGlob(ex.object_names, s.name))) return false;
  return !ex.object_selector || ex.object_selector->Matches(s.labels);
}

bool ExceptionExpired(const policy::PolicyException& ex, std::chrono::system_clock::time_point now) {
  return ex.expires && now >= *ex.expires;
}

bool AnnotationExceptionAllowed(const policy::Policy& pol, const ExceptionSubject& s, std::string_view rule_id) {
  for (const auto& g : pol.annotation_exceptions) {
    if (s.namespace_.empty() || !AnyGlob(g.namespaces, s.namespace_)) continue;
    if (!g.rules.empty() && !Contains(g.rules, rule_id)) continue;
    if (g.users.empty() && g.groups.empty()) return true;
    if (!s.username.empty() && AnyGlob(g.users, s.username)) return true;
    for (const auto& group : s.groups) {
      if (!group.empty() && AnyGlob(g.groups, group)) return true;
    }
  }
  return false;
}

ExceptionDecision DecideExceptions(const ExceptionSubject& subject, const policy::Policy& policy,
                                   const Registry& registry, std::chrono::system_clock::time_point now) {
  ExceptionDecision out;
  PolicyExceptions(subject, policy, registry, now, &out);
  AnnotationExceptions(subject, policy, registry, now, &out);
  return out;
}

}  // namespace draguard::engine
