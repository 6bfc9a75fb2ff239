// BuildResourceSlices / BuildDeviceClasses over the repository's exports: every NVIDIA GPU and
// every NIC PCI function appears, names and sizes respect the resource.k8s.io/v1 limits, MIG
// devices carry the driver's canonical names, unknowns are listed and the output is deterministic.
#include "draguard/dra/resource_slices.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "draguard/cel/checker.h"
#include "draguard/cel/device.h"
#include "draguard/cel/evaluator.h"
#include "draguard/dra/devices.h"
#include "draguard/k8s/names.h"
#include "draguard/topology/snapshot.h"

namespace draguard::dra {
namespace {

namespace fs = std::filesystem;
using admission::Json;

// Every loadable export of the repository (test data and the embedded examples).
std::vector<fs::path> Exports() {
  std::vector<fs::path> out;
  for (const char* dir : {"hwloc", "hwloc-synthetic", "hwloc-derived"}) {
    for (const auto& e : fs::directory_iterator(fs::path(DRAGUARD_TEST_DATA) / dir)) {
      if (e.path().extension() == ".xml") out.push_back(e.path());
    }
  }
  for (const auto& e : fs::directory_iterator(fs::path(DRAGUARD_TEST_DATA) / ".." / ".." / "deploy" / "examples" /
                                              "topology")) {
    if (e.path().extension() == ".xml") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::shared_ptr<const topology::Snapshot> Load(const fs::path& p) {
  auto s = topology::LoadSnapshot(p.string());
  return s.ok() ? *s : nullptr;
}

TEST(ResourceSlicesTest, EveryGpuAndNicOfEveryExportAppearsWithinTheApiLimits) {
  const std::regex mig_name("^gpu-[0-9]+-mig-[a-z0-9]([-a-z0-9]*[a-z0-9])?-[0-9]+-[0-9]+$");
  int loaded = 0, gpus_seen = 0, nics_seen = 0;
  for (const fs::path& p : Exports()) {
    auto snap = Load(p);
    if (snap == nullptr) continue;  // v3 and no-I/O exports are rejected by the loader
    ++loaded;
    const topology::NodeTopology& node = *snap->nodes().front();
    auto built = BuildResourceSlices(node, "node-1.example");
    ASSERT_TRUE(built.ok()) << p << ": " << built.status().message();
    std::set<std::string> want_gpus, want_nics, got_gpus, got_nics;
    for (const auto& g : node.shape->gpus) {
      if (g.vendor == topology::GpuVendor::kNvidia) want_gpus.insert(g.pci_bus_id);
    }
    for (const auto& n : node.shape->nics) want_nics.insert(n.pci_bus_id);
    for (const DriverSlices& d : built->drivers) {
      ASSERT_EQ(d.slices.size(), d.unknown.size());
      for (const Json& s : d.slices) {
        EXPECT_EQ(s["apiVersion"], "resource.k8s.io/v1");
        EXPECT_EQ(s["kind"], "ResourceSlice");
        EXPECT_TRUE(k8s::IsDnsSubdomain(s["metadata"]["name"].get<std::string>())) << s["metadata"]["name"];
        EXPECT_EQ(s["spec"]["driver"], d.driver);
        EXPECT_EQ(s["spec"]["nodeName"], "node-1.example");
        EXPECT_EQ(s["spec"]["pool"]["name"], "node-1.example");
        EXPECT_EQ(s["spec"]["pool"]["generation"], 1);
        EXPECT_EQ(s["spec"]["pool"]["resourceSliceCount"], d.slices.size());
        ASSERT_LE(s["spec"]["devices"].size(), kMaxDevicesPerSlice);
        for (const Json& dev : s["spec"]["devices"]) {
          const std::string name = dev["name"];
          EXPECT_TRUE(k8s::IsDnsLabel(name)) << p << ": " << name;
          EXPECT_LE(dev["attributes"].size() + dev.value("capacity", Json::object()).size(),
                    kMaxAttributesAndCapacitiesPerDevice);
          for (const auto& [key, v] : dev["attributes"].items()) {
            EXPECT_EQ(v.size(), 1u) << key;
            if (v.contains("string")) {
              EXPECT_LE(v["string"].get<std::string>().size(), kMaxAttributeValueLength);
            }
          }
          const Json& a = dev["attributes"];
          if (d.driver == "gpu.nvidia.com") {
            got_gpus.insert(a["resource.kubernetes.io/pciBusID"]["string"].get<std::string>());
            if (a["type"]["string"] == "mig") {
              EXPECT_TRUE(std::regex_match(name, mig_name)) << name;
              EXPECT_TRUE(a.contains("profile"));
            } else {
              EXPECT_TRUE(std::regex_match(name, std::regex("^gpu-[0-9]+$"))) << name;
            }
            ++gpus_seen;
          } else {
            ASSERT_EQ(d.driver, "dra.net");
            got_nics.insert(a["dra.net/pciAddress"]["string"].get<std::string>());
            EXPECT_TRUE(a.contains("dra.net/rdma"));
            EXPECT_EQ(name.rfind("pci-", 0), 0u) << name;
            ++nics_seen;
          }
        }
      }
    }
    EXPECT_EQ(got_gpus, want_gpus) << p;
    EXPECT_EQ(got_nics, want_nics) << p;
  }
  EXPECT_GE(loaded, 15);
  EXPECT_GT(gpus_seen, 40);
  EXPECT_GT(nics_seen, 10);
}

TEST(ResourceSlicesTest, MigDevicesUseTheDriversNamesAndCapacities) {
  auto snap = Load(fs::path(DRAGUARD_TEST_DATA) / "hwloc-synthetic" / "xe8640-like_4xH100-SXM_mig.xml");
  ASSERT_NE(snap, nullptr);
  auto built = BuildResourceSlices(*snap->nodes().front(), "mig-node");
  ASSERT_TRUE(built.ok());
  ASSERT_FALSE(built->drivers.empty());
  int migs = 0;
  for (const Json& dev : built->drivers[0].slices[0]["spec"]["devices"]) {
    if (dev["attributes"]["type"]["string"] != "mig") continue;
    ++migs;
    const std::string profile = dev["attributes"]["profile"]["string"];
    std::string compact = profile;
    compact.erase(std::remove(compact.begin(), compact.end(), '.'), compact.end());
    std::replace(compact.begin(), compact.end(), '+', '-');
    EXPECT_NE(dev["name"].get<std::string>().find("-mig-" + compact + "-"), std::string::npos) << dev["name"];
    EXPECT_TRUE(dev["capacity"].contains("memory"));
    bool slice = false;
    for (const auto& [k, v] : dev["capacity"].items()) slice = slice || k.rfind("memorySlice", 0) == 0;
    EXPECT_TRUE(slice) << dev.dump();
    EXPECT_TRUE(dev["attributes"].contains("parentUUID"));
    EXPECT_TRUE(dev["attributes"].contains("resource.kubernetes.io/pcieRoot"));
  }
  EXPECT_GT(migs, 0);
  bool listed = false;
  for (const auto& line : built->drivers[0].unknown[0]) {
    listed = listed || line.find("gpu.nvidia.com/multiprocessors") != std::string::npos;
  }
  EXPECT_TRUE(listed);
}

TEST(ResourceSlicesTest, UnknownsAreListedNotInvented) {
  // DGX-2H: nvml only, no memory size in the export.
  auto snap = Load(fs::path(DRAGUARD_TEST_DATA) / "hwloc" /
                   "hwloc_nvidia-dgx2h_2s-xeon8174_16xV100-SXM3_12xNVSwitch_nvlink-hetero.xml");
  ASSERT_NE(snap, nullptr);
  auto built = BuildResourceSlices(*snap->nodes().front(), "dgx");
  ASSERT_TRUE(built.ok());
  const DriverSlices& gpu = built->drivers.at(0);
  ASSERT_EQ(gpu.driver, "gpu.nvidia.com");
  for (const Json& dev : gpu.slices[0]["spec"]["devices"]) {
    EXPECT_FALSE(dev.contains("capacity")) << dev.dump();
    EXPECT_FALSE(dev["attributes"].contains("driverVersion"));
  }
  ASSERT_FALSE(gpu.unknown[0].empty());
  EXPECT_EQ(gpu.unknown[0][0].rfind("every device: not in the export: ", 0), 0u);
  EXPECT_NE(gpu.unknown[0][0].find("gpu.nvidia.com/driverVersion"), std::string::npos);
  EXPECT_NE(gpu.unknown[0][0].find("gpu.nvidia.com/memory"), std::string::npos);
  EXPECT_TRUE(std::binary_search(built->unknown_names.begin(), built->unknown_names.end(),
                                 "gpu.nvidia.com/cudaDriverVersion"));
}

TEST(ResourceSlicesTest, DeterministicAndNamedAfterNodeAndDriver) {
  auto snap = Load(fs::path(DRAGUARD_TEST_DATA) / "hwloc" / "aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml");
  ASSERT_NE(snap, nullptr);
  auto a = BuildResourceSlices(*snap->nodes().front(), "g4dn-1");
  auto b = BuildResourceSlices(*snap->nodes().front(), "g4dn-1");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->drivers.size(), 2u);
  EXPECT_EQ(a->drivers[0].slices[0]["metadata"]["name"], "g4dn-1-gpu-nvidia-com");
  EXPECT_EQ(a->drivers[1].slices[0]["metadata"]["name"], "g4dn-1-dra-net");
  for (std::size_t i = 0; i < a->drivers.size(); ++i) {
    EXPECT_EQ(a->drivers[i].slices[0].dump(), b->drivers[i].slices[0].dump());
    EXPECT_EQ(a->drivers[i].unknown, b->drivers[i].unknown);
  }
  // The EFA function has no netdev: dranet publishes its RDMA device instead of an ifName.
  bool efa = false;
  for (const Json& dev : a->drivers[1].slices[0]["spec"]["devices"]) {
    if (dev["attributes"].contains("dra.net/rdmaDevice")) {
      efa = true;
      EXPECT_FALSE(dev["attributes"].contains("dra.net/ifName"));
      EXPECT_EQ(dev["attributes"]["dra.net/rdma"]["bool"], true);
    }
  }
  EXPECT_TRUE(efa);
}

TEST(ResourceSlicesTest, SplitsAPoolAbove128Devices) {
  auto shape = std::make_shared<topology::Shape>();
  for (int i = 0; i < 130; ++i) {
    topology::Nic n;
    char bus[32];
    std::snprintf(bus, sizeof bus, "0000:%02x:%02x.0", 1 + i / 32, i % 32);
    n.pci_bus_id = bus;
    n.name = "eth" + std::to_string(i);
    shape->nics.push_back(n);
  }
  topology::NodeTopology node;
  node.name = "big";
  node.shape = shape;
  auto built = BuildResourceSlices(node, "big");
  ASSERT_TRUE(built.ok());
  ASSERT_EQ(built->drivers.size(), 1u);
  const DriverSlices& d = built->drivers[0];
  ASSERT_EQ(d.slices.size(), 2u);
  EXPECT_EQ(d.slices[0]["metadata"]["name"], "big-dra-net-0");
  EXPECT_EQ(d.slices[1]["metadata"]["name"], "big-dra-net-1");
  EXPECT_EQ(d.slices[0]["spec"]["devices"].size(), 128u);
  EXPECT_EQ(d.slices[1]["spec"]["devices"].size(), 2u);
  EXPECT_EQ(d.slices[1]["spec"]["pool"]["resourceSliceCount"], 2);
}

TEST(ResourceSlicesTest, NodeNames) {
  topology::NodeTopology node;
  node.shape = std::make_shared<topology::Shape>();
  EXPECT_FALSE(BuildResourceSlices(node, "Bad_Name").ok());
}

TEST(ResourceSlicesTest, DeviceClassesSelectTheSimulatedDevices) {
  std::vector<std::string> comments;
  const auto classes = BuildDeviceClasses(&comments);
  ASSERT_EQ(classes.size(), 5u);
  ASSERT_EQ(comments.size(), 5u);
  EXPECT_EQ(classes[0]["metadata"]["name"], "gpu.nvidia.com");
  EXPECT_EQ(classes[0]["spec"]["extendedResourceName"], "nvidia.com/gpu");
  EXPECT_EQ(classes[1]["metadata"]["name"], "mig.nvidia.com");
  EXPECT_EQ(classes[2]["metadata"]["name"], "dranet");
  EXPECT_EQ(classes[3]["metadata"]["name"], "compute-domain-default-channel.nvidia.com");
  EXPECT_EQ(classes[4]["metadata"]["name"], "compute-domain-daemon.nvidia.com");
  EXPECT_EQ(BuildDeviceClasses(nullptr, true)[3]["metadata"]["name"], "dra.cpu");
  auto snap = Load(fs::path(DRAGUARD_TEST_DATA) / "hwloc-synthetic" / "xe8640-like_4xH100-SXM_mig.xml");
  ASSERT_NE(snap, nullptr);
  const auto devices = SimulateNode(*snap->nodes().front());
  for (std::size_t c = 0; c < classes.size(); ++c) {
    EXPECT_EQ(classes[c]["apiVersion"], "resource.k8s.io/v1");
    auto sel = cel::CompileSelector(classes[c]["spec"]["selectors"][0]["cel"]["expression"].get<std::string>());
    ASSERT_TRUE(sel.ok()) << sel.status().message();
    for (const Device& d : devices) {
      auto r = cel::EvaluateSelectorValue(*sel, d.value);
      ASSERT_TRUE(r.ok()) << r.status().message();
      const bool want = (c == 0 && d.kind == DeviceKind::kGpu) || (c == 1 && d.kind == DeviceKind::kMig) ||
                        (c == 2 && d.kind == DeviceKind::kNic);
      EXPECT_EQ(*r, want) << classes[c]["metadata"]["name"] << " " << d.name;
    }
  }
}

// The devices of one driver in `built`, read back with the project's own device reader (the
// ResourceSlice device JSON, names qualified or in the driver's domain).
std::vector<std::pair<std::string, cel::Device>> ReadBack(const NodeSlices& built, const std::string& driver,
                                                          std::vector<Json>* raw = nullptr) {
  std::vector<std::pair<std::string, cel::Device>> out;
  for (const DriverSlices& d : built.drivers) {
    if (d.driver != driver) continue;
    for (const Json& slice : d.slices) {
      EXPECT_EQ(slice["spec"]["driver"], driver);
      for (const Json& dev : slice["spec"]["devices"]) {
        if (raw != nullptr) raw->push_back(dev);
        Json in = {{"driver", driver},
                   {"attributes", {{driver, dev["attributes"]}}},
                   {"capacity", {{driver, dev.value("capacity", Json::object())}}}};
        if (dev.contains("allowMultipleAllocations")) in["allowMultipleAllocations"] = dev["allowMultipleAllocations"];
        auto parsed = cel::ParseDeviceJson(in.dump());
        EXPECT_TRUE(parsed.ok()) << dev.dump() << ": " << parsed.status().message();
        if (parsed.ok()) out.emplace_back(dev["name"].get<std::string>(), *parsed);
      }
    }
  }
  return out;
}

int64_t IntAttr(const cel::Device& d, const std::string& domain, const std::string& name) {
  const auto& v = d.attributes.at(domain).at(name);
  return std::get<int64_t>(v);
}

// A node in an NVLink clique also publishes the ComputeDomain plugin's channel-0 and daemon-0
// (driver compute-domain.nvidia.com, attributes type and id), which the chart's two ComputeDomain
// classes select one each; a node without a clique publishes none.
TEST(ResourceSlicesTest, ACliqueNodePublishesTheComputeDomainDevices) {
  auto snap = Load(fs::path(DRAGUARD_TEST_DATA) / "hwloc" / "aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml");
  ASSERT_NE(snap, nullptr);
  topology::NodeTopology node = *snap->nodes().front();
  auto plain = BuildResourceSlices(node, "tray-1");
  ASSERT_TRUE(plain.ok());
  for (const DriverSlices& d : plain->drivers) EXPECT_NE(d.driver, "compute-domain.nvidia.com");
  node.nvlink_clique = "3183419e-9edc-4f0e-86e8-d895a9fb06be.17044";
  auto built = BuildResourceSlices(node, "tray-1");
  ASSERT_TRUE(built.ok()) << built.status().message();
  ASSERT_EQ(built->drivers.back().driver, "compute-domain.nvidia.com");
  const Json& slice = built->drivers.back().slices.at(0);
  EXPECT_EQ(slice["metadata"]["name"], "tray-1-compute-domain-nvidia-com");
  EXPECT_EQ(slice["spec"]["pool"]["name"], "tray-1");
  const auto devices = ReadBack(*built, "compute-domain.nvidia.com");
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].first, "channel-0");
  EXPECT_EQ(devices[1].first, "daemon-0");
  EXPECT_EQ(IntAttr(devices[0].second, "compute-domain.nvidia.com", "id"), 0);
  const auto classes = BuildDeviceClasses();
  for (std::size_t c = 3; c < 5; ++c) {
    auto sel = cel::CompileSelector(classes[c]["spec"]["selectors"][0]["cel"]["expression"].get<std::string>());
    ASSERT_TRUE(sel.ok()) << sel.status().message();
    for (std::size_t k = 0; k < devices.size(); ++k) {
      auto r = cel::EvaluateSelector(*sel, devices[k].second);
      ASSERT_TRUE(r.ok()) << r.status().message();
      EXPECT_EQ(*r, k + 3 == c) << classes[c]["metadata"]["name"] << " " << devices[k].first;
    }
  }
  EXPECT_NE(std::find_if(built->notes.begin(), built->notes.end(),
                         [](const std::string& n) { return n.find("IMEX channel 0 only") != std::string::npos; }),
            built->notes.end());
}

// dra-driver-cpu grouped (its default, groupBy numanode) on a two-socket export: one device per
// NUMA node, named cpudevnuma<NNN> after the node number, consumable capacity dra.cpu/cpu equal to
// the node's PU count, the standard numaNode and the compatibility attributes.
TEST(ResourceSlicesTest, CpuGroupedOneDevicePerNumaNodeWithItsPuCount) {
  auto snap = Load(fs::path(DRAGUARD_TEST_DATA) / "hwloc" / "aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml");
  ASSERT_NE(snap, nullptr);
  const topology::NodeTopology& node = *snap->nodes().front();
  EXPECT_TRUE(BuildResourceSlices(node, "g4dn-1").value().drivers.size() == 2u);  // default: no dra.cpu
  auto built = BuildResourceSlices(node, "g4dn-1", {topology::CpuDeviceMode::kGrouped});
  ASSERT_TRUE(built.ok()) << built.status().message();
  ASSERT_EQ(built->drivers.back().driver, "dra.cpu");
  EXPECT_EQ(built->drivers.back().slices[0]["metadata"]["name"], "g4dn-1-dra-cpu");
  std::vector<Json> raw;
  const auto devices = ReadBack(*built, "dra.cpu", &raw);
  ASSERT_EQ(devices.size(), node.shape->numa_nodes.size());
  for (std::size_t k = 0; k < devices.size(); ++k) {
    const topology::NumaNode& numa = node.shape->numa_nodes[k];
    const auto& [name, d] = devices[k];
    EXPECT_EQ(name, "cpudevnuma00" + std::to_string(numa.os_index));
    EXPECT_EQ(raw[k]["allowMultipleAllocations"], true);
    EXPECT_EQ(d.capacity.at("dra.cpu").at("cpu").ToString(), std::to_string(numa.cpus));
    EXPECT_EQ(IntAttr(d, "dra.cpu", "numCPUs"), numa.cpus);
    EXPECT_EQ(IntAttr(d, "resource.kubernetes.io", "numaNode"), numa.os_index);
    EXPECT_EQ(IntAttr(d, "dra.cpu", "numaNodeID"), numa.os_index);
    EXPECT_EQ(IntAttr(d, "dra.net", "numaNode"), numa.os_index);
    EXPECT_EQ(IntAttr(d, "dra.cpu", "socketID"), node.NumaPackage(static_cast<uint32_t>(k)));
    EXPECT_EQ(std::get<bool>(d.attributes.at("dra.cpu").at("smtEnabled")), true);
    EXPECT_EQ(d.attributes.at("dra.cpu").size(), 4u);  // numCPUs, numaNodeID, smtEnabled, socketID
  }
  // The claim draguard generates for grouped CPUs selects them: capacity and the standard attribute.
  auto sel = cel::CompileSelector("device.attributes['resource.kubernetes.io'].numaNode == 1 && "
                                  "device.capacity['dra.cpu'].cpu.compareTo(quantity('24')) >= 0");
  ASSERT_TRUE(sel.ok()) << sel.status().message();
  int matching = 0;
  for (const auto& [name, d] : devices) matching += cel::EvaluateSelectorValue(*sel, cel::DeviceToValue(d)).value();
  EXPECT_EQ(matching, 1);
}

// Individual: one device per logical CPU, ascending CPU number with each core's SMT sibling right
// after it (cpudev000 = CPU 0, cpudev001 = its sibling 48), per NUMA node as many as its PUs.
TEST(ResourceSlicesTest, CpuIndividualOneDevicePerCpuSiblingsConsecutive) {
  auto snap = Load(fs::path(DRAGUARD_TEST_DATA) / "hwloc" / "aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml");
  ASSERT_NE(snap, nullptr);
  const topology::NodeTopology& node = *snap->nodes().front();
  auto built = BuildResourceSlices(node, "g4dn-1", {topology::CpuDeviceMode::kIndividual});
  ASSERT_TRUE(built.ok()) << built.status().message();
  std::vector<Json> raw;
  const auto devices = ReadBack(*built, "dra.cpu", &raw);
  ASSERT_EQ(devices.size(), 96u);
  std::map<int64_t, uint32_t> per_numa;
  std::set<int64_t> cpu_ids;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const auto& [name, d] = devices[i];
    char want[16];
    std::snprintf(want, sizeof want, "cpudev%03zu", i);
    EXPECT_EQ(name, want);
    EXPECT_FALSE(raw[i].contains("allowMultipleAllocations"));
    EXPECT_FALSE(raw[i].contains("capacity"));
    const int64_t numa = IntAttr(d, "resource.kubernetes.io", "numaNode");
    ++per_numa[numa];
    EXPECT_EQ(IntAttr(d, "dra.cpu", "numaNodeID"), numa);
    EXPECT_EQ(IntAttr(d, "dra.net", "numaNode"), numa);
    EXPECT_EQ(IntAttr(d, "dra.cpu", "socketID"), numa);
    EXPECT_EQ(IntAttr(d, "dra.cpu", "cacheL3ID"), numa);
    EXPECT_EQ(std::get<std::string>(d.attributes.at("dra.cpu").at("coreType")), "standard");
    EXPECT_EQ(std::get<bool>(d.attributes.at("dra.cpu").at("smtEnabled")), true);
    cpu_ids.insert(IntAttr(d, "dra.cpu", "cpuID"));
  }
  EXPECT_EQ(cpu_ids.size(), 96u);
  for (const topology::NumaNode& n : node.shape->numa_nodes) EXPECT_EQ(per_numa[n.os_index], n.cpus);
  auto cpu = [&](std::size_t i) { return IntAttr(devices[i].second, "dra.cpu", "cpuID"); };
  auto core = [&](std::size_t i) { return IntAttr(devices[i].second, "dra.cpu", "coreID"); };
  EXPECT_EQ(cpu(0), 0);
  EXPECT_EQ(cpu(1), 48);
  EXPECT_EQ(cpu(2), 1);
  EXPECT_EQ(cpu(3), 49);
  EXPECT_EQ(core(0), core(1));
  EXPECT_NE(core(1), core(2));
  EXPECT_EQ(cpu(48), 24);  // socket 1 starts at CPU 24
  ASSERT_EQ(built->drivers.back().unknown.size(), 1u);
  EXPECT_TRUE(built->drivers.back().unknown[0].empty());  // every value known on this export
}

