// `topology export` end to end, hermetically: a generated sysfs tree (HWLOC_FSROOT) stands in for
// the machine and a fake libnvidia-ml.so.1 (fake_nvml.cc) for the driver; what the fake NVML says
// must be what the loader reads back from the export.
#include "draguard/topology/exporter.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>

#include "draguard/topology/dra_devices.h"
#include "draguard/topology/loader.h"
#include "draguard/topology/shape_record.h"
#include "fake_node.h"

namespace draguard::topology {
namespace {

namespace fs = std::filesystem;
using topotest::FakeNode;

class ExporterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "draguard-export-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
    unsetenv("HWLOC_FSROOT");
    unsetenv("HWLOC_COMPONENTS");
    unsetenv("DRAGUARD_FAKE_NVML_SCENARIO");
  }

  // Writes the node and points libhwloc and the fake NVML at it.
  void Install(const FakeNode& node) {
    topotest::WriteSysfs(dir_ / "root", node);
    topotest::WriteScenario(dir_ / "scenario", node);
    setenv("HWLOC_FSROOT", (dir_ / "root").c_str(), 1);
    // No cpuid (the host's caches) and no libpciaccess (the host's PCI bus): only the tree.
    setenv("HWLOC_COMPONENTS", "-x86,-pci", 1);
    setenv("DRAGUARD_FAKE_NVML_SCENARIO", (dir_ / "scenario").c_str(), 1);
  }

  // Exports with the fake NVML and loads the result back.
  ParsedExport ExportAndLoad(const FakeNode& node, std::vector<std::string>* warnings = nullptr,
                             const std::string& library = DRAGUARD_FAKE_NVML) {
    Install(node);
    ExportOptions o;
    o.nvml_library = library;
    Result<LocalExport> exp = ExportThisNode(o);
    EXPECT_TRUE(exp.ok()) << exp.status().message();
    if (!exp.ok()) return {};
    xml_ = exp->xml;
    if (warnings != nullptr) *warnings = exp->warnings;
    Result<ParsedExport> p = ParseHwlocXml(exp->xml);
    EXPECT_TRUE(p.ok()) << p.status().message();
    return p.ok() ? std::move(p).value() : ParsedExport{};
  }

  uint64_t LinkMbps(const Shape& s, uint32_t a, uint32_t b) {
    for (const GpuLink& l : s.nvlink.peers) {
      if (l.a == std::min(a, b) && l.b == std::max(a, b)) return l.mbps;
    }
    return 0;
  }

  fs::path dir_;
  std::string xml_;
};

TEST(NvlinkBandwidth, PerVersionTable) {
  EXPECT_EQ(NvlinkLinkBandwidth(1), 20000u);
  for (uint32_t v = 2; v <= 6; ++v) EXPECT_EQ(NvlinkLinkBandwidth(v), 25000u) << v;
  EXPECT_EQ(NvlinkLinkBandwidth(7), 50000u);
  EXPECT_EQ(NvlinkLinkBandwidth(0), 0u);
  EXPECT_EQ(NvlinkLinkBandwidth(8), 0u);
}

TEST_F(ExporterTest, HgxNvswitchNodeRoundTrips) {
  const FakeNode node = topotest::HgxNode();
  std::vector<std::string> warnings;
  const ParsedExport p = ExportAndLoad(node, &warnings);
  EXPECT_TRUE(warnings.empty()) << warnings[0];
  const Shape& s = p.shape;
  ASSERT_EQ(s.gpus.size(), 8u);
  ASSERT_EQ(p.gpu_uuids.size(), 8u);
  ASSERT_EQ(s.numa_nodes.size(), 2u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(s.gpus[i].pci_bus_id, node.gpus[i].pci.bus);
    EXPECT_EQ(p.gpu_uuids[i], node.gpus[i].uuid);
    EXPECT_EQ(s.gpus[i].model, "NVIDIA H100 80GB HBM3");
    ASSERT_TRUE(s.gpus[i].memory_bytes.has_value());
    EXPECT_EQ(*s.gpus[i].memory_bytes, node.gpus[i].memory_mib << 20);
    EXPECT_EQ(s.gpus[i].memory_source, MemorySource::kNvmlTotalMemory);
    EXPECT_EQ(s.gpus[i].numa_nodes, std::vector<uint32_t>{node.gpus[i].pci.numa});
    EXPECT_EQ(s.gpus[i].mig_mode, MigMode::kDisabled);
    ASSERT_NE(s.gpus[i].pcie_root, kNoIndex);
  }
  // One host bridge per root bus: 8 GPUs + 4 switches.
  EXPECT_EQ(s.pcie_roots.size(), 12u);
  EXPECT_TRUE(s.nvlink.via_switch);
  ASSERT_EQ(s.nvlink.peers.size(), 28u);  // every pair, through the switches
  const uint64_t first = s.nvlink.peers[0].mbps;
  EXPECT_GT(first, 0u);
  for (const GpuLink& l : s.nvlink.peers) EXPECT_EQ(l.mbps, first);
  EXPECT_TRUE(s.derived.link_fully_connected);
  EXPECT_NE(xml_.find("subtype=\"NVSwitch\""), std::string::npos);
  EXPECT_NE(xml_.find("<distances2hetero"), std::string::npos);
  // GPU -> switch entries: 5/4/4/5 links of 25000 MB/s.
  EXPECT_NE(xml_.find("125000"), std::string::npos);
  EXPECT_NE(xml_.find("100000"), std::string::npos);
}

