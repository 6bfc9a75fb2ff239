// Request content cannot mint metric series or blow up logs and error bodies: the kind label
// comes from a closed set, logged facts are capped, an oversized uid is a 400 and an oversized
// operation is not echoed in full.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "draguard/admission/codec.h"
#include "draguard/engine/registry.h"
#include "draguard/policy/policy.h"
#include "draguard/truncate.h"
#include "draguard/webhook/reviewer.h"

namespace draguard::webhook {
namespace {

using Json = nlohmann::json;

const engine::Registry& Rules() {
  static const engine::Registry registry = engine::DefaultRegistry();
  return registry;
}

Json Request(const std::string& group, const std::string& kind) {
  return {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
          {"kind", {{"group", group}, {"version", "v1"}, {"kind", kind}}},
          {"resource", {{"group", group}, {"version", "v1"}, {"resource", "things"}}},
          {"namespace", "team-a"},
          {"name", "x"},
          {"operation", "CREATE"},
          {"userInfo", {{"username", "alice"}}},
          {"object", {{"apiVersion", "v1"}, {"kind", kind}, {"metadata", {{"name", "x"}}}}}};
}

std::string Body(const Json& request) {
  return Json{{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"request", request}}.dump();
}

policy::Policy DefaultPolicy() {
  auto p = policy::ParsePolicy(policy::DefaultPolicyYaml());
  EXPECT_TRUE(p.ok());
  return p.ok() ? *p : policy::Policy{};
}

ReviewOutcome Validate(const std::string& body, const policy::Policy& pol) {
  Reviewer reviewer(Rules());
  return reviewer.Review(body, admission::WebhookKind::kValidating, pol, nullptr, std::chrono::system_clock::now(),
                         std::chrono::steady_clock::now() + kDefaultReviewTimeout);
}

// Every golden review of a claim or claim template is recognised as one that may evaluate CEL
// (and so is never reviewed on an IO thread); the Pods among them are not.
TEST(MayEvaluateCel, HoldsForEveryClaimReviewAndNoPodReview) {
  int claims = 0, pods = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(std::string(DRAGUARD_TEST_DATA) + "/reviews")) {
    if (e.path().filename() != "request.json") continue;
    std::ifstream in(e.path());
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string body = ss.str();
    auto req = admission::DecodeReview(body);
    if (!req.ok()) continue;
    if (req->kind.kind == "ResourceClaim" || req->kind.kind == "ResourceClaimTemplate") {
      EXPECT_TRUE(MayEvaluateCel(body)) << e.path();
      ++claims;
    } else if (req->kind.kind == "Pod" && body.find("ResourceClaim") == std::string::npos) {
      EXPECT_FALSE(MayEvaluateCel(body)) << e.path();
      ++pods;
    }
  }
  EXPECT_GT(claims, 5);
  EXPECT_GT(pods, 5);
  // Compact JSON, as the API server writes it.
  EXPECT_TRUE(MayEvaluateCel(R"({"request":{"kind":{"group":"resource.k8s.io","version":"v1","kind":"ResourceClaim"}}})"));
  EXPECT_FALSE(MayEvaluateCel(R"({"request":{"kind":{"group":"","version":"v1","kind":"Pod"}}})"));
}

// The capital-first scan and its memmem fallback (after 64 capitals that start no match) answer
// as a plain search for `"ResourceClaim` does, wherever the match and the false starts are.
TEST(MayEvaluateCel, AgreesWithAPlainSearchPastManyFalseStarts) {
  const std::vector<std::string> fillers = {"R", "Resource", "xResourceClaim", "ResourceClai", "\"Resourc", "abc"};
  for (const auto& filler : fillers) {
    for (int count : {0, 1, 63, 64, 65, 200}) {
      std::string noise;
      for (int i = 0; i < count; ++i) noise += filler;
      for (const std::string& tail : {std::string(), std::string("\"ResourceClaim"), std::string("\"ResourceClaimTemplate\"}"),
                                      std::string("ResourceClaim"), std::string("\"ResourceClai")}) {
        for (const std::string& body : {noise + tail, tail + noise, "{" + noise + tail + noise + "}"}) {
          EXPECT_EQ(MayEvaluateCel(body), body.find("\"ResourceClaim") != std::string::npos)
              << filler << " x" << count << " + " << tail;
        }
      }
    }
  }
}

TEST(ReviewerBounds, KindLabelComesFromAClosedSet) {
  const policy::Policy pol = DefaultPolicy();
  EXPECT_EQ(Validate(Body(Request("", "Pod")), pol).kind_label, "Pod");
  EXPECT_EQ(Validate(Body(Request("apps", "Deployment")), pol).kind_label, "Deployment");
  EXPECT_EQ(Validate(Body(Request("resource.k8s.io", "ResourceClaim")), pol).kind_label, "ResourceClaim");
  ASSERT_FALSE(pol.custom_resources.empty());
  const auto& cr = pol.custom_resources.front();
  EXPECT_EQ(Validate(Body(Request(cr.group, cr.kind)), pol).kind_label, cr.kind);
  // Invented kinds, or a known kind in the wrong group, are all "other".
  for (int i = 0; i < 50; ++i) {
    auto out = Validate(Body(Request("", "Kind" + std::to_string(i))), pol);
    EXPECT_EQ(out.http_status, 200) << out.body;
    EXPECT_EQ(out.kind_label, "other");
    EXPECT_EQ(out.kind, "Kind" + std::to_string(i));  // the log keeps the real (capped) kind
  }
  EXPECT_EQ(Validate(Body(Request("evil.example", "Deployment")), pol).kind_label, "other");
}

TEST(ReviewerBounds, LoggedFactsAreCapped) {
  const policy::Policy pol = DefaultPolicy();
  Json req = Request("", "Pod");
  const std::string huge(1 << 20, 'n');
  req["name"] = huge;
  req["namespace"] = huge;
  req["userInfo"]["username"] = huge;
  req["kind"]["kind"] = huge;
  auto out = Validate(Body(req), pol);
  for (const std::string* field : {&out.name, &out.namespace_, &out.user, &out.kind}) {
    EXPECT_LT(field->size(), kMaxEchoBytes + 32);
    EXPECT_NE(field->find("more bytes]"), std::string::npos);
  }
  EXPECT_EQ(out.kind_label, "other");
}

TEST(ReviewerBounds, AUidLongerThanAnyKubernetesUidIsA400) {
  const policy::Policy pol = DefaultPolicy();
  Json req = Request("", "Pod");
  req["uid"] = std::string(admission::kMaxUidBytes, 'u');
  EXPECT_EQ(Validate(Body(req), pol).http_status, 200);
  req["uid"] = std::string(1 << 20, 'u');
  auto out = Validate(Body(req), pol);
  EXPECT_EQ(out.http_status, 400);
  EXPECT_NE(out.body.find("request.uid is 1048576 bytes long; a Kubernetes uid has at most 128"), std::string::npos)
      << out.body.substr(0, 300);
  EXPECT_LT(out.body.size(), 1024u);
  EXPECT_TRUE(out.uid.empty());
}

TEST(ReviewerBounds, AHugeOperationIsNotEchoedInFull) {
  const policy::Policy pol = DefaultPolicy();
  Json req = Request("", "Pod");
  req["operation"] = std::string(100 * 1024, 'O');
  auto out = Validate(Body(req), pol);
  EXPECT_EQ(out.http_status, 400);
  EXPECT_NE(out.body.find("is not one of CREATE, UPDATE, DELETE, CONNECT"), std::string::npos);
  EXPECT_LT(out.body.size(), 2048u);
  EXPECT_LT(out.error.size(), 1100u);
}

TEST(ReviewerBounds, HttpErrorMessagesAreCapped) {
  const std::string body = admission::EncodeHttpError(400, std::string(100 * 1024, 'm'));
  EXPECT_LT(body.size(), 2 * 4096u + 512u);
}

TEST(Truncate, KeepsShortTextAndCutsLongTextOnACharacterBoundary) {
  EXPECT_EQ(Truncate("abc", 3), "abc");
  EXPECT_EQ(Truncate("abcdef", 3), "abc...[3 more bytes]");
  // "é" is two bytes: a cut inside it backs up before it.
  EXPECT_EQ(Truncate("ab\xC3\xA9z", 3), "ab...[3 more bytes]");
}

}  // namespace
}  // namespace draguard::webhook
