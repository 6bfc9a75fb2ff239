// Outputs: the JSON and YAML AuditReport, PolicyReports (shape, caps, summary), the table.
#include "draguard/audit/report.h"

#include <sstream>

#include <gtest/gtest.h>

#include "draguard/yamljson/yamljson.h"

namespace draguard::audit {
namespace {

using admission::Json;

ObjectVerdict Denied(const std::string& ns, const std::string& name, int findings = 1) {
  ObjectVerdict v;
  v.api_version = "v1";
  v.kind = "Pod";
  v.namespace_ = ns;
  v.name = name;
  v.uid = "uid-" + name;
  v.verdict = engine::Verdict::kDeny;
  for (int i = 0; i < findings; ++i) {
    v.findings.push_back({"DG001", "legacy-gpu-resource", "deny", "container \"c\" requests nvidia.com/gpu",
                          "request the GPU through a ResourceClaim", "/spec/containers/" + std::to_string(i)});
  }
  v.mutation = MutationOutcome::kRefused;
  v.mutation_reason = "no node can align the request";
  return v;
}

ObjectVerdict Passing(const std::string& ns) {
  ObjectVerdict v;
  v.api_version = "apps/v1";
  v.kind = "Deployment";
  v.namespace_ = ns;
  v.name = "ok";
  return v;
}

TEST(Report, JsonOutputIsOneDocumentWithResultsAndSummary) {
  std::ostringstream out;
  auto w = MakeWriter("json", out);
  ASSERT_NE(w, nullptr);
  Summary s;
  ObjectVerdict d = Denied("ml", "p");
  ObjectVerdict ok = Passing("ml");
  s.Add(d);
  s.Add(ok);
  s.documents = 3;
  s.malformed = 1;
  w->Object(d, "a.yaml: document 0");
  w->Object(ok, "a.yaml: document 1");
  w->Malformed("a.yaml: document 2", "bad");
  w->End(s);
  Json j = Json::parse(out.str());
  EXPECT_EQ(j["kind"], "AuditReport");
  ASSERT_EQ(j["results"].size(), 2u);  // the passing object is not listed
  EXPECT_EQ(j["results"][0]["verdict"], "deny");
  EXPECT_EQ(j["results"][0]["findings"][0]["rule"], "DG001");
  EXPECT_EQ(j["results"][0]["findings"][0]["path"], "/spec/containers/0");
  EXPECT_EQ(j["results"][0]["mutation"]["outcome"], "refused");
  EXPECT_EQ(j["results"][1]["error"], "bad");
  EXPECT_EQ(j["summary"]["objects"], 2);
  EXPECT_EQ(j["summary"]["verdicts"]["deny"], 1);
  EXPECT_EQ(j["summary"]["findings"][0], Json::parse(R"({"rule":"DG001","action":"deny","count":1})"));
  EXPECT_EQ(j["summary"]["mutation"]["refused"], 1);
  EXPECT_EQ(j["summary"]["mutation"]["refusals"][0]["reason"], "no node can align the request");
  EXPECT_EQ(s.denied(), 1u);
}

TEST(Report, EmptyJsonAndYamlOutputsAreValid) {
  for (const char* format : {"json", "yaml"}) {
    std::ostringstream out;
    auto w = MakeWriter(format, out);
    w->End(Summary{});
    auto docs = yamljson::ParseDocuments(out.str());
    ASSERT_TRUE(docs.ok()) << format << ": " << out.str();
    ASSERT_EQ(docs->size(), 1u);
    EXPECT_TRUE((*docs)[0]["results"].empty()) << format;
    EXPECT_EQ((*docs)[0]["summary"]["objects"], 0) << format;
  }
}

TEST(Report, YamlOutputParsesToTheSameAsJson) {
  std::ostringstream js, ys;
  auto jw = MakeWriter("json", js);
  auto yw = MakeWriter("yaml", ys);
  Summary s;
  ObjectVerdict d = Denied("ml", "p", 2);
  s.Add(d);
  jw->Object(d, "x");
  yw->Object(d, "x");
  jw->End(s);
  yw->End(s);
  auto docs = yamljson::ParseDocuments(ys.str());
  ASSERT_TRUE(docs.ok()) << ys.str();
  EXPECT_EQ((*docs)[0], Json::parse(js.str()));
}

TEST(Report, PolicyReportsPerNamespaceCappedWithAFullSummary) {
  ReportBuilder b(/*max_results=*/3);
  b.Add(Denied("ml", "a", 2));
  b.Add(Denied("ml", "b", 2));
  b.Add(Passing("ml"));
  ObjectVerdict exempt = Passing("kube-system");
  exempt.verdict = engine::Verdict::kExempt;
  b.Add(exempt);
  ObjectVerdict warn = Passing("web");
  warn.findings.push_back({"DG006", "x", "warn", "m", "", ""});
  warn.verdict = engine::Verdict::kWarn;
  b.Add(warn);
  ObjectVerdict audited = Passing("web");
  audited.findings.push_back({"DG003", "x", "audit", "m", "", ""});
  b.Add(audited);
  auto reports = b.Reports("draguard", {{"app.kubernetes.io/managed-by", "draguard"}});
  ASSERT_EQ(reports.size(), 3u);  // kube-system, ml, web
  const Json& ml = reports[1];
  EXPECT_EQ(ml["apiVersion"], "wgpolicyk8s.io/v1alpha2");
  EXPECT_EQ(ml["kind"], "PolicyReport");
  EXPECT_EQ(ml["metadata"]["namespace"], "ml");
  EXPECT_EQ(ml["metadata"]["name"], "draguard");
  EXPECT_EQ(ml["metadata"]["labels"]["app.kubernetes.io/managed-by"], "draguard");
  EXPECT_EQ(ml["metadata"]["annotations"]["draguard.io/results-dropped"], "1");
  EXPECT_EQ(ml["results"].size(), 3u);
  EXPECT_EQ(ml["summary"], Json::parse(R"({"pass":1,"fail":4,"warn":0,"error":0,"skip":0})"));
  const Json& r = ml["results"][0];
  for (const char* key : {"policy", "rule", "result", "scored", "source", "message", "resources", "properties"}) {
    EXPECT_TRUE(r.contains(key)) << key;
  }
  EXPECT_EQ(r["result"], "fail");
  EXPECT_EQ(r["resources"][0], Json::parse(R"({"apiVersion":"v1","kind":"Pod","name":"a","namespace":"ml","uid":"uid-a"})"));
  for (const auto& [k, v] : r["properties"].items()) EXPECT_TRUE(v.is_string()) << k;  // map[string]string
  EXPECT_EQ(reports[0]["summary"]["skip"], 1);
  EXPECT_FALSE(reports[0]["results"].size());
  EXPECT_EQ(reports[2]["summary"]["warn"], 1);
  EXPECT_EQ(reports[2]["summary"]["fail"], 1);  // audit findings are failures of the standard
}

// A Pod's allocation: one container of two GPUs with `result`, one with a single GPU.
PodAllocation Allocated(const std::string& name, const std::string& result) {
  PodAllocation a;
  a.namespace_ = "ml";
  a.name = name;
  a.uid = "uid-" + name;
  a.node = "n1";
  ContainerAllocation two;
  two.container = "train";
  two.node = "n1";
  two.gpus = 2;
  two.alignment = result == "pass" ? Alignment::kNvlink : Alignment::kNone;
  two.origin = result == "warn" ? ClaimOrigin::kScheduler : ClaimOrigin::kUser;
  two.result = result;
  two.message = "container \"train\": 2 GPUs (gpu-0, gpu-5) on node n1";
  two.claims = {name + "-gpus"};
  for (const char* d : {"gpu-0", "gpu-5"}) {
    LocatedDevice dev;
    dev.claim = name + "-gpus";
    dev.request = "gpu";
    dev.driver = "gpu.nvidia.com";
    dev.pool = "n1";
    dev.device = d;
    dev.kind = DeviceKind::kGpu;
    two.devices.push_back(dev);
  }
  ContainerAllocation one = two;
  one.container = "side";
  one.gpus = 1;
  one.devices.resize(1);
  one.alignment = Alignment::kSingle;
  one.result = "pass";
  a.containers = {two, one};
  return a;
}

// Allocation results name the Pod and its devices; passing ones take only the room failing and
// warning results leave; a container with one GPU alone is counted, not reported.
TEST(Report, AllocationResultsInPolicyReportsAndSummary) {
  ReportBuilder b(/*max_results=*/2);
  b.AddAllocation(Allocated("ok-1", "pass"));
  b.AddAllocation(Allocated("spread", "warn"));
  b.AddAllocation(Allocated("ok-2", "pass"));
  b.Add(Denied("ml", "legacy"));
  auto reports = b.Reports("draguard", {});
  ASSERT_EQ(reports.size(), 1u);
  const Json& ml = reports[0];
  EXPECT_EQ(ml["summary"], Json::parse(R"({"pass":2,"fail":1,"warn":1,"error":0,"skip":0})"));
  ASSERT_EQ(ml["results"].size(), 2u);
  EXPECT_EQ(ml["results"][0]["rule"], "allocation");
  EXPECT_EQ(ml["results"][0]["result"], "warn");
  EXPECT_EQ(ml["results"][1]["rule"], "DG001");
  EXPECT_EQ(ml["metadata"]["annotations"]["draguard.io/results-dropped"], "2");  // both passes
  const Json& r = ml["results"][0];
  EXPECT_EQ(r["resources"][0], Json::parse(R"({"apiVersion":"v1","kind":"Pod","name":"spread","namespace":"ml","uid":"uid-spread"})"));
  EXPECT_EQ(r["properties"]["devices"], "gpu.nvidia.com/n1/gpu-0, gpu.nvidia.com/n1/gpu-5");
  EXPECT_EQ(r["properties"]["alignment"], "none");
  EXPECT_EQ(r["properties"]["origin"], "scheduler");
  EXPECT_EQ(r["properties"]["container"], "train");
  for (const auto& [k, v] : r["properties"].items()) EXPECT_TRUE(v.is_string()) << k;

  // With room, the passes follow; merged builders keep the order.
  ReportBuilder roomy(10), other(10);
  roomy.AddAllocation(Allocated("ok-1", "pass"));
  other.AddAllocation(Allocated("bad", "fail"));
  roomy.Merge(other);
  auto merged = roomy.Reports("draguard", {});
  ASSERT_EQ(merged[0]["results"].size(), 2u);
  EXPECT_EQ(merged[0]["results"][0]["result"], "fail");
  EXPECT_EQ(merged[0]["results"][1]["result"], "pass");

  Summary s;
  s.AddAllocation(Allocated("ok-1", "pass"));
  s.AddAllocation(Allocated("spread", "warn"));
  EXPECT_EQ(s.allocation_pods, 2u);
  EXPECT_EQ(s.allocation_results("pass"), 3u);  // the single GPUs count too
  EXPECT_EQ(s.allocation_results("warn"), 1u);
  Json j = s.ToJson();
  EXPECT_EQ(j["allocations"]["pods"], 2);
  EXPECT_NE(SummaryText(s).find("allocations: 2 Pods, 4 containers with GPUs: none=1 nvlink=1 single=2; fail=0 warn=1"),
            std::string::npos)
      << SummaryText(s);

  // The table shows the warning; json has one allocation entry per Pod.
  std::ostringstream table, json;
  auto t = MakeWriter("table", table);
  t->Allocation(Allocated("ok-1", "pass"));
  t->Allocation(Allocated("spread", "warn"));
  t->End(s);
  EXPECT_EQ(table.str().find("ok-1"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find("ml/spread"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find(" alloc  warn "), std::string::npos) << table.str();
  auto jw = MakeWriter("json", json);
  PodAllocation where = Allocated("ok-1", "pass");
  where.where = "dump.json: document 0 item 4";
  jw->Allocation(where);
  jw->End(s);
  Json doc = Json::parse(json.str());
  ASSERT_EQ(doc["results"].size(), 1u);
  EXPECT_EQ(doc["results"][0]["source"], "dump.json: document 0 item 4");
  EXPECT_EQ(doc["results"][0]["allocation"]["containers"].size(), 2u);
  EXPECT_EQ(doc["results"][0]["allocation"]["containers"][1]["alignment"], "single");
  EXPECT_EQ(doc["results"][0]["allocation"]["containers"][0]["devices"][1]["device"], "gpu.nvidia.com/n1/gpu-5");
}

TEST(Report, PolicyReportWriterPrintsYamlDocuments) {
  std::ostringstream out;
  auto w = MakeWriter("policyreport", out, 10);
  w->Object(Denied("a", "p"), "x");
  w->Object(Denied("b", "q"), "x");
  w->End(Summary{});
  auto docs = yamljson::ParseDocuments(out.str());
  ASSERT_TRUE(docs.ok());
  ASSERT_EQ(docs->size(), 2u);
  EXPECT_EQ((*docs)[1]["metadata"]["namespace"], "b");
}

TEST(Report, TableHasOneLinePerFinding) {
  std::ostringstream out;
  auto w = MakeWriter("table", out);
  w->Object(Denied("ml", "p", 2), "x");
  w->Object(Passing("ml"), "x");
  w->End(Summary{});
  std::string text = out.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3);
  EXPECT_NE(text.find("ml/p"), std::string::npos);
  EXPECT_NE(text.find("(/spec/containers/1)"), std::string::npos);
  std::ostringstream none;
  MakeWriter("table", none)->End(Summary{});
  EXPECT_EQ(none.str(), "No findings.\n");
  EXPECT_EQ(MakeWriter("xml", none), nullptr);
}

TEST(Report, RefusalReasonsAreBounded) {
  Summary s;
  for (int i = 0; i < 50; ++i) {
    ObjectVerdict v = Denied("ml", "p");
    v.mutation_reason = "reason " + std::to_string(i);
    s.Add(v);
  }
  EXPECT_EQ(s.refusals.size(), 21u);
  EXPECT_EQ(s.refusals["other"], 30u);
  EXPECT_NE(SummaryText(s).find("50 refused"), std::string::npos);
}

}  // namespace
}  // namespace draguard::audit
