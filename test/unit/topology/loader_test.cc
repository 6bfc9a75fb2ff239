// Loader behaviour on the real exports in test/data/hwloc: interconnects, formats, memory,
// NIC flags, derived answers, fingerprints.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "draguard/topology/dra_devices.h"
#include "draguard/topology/loader.h"
#include "draguard/topology/shape_record.h"
#include "draguard/topology/snapshot.h"

namespace draguard::topology {
namespace {

const std::string kDir = std::string(DRAGUARD_TEST_DATA) + "/hwloc/";
const std::string kDgx2 = "hwloc_nvidia-dgx2h_2s-xeon8174_16xV100-SXM3_12xNVSwitch_nvlink-hetero.xml";
const std::string kPower8 = "hwloc_ibm-power8-minsky_2s_4xP100-SXM2_nvlink-gpu-cpu-hetero.xml";
const std::string kTioga = "llnl_tioga_hpe-ex235a_epyc7a53_4numa_8xMI250X-GCD_rsmi_xgmi.xml";
const std::string kG4dn = "aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml";
const std::string kLassenV1 = "llnl_lassen_ibm-ac922_2s-power9_4xV100_v1format-hwloc1.11.xml";
const std::string kLassenV2 = "llnl_lassen_ibm-ac922_2s-power9_4xV100-SXM2_cuda-nvml_4xmlx5.xml";
const std::string kCondor = "hwloc_sgi-uv2000-condor_8numa_irregular-groups_2xK5000_restricted-allowed-set.xml";
const std::string kV3 = "hwloc3-format_nvidia-dgx2h_v3.0.xml";
const std::string kClemson = "clemson-palmetto_dell-r740_2s-gold6248_2xV100-PCIe_cuda-nvml_mlx5.xml";
const std::string kCorona = "llnl_corona_supermicro-4124gs_2s-epyc7402_8xMI50_rsmi-opencl.xml";
const std::string kSl390 = "hwloc_hp-sl390s-g7_2s-xeon_3xTesla-M2070_mlx4.xml";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ParsedExport Load(const std::string& file) {
  auto r = ParseHwlocFile(kDir + file);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : ParsedExport{};
}

std::string ReplaceAll(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
  return s;
}

TEST(LoaderTest, Dgx2AllToAllThroughNvSwitches) {
  ParsedExport p = Load(kDgx2);
  const Shape& s = p.shape;
  ASSERT_EQ(s.gpus.size(), 16u);
  EXPECT_EQ(s.nvlink.source, "NVLinkBandwidth");
  EXPECT_TRUE(s.nvlink.via_switch);
  ASSERT_EQ(s.nvlink.peers.size(), 16u * 15u / 2u);
  for (const GpuLink& l : s.nvlink.peers) EXPECT_EQ(l.mbps, 150000u) << l.a << "-" << l.b;  // 6 x 25000
  EXPECT_TRUE(s.nvlink.cpu_peers.empty());
  EXPECT_TRUE(s.derived.link_fully_connected);
  EXPECT_EQ(s.derived.max_gpus_per_clique, 16u);
  ASSERT_EQ(s.derived.link_cliques.size(), 1u);
  EXPECT_EQ(s.derived.max_gpus_per_root, 4u);
  EXPECT_EQ(s.derived.max_gpus_per_numa, 8u);
  // NVSwitches (class 0680) are not GPUs; nvml devices carry no memory size.
  for (const Gpu& g : s.gpus) {
    EXPECT_EQ(g.model, "Tesla V100-SXM3-32GB-H");
    EXPECT_FALSE(g.memory_bytes.has_value());
    EXPECT_EQ(g.memory_source, MemorySource::kUnknown);
  }
  ASSERT_EQ(p.gpu_uuids.size(), 16u);
  EXPECT_EQ(p.gpu_uuids[0].rfind("GPU-", 0), 0u);
}

TEST(LoaderTest, Power8GpuPairsAndCpuPeers) {
  ParsedExport p = Load(kPower8);
  const Shape& s = p.shape;
  ASSERT_EQ(s.gpus.size(), 4u);
  EXPECT_FALSE(s.nvlink.via_switch);
  const std::vector<GpuLink> want{{0, 1, 40000}, {2, 3, 40000}};
  EXPECT_EQ(s.nvlink.peers, want);
  const std::vector<CpuLink> cpu{{0, 0, 40000}, {1, 0, 40000}, {2, 1, 40000}, {3, 1, 40000}};
  EXPECT_EQ(s.nvlink.cpu_peers, cpu);
  EXPECT_FALSE(s.derived.link_fully_connected);
  EXPECT_EQ(s.derived.max_gpus_per_clique, 2u);
  const std::vector<std::vector<uint32_t>> cliques{{0, 1}, {2, 3}};
  EXPECT_EQ(s.derived.link_cliques, cliques);
  EXPECT_EQ(s.derived.link_peers[0], std::vector<uint32_t>{1});
  EXPECT_EQ(p.hwloc_version, "2.5.0a1-git");
}

TEST(LoaderTest, TiogaXgmiFullyConnectedWithRsmiMemory) {
  ParsedExport p = Load(kTioga);
  const Shape& s = p.shape;
  ASSERT_EQ(s.gpus.size(), 8u);
  EXPECT_EQ(s.nvlink.source, "");
  EXPECT_EQ(s.xgmi.source, "XGMIBandwidth");
  EXPECT_EQ(s.xgmi.peers.size(), 28u);
  EXPECT_TRUE(s.derived.link_fully_connected);
  EXPECT_EQ(s.derived.max_gpus_per_clique, 8u);
  for (const Gpu& g : s.gpus) {
    EXPECT_EQ(g.vendor, GpuVendor::kAmd);
    EXPECT_EQ(g.memory_source, MemorySource::kRsmiVram);
    ASSERT_TRUE(g.memory_bytes.has_value());
    EXPECT_EQ(*g.memory_bytes % 1024, 0u);
    EXPECT_EQ(g.partitions, 1u);
  }
  // Host bridges under L3Cache objects: one GPU per PCIe root.
  EXPECT_EQ(s.derived.max_gpus_per_root, 1u);
  EXPECT_EQ(s.derived.max_gpus_per_numa, 2u);
}

// MI300A in TPX mode: one PCI device carries three rsmi partitions (GPUModel empty on all but the
// first). It stays one GPU with partitions = 3, and its memory/model/UUID come from the first.
TEST(LoaderTest, RsmiPartitionsAreOneGpu) {
  std::string xml = ReadFile(kDir + kTioga);
  const std::string rsmi0_end = "<info name=\"XGMIPeers\" value=\"rsmi1 rsmi2 rsmi3 rsmi4 rsmi5 rsmi6 rsmi7 \"/>\n                </object>";
  const size_t at = xml.find(rsmi0_end);
  ASSERT_NE(at, std::string::npos);
  std::string parts;
  for (int k = 0; k < 2; ++k) {
    parts += "\n                <object type=\"OSDev\" gp_index=\"" + std::to_string(99990 + k) + "\" name=\"rsmi" +
             std::to_string(8 + k) + "\" subtype=\"RSMI\" osdev_type=\"1\">\n"
             "                  <info name=\"Backend\" value=\"RSMI\"/>\n"
             "                  <info name=\"GPUModel\" value=\"\"/>\n"
             "                </object>";
  }
  xml.insert(at + rsmi0_end.size(), parts);
  auto r = ParseHwlocXml(xml);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Shape& s = r->shape;
  ASSERT_EQ(s.gpus.size(), 8u);  // still 8 GPUs, counted by PCI device
  const Gpu& g = s.gpus[0];      // 0000:c1:00.0 carries rsmi0
  EXPECT_EQ(g.pci_bus_id, "0000:c1:00.0");
  EXPECT_EQ(g.partitions, 3u);
  EXPECT_EQ(g.os_devices, (std::vector<std::string>{"rsmi0", "rsmi8", "rsmi9"}));
  EXPECT_EQ(g.model, "AMD INSTINCT MI200 (MCM) OAM LC MBA HPE C2");
  EXPECT_EQ(g.memory_bytes, std::optional<uint64_t>(67092480ull * 1024));
  EXPECT_EQ(r->gpu_uuids[0], "4a7c19da329a2b8c");
  EXPECT_EQ(s.gpus[1].partitions, 1u);
}

TEST(LoaderTest, CudaMemoryIsKibAndSmCountRead) {
  ParsedExport p = Load(kG4dn);
  ASSERT_EQ(p.shape.gpus.size(), 8u);
  const Gpu& g = p.shape.gpus[0];
  EXPECT_EQ(g.memory_bytes, std::optional<uint64_t>(15472384ull * 1024));
  EXPECT_EQ(g.memory_source, MemorySource::kCudaGlobalMemory);
  EXPECT_EQ(g.sm_count, std::optional<uint32_t>(40));
  EXPECT_EQ(g.model, "Tesla T4");
  const std::vector<std::string> devs{"cuda0", "opencl0d0", "nvml0"};
  std::vector<std::string> sorted = g.os_devices;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::string> want = devs;
  std::sort(want.begin(), want.end());
  EXPECT_EQ(sorted, want);
}

TEST(LoaderTest, OpenClMemoryAndModelPreferredOverTruncatedRsmi) {
  ParsedExport p = Load(kCorona);
  ASSERT_EQ(p.shape.gpus.size(), 8u);
  for (const Gpu& g : p.shape.gpus) {
    EXPECT_EQ(g.memory_source, MemorySource::kOpenClGlobalMemory);
    EXPECT_EQ(g.model, "Vega 20 WKS GL-XE [Radeon Pro VII]");
  }
}

TEST(LoaderTest, NicRdmaFlags) {
  ParsedExport p = Load(kClemson);
  std::map<std::string, bool> rdma;
  for (const Nic& n : p.shape.nics) rdma[n.name] = n.rdma;
  EXPECT_TRUE(rdma.at("mlx5_0"));
  EXPECT_TRUE(rdma.at("enp24s0f0"));  // netdev of an RDMA function
  EXPECT_TRUE(rdma.at("ib0"));
  ParsedExport g = Load(kG4dn);
  std::map<std::string, bool> g_rdma;
  for (const Nic& n : g.shape.nics) g_rdma[n.name] = n.rdma;
  EXPECT_TRUE(g_rdma.at("rdmap197s0"));  // EFA
  EXPECT_FALSE(g_rdma.at("eth0"));       // ENA on another function
}

TEST(LoaderTest, LocalNicsSameRootThenSameNuma) {
  ParsedExport p = Load(kClemson);
  const Shape& s = p.shape;
  ASSERT_EQ(s.gpus.size(), 2u);
  // GPU 0 (0000:3b, NUMA 0) has no NIC under its root but two on NUMA 0; GPU 1 (0000:d8) shares
  // root pci0000:d7? no: ib0 is under pci0000:ae, same NUMA 1.
  EXPECT_TRUE(s.derived.nics_same_root[0].empty());
  std::vector<std::string> numa0;
  for (uint32_t n : s.derived.local_nics[0]) numa0.push_back(s.nics[n].name);
  std::sort(numa0.begin(), numa0.end());
  EXPECT_EQ(numa0, (std::vector<std::string>{"eno2np1", "enp24s0f0", "mlx5_0", "mlx5_1"}));
  ParsedExport t = Load(kTioga);
  // rsmi5 (0000:d6:00.0) shares root pci0000:d4 with hsi2.
  const Shape& ts = t.shape;
  uint32_t idx = kNoIndex;
  for (uint32_t i = 0; i < ts.gpus.size(); ++i) {
    if (ts.gpus[i].pci_bus_id == "0000:d6:00.0") idx = i;
  }
  ASSERT_NE(idx, kNoIndex);
  ASSERT_EQ(ts.derived.nics_same_root[idx].size(), 1u);
  EXPECT_EQ(ts.nics[ts.derived.nics_same_root[idx][0]].name, "hsi2");
  EXPECT_EQ(ts.nics[ts.derived.local_nics[idx][0]].name, "hsi2");  // same root first
  EXPECT_EQ(ts.derived.local_nics[idx].size(), 2u);                 // then ens2 on NUMA 0
}

TEST(LoaderTest, V1FormatLoads) {
  ParsedExport p = Load(kLassenV1);
  EXPECT_EQ(p.xml_format, "1.x");
  EXPECT_EQ(p.hwloc_version, "1.11.8");
  EXPECT_EQ(p.shape.gpus.size(), 4u);
  std::vector<uint32_t> numa;
  for (const NumaNode& n : p.shape.numa_nodes) numa.push_back(n.os_index);
  EXPECT_EQ(numa, (std::vector<uint32_t>{0, 8, 252, 253, 254, 255}));
  ParsedExport v2 = Load(kLassenV2);
  EXPECT_EQ(v2.xml_format, "2.0");
  // Same host, same GPU placement in both dialects.
  ASSERT_EQ(v2.shape.gpus.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(p.shape.gpus[i].pci_bus_id, v2.shape.gpus[i].pci_bus_id);
    EXPECT_EQ(p.shape.PcieRootId(p.shape.gpus[i]), v2.shape.PcieRootId(v2.shape.gpus[i]));
    EXPECT_EQ(p.shape.gpus[i].numa_nodes, v2.shape.gpus[i].numa_nodes);
  }
}

TEST(LoaderTest, V3FailsWithClearError) {
  LoadErrorReason reason;
  auto r = ParseHwlocFile(kDir + kV3, {}, &reason);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(reason, LoadErrorReason::kUnsupportedVersion);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("3.0"), std::string::npos);
  EXPECT_NE(r.status().message().find("--export-xml-flags v2"), std::string::npos);
}

TEST(LoaderTest, RestrictedAllowedSetKeepsAllNumaNodes) {
  ParsedExport p = Load(kCondor);
  EXPECT_EQ(p.shape.numa_nodes.size(), 8u);
  uint32_t cpus = 0;
  for (const NumaNode& n : p.shape.numa_nodes) cpus += n.cpus;
  EXPECT_EQ(cpus, 64u);
  // The Matrox G200eR2 BMC VGA (102b:0534) is not a GPU.
  ASSERT_EQ(p.shape.gpus.size(), 2u);
  EXPECT_EQ(p.shape.gpus[0].numa_nodes, std::vector<uint32_t>{4});
  EXPECT_EQ(p.shape.gpus[1].numa_nodes, std::vector<uint32_t>{7});
}

TEST(LoaderTest, BmcVgaAndNonGpuClassesExcluded) {
  const std::string xml = ReadFile(kDir + kSl390);
  auto base = ParseHwlocXml(xml);
  ASSERT_TRUE(base.ok());
  ASSERT_EQ(base->shape.gpus.size(), 3u);
  // Turn one Tesla into an ATI ES1000 BMC VGA: it must stop counting as a GPU.
  const std::string es1000 = ReplaceAll(xml, "pci_busid=\"0000:06:00.0\" pci_type=\"0302 [10de:06d2]",
                                        "pci_busid=\"0000:06:00.0\" pci_type=\"0300 [1002:515e]");
  ASSERT_NE(es1000, xml);
  auto r = ParseHwlocXml(es1000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->shape.gpus.size(), 2u);
  // An NVIDIA audio function (class 0403) is not a GPU either.
  const std::string audio = ReplaceAll(xml, "pci_busid=\"0000:06:00.0\" pci_type=\"0302 [10de:06d2]",
                                       "pci_busid=\"0000:06:00.0\" pci_type=\"0403 [10de:06d2]");
  auto a = ParseHwlocXml(audio);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->shape.gpus.size(), 2u);
}

