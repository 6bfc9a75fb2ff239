// The judge agrees with the webhook: on the golden AdmissionReview fixtures and on every audited
// document of test/data/manifests/, JudgeObject gives the decision that the encoded reviews give
// when /mutate and then /validate answer them (as the API server chains the two), and the
// recorded table of manifest outcomes.
#include "draguard/audit/judge.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "draguard/audit/reader.h"
#include "draguard/base64.h"
#include "draguard/engine/registry.h"
#include "draguard/policy/store.h"
#include "draguard/topology/snapshot.h"

namespace draguard::audit {
namespace {

namespace fs = std::filesystem;
using admission::Json;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Chain {
  bool denied = false;
  std::set<std::string> rules;  // denied, warned or audited by /mutate or /validate
  engine::Verdict validate = engine::Verdict::kAllow;
};

// The webhook's answer through encoded reviews: /mutate (Pods), the patch applied, then /validate.
Chain ThroughReviews(Json review, const webhook::Reviewer& reviewer, const policy::Policy& pol,
                     const topology::Snapshot* topo) {
  Chain c;
  const auto deadline = std::chrono::steady_clock::now() + webhook::kDefaultReviewTimeout;
  Json& req = review["request"];
  if (req["kind"].value("group", "") == "" && req["kind"].value("kind", "") == "Pod") {
    auto m = reviewer.Review(review.dump(), admission::WebhookKind::kMutating, pol, topo, {}, deadline);
    EXPECT_EQ(m.http_status, 200) << m.error;
    c.rules.insert(m.rules.begin(), m.rules.end());
    if (m.verdict == engine::Verdict::kDeny) {
      c.denied = true;
      return c;
    }
    Json resp = Json::parse(m.body)["response"];
    if (resp.contains("patch")) {
      auto raw = Base64Decode(resp["patch"].get<std::string>());
      EXPECT_TRUE(raw.ok());
      req["object"] = req["object"].patch(Json::parse(*raw));
    }
  }
  auto v = reviewer.Review(review.dump(), admission::WebhookKind::kValidating, pol, topo, {}, deadline);
  EXPECT_EQ(v.http_status, 200) << v.error;
  c.rules.insert(v.rules.begin(), v.rules.end());
  c.denied = c.denied || v.verdict == engine::Verdict::kDeny;
  c.validate = v.verdict;
  return c;
}

Json ReviewFor(const Json& object, const std::string& ns) {
  const std::string api = object.value("apiVersion", "");
  const auto slash = api.find('/');
  Json kind = {{"group", slash == std::string::npos ? "" : api.substr(0, slash)},
               {"version", slash == std::string::npos ? api : api.substr(slash + 1)},
               {"kind", object.value("kind", "")}};
  std::string name = object.contains("metadata") ? object["metadata"].value("name", "") : "";
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request",
           {{"uid", "u-1"},
            {"kind", kind},
            {"resource", {{"group", kind["group"]}, {"version", kind["version"]}, {"resource", "things"}}},
            {"name", name},
            {"namespace", ns},
            {"operation", "CREATE"},
            {"userInfo", {{"username", "audit-test"}}},
            {"object", object}}}};
}

std::set<std::string> FindingRules(const ObjectVerdict& v) {
  std::set<std::string> out;
  for (const auto& f : v.findings) {
    if (f.action != "error") out.insert(f.rule);
  }
  return out;
}

std::string Ids(const ObjectVerdict& v, const std::string& action) {
  std::set<std::string> ids;
  for (const auto& f : v.findings) {
    if (f.action == action) ids.insert(f.rule);
  }
  std::string out;
  for (const auto& id : ids) out += (out.empty() ? "" : ",") + id;
  return out.empty() ? "-" : out;
}

std::shared_ptr<const topology::Snapshot> CaseTopology(const fs::path& dir) {
  if (!fs::exists(dir / "topology")) return nullptr;
  fs::path tmp = fs::path(::testing::TempDir()) / ("audit-judge-topology-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  std::istringstream lines(Slurp(dir / "topology"));
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string a, b;
    if (!(words >> a) || a[0] == '#') continue;
    std::string file = (words >> b) ? b : a;
    std::string node = b.empty() ? fs::path(a).stem().string() : a;
    fs::copy_file(fs::path(DRAGUARD_TEST_DATA) / "hwloc" / file, tmp / (node + ".xml"),
                  fs::copy_options::overwrite_existing);
  }
  auto snap = topology::LoadSnapshot(tmp.string());
  fs::remove_all(tmp);
  return snap.ok() ? *snap : nullptr;
}

