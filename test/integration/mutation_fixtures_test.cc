// The mutation module (include/draguard/mutation/mutation.h) checked against independent
// implementations, over every legacy manifest of test/data/manifests/legacy/ (each Pod, and each
// pod template of a workload or custom resource wrapped as a Pod) on several real hwloc
// topologies, with annotation and GPU-count variants:
//
//  - refusals must say which request and which limit;
//  - the RFC 6902 patch is applied by python3-jsonpatch (test/tools/apply_json_patch.py) and must
//    give the converted Pod draguard computed;
//  - the patched Pod and the templates are validated with the npm package kubernetes-models and
//    with the name / size rules schemas do not carry; every generated selector is evaluated by
//    @marcbachmann/cel-js over the simulated devices of every node the Pod may land on, every
//    device set the scheduler could choose is enumerated and checked against the hwloc ground
//    truth of test/data/hwloc/ground-truth.md (test/tools/check_mutation.mjs);
//  - draguard's own validating rules must not deny the converted Pod or its templates;
//  - conversion is idempotent and deterministic;
//  - under mutation.cpu (grouped and individual) the GPU Pods, given whole CPUs, are converted
//    again and checked the same way, plus the CPU checks of check_mutation.mjs (CPUs and GPUs on
//    one NUMA node, proven from the constraints; CPUs per NUMA node from the exports).
//
// Skips only when node or python3 is not installed; missing npm packages or python3-jsonpatch
// are failures (CI installs them: scripts/install-test-deps.sh, scripts/install-test-tools.sh).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "draguard/dra/devices.h"
#include "draguard/engine/engine.h"
#include "draguard/dra/pod_specs.h"
#include "draguard/engine/registry.h"
#include "draguard/mutation/mutation.h"
#include "draguard/policy/policy.h"
#include "draguard/topology/snapshot.h"
#include "draguard/yamljson/yamljson.h"

namespace draguard::mutation {
namespace {

namespace fs = std::filesystem;
using admission::Json;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

const fs::path kData = fs::path(DRAGUARD_TEST_DATA);
const fs::path kTools = fs::path(DRAGUARD_SOURCE_DIR) / "test" / "tools";

// ---- Topologies: real hwloc exports copied under valid node names --------------------------

struct TopologySpec {
  std::string name;
  std::vector<std::pair<std::string, std::string>> nodes;  // node name, hwloc file
};

const char* const kG4dn = "aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml";
const char* const kDgx2h = "hwloc_nvidia-dgx2h_2s-xeon8174_16xV100-SXM3_12xNVSwitch_nvlink-hetero.xml";
const char* const kLassen = "llnl_lassen_ibm-ac922_2s-power9_4xV100-SXM2_cuda-nvml_4xmlx5.xml";
const char* const kR740 = "clemson-palmetto_dell-r740_2s-gold6248_2xV100-PCIe_cuda-nvml_mlx5.xml";
const char* const kMinsky = "hwloc_ibm-power8-minsky_2s_4xP100-SXM2_nvlink-gpu-cpu-hetero.xml";
// 2x P100 and an RDMA NIC under one host bridge: the only GPU + NIC alignment these files allow.
const char* const kPascal = "llnl_pascal_relion-x1904gt_2s-e5-2695v4_2xP100-PCIe_cuda-nvml-opencl.xml";
// K40m + M2075 (+ an AMD GPU) with the IB NIC under the same host bridge as two of them.
const char* const kX9drg = "hwloc_supermicro-x9drg_2s-e5-2650_K40m+M2075+R9_mlx5_normalio.xml";
// Synthetic 4x H100 SXM (XE8640 class): every GPU on its own root and NUMA node, all NVLinked,
// RDMA NICs next to three of them, all-zero UUIDs (test/data/hwloc-synthetic).
const char* const kXe8640 = "../hwloc-synthetic/xe8640-like_4xH100-SXM_4numa_nvlink-all_3xmlx5.xml";

std::vector<TopologySpec> TopologySpecs() {
  return {
      {"g4dn", {{"g4dn-1", kG4dn}}},
      {"dgx2h", {{"dgx2h-1", kDgx2h}}},
      {"lassen", {{"lassen-1", kLassen}}},
      {"r740", {{"r740-1", kR740}}},
      {"minsky", {{"minsky-1", kMinsky}}},
      {"pascal", {{"pascal-1", kPascal}}},
      {"x9drg", {{"x9drg-1", kX9drg}}},
      // Two shapes on two nodes each (node restrictions by name and by shape).
      {"g4dn+dgx2h", {{"g4dn-1", kG4dn}, {"g4dn-2", kG4dn}, {"dgx2h-1", kDgx2h}, {"dgx2h-2", kDgx2h}}},
      // Two shapes whose pcieRoot names differ (domains 0000 and 0003/0004/...).
      {"r740+lassen", {{"r740-1", kR740}, {"lassen-1", kLassen}}},
      // Two nodes with identical (all-zero) GPU UUIDs, and NVLink next to a PCIe-only shape.
      {"xe8640", {{"xe-1", kXe8640}, {"xe-2", kXe8640}}},
      {"xe8640+r740", {{"xe-1", kXe8640}, {"r740-1", kR740}}},
  };
}

struct Topology {
  std::string name;
  std::shared_ptr<const topology::Snapshot> snapshot;
  std::map<std::string, std::string> files;  // node -> hwloc file name
  std::map<std::string, std::string> paths;  // node -> hwloc file path
};

// ---- Pods ---------------------------------------------------------------------------------

struct PodCase {
  std::string label;    // "<file>#<doc><spec pointer>"
  std::string variant;  // "base", "mem-80Gi", ...
  std::string ns;
  Json pod;
};

admission::AdmissionRequest RequestFor(const Json& object, const std::string& ns) {
  admission::AdmissionRequest r = admission::CreateRequestFor(object);
  r.uid = "mutation-fixtures";
  r.namespace_ = ns;
  r.user_info.username = "alice";
  return r;
}

bool HasGpuKey(const Json& pod) {
  const Json& spec = pod.at("spec");
  for (const char* list : {"containers", "initContainers"}) {
    if (!spec.contains(list) || !spec[list].is_array()) continue;
    for (const auto& c : spec[list]) {
      for (const char* sec : {"limits", "requests"}) {
        const Json* res = c.contains("resources") && c["resources"].is_object() ? &c["resources"] : nullptr;
        if (res && res->contains(sec) && (*res)[sec].is_object() && (*res)[sec].contains("nvidia.com/gpu")) return true;
      }
    }
  }
  return false;
}

Json WithGpuCount(Json pod, int n) {
  Json& spec = pod["spec"];
  for (const char* list : {"containers", "initContainers"}) {
    if (!spec.contains(list) || !spec[list].is_array()) continue;
    for (auto& c : spec[list]) {
      if (!c.contains("resources") || !c["resources"].is_object()) continue;
      for (const char* sec : {"limits", "requests"}) {
        Json& res = c["resources"];
        if (res.contains(sec) && res[sec].is_object() && res[sec].contains("nvidia.com/gpu")) {
          res[sec]["nvidia.com/gpu"] = n;
        }
      }
    }
  }
  return pod;
}

Json WithAnnotation(Json pod, const std::string& key, const std::string& value) {
  if (!pod["metadata"].is_object()) pod["metadata"] = Json::object();
  if (!pod["metadata"]["annotations"].is_object()) pod["metadata"]["annotations"] = Json::object();
  pod["metadata"]["annotations"][key] = value;
  return pod;
}

std::vector<PodCase> Variants(const PodCase& base) {
  std::vector<PodCase> out = {base};
  auto add = [&](const std::string& name, Json pod) { out.push_back({base.label, name, base.ns, std::move(pod)}); };
  for (const char* mem : {"80Gi", "16G", "32Gi"}) {
    add(std::string("mem-") + mem, WithAnnotation(base.pod, std::string(kMemoryAnnotation), mem));
  }
  add("nic-rdma", WithAnnotation(base.pod, std::string(kNicAnnotation), "rdma"));
  add("nvlink", WithAnnotation(base.pod, std::string(kInterconnectAnnotation), "nvlink"));
  if (HasGpuKey(base.pod)) {
    for (int n : {1, 2, 4, 8}) add("gpus-" + std::to_string(n), WithGpuCount(base.pod, n));
    add("gpus-2+nic-rdma", WithAnnotation(WithGpuCount(base.pod, 2), std::string(kNicAnnotation), "rdma"));
    add("gpus-2+nvlink", WithAnnotation(WithGpuCount(base.pod, 2), std::string(kInterconnectAnnotation), "nvlink"));
    add("gpus-4+nvlink", WithAnnotation(WithGpuCount(base.pod, 4), std::string(kInterconnectAnnotation), "nvlink"));
    add("gpus-2+mem-32Gi", WithAnnotation(WithGpuCount(base.pod, 2), std::string(kMemoryAnnotation), "32Gi"));
    add("gpus-1+mem-16G", WithAnnotation(WithGpuCount(base.pod, 1), std::string(kMemoryAnnotation), "16G"));
  }
  return out;
}

// ---- Conversion results -------------------------------------------------------------------

struct Converted {
  const Topology* topo = nullptr;
  const PodCase* pod = nullptr;
  PodConversion conversion;
  ClaimProfile profile;
};

struct Refused {
  const Topology* topo = nullptr;
  const PodCase* pod = nullptr;
  std::string reason;
};

struct Fixtures {
  policy::Policy policy;
  fs::path work;
  std::vector<Topology> topologies;
  std::vector<PodCase> base_pods;   // one per pod spec
  std::vector<PodCase> pods;        // with variants, deduplicated
  std::vector<Converted> converted;
  std::vector<Refused> refused;
  std::vector<std::pair<const Topology*, const PodCase*>> unchanged;
  std::vector<std::string> load_errors;
};

Fixtures* g_fixtures = nullptr;

void Build(Fixtures& f) {
  auto pol = policy::ParsePolicy(policy::DefaultPolicyYaml(), "default");
  if (!pol.ok()) {
    f.load_errors.push_back("default policy: " + pol.status().ToString());
    return;
  }
  f.policy = *pol;
  f.work = fs::path(::testing::TempDir()) / ("draguard_mutation_fixtures." + std::to_string(getpid()));
  fs::remove_all(f.work);
  fs::create_directories(f.work / "topologies");
  for (const auto& spec : TopologySpecs()) {
    fs::path dir = f.work / "topologies" / spec.name;
    fs::create_directories(dir);
    Topology t;
    t.name = spec.name;
    for (const auto& [node, file] : spec.nodes) {
      fs::copy_file(kData / "hwloc" / file, dir / (node + ".xml"));
      t.files[node] = fs::path(file).filename().string();
      t.paths[node] = (kData / "hwloc" / file).lexically_normal().string();
    }
    std::vector<topology::LoadProblem> problems;
    auto snap = topology::LoadSnapshot(dir.string(), {}, &problems);
    if (!snap.ok()) {
      f.load_errors.push_back(spec.name + ": " + snap.status().ToString());
      continue;
    }
    for (const auto& p : problems) f.load_errors.push_back(spec.name + ": " + p.source + ": " + p.status.ToString());
    if ((*snap)->node_count() != spec.nodes.size()) {
      f.load_errors.push_back(spec.name + ": " + std::to_string((*snap)->node_count()) + " nodes loaded");
    }
    t.snapshot = *snap;
    f.topologies.push_back(std::move(t));
  }

  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kData / "manifests" / "legacy")) {
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    auto docs = yamljson::ParseDocuments(Slurp(file));
    if (!docs.ok()) {
      f.load_errors.push_back(file.filename().string() + ": " + docs.status().ToString());
      continue;
    }
    for (std::size_t d = 0; d < docs->size(); ++d) {
      const Json& doc = (*docs)[d];
      if (!doc.is_object()) continue;
      std::string ns = "team-a";
      if (doc.contains("metadata") && doc["metadata"].is_object() && doc["metadata"].contains("namespace") &&
          doc["metadata"]["namespace"].is_string()) {
        ns = doc["metadata"]["namespace"].get<std::string>();
      }
      for (const auto& loc : dra::LocatePodSpecs(RequestFor(doc, ns), f.policy)) {
        PodCase pc;
        pc.label = file.filename().string() + "#" + std::to_string(d) + loc.spec_pointer;
        pc.variant = "base";
        pc.ns = ns;
        if (!loc.workload) {
          pc.pod = doc;
        } else {
          Json md = Json::object();
          if (!loc.metadata_pointer.empty() && doc.contains(Json::json_pointer(loc.metadata_pointer)) &&
              doc.at(Json::json_pointer(loc.metadata_pointer)).is_object()) {
            md = doc.at(Json::json_pointer(loc.metadata_pointer));
          }
          md["namespace"] = ns;
          pc.pod = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", md},
                    {"spec", doc.at(Json::json_pointer(loc.spec_pointer))}};
        }
        if (!pc.pod.contains("spec") || !pc.pod["spec"].is_object()) continue;
        f.base_pods.push_back(std::move(pc));
      }
    }
  }
  std::set<std::string> seen;
  for (const auto& base : f.base_pods) {
    for (auto& v : Variants(base)) {
      if (seen.insert(v.pod.dump()).second) f.pods.push_back(std::move(v));
    }
  }
  for (const auto& topo : f.topologies) {
    for (const auto& pc : f.pods) {
      PodConversion c = ConvertPod(pc.pod, pc.ns, f.policy, topo.snapshot.get());
      switch (c.outcome) {
        case PodConversion::Outcome::kUnchanged:
          f.unchanged.emplace_back(&topo, &pc);
          break;
        case PodConversion::Outcome::kRefused:
          f.refused.push_back({&topo, &pc, c.reason});
          break;
        case PodConversion::Outcome::kConverted: {
          Converted cv{&topo, &pc, std::move(c), {}};
          auto prof = ProfilePod(pc.pod, f.policy);
          if (prof.ok()) cv.profile = *prof;
          f.converted.push_back(std::move(cv));
          break;
        }
      }
    }
  }
}