TEST_F(ExporterTest, AllToAllNodeRoundTrips) {
  const FakeNode node = topotest::AllToAllNode();
  const ParsedExport p = ExportAndLoad(node);
  const Shape& s = p.shape;
  ASSERT_EQ(s.gpus.size(), 4u);
  EXPECT_FALSE(s.nvlink.via_switch);
  EXPECT_EQ(s.nvlink.source, "NVLinkBandwidth");
  ASSERT_EQ(s.nvlink.peers.size(), 6u);
  for (const GpuLink& l : s.nvlink.peers) EXPECT_EQ(l.mbps, 150000u);  // 6 x NVLink4 x 25000
  EXPECT_NE(xml_.find("<distances2 type=\"OSDev\""), std::string::npos);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(p.gpu_uuids[i], node.gpus[i].uuid);
}

TEST_F(ExporterTest, PairsNodeKeepsOnlyThePairs) {
  const ParsedExport p = ExportAndLoad(topotest::PairsNode());
  const Shape& s = p.shape;
  ASSERT_EQ(s.gpus.size(), 4u);
  ASSERT_EQ(s.nvlink.peers.size(), 2u);
  EXPECT_EQ(LinkMbps(s, 0, 1), 100000u);  // 4 x NVLink3 x 25000
  EXPECT_EQ(LinkMbps(s, 2, 3), 100000u);
  EXPECT_EQ(LinkMbps(s, 0, 2), 0u);
  EXPECT_FALSE(s.derived.link_fully_connected);
  EXPECT_EQ(s.derived.max_gpus_per_clique, 2u);
  EXPECT_EQ(*s.gpus[0].memory_bytes, uint64_t{40960} << 20);
  EXPECT_EQ(s.gpus[0].model, "NVIDIA A100-SXM4-40GB");
}

TEST_F(ExporterTest, AGpuThatErrorsIsLeftOutWithAWarning) {
  FakeNode node = topotest::AllToAllNode();
  node.nvml_lines.push_back("error 1 nvmlDeviceGetUUID 15");  // GPU_IS_LOST
  std::vector<std::string> warnings;
  const ParsedExport p = ExportAndLoad(node, &warnings);
  const Shape& s = p.shape;
  ASSERT_EQ(s.gpus.size(), 4u);  // still on the PCI bus
  EXPECT_EQ(p.gpu_uuids[1], "");
  EXPECT_FALSE(s.gpus[1].memory_bytes.has_value());
  EXPECT_EQ(p.gpu_uuids[0], node.gpus[0].uuid);
  bool lost = false;
  for (const std::string& w : warnings) lost = lost || w.find("GPU is lost") != std::string::npos;
  EXPECT_TRUE(lost);
  EXPECT_EQ(s.nvlink.peers.size(), 3u);  // 0-2, 0-3, 2-3
  EXPECT_EQ(LinkMbps(s, 0, 1), 0u);
  EXPECT_EQ(LinkMbps(s, 0, 2), 150000u);
}

