// Every real manifest of test/data/manifests/ (see its PROVENANCE.md) runs through the engine as
// an AdmissionReview: no crash; every legacy GPU container is found by DG001 (checked against an
// independent walk of the document); each document's outcome matches expected-outcomes.tsv.
//
// DRAGUARD_PRINT_OUTCOMES=1 prints the current table instead of comparing (review every row
// before committing it: it is a golden, not a snapshot).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

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

fs::path Root() { return fs::path(DRAGUARD_TEST_DATA) / "manifests"; }

std::vector<fs::path> Files(const std::string& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(Root() / dir)) {
    if (e.path().extension() == ".yaml") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

admission::AdmissionRequest RequestFor(const Json& doc) {
  admission::AdmissionRequest r = admission::CreateRequestFor(doc);
  r.uid = "manifest";
  r.user_info.username = "alice";
  return r;
}

policy::Policy DefaultPolicy() {
  auto p = policy::ParsePolicy(policy::DefaultPolicyYaml(), "default");
  EXPECT_TRUE(p.ok());
  return *p;
}

// Independent oracle: pointers of every object that has a `name` and resources.{limits,requests}
// (or resourcesPerNode) with a non-zero GPU-ish extended resource, wherever it sits.
bool GpuIsh(const std::string& name) {
  return name.rfind("nvidia.com/gpu", 0) == 0 || name.rfind("nvidia.com/mig-", 0) == 0;
}
bool NonZero(const Json& q) {
  if (q.is_number()) return q.get<double>() != 0;
  if (q.is_string()) return q.get<std::string>() != "0";
  return false;
}
void Walk(const Json& node, const std::string& ptr, std::set<std::string>* out) {
  if (node.is_object()) {
    for (const char* field : {"resources", "resourcesPerNode"}) {
      auto res = node.find(field);
      if (res == node.end() || !res->is_object()) continue;
      for (const char* section : {"limits", "requests"}) {
        auto s = res->find(section);
        if (s == res->end() || !s->is_object()) continue;
        for (const auto& [k, v] : s->items()) {
          if (GpuIsh(k) && NonZero(v)) out->insert(ptr);
        }
      }
    }
    for (const auto& [k, v] : node.items()) Walk(v, ptr + "/" + k, out);
  } else if (node.is_array()) {
    for (std::size_t i = 0; i < node.size(); ++i) Walk(node[i], ptr + "/" + std::to_string(i), out);
  }
}

struct Row {
  std::string verdict, denied, warned;
};

std::string JoinIds(const std::vector<std::string>& ids) {
  std::string s;
  for (const auto& id : ids) s += (s.empty() ? "" : ",") + id;
  return s.empty() ? "-" : s;
}

// file#doc -> outcome under the default policy.
std::map<std::string, Row> Outcomes(const Registry& reg, const policy::Policy& pol, std::map<std::string, std::string>* kinds) {
  std::map<std::string, Row> out;
  for (const char* dir : {"legacy", "dra"}) {
    for (const auto& f : Files(dir)) {
      auto docs = yamljson::ParseDocuments(Slurp(f));
      EXPECT_TRUE(docs.ok()) << f;
      if (!docs.ok()) continue;
      for (std::size_t i = 0; i < docs->size(); ++i) {
        auto req = RequestFor((*docs)[i]);
        RuleInput in{req, pol, nullptr, {}};
        auto d = Decide(Evaluate(in, reg), pol);
        std::string key = std::string(dir) + "/" + f.filename().string() + "#" + std::to_string(i);
        out[key] = {VerdictName(d.verdict), JoinIds(d.denied_rules), JoinIds(d.warned_rules)};
        if (const char* v = std::getenv("DRAGUARD_PRINT_OUTCOMES"); v != nullptr && std::string(v) == "2") {
          std::cerr << key << "\n  " << (d.response.status ? d.response.status->message : "") << "\n";
          for (const auto& w : d.response.warnings) std::cerr << "  W: " << w << "\n";
        }
        (*kinds)[key] = req.kind.kind;
        if (d.response.status) {
          EXPECT_LE(d.response.status->message.size(), admission::kMaxDenyMessageBytes) << key;
        }
      }
    }
  }
  return out;
}

// Every GPU-ish (and neighbouring accelerator / NIC) resource name that the fixtures request, and
// how the default policy treats it. The names were collected from every resources /
// resourcesPerNode map in test/data/manifests/.
TEST(Manifests, HowEveryResourceNameInTheFixturesIsTreated) {
  auto pol = DefaultPolicy();
  struct Name {
    const char* name;
    bool legacy;         // denied by DG001 in a Pod
    bool mapping_aware;  // follows extendedResourceMapping (a device count a DeviceClass can back)
  };
  const Name names[] = {
      {"nvidia.com/gpu", true, true},          {"nvidia.com/gpu.shared", true, true},
      {"nvidia.com/gpu-10gb", true, true},     {"nvidia.com/mig-1g.5gb", true, true},
      {"nvidia.com/mig-1g.10gb", true, true},  {"nvidia.com/mig-1g.12gb", true, true},
      {"nvidia.com/mig-2g.10gb", true, true},  {"nvidia.com/mig-3g.20gb", true, true},
      {"nvidia.com/gpumem", true, false},      {"nvidia.com/gpucores", true, false},
      {"nvidia.com/gpumem-percentage", true, false},
      {"rdma/roce_gdr", false, false},         {"vpc.amazonaws.com/efa", false, false},
  };
  Registry reg = DefaultRegistry();
  for (const auto& n : names) {
    Json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"name", "p"}}},
                {"spec", {{"containers", {{{"name", "c"}, {"resources", {{"limits", {{n.name, "1"}}}}}}}}}}};
    auto req = RequestFor(pod);
    for (auto mapping : {policy::ExtendedResourceMapping::kDeny, policy::ExtendedResourceMapping::kAllow}) {
      pol.extended_resource_mapping = mapping;
      RuleInput in{req, pol, nullptr, {}};
      auto d = Decide(Evaluate(in, reg), pol);
      bool want_deny = n.legacy && (mapping == policy::ExtendedResourceMapping::kDeny || !n.mapping_aware);
      EXPECT_EQ(d.verdict, want_deny ? Verdict::kDeny : Verdict::kAllow) << n.name << " mapping " << static_cast<int>(mapping);
    }
  }
}