TEST(LoaderTest, FingerprintIgnoresHostNameAndUuidButNotHardware) {
  const std::string xml = ReadFile(kDir + kPower8);
  auto a = ParseHwlocXml(xml);
  ASSERT_TRUE(a.ok());
  std::string renamed = ReplaceAll(xml, "drac-12.grenoble.grid5000.fr", "other-node-7");
  renamed = ReplaceAll(renamed, "GPU-77bf6b9a-6906-5a93-d28b-b77d2c23d1d2", "GPU-11111111-2222-3333-4444-555555555555");
  ASSERT_NE(renamed, xml);
  auto b = ParseHwlocXml(renamed);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->host_name, "other-node-7");
  EXPECT_NE(a->gpu_uuids, b->gpu_uuids);
  EXPECT_EQ(a->shape.fingerprint, b->shape.fingerprint);
  EXPECT_TRUE(a->shape.SameHardware(b->shape));
  EXPECT_EQ(a->shape.fingerprint.size(), 16u);

  // Different GPU memory: different shape.
  const std::string bigger = ReplaceAll(xml, "name=\"CUDAGlobalMemorySize\" value=\"", "name=\"CUDAGlobalMemorySize\" value=\"1");
  auto c = ParseHwlocXml(bigger);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->shape.fingerprint, c->shape.fingerprint);
  EXPECT_FALSE(a->shape.SameHardware(c->shape));

  // Interning shares one object between the identical ones only.
  ShapeInterner interner;
  auto na = MakeNodeTopology(std::move(a).value(), "a", "a.xml", "1", interner);
  auto nb = MakeNodeTopology(std::move(b).value(), "b", "b.xml", "1", interner);
  auto nc = MakeNodeTopology(std::move(c).value(), "c", "c.xml", "1", interner);
  EXPECT_EQ(na->shape.get(), nb->shape.get());
  EXPECT_NE(na->shape.get(), nc->shape.get());
  EXPECT_EQ(interner.size(), 2u);
  EXPECT_NE(na->GpuUuid(0), nb->GpuUuid(0));
}

