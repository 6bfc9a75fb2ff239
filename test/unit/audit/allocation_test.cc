// The allocation audit on real topologies: the ResourceSlices the drivers would publish for the
// g4dn.metal (8 T4s, two NUMA nodes, no NVLink) and the DGX-2H (16 V100s behind NVSwitches),
// claims allocated from them as kube-scheduler would, and the Pods that use them.
#include "draguard/audit/allocation.h"

#include <unistd.h>

#include <filesystem>
#include <tuple>

#include <gtest/gtest.h>

#include "draguard/dra/resource_slices.h"
#include "draguard/topology/snapshot.h"

namespace draguard::audit {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kG4dn = "aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml";
constexpr const char* kDgx2h = "hwloc_nvidia-dgx2h_2s-xeon8174_16xV100-SXM3_12xNVSwitch_nvlink-hetero.xml";

// A snapshot with the exports under the node names given.
std::shared_ptr<const topology::Snapshot> Load(const std::vector<std::pair<std::string, std::string>>& nodes) {
  fs::path tmp = fs::path(::testing::TempDir()) / ("allocation-topology-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  for (const auto& [node, file] : nodes) {
    fs::copy_file(fs::path(DRAGUARD_TEST_DATA) / "hwloc" / file, tmp / (node + ".xml"));
  }
  auto snap = topology::LoadSnapshot(tmp.string());
  fs::remove_all(tmp);
  return snap.ok() ? *snap : nullptr;
}

// Every slice the simulated drivers publish for the nodes of `snap`.
std::vector<json> Slices(const topology::Snapshot& snap, topology::CpuDeviceMode cpu = topology::CpuDeviceMode::kNone) {
  std::vector<json> out;
  for (const auto& node : snap.nodes()) {
    auto s = dra::BuildResourceSlices(*node, node->name, {cpu});
    EXPECT_TRUE(s.ok()) << s.status().message();
    for (const auto& d : s->drivers) out.insert(out.end(), d.slices.begin(), d.slices.end());
  }
  return out;
}

// An allocated claim: results (request, driver, device) on `node`.
json Claim(const std::string& name, const std::vector<std::tuple<std::string, std::string, std::string>>& results,
           const std::string& node, json spec = json::object()) {
  json r = json::array();
  for (const auto& [request, driver, device] : results) {
    r.push_back({{"request", request}, {"driver", driver}, {"pool", node}, {"device", device}});
  }
  if (!spec.contains("devices")) {
    json exactly = {{"deviceClassName", "gpu.nvidia.com"}, {"count", results.size()}};
    spec["devices"]["requests"] = json::array({json{{"name", "gpu"}, {"exactly", exactly}}});
  }
  json term = {{"matchFields", json::array({json{{"key", "metadata.name"}, {"operator", "In"}, {"values", {node}}}})}};
  json allocation = {{"devices", {{"results", r}}}, {"nodeSelector", {{"nodeSelectorTerms", json::array({term})}}}};
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata", {{"name", name}, {"namespace", "ml"}}},
          {"spec", spec},
          {"status", {{"allocation", allocation}}}};
}

std::tuple<std::string, std::string, std::string> GpuResult(const std::string& request, const std::string& device) {
  return {request, "gpu.nvidia.com", device};
}

// A bound Pod whose container "c" uses the claims by name (the whole claim).
json Pod(const std::string& name, const std::string& node, const std::vector<std::string>& claims) {
  json pod = json::parse(R"({"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "ml"},
                             "spec": {"resourceClaims": [], "containers": [{"name": "c", "image": "x",
                                                                            "resources": {"claims": []}}]}})");
  pod["metadata"]["name"] = name;
  pod["metadata"]["uid"] = "uid-" + name;
  pod["spec"]["nodeName"] = node;
  for (const auto& c : claims) {
    pod["spec"]["resourceClaims"].push_back({{"name", c}, {"resourceClaimName", c}});
    pod["spec"]["containers"][0]["resources"]["claims"].push_back({{"name", c}});
  }
  return pod;
}

