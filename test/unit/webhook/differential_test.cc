// The fast decode (simdjson, rule fields only; the full object only for a /mutate conversion)
// against the reference decode (nlohmann_json's parser, every field): for every golden review,
// fixture manifest and webhook fuzz seed, both must answer byte-for-byte the same, as /validate
// and as /mutate, with and without a topology, so decisions, messages, warnings, audit
// annotations and patches are identical.
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "draguard/admission/codec.h"
#include "draguard/engine/registry.h"
#include "draguard/policy/policy.h"
#include "draguard/policy/store.h"
#include "draguard/topology/snapshot.h"
#include "draguard/topology/store.h"
#include "draguard/webhook/reviewer.h"
#include "draguard/yamljson/yamljson.h"

namespace draguard::webhook {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::shared_ptr<const topology::Snapshot> BundledTopology() {
  topology::ShapeInterner interner;
  std::vector<std::shared_ptr<const topology::NodeTopology>> nodes;
  for (const auto& e : topology::BundledExamples()) {
    auto parsed = topology::ParseHwlocXml(e.bytes);
    EXPECT_TRUE(parsed.ok());
    if (parsed.ok()) nodes.push_back(topology::MakeNodeTopology(std::move(*parsed), e.node, e.origin, e.version, interner));
  }
  return topology::Snapshot::Create(std::move(nodes));
}

class Differential : public ::testing::Test {
 protected:
  static admission::DecodeLimits Limits(admission::Decoder d) {
    admission::DecodeLimits l;
    l.decoder = d;
    return l;
  }
  Differential()
      : registry_(engine::DefaultRegistry()),
        fast_(registry_, Limits(admission::Decoder::kFast)),
        reference_(registry_, Limits(admission::Decoder::kReference)),
        topology_(BundledTopology()) {}

  // Reviews `body` with both decoders under `policy`, the fast one also reading the body where it
  // lies with bytes past its end that would change it if read as part of it; returns how many
  // answers were compared.
  int Compare(const std::string& body, const policy::Policy& policy, const std::string& what) {
    std::string padded = body;
    for (std::size_t i = 0; i < admission::kBodyPadding; ++i) padded.push_back("\"{[1 ,]}"[i % 8]);
    const std::string_view in_place = std::string_view(padded).substr(0, body.size());
    int n = 0;
    for (auto kind : {admission::WebhookKind::kValidating, admission::WebhookKind::kMutating}) {
      for (const topology::Snapshot* topo : {static_cast<const topology::Snapshot*>(nullptr), topology_.get()}) {
        SCOPED_TRACE(what + (kind == admission::WebhookKind::kMutating ? " /mutate" : " /validate") +
                     (topo ? " with topology" : " without topology"));
        const auto deadline = std::chrono::steady_clock::now() + kDefaultReviewTimeout;
        auto a = fast_.Review(body, kind, policy, topo, {}, deadline);
        auto b = reference_.Review(body, kind, policy, topo, {}, deadline);
        auto c = fast_.Review(in_place, kind, policy, topo, {}, deadline, admission::kBodyPadding);
        EXPECT_EQ(c.http_status, a.http_status);
        EXPECT_EQ(c.body, a.body);
        EXPECT_EQ(c.error, a.error);
        EXPECT_EQ(c.rules, a.rules);
        EXPECT_EQ(a.http_status, b.http_status);
        EXPECT_EQ(a.body, b.body);
        EXPECT_EQ(a.error, b.error);
        EXPECT_EQ(a.verdict, b.verdict);
        EXPECT_EQ(a.rules, b.rules);
        EXPECT_EQ(a.uid, b.uid);
        EXPECT_EQ(a.kind, b.kind);
        EXPECT_EQ(a.name, b.name);
        EXPECT_EQ(a.namespace_, b.namespace_);
        EXPECT_EQ(a.rule_metrics.size(), b.rule_metrics.size());
        for (std::size_t i = 0; i < std::min(a.rule_metrics.size(), b.rule_metrics.size()); ++i) {
          EXPECT_EQ(a.rule_metrics[i].rule, b.rule_metrics[i].rule);
          EXPECT_EQ(a.rule_metrics[i].action, b.rule_metrics[i].action);
          EXPECT_EQ(a.rule_metrics[i].result, b.rule_metrics[i].result);
        }
        ++n;
      }
    }
    return n;
  }