// The forked (default) import and the in-process import give identical models for every export.
TEST(LoaderTest, IsolatedAndInProcessImportsAgree) {
  LoaderLimits in_process;
  in_process.isolate = false;
  size_t compared = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kDir)) {
    if (entry.path().extension() != ".xml") continue;
    SCOPED_TRACE(entry.path().filename().string());
    auto a = ParseHwlocFile(entry.path().string());
    auto b = ParseHwlocFile(entry.path().string(), in_process);
    ASSERT_EQ(a.ok(), b.ok());
    if (!a.ok()) {
      EXPECT_EQ(a.status().message(), b.status().message());
      continue;
    }
    ++compared;
    EXPECT_TRUE(a->shape.SameHardware(b->shape));
    EXPECT_EQ(a->shape.derived, b->shape.derived);
    EXPECT_EQ(a->shape.fingerprint, b->shape.fingerprint);
    EXPECT_EQ(a->gpu_uuids, b->gpu_uuids);
    EXPECT_EQ(a->numa_packages, b->numa_packages);
    EXPECT_EQ(a->cpus, b->cpus);
    EXPECT_EQ(a->host_name, b->host_name);
    EXPECT_EQ(a->hwloc_version, b->hwloc_version);
    EXPECT_EQ(a->xml_format, b->xml_format);
  }
  EXPECT_GE(compared, 18u);
}