// The Pod kube-scheduler's extended-resource claim serves (KEP-5004).
json LegacyPod(const std::string& name, const std::string& node, const std::string& claim) {
  json pod = json::parse(R"({"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "ml"},
    "spec": {"containers": [{"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 2}}}]},
    "status": {"extendedResourceClaimStatus": {"requestMappings": [
      {"containerName": "main", "resourceName": "nvidia.com/gpu", "requestName": "container-0-request-0"}]}}})");
  pod["metadata"]["name"] = name;
  pod["spec"]["nodeName"] = node;
  pod["status"]["extendedResourceClaimStatus"]["resourceClaimName"] = claim;
  return pod;
}

json SchedulerClaim(const std::string& name, const std::string& node, const std::vector<std::string>& devices) {
  std::vector<std::tuple<std::string, std::string, std::string>> results;
  for (const auto& d : devices) results.emplace_back("container-0-request-0", "gpu.nvidia.com", d);
  json spec = json::parse(R"({"devices": {"requests": [{"name": "container-0-request-0",
    "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount"}}]}})");
  spec["devices"]["requests"][0]["exactly"]["count"] = devices.size();
  json c = Claim(name, results, node, spec);
  c["metadata"]["annotations"] = {{"resource.kubernetes.io/extended-resource-claim", "true"}};
  return c;
}

// A claim spec with `requests` (name, class, count) and optional constraints (JSON text).
json Spec(const std::vector<std::tuple<std::string, std::string, int>>& requests, const std::string& constraints = "[]") {
  json spec;
  spec["devices"]["requests"] = json::array();
  for (const auto& [name, cls, count] : requests) {
    json exactly = {{"deviceClassName", cls}, {"count", count}};
    spec["devices"]["requests"].push_back({{"name", name}, {"exactly", exactly}});
  }
  spec["devices"]["constraints"] = json::parse(constraints);
  return spec;
}

// Runs the join in the order slices, claims, Pods and returns what it analysed.
std::vector<PodAllocation> Analyze(const topology::Snapshot* topo, const std::vector<json>& slices,
                                   const std::vector<json>& claims, const std::vector<json>& pods) {
  AllocationJoin join(topo);
  for (const auto& s : slices) join.AddSlice(s);
  for (const auto& c : claims) join.AddClaim(c);
  std::vector<PodAllocation> out;
  auto sink = [&](PodAllocation&& a) { out.push_back(std::move(a)); };
  for (const auto& p : pods) join.AddPod(p, sink);
  join.Finish(sink);
  return out;
}

// The slice device `device` of `driver` on the g4dn in `slices`.
json& SliceDeviceOf(std::vector<json>& slices, const std::string& driver, const std::string& device) {
  for (auto& s : slices) {
    if (s["spec"]["driver"] != driver || s["spec"]["nodeName"] != "g4dn") continue;
    for (auto& d : s["spec"]["devices"]) {
      if (d["name"] == device) return d;
    }
  }
  static json none;
  ADD_FAILURE() << "no device " << driver << "/" << device;
  return none;
}

class AllocationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    topo_ = Load({{"g4dn", kG4dn}, {"dgx", kDgx2h}});
    ASSERT_NE(topo_, nullptr);
    slices_ = Slices(*topo_);
  }
  std::shared_ptr<const topology::Snapshot> topo_;
  std::vector<json> slices_;
};

TEST_F(AllocationTest, ReadsWhatLocatesEachPublishedDevice) {
  std::optional<SliceRead> gpus, nics;
  for (const auto& s : slices_) {
    if (s["spec"]["pool"]["name"] != "g4dn") continue;
    auto r = ReadResourceSlice(s);
    ASSERT_TRUE(r);
    (r->driver == "gpu.nvidia.com" ? gpus : nics) = r;
  }
  ASSERT_TRUE(gpus && nics);
  EXPECT_EQ(gpus->devices.size(), 8u);
  const SliceDevice& g4 = gpus->devices[4].second;
  EXPECT_EQ(gpus->devices[4].first, "gpu-4");
  EXPECT_EQ(g4.kind, DeviceKind::kGpu);
  EXPECT_EQ(g4.node, "g4dn");
  EXPECT_EQ(g4.pci_bus_id, "0000:e7:00.0");
  EXPECT_EQ(g4.pcie_root, "pci0000:e6");
  EXPECT_FALSE(nics->devices.empty());
  EXPECT_EQ(nics->devices[0].second.kind, DeviceKind::kNic);

  // Unqualified names are the driver's; NVML's 8-digit domain and upper case are normalised; a
  // list-type NUMA attribute (KEP-5491) is read as its list.
  json slice = json::parse(R"({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
    "spec": {"driver": "gpu.nvidia.com", "nodeName": "n", "pool": {"name": "n", "generation": 3, "resourceSliceCount": 2},
             "devices": [{"name": "gpu-0", "attributes": {"type": {"string": "gpu"},
                                                          "pcieBusID": {"string": "00000000:3B:00.0"},
                                                          "resource.kubernetes.io/numaNode": {"ints": [1, 0]}}},
                         {"name": "channel-0", "attributes": {"type": {"string": "channel"}}}]}})");
  auto r = ReadResourceSlice(slice);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->generation, 3);
  EXPECT_EQ(r->slice_count, 2);
  ASSERT_EQ(r->devices.size(), 1u);  // nothing locates the channel
  EXPECT_EQ(r->devices[0].second.pci_bus_id, "0000:3b:00.0");
  EXPECT_EQ(r->devices[0].second.numa, (std::vector<int64_t>{0, 1}));
  EXPECT_FALSE(ReadResourceSlice(json{{"kind", "ConfigMap"}}));
}

