// The DG001 backstop policy: its CEL compiles with the project's CEL front end, and evaluated
// with the project's CEL evaluator it rejects exactly the Pods DG001 denies, on every real
// manifest of test/data/manifests and every DG001 review fixture (with its policy), and under
// policy variations (globs, extendedResourceMapping, exemptions, rule actions).
#include "draguard/engine/backstop.h"

#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "draguard/admission/codec.h"
#include "draguard/cel/checker.h"
#include "draguard/cel/evaluator.h"
#include "draguard/engine/engine.h"
#include "draguard/engine/registry.h"
#include "draguard/policy/policy.h"
#include "draguard/yamljson/yamljson.h"

namespace draguard::engine {
namespace {

namespace fs = std::filesystem;
using admission::Json;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

cel::Value ToValue(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return cel::Value::Null();
    case Json::value_t::boolean: return cel::Value::Bool(j.get<bool>());
    case Json::value_t::number_integer: return cel::Value::Int(j.get<int64_t>());
    case Json::value_t::number_unsigned: return cel::Value::Int(static_cast<int64_t>(j.get<uint64_t>()));
    case Json::value_t::number_float: return cel::Value::Double(j.get<double>());
    case Json::value_t::string: return cel::Value::String(j.get<std::string>());
    case Json::value_t::array: {
      cel::ListValue l;
      for (const auto& x : j) l.push_back(ToValue(x));
      return cel::Value::List(std::move(l));
    }
    case Json::value_t::object: {
      cel::MapValue m;
      for (const auto& [k, v] : j.items()) m.entries.emplace_back(cel::Value::String(k), ToValue(v));
      return cel::Value::Map(std::move(m));
    }
    default: return cel::Value::Null();
  }
}

cel::Env AdmissionEnv() {
  cel::Env env;
  for (const char* v : {"object", "oldObject", "request"}) env.Declare(v, cel::Type::Of(cel::Type::Kind::kDyn));
  return env;
}

// A compiled backstop.
struct Compiled {
  Backstop b;
  std::vector<cel::CheckedExpr> conditions;
  cel::CheckedExpr validation;
};

Compiled Compile(const policy::Policy& pol) {
  auto b = MakeBackstop(pol);
  EXPECT_TRUE(b.ok()) << b.status().message();
  Compiled c{*b, {}, {}};
  for (const auto& [name, expr] : b->match_conditions) {
    auto x = cel::Compile(expr, AdmissionEnv());
    EXPECT_TRUE(x.ok()) << name << ": " << x.status().message() << "\n" << expr;
    if (x.ok()) c.conditions.push_back(*x);
  }
  auto v = cel::Compile(b->validation, AdmissionEnv());
  EXPECT_TRUE(v.ok()) << v.status().message() << "\n" << b->validation;
  if (v.ok()) c.validation = *v;
  return c;
}

// The request as the API server hands it to CEL (userInfo always present).
Json RequestJson(const admission::AdmissionRequest& r, Json raw = Json::object()) {
  if (!raw.contains("namespace")) raw["namespace"] = r.namespace_;
  if (!raw.contains("name")) raw["name"] = r.name;
  if (!raw.contains("operation")) raw["operation"] = "CREATE";
  if (!raw.contains("userInfo")) raw["userInfo"] = Json::object();
  if (!raw["userInfo"].contains("username")) raw["userInfo"]["username"] = r.user_info.username;
  return raw;
}

// True when the backstop rejects (or warns about) the Pod: every matchCondition holds and the
// validation is false. A CEL error fails the test (failurePolicy Fail would reject).
bool BackstopFires(const Compiled& c, const Json& object, const Json& request) {
  cel::Activation act;
  act.Bind("object", ToValue(object));
  act.Bind("oldObject", cel::Value::Null());
  act.Bind("request", ToValue(request));
  for (const auto& cond : c.conditions) {
    auto out = cel::Evaluate(cond.ast, act);
    EXPECT_FALSE(out.value.is_error()) << out.value.error_message();
    if (out.value.is_error() || !out.value.bool_value()) return false;
  }
  auto out = cel::Evaluate(c.validation.ast, act);
  EXPECT_FALSE(out.value.is_error()) << out.value.error_message() << "\n" << object.dump().substr(0, 400);
  return !out.value.is_error() && !out.value.bool_value();
}

bool Has(const std::vector<std::string>& v, const char* id) { return std::find(v.begin(), v.end(), id) != v.end(); }

// DG001 denies this request under `pol` in enforce mode with DG001 at deny: the set the backstop
// covers (its validationActions follow the mode and DG001's action; tested apart). Findings that
// extendedResourceMapping: warn caps at warn are not denials, so the backstop leaves them alone.
bool Dg001Fires(const admission::AdmissionRequest& req, const policy::Policy& pol) {
  policy::Policy enforce = pol;
  enforce.mode = policy::Mode::kEnforce;
  // CEL has no clock: the backstop honours a policy exception until it leaves the policy, and the
  // webhook alone ends it at its expiry.
  for (auto& ex : enforce.exceptions) ex.expires.reset();
  enforce.rules["DG001"].action = policy::Action::kDeny;
  Registry reg = DefaultRegistry();
  RuleInput in{req, enforce, nullptr, std::chrono::system_clock::now()};
  auto d = Decide(Evaluate(in, reg), enforce);
  return Has(d.denied_rules, "DG001");
}

policy::Policy DefaultPolicy() {
  auto p = policy::ParsePolicy(policy::DefaultPolicyYaml(), "default");
  EXPECT_TRUE(p.ok());
  return *p;
}

TEST(Backstop, DefaultPolicyShape) {
  auto b = MakeBackstop(DefaultPolicy());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->actions, std::vector<std::string>{"Deny"});
  EXPECT_NE(b->validation.find("k.startsWith('nvidia.com/mig-')"), std::string::npos) << b->validation;
  EXPECT_NE(b->validation.find("'deviceclass.resource.kubernetes.io/gpu.nvidia.com'"), std::string::npos);
  for (const char* f : {"object.spec.containers", "object.spec.initContainers", "object.spec.ephemeralContainers",
                        "object.spec.resources"}) {
    EXPECT_NE(b->validation.find(f), std::string::npos) << f;
  }
  auto objs = BackstopObjects(*b, "dg-backstop");
  ASSERT_EQ(objs.size(), 2u);
  EXPECT_EQ(objs[0]["kind"], "ValidatingAdmissionPolicy");
  EXPECT_EQ(objs[0]["spec"]["validations"][0]["expression"], b->validation);
  EXPECT_EQ(objs[1]["spec"]["policyName"], "dg-backstop");
  EXPECT_EQ(objs[1]["spec"]["validationActions"], Json::array({"Deny"}));
}