class MutationFixtures : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (g_fixtures == nullptr) {
      auto start = std::chrono::steady_clock::now();
      g_fixtures = new Fixtures();
      Build(*g_fixtures);
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
      std::cout << "mutation fixtures: " << g_fixtures->base_pods.size() << " pod specs, " << g_fixtures->pods.size()
                << " pods with variants, " << g_fixtures->topologies.size() << " topologies: "
                << g_fixtures->converted.size() << " converted / " << g_fixtures->refused.size() << " refused / "
                << g_fixtures->unchanged.size() << " unchanged (" << ms.count() << " ms)\n";
    }
  }
  static void TearDownTestSuite() {
    if (g_fixtures != nullptr && std::getenv("DRAGUARD_KEEP_FIXTURES") == nullptr) {
      std::error_code ec;
      fs::remove_all(g_fixtures->work, ec);
    }
  }
  const Fixtures& F() const { return *g_fixtures; }
};

std::string CaseName(const Topology& t, const PodCase& p) { return t.name + " | " + p.label + " [" + p.variant + "]"; }

bool HaveCommand(const std::string& name) {
  return std::system(("command -v " + name + " >/dev/null 2>&1").c_str()) == 0;
}

// Runs `cmd`, returns stdout; *rc = exit status.
std::string RunCommand(const std::string& cmd, int* rc) {
  std::FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    *rc = -1;
    return "";
  }
  std::string out;
  char buf[65536];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  *rc = pclose(p);
  return out;
}

std::string Quote(const std::string& s) { return "'" + s + "'"; }

// ---- Cases for check_mutation.mjs --------------------------------------------------------

// Per topology and node: the hwloc file, the shape, the simulated devices and the NUMA nodes with
// their CPUs (PUs) as draguard's model has them.
Json TopologiesJson(const std::vector<Topology>& topologies, const policy::Policy& pol) {
  Json out = Json::object();
  dra::NicOptions nic{pol.mutation.nic.driver};
  for (const auto& t : topologies) {
    Json nodes = Json::object();
    for (const auto& node : t.snapshot->nodes()) {
      Json devices = Json::array();
      for (const auto& d : dra::SimulateNode(*node, nic)) {
        Json attrs = Json::object(), caps = Json::object();
        for (const auto& [dom, m] : d.device.attributes) {
          attrs[dom] = Json::object();
          for (const auto& [name, v] : m) {
            if (const auto* i = std::get_if<int64_t>(&v)) attrs[dom][name] = {{"int", *i}};
            if (const auto* b = std::get_if<bool>(&v)) attrs[dom][name] = {{"bool", *b}};
            if (const auto* s = std::get_if<std::string>(&v)) attrs[dom][name] = {{"string", *s}};
            if (const auto* sv = std::get_if<cel::Semver>(&v)) attrs[dom][name] = {{"version", sv->ToString()}};
          }
        }
        for (const auto& [dom, m] : d.device.capacity) {
          caps[dom] = Json::object();
          for (const auto& [name, q] : m) caps[dom][name] = q.ToString();
        }
        devices.push_back({{"name", d.name},
                           {"kind", d.kind == dra::DeviceKind::kGpu ? "gpu" : "nic"},
                           {"driver", d.device.driver},
                           {"attributes", attrs},
                           {"capacity", caps},
                           {"unknown", d.unknown}});
      }
      Json numa = Json::array();
      for (const auto& n : node->shape->numa_nodes) numa.push_back({{"os", n.os_index}, {"cpus", n.cpus}});
      nodes[node->name] = {{"file", t.files.at(node->name)},
                           {"xml", t.paths.at(node->name)},
                           {"shape", node->shape->fingerprint},
                           {"devices", devices},
                           {"numaNodes", numa}};
    }
    out[t.name] = {{"nodes", nodes}};
  }
  return out;
}