TEST_F(AllocationTest, ReadsWhatAClaimPromises) {
  // Hand-written: GPUs and a NIC on one root, the GPUs declared NVLink.
  json spec = Spec({{"gpu", "gpu.nvidia.com", 2}, {"nic", "dranet", 1}},
                   R"([{"requests": ["gpu", "nic"], "matchAttribute": "resource.kubernetes.io/pcieRoot"},
                       {"matchAttribute": "gpu.nvidia.com/productName"}])");
  json c = Claim("c", {GpuResult("gpu", "gpu-0"), GpuResult("gpu", "gpu-1"), {"nic", "dra.net", "pci-0000-1a-00-0"}},
                 "g4dn", spec);
  c["metadata"]["annotations"] = {{"draguard.io/interconnect", "nvlink"}};
  auto a = ReadAllocatedClaim(c);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->origin, ClaimOrigin::kUser);
  ASSERT_EQ(a->results.size(), 3u);
  ASSERT_EQ(a->promises.size(), 2u);  // productName is not about topology
  EXPECT_EQ(a->promises[0].kind, Promise::Kind::kPcieRoot);
  EXPECT_EQ(a->promises[0].results, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(a->promises[0].source, "constraint matchAttribute resource.kubernetes.io/pcieRoot (requests gpu, nic)");
  EXPECT_EQ(a->promises[1].kind, Promise::Kind::kNvlink);

  // Generated: the alternative chosen names its class; the nvlink annotation covers only the
  // nvlink alternatives.
  json gen_spec = json::parse(R"({"devices": {"requests": [{"name": "gpu", "firstAvailable": [
    {"name": "nvlink-1", "deviceClassName": "gpu.nvidia.com", "count": 2},
    {"name": "numa-1", "deviceClassName": "gpu.nvidia.com", "count": 2, "selectors": [{"cel": {"expression":
      "device.attributes['resource.kubernetes.io'].pcieRoot in ['pci0000:17', 'pci0000:34']"}}]}]}]}})");
  json g = Claim("g", {GpuResult("gpu/numa-1", "gpu-0"), GpuResult("gpu/numa-1", "gpu-2")}, "g4dn", gen_spec);
  g["metadata"]["labels"] = {{"app.kubernetes.io/managed-by", "draguard"}};
  g["metadata"]["annotations"] = {{"draguard.io/interconnect", "nvlink"}};
  auto ga = ReadAllocatedClaim(g);
  ASSERT_TRUE(ga);
  EXPECT_EQ(ga->origin, ClaimOrigin::kDraguard);
  ASSERT_EQ(ga->promises.size(), 1u);
  EXPECT_EQ(ga->promises[0].kind, Promise::Kind::kNuma);
  EXPECT_EQ(ga->promises[0].source, "alternative gpu/numa-1 of the claim draguard generated");

  // The same selector in a claim written by hand promises nothing (two roots); with one root it
  // promises that root.
  g["metadata"].erase("labels");
  g["metadata"].erase("annotations");
  g["status"]["allocation"]["devices"]["results"][0]["request"] = "gpu/numa-1";
  EXPECT_TRUE(ReadAllocatedClaim(g)->promises.empty());
  json one_spec = Spec({{"gpu", "gpu.nvidia.com", 2}});
  one_spec["devices"]["requests"][0]["exactly"]["selectors"] = json::parse(
      R"([{"cel": {"expression": "device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:17'"}}])");
  json one = Claim("one", {GpuResult("gpu", "gpu-0"), GpuResult("gpu", "gpu-1")}, "g4dn", one_spec);
  ASSERT_EQ(ReadAllocatedClaim(one)->promises.size(), 1u);
  EXPECT_EQ(ReadAllocatedClaim(one)->promises[0].kind, Promise::Kind::kPcieRoot);

  // kube-scheduler's claim; an unallocated claim is not read.
  EXPECT_EQ(ReadAllocatedClaim(SchedulerClaim("s", "g4dn", {"gpu-0", "gpu-1"}))->origin, ClaimOrigin::kScheduler);
  json pending = c;
  pending.erase("status");
  EXPECT_FALSE(ReadAllocatedClaim(pending));
}