TEST_F(ExporterTest, MigModeAndGpuInstancesAreRecorded) {
  FakeNode node = topotest::PairsNode();
  node.gpus[0].mig = true;
  node.nvml_lines.push_back("profile 0 2 14 3 20096 2");  // index 2: 3 slices, 3g.20gb
  node.nvml_lines.push_back("profile 0 0 19 1 4864 7");   // index 0: 1g.5gb
  node.nvml_lines.push_back("instance 0 14 1 0 4");
  node.nvml_lines.push_back("instance 0 14 2 4 4");
  node.nvml_lines.push_back("profile 1 0 19 1 4864 7");  // GPU 1 has profiles but MIG disabled
  node.nvml_lines.push_back("instance 1 19 9 0 1");
  const ParsedExport p = ExportAndLoad(node);
  const Shape& s = p.shape;
  ASSERT_EQ(s.gpus.size(), 4u);
  EXPECT_EQ(s.gpus[0].mig_mode, MigMode::kEnabled);
  ASSERT_EQ(s.gpus[0].mig_instances.size(), 2u);
  const MigInstance& m = s.gpus[0].mig_instances[0];
  EXPECT_EQ(m.profile, "3g.20gb");
  EXPECT_EQ(m.id, 1u);
  EXPECT_EQ(m.profile_id, 14u);
  EXPECT_EQ(m.slices, 3u);
  EXPECT_EQ(m.memory_bytes, uint64_t{20096} << 20);
  EXPECT_EQ(m.placement_start, 0u);
  EXPECT_EQ(m.placement_size, 4u);
  EXPECT_EQ(s.gpus[0].mig_instances[1].id, 2u);
  EXPECT_EQ(s.gpus[0].mig_instances[1].placement_start, 4u);
  EXPECT_EQ(s.gpus[1].mig_mode, MigMode::kDisabled);
  EXPECT_TRUE(s.gpus[1].mig_instances.empty());
  // MIG is part of the shape: the same node without MIG has another fingerprint.
  FakeNode plain = topotest::PairsNode();
  const ParsedExport q = ExportAndLoad(plain);
  EXPECT_NE(q.shape.fingerprint, s.fingerprint);
}

// Profile strings as the NVIDIA DRA driver publishes them (go-nvlib's MigProfileInfo.String()):
// memory as an eighth-rounded share of the GPU's whole GB, and the profile index's suffix.
TEST_F(ExporterTest, MigProfileNamesFollowTheDriver) {
  FakeNode node = topotest::PairsNode();
  node.gpus[0].mig = true;                     // A100 40GB
  node.gpus[1].mig = true;
  node.gpus[1].memory_mib = 143771;            // an H200 (141 GB)
  node.gpus[1].name = "NVIDIA H200";
  node.nvml_lines.push_back("profile 0 7 20 1 4864 1");    // index 7 (1 slice, media extensions)
  node.nvml_lines.push_back("instance 0 20 3 6 1");
  node.nvml_lines.push_back("profile 0 4 0 7 40192 1");    // index 4: 7 slices
  node.nvml_lines.push_back("instance 0 0 4 0 8");
  node.nvml_lines.push_back("profile 1 0 19 1 16896 7");   // 16.5 GiB: 1/8 of 141 GB rounds to 18
  node.nvml_lines.push_back("instance 1 19 1 0 1");
  node.nvml_lines.push_back("profile 1 2 9 3 71680 2");    // 70 GiB: 1/2 of 141 GB rounds to 71
  node.nvml_lines.push_back("instance 1 9 2 4 4");
  const ParsedExport p = ExportAndLoad(node);
  const Shape& s = p.shape;
  ASSERT_EQ(s.gpus[0].mig_instances.size(), 2u);
  EXPECT_EQ(s.gpus[0].mig_instances[0].profile, "1g.5gb+me");
  EXPECT_EQ(s.gpus[0].mig_instances[1].profile, "7g.40gb");
  ASSERT_EQ(s.gpus[1].mig_instances.size(), 2u);
  EXPECT_EQ(s.gpus[1].mig_instances[0].profile, "1g.18gb");
  EXPECT_EQ(s.gpus[1].mig_instances[1].profile, "3g.71gb");
}

TEST_F(ExporterTest, WithoutNvmlThePlainExportLoadsAndWarns) {
  std::vector<std::string> warnings;
  const ParsedExport p = ExportAndLoad(topotest::AllToAllNode(), &warnings, (dir_ / "no-such-lib.so").string());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("NVML unavailable"), std::string::npos);
  ASSERT_EQ(p.shape.gpus.size(), 4u);  // from the PCI tree
  EXPECT_EQ(p.gpu_uuids[0], "");
  EXPECT_TRUE(p.shape.nvlink.peers.empty());
  EXPECT_EQ(p.shape.gpus[0].mig_mode, MigMode::kUnknown);
}

