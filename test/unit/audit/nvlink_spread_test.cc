// The running multi-node jobs whose GPU Pods span NVLink cliques: counted per job unit and clique
// from bound Pods, reported as a DG017 finding on the job, with the policy's action.
#include "draguard/audit/nvlink_spread.h"

#include <gtest/gtest.h>

#include "draguard/audit/report.h"
#include "draguard/topology/snapshot.h"

namespace draguard::audit {
namespace {

using admission::Json;

const std::string kA = "6f1c2e3a-0b4d-4c5e-8f9a-1b2c3d4e5f60.1";
const std::string kB = "6f1c2e3a-0b4d-4c5e-8f9a-1b2c3d4e5f60.2";

// rack-a-0..1 in clique A, rack-b-0..1 in clique B, "plain" in none.
std::shared_ptr<const topology::Snapshot> Racks() {
  std::vector<std::shared_ptr<const topology::NodeTopology>> nodes;
  auto shape = std::make_shared<const topology::Shape>();
  for (const auto& [name, clique] : std::vector<std::pair<std::string, std::string>>{
           {"rack-a-0", kA}, {"rack-a-1", kA}, {"rack-b-0", kB}, {"rack-b-1", kB}, {"plain", ""}}) {
    auto n = std::make_shared<topology::NodeTopology>();
    n->name = name;
    n->nvlink_clique = clique;
    n->shape = shape;
    nodes.push_back(std::move(n));
  }
  return topology::Snapshot::Create(std::move(nodes));
}

// A bound Pod of LeaderWorkerSet `lws`, group `group`, on `node`, with 4 legacy GPUs (or none).
Json Pod(const std::string& name, const std::string& lws, const std::string& group, const std::string& node,
         bool gpus = true) {
  Json p = {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata",
             {{"name", name},
              {"namespace", "team-a"},
              {"labels", {{"leaderworkerset.sigs.k8s.io/name", lws}, {"leaderworkerset.sigs.k8s.io/group-index", group}}},
              {"annotations", {{"leaderworkerset.sigs.k8s.io/size", "2"}}}}},
            {"spec", {{"nodeName", node}, {"containers", {{{"name", "w"}}}}}}};
  if (gpus) p["spec"]["containers"][0]["resources"] = {{"limits", {{"nvidia.com/gpu", 4}}}};
  return p;
}

TEST(NvlinkSpread, ReportsUnitsWhosePodsSpanCliques) {
  auto snap = Racks();
  policy::Policy pol;
  NvlinkSpread spread(snap.get(), pol);
  spread.AddPod(Pod("llm-0", "llm", "0", "rack-a-0"));
  spread.AddPod(Pod("llm-0-1", "llm", "0", "rack-b-0"));  // group 0 spans A and B
  spread.AddPod(Pod("llm-1", "llm", "1", "rack-a-1"));
  spread.AddPod(Pod("llm-1-1", "llm", "1", "rack-a-0"));  // group 1 stays in A
  spread.AddPod(Pod("x-0", "x", "0", "rack-a-0"));
  spread.AddPod(Pod("x-0-1", "x", "0", "plain"));             // a node without a clique: not counted
  spread.AddPod(Pod("y-0", "y", "0", "rack-a-0"));
  spread.AddPod(Pod("y-0-1", "y", "0", "rack-b-1", false));   // no GPUs: not counted
  spread.AddPod(Pod("z-0", "z", "0", "unknown-node"));
  Json unbound = Pod("z-0-1", "z", "0", "");
  spread.AddPod(unbound);
  spread.AddPod(Json::array());  // not an object

  auto found = spread.Spread();
  ASSERT_EQ(found.size(), 1u);
  const ObjectVerdict& v = found[0];
  EXPECT_EQ(v.api_version, "leaderworkerset.x-k8s.io/v1");
  EXPECT_EQ(v.kind, "LeaderWorkerSet");
  EXPECT_EQ(v.namespace_, "team-a");
  EXPECT_EQ(v.name, "llm");
  EXPECT_EQ(v.verdict, engine::Verdict::kWarn);
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0].rule, "DG017");
  EXPECT_EQ(v.findings[0].action, "warn");
  EXPECT_EQ(v.findings[0].message, "LeaderWorkerSet \"llm\" (group 0): 2 running GPU Pods span 2 NVLink cliques (" + kA +
                                       ": 1, " + kB + ": 1): Pods in two cliques join two separate IMEX domains and NCCL "
                                       "between them goes over the network");

  // Counted in the summary's findings, not as a judged object; reported as a warn result.
  Summary s;
  s.AddSpread(v);
  EXPECT_EQ(s.nvlink_spread, 1u);
  EXPECT_EQ(s.objects, 0u);
  EXPECT_EQ((s.findings[{"DG017", "warn"}]), 1u);
  ReportBuilder reports;
  reports.Add(v);
  auto r = reports.Reports("draguard", {});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0]["results"][0]["rule"], "DG017");
  EXPECT_EQ(r[0]["results"][0]["result"], "warn");
  EXPECT_EQ(r[0]["results"][0]["resources"][0]["kind"], "LeaderWorkerSet");
}

TEST(NvlinkSpread, FollowsThePolicy) {
  auto snap = Racks();
  auto run = [&](const policy::Policy& pol) {
    NvlinkSpread spread(snap.get(), pol);
    spread.AddPod(Pod("a", "llm", "0", "rack-a-0"));
    spread.AddPod(Pod("b", "llm", "0", "rack-b-0"));
    return spread.Spread();
  };
  policy::Policy deny;
  deny.rules["DG017"].action = policy::Action::kDeny;
  ASSERT_EQ(run(deny).size(), 1u);
  EXPECT_EQ(run(deny)[0].findings[0].action, "deny");
  deny.mode = policy::Mode::kAudit;
  EXPECT_EQ(run(deny)[0].findings[0].action, "audit");
  policy::Policy off;
  off.rules["DG017"].action = policy::Action::kOff;
  EXPECT_TRUE(run(off).empty());
  policy::Policy exempt;
  exempt.exemptions.namespaces = {"team-*"};
  EXPECT_TRUE(run(exempt).empty());
  // Without a topology model nothing is counted.
  policy::Policy pol;
  NvlinkSpread none(nullptr, pol);
  none.AddPod(Pod("a", "llm", "0", "rack-a-0"));
  EXPECT_TRUE(none.Spread().empty());
}

}  // namespace
}  // namespace draguard::audit