TEST_F(AllocationTest, ReadsWhichClaimsAPodsContainersUse) {
  json pod = Pod("p", "g4dn", {"direct"});
  pod["spec"]["resourceClaims"].push_back({{"name", "gen"}, {"resourceClaimTemplateName", "draguard-0a71e0533dbd13802be7"}});
  pod["spec"]["initContainers"] = json::parse(
      R"([{"name": "init", "image": "x", "resources": {"claims": [{"name": "gen", "request": "gpu"}]}}])");
  pod["status"]["resourceClaimStatuses"] = {{{"name", "gen"}, {"resourceClaimName", "p-gen-x7k2p"}}};
  auto p = ReadPodClaims(pod);
  ASSERT_TRUE(p);
  ASSERT_EQ(p->containers.size(), 2u);
  EXPECT_EQ(p->containers[0].name, "init");
  EXPECT_EQ(p->containers[0].uses[0].claim, "p-gen-x7k2p");
  EXPECT_EQ(p->containers[0].uses[0].request, "gpu");
  EXPECT_EQ(p->containers[1].uses[0].claim, "direct");
  EXPECT_EQ(p->generated.count("p-gen-x7k2p"), 1u);

  auto legacy = ReadPodClaims(LegacyPod("l", "g4dn", "l-extended-resources-abc"));
  ASSERT_TRUE(legacy);
  EXPECT_EQ(legacy->extended_claim, "l-extended-resources-abc");
  EXPECT_EQ(legacy->containers[0].name, "main");
  EXPECT_EQ(legacy->containers[0].uses[0].request, "container-0-request-0");

  json pending = pod;
  pending["spec"].erase("nodeName");
  EXPECT_FALSE(ReadPodClaims(pending));  // not bound: nothing allocated yet
  EXPECT_FALSE(ReadPodClaims(json{{"apiVersion", "v1"}, {"kind", "Pod"}, {"spec", {{"nodeName", "n"}}}}));
}

// kube-scheduler's claim for two GPUs that landed on both NUMA nodes of the g4dn: spread, warned.
TEST_F(AllocationTest, ASchedulerClaimSpreadOverNumaNodesIsAWarning) {
  auto out = Analyze(topo_.get(), slices_, {SchedulerClaim("l-extended-resources-abc", "g4dn", {"gpu-3", "gpu-4"})},
                     {LegacyPod("l", "g4dn", "l-extended-resources-abc")});
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].containers.size(), 1u);
  const ContainerAllocation& c = out[0].containers[0];
  EXPECT_EQ(c.container, "main");
  EXPECT_EQ(c.gpus, 2u);
  EXPECT_EQ(c.origin, ClaimOrigin::kScheduler);
  EXPECT_EQ(c.alignment, Alignment::kNone);
  EXPECT_EQ(c.result, "warn");
  EXPECT_EQ(c.gpu_numa, (std::vector<uint32_t>{0, 1}));
  EXPECT_NE(c.message.find("gpu-3, gpu-4"), std::string::npos) << c.message;
  EXPECT_NE(c.message.find("under PCIe roots pci0000:34, pci0000:e6"), std::string::npos) << c.message;
  EXPECT_NE(c.message.find("on NUMA nodes 0, 1"), std::string::npos) << c.message;
  EXPECT_NE(c.message.find("kube-scheduler"), std::string::npos) << c.message;
  EXPECT_TRUE(Reportable(c));

  // The annotation on a claim the Pod's status does not name (anyone can write it) is not proof:
  // a hand-written claim, spread but promising nothing, passes.
  out = Analyze(topo_.get(), slices_, {SchedulerClaim("forged", "g4dn", {"gpu-3", "gpu-4"})},
                {Pod("f", "g4dn", {"forged"})});
  EXPECT_EQ(out[0].containers[0].origin, ClaimOrigin::kUser);
  EXPECT_EQ(out[0].containers[0].result, "pass");

  // Two GPUs of one NUMA node: aligned, pass.
  out = Analyze(topo_.get(), slices_, {SchedulerClaim("l-extended-resources-abc", "g4dn", {"gpu-1", "gpu-2"})},
                {LegacyPod("l", "g4dn", "l-extended-resources-abc")});
  EXPECT_EQ(out[0].containers[0].alignment, Alignment::kNuma);
  EXPECT_EQ(out[0].containers[0].result, "pass");
  // The DGX-2H: across its NUMA nodes, but every pair NVLink-connected: pass.
  out = Analyze(topo_.get(), slices_, {SchedulerClaim("d-extended-resources-abc", "dgx", {"gpu-0", "gpu-15"})},
                {LegacyPod("d", "dgx", "d-extended-resources-abc")});
  EXPECT_EQ(out[0].containers[0].alignment, Alignment::kNvlink);
  EXPECT_EQ(out[0].containers[0].one_numa, Proof::kNo);
  EXPECT_EQ(out[0].containers[0].result, "pass") << out[0].containers[0].message;
}