// The package of each NUMA node (OS index -> package OS index, kNoIndex for none), on exports
// where it is not simply the node's own number.
TEST(LoaderTest, NumaNodesCarryTheirPackage) {
  auto packages = [](const std::string& file) {
    auto res = ParseHwlocFile(kDir + file);
    EXPECT_TRUE(res.ok()) << file << ": " << res.status().ToString();
    std::map<uint32_t, uint32_t> out;
    if (!res.ok()) return out;
    for (uint32_t k = 0; k < res->shape.numa_nodes.size(); ++k) {
      out[res->shape.numa_nodes[k].os_index] = k < res->numa_packages.size() ? res->numa_packages[k] : kNoIndex;
    }
    return out;
  };
  using M = std::map<uint32_t, uint32_t>;
  // Four NUMA nodes in one EPYC package.
  EXPECT_EQ(packages("llnl_tioga_hpe-ex235a_epyc7a53_4numa_8xMI250X-GCD_rsmi_xgmi.xml"), (M{{0, 0}, {1, 0}, {2, 0}, {3, 0}}));
  // Node 0 holds the CPUs of package 1.
  EXPECT_EQ(packages("hwloc_dell-r410-devel09_2s_mlx4-ib0-ib1.xml"), (M{{0, 1}, {1, 0}}));
  // GPU memory nodes (no CPUs) lie in no package.
  EXPECT_EQ(packages("llnl_lassen_ibm-ac922_2s-power9_4xV100_v1format-hwloc1.11.xml"),
            (M{{0, 0}, {8, 8}, {252, kNoIndex}, {253, kNoIndex}, {254, kNoIndex}, {255, kNoIndex}}));
  // Each NUMA node spans four packages: none is in one, so the export names no package.
  auto x3950 = ParseHwlocFile(kDir + "hwloc_ibm-x3950m2_16pkg_4numa_pci.xml");
  ASSERT_TRUE(x3950.ok());
  EXPECT_TRUE(x3950->numa_packages.empty());
}