TEST(Judge, AgreesWithTheWebhookOnTheGoldenFixtures) {
  engine::Registry registry = engine::DefaultRegistry();
  webhook::Reviewer reviewer(registry);
  std::size_t judged = 0;
  for (const auto& rule : fs::directory_iterator(fs::path(DRAGUARD_TEST_DATA) / "reviews")) {
    for (const auto& c : fs::directory_iterator(rule.path())) {
      const fs::path dir = c.path();
      if (!fs::exists(dir / "request.json")) continue;
      Json review = Json::parse(Slurp(dir / "request.json"), nullptr, false);
      if (review.is_discarded() || !review.contains("request")) continue;
      Json& req = review["request"];
      if (req.value("operation", "") != "CREATE" || !req.contains("object") || !req["object"].is_object()) continue;
      const Json& object = req["object"];
      if (!IsAudited(req["kind"].value("group", ""), req["kind"].value("kind", ""), policy::Policy{})) continue;
      // The audit knows no requesting user: neither does the reference review.
      req["userInfo"] = {{"username", "audit-test"}};
      req.erase("dryRun");
      policy::PolicyStore store({"draguard"});
      ASSERT_TRUE((fs::exists(dir / "policy.yaml") ? store.LoadFile((dir / "policy.yaml").string())
                                                   : store.LoadDefault())
                      .ok());
      auto pol = store.Current();
      auto topo = CaseTopology(dir);
      Chain want = ThroughReviews(review, reviewer, *pol, topo.get());
      JudgeContext ctx{reviewer, registry, *pol, topo.get(), {}, req.value("namespace", "default")};
      Json obj = object;
      if (obj.contains("metadata") && obj["metadata"].is_object()) obj["metadata"]["namespace"] = ctx.default_namespace;
      ObjectVerdict got = JudgeObject(obj, ctx);
      EXPECT_EQ(got.verdict == engine::Verdict::kDeny, want.denied) << dir;
      EXPECT_EQ(FindingRules(got), want.rules) << dir;
      ++judged;
    }
  }
  EXPECT_GE(judged, 40u);
}