// The slice of the g4dn says gpu-4 shares gpu-0's root: the scheduler kept the constraint by the
// attribute, but the node's topology puts gpu-4 under another root. The promise is broken.
TEST_F(AllocationTest, AnAllocationWeakerThanItsConstraintPromisedFails) {
  SliceDeviceOf(slices_, "gpu.nvidia.com", "gpu-4")["attributes"]["resource.kubernetes.io/pcieRoot"] = {{"string", "pci0000:17"}};
  json spec = Spec({{"gpu", "gpu.nvidia.com", 2}}, R"([{"matchAttribute": "resource.kubernetes.io/pcieRoot"}])");
  auto out = Analyze(topo_.get(), slices_, {Claim("c", {GpuResult("gpu", "gpu-0"), GpuResult("gpu", "gpu-4")}, "g4dn", spec)},
                     {Pod("p", "g4dn", {"c"})});
  ASSERT_EQ(out.size(), 1u);
  const ContainerAllocation& c = out[0].containers[0];
  EXPECT_EQ(c.result, "fail");
  EXPECT_EQ(c.alignment, Alignment::kNone);
  ASSERT_EQ(c.broken.size(), 1u);
  EXPECT_NE(c.broken[0].message.find("claim \"c\" promises one PCIe root (constraint matchAttribute "
                                     "resource.kubernetes.io/pcieRoot (every request))"),
            std::string::npos)
      << c.broken[0].message;
  EXPECT_NE(c.broken[0].message.find("gpu-4 (pci0000:e6, NUMA 1; its slice publishes pci0000:17)"), std::string::npos)
      << c.broken[0].message;

  // Without the topology the published attributes are all there is: the promise looks kept.
  auto blind = Analyze(nullptr, slices_, {Claim("c", {GpuResult("gpu", "gpu-0"), GpuResult("gpu", "gpu-4")}, "g4dn", spec)},
                       {Pod("p", "g4dn", {"c"})});
  EXPECT_EQ(blind[0].containers[0].result, "pass");
  EXPECT_EQ(blind[0].containers[0].alignment, Alignment::kPcieRoot);
}

// A numaNode constraint over list-type attributes (KEP-5491: lists that intersect match) lets
// GPUs of two NUMA nodes through.
TEST_F(AllocationTest, AListTypeNumaAttributeThatMatchesTwoNumaNodesBreaksTheNumaPromise) {
  SliceDeviceOf(slices_, "gpu.nvidia.com", "gpu-0")["attributes"]["resource.kubernetes.io/numaNode"] = {{"ints", {0, 1}}};
  SliceDeviceOf(slices_, "gpu.nvidia.com", "gpu-4")["attributes"]["resource.kubernetes.io/numaNode"] = {{"ints", {1}}};
  json spec = Spec({{"gpu", "gpu.nvidia.com", 2}},
                   R"([{"requests": ["gpu"], "matchAttribute": "resource.kubernetes.io/numaNode"}])");
  auto out = Analyze(topo_.get(), slices_, {Claim("c", {GpuResult("gpu", "gpu-0"), GpuResult("gpu", "gpu-4")}, "g4dn", spec)},
                     {Pod("p", "g4dn", {"c"})});
  const ContainerAllocation& c = out[0].containers[0];
  EXPECT_EQ(c.result, "fail");
  ASSERT_EQ(c.broken.size(), 1u);
  EXPECT_NE(c.broken[0].message.find("promises one NUMA node"), std::string::npos) << c.broken[0].message;
  EXPECT_NE(c.broken[0].message.find("share no NUMA node by the node's topology"), std::string::npos);
}