TEST(Backstop, ActionsFollowTheModeAndDg001) {
  auto pol = DefaultPolicy();
  pol.mode = policy::Mode::kAudit;
  EXPECT_EQ(MakeBackstop(pol)->actions, (std::vector<std::string>{"Warn", "Audit"}));
  pol.mode = policy::Mode::kEnforce;
  pol.rules["DG001"].action = policy::Action::kWarn;
  EXPECT_EQ(MakeBackstop(pol)->actions, (std::vector<std::string>{"Warn", "Audit"}));
  pol.rules["DG001"].action = policy::Action::kOff;
  EXPECT_TRUE(MakeBackstop(pol)->actions.empty());
  EXPECT_TRUE(BackstopObjects(*MakeBackstop(pol), "x").empty());
}

TEST(Backstop, RefusesCharactersTheCelCannotCarry) {
  auto pol = DefaultPolicy();
  pol.legacy_resources.push_back("nvidia.com/gpu' || true || '");
  EXPECT_FALSE(MakeBackstop(pol).ok());
  pol = DefaultPolicy();
  pol.exemptions.users.push_back("a\\b");
  EXPECT_FALSE(MakeBackstop(pol).ok());
}

TEST(Backstop, AgreesWithDg001OnEveryRealManifest) {
  const auto pol = DefaultPolicy();
  const Compiled c = Compile(pol);
  int pods = 0, denied = 0;
  for (const char* dir : {"legacy", "dra"}) {
    for (const auto& e : fs::directory_iterator(fs::path(DRAGUARD_TEST_DATA) / "manifests" / dir)) {
      if (e.path().extension() != ".yaml") continue;
      auto docs = yamljson::ParseDocuments(Slurp(e.path()));
      ASSERT_TRUE(docs.ok()) << e.path();
      for (std::size_t i = 0; i < docs->size(); ++i) {
        const Json& doc = (*docs)[i];
        if (!doc.is_object() || doc.value("kind", "") != "Pod") continue;
        admission::AdmissionRequest req = admission::CreateRequestFor(doc);
        req.uid = "manifest";
        req.user_info.username = "alice";
        const bool want = Dg001Fires(req, pol);
        EXPECT_EQ(BackstopFires(c, req.object, RequestJson(req)), want) << e.path().filename() << "#" << i;
        ++pods;
        denied += want;
      }
    }
  }
  EXPECT_GT(pods, 40);
  EXPECT_GT(denied, 15);
  EXPECT_LT(denied, pods);
}