TEST(Judge, AgreesWithTheWebhookAndTheRecordedOutcomesOnTheManifests) {
  engine::Registry registry = engine::DefaultRegistry();
  webhook::Reviewer reviewer(registry);
  policy::PolicyStore store;
  ASSERT_TRUE(store.LoadDefault().ok());
  auto pol = store.Current();
  // The recorded /validate outcome of each document (test/data/manifests/expected-outcomes.tsv).
  std::map<std::string, std::vector<std::string>> table;
  std::istringstream tsv(Slurp(fs::path(DRAGUARD_TEST_DATA) / "manifests" / "expected-outcomes.tsv"));
  for (std::string line; std::getline(tsv, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::vector<std::string> cols;
    for (std::string col; std::getline(ls, col, '\t');) cols.push_back(col);
    table[cols[0]] = cols;
  }
  JudgeContext ctx{reviewer, registry, *pol, nullptr, {}, "default"};
  std::size_t judged = 0, against_table = 0;
  for (const char* sub : {"legacy", "dra"}) {
    const fs::path root = fs::path(DRAGUARD_TEST_DATA) / "manifests" / sub;
    ASSERT_TRUE(ReadPath(root.string(), [&](Document&& d) {
                  EXPECT_TRUE(d.error.empty()) << d.Where() << ": " << d.error;
                  const Json& o = d.object;
                  const std::string api = o.value("apiVersion", "");
                  const std::string group = api.find('/') == std::string::npos ? "" : api.substr(0, api.find('/'));
                  if (!IsAudited(group, o.value("kind", ""), *pol)) return true;
                  std::string ns = o.contains("metadata") ? o["metadata"].value("namespace", "default") : "default";
                  Chain want = ThroughReviews(ReviewFor(o, ns), reviewer, *pol, nullptr);
                  ObjectVerdict got = JudgeObject(o, ctx);
                  EXPECT_EQ(got.verdict == engine::Verdict::kDeny, want.denied) << d.Where();
                  EXPECT_EQ(FindingRules(got), want.rules) << d.Where();
                  ++judged;
                  // The table records /validate alone: it applies wherever /mutate changes nothing.
                  const std::string key = std::string(sub) + "/" + fs::path(d.source).filename().string() + "#" +
                                          std::to_string(d.index);
                  auto row = table.find(key);
                  EXPECT_NE(row, table.end()) << key;
                  if (row != table.end() && got.mutation == MutationOutcome::kNone) {
                    EXPECT_EQ(row->second[1], got.kind) << key;
                    EXPECT_EQ(row->second[2], engine::VerdictName(got.verdict)) << key;
                    EXPECT_EQ(row->second[3], Ids(got, "deny")) << key;
                    EXPECT_EQ(row->second[4], Ids(got, "warn")) << key;
                    ++against_table;
                  }
                  return true;
                }).ok());
  }
  EXPECT_GE(judged, 100u);
  EXPECT_GE(against_table, 40u);
}

TEST(Judge, AConvertiblePodIsConvertedAndNotDenied) {
  engine::Registry registry = engine::DefaultRegistry();
  webhook::Reviewer reviewer(registry);
  policy::PolicyStore store;
  ASSERT_TRUE(store.LoadDefault().ok());
  auto pol = store.Current();
  JudgeContext ctx{reviewer, registry, *pol, nullptr, {}, "ml"};
  Json pod = Json::parse(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"train"},
    "spec":{"containers":[{"name":"c","image":"x","resources":{"limits":{"nvidia.com/gpu":"1"}}}]}})");
  ObjectVerdict v = JudgeObject(pod, ctx);
  EXPECT_EQ(v.mutation, MutationOutcome::kConverted);
  EXPECT_NE(v.verdict, engine::Verdict::kDeny);
  EXPECT_EQ(v.namespace_, "ml");

  // With mutation off the same Pod is denied by DG001, with a field path.
  policy::Policy off = *pol;
  off.mutation.enabled = false;
  off.fingerprint.clear();
  JudgeContext ctx_off{reviewer, registry, off, nullptr, {}, "ml"};
  ObjectVerdict d = JudgeObject(pod, ctx_off);
  EXPECT_EQ(d.verdict, engine::Verdict::kDeny);
  ASSERT_FALSE(d.findings.empty());
  EXPECT_EQ(d.findings.front().rule, "DG001");
  EXPECT_EQ(d.findings.front().action, "deny");
  EXPECT_EQ(d.findings.front().path.rfind("/spec/containers/0", 0), 0u) << d.findings.front().path;
  EXPECT_EQ(d.mutation, MutationOutcome::kNone);

  // In an exempt namespace nothing is judged.
  JudgeContext ctx_exempt{reviewer, registry, *pol, nullptr, {}, "kube-system"};
  ObjectVerdict e = JudgeObject(pod, ctx_exempt);
  EXPECT_EQ(e.verdict, engine::Verdict::kExempt);
  EXPECT_TRUE(e.findings.empty());
}