// The logical CPUs of an export: one per PU, ascending, each with its core, package, NUMA node and
// L3 cache; per NUMA node as many as the node's PU count; cores of the Xeon 8259CL have two threads.
TEST(LoaderTest, LogicalCpusWithCoresPackagesNumaNodesAndCaches) {
  auto g4dn = ParseHwlocFile(kDir + kG4dn);
  ASSERT_TRUE(g4dn.ok()) << g4dn.status().ToString();
  const CpuList& cpus = g4dn->cpus;
  ASSERT_EQ(cpus.size(), 96u);
  std::map<uint32_t, uint32_t> per_numa;
  std::map<uint32_t, std::vector<uint32_t>> per_core_group;
  for (uint32_t i = 0; i < cpus.size(); ++i) {
    EXPECT_EQ(cpus[i].os_index, i);
    EXPECT_EQ(cpus[i].kind, CoreKind::kStandard);
    ++per_numa[cpus[i].numa_node];
    per_core_group[cpus[i].core_group].push_back(cpus[i].os_index);
    EXPECT_EQ(cpus[i].package, cpus[i].numa_node);  // one NUMA node per socket
    EXPECT_EQ(cpus[i].l3_cache, cpus[i].package);   // one L3 per socket, numbered by the export
  }
  for (const NumaNode& n : g4dn->shape.numa_nodes) EXPECT_EQ(per_numa[n.os_index], n.cpus) << n.os_index;
  EXPECT_EQ(per_core_group.size(), 48u);
  EXPECT_EQ(per_core_group[cpus[0].core_group], (std::vector<uint32_t>{0, 48}));  // SMT siblings
  EXPECT_EQ(cpus[48].core, cpus[0].core);
  // L3 caches without an id in the export: unknown, never a made-up number; POWER9 SMT4 cores.
  auto lassen = ParseHwlocFile(kDir + kLassenV2);
  ASSERT_TRUE(lassen.ok());
  std::map<uint32_t, int> lassen_cores;
  for (const LogicalCpu& c : lassen->cpus) {
    ++lassen_cores[c.core_group];
    EXPECT_EQ(c.l3_cache, kNoIndex);
  }
  EXPECT_EQ(lassen_cores.begin()->second, 4);
  // GPU memory nodes without CPUs get none.
  auto lassen_v1 = ParseHwlocFile(kDir + kLassenV1);
  ASSERT_TRUE(lassen_v1.ok());
  for (const LogicalCpu& c : lassen_v1->cpus) EXPECT_TRUE(c.numa_node == 0 || c.numa_node == 8) << c.os_index;
}