TEST(Backstop, AgreesWithDg001OnEveryDg001Review) {
  int pods = 0, fired = 0;
  for (const auto& e : fs::directory_iterator(fs::path(DRAGUARD_TEST_DATA) / "reviews" / "DG001")) {
    const std::string body = Slurp(e.path() / "request.json");
    auto req = admission::DecodeReview(body);
    ASSERT_TRUE(req.ok()) << e.path();
    if (req->kind.kind != "Pod" || req->operation != admission::Operation::kCreate) continue;
    policy::Policy pol = DefaultPolicy();
    if (fs::exists(e.path() / "policy.yaml")) {
      auto p = policy::ParsePolicy(Slurp(e.path() / "policy.yaml"), "policy");
      ASSERT_TRUE(p.ok()) << e.path() << ": " << p.status().message();
      pol = *p;
    }
    pol.exemptions.namespaces.push_back("draguard");  // the release namespace, as serve adds it
    const Compiled c = Compile(pol);
    if (c.b.actions.empty()) continue;
    Json raw = Json::parse(body)["request"];
    const bool want = Dg001Fires(*req, pol);
    EXPECT_EQ(BackstopFires(c, req->object, RequestJson(*req, raw)), want) << e.path().filename();
    ++pods;
    fired += want;
  }
  EXPECT_GT(pods, 10);
  EXPECT_GT(fired, 5);
}