TEST_F(ExporterTest, AnNvmlThatFailsToInitialiseIsAWarning) {
  FakeNode node = topotest::AllToAllNode();
  node.nvml_lines.insert(node.nvml_lines.begin(), "init_error 9");  // driver not loaded
  std::vector<std::string> warnings;
  const ParsedExport p = ExportAndLoad(node, &warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("nvmlInit_v2"), std::string::npos);
  EXPECT_EQ(p.shape.gpus.size(), 4u);
}

TEST_F(ExporterTest, NvmlReportMatchesTheScenario) {
  FakeNode node = topotest::PairsNode();
  Install(node);
  Result<NvmlReport> r = ReadNvml(DRAGUARD_FAKE_NVML);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->gpus.size(), 4u);
  const NvmlGpu& g = r->gpus[0];
  EXPECT_EQ(g.pci_bus_id, node.gpus[0].pci.bus);
  EXPECT_EQ(g.uuid, node.gpus[0].uuid);
  ASSERT_EQ(g.links.size(), 5u);
  EXPECT_TRUE(g.links[0].active);
  EXPECT_EQ(g.links[0].version, 4u);
  EXPECT_EQ(g.links[0].remote_pci, node.gpus[1].pci.bus);
  EXPECT_FALSE(g.links[4].active);
}

// NVLink fabric membership (GB200/GB300 trays): NVML's cluster UUID and clique become the
// node's clique in the export, per node and outside the shape; a fabric not yet completed, failed,
// or GPUs that disagree give no clique (with a warning where NVML said why).
TEST_F(ExporterTest, TheNvlinkCliqueComesFromNvmlFabricInfo) {
  const std::string uuid = "3183419e-9edc-4f0e-86e8-d895a9fb06be";
  auto tray = [&](const std::vector<std::string>& fabric, bool v2_only = false) {
    FakeNode node = topotest::PairsNode();
    for (uint32_t g = 0; g < node.gpus.size() && g < fabric.size(); ++g) {
      if (!fabric[g].empty()) node.nvml_lines.push_back("fabric " + std::to_string(g) + " " + fabric[g]);
    }
    if (v2_only) node.nvml_lines.push_back("fabric_v2_only");
    return node;
  };
  const std::string done = uuid + " 17044 3 0";
  std::vector<std::string> warnings;
  ParsedExport all = ExportAndLoad(tray({done, done, done, done}), &warnings);
  EXPECT_EQ(all.nvlink_clique, uuid + ".17044");
  EXPECT_NE(xml_.find("NVIDIAGPUClique"), std::string::npos);
  EXPECT_EQ(FactsOf(all).nvlink_clique, all.nvlink_clique);
  // The clique is no hardware: a tray in another rack keeps the shape.
  ParsedExport other = ExportAndLoad(tray({"bbc2edac-6ffb-43a0-9053-cae96152c90a 17044 3 0", "", "", ""}));
  EXPECT_EQ(other.nvlink_clique, "bbc2edac-6ffb-43a0-9053-cae96152c90a.17044");
  EXPECT_EQ(other.shape.fingerprint, all.shape.fingerprint);
  EXPECT_EQ(EncodeShapeRecord(other), EncodeShapeRecord(all));
  // A driver that knows only v2 of the struct.
  Install(tray({done, done, done, done}, true));
  Result<NvmlReport> v2 = ReadNvml(DRAGUARD_FAKE_NVML);
  ASSERT_TRUE(v2.ok());
  ASSERT_TRUE(v2->gpus[0].fabric.has_value());
  EXPECT_EQ(v2->gpus[0].fabric->Clique(), uuid + ".17044");
  // Disagreeing GPUs: no clique.
  EXPECT_EQ(ExportAndLoad(tray({done, uuid + " 2 3 0", "", ""})).nvlink_clique, "");
  // In progress, failed, or a zero UUID: no clique, and a warning says why.
  for (const std::string& f : {uuid + " 1 2 0", uuid + " 1 3 999", std::string(32, '0') + " 1 3 0"}) {
    SCOPED_TRACE(f);
    ParsedExport p = ExportAndLoad(tray({f, "", "", ""}), &warnings);
    EXPECT_EQ(p.nvlink_clique, "");
    EXPECT_TRUE(std::any_of(warnings.begin(), warnings.end(),
                            [](const std::string& w) { return w.find("NVLink fabric") != std::string::npos; }))
        << ::testing::PrintToString(warnings);
  }
  // No fabric at all (NOT_SUPPORTED): nothing, silently.
  ParsedExport none = ExportAndLoad(tray({}), &warnings);
  EXPECT_EQ(none.nvlink_clique, "");
  EXPECT_TRUE(std::none_of(warnings.begin(), warnings.end(),
                           [](const std::string& w) { return w.find("fabric") != std::string::npos; }));
}

