// Per-object exceptions: which rules do not apply to a reviewed object, and why. Exceptions are
// granted by the platform team: entries in the policy file (`exceptions`), or the object's
// draguard.io/exempt annotation where the policy allows it (`annotationExceptions`, off by default).
// Pure functions of the subject, the policy and the review time.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "draguard/admission/review.h"
#include "draguard/engine/registry.h"
#include "draguard/policy/policy.h"

namespace draguard::engine {

/// Annotation that lists the rules an object is exempt from ("DG003,DG005").
inline constexpr const char* kExemptAnnotation = "draguard.io/exempt";
/// Required justification of a draguard.io/exempt exception.
inline constexpr const char* kExemptReasonAnnotation = "draguard.io/exempt-reason";
/// Optional RFC 3339 expiry of a draguard.io/exempt exception.
inline constexpr const char* kExemptUntilAnnotation = "draguard.io/exempt-until";

/// What an exception is matched against: the reviewed object and who asks.
struct ExceptionSubject {
  std::string namespace_;                          ///< the request's namespace
  std::string name;                                ///< metadata.name, else the request's name
  std::map<std::string, std::string> labels;       ///< metadata.labels
  std::map<std::string, std::string> annotations;  ///< metadata.annotations
  std::string username;                            ///< userInfo.username; "" when unknown (offline)
  std::vector<std::string> groups;                 ///< userInfo.groups
};

/// The subject of a request: its object (the old object for DELETE) and userInfo.
ExceptionSubject SubjectOf(const admission::AdmissionRequest& request);

/// False when no exception can apply to the request, so its subject need not be built: the policy
/// has no exceptions and the object carries no draguard.io/exempt annotation.
bool ExceptionsMayApply(const admission::AdmissionRequest& request, const policy::Policy& policy);

/// The exceptions in effect for one subject.
struct ExceptionDecision {
  std::vector<std::string> exempted_rules;  ///< rule IDs that do not apply, first grant first
  /// One record per exception used, e.g. `DG001 (exception "bench": vendor benchmark; until ...)`.
  std::vector<std::string> records;
  std::vector<std::string> notes;  ///< exceptions not applied and why (expired, not allowed, ...)
};

/// True when `exception` covers the subject's namespace, name and labels (rules and expiry aside).
bool ExceptionMatches(const policy::PolicyException& exception, const ExceptionSubject& subject);

/// True when `exception` has expired at `now` (it applies strictly before `expires`).
bool ExceptionExpired(const policy::PolicyException& exception, std::chrono::system_clock::time_point now);

/// True when the policy lets the subject's draguard.io/exempt annotation exempt it from `rule_id`
/// (an annotationExceptions entry matches its namespace, requester and rule). An entry with users
/// or groups never matches an unknown requester (offline review of stored objects).
bool AnnotationExceptionAllowed(const policy::Policy& policy, const ExceptionSubject& subject,
                                std::string_view rule_id);

/// The exceptions that apply at `now`: matching, unexpired policy exceptions first, then the
/// annotation's rules the policy allows. Rules unknown to `registry` are never exempted. Expired,
/// unauthorised or malformed exceptions are notes and do not apply.
ExceptionDecision DecideExceptions(const ExceptionSubject& subject, const policy::Policy& policy,
                                   const Registry& registry, std::chrono::system_clock::time_point now);

}  // namespace draguard::engine