// On every export the driver would run on: grouped, one device per NUMA node with CPUs and its PU
// count as capacity; individual, one device per PU with distinct cpuIDs; both read back.
TEST(ResourceSlicesTest, CpuDevicesOfEveryExportMatchTheModelsPuCounts) {
  int simulated = 0;
  for (const fs::path& p : Exports()) {
    auto snap = Load(p);
    if (snap == nullptr) continue;
    SCOPED_TRACE(p.filename().string());
    const topology::NodeTopology& node = *snap->nodes().front();
    auto grouped = BuildResourceSlices(node, "node-1", {topology::CpuDeviceMode::kGrouped});
    auto individual = BuildResourceSlices(node, "node-1", {topology::CpuDeviceMode::kIndividual});
    ASSERT_TRUE(grouped.ok() && individual.ok());
    const auto g = ReadBack(*grouped, "dra.cpu");
    const auto i = ReadBack(*individual, "dra.cpu");
    if (g.empty()) {  // no CPUs in the export: said so
      EXPECT_TRUE(i.empty());
      EXPECT_TRUE(std::any_of(grouped->notes.begin(), grouped->notes.end(),
                              [](const std::string& n) { return n.rfind("dra.cpu: no devices: ", 0) == 0; }));
      continue;
    }
    ++simulated;
    std::map<int64_t, int64_t> want;
    uint64_t total = 0;
    for (const topology::NumaNode& n : node.shape->numa_nodes) {
      if (n.cpus > 0) want[n.os_index] = n.cpus;
      total += n.cpus;
    }
    std::map<int64_t, int64_t> got;
    for (const auto& [name, d] : g) {
      got[IntAttr(d, "resource.kubernetes.io", "numaNode")] = IntAttr(d, "dra.cpu", "numCPUs");
      EXPECT_EQ(d.capacity.at("dra.cpu").at("cpu").ToString(), std::to_string(IntAttr(d, "dra.cpu", "numCPUs")));
    }
    EXPECT_EQ(got, want);
    EXPECT_EQ(i.size(), total);
    std::set<int64_t> ids;
    for (const auto& [name, d] : i) ids.insert(IntAttr(d, "dra.cpu", "cpuID"));
    EXPECT_EQ(ids.size(), i.size());
  }
  EXPECT_GE(simulated, 15);
}