// Writes converted case `c` (converted under `pol`) to cases_dir/id and returns its index entry.
Json WriteCase(const Converted& c, const policy::Policy& pol, const fs::path& cases_dir, const std::string& id) {
  const fs::path dir = cases_dir / id;
  fs::create_directories(dir);
  WriteFile(dir / "pod.json", c.pod->pod.dump());
  WriteFile(dir / "patch.json", c.conversion.patch.dump());
  WriteFile(dir / "expected.json", c.conversion.pod.dump());
  Json templates = Json::array();
  Json placements = Json::array();
  for (const auto& t : c.conversion.templates) {
    templates.push_back(t.object);
    Json p = Json::array();
    for (auto pl : t.placements) p.push_back(PlacementName(pl));
    placements.push_back(p);
  }
  WriteFile(dir / "templates.json", templates.dump());
  Json entries = Json::array();
  for (const auto& e : c.profile.entries) {
    const char* kind = e.profile.kind == RequestProfile::Kind::kGpu   ? "gpu"
                       : e.profile.kind == RequestProfile::Kind::kMig ? "mig"
                                                                      : "shared";
    entries.push_back({{"request", e.request}, {"kind", kind}, {"count", e.profile.count}, {"cpus", e.profile.cpus}});
  }
  std::string memory;
  const Json& md = c.pod->pod.value("metadata", Json::object());
  if (md.is_object() && md.contains("annotations") && md["annotations"].is_object()) {
    memory = md["annotations"].value(std::string(kMemoryAnnotation), "");
  }
  // Per template, the entries (containers' requests) that use it: each converted container has
  // its own claim, whose template has one GPU request "gpu" (and "gpu-nic").
  Json template_entries = Json::array();
  for (std::size_t t = 0; t < c.conversion.templates.size(); ++t) template_entries.push_back(Json::array());
  {
    std::vector<std::vector<std::string>> covered;
    auto prof = ProfilePod(c.pod->pod, pol, &covered);
    const Json& cspec = c.conversion.pod.at("spec");
    for (std::size_t e = 0; prof.ok() && e < prof->entries.size() && e < covered.size(); ++e) {
      const Json& claims = c.conversion.pod.at(Json::json_pointer(covered[e][0] + "/resources/claims"));
      const std::string claim = claims.back()["name"];
      std::string tmpl;
      for (const auto& rc : cspec.at("resourceClaims")) {
        if (rc.value("name", "") == claim) tmpl = rc.value("resourceClaimTemplateName", "");
      }
      for (std::size_t t = 0; t < c.conversion.templates.size(); ++t) {
        if (c.conversion.templates[t].name != tmpl) continue;
        template_entries[t].push_back(entries[e]);
        template_entries[t].back()["request"] = "gpu";
      }
    }
  }
  const char* cpu_mode = pol.mutation.cpu.mode == policy::CpuMode::kGrouped      ? "grouped"
                         : pol.mutation.cpu.mode == policy::CpuMode::kIndividual ? "individual"
                                                                                 : "none";
  return {{"id", id},
          {"templateEntries", template_entries},
          {"name", CaseName(*c.topo, *c.pod)},
          {"topology", c.topo->name},
          {"namespace", c.pod->ns},
          {"entries", entries},
          {"nic", c.profile.nic},
          {"interconnect", c.profile.interconnect},
          {"memoryAnnotation", memory},
          {"cpuMode", cpu_mode},
          {"placements", placements}};
}

// ---- Tests ---------------------------------------------------------------------------------

TEST_F(MutationFixtures, LoadsEverything) {
  for (const auto& e : F().load_errors) ADD_FAILURE() << e;
  EXPECT_EQ(F().topologies.size(), TopologySpecs().size());
  EXPECT_GE(F().base_pods.size(), 40u);
  EXPECT_GT(F().converted.size(), 500u);
  // Every topology converts something.
  std::map<std::string, int> per;
  for (const auto& c : F().converted) per[c.topo->name]++;
  for (const auto& t : F().topologies) EXPECT_GT(per[t.name], 0) << t.name;
}

// A refusal names the request (container, request or annotation) and the limit it hit.
TEST_F(MutationFixtures, RefusalsNameRequestAndLimit) {
  std::map<std::string, int> reasons;
  for (const auto& r : F().refused) {
    std::set<std::string> names;
    for (const char* list : {"containers", "initContainers"}) {
      const Json& spec = r.pod->pod.at("spec");
      if (!spec.contains(list) || !spec[list].is_array()) continue;
      for (const auto& c : spec[list]) {
        if (c.contains("name") && c["name"].is_string()) names.insert(c["name"].get<std::string>());
      }
    }
    bool names_request = r.reason.find("request \"") != std::string::npos ||
                         r.reason.find("draguard.io/") != std::string::npos;
    for (const auto& n : names) names_request = names_request || r.reason.find("\"" + n + "\"") != std::string::npos;
    // The limit: a number (devices, memory, "at most N"), or the legacy resource together with the
    // rule it breaks (not a whole number, no DRA equivalent, not allowed by the policy).
    bool names_limit = std::any_of(r.reason.begin(), r.reason.end(), [](char ch) { return ch >= '0' && ch <= '9'; }) ||
                       (r.reason.find("nvidia.com/") != std::string::npos &&
                        (r.reason.find("whole number") != std::string::npos ||
                         r.reason.find("no DRA equivalent") != std::string::npos ||
                         r.reason.find("policy") != std::string::npos));
    EXPECT_TRUE(names_request && names_limit) << CaseName(*r.topo, *r.pod) << ": refusal does not name "
                                              << (names_request ? "the limit" : "the request") << ": " << r.reason;
    // Group the reasons without the per-shape details for the log.
    std::string key = r.reason.substr(0, r.reason.find(" on shape "));
    reasons[r.topo->name + ": " + key]++;
  }
  std::cout << "refusals (" << F().refused.size() << "):\n";
  for (const auto& [k, n] : reasons) std::cout << "  " << n << "x " << k << "\n";
}

// Why the independent checkers cannot run here, "" when they can: python3 or node missing (a
// skip), or an install step not done (`fatal`: the npm packages, python3-jsonpatch).
std::string MissingCheckerTool(bool* fatal) {
  *fatal = false;
  if (!HaveCommand("python3")) return "python3 is not installed";
  if (!HaveCommand("node")) return "node is not installed";
  *fatal = true;
  for (const char* pkg : {"@marcbachmann/cel-js", "kubernetes-models"}) {
    if (!fs::exists(kTools / "node_modules" / pkg / "package.json")) {
      return std::string(pkg) + " is not installed in " + (kTools / "node_modules").string() +
             "; run scripts/install-test-tools.sh";
    }
  }
  int rc = 0;
  RunCommand("python3 -c 'import jsonpatch' 2>/dev/null", &rc);
  if (rc != 0) return "python3 cannot import jsonpatch; install python3-jsonpatch (scripts/install-test-deps.sh)";
  *fatal = false;
  return "";
}

// Writes every converted case, applies the patches with python3-jsonpatch, then validates and
// evaluates everything with node (kubernetes-models, cel-js, ground truth).
TEST_F(MutationFixtures, IndependentImplementationsAgree) {
  bool fatal = false;
  if (const std::string why = MissingCheckerTool(&fatal); !why.empty()) {
    if (fatal) FAIL() << why;
    GTEST_SKIP() << why;
  }
  int rc = 0;

  const fs::path cases_dir = F().work / "cases";
  fs::create_directories(cases_dir);
  Json index = {{"groundTruth", Json::array({(kData / "hwloc" / "ground-truth.md").string(),
                                             (kData / "hwloc-synthetic" / "ground-truth.md").string()})},
                {"gpuClass", F().policy.device_classes.gpu.empty() ? "gpu.nvidia.com" : F().policy.device_classes.gpu[0]},
                {"migClass", F().policy.device_classes.mig.empty() ? "mig.nvidia.com" : F().policy.device_classes.mig[0]},
                {"nicClass", F().policy.mutation.nic.device_class},
                {"nicDriver", F().policy.mutation.nic.driver},
                {"shapeLabel", std::string(topology::kShapeLabel)},
                {"topologies", Json::object()},
                {"cases", Json::array()}};
  index["topologies"] = TopologiesJson(F().topologies, F().policy);
  for (std::size_t i = 0; i < F().converted.size(); ++i) {
    char id[32];
    std::snprintf(id, sizeof(id), "case-%05zu", i);
    index["cases"].push_back(WriteCase(F().converted[i], F().policy, cases_dir, id));
  }
  // Controls: converted cases broken on purpose; the checkers must notice each one.
  index["controls"] = Json::array();
  auto control = [&](const std::string& id, const std::string& topo, const std::string& variant,
                     const std::string& placement, const std::function<void(Json&)>& breaker) {
    for (std::size_t i = 0; i < F().converted.size(); ++i) {
      const Converted& c = F().converted[i];
      if (c.topo->name != topo || c.pod->variant != variant || c.conversion.templates.size() != 1) continue;
      const auto& placements = c.conversion.templates[0].placements;
      if (placements.empty() || PlacementName(placements[0]) != placement) continue;
      Json entry = index["cases"][i];
      const fs::path dir = cases_dir / id;
      fs::create_directories(dir);
      fs::copy_file(cases_dir / entry["id"].get<std::string>() / "pod.json", dir / "pod.json");
      fs::copy_file(cases_dir / entry["id"].get<std::string>() / "expected.json", dir / "expected.json");
      Json tmpl = c.conversion.templates[0].object;
      Json patch = c.conversion.patch;
      breaker(id == "control-patch" ? patch : tmpl);
      WriteFile(dir / "patch.json", patch.dump());
      WriteFile(dir / "templates.json", Json::array({tmpl}).dump());
      entry["id"] = id;
      entry["name"] = id + " (" + entry["name"].get<std::string>() + ")";
      index["controls"].push_back(entry);
      return;
    }
    ADD_FAILURE() << "no " << topo << " [" << variant << "] case with placement " << placement << " for " << id;
  };
  // pcieRoot without its constraint: 2 T4s of different roots become choosable.
  control("control-pcie", "g4dn", "gpus-2", "pcieRoot", [](Json& t) { t["spec"]["spec"]["devices"].erase("constraints"); });
  // NUMA alternatives without their pcieRoot restriction: 4 T4s across sockets become choosable.
  control("control-numa", "g4dn", "gpus-4", "numa", [](Json& t) {
    for (auto& r : t["spec"]["spec"]["devices"]["requests"]) {
      if (!r.contains("firstAvailable")) continue;
      for (auto& a : r["firstAvailable"]) a["selectors"].erase(a["selectors"].size() - 1);
    }
  });
  // NVLink cliques without their pciBusID restriction: P100s of different cliques become choosable.
  control("control-nvlink", "minsky", "gpus-2+nvlink", "nvlink", [](Json& t) {
    for (auto& r : t["spec"]["spec"]["devices"]["requests"]) {
      if (!r.contains("firstAvailable")) continue;
      for (auto& a : r["firstAvailable"]) a["selectors"].erase(a["selectors"].size() - 1);
    }
  });
  // Rails without their pair constraints: a NIC under another GPU's root becomes choosable.
  control("control-rails", "xe8640", "gpus-2+nic-rdma", "nvlink", [](Json& t) {
    Json& devices = t["spec"]["spec"]["devices"];
    ASSERT_NE(devices.dump().find("gpu-rail-1-nic"), std::string::npos) << devices.dump();
    devices.erase("constraints");
  });
  // A patch that loses its last operation.
  control("control-patch", "r740", "base", "none", [](Json& p) { p.erase(p.size() - 1); });
  WriteFile(cases_dir / "index.json", index.dump());

  // 1. The patch, applied by python3-jsonpatch, gives the converted Pod (writes patched.json).
  std::string out = RunCommand("python3 " + Quote((kTools / "apply_json_patch.py").string()) + " " +
                            Quote(cases_dir.string()) + " 2>&1",
                        &rc);
  Json py = Json::parse(out, nullptr, false);
  ASSERT_TRUE(rc == 0 && !py.is_discarded()) << "apply_json_patch.py failed (" << rc << "): " << out.substr(0, 2000);
  EXPECT_EQ(py.value("checked", 0), static_cast<int>(F().converted.size()) + 5);  // + the controls
  bool patch_control_caught = false;
  for (const auto& failure : py["failures"]) {
    if (failure.value("case", "").rfind("control-", 0) == 0) {
      patch_control_caught = patch_control_caught || failure.value("case", "") == "control-patch";
      continue;
    }
    ADD_FAILURE() << "json patch: " << failure.dump();
  }
  EXPECT_TRUE(patch_control_caught) << "apply_json_patch.py did not notice a patch with an operation missing";

  // 2. Schemas, names, selectors, device sets, ground truth (reads patched.json).
  out = RunCommand("cd " + Quote(kTools.string()) + " && node check_mutation.mjs " + Quote(cases_dir.string()) + " 2>&1",
            &rc);
  Json js = Json::parse(out, nullptr, false);
  ASSERT_TRUE(!js.is_discarded()) << "check_mutation.mjs failed (" << rc << "): " << out.substr(0, 4000);
  for (const auto& line : js["log"]) std::cout << "  " << line.get<std::string>() << "\n";
  int shown = 0;
  for (const auto& failure : js["failures"]) {
    if (++shown > 60) break;
    ADD_FAILURE() << failure.get<std::string>();
  }
  EXPECT_EQ(js["failures"].size(), 0u) << js["failures"].size() << " failures (first 60 shown)";
  for (const char* id : {"control-pcie", "control-numa", "control-nvlink", "control-rails"}) {
    const Json& got = js["controls"].value(id, Json::array());
    bool misaligned = false;
    for (const auto& m : got) misaligned = misaligned || m.get<std::string>().find(" may get ") != std::string::npos;
    EXPECT_TRUE(misaligned) << id << ": check_mutation.mjs did not find the misaligned device sets it should: "
                            << got.dump();
    if (!got.empty()) std::cout << "  " << id << " caught: " << got[0].get<std::string>().substr(0, 240) << "\n";
  }
  const Json& s = js["summary"];
  std::cout << "mutation fixtures summary: " << F().converted.size() << " converted / " << F().refused.size()
            << " refused / " << F().unchanged.size() << " unchanged; patches checked " << py.value("checked", 0)
            << "; pods validated " << s.value("pods", 0) << ", templates validated " << s.value("templates", 0)
            << ", selector evaluations " << s.value("evaluations", 0) << ", device sets checked "
            << s.value("sets", 0) << ", failures " << js["failures"].size() << "\n";
  EXPECT_EQ(s.value("pods", 0), static_cast<int>(F().converted.size() + index["controls"].size()));
  EXPECT_GT(s.value("sets", 0), 1000);
  EXPECT_GT(s.value("rails", 0), 0) << "no rail-aligned claim was enumerated";
}

