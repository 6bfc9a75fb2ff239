// Per-object exceptions: policy entries (namespace, name, labels, rules, expiry) and the
// draguard.io/exempt annotation where the policy allows it (namespace, user, group, rule).
#include "draguard/engine/exceptions.h"

#include <gtest/gtest.h>

#include "draguard/admission/codec.h"
#include "draguard/engine/engine.h"
#include "draguard/engine/registry.h"

namespace draguard::engine {
namespace {

using std::chrono::seconds;

const auto kNow = *policy::ParseRfc3339("2026-06-01T00:00:00Z");

policy::Policy Parse(const std::string& body) {
  auto p = policy::ParsePolicy("apiVersion: draguard.io/v1alpha1\nkind: Policy\n" + body, "policy.yaml");
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? *p : policy::Policy{};
}

ExceptionSubject Subject(std::string ns = "team-a", std::string name = "bench",
                         std::map<std::string, std::string> labels = {}) {
  ExceptionSubject s;
  s.namespace_ = std::move(ns);
  s.name = std::move(name);
  s.labels = std::move(labels);
  s.username = "alice";
  s.groups = {"system:authenticated"};
  return s;
}

ExceptionSubject Annotated(std::string ns, std::string user, std::vector<std::string> groups,
                           std::string rules = "DG001") {
  ExceptionSubject s = Subject(std::move(ns));
  s.username = std::move(user);
  s.groups = std::move(groups);
  s.annotations = {{kExemptAnnotation, rules}, {kExemptReasonAnnotation, "vendor benchmark"}};
  return s;
}

policy::PolicyException Exception() {
  policy::PolicyException ex;
  ex.name = "bench";
  ex.rules = {"DG001"};
  ex.namespaces = {"team-a"};
  ex.object_names = {"bench"};
  ex.reason = "vendor benchmark";
  return ex;
}

TEST(ExceptionMatches, Namespace) {
  auto ex = Exception();
  EXPECT_TRUE(ExceptionMatches(ex, Subject("team-a")));
  EXPECT_FALSE(ExceptionMatches(ex, Subject("team-b")));
  EXPECT_FALSE(ExceptionMatches(ex, Subject("")));  // cluster-scoped: never
  ex.namespaces = {"team-*"};
  EXPECT_TRUE(ExceptionMatches(ex, Subject("team-b")));
  EXPECT_FALSE(ExceptionMatches(ex, Subject("research")));
}

TEST(ExceptionMatches, ObjectName) {
  auto ex = Exception();
  EXPECT_TRUE(ExceptionMatches(ex, Subject("team-a", "bench")));
  EXPECT_FALSE(ExceptionMatches(ex, Subject("team-a", "bench-2")));
  EXPECT_FALSE(ExceptionMatches(ex, Subject("team-a", "")));  // generateName Pod before naming
  ex.object_names = {"bench-*", "other"};
  EXPECT_TRUE(ExceptionMatches(ex, Subject("team-a", "bench-x7k2")));
  EXPECT_TRUE(ExceptionMatches(ex, Subject("team-a", "other")));
  EXPECT_FALSE(ExceptionMatches(ex, Subject("team-a", "bench")));
}

TEST(ExceptionMatches, LabelSelector) {
  auto ex = Exception();
  ex.object_names.clear();
  ex.object_selector = policy::LabelSelector{};
  EXPECT_TRUE(ExceptionMatches(ex, Subject("team-a", "any")));  // {} matches every object
  ex.object_selector->match_labels = {{"app", "bench"}};
  ex.object_selector->match_expressions = {{"tier", "NotIn", {"prod"}}, {"owner", "Exists", {}}};
  EXPECT_TRUE(ExceptionMatches(ex, Subject("team-a", "x", {{"app", "bench"}, {"owner", "bob"}})));
  EXPECT_TRUE(ExceptionMatches(ex, Subject("team-a", "x", {{"app", "bench"}, {"owner", "bob"}, {"tier", "dev"}})));
  EXPECT_FALSE(ExceptionMatches(ex, Subject("team-a", "x", {{"app", "bench"}, {"owner", "bob"}, {"tier", "prod"}})));
  EXPECT_FALSE(ExceptionMatches(ex, Subject("team-a", "x", {{"app", "bench"}})));
  EXPECT_FALSE(ExceptionMatches(ex, Subject("team-a", "x", {{"app", "other"}, {"owner", "bob"}})));
  // Name and selector together: both must hold.
  ex.object_names = {"x"};
  EXPECT_FALSE(ExceptionMatches(ex, Subject("team-a", "y", {{"app", "bench"}, {"owner", "bob"}})));
  EXPECT_FALSE(ExceptionMatches(ex, Subject("team-b", "x", {{"app", "bench"}, {"owner", "bob"}})));
}

TEST(ExceptionExpired, BoundaryIsExclusive) {
  auto ex = Exception();
  EXPECT_FALSE(ExceptionExpired(ex, kNow));  // no expiry
  ex.expires = kNow;
  ex.expires_text = "2026-06-01T00:00:00Z";
  EXPECT_FALSE(ExceptionExpired(ex, kNow - seconds(1)));
  EXPECT_TRUE(ExceptionExpired(ex, kNow));
  EXPECT_TRUE(ExceptionExpired(ex, kNow + seconds(1)));
}

TEST(DecideExceptions, PolicyExceptionAppliesToItsRulesOnly) {
  auto pol = Parse(R"(exceptions:
- name: bench
  rules: [DG001, DG005]
  namespaces: [team-a]
  objectNames: [bench]
  reason: "vendor benchmark, TICKET-42"
  expires: "2026-07-01T00:00:00Z"
)");
  Registry reg = DefaultRegistry();
  auto d = DecideExceptions(Subject(), pol, reg, kNow);
  EXPECT_EQ(d.exempted_rules, (std::vector<std::string>{"DG001", "DG005"}));
  ASSERT_EQ(d.records.size(), 1u);
  EXPECT_EQ(d.records[0], "DG001,DG005 (exception \"bench\": vendor benchmark, TICKET-42; until 2026-07-01T00:00:00Z)");
  EXPECT_TRUE(d.notes.empty());
  // Another object, another namespace: nothing.
  EXPECT_TRUE(DecideExceptions(Subject("team-a", "other"), pol, reg, kNow).exempted_rules.empty());
  EXPECT_TRUE(DecideExceptions(Subject("team-b"), pol, reg, kNow).exempted_rules.empty());
}

TEST(DecideExceptions, ExpiredExceptionIsANoteAndDoesNotApply) {
  auto pol = Parse(R"(exceptions:
- {name: bench, rules: [DG001], namespaces: [team-a], objectNames: [bench], reason: r, expires: "2026-06-01T00:00:00Z"}
)");
  Registry reg = DefaultRegistry();
  auto before = DecideExceptions(Subject(), pol, reg, kNow - seconds(1));
  EXPECT_EQ(before.exempted_rules, std::vector<std::string>{"DG001"});
  auto at = DecideExceptions(Subject(), pol, reg, kNow);
  EXPECT_TRUE(at.exempted_rules.empty());
  EXPECT_TRUE(at.records.empty());
  ASSERT_EQ(at.notes.size(), 1u);
  EXPECT_EQ(at.notes[0], "exception \"bench\" (DG001) expired at 2026-06-01T00:00:00Z; not applied");
  // An expired exception of another object says nothing.
  EXPECT_TRUE(DecideExceptions(Subject("team-a", "other"), pol, reg, kNow).notes.empty());
}

TEST(DecideExceptions, UnknownRuleInAPolicyExceptionIsANote) {
  auto pol = Parse(R"(exceptions:
- {rules: [DG999, DG003], namespaces: [team-a], objectSelector: {}, reason: r}
)");
  Registry reg = DefaultRegistry();
  auto d = DecideExceptions(Subject(), pol, reg, kNow);
  EXPECT_EQ(d.exempted_rules, std::vector<std::string>{"DG003"});
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_EQ(d.notes[0], "exception \"exceptions[0]\" names unknown rule \"DG999\"; ignored");
  EXPECT_EQ(d.records[0], "DG003 (exception \"exceptions[0]\": r)");
}

TEST(DecideExceptions, AnnotationIsIgnoredByDefault) {
  policy::Policy pol = Parse("mode: enforce\n");
  Registry reg = DefaultRegistry();
  auto d = DecideExceptions(Annotated("team-a", "alice", {"system:authenticated"}), pol, reg, kNow);
  EXPECT_TRUE(d.exempted_rules.empty());
  EXPECT_TRUE(d.records.empty());
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_EQ(d.notes[0], "draguard.io/exempt ignored for DG001: the policy does not allow annotation exceptions here");
}

TEST(AnnotationExceptionAllowed, ByNamespace) {
  auto pol = Parse("annotationExceptions:\n- namespaces: [research-*]\n");
  EXPECT_TRUE(AnnotationExceptionAllowed(pol, Annotated("research-x", "alice", {}), "DG001"));
  EXPECT_TRUE(AnnotationExceptionAllowed(pol, Annotated("research-x", "", {}), "DG005"));  // no user condition
  EXPECT_FALSE(AnnotationExceptionAllowed(pol, Annotated("team-a", "alice", {}), "DG001"));
  EXPECT_FALSE(AnnotationExceptionAllowed(pol, Annotated("", "alice", {}), "DG001"));
}

TEST(AnnotationExceptionAllowed, ByUserOrGroup) {
  auto pol = Parse(R"(annotationExceptions:
- namespaces: [team-a]
  users: ["system:serviceaccount:ci:*", carol]
  groups: [gpu-admins]
)");
  EXPECT_TRUE(AnnotationExceptionAllowed(pol, Annotated("team-a", "carol", {}), "DG001"));
  EXPECT_TRUE(AnnotationExceptionAllowed(pol, Annotated("team-a", "system:serviceaccount:ci:runner", {}), "DG001"));
  EXPECT_TRUE(AnnotationExceptionAllowed(pol, Annotated("team-a", "dave", {"devs", "gpu-admins"}), "DG001"));
  EXPECT_FALSE(AnnotationExceptionAllowed(pol, Annotated("team-a", "alice", {"system:authenticated"}), "DG001"));
  EXPECT_FALSE(AnnotationExceptionAllowed(pol, Annotated("team-b", "carol", {"gpu-admins"}), "DG001"));
  // Offline (no requester): an entry with a user or group condition never matches.
  EXPECT_FALSE(AnnotationExceptionAllowed(pol, Annotated("team-a", "", {}), "DG001"));
}

TEST(AnnotationExceptionAllowed, ByRule) {
  auto pol = Parse(R"(annotationExceptions:
- {namespaces: [team-a], rules: [DG005]}
- {namespaces: ["*"], groups: [gpu-admins], rules: [DG001]}
)");
  EXPECT_TRUE(AnnotationExceptionAllowed(pol, Annotated("team-a", "alice", {}), "DG005"));
  EXPECT_FALSE(AnnotationExceptionAllowed(pol, Annotated("team-a", "alice", {}), "DG001"));
  EXPECT_TRUE(AnnotationExceptionAllowed(pol, Annotated("team-b", "bob", {"gpu-admins"}), "DG001"));
  EXPECT_FALSE(AnnotationExceptionAllowed(pol, Annotated("team-b", "bob", {"gpu-admins"}), "DG005"));
}

TEST(DecideExceptions, AllowedAnnotationAppliesPerRule) {
  auto pol = Parse("annotationExceptions:\n- {namespaces: [team-a], rules: [DG005]}\n");
  Registry reg = DefaultRegistry();
  auto s = Annotated("team-a", "alice", {}, "DG001, DG005,DG404");
  s.annotations[kExemptUntilAnnotation] = "2026-06-02T00:00:00Z";
  auto d = DecideExceptions(s, pol, reg, kNow);
  EXPECT_EQ(d.exempted_rules, std::vector<std::string>{"DG005"});
  ASSERT_EQ(d.records.size(), 1u);
  EXPECT_EQ(d.records[0], "DG005 (annotation: vendor benchmark; until 2026-06-02T00:00:00Z)");
  ASSERT_EQ(d.notes.size(), 2u);
  EXPECT_EQ(d.notes[0], "draguard.io/exempt names unknown rule \"DG404\"; ignored");
  EXPECT_EQ(d.notes[1], "draguard.io/exempt ignored for DG001: the policy does not allow annotation exceptions here");
  // Expired annotation: nothing applies, whatever the policy allows.
  s.annotations[kExemptUntilAnnotation] = "2026-06-01T00:00:00Z";
  auto expired = DecideExceptions(s, pol, reg, kNow);
  EXPECT_TRUE(expired.exempted_rules.empty());
  EXPECT_EQ(expired.notes.back(), "draguard.io/exempt ignored: the exception expired at 2026-06-01T00:00:00Z");
}

TEST(DecideExceptions, PolicyExceptionFirstThenAnnotation) {
  auto pol = Parse(R"(exceptions:
- {name: bench, rules: [DG001], namespaces: [team-a], objectNames: [bench], reason: granted}
annotationExceptions:
- namespaces: [team-a]
)");
  Registry reg = DefaultRegistry();
  auto d = DecideExceptions(Annotated("team-a", "alice", {}, "DG001,DG003"), pol, reg, kNow);
  EXPECT_EQ(d.exempted_rules, (std::vector<std::string>{"DG001", "DG003"}));
  EXPECT_EQ(d.records, (std::vector<std::string>{"DG001 (exception \"bench\": granted)",
                                                 "DG003 (annotation: vendor benchmark)"}));
  EXPECT_TRUE(d.notes.empty());
}

TEST(SubjectOf, ReadsTheObjectAndTheRequester) {
  admission::Json pod = {{"apiVersion", "v1"},
                         {"kind", "Pod"},
                         {"metadata",
                          {{"name", "bench"},
                           {"namespace", "team-a"},
                           {"labels", {{"app", "x"}}},
                           {"annotations", {{kExemptAnnotation, "DG001"}}}}}};
  admission::AdmissionRequest req = admission::CreateRequestFor(pod);
  req.user_info.username = "alice";
  req.user_info.groups = {"g"};
  auto s = SubjectOf(req);
  EXPECT_EQ(s.namespace_, "team-a");
  EXPECT_EQ(s.name, "bench");
  EXPECT_EQ(s.labels.at("app"), "x");
  EXPECT_EQ(s.annotations.at(kExemptAnnotation), "DG001");
  EXPECT_EQ(s.username, "alice");
  EXPECT_EQ(s.groups, std::vector<std::string>{"g"});
}

// The engine skips exempted rules and records the exception; Decide turns notes into warnings.
TEST(Evaluate, PolicyExceptionSkipsTheRuleAndIsRecorded) {
  auto pol = Parse(R"(exceptions:
- {name: bench, rules: [DG001], namespaces: [team-a], objectNames: [bench], reason: granted}
)");
  admission::Json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", "bench"}, {"namespace", "team-a"}}},
      {"spec", {{"containers", {{{"name", "c"}, {"image", "x"}, {"resources", {{"limits", {{"nvidia.com/gpu", 1}}}}}}}}}}};
  admission::AdmissionRequest req = admission::CreateRequestFor(pod);
  Registry reg = DefaultRegistry();
  RuleInput in{req, pol, nullptr, kNow};
  auto r = Evaluate(in, reg);
  EXPECT_EQ(r.exempted_rules, std::vector<std::string>{"DG001"});
  auto d = Decide(r, pol);
  EXPECT_EQ(d.verdict, Verdict::kAllow);
  EXPECT_EQ(d.response.audit_annotations.at("exempt-rules"), "DG001 (exception \"bench\": granted)");
  EXPECT_EQ(ExemptionFrom(in, reg, "DG001"), "DG001 (exception \"bench\": granted)");
  EXPECT_EQ(ExemptionFrom(in, reg, "DG003"), "");
  // Past its expiry: DG001 denies and the response says why the exception did not apply.
  pol.exceptions[0].expires = kNow;
  pol.exceptions[0].expires_text = "2026-06-01T00:00:00Z";
  auto denied = Decide(Evaluate(in, reg), pol);
  EXPECT_EQ(denied.verdict, Verdict::kDeny);
  ASSERT_EQ(denied.response.warnings.size(), 1u);
  EXPECT_EQ(denied.response.warnings[0], "exception \"bench\" (DG001) expired at 2026-06-01T00:00:00Z; not applied");
}

}  // namespace
}  // namespace draguard::engine
