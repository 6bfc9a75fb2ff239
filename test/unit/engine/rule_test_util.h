// Helpers for the table-driven rule tests: build requests from JSON text, run one rule or the
// whole engine, and check the generic behaviours every rule shares (actions, exceptions).
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "draguard/dra/claim_catalog.h"
#include "draguard/engine/engine.h"
#include "draguard/engine/registry.h"
#include "draguard/policy/policy.h"

namespace draguard::engine::testing {

using admission::Json;

/// A CREATE request for `object` (JSON text); group/version/kind from its apiVersion and kind.
inline admission::AdmissionRequest Request(const std::string& object_json, const std::string& ns = "team-a",
                                           admission::Operation op = admission::Operation::kCreate) {
  admission::AdmissionRequest r;
  r.uid = "u";
  r.object = Json::parse(object_json);
  std::string api = r.object.value("apiVersion", "");
  auto slash = api.find('/');
  r.kind.group = slash == std::string::npos ? "" : api.substr(0, slash);
  r.kind.version = slash == std::string::npos ? api : api.substr(slash + 1);
  r.kind.kind = r.object.value("kind", "");
  r.namespace_ = ns;
  r.operation = op;
  r.user_info.username = "alice";
  return r;
}

/// A ResourceClaimTemplate (v1 unless `version`) whose claim spec is `spec_json`.
inline std::string Template(const std::string& spec_json, const std::string& version = "v1",
                            const std::string& metadata_json = R"({"name":"t"})") {
  return R"({"apiVersion":"resource.k8s.io/)" + version + R"(","kind":"ResourceClaimTemplate","metadata":)" +
         metadata_json + R"(,"spec":{"spec":)" + spec_json + "}}";
}

/// A ResourceClaim (v1 unless `version`) with spec `spec_json`.
inline std::string Claim(const std::string& spec_json, const std::string& version = "v1",
                         const std::string& metadata_json = R"({"name":"c"})") {
  return R"({"apiVersion":"resource.k8s.io/)" + version + R"(","kind":"ResourceClaim","metadata":)" +
         metadata_json + R"(,"spec":)" + spec_json + "}";
}

/// The default policy as shipped (deploy/policy/default-policy.yaml).
inline policy::Policy DefaultPolicy() {
  auto p = policy::ParsePolicy(policy::DefaultPolicyYaml(), "default");
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? *p : policy::Policy{};
}

/// Runs the registered rule `id` alone.
inline RuleResult RunRule(const std::string& id, const admission::AdmissionRequest& req, const policy::Policy& pol) {
  static const Registry kRegistry = DefaultRegistry();
  const Rule* rule = kRegistry.Find(id);
  EXPECT_NE(rule, nullptr) << id;
  RuleInput in{req, pol, nullptr, std::chrono::system_clock::time_point{} + std::chrono::hours(24 * 365 * 56)};
  return rule->Evaluate(in);
}

/// A claim catalog of fixed contents (the server's watch cache in the rules' view): templates and
/// claims by "namespace/name", each a stored object (JSON text). `synced` false answers every
/// lookup kUnknown.
class FakeCatalog final : public dra::ClaimCatalog {
 public:
  bool synced = true;
  std::map<std::string, std::string> templates, claims;  ///< "ns/name" -> object JSON

  dra::ClaimLookup Template(std::string_view ns, std::string_view name) const override { return Find(templates, ns, name); }
  dra::ClaimLookup Claim(std::string_view ns, std::string_view name) const override { return Find(claims, ns, name); }