TEST(LoaderTest, NodeNameFromFileName) {
  EXPECT_EQ(NodeNameFromFileName("gpu-node-1.xml"), "gpu-node-1");
  EXPECT_EQ(NodeNameFromFileName("gpu-node-1.hwloc.xml"), "gpu-node-1");
  EXPECT_EQ(NodeNameFromFileName("..data"), "");
  EXPECT_EQ(NodeNameFromFileName(".hidden.xml"), "");
  EXPECT_EQ(NodeNameFromFileName("notes.txt"), "");
  EXPECT_EQ(NodeNameFromFileName(".xml"), "");
  EXPECT_EQ(NodeNameFromFileName("a/b.xml"), "");
}

TEST(LoaderTest, SnapshotQueryApi) {
  ShapeInterner interner;
  std::vector<std::shared_ptr<const NodeTopology>> nodes;
  nodes.push_back(MakeNodeTopology(Load(kG4dn), "g4dn-1", kG4dn, "1", interner));
  nodes.push_back(MakeNodeTopology(Load(kG4dn), "g4dn-2", kG4dn, "1", interner));
  nodes.push_back(MakeNodeTopology(Load(kPower8), "minsky", kPower8, "1", interner));
  auto snap = Snapshot::Create(nodes, 7);
  EXPECT_EQ(snap->generation(), 7u);
  EXPECT_EQ(snap->node_count(), 3u);
  EXPECT_EQ(snap->shape_count(), 2u);
  EXPECT_EQ(snap->Find("nope"), nullptr);
  ASSERT_NE(snap->Find("g4dn-2"), nullptr);
  EXPECT_EQ(snap->Find("g4dn-1")->shape.get(), snap->Find("g4dn-2")->shape.get());

  // Per-GPU answers come from the model: the node's Shape and its derived answers.
  const NodeTopology* g4 = snap->Find("g4dn-1");
  const Shape& s = *g4->shape;
  ASSERT_EQ(s.gpus.size(), 8u);
  EXPECT_EQ(s.PcieRootId(s.gpus[4]), "pci0000:e6");
  EXPECT_EQ(s.gpus[4].numa_nodes, std::vector<uint32_t>{1});
  EXPECT_EQ(s.gpus[4].model, "Tesla T4");
  EXPECT_TRUE(g4->GpuUuid(4).has_value());
  ASSERT_EQ(s.derived.nics_same_root.size(), 8u);
  EXPECT_TRUE(s.derived.nics_same_root[4].empty());
  ASSERT_EQ(s.derived.nics_same_numa.size(), 8u);
  ASSERT_EQ(s.derived.nics_same_numa[4].size(), 2u);
  for (uint32_t k : s.derived.nics_same_numa[4]) {
    ASSERT_LT(k, s.nics.size());
    EXPECT_NE(std::find(s.nics[k].numa_nodes.begin(), s.nics[k].numa_nodes.end(), 1u), s.nics[k].numa_nodes.end());
  }
  EXPECT_TRUE(s.derived.nics_same_numa[0].empty());
  const Shape& minsky = *snap->Find("minsky")->shape;
  ASSERT_EQ(minsky.derived.link_peers.size(), minsky.gpus.size());  // one entry per GPU, none for 99
  EXPECT_EQ(minsky.gpus.size(), 4u);
  EXPECT_EQ(minsky.derived.link_peers[2], std::vector<uint32_t>{3});

  const ShapeGroup* g = snap->FindShape(snap->Find("g4dn-1")->shape->fingerprint);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->nodes, (std::vector<std::string>{"g4dn-1", "g4dn-2"}));
}

const SimulatedAttribute* Attr(const SimulatedDevice& d, const std::string& domain, const std::string& name) {
  for (const auto& a : d.attributes) {
    if (a.domain == domain && a.name == name) return &a;
  }
  return nullptr;
}

