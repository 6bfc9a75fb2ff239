// BuildResourceSlices / BuildDeviceClasses over the repository's exports: every NVIDIA GPU and
// every NIC PCI function appears, names and sizes respect the resource.k8s.io/v1 limits, MIG
// devices carry the driver's canonical names, unknowns are listed and the output is deterministic.
#include "draguard/dra/resource_slices.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <set>

#include "draguard/cel/checker.h"
#include "draguard/cel/evaluator.h"
#include "draguard/dra/devices.h"
#include "draguard/topology/snapshot.h"

namespace draguard::dra {
namespace {

namespace fs = std::filesystem;
using admission::Json;

// Every loadable export of the repository (test data and the embedded examples).
std::vector<fs::path> Exports() {
  std::vector<fs::path> out;
  for (const char* dir : {"hwloc", "hwloc-synthetic"}) {
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
        EXPECT_TRUE(IsDnsSubdomain(s["metadata"]["name"].get<std::string>())) << s["metadata"]["name"];
        EXPECT_EQ(s["spec"]["driver"], d.driver);
        EXPECT_EQ(s["spec"]["nodeName"], "node-1.example");
        EXPECT_EQ(s["spec"]["pool"]["name"], "node-1.example");
        EXPECT_EQ(s["spec"]["pool"]["generation"], 1);
        EXPECT_EQ(s["spec"]["pool"]["resourceSliceCount"], d.slices.size());
        ASSERT_LE(s["spec"]["devices"].size(), kMaxDevicesPerSlice);
        for (const Json& dev : s["spec"]["devices"]) {
          const std::string name = dev["name"];
          EXPECT_TRUE(IsDnsLabel(name)) << p << ": " << name;
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
  EXPECT_TRUE(IsDnsSubdomain("a.b-c.d"));
  EXPECT_FALSE(IsDnsSubdomain("a..b"));
  EXPECT_FALSE(IsDnsSubdomain("-a"));
  EXPECT_TRUE(IsDnsSubdomain(std::string(100, 'a')));  // no per-label limit in IsDNS1123Subdomain
  EXPECT_FALSE(IsDnsLabel(std::string(64, 'a')));
  EXPECT_FALSE(IsDnsLabel("a.b"));
  EXPECT_EQ(ToDnsSubdomain("aws_g4dn-metal_2s-8259CL"), "aws-g4dn-metal-2s-8259cl");
  EXPECT_EQ(ToDnsSubdomain("_x_.Y"), "x.y");
  EXPECT_EQ(ToDnsSubdomain("__"), "");
}

TEST(ResourceSlicesTest, DeviceClassesSelectTheSimulatedDevices) {
  std::vector<std::string> comments;
  const auto classes = BuildDeviceClasses(&comments);
  ASSERT_EQ(classes.size(), 3u);
  ASSERT_EQ(comments.size(), 3u);
  EXPECT_EQ(classes[0]["metadata"]["name"], "gpu.nvidia.com");
  EXPECT_EQ(classes[0]["spec"]["extendedResourceName"], "nvidia.com/gpu");
  EXPECT_EQ(classes[1]["metadata"]["name"], "mig.nvidia.com");
  EXPECT_EQ(classes[2]["metadata"]["name"], "dranet");
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

}  // namespace
}  // namespace draguard::dra