  engine::Registry registry_;
  Reviewer fast_;
  Reviewer reference_;
  std::shared_ptr<const topology::Snapshot> topology_;
};

// The policies of the golden cases (plus the default): the manifests are reviewed under each.
std::vector<policy::Policy> CasePolicies() {
  std::vector<policy::Policy> out;
  out.push_back(*policy::ParsePolicy(policy::DefaultPolicyYaml()));
  std::set<std::string> seen;
  for (const auto& f : fs::recursive_directory_iterator(fs::path(DRAGUARD_TEST_DATA) / "reviews")) {
    if (f.path().filename() != "policy.yaml") continue;
    std::string text = Slurp(f.path());
    if (!seen.insert(text).second) continue;
    policy::PolicyStore store({"draguard"});
    if (store.LoadFile(f.path().string()).ok()) out.push_back(*store.Current());
  }
  return out;
}

// Adds what the rule-fields decode leaves out (managedFields, env, args, probes...) to every
// metadata and container of `v`, so the comparison covers the trimming, not only the parser.
void Pad(json& v) {
  if (v.is_array()) {
    for (auto& e : v) Pad(e);
    return;
  }
  if (!v.is_object()) return;
  for (auto& [k, child] : v.items()) {
    if (k == "metadata" && child.is_object()) {
      child["managedFields"] = json::array({{{"manager", "kubectl"}, {"operation", "Update"},
                                             {"fieldsV1", {{"f:spec", {{"f:containers", json::object()}}}}}}});
    }
    if ((k == "containers" || k == "initContainers") && child.is_array()) {
      for (auto& c : child) {
        if (!c.is_object()) continue;
        c["env"] = json::array({{{"name", "CUDA_VISIBLE_DEVICES"}, {"value", "0"}}, {{"name", "X"}, {"value", "y"}}});
        c["args"] = json::array({"--gpus", "8", ""});
        c["command"] = json::array({"python3"});
        c["livenessProbe"] = {{"exec", {{"command", json::array({"true"})}}}};
        c["volumeMounts"] = json::array({{{"name", "data"}, {"mountPath", "/data"}}});
      }
    }
    Pad(child);
  }
}

std::string ReviewOf(const json& object, const std::string& op, const json& old_object = nullptr) {
  std::string api = object.value("apiVersion", "");
  auto slash = api.find('/');
  json review = {{"apiVersion", "admission.k8s.io/v1"},
                 {"kind", "AdmissionReview"},
                 {"request",
                  {{"uid", "d1f7c9a2-0000-4000-8000-000000000001"},
                   {"kind", {{"group", slash == std::string::npos ? "" : api.substr(0, slash)},
                             {"version", slash == std::string::npos ? api : api.substr(slash + 1)},
                             {"kind", object.value("kind", "")}}},
                   {"namespace", "ml-team"},
                   {"operation", op},
                   {"userInfo", {{"username", "alice"}, {"groups", {"system:authenticated"}}}},
                   {"object", object},
                   {"dryRun", false}}}};
  if (!old_object.is_null()) review["request"]["oldObject"] = old_object;
  return review.dump();
}

TEST_F(Differential, GoldenReviewsAnswerTheSame) {
  int compared = 0;
  for (const auto& f : fs::recursive_directory_iterator(fs::path(DRAGUARD_TEST_DATA) / "reviews")) {
    if (f.path().filename() != "request.json") continue;
    const fs::path dir = f.path().parent_path();
    policy::PolicyStore store({"draguard"});
    Status st = fs::exists(dir / "policy.yaml") ? store.LoadFile((dir / "policy.yaml").string()) : store.LoadDefault();
    ASSERT_TRUE(st.ok()) << st.ToString();
    std::string body = Slurp(f.path());
    compared += Compare(body, *store.Current(), dir.string());
    json padded = json::parse(body);
    Pad(padded);
    compared += Compare(padded.dump(), *store.Current(), dir.string() + " (padded)");
  }
  EXPECT_GE(compared, 4 * 2 * 20);
}

TEST_F(Differential, FixtureManifestsAnswerTheSame) {
  // The default policy and two others (the decode does not depend on the policy; this keeps the
  // sanitizer build's run short).
  auto policies = CasePolicies();
  if (policies.size() > 3) policies.erase(policies.begin() + 3, policies.end());
  int compared = 0;
  for (const auto& f : fs::recursive_directory_iterator(fs::path(DRAGUARD_TEST_DATA) / "manifests")) {
    auto ext = f.path().extension();
    if (ext != ".yaml" && ext != ".yml" && ext != ".json") continue;
    auto docs = yamljson::ParseDocuments(Slurp(f.path()));
    if (!docs.ok()) continue;
    for (const auto& doc : *docs) {
      if (!doc.is_object()) continue;
      json padded = doc;
      Pad(padded);
      for (const auto& p : policies) {
        compared += Compare(ReviewOf(doc, "CREATE"), p, f.path().string());
        compared += Compare(ReviewOf(padded, "CREATE"), p, f.path().string() + " (padded)");
        compared += Compare(ReviewOf(padded, "UPDATE", doc), p, f.path().string() + " (update)");
      }
    }
  }
  EXPECT_GE(compared, 100);
}

// Every envelope field (and userInfo's), set to each JSON type, null, or removed; keys given twice
// with different values; both decoders must give the same answer, accepted or refused with the
// same message. The fast decode reads the envelope from the parsed text, not from a document.
TEST_F(Differential, EnvelopeVariantsAnswerTheSame) {
  const policy::Policy policy = *policy::ParsePolicy(policy::DefaultPolicyYaml());
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "train"}, {"labels", {{"app", "train"}}}}},
              {"spec", {{"containers", {{{"name", "cuda"}, {"image", "nvidia/cuda"},
                                         {"resources", {{"limits", {{"nvidia.com/gpu", 1}}}}}}}}}}};
  Pad(pod);
  const json base = json::parse(ReviewOf(pod, "CREATE"));
  const std::vector<json> values = {nullptr, 1, -2.5, "x", "", true, false, json::array(), json::object(),
                                    json::array({"a", 2}), json::array({"a", "b"}), {{"a", json::array({"b"})}},
                                    {{"b", json::array({1})}, {"a", json::array({"c"})}}, {{"a", "b"}}, pod};
  const std::vector<std::string> fields = {
      "", "/apiVersion", "/kind", "/request", "/request/uid", "/request/kind", "/request/kind/group",
      "/request/kind/version", "/request/kind/kind", "/request/resource", "/request/resource/resource",
      "/request/subResource", "/request/requestKind", "/request/requestResource",
      "/request/requestSubResource", "/request/name", "/request/namespace", "/request/operation",
      "/request/userInfo", "/request/userInfo/username", "/request/userInfo/uid", "/request/userInfo/groups",
      "/request/userInfo/extra", "/request/object", "/request/oldObject", "/request/dryRun", "/request/options"};
  int compared = 0;
  for (const auto& field : fields) {
    const json::json_pointer ptr(field);
    for (const auto& v : values) {
      json doc = base;
      doc[ptr] = v;
      compared += Compare(doc.dump(), policy, ptr.to_string() + " = " + v.dump().substr(0, 40));
    }
    if (!ptr.empty() && base.contains(ptr)) {
      json doc = base;
      doc[ptr.parent_pointer()].erase(ptr.back());
      compared += Compare(doc.dump(), policy, ptr.to_string() + " removed");
    }
  }
  // A key given twice: nlohmann keeps the last; so must the fast decode.
  const std::string text = base.dump();
  const std::vector<std::pair<std::string, std::string>> twice = {
      {R"({"apiVersion")", R"({"apiVersion":"v0","apiVersion")"},
      {R"("request":{)", R"("request":{"uid":"first","uid":"second",)"},
      {R"("request":{)", R"("request":{"operation":"DELETE",)"},
      {R"("request":{)", R"("request":{"dryRun":true,"dryRun":false,)"},
      {R"("request":{)", R"("request":{"oldObject":{"kind":"Pod"},"oldObject":null,)"},
      {R"("request":{)", R"("request":{"object":{"kind":"Pod"},)"},
      {R"("kind":"AdmissionReview")", R"("kind":"AdmissionReview","request":null)"},
      {R"("username":"alice")", R"("username":"alice","extra":{"k":["1"],"k":["2"],"a":[3]},"groups":["g"])"},
  };
  for (const auto& [from, to] : twice) {
    std::string body = text;
    const auto at = body.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    body.replace(at, from.size(), to);
    compared += Compare(body, policy, "twice: " + to);
  }
  EXPECT_GE(compared, 4 * 27 * 15);
}

TEST_F(Differential, FuzzSeedsAnswerTheSame) {
  const auto policies = CasePolicies();
  int compared = 0;
  for (const auto& f : fs::directory_iterator(fs::path(DRAGUARD_SOURCE_DIR) / "test" / "fuzz" / "seeds" / "webhook")) {
    std::string body = Slurp(f.path());
    for (const auto& p : policies) compared += Compare(body, p, f.path().string());
  }
  EXPECT_GE(compared, 4 * 6);
}

}  // namespace
}  // namespace draguard::webhook