// kube-scheduler's claim for a Pod's extended resources (KEP-5004) is the Pod's request, judged
// with the Pod: an audit of a real cluster must not report it as a claim without a memory floor.
// A stored claim records no creator: the proof is the Pod's status, which names the claim.
TEST(Judge, TheSchedulersExtendedResourceClaimIsJudgedWithItsPod) {
  engine::Registry registry = engine::DefaultRegistry();
  webhook::Reviewer reviewer(registry);
  policy::PolicyStore store;
  ASSERT_TRUE(store.LoadDefault().ok());
  SchedulerClaimIndex index;
  JudgeContext ctx{reviewer, registry, *store.Current(), nullptr, {}, "ml"};
  ctx.scheduler_claims = &index;
  const Json claim = Json::parse(R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim",
    "metadata":{"name":"train-extended-resources-l5d74","namespace":"ml",
      "annotations":{"resource.kubernetes.io/extended-resource-claim":"true"},
      "ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"train","uid":"u","controller":true}]},
    "spec":{"devices":{"requests":[{"name":"container-0-request-0",
      "exactly":{"deviceClassName":"gpu.nvidia.com","allocationMode":"ExactCount","count":1}}]}}})");
  auto pod = [](const std::string& name, const std::string& claim_name) {
    Json p = {{"apiVersion", "v1"}, {"kind", "Pod"},
              {"metadata", {{"name", name}, {"namespace", "ml"}}},
              {"spec", {{"containers", Json::array({{{"name", "c"}, {"image", "i"}}})}}}};
    if (!claim_name.empty()) {
      p["status"]["extendedResourceClaimStatus"] = {
          {"resourceClaimName", claim_name},
          {"requestMappings", Json::array({{{"containerName", "c"}, {"resourceName", "nvidia.com/gpu"},
                                            {"requestName", "container-0-request-0"}}})}};
    }
    return p;
  };

  // Its Pod not seen yet (a dump that lists claims first): not verified, not reported as failing.
  ObjectVerdict early = JudgeObject(claim, ctx);
  EXPECT_EQ(early.verdict, engine::Verdict::kExempt);
  EXPECT_NE(early.exemption.find("not verified"), std::string::npos) << early.exemption;

  // The Pod names the claim in its status: the scheduler made it.
  JudgeObject(pod("train", "train-extended-resources-l5d74"), ctx);
  ObjectVerdict v = JudgeObject(claim, ctx);
  EXPECT_EQ(v.verdict, engine::Verdict::kExempt);
  EXPECT_TRUE(v.findings.empty());
  EXPECT_NE(v.exemption.find("kube-scheduler made"), std::string::npos) << v.exemption;

  // A Pod that names another claim: this one only carries the annotation, and is judged.
  Json forged = claim;
  forged["metadata"]["name"] = "forged";
  ObjectVerdict f = JudgeObject(forged, ctx);
  EXPECT_EQ(f.verdict, engine::Verdict::kDeny);
  ASSERT_FALSE(f.findings.empty());
  EXPECT_EQ(f.findings.front().rule, "DG003");
  // So is one whose controller is a Pod without an extended-resource claim, or no Pod at all.
  JudgeObject(pod("plain", ""), ctx);
  Json other = claim;
  other["metadata"]["ownerReferences"][0]["name"] = "plain";
  EXPECT_EQ(JudgeObject(other, ctx).verdict, engine::Verdict::kDeny);
  other["metadata"].erase("ownerReferences");
  EXPECT_EQ(JudgeObject(other, ctx).verdict, engine::Verdict::kDeny);
  // Without the index (no proof at all), the annotation changes nothing.
  JudgeContext blind{reviewer, registry, *store.Current(), nullptr, {}, "ml"};
  EXPECT_EQ(JudgeObject(claim, blind).verdict, engine::Verdict::kDeny);

  // The same claim without the annotation is judged (DG003: no memory floor).
  Json plain = claim;
  plain["metadata"].erase("annotations");
  ObjectVerdict u = JudgeObject(plain, ctx);
  EXPECT_EQ(u.verdict, engine::Verdict::kDeny);
  ASSERT_FALSE(u.findings.empty());
  EXPECT_EQ(u.findings.front().rule, "DG003");
  EXPECT_EQ(index.size(), 2u);
}

TEST(Judge, AuditedKindsCoverTheWebhookRulesAndThePolicyResources) {
  policy::Policy pol;
  EXPECT_TRUE(IsAudited("", "Pod", pol));
  EXPECT_TRUE(IsAudited("batch", "CronJob", pol));
  EXPECT_TRUE(IsAudited("resource.k8s.io", "ResourceClaimTemplate", pol));
  EXPECT_TRUE(IsAudited("kubeflow.org", "PyTorchJob", pol));
  EXPECT_FALSE(IsAudited("", "Service", pol));
  EXPECT_FALSE(IsAudited("apps", "Pod", pol));
  auto kinds = AuditedKinds(pol);
  ASSERT_GE(kinds.size(), 11u + pol.custom_resources.size() - 1);
  EXPECT_EQ(kinds.front().resource, "pods");
  bool pytorch = false;
  for (const auto& k : kinds) pytorch = pytorch || (k.kind == "PyTorchJob" && k.resource == "pytorchjobs" && k.version.empty());
  EXPECT_TRUE(pytorch);
}

}  // namespace
}  // namespace draguard::audit