// ---- CPUs in claims (mutation.cpu) ----------------------------------------------------------
//
// The legacy Pods converted again under a policy that puts whole CPUs into the claims of the
// GPUs (mutation.cpu.mode grouped and individual, with mutation.numaAlignment numaNode), checked
// by the same tools: the patch by python3-jsonpatch, the Pods and templates by check_mutation.mjs,
// which proves from the constraints that CPUs and GPUs share a NUMA node and checks the GPU sets
// and the CPUs per NUMA node against the ground truth (CPU devices are not enumerated).

// Whether a quantity is a whole number of CPUs ("16", 16, "16000m").
bool WholeCpu(const Json& q) {
  if (q.is_number_integer()) return q.get<int64_t>() > 0;
  if (!q.is_string()) return false;
  const std::string s = q.get<std::string>();
  if (s.empty()) return false;
  std::string digits = s;
  if (s.back() == 'm') {
    digits = s.substr(0, s.size() - 1);
    if (digits.size() < 4 || digits.substr(digits.size() - 3) != "000") return false;
  }
  return !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; }) &&
         digits.find_first_not_of('0') != std::string::npos;
}

// Gives every container with full GPUs `cpus` whole CPUs (requests and limits); with keep_whole,
// a container that already asks for whole CPUs (request, or limit without request) keeps them.
Json WithCpus(Json pod, int64_t cpus, bool keep_whole) {
  Json& spec = pod["spec"];
  if (!spec.contains("containers") || !spec["containers"].is_array()) return pod;
  for (auto& c : spec["containers"]) {
    if (!c.is_object() || !c.contains("resources") || !c["resources"].is_object()) continue;
    Json& res = c["resources"];
    bool gpu = false;
    for (const char* sec : {"limits", "requests"}) {
      gpu = gpu || (res.contains(sec) && res[sec].is_object() && res[sec].contains("nvidia.com/gpu"));
    }
    if (!gpu) continue;
    if (keep_whole) {
      const Json* req = res.contains("requests") && res["requests"].is_object() && res["requests"].contains("cpu")
                            ? &res["requests"]["cpu"] : nullptr;
      const Json* lim = res.contains("limits") && res["limits"].is_object() && res["limits"].contains("cpu")
                            ? &res["limits"]["cpu"] : nullptr;
      if (req != nullptr ? WholeCpu(*req) : (lim != nullptr && WholeCpu(*lim))) continue;
    }
    for (const char* sec : {"limits", "requests"}) {
      if (!res.contains(sec) || !res[sec].is_object()) res[sec] = Json::object();
      res[sec]["cpu"] = std::to_string(cpus);
    }
  }
  return pod;
}

struct CpuPass {
  std::string mode;  // "grouped" or "individual"
  policy::Policy policy;
  std::vector<Converted> converted;
  std::vector<Refused> refused;
  std::size_t unchanged = 0;
  std::size_t cpu_templates = 0;  // templates with a CPU request
};

struct CpuFixtures {
  std::vector<PodCase> pods;  // never resized once the passes point into it
  std::vector<CpuPass> passes;
  std::vector<std::string> errors;
  long long ms = 0;
};

CpuFixtures* g_cpu = nullptr;

// The default policy with mutation.numaAlignment numaNode and mutation.cpu.mode `mode`.
Result<policy::Policy> CpuPolicy(const std::string& mode) {
  std::string yaml(policy::DefaultPolicyYaml());
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"numaAlignment: pcieRoots", "numaAlignment: numaNode"}, {"cpu: {mode: none", "cpu: {mode: " + mode}}) {
    const auto at = yaml.find(from);
    if (at == std::string::npos) return Status::InvalidArgument("the default policy has no \"" + from + "\"");
    yaml.replace(at, from.size(), to);
  }
  return policy::ParsePolicy(yaml, "cpu-" + mode);
}

// The CPU variants of the legacy Pods with full GPUs: whole CPUs for every GPU container (8 unless
// it asks for whole CPUs; 24, more than a NUMA node of some exports has; 1, 2 and 4 for the
// exports with few CPUs per NUMA node: dgx2h's and the XE8640-like), with GPU counts and NICs.
const CpuFixtures& CpuF(const Fixtures& f) {
  if (g_cpu != nullptr) return *g_cpu;
  const auto start = std::chrono::steady_clock::now();
  g_cpu = new CpuFixtures();
  struct Variant {
    std::string name;
    int gpus;  // 0: as the Pod asks
    int64_t cpus;
    bool keep_whole;
    bool rdma;
  };
  const std::vector<Variant> variants = {
      {"cpu", 0, 8, true, false},           {"gpus-2+cpu", 2, 8, true, false},
      {"gpus-4+cpu", 4, 8, true, false},    {"gpus-8+cpu", 8, 8, true, false},
      {"gpus-2+nic-rdma+cpu", 2, 8, true, true}, {"gpus-2+cpu-24", 2, 24, false, false},
      {"gpus-1+nic-rdma+cpu-1", 1, 1, false, true}, {"gpus-2+cpu-2", 2, 2, false, false},
      {"gpus-16+cpu-4", 16, 4, false, false},   {"gpus-2+nic-rdma+cpu-2", 2, 2, false, true},
  };
  std::set<std::string> seen;
  for (const auto& base : f.base_pods) {
    if (!HasGpuKey(base.pod)) continue;
    for (const auto& v : variants) {
      Json pod = v.gpus > 0 ? WithGpuCount(base.pod, v.gpus) : base.pod;
      if (v.rdma) pod = WithAnnotation(pod, std::string(kNicAnnotation), "rdma");
      pod = WithCpus(pod, v.cpus, v.keep_whole);
      if (seen.insert(pod.dump()).second) g_cpu->pods.push_back({base.label, v.name, base.ns, std::move(pod)});
    }
  }
  for (const char* mode : {"grouped", "individual"}) {
    auto pol = CpuPolicy(mode);
    if (!pol.ok()) {
      g_cpu->errors.push_back(std::string(mode) + ": " + pol.status().ToString());
      continue;
    }
    CpuPass pass;
    pass.mode = mode;
    pass.policy = *pol;
    g_cpu->passes.push_back(std::move(pass));
  }
  // Individual mode differs from grouped only in the form of the CPU request (count N instead of
  // capacity): it gets the variants that matter for that form (N > 1 with and without parts, a NIC,
  // N = 1), to keep the test's runtime (files written, checked and removed) in bounds.
  const std::set<std::string> individual = {"gpus-2+cpu", "gpus-2+cpu-2", "gpus-16+cpu-4", "gpus-1+nic-rdma+cpu-1"};
  for (auto& pass : g_cpu->passes) {
    for (const auto& topo : f.topologies) {
      for (const auto& pc : g_cpu->pods) {
        if (pass.mode == "individual" && !individual.count(pc.variant)) continue;
        PodConversion c = ConvertPod(pc.pod, pc.ns, pass.policy, topo.snapshot.get());
        switch (c.outcome) {
          case PodConversion::Outcome::kUnchanged:
            ++pass.unchanged;
            break;
          case PodConversion::Outcome::kRefused:
            pass.refused.push_back({&topo, &pc, c.reason});
            break;
          case PodConversion::Outcome::kConverted: {
            for (const auto& t : c.templates) {
              for (const auto& r : t.object["spec"]["spec"]["devices"]["requests"]) {
                if (r.contains("exactly") && r["exactly"].value("deviceClassName", "") == pass.policy.mutation.cpu.device_class) {
                  ++pass.cpu_templates;
                  break;
                }
              }
            }
            Converted cv{&topo, &pc, std::move(c), {}};
            auto prof = ProfilePod(pc.pod, pass.policy);
            if (prof.ok()) cv.profile = *prof;
            pass.converted.push_back(std::move(cv));
            break;
          }
        }
      }
    }
  }
  g_cpu->ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  std::cout << "CPU variants: " << g_cpu->pods.size() << " pods";
  for (const auto& pass : g_cpu->passes) {
    std::cout << "; mutation.cpu " << pass.mode << ": " << pass.converted.size() << " converted (" << pass.cpu_templates
              << " templates with CPUs) / " << pass.refused.size() << " refused / " << pass.unchanged << " unchanged";
  }
  std::cout << " (" << g_cpu->ms << " ms)\n";
  return *g_cpu;
}