TEST(Manifests, CorpusIsComplete) {
  EXPECT_EQ(Files("legacy").size(), 40u);
  EXPECT_EQ(Files("dra").size(), 88u);
}

TEST(Manifests, OutcomesMatchTheRecordedTable) {
  Registry reg = DefaultRegistry();
  auto pol = DefaultPolicy();
  std::map<std::string, std::string> kinds;
  auto got = Outcomes(reg, pol, &kinds);
  if (std::getenv("DRAGUARD_PRINT_OUTCOMES") != nullptr) {
    for (const auto& [k, r] : got) {
      std::cout << k << "\t" << kinds[k] << "\t" << r.verdict << "\t" << r.denied << "\t" << r.warned << "\n";
    }
    return;
  }
  std::ifstream in(Root() / "expected-outcomes.tsv");
  ASSERT_TRUE(in) << "missing expected-outcomes.tsv";
  std::string line;
  std::size_t rows = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string key, kind, verdict, denied, warned;
    std::getline(ls, key, '\t');
    std::getline(ls, kind, '\t');
    std::getline(ls, verdict, '\t');
    std::getline(ls, denied, '\t');
    std::getline(ls, warned, '\t');
    ++rows;
    auto it = got.find(key);
    ASSERT_NE(it, got.end()) << key;
    EXPECT_EQ(it->second.verdict, verdict) << key;
    EXPECT_EQ(it->second.denied, denied) << key;
    EXPECT_EQ(it->second.warned, warned) << key;
  }
  EXPECT_EQ(rows, got.size()) << "every document has a row";
}

// With mutation disabled every legacy GPU container is denied by DG001, and the findings point at
// exactly the containers an independent walk finds.
TEST(Manifests, EveryLegacyGpuContainerIsDeniedByDg001) {
  Registry reg = DefaultRegistry();
  auto pol = DefaultPolicy();
  pol.mutation.enabled = false;
  const Rule* dg001 = reg.Find("DG001");
  std::size_t files_with_gpu = 0;
  for (const auto& f : Files("legacy")) {
    auto docs = yamljson::ParseDocuments(Slurp(f));
    ASSERT_TRUE(docs.ok()) << f;
    bool file_denied = false, file_has_gpu = false;
    for (std::size_t i = 0; i < docs->size(); ++i) {
      const Json& doc = (*docs)[i];
      std::set<std::string> want;
      std::string kind = doc.value("kind", "");
      // Quotas (Kueue ClusterQueue) name nvidia.com/gpu without requesting it.
      if (kind != "ClusterQueue" && kind != "ResourceFlavor") Walk(doc, "", &want);
      auto req = RequestFor(doc);
      RuleInput in{req, pol, nullptr, {}};
      auto r = dg001->Evaluate(in);
      std::set<std::string> got;
      for (const auto& finding : r.findings) {
        // ".../resources/limits/nvidia.com~1gpu" -> the container pointer.
        auto pos = finding.pointer.rfind("/resources");
        got.insert(finding.pointer.substr(0, pos));
      }
      EXPECT_EQ(got, want) << f.filename() << " document " << i;
      if (!want.empty()) {
        file_has_gpu = true;
        auto d = Decide(Evaluate(in, reg), pol);
        EXPECT_EQ(d.verdict, Verdict::kDeny) << f.filename() << " document " << i;
        ASSERT_FALSE(d.denied_rules.empty());
        EXPECT_EQ(d.denied_rules.front(), "DG001");
        // The message names the container.
        for (const auto& finding : r.findings) {
          EXPECT_NE(finding.message.find("\""), std::string::npos);
        }
        file_denied = true;
      }
    }
    if (file_has_gpu) {
      ++files_with_gpu;
      EXPECT_TRUE(file_denied) << f.filename();
    }
  }
  // 40 files; the Argo WorkflowTemplate carries its GPU request (0) only inside a string.
  EXPECT_EQ(files_with_gpu, 39u);
}

// With the default policy (mutation enabled) a legacy Pod is denied and a legacy workload warned.
TEST(Manifests, WorkloadsWarnWhenMutationWillConvertTheirPods) {
  Registry reg = DefaultRegistry();
  auto pol = DefaultPolicy();
  auto docs = yamljson::ParseDocuments(Slurp(Root() / "legacy" / "NVIDIA-gpu-operator__plugin-test.yaml"));
  ASSERT_TRUE(docs.ok());
  auto req = RequestFor(docs->front());
  ASSERT_EQ(req.kind.kind, "Deployment");
  RuleInput in{req, pol, nullptr, {}};
  auto d = Decide(Evaluate(in, reg), pol);
  EXPECT_EQ(d.verdict, Verdict::kWarn);
  ASSERT_FALSE(d.response.warnings.empty());
  EXPECT_NE(d.response.warnings.front().find("will be converted when its Pods are created"), std::string::npos);
}

}  // namespace
}  // namespace draguard::engine