TEST_F(AllocationTest, AClaimDeclaredNvlinkOnAServerWithoutNvlinkFails) {
  json c = Claim("c", {GpuResult("gpu", "gpu-0"), GpuResult("gpu", "gpu-1")}, "g4dn");
  c["metadata"]["annotations"] = {{"draguard.io/interconnect", "nvlink"}};
  auto out = Analyze(topo_.get(), slices_, {c}, {Pod("p", "g4dn", {"c"})});
  const ContainerAllocation& a = out[0].containers[0];
  EXPECT_EQ(a.alignment, Alignment::kPcieRoot);  // what it does share
  EXPECT_EQ(a.result, "fail");
  EXPECT_NE(a.message.find("promises NVLink between all its GPUs (annotation draguard.io/interconnect: nvlink)"),
            std::string::npos)
      << a.message;
  // On the DGX-2H the same declaration holds.
  json d = Claim("d", {GpuResult("gpu", "gpu-0"), GpuResult("gpu", "gpu-9")}, "dgx");
  d["metadata"]["annotations"] = {{"draguard.io/interconnect", "nvlink"}};
  out = Analyze(topo_.get(), slices_, {d}, {Pod("q", "dgx", {"d"})});
  EXPECT_EQ(out[0].containers[0].result, "pass");
  EXPECT_EQ(out[0].containers[0].alignment, Alignment::kNvlink);
}

// A generated claim's NUMA alternative restricted by PCIe roots: on a node where those roots are
// not on one NUMA node (the slice publishes other roots than the hardware has), the promise breaks.
TEST_F(AllocationTest, AGeneratedNumaAlternativeThatLandsOnTwoNumaNodesFails) {
  SliceDeviceOf(slices_, "gpu.nvidia.com", "gpu-6")["attributes"]["resource.kubernetes.io/pcieRoot"] = {{"string", "pci0000:34"}};
  json spec = Spec({{"gpu", "gpu.nvidia.com", 2}});
  spec["devices"]["requests"][0]["exactly"]["selectors"] = json::parse(
      R"([{"cel": {"expression": "device.attributes['resource.kubernetes.io'].pcieRoot in ['pci0000:17', 'pci0000:34']"}}])");
  json c = Claim("p-draguard-gpu-x", {GpuResult("gpu", "gpu-0"), GpuResult("gpu", "gpu-6")}, "g4dn", spec);
  c["metadata"]["labels"] = {{"app.kubernetes.io/managed-by", "draguard"}};
  auto out = Analyze(topo_.get(), slices_, {c}, {Pod("p", "g4dn", {"p-draguard-gpu-x"})});
  const ContainerAllocation& a = out[0].containers[0];
  EXPECT_EQ(a.origin, ClaimOrigin::kDraguard);
  EXPECT_EQ(a.result, "fail");
  EXPECT_NE(a.message.find("restricting resource.kubernetes.io/pcieRoot to the roots of one NUMA node"), std::string::npos)
      << a.message;
  // The claim kept: two GPUs of NUMA node 0 pass.
  c["status"]["allocation"]["devices"]["results"][1]["device"] = "gpu-2";
  out = Analyze(topo_.get(), slices_, {c}, {Pod("p", "g4dn", {"p-draguard-gpu-x"})});
  EXPECT_EQ(out[0].containers[0].result, "pass");
  EXPECT_EQ(out[0].containers[0].alignment, Alignment::kNuma);
}

TEST_F(AllocationTest, GpusAndCpusOnDifferentNumaNodesAreAWarning) {
  auto topo = Load({{"g4dn", kG4dn}});
  auto slices = Slices(*topo, topology::CpuDeviceMode::kGrouped);
  json spec = Spec({{"gpu", "gpu.nvidia.com", 1}, {"cpu", "dra.cpu", 1}});
  json apart = Claim("c", {GpuResult("gpu", "gpu-0"), {"cpu", "dra.cpu", "cpudevnuma001"}}, "g4dn", spec);
  auto out = Analyze(topo.get(), slices, {apart}, {Pod("p", "g4dn", {"c"})});
  ASSERT_EQ(out.size(), 1u);
  const ContainerAllocation& a = out[0].containers[0];
  EXPECT_EQ(a.alignment, Alignment::kSingle);
  EXPECT_EQ(a.cpu_numa, (std::vector<uint32_t>{1}));
  EXPECT_EQ(a.cpus_with_gpus, Proof::kNo);
  EXPECT_EQ(a.result, "warn");
  EXPECT_TRUE(Reportable(a));
  // With a numaNode constraint over both the scheduler would not have done it: a broken promise
  // only if the topology disagrees; here the CPUs are on the GPU's node.
  json together = Claim("c", {GpuResult("gpu", "gpu-0"), {"cpu", "dra.cpu", "cpudevnuma000"}}, "g4dn", spec);
  out = Analyze(topo.get(), slices, {together}, {Pod("p", "g4dn", {"c"})});
  EXPECT_EQ(out[0].containers[0].cpus_with_gpus, Proof::kYes);
  EXPECT_EQ(out[0].containers[0].result, "pass");
  EXPECT_NE(out[0].containers[0].message.find("CPUs on NUMA node 0, with its GPUs"), std::string::npos)
      << out[0].containers[0].message;
}