// Both CPU modes, checked as IndependentImplementationsAgree checks the default policy, plus the
// CPU checks of check_mutation.mjs; controls break a CPU claim or Pod on purpose.
TEST_F(MutationFixtures, CpuInClaimsIndependentlyChecked) {
  bool fatal = false;
  if (const std::string why = MissingCheckerTool(&fatal); !why.empty()) {
    if (fatal) FAIL() << why;
    GTEST_SKIP() << why;
  }
  int rc = 0;
  auto phase_start = std::chrono::steady_clock::now();
  std::vector<std::pair<std::string, long long>> phases;  // phase, ms
  auto phase = [&](const std::string& name) {
    const auto now = std::chrono::steady_clock::now();
    phases.emplace_back(name, std::chrono::duration_cast<std::chrono::milliseconds>(now - phase_start).count());
    phase_start = now;
  };
  const CpuFixtures& cf = CpuF(F());
  phase("convert");
  for (const auto& e : cf.errors) ADD_FAILURE() << e;
  ASSERT_EQ(cf.passes.size(), 2u);

  const fs::path cases_dir = F().work / "cpu-cases";
  fs::create_directories(cases_dir);
  const policy::Policy& pol0 = cf.passes[0].policy;
  Json index = {{"groundTruth", Json::array({(kData / "hwloc" / "ground-truth.md").string(),
                                             (kData / "hwloc-synthetic" / "ground-truth.md").string()})},
                {"gpuClass", pol0.device_classes.gpu.empty() ? "gpu.nvidia.com" : pol0.device_classes.gpu[0]},
                {"migClass", pol0.device_classes.mig.empty() ? "mig.nvidia.com" : pol0.device_classes.mig[0]},
                {"nicClass", pol0.mutation.nic.device_class},
                {"nicDriver", pol0.mutation.nic.driver},
                {"cpuClass", pol0.mutation.cpu.device_class},
                {"shapeLabel", std::string(topology::kShapeLabel)},
                {"topologies", TopologiesJson(F().topologies, pol0)},
                {"cases", Json::array()},
                {"controls", Json::array()}};
  std::size_t cases = 0;
  for (const auto& pass : cf.passes) {
    EXPECT_GT(pass.cpu_templates, 50u) << pass.mode;
    for (std::size_t i = 0; i < pass.converted.size(); ++i) {
      char id[48];
      std::snprintf(id, sizeof(id), "cpu-%s-%05zu", pass.mode.c_str(), i);
      index["cases"].push_back(WriteCase(pass.converted[i], pass.policy, cases_dir, id));
      ++cases;
    }
  }
  // Controls: a converted case of `mode` on `topo` [variant] whose first template has request
  // `request`, broken on purpose (template, patch and converted Pod); the checker must say `want`.
  std::map<std::string, std::string> wants;
  auto control = [&](const std::string& id, const std::string& mode, const std::string& topo, const std::string& variant,
                     const std::string& request, const std::string& want,
                     const std::function<void(Json& tmpl, Json& patch, Json& pod)>& breaker) {
    for (const auto& pass : cf.passes) {
      if (pass.mode != mode) continue;
      for (const auto& c : pass.converted) {
        if (c.topo->name != topo || c.pod->variant != variant || c.conversion.templates.size() != 1) continue;
        Json tmpl = c.conversion.templates[0].object;
        bool has = false;
        for (const auto& r : tmpl["spec"]["spec"]["devices"]["requests"]) has = has || r.value("name", "") == request;
        if (!has) continue;
        Json entry = WriteCase(c, pass.policy, cases_dir, id);
        Json patch = c.conversion.patch;
        Json pod = c.conversion.pod;
        breaker(tmpl, patch, pod);
        WriteFile(cases_dir / id / "patch.json", patch.dump());
        WriteFile(cases_dir / id / "expected.json", pod.dump());
        WriteFile(cases_dir / id / "templates.json", Json::array({tmpl}).dump());
        entry["name"] = id + " (" + entry["name"].get<std::string>() + ")";
        index["controls"].push_back(entry);
        wants[id] = want;
        return;
      }
    }
    ADD_FAILURE() << "no " << mode << " " << topo << " [" << variant << "] case with request " << request << " for " << id;
  };
  const std::string numa_attr = "resource.kubernetes.io/numaNode";
  // The numaNode constraint loses its CPU request: the CPUs may come from any NUMA node.
  control("control-cpu-untied", "grouped", "g4dn", "gpus-2+cpu", "cpu", "is not tied to", [&](Json& t, Json&, Json&) {
    for (auto& k : t["spec"]["spec"]["devices"]["constraints"]) {
      if (k.value("matchAttribute", "") != numa_attr) continue;
      Json kept = Json::array();
      for (const auto& r : k["requests"]) {
        if (r != "cpu") kept.push_back(r);
      }
      k["requests"] = kept;
    }
  });
  // One NUMA part's GPUs lose their CPUs (XE8640-like: one GPU and one CPU per NUMA node).
  control("control-cpu-part", "grouped", "xe8640", "gpus-2+cpu-2", "gpu-part-1", "is not tied to", [&](Json& t, Json&, Json&) {
    for (auto& k : t["spec"]["spec"]["devices"]["constraints"]) {
      Json kept = Json::array();
      for (const auto& r : k["requests"]) {
        if (r != "gpu-part-1") kept.push_back(r);
      }
      k["requests"] = kept;
    }
  });
  // The container's cpu is one more than the claim's CPUs: kubelet and scheduler count them twice.
  control("control-cpu-pod", "grouped", "g4dn", "gpus-2+cpu", "cpu", "its claim's CPUs", [&](Json&, Json& patch, Json& pod) {
    auto& cts = pod["spec"]["containers"];
    for (std::size_t i = 0; i < cts.size(); ++i) {
      bool lists = false;
      for (const auto& cl : cts[i]["resources"].value("claims", Json::array())) lists = lists || cl.value("request", "") == "cpu";
      if (!lists) continue;
      for (const char* sec : {"requests", "limits"}) {
        const std::string n = cts[i]["resources"][sec]["cpu"].get<std::string>();
        const std::string more = std::to_string(std::stoll(n) + 1);
        cts[i]["resources"][sec]["cpu"] = more;
        patch.push_back({{"op", "replace"}, {"path", "/spec/containers/" + std::to_string(i) + "/resources/" + sec + "/cpu"}, {"value", more}});
      }
      return;
    }
  });
  // More CPUs than any NUMA node has (the Pod asks for as many): the GPUs fit, their CPUs nowhere.
  control("control-cpu-room", "grouped", "g4dn", "gpus-2+cpu", "cpu", "do the GPUs fit with their CPUs", [&](Json& t, Json& patch, Json& pod) {
    for (auto& r : t["spec"]["spec"]["devices"]["requests"]) {
      if (r["name"] == "cpu") r["exactly"]["capacity"]["requests"]["dra.cpu/cpu"] = "4096";
    }
    auto& cts = pod["spec"]["containers"];
    for (std::size_t i = 0; i < cts.size(); ++i) {
      for (const auto& cl : cts[i]["resources"].value("claims", Json::array())) {
        if (cl.value("request", "") != "cpu") continue;
        for (const char* sec : {"requests", "limits"}) {
          cts[i]["resources"][sec]["cpu"] = "4096";
          patch.push_back({{"op", "replace"}, {"path", "/spec/containers/" + std::to_string(i) + "/resources/" + sec + "/cpu"}, {"value", "4096"}});
        }
      }
    }
  });
  // The NIC loses its pcieRoot tie to the GPU: another GPU's NIC, on another NUMA node, may come.
  control("control-cpu-nic", "grouped", "xe8640", "gpus-1+nic-rdma+cpu-1", "gpu-nic", "off the CPUs' NUMA node", [&](Json& t, Json&, Json&) {
    Json kept = Json::array();
    for (const auto& k : t["spec"]["spec"]["devices"]["constraints"]) {
      if (k.value("matchAttribute", "") == numa_attr) kept.push_back(k);
    }
    t["spec"]["spec"]["devices"]["constraints"] = kept;
  });
  // Rails split per NUMA node (XE8640-like: each GPU with its NIC on a NUMA node of its own, one
  // CPU each): the second rail's NIC loses its pcieRoot tie, so a NIC of another NUMA node may come.
  control("control-cpu-rail-part", "grouped", "xe8640", "gpus-2+nic-rdma+cpu-2", "cpu-part-1", "off the CPUs' NUMA node",
          [&](Json& t, Json&, Json&) {
            Json kept = Json::array();
            for (const auto& k : t["spec"]["spec"]["devices"]["constraints"]) {
              if (k["requests"] != Json::array({"gpu-rail-1", "gpu-rail-1-nic"})) kept.push_back(k);
            }
            t["spec"]["spec"]["devices"]["constraints"] = kept;
          });
  // Individual mode: one CPU device fewer than the container's cpu.
  control("control-cpu-individual", "individual", "g4dn", "gpus-2+cpu", "cpu", "its claim's CPUs", [&](Json& t, Json&, Json&) {
    for (auto& r : t["spec"]["spec"]["devices"]["requests"]) {
      if (r["name"] == "cpu") r["exactly"]["count"] = r["exactly"]["count"].get<int>() - 1;
    }
  });
  // The container no longer lists its CPU request: the CPUs would go to no container.
  auto drop_cpu_claims = [](Json& patch, Json& pod) {
    auto& cts = pod["spec"]["containers"];
    for (std::size_t i = 0; i < cts.size(); ++i) {
      auto& claims = cts[i]["resources"]["claims"];
      for (std::size_t j = claims.size(); j-- > 0;) {
        if (claims[j].value("request", "") != "cpu") continue;
        claims.erase(j);
        patch.push_back({{"op", "remove"}, {"path", "/spec/containers/" + std::to_string(i) + "/resources/claims/" + std::to_string(j)}});
      }
    }
  };
  control("control-cpu-unlisted", "grouped", "g4dn", "gpus-2+cpu", "cpu", "no container lists CPU request",
          [&](Json&, Json& patch, Json& pod) { drop_cpu_claims(patch, pod); });
  // The claim loses its CPU request altogether: the container's whole CPUs stay with the kubelet.
  control("control-cpu-dropped", "grouped", "g4dn", "gpus-2+cpu", "cpu", "yet its claim has no CPU request",
          [&](Json& t, Json& patch, Json& pod) {
            Json& devices = t["spec"]["spec"]["devices"];
            Json reqs = Json::array();
            for (const auto& r : devices["requests"]) {
              if (r["name"] != "cpu") reqs.push_back(r);
            }
            devices["requests"] = reqs;
            devices.erase("constraints");
            drop_cpu_claims(patch, pod);
          });
  // A topology whose simulated devices lie: a GPU of NUMA node 1 publishes numaNode 0, and the
  // model's NUMA node 0 has one CPU fewer than the export's cpuset.
  {
    Json lies = index["topologies"]["g4dn"];
    bool lied = false;
    for (auto& [node, n] : lies["nodes"].items()) {
      for (auto& d : n["devices"]) {
        if (lied || d["kind"] != "gpu") continue;
        Json& numa = d["attributes"]["resource.kubernetes.io"]["numaNode"];
        if (numa.is_object() && numa.value("int", -1) == 1) {
          numa["int"] = 0;
          lied = true;
        }
      }
      n["numaNodes"][0]["cpus"] = n["numaNodes"][0]["cpus"].get<int>() - 1;
    }
    EXPECT_TRUE(lied) << "no g4dn GPU publishes numaNode 1";
    index["topologies"]["control-g4dn-lies"] = lies;
    wants["control-g4dn-lies"] = "in the export's NUMANode cpusets";
    control("control-cpu-gpu-numa", "grouped", "g4dn", "gpus-2+cpu", "cpu", "ground truth: local to NUMA 1", [](Json&, Json&, Json&) {});
    if (!index["controls"].empty()) index["controls"].back()["topology"] = "control-g4dn-lies";
  }
  // Three claims of one Pod that fit each alone but not together: the container and two copies
  // of it with copies of its claim (XE8640-like: 4 GPUs and one CPU on each of 4 NUMA nodes; each
  // claim takes 2 GPUs and 2 CPUs in NUMA parts).
  [&] {
    for (const auto& c : cf.passes[0].converted) {
      if (c.topo->name != "xe8640" || c.pod->variant != "gpus-2+cpu-2" || c.conversion.templates.size() != 1 ||
          c.conversion.pod["spec"]["containers"].size() != 1) {
        continue;
      }
      const std::string id = "control-cpu-together";
      Json entry = WriteCase(c, cf.passes[0].policy, cases_dir, id);
      Json pod = c.conversion.pod;
      Json patch = c.conversion.patch;
      const Json tmpl = c.conversion.templates[0].object;
      Json templates = Json::array({tmpl});
      const Json container = pod["spec"]["containers"][0];
      for (int k = 1; k <= 2; ++k) {
        Json copy = tmpl;
        copy["metadata"]["name"] = tmpl["metadata"]["name"].get<std::string>() + "-" + std::to_string(k);
        templates.push_back(copy);
        const std::string claim = "draguard-copy-" + std::to_string(k);
        Json rc_entry = {{"name", claim}, {"resourceClaimTemplateName", copy["metadata"]["name"]}};
        pod["spec"]["resourceClaims"].push_back(rc_entry);
        patch.push_back({{"op", "add"}, {"path", "/spec/resourceClaims/-"}, {"value", rc_entry}});
        Json ct = container;
        ct["name"] = container.value("name", "c") + "-" + std::to_string(k);
        for (auto& cl : ct["resources"]["claims"]) cl["name"] = claim;
        pod["spec"]["containers"].push_back(ct);
        patch.push_back({{"op", "add"}, {"path", "/spec/containers/-"}, {"value", ct}});
        entry["templateEntries"].push_back(entry["templateEntries"][0]);
        entry["placements"].push_back(entry["placements"][0]);
      }
      WriteFile(cases_dir / id / "patch.json", patch.dump());
      WriteFile(cases_dir / id / "expected.json", pod.dump());
      WriteFile(cases_dir / id / "templates.json", templates.dump());
      entry["name"] = id + " (" + entry["name"].get<std::string>() + ")";
      index["controls"].push_back(entry);
      wants[id] = "but on none together";
      return;
    }
    ADD_FAILURE() << "no single-container grouped xe8640 [gpus-2+cpu-2] case for control-cpu-together";
  }();
  WriteFile(cases_dir / "index.json", index.dump());
  phase("write cases");

  std::string out = RunCommand("python3 " + Quote((kTools / "apply_json_patch.py").string()) + " " +
                                   Quote(cases_dir.string()) + " 2>&1",
                               &rc);
  phase("python3-jsonpatch");
  Json py = Json::parse(out, nullptr, false);
  ASSERT_TRUE(rc == 0 && !py.is_discarded()) << "apply_json_patch.py failed (" << rc << "): " << out.substr(0, 2000);
  EXPECT_EQ(py.value("checked", 0), static_cast<int>(cases + index["controls"].size()));
  for (const auto& failure : py["failures"]) {
    if (failure.value("case", "").rfind("control-", 0) != 0) ADD_FAILURE() << "json patch: " << failure.dump();
  }
  out = RunCommand("cd " + Quote(kTools.string()) + " && node check_mutation.mjs " + Quote(cases_dir.string()) + " 2>&1", &rc);
  phase("check_mutation.mjs");
  Json js = Json::parse(out, nullptr, false);
  ASSERT_TRUE(!js.is_discarded()) << "check_mutation.mjs failed (" << rc << "): " << out.substr(0, 4000);
  for (const auto& line : js["log"]) std::cout << "  " << line.get<std::string>() << "\n";
  int shown = 0;
  for (const auto& failure : js["failures"]) {
    if (++shown <= 60) ADD_FAILURE() << failure.get<std::string>();
  }
  EXPECT_EQ(js["failures"].size(), 0u) << js["failures"].size() << " failures (first 60 shown)";
  EXPECT_EQ(wants.size(), 12u);
  for (const auto& [id, want] : wants) {
    const Json& got = js["controls"].value(id, Json::array());
    std::string hit;
    for (const auto& m : got) {
      if (hit.empty() && m.get<std::string>().find(want) != std::string::npos) hit = m.get<std::string>();
    }
    EXPECT_FALSE(hit.empty()) << id << ": check_mutation.mjs did not say \"" << want << "\": " << got.dump();
    if (!hit.empty()) std::cout << "  " << id << " caught: " << hit.substr(0, 240) << "\n";
  }
  const Json& s = js["summary"];
  std::cout << "CPU fixtures summary: " << cases << " converted cases; CPU templates " << s.value("cpuTemplates", 0)
            << ", GPU sets tied to CPUs " << s.value("cpuSets", 0) << ", device sets " << s.value("sets", 0)
            << ", Pods with several claims allocated together " << s.value("podsTogether", 0)
            << ", failures " << js["failures"].size() << "\n";
  EXPECT_EQ(s.value("pods", 0), static_cast<int>(cases + index["controls"].size()));
  EXPECT_GT(s.value("cpuTemplates", 0), 200);
  EXPECT_GT(s.value("cpuSets", 0), 100);
  EXPECT_GT(s.value("cpuParts", 0), 0) << "no claim split into NUMA parts was enumerated";
  EXPECT_GT(s.value("cpuContainers", 0), 200);
  EXPECT_GT(s.value("cpuProofs", 0), 200);
  EXPECT_GT(s.value("cpuGpuDevicesChecked", 0), 100) << "no GPU device's numaNode was compared with the ground truth";
  EXPECT_GT(s.value("cpuSatisfiable", 0), 200);
  std::set<std::string> files;
  for (const auto& t : F().topologies) {
    for (const auto& [node, file] : t.files) files.insert(file);
  }
  EXPECT_EQ(s.value("numaFiles", 0), static_cast<int>(files.size())) << "CPUs per NUMA node not read from every export";

  // draguard's own validating rules (DG005, DG016 deny under a CPU mode) accept the result.
  static const engine::Registry kRegistry = engine::DefaultRegistry();
  const auto now = std::chrono::system_clock::time_point{} + std::chrono::hours(24 * 365 * 56);
  int reviewed = 0;
  for (const auto& pass : cf.passes) {
    std::set<std::string> templates_seen;
    for (const auto& c : pass.converted) {
      auto review = [&](const Json& object, const std::string& what) {
        auto req = RequestFor(object, c.pod->ns);
        engine::RuleInput in{req, pass.policy, c.topo->snapshot.get(), now};
        auto d = engine::Decide(engine::Evaluate(in, kRegistry), pass.policy);
        const std::string message = d.response.status ? d.response.status->message : std::string("?");
        EXPECT_TRUE(d.denied_rules.empty() && d.response.allowed)
            << pass.mode << " " << CaseName(*c.topo, *c.pod) << ": " << what << " denied: " << message;
        for (const auto& e : d.error_rules) ADD_FAILURE() << CaseName(*c.topo, *c.pod) << ": " << what << " rule error " << e;
        ++reviewed;
      };
      review(c.conversion.pod, "Pod");
      for (const auto& t : c.conversion.templates) {
        if (templates_seen.insert(c.topo->name + "/" + c.pod->ns + "/" + t.name).second) review(t.object, "ResourceClaimTemplate");
      }
    }
  }
  std::cout << "engine under mutation.cpu: " << reviewed << " converted Pods and templates reviewed\n";
  phase("engine");
  std::cout << "CPU fixtures time:";
  for (const auto& [name, ms] : phases) std::cout << " " << name << " " << ms << " ms;";
  std::cout << "\n";
}