TEST(SimulatedDevicesTest, AttributesFromTheExportAndUnknownsMarked) {
  ShapeInterner interner;
  auto node = MakeNodeTopology(Load(kPower8), "minsky", kPower8, "1", interner);
  auto devs = SimulateDraDevices(*node);
  ASSERT_EQ(devs.size(), 4u);
  const SimulatedDevice& d = devs[2];
  EXPECT_EQ(d.name, "gpu-2");
  EXPECT_EQ(d.driver, "gpu.nvidia.com");
  EXPECT_EQ(std::get<std::string>(Attr(d, "gpu.nvidia.com", "type")->value), "gpu");
  EXPECT_EQ(std::get<std::string>(Attr(d, "resource.kubernetes.io", "pcieRoot")->value), "pci000a:00");
  EXPECT_EQ(std::get<std::string>(Attr(d, "resource.kubernetes.io", "pciBusID")->value), "000a:01:00.0");
  EXPECT_EQ(std::get<std::string>(Attr(d, "gpu.nvidia.com", "productName")->value), "Tesla P100-SXM2-16GB");
  EXPECT_EQ(std::get<std::string>(Attr(d, "gpu.nvidia.com", "uuid")->value).rfind("GPU-", 0), 0u);
  ASSERT_EQ(d.capacity.size(), 1u);
  EXPECT_EQ(d.capacity[0].source, "CUDAGlobalMemorySize");  // P100 is not in the NVML table
  EXPECT_EQ(d.capacity[0].bytes, *node->shape->gpus[2].memory_bytes);
  EXPECT_NE(std::find(d.unknown.begin(), d.unknown.end(), "gpu.nvidia.com/driverVersion"), d.unknown.end());

  // DGX-2: nvml only, no memory size in the export -> memory is unknown, not invented.
  auto dgx = MakeNodeTopology(Load(kDgx2), "dgx", kDgx2, "1", interner);
  auto ddevs = SimulateDraDevices(*dgx);
  ASSERT_EQ(ddevs.size(), 16u);
  EXPECT_TRUE(ddevs[0].capacity.empty());
  EXPECT_NE(std::find(ddevs[0].unknown.begin(), ddevs[0].unknown.end(), "gpu.nvidia.com/memory"), ddevs[0].unknown.end());

  // AMD GPUs are not simulated as gpu.nvidia.com devices.
  auto tioga = MakeNodeTopology(Load(kTioga), "tioga", kTioga, "1", interner);
  EXPECT_TRUE(SimulateDraDevices(*tioga).empty());
}

// POWER9 with the V100s' memory kept as NUMA nodes 250-255 (test/data/hwloc-derived): each GPU
// gets its own memory node; its CPU locality (and its root's and every CPU's) stays the socket's
// DRAM node, though hwloc puts the memory nodes beside it under the Package.
TEST(LoaderTest, GpuMemoryNodesAreTheGpusOwnNotTheirCpuLocality) {
  const std::string file = std::string(DRAGUARD_TEST_DATA) + "/hwloc-derived/ibm-power9-8335gtw_2s_6xV100_gpu-numa-nodes.xml";
  auto p = ParseHwlocFile(file);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const Shape& s = p->shape;
  ASSERT_EQ(s.numa_nodes.size(), 8u);
  std::map<std::string, std::pair<uint32_t, std::vector<uint32_t>>> gpus;  // bus -> (memory node, CPU nodes)
  for (const Gpu& g : s.gpus) gpus[g.pci_bus_id] = {g.memory_numa_node, g.numa_nodes};
  using V = std::vector<uint32_t>;
  EXPECT_EQ(gpus, (std::map<std::string, std::pair<uint32_t, V>>{{"0004:05:00.0", {255, V{0}}},
                                                                   {"0004:06:00.0", {254, V{0}}},
                                                                   {"0006:00:00.0", {253, V{0}}},
                                                                   {"0007:00:00.0", {252, V{8}}},
                                                                   {"0035:04:00.0", {251, V{8}}},
                                                                   {"0035:05:00.0", {250, V{8}}}}));
  for (const PcieRoot& r : s.pcie_roots) {
    EXPECT_TRUE(r.numa_nodes == V{0} || r.numa_nodes == V{8}) << r.id;
  }
  for (const NumaNode& n : s.numa_nodes) {
    SCOPED_TRACE(n.os_index);
    if (n.os_index >= 250) {
      EXPECT_EQ(n.subtype, "GPUMemory");
      EXPECT_EQ(n.cpus, 0u) << "hwloc gives it its GPU's local CPUs as cpuset; it holds none";
      EXPECT_EQ(n.memory_bytes, 16106127360u);
    } else {
      EXPECT_EQ(n.cpus, 16u);
    }
  }
  for (const LogicalCpu& c : p->cpus) EXPECT_EQ(c.numa_node, c.os_index < 88 ? 0u : 8u) << c.os_index;
  // The GPUs of one socket still count as local to its DRAM node.
  EXPECT_EQ(s.derived.max_gpus_per_numa, 3u);
  // Only GPUs with a memory node encode it: every other shape keeps its encoding and fingerprint.
  ShapeInterner interner;
  auto record = DecodeShapeRecord(EncodeShapeRecord(*p), interner);
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  EXPECT_TRUE(record->shape->SameHardware(s));
  EXPECT_EQ(record->shape->fingerprint, s.fingerprint);
  ParsedExport hidden = *p;
  for (Gpu& g : hidden.shape.gpus) g.memory_numa_node = kNoIndex;
  FinalizeShape(hidden.shape);
  EXPECT_NE(hidden.shape.fingerprint, s.fingerprint);
  EXPECT_LT(EncodeShapeRecord(hidden).size(), EncodeShapeRecord(*p).size());
  // A record naming a memory node the shape does not have is refused.
  ParsedExport stray = *p;
  stray.shape.gpus[0].memory_numa_node = 7;
  EXPECT_FALSE(DecodeShapeRecord(EncodeShapeRecord(stray), interner).ok());
}