TEST_F(AllocationTest, OneGpuIsSingleAndNotReported) {
  auto out = Analyze(topo_.get(), slices_, {Claim("c", {GpuResult("gpu", "gpu-5")}, "g4dn")}, {Pod("p", "g4dn", {"c"})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].containers[0].alignment, Alignment::kSingle);
  EXPECT_EQ(out[0].containers[0].result, "pass");
  EXPECT_FALSE(Reportable(out[0].containers[0]));
  EXPECT_NE(out[0].containers[0].message.find("1 GPU (gpu-5) on node g4dn: under PCIe root pci0000:e6, on NUMA node 1"),
            std::string::npos)
      << out[0].containers[0].message;
}

// A container that names one request of a claim gets only that request's devices.
TEST_F(AllocationTest, AContainerGetsOnlyTheRequestItNames) {
  json spec = Spec({{"a", "gpu.nvidia.com", 2}, {"b", "gpu.nvidia.com", 1}});
  json c = Claim("c", {GpuResult("a", "gpu-0"), GpuResult("a", "gpu-1"), GpuResult("b", "gpu-7")}, "g4dn", spec);
  json pod = Pod("p", "g4dn", {"c"});
  pod["spec"]["containers"][0]["resources"]["claims"][0]["request"] = "a";
  pod["spec"]["containers"].push_back(
      json::parse(R"({"name": "d", "image": "x", "resources": {"claims": [{"name": "c", "request": "b"}]}})"));
  auto out = Analyze(topo_.get(), slices_, {c}, {pod});
  ASSERT_EQ(out[0].containers.size(), 2u);
  EXPECT_EQ(out[0].containers[0].gpus, 2u);
  EXPECT_EQ(out[0].containers[0].alignment, Alignment::kPcieRoot);
  EXPECT_EQ(out[0].containers[1].gpus, 1u);
  EXPECT_EQ(out[0].containers[1].devices[0].device, "gpu-7");
}

// A GPU published without a PCI address (older driver releases) is found by its UUID.
TEST_F(AllocationTest, AGpuWithoutAPciAddressIsLocatedByItsUuid) {
  for (const char* d : {"gpu-0", "gpu-1"}) {
    json& dev = SliceDeviceOf(slices_, "gpu.nvidia.com", d);
    dev["attributes"].erase("resource.kubernetes.io/pciBusID");
    dev["attributes"].erase("resource.kubernetes.io/pcieRoot");
  }
  auto out = Analyze(topo_.get(), slices_, {Claim("c", {GpuResult("gpu", "gpu-0"), GpuResult("gpu", "gpu-1")}, "g4dn")},
                     {Pod("p", "g4dn", {"c"})});
  const ContainerAllocation& c = out[0].containers[0];
  EXPECT_TRUE(c.devices[0].located);
  EXPECT_EQ(c.devices[0].pcie_root, "pci0000:17");  // from the model
  EXPECT_EQ(c.alignment, Alignment::kPcieRoot);
}

// Without a topology of the node (no export): what the slices publish, and what cannot be told.
TEST_F(AllocationTest, WithoutTopologyNvlinkIsUnknown) {
  auto out = Analyze(nullptr, slices_, {SchedulerClaim("x", "g4dn", {"gpu-3", "gpu-4"})}, {LegacyPod("l", "g4dn", "x")});
  const ContainerAllocation& c = out[0].containers[0];
  EXPECT_EQ(c.nvlink, Proof::kUnknown);
  EXPECT_EQ(c.one_root, Proof::kNo);
  EXPECT_EQ(c.alignment, Alignment::kUnknown);
  // The simulated driver publishes numaNode on the g4dn's GPUs: spread is still known.
  EXPECT_EQ(c.one_numa, Proof::kNo);
  EXPECT_EQ(c.result, "warn");
  EXPECT_NE(c.message.find("NVLink unknown"), std::string::npos) << c.message;
}