// SimulateCpuDevices on a hand-made CPU list: hybrid core types, a CPU outside any core, four-digit
// device numbers, and kNone.
TEST(ResourceSlicesTest, CpuDevicesFromAHandMadeCpuList) {
  auto snap = Load(fs::path(DRAGUARD_TEST_DATA) / "hwloc-synthetic" / "xe8640-like_4xH100-SXM_4numa_nvlink-all_3xmlx5.xml");
  ASSERT_NE(snap, nullptr);
  topology::NodeTopology node = *snap->nodes().front();
  using topology::CoreKind;
  using topology::LogicalCpu;
  topology::CpuList cpus;
  // CPUs 0-1: one performance core; 2: an efficiency core; 3: no core, no L3 id, no package.
  cpus.push_back(LogicalCpu{0, 0, 0, 0, 0, 7, CoreKind::kPerformance});
  cpus.push_back(LogicalCpu{1, 0, 0, 0, 0, 7, CoreKind::kPerformance});
  cpus.push_back(LogicalCpu{2, 8, 1, 0, 0, 7, CoreKind::kEfficiency});
  cpus.push_back(LogicalCpu{3, topology::kNoIndex, topology::kNoIndex, topology::kNoIndex, 1, topology::kNoIndex,
                            CoreKind::kStandard});
  node.cpus = std::make_shared<const topology::CpuList>(cpus);
  EXPECT_TRUE(topology::SimulateCpuDevices(node, topology::CpuDeviceMode::kNone).devices.empty());
  const auto ind = topology::SimulateCpuDevices(node, topology::CpuDeviceMode::kIndividual);
  ASSERT_EQ(ind.devices.size(), 4u);
  auto attr = [](const topology::SimulatedDevice& d, const std::string& name) -> const topology::SimulatedAttribute* {
    for (const auto& a : d.attributes) {
      if (a.domain + "/" + a.name == name) return &a;
    }
    return nullptr;
  };
  EXPECT_EQ(std::get<std::string>(attr(ind.devices[0], "dra.cpu/coreType")->value), "p-core");
  EXPECT_EQ(std::get<std::string>(attr(ind.devices[2], "dra.cpu/coreType")->value), "e-core");
  EXPECT_EQ(std::get<int64_t>(attr(ind.devices[2], "dra.cpu/coreID")->value), 8);
  // No core for CPU 3: smtEnabled, coreID, socketID and cacheL3ID are not invented.
  EXPECT_EQ(attr(ind.devices[3], "dra.cpu/coreID"), nullptr);
  EXPECT_EQ(attr(ind.devices[3], "dra.cpu/cacheL3ID"), nullptr);
  EXPECT_EQ(attr(ind.devices[3], "dra.cpu/socketID"), nullptr);
  EXPECT_EQ(attr(ind.devices[0], "dra.cpu/smtEnabled"), nullptr);
  EXPECT_NE(std::find(ind.devices[3].unknown.begin(), ind.devices[3].unknown.end(), "dra.cpu/coreID"),
            ind.devices[3].unknown.end());
  EXPECT_FALSE(ind.notes.empty());
  const auto grouped = topology::SimulateCpuDevices(node, topology::CpuDeviceMode::kGrouped);
  ASSERT_EQ(grouped.devices.size(), 2u);
  EXPECT_EQ(grouped.devices[0].name, "cpudevnuma000");
  EXPECT_EQ(grouped.devices[0].capacity.at(0).bytes, 3u);
  EXPECT_TRUE(grouped.devices[0].capacity.at(0).count);
  EXPECT_EQ(grouped.devices[1].cpus, (std::vector<uint32_t>{3}));
  // 1,001 single-thread CPUs: the 1,001st device is cpudev1000 (the driver's %03d).
  topology::CpuList many;
  for (uint32_t i = 0; i < 1001; ++i) many.push_back(LogicalCpu{i, i, i, 0, 0, 0, CoreKind::kStandard});
  node.cpus = std::make_shared<const topology::CpuList>(many);
  const auto big = topology::SimulateCpuDevices(node, topology::CpuDeviceMode::kIndividual);
  ASSERT_EQ(big.devices.size(), 1001u);
  EXPECT_EQ(big.devices[999].name, "cpudev999");
  EXPECT_EQ(big.devices[1000].name, "cpudev1000");
  EXPECT_EQ(std::get<bool>(attr(big.devices[0], "dra.cpu/smtEnabled")->value), false);
  auto built = BuildResourceSlices(node, "big-1", {topology::CpuDeviceMode::kIndividual});
  ASSERT_TRUE(built.ok()) << built.status().message();
  EXPECT_EQ(built->drivers.back().slices.size(), 8u);  // 1,001 devices in slices of 128
}