// A GPU whose memory is a NUMA node publishes that node as resource.kubernetes.io/numaNode
// (what the NVIDIA DRA driver reads from sysfs there), and it is not a node a numaNode constraint
// can align with CPUs.
TEST(SimulatedDevicesTest, GpuMemoryNodeIsTheNumaNodePublished) {
  const std::string file = std::string(DRAGUARD_TEST_DATA) + "/hwloc-derived/ibm-power9-8335gtw_2s_6xV100_gpu-numa-nodes.xml";
  auto p = ParseHwlocFile(file);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ShapeInterner interner;
  auto node = MakeNodeTopology(*p, "p9", file, "1", interner);
  auto devs = SimulateDraDevices(*node);
  ASSERT_EQ(devs.size(), 6u);
  for (uint32_t i = 0; i < devs.size(); ++i) {
    const Gpu& g = node->shape->gpus[i];
    ASSERT_NE(Attr(devs[i], "resource.kubernetes.io", "numaNode"), nullptr) << i;
    EXPECT_EQ(std::get<int64_t>(Attr(devs[i], "resource.kubernetes.io", "numaNode")->value),
              static_cast<int64_t>(g.memory_numa_node));
    EXPECT_EQ(node->shape->AlignableNumaNode(g), kNoIndex);
  }
  // Elsewhere the CPU-local node is both what is published and what aligns.
  auto g4dn = MakeNodeTopology(Load(kG4dn), "g4dn", kG4dn, "1", interner);
  EXPECT_EQ(g4dn->shape->AlignableNumaNode(g4dn->shape->gpus[0]), g4dn->shape->gpus[0].numa_nodes.front());
}

TEST(SimulatedDevicesTest, NvmlTableUsedForKnownDevices) {
  // An H100 SXM5 (10de:2330) export says CUDAGlobalMemorySize = 81081 MiB; the driver publishes
  // NVML Total = 81559 MiB.
  std::string xml = ReadFile(kDir + kG4dn);
  xml = ReplaceAll(xml, "0302 [10de:1eb8]", "0302 [10de:2330]");
  xml = ReplaceAll(xml, "name=\"CUDAGlobalMemorySize\" value=\"15472384\"", "name=\"CUDAGlobalMemorySize\" value=\"83026944\"");
  auto p = ParseHwlocXml(xml);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->shape.gpus[0].device_id, 0x2330);
  EXPECT_EQ(p->shape.gpus[0].memory_bytes, std::optional<uint64_t>(81081ull << 20));
  ShapeInterner interner;
  auto node = MakeNodeTopology(std::move(p).value(), "h100", "h100.xml", "1", interner);
  auto devs = SimulateDraDevices(*node);
  ASSERT_EQ(devs.size(), 8u);
  ASSERT_EQ(devs[0].capacity.size(), 1u);
  EXPECT_EQ(devs[0].capacity[0].bytes, 81559ull << 20);
  EXPECT_EQ(devs[0].capacity[0].source, "nvml-table");
  EXPECT_EQ(NvmlTotalMemoryBytes(0x1eb8), 0u);
}

}  // namespace
}  // namespace draguard::topology