// The order of the input does not change the outcome: Pods before their claims and slices wait
// (compactly) and are analysed at the end; with every claim and slice first they are analysed at
// once. A pool split over two slices is complete only with both.
TEST_F(AllocationTest, TheJoinDoesNotDependOnTheOrder) {
  std::vector<json> claims = {SchedulerClaim("x", "g4dn", {"gpu-3", "gpu-4"}),
                              Claim("c", {GpuResult("gpu", "gpu-0"), GpuResult("gpu", "gpu-1")}, "g4dn")};
  std::vector<json> pods = {LegacyPod("l", "g4dn", "x"), Pod("p", "g4dn", {"c"}), Pod("unused", "g4dn", {"missing"})};
  auto first = Analyze(topo_.get(), slices_, claims, pods);

  AllocationJoin join(topo_.get());
  std::vector<PodAllocation> late;
  auto sink = [&](PodAllocation&& a) { late.push_back(std::move(a)); };
  for (const auto& p : pods) join.AddPod(p, sink, "dump.json: document 0 item 1");
  EXPECT_TRUE(late.empty());
  EXPECT_EQ(join.stats().waiting, 3u);
  for (const auto& c : claims) join.AddClaim(c);
  for (const auto& s : slices_) join.AddSlice(s);
  join.Finish(sink);
  ASSERT_EQ(late.size(), first.size());
  for (std::size_t i = 0; i < late.size(); ++i) {
    EXPECT_EQ(late[i].name, first[i].name);
    ASSERT_EQ(late[i].containers.size(), first[i].containers.size());
    for (std::size_t k = 0; k < late[i].containers.size(); ++k) {
      EXPECT_EQ(late[i].containers[k].message, first[i].containers[k].message);
    }
  }
  EXPECT_EQ(late[0].where, "dump.json: document 0 item 1");
  EXPECT_EQ(late.back().missing, (std::vector<std::string>{"missing"}));
  EXPECT_EQ(join.stats().peak_waiting, 3u);

  // Claims and slices first: analysed as each Pod arrives; a pool of two slices waits for both.
  json half;
  for (const auto& sl : slices_) {
    if (sl["spec"]["nodeName"] == "g4dn" && sl["spec"]["driver"] == "gpu.nvidia.com") half = sl;
  }
  half["spec"]["pool"]["resourceSliceCount"] = 2;
  AllocationJoin split(topo_.get());
  for (const auto& c : claims) split.AddClaim(c);
  split.AddSlice(half);
  std::vector<PodAllocation> now;
  auto now_sink = [&](PodAllocation&& a) { now.push_back(std::move(a)); };
  split.AddPod(pods[1], now_sink);
  EXPECT_TRUE(now.empty());  // the pool is not complete yet
  split.AddSlice(half);
  split.AddPod(pods[1], now_sink);
  EXPECT_EQ(now.size(), 1u);
}

// After ClaimsComplete only the devices claims name are held (the background audit lists the
// claims first); the caps bound what is held and are counted.
TEST_F(AllocationTest, HeldDevicesAndWaitingPodsAreBounded) {
  AllocationJoin join(topo_.get());
  join.AddClaim(Claim("c", {GpuResult("gpu", "gpu-0"), GpuResult("gpu", "gpu-1")}, "g4dn"));
  join.ClaimsComplete();
  for (const auto& s : slices_) join.AddSlice(s);
  EXPECT_EQ(join.stats().devices, 2u);
  EXPECT_EQ(join.stats().claims, 1u);

  AllocationJoin all(topo_.get());
  for (const auto& s : slices_) all.AddSlice(s);
  EXPECT_GT(all.stats().devices, 24u);  // 8 + 16 GPUs and the NICs

  AllocationLimits limits;
  limits.max_claims = 1;
  limits.max_devices = 3;
  limits.max_waiting_pods = 1;
  AllocationJoin capped(topo_.get(), limits);
  capped.AddClaim(Claim("a", {GpuResult("gpu", "gpu-0")}, "g4dn"));
  capped.AddClaim(Claim("b", {GpuResult("gpu", "gpu-1")}, "g4dn"));
  EXPECT_EQ(capped.stats().claims, 1u);
  std::vector<PodAllocation> out;
  auto sink = [&](PodAllocation&& a) { out.push_back(std::move(a)); };
  capped.AddPod(Pod("p1", "g4dn", {"a"}), sink);  // waits for its slices
  capped.AddPod(Pod("p2", "g4dn", {"a"}), sink);  // over the cap: analysed with what is known
  EXPECT_EQ(capped.stats().waiting, 1u);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].name, "p2");
  for (const auto& s : slices_) capped.AddSlice(s);
  EXPECT_EQ(capped.stats().devices, 3u);
  EXPECT_GE(capped.stats().dropped, 3u);
}

}  // namespace
}  // namespace draguard::audit