 private:
  dra::ClaimLookup Find(const std::map<std::string, std::string>& m, std::string_view ns, std::string_view name) const {
    dra::ClaimLookup l;
    if (!synced) {
      l.why = "not listed yet";
      return l;
    }
    auto it = m.find(std::string(ns) + "/" + std::string(name));
    if (it == m.end()) {
      l.state = dra::ClaimLookup::State::kAbsent;
      return l;
    }
    auto summary = dra::SummarizeClaimObject(Json::parse(it->second));
    EXPECT_TRUE(summary.has_value()) << it->second;
    l.state = dra::ClaimLookup::State::kFound;
    l.summary = std::make_shared<const dra::ClaimSummary>(summary.value_or(dra::ClaimSummary{}));
    return l;
  }
};

/// Runs the registered rule `id` alone, with a claim catalog.
inline RuleResult RunRuleWith(const std::string& id, const admission::AdmissionRequest& req, const policy::Policy& pol,
                              const dra::ClaimCatalog* claims) {
  static const Registry kRegistry = DefaultRegistry();
  const Rule* rule = kRegistry.Find(id);
  EXPECT_NE(rule, nullptr) << id;
  RuleInput in{req, pol, nullptr, {}};
  in.claims = claims;
  return rule->Evaluate(in);
}

/// Runs the whole engine and decides.
inline Decision Review(const admission::AdmissionRequest& req, const policy::Policy& pol,
                       std::chrono::system_clock::time_point now = {}) {
  static const Registry kRegistry = DefaultRegistry();
  RuleInput in{req, pol, nullptr, now};
  return Decide(Evaluate(in, kRegistry), pol);
}

/// Pointers of a result's findings.
inline std::vector<std::string> Pointers(const RuleResult& r) {
  std::vector<std::string> out;
  for (const auto& f : r.findings) out.push_back(f.pointer);
  return out;
}

inline bool Contains(const std::vector<std::string>& v, const std::string& s) {
  for (const auto& x : v) {
    if (x == s) return true;
  }
  return false;
}

/// The rule `id` under each action on a request it fails: deny denies with a message that
/// starts with the ID, warn warns, audit annotates, off does not run; mode audit never denies;
/// the draguard.io/exempt annotation (with a reason) skips it and is recorded.
inline void ExpectActionsAndExemption(const std::string& id, const admission::AdmissionRequest& failing,
                                      policy::Policy pol = DefaultPolicy()) {
  for (auto action : {policy::Action::kDeny, policy::Action::kWarn, policy::Action::kAudit, policy::Action::kOff}) {
    pol.rules[id].action = action;
    auto d = Review(failing, pol);
    bool denied = Contains(d.denied_rules, id), warned = Contains(d.warned_rules, id),
         audited = Contains(d.audited_rules, id);
    switch (action) {
      case policy::Action::kDeny:
        EXPECT_TRUE(denied) << id << " deny";
        ASSERT_TRUE(d.response.status.has_value());
        EXPECT_NE(d.response.status->message.find(id), std::string::npos);
        EXPECT_LE(d.response.status->message.size(), admission::kMaxDenyMessageBytes);
        break;
      case policy::Action::kWarn:
        EXPECT_TRUE(warned && !denied) << id << " warn";
        break;
      case policy::Action::kAudit:
        EXPECT_TRUE(audited && !denied && !warned) << id << " audit";
        break;
      case policy::Action::kOff:
        EXPECT_FALSE(denied || warned || audited) << id << " off";
        break;
    }
  }
  pol.rules[id].action = policy::Action::kDeny;
  pol.mode = policy::Mode::kAudit;
  auto audit = Review(failing, pol);
  EXPECT_FALSE(Contains(audit.denied_rules, id)) << id << " mode audit";
  EXPECT_TRUE(audit.response.allowed);
  pol.mode = policy::Mode::kEnforce;
  auto exempt = failing;
  exempt.object["metadata"]["annotations"]["draguard.io/exempt"] = "DG999," + id;
  exempt.object["metadata"]["annotations"]["draguard.io/exempt-reason"] = "vendor benchmark";
  // The annotation alone is ignored: only the policy grants exceptions.
  auto tenant = Review(exempt, pol);
  EXPECT_TRUE(Contains(tenant.denied_rules, id)) << id << " annotation without annotationExceptions";
  EXPECT_EQ(tenant.response.audit_annotations.count("exempt-rules"), 0u);
  // Where annotationExceptions allow it, the annotation skips the rule and is recorded.
  policy::Policy granted = pol;
  granted.annotation_exceptions = {{{failing.namespace_}, {}, {}, {id}}};
  auto d = Review(exempt, granted);
  EXPECT_FALSE(Contains(d.denied_rules, id) || Contains(d.warned_rules, id)) << id << " exempt";
  EXPECT_EQ(d.response.audit_annotations["exempt-rules"], id + " (annotation: vendor benchmark)");
  // Without a reason the exception is ignored, with a warning.
  exempt.object["metadata"]["annotations"].erase("draguard.io/exempt-reason");
  auto ignored = Review(exempt, granted);
  EXPECT_TRUE(Contains(ignored.denied_rules, id)) << id << " exception without reason";
  // A policy exception for the object's namespace skips the rule without any annotation.
  policy::Policy excepted = pol;
  policy::PolicyException ex;
  ex.name = "platform";
  ex.rules = {id};
  ex.namespaces = {failing.namespace_};
  ex.object_selector = policy::LabelSelector{};
  ex.reason = "granted";
  excepted.exceptions = {ex};
  auto p = Review(failing, excepted);
  EXPECT_FALSE(Contains(p.denied_rules, id) || Contains(p.warned_rules, id)) << id << " policy exception";
  EXPECT_EQ(p.response.audit_annotations["exempt-rules"], id + " (exception \"platform\": granted)");
}

/// One table row of a rule test.
struct Case {
  const char* name;
  std::string object;      ///< JSON text of the reviewed object
  RuleStatus want;
  std::vector<std::string> pointers;  ///< expected finding pointers (in order); empty: not checked
  std::string message_part;           ///< a substring of the first finding's message ("" = none)
};

/// Checks one row with the default policy.
inline void CheckCase(const std::string& id, const Case& c, const policy::Policy& pol = DefaultPolicy(),
                      const std::string& ns = "team-a") {
  auto r = RunRule(id, Request(c.object, ns), pol);
  EXPECT_EQ(RuleStatusName(r.status), std::string(RuleStatusName(c.want))) << c.name << ": " << r.error;
  if (!c.pointers.empty()) {
    EXPECT_EQ(Pointers(r), c.pointers) << c.name;
  }
  if (!c.message_part.empty()) {
    ASSERT_FALSE(r.findings.empty()) << c.name;
    EXPECT_NE(r.findings.front().message.find(c.message_part), std::string::npos)
        << c.name << ": " << r.findings.front().message;
  }
}

}  // namespace draguard::engine::testing