// What the export cannot tell is listed, never invented.
TEST(ResourceSlicesTest, CpuDevicesUnknownsAndSmt4) {
  // POWER9 SMT4: dra-driver-cpu (built for ppc64le: its images are amd64 and arm64 only) starts,
  // but pairs SMT siblings only two by two, so a core's four CPUs are numbered one by one.
  auto lassen = Load(fs::path(DRAGUARD_TEST_DATA) / "hwloc" /
                     "llnl_lassen_ibm-ac922_2s-power9_4xV100-SXM2_cuda-nvml_4xmlx5.xml");
  ASSERT_NE(lassen, nullptr);
  const topology::NodeTopology& power9 = *lassen->nodes().front();
  auto smt4 = BuildResourceSlices(power9, "lassen-1", {topology::CpuDeviceMode::kIndividual});
  ASSERT_TRUE(smt4.ok());
  std::map<std::string, cel::Device> numbered;
  for (auto& [name, d] : ReadBack(*smt4, "dra.cpu")) numbered.emplace(name, d);
  ASSERT_EQ(numbered.size(), power9.cpus->size());
  for (std::size_t k = 0; k < power9.cpus->size(); ++k) {  // CPU order, no sibling pairs
    char name[24];
    std::snprintf(name, sizeof(name), "cpudev%03zu", k);
    ASSERT_EQ(numbered.count(name), 1u) << name;
    EXPECT_EQ(IntAttr(numbered.at(name), "dra.cpu", "cpuID"), (*power9.cpus)[k].os_index) << name;
    EXPECT_EQ(std::get<bool>(numbered.at(name).attributes.at("dra.cpu").at("smtEnabled")), true) << name;
  }
  for (const std::string& note : smt4->notes) EXPECT_EQ(note.find("refuses"), std::string::npos) << note;
  EXPECT_TRUE(std::any_of(smt4->notes.begin(), smt4->notes.end(), [](const std::string& n) {
    return n.rfind("dra.cpu: ", 0) == 0 && n.find("has 4 logical CPUs") != std::string::npos &&
           n.find("pairs SMT siblings only two by two") != std::string::npos &&
           n.find("linux/amd64 and linux/arm64 only") != std::string::npos;
  }));
  auto grouped_power9 = BuildResourceSlices(power9, "lassen-1", {topology::CpuDeviceMode::kGrouped});
  ASSERT_TRUE(grouped_power9.ok());
  EXPECT_EQ(ReadBack(*grouped_power9, "dra.cpu").size(), 2u);  // one device per NUMA node with CPUs
  // Each NUMA node spans four packages: socketID unknown; L3 caches without an id: cacheL3ID unknown.
  auto x3950 = Load(fs::path(DRAGUARD_TEST_DATA) / "hwloc" / "hwloc_ibm-x3950m2_16pkg_4numa_pci.xml");
  ASSERT_NE(x3950, nullptr);
  auto grouped = BuildResourceSlices(*x3950->nodes().front(), "x3950-1", {topology::CpuDeviceMode::kGrouped});
  ASSERT_TRUE(grouped.ok());
  const auto devices = ReadBack(*grouped, "dra.cpu");
  ASSERT_EQ(devices.size(), 4u);
  for (const auto& [name, d] : devices) EXPECT_EQ(d.attributes.at("dra.cpu").count("socketID"), 0u) << name;
  EXPECT_NE(std::find(grouped->unknown_names.begin(), grouped->unknown_names.end(),
                      "dra.cpu/socketID (the node spans packages 0, 1, 2, 3; the driver publishes the package of "
                      "one of its CPUs)"),
            grouped->unknown_names.end());
  auto individual = BuildResourceSlices(*x3950->nodes().front(), "x3950-1", {topology::CpuDeviceMode::kIndividual});
  ASSERT_TRUE(individual.ok());
  EXPECT_EQ(ReadBack(*individual, "dra.cpu").size(), 96u);
  EXPECT_NE(std::find(individual->unknown_names.begin(), individual->unknown_names.end(), "dra.cpu/cacheL3ID"),
            individual->unknown_names.end());
  // The DeviceClass the chart installs selects exactly the CPU devices.
  std::vector<std::string> comments;
  const auto classes = BuildDeviceClasses(&comments, /*with_cpu=*/true);
  ASSERT_EQ(classes.size(), 6u);
  ASSERT_EQ(comments.size(), 6u);
  EXPECT_EQ(classes[3]["metadata"]["name"], "dra.cpu");
  auto sel = cel::CompileSelector(classes[3]["spec"]["selectors"][0]["cel"]["expression"].get<std::string>());
  ASSERT_TRUE(sel.ok());
  for (const auto& [name, d] : devices) EXPECT_TRUE(cel::EvaluateSelectorValue(*sel, cel::DeviceToValue(d)).value());
  for (const Device& d : SimulateNode(*x3950->nodes().front())) {
    EXPECT_FALSE(cel::EvaluateSelectorValue(*sel, d.value).value()) << d.name;
  }
}

}  // namespace
}  // namespace draguard::dra