// Pods built here: policy variations the fixtures do not cover.
TEST(Backstop, AgreesWithDg001UnderPolicyVariations) {
  auto pod = [](Json limits, Json labels = Json::object(), Json annotations = Json::object(), const char* field = "containers") {
    Json spec = {{"containers", Json::array({{{"name", "main"}, {"image", "x"}}})}};
    spec[field] = Json::array({{{"name", "c"}, {"image", "cuda"}, {"resources", {{"limits", limits}}}}});
    return Json{{"apiVersion", "v1"}, {"kind", "Pod"},
                {"metadata", {{"name", "p"}, {"namespace", "team-a"}, {"labels", labels}, {"annotations", annotations}}},
                {"spec", spec}};
  };
  std::vector<Json> pods = {
      pod({{"nvidia.com/gpu", 1}}),
      pod({{"nvidia.com/gpu", "0"}}),
      pod({{"nvidia.com/gpu", "500m"}}),
      pod({{"nvidia.com/mig-1g.5gb", "1"}}, Json::object(), Json::object(), "initContainers"),
      pod({{"nvidia.com/gpumem", "4000"}}),
      pod({{"amd.com/gpu", "1"}}),
      pod({{"example.com/xpu-a1", "2"}}),
      pod({{"deviceclass.resource.kubernetes.io/gpu.nvidia.com", "1"}}),
      pod({{"cpu", "1"}}),
      pod({{"nvidia.com/gpu", "1"}}, {{"tier", "infra"}}),
      pod({{"nvidia.com/gpu", "1"}}, {{"tier", "batch"}, {"team", "ml"}}),
      pod({{"nvidia.com/gpu", "1"}}, Json::object(), {{"draguard.io/exempt", "DG003, DG001"}, {"draguard.io/exempt-reason", "lab"}}),
      pod({{"nvidia.com/gpu", "1"}}, Json::object(), {{"draguard.io/exempt", "DG001"}}),
  };
  std::vector<std::function<void(policy::Policy&)>> variations = {
      [](policy::Policy&) {},
      [](policy::Policy& p) { p.extended_resource_mapping = policy::ExtendedResourceMapping::kAllow; },
      [](policy::Policy& p) { p.extended_resource_mapping = policy::ExtendedResourceMapping::kWarn; },
      [](policy::Policy& p) { p.legacy_resources = {"amd.com/gpu", "example.com/xpu-?1", "*.com/gpu"}; },
      [](policy::Policy& p) { p.legacy_resources = {"*"}; },
      [](policy::Policy& p) { p.exemptions.namespaces = {"team-*"}; },
      [](policy::Policy& p) { p.exemptions.users = {"system:serviceaccount:ci:*"}; },
      [](policy::Policy& p) { p.exemptions.groups = {"gpu-admins"}; },
      [](policy::Policy& p) {
        policy::LabelSelector infra;
        infra.match_labels = {{"tier", "infra"}};
        policy::LabelSelector ml;
        ml.match_expressions = {{"team", "In", {"ml"}}, {"tier", "NotIn", {"infra"}}, {"gone", "DoesNotExist", {}}};
        p.exemptions.object_selectors = {infra, ml};
      },
      [](policy::Policy& p) { p.mode = policy::Mode::kAudit; },
      [](policy::Policy& p) { p.rules["DG001"].action = policy::Action::kWarn; },
      // Annotation exceptions: where the policy allows them, by namespace, requester and rule.
      [](policy::Policy& p) { p.annotation_exceptions = {{{"team-*"}, {}, {}, {}}}; },
      [](policy::Policy& p) { p.annotation_exceptions = {{{"team-a"}, {"bob"}, {}, {"DG001"}}}; },
      [](policy::Policy& p) { p.annotation_exceptions = {{{"other"}, {}, {}, {}}, {{"team-a"}, {"x"}, {"gpu-admins"}, {}}}; },
      [](policy::Policy& p) { p.annotation_exceptions = {{{"*"}, {}, {}, {"DG003"}}}; },
      // Policy exceptions: namespace, object name, labels; rules other than DG001 do not matter.
      [](policy::Policy& p) {
        policy::PolicyException ex;
        ex.name = "by-name";
        ex.rules = {"DG001"};
        ex.namespaces = {"team-a"};
        ex.object_names = {"p"};
        ex.reason = "r";
        ex.expires = policy::ParseRfc3339("2000-01-01T00:00:00Z");  // the webhook alone ends it
        ex.expires_text = "2000-01-01T00:00:00Z";
        p.exceptions = {ex};
      },
      [](policy::Policy& p) {
        policy::PolicyException ex;
        ex.name = "by-label";
        ex.rules = {"DG003", "DG001"};
        ex.namespaces = {"team-*"};
        ex.object_names = {"q", "p*"};
        ex.object_selector = policy::LabelSelector{};
        ex.object_selector->match_labels = {{"tier", "infra"}};
        ex.reason = "r";
        policy::PolicyException other = ex;
        other.name = "not-dg001";
        other.rules = {"DG003"};
        other.object_names.clear();
        other.object_selector = policy::LabelSelector{};
        p.exceptions = {other, ex};
      },
      [](policy::Policy& p) {
        policy::PolicyException ex;
        ex.name = "elsewhere";
        ex.rules = {"DG001"};
        ex.namespaces = {"team-b"};
        ex.object_selector = policy::LabelSelector{};
        ex.reason = "r";
        p.exceptions = {ex};
      },
  };
  struct Who {
    std::string user;
    std::vector<std::string> groups;
  };
  const std::vector<Who> users = {{"alice", {}}, {"system:serviceaccount:ci:runner", {"system:authenticated"}},
                                  {"bob", {"gpu-admins"}}};
  int fired = 0, total = 0;
  for (std::size_t v = 0; v < variations.size(); ++v) {
    policy::Policy pol = DefaultPolicy();
    variations[v](pol);
    const Compiled c = Compile(pol);
    for (std::size_t i = 0; i < pods.size(); ++i) {
      for (const auto& who : users) {
        admission::AdmissionRequest req = admission::CreateRequestFor(pods[i]);
        req.uid = "u";
        req.user_info.username = who.user;
        req.user_info.groups = who.groups;
        Json raw = {{"userInfo", {{"username", who.user}, {"groups", who.groups}}}};
        const bool want = Dg001Fires(req, pol);
        EXPECT_EQ(BackstopFires(c, req.object, RequestJson(req, raw)), want)
            << "variation " << v << ", pod " << i << ", user " << who.user;
        fired += want;
        ++total;
      }
    }
  }
  EXPECT_GT(fired, total / 4);
  EXPECT_LT(fired, total);
}

}  // namespace
}  // namespace draguard::engine