TEST_F(ExporterTest, LstopoAcceptsTheExport) {
  const char* lstopo = "/usr/bin/lstopo-no-graphics";
  if (!fs::exists(lstopo)) GTEST_SKIP() << "lstopo-no-graphics (Debian hwloc-nox) is not installed";
  (void)ExportAndLoad(topotest::HgxNode());
  const fs::path file = dir_ / "export.xml";
  std::ofstream(file) << xml_;
  unsetenv("HWLOC_FSROOT");
  const std::string cmd = std::string(lstopo) + " -i " + file.string() + " --of console > " +
                          (dir_ / "lstopo.out").string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << cmd;
  std::ifstream in(dir_ / "lstopo.out");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("nvml0"), std::string::npos) << text;
}

}  // namespace
}  // namespace draguard::topology

namespace draguard::topology {
namespace {

TEST_F(ExporterTest, MigInstancesAreSimulatedAsDraDevices) {
  FakeNode node = topotest::PairsNode();
  node.gpus[1].mig = true;
  node.nvml_lines.push_back("profile 1 2 14 3 20096 2");
  node.nvml_lines.push_back("instance 1 14 1 0 4");
  node.nvml_lines.push_back("instance 1 14 2 4 4");
  ParsedExport p = ExportAndLoad(node);
  NodeTopology n;
  n.name = "mig-node";
  n.gpu_uuids = p.gpu_uuids;
  n.shape = std::make_shared<const Shape>(std::move(p.shape));
  const std::vector<SimulatedDevice> devs = SimulateDraDevices(n);
  ASSERT_EQ(devs.size(), 5u);  // gpu-0, two MIG devices of gpu-1, gpu-2, gpu-3
  EXPECT_EQ(devs[0].name, "gpu-0");
  EXPECT_EQ(devs[0].mig_instance, -1);
  // The driver's canonical names (v0.5 mig.go): gpu-<minor>-mig-<profile without dots>-<id>-<start>.
  EXPECT_EQ(devs[1].name, "gpu-1-mig-3g20gb-14-0");
  EXPECT_EQ(devs[2].name, "gpu-1-mig-3g20gb-14-4");
  EXPECT_EQ(devs[3].name, "gpu-2");
  const SimulatedDevice& m = devs[1];
  EXPECT_EQ(m.gpu_index, 1u);
  EXPECT_EQ(m.mig_instance, 0);
  auto attr = [&](const std::string& name) -> std::string {
    for (const SimulatedAttribute& a : m.attributes) {
      if (a.name == name) return std::get<std::string>(a.value);
    }
    return "";
  };
  EXPECT_EQ(attr("type"), "mig");
  EXPECT_EQ(attr("profile"), "3g.20gb");
  EXPECT_EQ(attr("parentUUID"), node.gpus[1].uuid);
  EXPECT_EQ(attr("pciBusID"), n.shape->gpus[1].pci_bus_id);
  // memory, then memorySlice0..3 (placement 0, size 4), each 1.
  ASSERT_EQ(m.capacity.size(), 5u);
  EXPECT_EQ(m.capacity[0].name, "memory");
  EXPECT_EQ(m.capacity[0].bytes, uint64_t{20096} << 20);
  EXPECT_EQ(m.capacity[1].name, "memorySlice0");
  EXPECT_EQ(m.capacity[4].name, "memorySlice3");
  EXPECT_EQ(m.capacity[4].bytes, 1u);
  EXPECT_EQ(devs[2].capacity[1].name, "memorySlice4");
  EXPECT_NE(std::find(m.unknown.begin(), m.unknown.end(), "gpu.nvidia.com/multiprocessors"), m.unknown.end());
}

TEST(MigDeviceNameTest, FollowsTheDriversCanonicalName) {
  EXPECT_EQ(MigDeviceName(0, "1g.10gb", 19, 0), "gpu-0-mig-1g10gb-19-0");
  EXPECT_EQ(MigDeviceName(3, "1g.10gb+me", 20, 6), "gpu-3-mig-1g10gb-me-20-6");
  EXPECT_EQ(MigDeviceName(1, "1c.2g.20gb", 14, 4), "gpu-1-mig-1c2g20gb-14-4");
  EXPECT_EQ(MigDeviceName(2, "1g.12gb-me", 15, 1), "gpu-2-mig-1g12gb-me-15-1");
}

}  // namespace
}  // namespace draguard::topology