// draguard's own validating rules accept what its mutation produced.
TEST_F(MutationFixtures, ValidatingRulesAllowConvertedPodsAndTemplates) {
  static const engine::Registry kRegistry = engine::DefaultRegistry();
  const auto now = std::chrono::system_clock::time_point{} + std::chrono::hours(24 * 365 * 56);
  std::map<std::string, int> warnings;
  std::set<std::string> templates_seen;
  int pods = 0, templates = 0;
  for (const auto& c : F().converted) {
    auto review = [&](const Json& object, const std::string& what) {
      auto req = RequestFor(object, c.pod->ns);
      engine::RuleInput in{req, F().policy, c.topo->snapshot.get(), now};
      auto d = engine::Decide(engine::Evaluate(in, kRegistry), F().policy);
      EXPECT_TRUE(d.denied_rules.empty() && d.response.allowed)
          << CaseName(*c.topo, *c.pod) << ": " << what << " denied: "
          << (d.response.status ? d.response.status->message : std::string("?")) << "\n"
          << object.dump();
      for (const auto& e : d.error_rules) ADD_FAILURE() << CaseName(*c.topo, *c.pod) << ": " << what << " rule error " << e;
      for (const auto& w : d.response.warnings) warnings[what + ": " + w]++;
    };
    review(c.conversion.pod, "Pod");
    ++pods;
    for (const auto& t : c.conversion.templates) {
      if (!templates_seen.insert(c.topo->name + "/" + c.pod->ns + "/" + t.name).second) continue;
      review(t.object, "ResourceClaimTemplate");
      ++templates;
    }
  }
  std::cout << "engine: " << pods << " converted Pods and " << templates << " templates reviewed; warnings:\n";
  for (const auto& [w, n] : warnings) std::cout << "  " << n << "x " << w << "\n";
}

