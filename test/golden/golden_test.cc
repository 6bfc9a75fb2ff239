// Golden AdmissionReview fixtures: test/data/reviews/<rule>/<case>/ holds request.json,
// expected.json (the exact response), and optionally policy.yaml, a file named "mutate"
// (answer as the mutating webhook) and a file named "topology" (the topology model: one node per
// line, "<node> <export> [<NVLink clique>]" or "<export>", exports named relative to test/data/hwloc/;
// the node name defaults to the export's name without ".xml"; a clique, which the exporter reads
// from NVML and no export here records, is given per node). Every case is decoded, evaluated, decided and encoded as the
// server does, at the review time kReviewTime, and the response must equal expected.json field for field.
#include <unistd.h>

#include <filesystem>
#include <map>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "draguard/engine/registry.h"
#include "draguard/policy/store.h"
#include "draguard/topology/snapshot.h"
#include "draguard/webhook/reviewer.h"

namespace draguard {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<fs::path> Cases() {
  std::vector<fs::path> out;
  fs::path root = fs::path(DRAGUARD_TEST_DATA) / "reviews";
  for (const auto& rule : fs::directory_iterator(root)) {
    if (!rule.is_directory()) continue;
    for (const auto& c : fs::directory_iterator(rule.path())) {
      if (fs::exists(c.path() / "request.json")) out.push_back(c.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The topology model named by `dir`/topology, or null when the case has none.
std::shared_ptr<const topology::Snapshot> CaseTopology(const fs::path& dir) {
  if (!fs::exists(dir / "topology")) return nullptr;
  // ctest runs each case in its own process, in parallel: the directory is unique per process and case.
  static int n = 0;
  fs::path tmp = fs::path(::testing::TempDir()) /
                 ("golden-topology-" + std::to_string(::getpid()) + "-" + std::to_string(n++) + "-" +
                  dir.parent_path().filename().string() + "-" + dir.filename().string());
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  std::istringstream lines(Slurp(dir / "topology"));
  std::string line;
  std::map<std::string, std::string> cliques;  // node -> clique
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string a, b, c;
    if (!(words >> a) || a[0] == '#') continue;
    std::string file = (words >> b) ? b : a;
    std::string node = b.empty() ? fs::path(a).stem().string() : a;
    if (words >> c) cliques[node] = c;
    fs::copy_file(fs::path(DRAGUARD_TEST_DATA) / "hwloc" / file, tmp / (node + ".xml"),
                  fs::copy_options::overwrite_existing);
  }
  auto snap = topology::LoadSnapshot(tmp.string());
  fs::remove_all(tmp);
  EXPECT_TRUE(snap.ok()) << snap.status().ToString();
  if (!snap.ok()) return nullptr;
  if (cliques.empty()) return *snap;
  std::vector<std::shared_ptr<const topology::NodeTopology>> nodes;
  for (const auto& n : (*snap)->nodes()) {
    auto copy = std::make_shared<topology::NodeTopology>(*n);
    if (auto it = cliques.find(n->name); it != cliques.end()) copy->nvlink_clique = it->second;
    nodes.push_back(std::move(copy));
  }
  return topology::Snapshot::Create(std::move(nodes), (*snap)->generation());
}

// The review time of every case (exception expiries are compared with it).
const std::chrono::system_clock::time_point kReviewTime = *policy::ParseRfc3339("2026-06-01T00:00:00Z");

class Golden : public ::testing::TestWithParam<fs::path> {};

TEST_P(Golden, ResponseMatchesExpected) {
  const fs::path dir = GetParam();
  policy::PolicyStore store({"draguard"});
  Status st = fs::exists(dir / "policy.yaml") ? store.LoadFile((dir / "policy.yaml").string())
                                              : store.LoadDefault();
  ASSERT_TRUE(st.ok()) << st.ToString();
  engine::Registry registry = engine::DefaultRegistry();
  webhook::Reviewer reviewer(registry);
  auto kind = fs::exists(dir / "mutate") ? admission::WebhookKind::kMutating
                                         : admission::WebhookKind::kValidating;
  auto topo = CaseTopology(dir);
  auto out = reviewer.Review(Slurp(dir / "request.json"), kind, *store.Current(), topo.get(),
                             kReviewTime,
                             std::chrono::steady_clock::now() + webhook::kDefaultReviewTimeout);
  ASSERT_EQ(out.http_status, 200) << out.error;
  auto got = nlohmann::json::parse(out.body);
  auto want = nlohmann::json::parse(Slurp(dir / "expected.json"));
  EXPECT_EQ(got, want) << "got:\n" << got.dump(2) << "\nwant:\n" << want.dump(2);
  // Invariants of every validating response.
  auto req = nlohmann::json::parse(Slurp(dir / "request.json"));
  EXPECT_EQ(got["response"]["uid"], req["request"]["uid"]);
  EXPECT_EQ(got["apiVersion"], req["apiVersion"]);
  if (kind == admission::WebhookKind::kValidating) {
    EXPECT_FALSE(got["response"].contains("patch"));
  }
}

INSTANTIATE_TEST_SUITE_P(Reviews, Golden, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<fs::path>& i) {
                           std::string name = i.param.parent_path().filename().string() + "_" +
                                              i.param.filename().string();
                           for (auto& ch : name) {
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

TEST(GoldenCorpus, HasCases) { EXPECT_GE(Cases().size(), 10u); }

// Every registered rule is documented in docs/rules.md and has at least one denying fixture.
TEST(GoldenCorpus, EveryRuleIsDocumentedAndHasADenyingFixture) {
  std::string doc = Slurp(fs::path(DRAGUARD_SOURCE_DIR) / "docs" / "rules.md");
  engine::Registry registry = engine::DefaultRegistry();
  ASSERT_FALSE(registry.rules().empty());
  for (const auto& rule : registry.rules()) {
    std::string id(rule->id());
    std::string heading = "## " + id + " " + std::string(rule->name());
    EXPECT_NE(doc.find(heading), std::string::npos) << "docs/rules.md lacks \"" << heading << "\"";
    bool denying = false;
    fs::path dir = fs::path(DRAGUARD_TEST_DATA) / "reviews" / id;
    if (fs::exists(dir)) {
      for (const auto& c : fs::directory_iterator(dir)) {
        auto want = nlohmann::json::parse(Slurp(c.path() / "expected.json"), nullptr, false);
        if (want.is_discarded()) continue;
        auto msg = want["response"].value("status", nlohmann::json::object()).value("message", "");
        if (want["response"]["allowed"] == false && msg.rfind(id, 0) == 0) denying = true;
      }
    }
    EXPECT_TRUE(denying) << id << " has no denying fixture in " << dir;
  }
}

}  // namespace
}  // namespace draguard