// Converting again changes nothing; conversion is deterministic; names depend on the profile only;
// an existing claim called draguard-gpu is kept.
TEST_F(MutationFixtures, IdempotentAndDeterministic) {
  int checked = 0;
  for (const auto& c : F().converted) {
    const std::string name = CaseName(*c.topo, *c.pod);
    const topology::Snapshot* snap = c.topo->snapshot.get();
    // Idempotence.
    PodConversion again = ConvertPod(c.conversion.pod, c.pod->ns, F().policy, snap);
    EXPECT_EQ(again.outcome, PodConversion::Outcome::kUnchanged) << name << ": " << again.summary << again.reason;
    EXPECT_TRUE(again.patch.empty()) << name << ": " << again.patch.dump();
    // Determinism.
    PodConversion twice = ConvertPod(c.pod->pod, c.pod->ns, F().policy, snap);
    EXPECT_EQ(twice.patch, c.conversion.patch) << name;
    if (twice.templates.size() != c.conversion.templates.size()) {
      ADD_FAILURE() << name << ": converting twice gave another number of templates";
      continue;
    }
    for (std::size_t i = 0; i < twice.templates.size(); ++i) {
      EXPECT_EQ(twice.templates[i].name, c.conversion.templates[i].name) << name;
      EXPECT_EQ(twice.templates[i].object, c.conversion.templates[i].object) << name;
    }
    // Same profile, other container names: same template.
    Json renamed = c.pod->pod;
    for (const char* list : {"containers", "initContainers"}) {
      if (!renamed["spec"].contains(list) || !renamed["spec"][list].is_array()) continue;
      for (auto& ct : renamed["spec"][list]) {
        if (ct.is_object()) ct["name"] = "renamed-" + ct.value("name", std::string("x"));
      }
    }
    PodConversion other = ConvertPod(renamed, c.pod->ns, F().policy, snap);
    if (other.outcome != PodConversion::Outcome::kConverted ||
        other.templates.size() != c.conversion.templates.size()) {
      ADD_FAILURE() << name << ": renaming the containers changed the outcome: " << other.summary << other.reason;
      continue;
    }
    for (std::size_t i = 0; i < other.templates.size(); ++i) {
      EXPECT_EQ(other.templates[i].name, c.conversion.templates[i].name) << name << ": container names changed it";
    }
    // An existing claim named draguard-gpu.
    Json taken = c.pod->pod;
    Json existing = {{"name", "draguard-gpu"}, {"resourceClaimName", "preexisting-claim"}};
    if (!taken["spec"]["resourceClaims"].is_array()) taken["spec"]["resourceClaims"] = Json::array();
    taken["spec"]["resourceClaims"].push_back(existing);
    PodConversion kept = ConvertPod(taken, c.pod->ns, F().policy, snap);
    if (kept.outcome != PodConversion::Outcome::kConverted) {
      ADD_FAILURE() << name << ": an existing draguard-gpu claim changed the outcome: " << kept.reason;
      continue;
    }
    const Json& rcs = kept.pod["spec"]["resourceClaims"];
    int old_entries = 0;
    std::set<std::string> claim_names;
    for (const auto& rc : rcs) {
      if (rc == existing) ++old_entries;
      EXPECT_TRUE(claim_names.insert(rc.value("name", "")).second) << name << ": duplicate claim name " << rc.dump();
      if (rc.contains("resourceClaimTemplateName")) {
        EXPECT_NE(rc.value("name", ""), "draguard-gpu") << name;
      }
    }
    EXPECT_EQ(old_entries, 1) << name << ": the existing draguard-gpu entry was changed: " << rcs.dump();
    for (const auto& op : kept.patch) {
      const std::string path = op.value("path", "");
      // The existing entry (index of it in the original) is neither removed nor replaced.
      const std::string existing_path = "/spec/resourceClaims/" + std::to_string(taken["spec"]["resourceClaims"].size() - 1);
      EXPECT_FALSE(path.rfind(existing_path, 0) == 0 && op.value("op", "") != "add") << name << ": " << op.dump();
    }
    ++checked;
  }
  std::cout << "idempotence/determinism: " << checked << " cases\n";
  EXPECT_GT(checked, 0);
}

// The memory floors mean what users meant on the GPUs these topologies have.
TEST_F(MutationFixtures, MemoryFloorsAdmitTheMeantGpus) {
  const std::string pod = R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"m","annotations":{}},
    "spec":{"containers":[{"name":"c","image":"x","resources":{"limits":{"nvidia.com/gpu":1}}}]}})";
  struct Want {
    std::string topo, memory;
    bool converts;
  };
  const std::vector<Want> wants = {
      {"g4dn", "16G", true},     {"g4dn", "15Gi", true},   {"g4dn", "32Gi", false}, {"g4dn", "80Gi", false},
      // (dgx2h's export has no memory sizes, so 80Gi there is not decided by the topology.)
      {"dgx2h", "32Gi", true},   {"dgx2h", "32G", true},   {"dgx2h", "16G", true},
      {"r740", "32Gi", true},    {"lassen", "16G", true},  {"minsky", "16G", true}, {"minsky", "16Gi", true},
      {"minsky", "32Gi", false}, {"r740+lassen", "32Gi", true},
  };
  for (const auto& w : wants) {
    const Topology* topo = nullptr;
    for (const auto& t : F().topologies) {
      if (t.name == w.topo) topo = &t;
    }
    ASSERT_NE(topo, nullptr) << w.topo;
    Json p = Json::parse(pod);
    p["metadata"]["annotations"][std::string(kMemoryAnnotation)] = w.memory;
    auto c = ConvertPod(p, "team-a", F().policy, topo->snapshot.get());
    EXPECT_EQ(c.outcome == PodConversion::Outcome::kConverted, w.converts)
        << w.topo << " " << w.memory << ": " << c.summary << c.reason;
  }
}

// Minimal reproductions of what the fixture run found (see the checks above for the rules).
const Topology* FindTopology(const Fixtures& f, const std::string& name) {
  for (const auto& t : f.topologies) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

Json PodWithContainers(const std::vector<int>& gpus) {
  Json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"name", "repro"}}}, {"spec", {{"containers", Json::array()}}}};
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    pod["spec"]["containers"].push_back({{"name", "c" + std::to_string(i)},
                                         {"image", "cuda"},
                                         {"resources", {{"limits", {{"nvidia.com/gpu", gpus[i]}}}}}});
  }
  return pod;
}

// A Pod restricted to several nodes by name: the API server accepts exactly one value in a
// node field selector (matchFields metadata.name In [...]), so the patched Pod is rejected.
TEST_F(MutationFixtures, ReproNodeFieldSelectorHasOneValue) {
  const Topology* t = FindTopology(F(), "g4dn+dgx2h");  // g4dn-1, g4dn-2 (8x T4), dgx2h-1, dgx2h-2
  ASSERT_NE(t, nullptr);
  auto c = ConvertPod(PodWithContainers({4}), "team-a", F().policy, t->snapshot.get());
  ASSERT_EQ(c.outcome, PodConversion::Outcome::kConverted) << c.reason;
  const Json& terms =
      c.pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  for (const auto& term : terms) {
    for (const auto& req : term.value("matchFields", Json::array())) {
      EXPECT_EQ(req["values"].size(), 1u) << "rejected by the API server (\"must be only one value when `operator` is "
                                             "'In' or 'NotIn' for node field selector\"): "
                                          << req.dump();
    }
  }
}

// Several converted containers: each request is planned alone, so the claim can ask for more
// GPUs than any node has, and the requests of different containers share no pcieRoot
// constraint, which draguard's own DG005 denies when the template is created.
TEST_F(MutationFixtures, ReproSeveralContainersFitOneNode) {
  const Topology* t = FindTopology(F(), "r740");  // 2x V100, one per PCIe root
  ASSERT_NE(t, nullptr);
  auto c = ConvertPod(PodWithContainers({1, 1, 1}), "team-a", F().policy, t->snapshot.get());
  if (c.outcome == PodConversion::Outcome::kConverted) {
    ADD_FAILURE() << "3 GPUs converted for a topology whose only node has 2: " << c.summary;
  }
}

TEST_F(MutationFixtures, ReproSeveralContainersTemplateAllowedByOwnRules) {
  const Topology* t = FindTopology(F(), "g4dn");  // 8x T4
  ASSERT_NE(t, nullptr);
  auto c = ConvertPod(PodWithContainers({1, 1}), "team-a", F().policy, t->snapshot.get());
  ASSERT_EQ(c.outcome, PodConversion::Outcome::kConverted) << c.reason;
  static const engine::Registry kRegistry = engine::DefaultRegistry();
  for (const auto& tmpl : c.templates) {
    auto req = RequestFor(tmpl.object, "team-a");
    engine::RuleInput in{req, F().policy, t->snapshot.get(), {}};
    auto d = engine::Decide(engine::Evaluate(in, kRegistry), F().policy);
    EXPECT_TRUE(d.response.allowed) << (d.response.status ? d.response.status->message : std::string()) << "\n"
                                    << tmpl.object.dump();
  }
}

// The issue's reproducer: 4x H100 SXM, each GPU on its own PCIe root and NUMA node, all
// NVLink-connected. A 2-GPU Pod converts to NVLink placement: nothing to restrict (every pair is
// linked), no pcieRoot constraint (no root holds two), no per-node UUIDs (they are all zero).
TEST_F(MutationFixtures, ReproXe8640TwoGpusConvertNvlink) {
  const Topology* t = FindTopology(F(), "xe8640");
  ASSERT_NE(t, nullptr);
  for (int n : {2, 3, 4}) {
    auto c = ConvertPod(PodWithContainers({n}), "team-a", F().policy, t->snapshot.get());
    ASSERT_EQ(c.outcome, PodConversion::Outcome::kConverted) << n << ": " << c.reason;
    ASSERT_EQ(c.templates.size(), 1u);
    EXPECT_EQ(c.templates[0].placements, std::vector<Placement>{Placement::kNvlink});
    const Json& devices = c.templates[0].object["spec"]["spec"]["devices"];
    EXPECT_FALSE(devices.contains("constraints")) << devices.dump();
    EXPECT_EQ(devices["requests"][0]["exactly"]["count"], n);
    EXPECT_EQ(devices.dump().find("uuid"), std::string::npos) << devices.dump();
    EXPECT_FALSE(c.pod["spec"].contains("affinity")) << c.pod["spec"].dump();
    EXPECT_EQ(c.templates[0].object["spec"]["metadata"]["annotations"]["draguard.io/interconnect"], "nvlink");
  }
  // Asked for one PCIe root (or NUMA node) only: no NVLink fallback is wanted, none fits.
  Json pod = WithAnnotation(PodWithContainers({2}), std::string(kInterconnectAnnotation), "pcie");
  auto pcie = ConvertPod(pod, "team-a", F().policy, t->snapshot.get());
  EXPECT_EQ(pcie.outcome, PodConversion::Outcome::kConverted) << "pcie accepts NVLink as stronger: " << pcie.reason;
}

// A mixed cluster: NVLink shapes get the NVLink claim; an alternative that would be unaligned on
// the PCIe-only shape (r740: one V100 per root, different NUMA nodes) restricts the Pod.
TEST_F(MutationFixtures, ReproNvlinkShapesRestrictMixedCluster) {
  const Topology* t = FindTopology(F(), "xe8640+r740");
  ASSERT_NE(t, nullptr);
  auto c = ConvertPod(PodWithContainers({2}), "team-a", F().policy, t->snapshot.get());
  ASSERT_EQ(c.outcome, PodConversion::Outcome::kConverted) << c.reason;
  EXPECT_EQ(c.templates[0].nodes, std::vector<std::string>{"xe-1"});
}

// Partial meshes: the cliques are named by PCI bus address (stable across nodes of a shape).
TEST_F(MutationFixtures, ReproCliquesByBusAddress) {
  const Topology* t = FindTopology(F(), "minsky");
  ASSERT_NE(t, nullptr);
  auto c = ConvertPod(PodWithContainers({2}), "team-a", F().policy, t->snapshot.get());
  ASSERT_EQ(c.outcome, PodConversion::Outcome::kConverted) << c.reason;
  const std::string dump = c.templates[0].object.dump();
  EXPECT_NE(dump.find("pciBusID"), std::string::npos) << dump;
  EXPECT_EQ(dump.find("uuid"), std::string::npos) << dump;
  EXPECT_EQ(c.templates[0].placements, std::vector<Placement>{Placement::kNvlink});
  // 3 GPUs: no clique of 3; one NUMA node holds 2: refused with the numbers.
  auto three = ConvertPod(PodWithContainers({3}), "team-a", F().policy, t->snapshot.get());
  ASSERT_EQ(three.outcome, PodConversion::Outcome::kRefused);
  EXPECT_NE(three.reason.find("at most 2 NVLink-connected"), std::string::npos) << three.reason;
}

// No topology for any node: one GPU converts, several are refused with how to provide exports
// (or converted unaligned with a warning when the policy allows it).
TEST_F(MutationFixtures, NoTopologyRefusesMultiGpuWithHowTo) {
  auto one = ConvertPod(PodWithContainers({1}), "team-a", F().policy, nullptr);
  EXPECT_EQ(one.outcome, PodConversion::Outcome::kConverted) << one.reason;
  auto two = ConvertPod(PodWithContainers({2}), "team-a", F().policy, nullptr);
  ASSERT_EQ(two.outcome, PodConversion::Outcome::kRefused);
  EXPECT_NE(two.reason.find("--topology-dir"), std::string::npos) << two.reason;
  EXPECT_NE(two.reason.find("hwloc exports"), std::string::npos) << two.reason;
  policy::Policy lax = F().policy;
  lax.mutation.allow_unaligned = true;
  lax.fingerprint += "/unaligned";
  auto unaligned = ConvertPod(PodWithContainers({2}), "team-a", lax, nullptr);
  ASSERT_EQ(unaligned.outcome, PodConversion::Outcome::kConverted) << unaligned.reason;
  bool warned = false;
  for (const auto& w : unaligned.warnings) warned = warned || w.find("unaligned") != std::string::npos;
  EXPECT_TRUE(warned);
}

// mutation.interconnect: nvlink refuses what only a PCIe root could place (g4dn has no NVLink).
TEST_F(MutationFixtures, InterconnectPolicySetsWeakestClass) {
  const Topology* t = FindTopology(F(), "g4dn");
  ASSERT_NE(t, nullptr);
  policy::Policy strict = F().policy;
  strict.mutation.interconnect = "nvlink";
  strict.fingerprint += "/nvlink";
  auto c = ConvertPod(PodWithContainers({2}), "team-a", strict, t->snapshot.get());
  ASSERT_EQ(c.outcome, PodConversion::Outcome::kRefused);
  EXPECT_NE(c.reason.find("pairwise NVLink-connected"), std::string::npos) << c.reason;
  // The Pod annotation overrides the policy.
  auto relaxed = ConvertPod(WithAnnotation(PodWithContainers({2}), std::string(kInterconnectAnnotation), "auto"),
                            "team-a", strict, t->snapshot.get());
  EXPECT_EQ(relaxed.outcome, PodConversion::Outcome::kConverted) << relaxed.reason;
}

}  // namespace
}  // namespace draguard::mutation
