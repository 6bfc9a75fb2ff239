// `draguard topology show`: exit codes, the JSON shape from docs/product.md, the table, --node.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "commands.h"

namespace draguard::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
const std::string kDir = std::string(DRAGUARD_TEST_DATA) + "/hwloc/";
const std::string kPower8 = kDir + "hwloc_ibm-power8-minsky_2s_4xP100-SXM2_nvlink-gpu-cpu-hetero.xml";
const std::string kDgx2 = kDir + "hwloc_nvidia-dgx2h_2s-xeon8174_16xV100-SXM3_12xNVSwitch_nvlink-hetero.xml";
const std::string kTioga = kDir + "llnl_tioga_hpe-ex235a_epyc7a53_4numa_8xMI250X-GCD_rsmi_xgmi.xml";

struct CliRun {
  int code;
  std::string out;
  std::string err;
};

CliRun Cli(std::vector<std::string> args) {
  std::ostringstream out, err;
  const int code = Topology(args, out, err);
  return {code, out.str(), err.str()};
}

std::vector<std::string> Keys(const json& o) {
  std::vector<std::string> k;
  for (auto it = o.begin(); it != o.end(); ++it) k.push_back(it.key());
  return k;
}

TEST(TopologyCliTest, UsageErrors) {
  EXPECT_EQ(Cli({}).code, 1);
  EXPECT_EQ(Cli({"frobnicate"}).code, 1);
  EXPECT_EQ(Cli({"show"}).code, 1);
  EXPECT_EQ(Cli({"show", "-f"}).code, 1);
  EXPECT_EQ(Cli({"show", "-f", kPower8, "-o", "yaml"}).code, 1);
  EXPECT_EQ(Cli({"show", "-f", kPower8, "--bogus"}).code, 1);
  CliRun help = Cli({"show", "--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("usage:"), std::string::npos);
}

TEST(TopologyCliTest, RuntimeErrors) {
  CliRun missing = Cli({"show", "-f", kDir + "does-not-exist.xml"});
  EXPECT_EQ(missing.code, 2);
  EXPECT_FALSE(missing.err.empty());
  CliRun v3 = Cli({"show", "-f", kDir + "hwloc3-format_nvidia-dgx2h_v3.0.xml"});
  EXPECT_EQ(v3.code, 2);
  EXPECT_NE(v3.err.find("--export-xml-flags v2"), std::string::npos);
  CliRun node = Cli({"show", "-f", kPower8, "--node", "nope"});
  EXPECT_EQ(node.code, 2);
}

TEST(TopologyCliTest, JsonShapeMatchesProductDoc) {
  CliRun r = Cli({"show", "-f", kPower8, "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json doc = json::parse(r.out);
  ASSERT_TRUE(doc.is_array());
  ASSERT_EQ(doc.size(), 1u);
  const json& n = doc[0];
  EXPECT_EQ(Keys(n), (std::vector<std::string>{"gpus", "hwlocVersion", "nics", "node", "numaNodes", "nvlink",
                                               "pcieRoots", "shape", "source", "xgmi"}));
  EXPECT_EQ(n["shape"].get<std::string>().size(), 16u);
  EXPECT_EQ(n["node"], "hwloc-ibm-power8-minsky-2s-4xp100-sxm2-nvlink-gpu-cpu-hetero");
  EXPECT_EQ(n["source"], kPower8);
  EXPECT_EQ(n["hwlocVersion"], "2.5.0a1-git");
  ASSERT_EQ(n["numaNodes"].size(), 2u);
  EXPECT_EQ(Keys(n["numaNodes"][0]), (std::vector<std::string>{"cpus", "memoryBytes", "osIndex", "package"}));
  EXPECT_EQ(n["numaNodes"][1]["package"], 1);
  EXPECT_EQ(Keys(n["pcieRoots"][0]), (std::vector<std::string>{"id", "numaNodes"}));
  EXPECT_EQ(n["pcieRoots"][0]["id"], "pci0002:00");
  ASSERT_EQ(n["gpus"].size(), 4u);
  const json& g = n["gpus"][2];
  EXPECT_EQ(Keys(g), (std::vector<std::string>{"memoryBytes", "model", "numaNodes", "osDevices", "pciBusId", "pcieRoot",
                                               "uuid", "vendor"}));
  EXPECT_EQ(g["pciBusId"], "000a:01:00.0");
  EXPECT_EQ(g["pcieRoot"], "pci000a:00");
  EXPECT_EQ(g["numaNodes"], json::array({1}));
  EXPECT_EQ(g["vendor"], "nvidia");
  EXPECT_TRUE(g["memoryBytes"].is_number_unsigned());
  EXPECT_TRUE(g["uuid"].is_string());
  EXPECT_EQ(n["nvlink"]["source"], "NVLinkBandwidth");
  EXPECT_EQ(n["nvlink"]["peers"], json::parse("[[0,1,40000],[2,3,40000]]"));
  EXPECT_TRUE(n["xgmi"]["source"].is_null());
  EXPECT_EQ(n["xgmi"]["peers"], json::array());
  // Field order follows the documented shape.
  EXPECT_LT(r.out.find("\"node\""), r.out.find("\"source\""));
  EXPECT_LT(r.out.find("\"pciBusId\""), r.out.find("\"vendor\""));
}

TEST(TopologyCliTest, TableShowsPeersAndCpuLinks) {
  CliRun r = Cli({"show", "-f", kPower8, "-o", "table"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string header, first;
  std::getline(lines, header);
  std::getline(lines, first);
  EXPECT_NE(header.find("PCIE-ROOT"), std::string::npos);
  EXPECT_NE(header.find("SHAPE"), std::string::npos);
  // The shape column is the JSON's "shape" (the draguard.io/topology-shape label value).
  const std::string shape = json::parse(Cli({"show", "-f", kPower8, "-o", "json"}).out)[0]["shape"];
  EXPECT_NE(first.find(" " + shape + " "), std::string::npos) << first;
  EXPECT_NE(first.find("0002:01:00.0"), std::string::npos);
  EXPECT_NE(first.find("pci0002:00"), std::string::npos);
  EXPECT_NE(first.find("16280Mi"), std::string::npos);
  EXPECT_NE(first.find("1,cpu0"), std::string::npos);  // NVLink peer GPU 1 and the CPU package 0
}

TEST(TopologyCliTest, NullsForUnknownMemoryAndNoMatrix) {
  CliRun r = Cli({"show", "-f", kDir + "hwloc_hp-sl390s-g7_2s-xeon_3xTesla-M2070_mlx4.xml"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json n = json::parse(r.out)[0];
  EXPECT_TRUE(n["hwlocVersion"].is_null());
  EXPECT_TRUE(n["gpus"][0]["memoryBytes"].is_null());
  EXPECT_TRUE(n["gpus"][0]["uuid"].is_null());
  EXPECT_TRUE(n["nvlink"]["source"].is_null());
  bool rdma = false;
  for (const auto& nic : n["nics"]) rdma |= nic["name"] == "mlx4_0" && nic["rdma"] == true;
  EXPECT_TRUE(rdma);
}

TEST(TopologyCliTest, DirectoryWithBadFilesAndNodeFilter) {
  const fs::path dir = fs::temp_directory_path() / ("draguard-cli-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(kDgx2, dir / "dgx-a.xml");
  fs::copy_file(kTioga, dir / "tioga-1.hwloc.xml");
  {
    std::ofstream(dir / "broken.xml") << "<topology version=\"2.0\"><object";
  }
  CliRun r = Cli({"show", "-f", dir.string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("broken.xml"), std::string::npos);
  const json doc = json::parse(r.out);
  ASSERT_EQ(doc.size(), 2u);
  EXPECT_EQ(doc[0]["node"], "dgx-a");
  EXPECT_EQ(doc[0]["nvlink"]["peers"].size(), 120u);
  EXPECT_EQ(doc[1]["node"], "tioga-1");
  EXPECT_EQ(doc[1]["xgmi"]["source"], "XGMIBandwidth");
  EXPECT_EQ(doc[1]["xgmi"]["peers"].size(), 28u);

  CliRun one = Cli({"show", "-f", dir.string(), "--node", "tioga-1", "-o", "json"});
  ASSERT_EQ(one.code, 0);
  EXPECT_EQ(json::parse(one.out).size(), 1u);

  CliRun table = Cli({"show", "-f", dir.string(), "-o", "table", "--node=dgx-a"});
  ASSERT_EQ(table.code, 0);
  size_t lines = 0;
  for (char c : table.out) lines += c == '\n';
  EXPECT_EQ(lines, 17u);  // header + 16 GPUs
  EXPECT_NE(table.out.find("pci0000:2b"), std::string::npos);
  EXPECT_EQ(table.out.find("tioga-1"), std::string::npos);
  fs::remove_all(dir);

  const fs::path empty = fs::temp_directory_path() / ("draguard-cli-empty-" + std::to_string(::getpid()));
  fs::create_directories(empty);
  EXPECT_EQ(Cli({"show", "-f", empty.string()}).code, 2);
  fs::remove_all(empty);
}

// `topology slices`: flags, exit codes, the YAML stream and JSON List, --node, --device-classes.
TEST(TopologySlicesCliTest, UsageAndRuntimeErrors) {
  EXPECT_EQ(Cli({"slices"}).code, kExitUsage);                                   // no -f
  EXPECT_EQ(Cli({"slices", "-f", kPower8, "-o", "table"}).code, kExitUsage);     // bad format
  EXPECT_EQ(Cli({"slices", "-f", kPower8, "--bogus"}).code, kExitUsage);
  EXPECT_EQ(Cli({"slices", "-f", kPower8, "--node", "Bad_Name"}).code, kExitUsage);
  EXPECT_EQ(Cli({"slices", "--device-classes", "-f", kPower8}).code, kExitUsage);
  EXPECT_EQ(Cli({"slices", "-f", "/nonexistent/x.xml"}).code, kExitRuntime);
  EXPECT_EQ(Cli({"slices", "-f", kDir, "--node", "nope"}).code, kExitRuntime);
  const CliRun help = Cli({"slices", "--help"});
  EXPECT_EQ(help.code, kExitOk);
  EXPECT_NE(help.out.find("topology slices -f FILE|DIR"), std::string::npos);
}

TEST(TopologySlicesCliTest, YamlStreamWithCommentsForUnknowns) {
  const CliRun r = Cli({"slices", "-f", kPower8, "--node", "minsky-1"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out.rfind("---\n# node minsky-1, driver gpu.nvidia.com", 0), 0u) << r.out.substr(0, 200);
  EXPECT_NE(r.out.find("name: minsky-1-gpu-nvidia-com\n"), std::string::npos);
  EXPECT_NE(r.out.find("# every device: not in the export: gpu.nvidia.com/brand"), std::string::npos);
  EXPECT_NE(r.out.find("apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\n"), std::string::npos);
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_EQ(Cli({"slices", "-f", kPower8, "--node", "minsky-1"}).out, r.out);  // deterministic
}

TEST(TopologySlicesCliTest, JsonListAndNotesOnStderr) {
  const CliRun r = Cli({"slices", "-f", kDgx2, "-o", "json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const json list = json::parse(r.out);
  EXPECT_EQ(list["kind"], "List");
  ASSERT_GE(list["items"].size(), 1u);
  EXPECT_EQ(list["items"][0]["spec"]["driver"], "gpu.nvidia.com");
  EXPECT_EQ(list["items"][0]["spec"]["devices"].size(), 16u);
  // The node is named after the file as the cluster-test harness names it; unknowns once on stderr.
  const std::string node = list["items"][0]["spec"]["nodeName"];
  EXPECT_EQ(node, "hwloc-nvidia-dgx2h-2s-xeon8174-16xv100-sxm3-12xnvswitch-nvlink");
  EXPECT_EQ(r.err.find("is not a valid Kubernetes node name"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("gpu.nvidia.com/driverVersion"), std::string::npos) << r.err;
}

TEST(TopologySlicesCliTest, DirectoryAndNodeFilter) {
  const CliRun all = Cli({"slices", "-f", kDir, "-o", "json"});
  ASSERT_EQ(all.code, kExitOk) << all.err;
  const json list = json::parse(all.out);
  std::set<std::string> nodes;
  for (const auto& s : list["items"]) nodes.insert(s["spec"]["nodeName"].get<std::string>());
  EXPECT_GE(nodes.size(), 10u);
  const std::string power8 = "hwloc-ibm-power8-minsky-2s-4xp100-sxm2-nvlink-gpu-cpu-hetero";
  const CliRun one = Cli({"slices", "-f", kDir, "--node", power8, "-o", "json"});
  ASSERT_EQ(one.code, kExitOk) << one.err;
  const json one_list = json::parse(one.out);  // a named object: a loop over a temporary's member dangles
  for (const auto& s : one_list["items"]) {
    EXPECT_EQ(s["spec"]["nodeName"], "hwloc-ibm-power8-minsky-2s-4xp100-sxm2-nvlink-gpu-cpu-hetero");
  }
  // AMD only: no NVIDIA device; still its NICs (if any), never an error.
  EXPECT_EQ(Cli({"slices", "-f", kTioga, "--node", "tioga"}).code, kExitOk);
}

// The node `topology show` names after a file is a Kubernetes node name (the one the cluster-test
// harness gives that export's Node), which `topology slices --node` takes, for a file and for a
// directory, and every command names it alike.
TEST(TopologySlicesCliTest, TheNodeShowNamesIsTheNodeSlicesTakes) {
  for (const std::string& file : {kDgx2, kPower8, kDir + "hwloc3-format_nvidia-dgx2h_v3.0.xml",
                                  kDir + "hwloc_supermicro-x9drg_2s-e5-2650_K40m+M2075+R9_mlx5_normalio.xml"}) {
    const CliRun show = Cli({"show", "-f", file, "-o", "json"});
    if (show.code != kExitOk) continue;  // an export show refuses (hwloc 3 format) has no node to compare
    const std::string node = json::parse(show.out)[0]["node"];
    EXPECT_EQ(node.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-."), std::string::npos) << node;
    const CliRun file_slices = Cli({"slices", "-f", file, "--node", node, "-o", "json"});
    ASSERT_EQ(file_slices.code, kExitOk) << node << ": " << file_slices.err;
    const CliRun plain = Cli({"slices", "-f", file, "-o", "json"});
    ASSERT_EQ(plain.code, kExitOk) << plain.err;
    EXPECT_EQ(plain.out, file_slices.out) << node;
    const json list = json::parse(plain.out);
    for (const auto& s : list["items"]) EXPECT_EQ(s["spec"]["nodeName"], node);
    const CliRun dir = Cli({"slices", "-f", kDir, "--node", node, "-o", "json"});
    ASSERT_EQ(dir.code, kExitOk) << node << ": " << dir.err;
    EXPECT_EQ(dir.out, file_slices.out) << node;
    EXPECT_EQ(Cli({"show", "-f", kDir, "--node", node, "-o", "json"}).code, kExitOk) << node;
  }
}

TEST(TopologySlicesCliTest, DeviceClasses) {
  const CliRun r = Cli({"slices", "--device-classes"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("kind: DeviceClass\nmetadata:\n  name: gpu.nvidia.com\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("name: mig.nvidia.com"), std::string::npos);
  EXPECT_NE(r.out.find("name: dranet"), std::string::npos);
  EXPECT_NE(r.out.find("device.attributes['gpu.nvidia.com'].type == 'mig'"), std::string::npos);
  const json list = json::parse(Cli({"slices", "--device-classes", "-o", "json"}).out);
  ASSERT_EQ(list["items"].size(), 5u);
  EXPECT_EQ(list["items"][3]["metadata"]["name"], "compute-domain-default-channel.nvidia.com");
  EXPECT_EQ(list["items"][4]["metadata"]["name"], "compute-domain-daemon.nvidia.com");
  // With a CPU mode, also the class dra-driver-cpu's chart installs.
  const json with_cpu = json::parse(Cli({"slices", "--device-classes", "--cpu-mode", "grouped", "-o", "json"}).out);
  ASSERT_EQ(with_cpu["items"].size(), 6u);
  EXPECT_EQ(with_cpu["items"][3]["metadata"]["name"], "dra.cpu");
}

// --cpu-mode: none (default, no dra.cpu slice), grouped (one device per NUMA node), individual
// (one per CPU); a bad mode is a usage error; a node the driver refuses is a note on stderr.
TEST(TopologySlicesCliTest, CpuMode) {
  const std::string g4dn = kDir + "aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml";
  EXPECT_EQ(Cli({"slices", "-f", g4dn, "--cpu-mode", "socket"}).code, kExitUsage);
  EXPECT_EQ(Cli({"slices", "-f", g4dn, "--cpu-mode"}).code, kExitUsage);
  auto cpu_slices = [](const json& list) {
    std::vector<json> out;
    for (const auto& s : list["items"]) {
      if (s["spec"]["driver"] == "dra.cpu") out.push_back(s);
    }
    return out;
  };
  const CliRun none = Cli({"slices", "-f", g4dn, "--node", "g4dn-1", "-o", "json"});
  ASSERT_EQ(none.code, kExitOk) << none.err;
  EXPECT_TRUE(cpu_slices(json::parse(none.out)).empty());
  EXPECT_EQ(Cli({"slices", "-f", g4dn, "--node", "g4dn-1", "-o", "json", "--cpu-mode", "none"}).out, none.out);

  const CliRun grouped = Cli({"slices", "-f", g4dn, "--node", "g4dn-1", "-o", "json", "--cpu-mode=grouped"});
  ASSERT_EQ(grouped.code, kExitOk) << grouped.err;
  const auto g = cpu_slices(json::parse(grouped.out));
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0]["metadata"]["name"], "g4dn-1-dra-cpu");
  ASSERT_EQ(g[0]["spec"]["devices"].size(), 2u);
  const json& numa1 = g[0]["spec"]["devices"][1];
  EXPECT_EQ(numa1["name"], "cpudevnuma001");
  EXPECT_EQ(numa1["allowMultipleAllocations"], true);
  EXPECT_EQ(numa1["capacity"]["dra.cpu/cpu"]["value"], "48");
  EXPECT_EQ(numa1["attributes"]["resource.kubernetes.io/numaNode"]["int"], 1);
  EXPECT_EQ(numa1["attributes"]["dra.cpu/socketID"]["int"], 1);

  const CliRun individual = Cli({"slices", "-f", g4dn, "--node", "g4dn-1", "--cpu-mode", "individual"});
  ASSERT_EQ(individual.code, kExitOk) << individual.err;
  EXPECT_NE(individual.out.find("# node g4dn-1, driver dra.cpu"), std::string::npos);
  EXPECT_NE(individual.out.find("name: cpudev095\n"), std::string::npos);
  EXPECT_EQ(individual.out.find("name: cpudev096\n"), std::string::npos);
  EXPECT_NE(individual.out.find("dra.cpu/smtEnabled: true because some core has two or more online logical CPUs"),
            std::string::npos);

  // POWER9 SMT4: the driver starts (built for ppc64le), pairing siblings only two by two; the
  // slice comment says so and where its images come from.
  const std::string lassen = kDir + "llnl_lassen_ibm-ac922_2s-power9_4xV100-SXM2_cuda-nvml_4xmlx5.xml";
  const CliRun smt4 = Cli({"slices", "-f", lassen, "--node", "lassen-1", "--cpu-mode", "grouped"});
  ASSERT_EQ(smt4.code, kExitOk) << smt4.err;
  EXPECT_NE(smt4.out.find("driver: dra.cpu"), std::string::npos);
  EXPECT_NE(smt4.out.find("the driver pairs SMT siblings only two by two"), std::string::npos) << smt4.out;
  EXPECT_NE(smt4.out.find("its images are built for linux/amd64 and linux/arm64 only"), std::string::npos);
  EXPECT_EQ(smt4.err.find("refuses"), std::string::npos) << smt4.err;
}

// --nic-numa-attribute: driver (dranet v1.4.0, the default) publishes dra.net/numaNode only;
// standard (dranet after v1.4.0) also resource.kubernetes.io/numaNode, on the same NICs.
TEST(TopologySlicesCliTest, NicNumaAttribute) {
  const std::string xe = std::string(DRAGUARD_TEST_DATA) + "/hwloc-synthetic/xe8640-like_4xH100-SXM_4numa_nvlink-all_3xmlx5.xml";
  EXPECT_EQ(Cli({"slices", "-f", xe, "--nic-numa-attribute", "v1.5.0"}).code, kExitUsage);
  EXPECT_EQ(Cli({"slices", "-f", xe, "--nic-numa-attribute"}).code, kExitUsage);
  auto nics = [](const CliRun& r) {
    std::vector<json> out;
    const json list = json::parse(r.out);  // named: a loop over a temporary's member dangles
    for (const auto& s : list["items"]) {
      if (s["spec"]["driver"] != "dra.net") continue;
      for (const auto& d : s["spec"]["devices"]) out.push_back(d);
    }
    return out;
  };
  const CliRun driver = Cli({"slices", "-f", xe, "--node", "xe-1", "-o", "json"});
  ASSERT_EQ(driver.code, kExitOk) << driver.err;
  EXPECT_EQ(Cli({"slices", "-f", xe, "--node", "xe-1", "-o", "json", "--nic-numa-attribute=driver"}).out, driver.out);
  const CliRun standard = Cli({"slices", "-f", xe, "--node", "xe-1", "-o", "json", "--nic-numa-attribute", "standard"});
  ASSERT_EQ(standard.code, kExitOk) << standard.err;
  const auto before = nics(driver), after = nics(standard);
  ASSERT_EQ(before.size(), 3u);
  ASSERT_EQ(after.size(), 3u);
  for (std::size_t i = 0; i < after.size(); ++i) {
    EXPECT_FALSE(before[i]["attributes"].contains("resource.kubernetes.io/numaNode")) << before[i].dump();
    EXPECT_EQ(after[i]["attributes"]["resource.kubernetes.io/numaNode"], after[i]["attributes"]["dra.net/numaNode"]);
    EXPECT_EQ(after[i]["attributes"]["resource.kubernetes.io/numaNode"]["int"], static_cast<int>(i));  // NIC i on NUMA i
  }
}

}  // namespace
}  // namespace draguard::cli

namespace draguard::cli {
namespace {

// `topology draw`: stdout for one node, FILE.svg, DIR/<node>.svg per node, and the errors.
TEST(TopologyDrawCliTest, OutputsAndErrors) {
  EXPECT_EQ(Cli({"draw"}).code, 1);
  EXPECT_EQ(Cli({"draw", "-f", kPower8, "--bogus"}).code, 1);
  EXPECT_EQ(Cli({"draw", "-f", kDir + "does-not-exist.xml"}).code, 2);
  EXPECT_EQ(Cli({"draw", "-f", kPower8, "--node", "nope"}).code, 2);
  CliRun help = Cli({"draw", "--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("topology draw"), std::string::npos);

  CliRun one = Cli({"draw", "-f", kPower8});
  ASSERT_EQ(one.code, 0) << one.err;
  EXPECT_EQ(one.out.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg ", 0), 0u);
  EXPECT_TRUE(one.out.ends_with("</svg>\n"));
  EXPECT_NE(one.out.find("GPU0 – CPU package P#0"), std::string::npos);  // POWER8 GPU-CPU NVLink
  EXPECT_EQ(Cli({"draw", "-f", kPower8}).out, one.out);

  const fs::path dir = fs::temp_directory_path() / ("draguard-cli-draw-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "in");
  fs::copy_file(kDgx2, dir / "in" / "dgx-a.xml");
  fs::copy_file(kTioga, dir / "in" / "tioga-1.hwloc.xml");
  CliRun several = Cli({"draw", "-f", (dir / "in").string()});
  EXPECT_EQ(several.code, 1);
  EXPECT_NE(several.err.find("-o DIR"), std::string::npos);
  EXPECT_EQ(Cli({"draw", "-f", (dir / "in").string(), "-o", (dir / "x.svg").string()}).code, 1);

  CliRun file = Cli({"draw", "-f", (dir / "in").string(), "--node", "tioga-1", "-o", (dir / "t.svg").string()});
  ASSERT_EQ(file.code, 0) << file.err;
  std::ifstream t(dir / "t.svg");
  const std::string tioga((std::istreambuf_iterator<char>(t)), std::istreambuf_iterator<char>());
  EXPECT_NE(tioga.find("XGMI: 28 GPU pairs"), std::string::npos);

  CliRun all = Cli({"draw", "-f", (dir / "in").string(), "-o", (dir / "out").string()});
  ASSERT_EQ(all.code, 0) << all.err;
  EXPECT_EQ(all.out, (dir / "out" / "dgx-a.svg").string() + "\n" + (dir / "out" / "tioga-1.svg").string() + "\n");
  std::ifstream d(dir / "out" / "tioga-1.svg");
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(d)), std::istreambuf_iterator<char>()), tioga);

  // Nodes in NVLink cliques (as the exporter records NVML's fabric info): beside the nodes'
  // pictures, the rack view; --racks draws only it.
  {
    std::ifstream in(kDgx2);
    std::string xml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto with_clique = [&](const std::string& clique) {
      std::string out = xml;
      const std::string backend = "<info name=\"Backend\" value=\"NVML\"/>";
      for (std::size_t at = 0; (at = out.find(backend, at)) != std::string::npos; at += backend.size()) {
        out.insert(at + backend.size(), "<info name=\"NVIDIAGPUClique\" value=\"" + clique + "\"/>");
      }
      return out;
    };
    fs::create_directories(dir / "racks");
    const std::string uuid = "0c6e5a52-4f7b-4e0a-9d43-3f1b7f2a9c10";
    std::ofstream(dir / "racks" / "tray-b.xml") << with_clique(uuid + ".2");
    std::ofstream(dir / "racks" / "tray-a.xml") << with_clique(uuid + ".1");
    std::ofstream(dir / "racks" / "tray-c.xml") << with_clique(uuid + ".1");
    fs::copy_file(kTioga, dir / "racks" / "tioga-1.xml");
    CliRun racks = Cli({"draw", "-f", (dir / "racks").string(), "-o", (dir / "racks-out").string()});
    ASSERT_EQ(racks.code, 0) << racks.err;
    EXPECT_NE(racks.out.find((dir / "racks-out" / "tray-a.svg").string() + "\n"), std::string::npos);
    EXPECT_TRUE(racks.out.ends_with((dir / "racks-out" / "_nvlink-cliques.svg").string() + "\n")) << racks.out;
    CliRun only = Cli({"draw", "-f", (dir / "racks").string(), "--racks"});
    ASSERT_EQ(only.code, 0) << only.err;
    const std::size_t c1 = only.out.find("clique " + uuid + ".1"), c2 = only.out.find("clique " + uuid + ".2");
    ASSERT_NE(c1, std::string::npos) << only.out;
    ASSERT_NE(c2, std::string::npos);
    EXPECT_LT(c1, c2);
    EXPECT_LT(only.out.find("tray-a"), only.out.find("tray-c"));
    EXPECT_NE(only.out.find("2 nodes · 32 GPUs"), std::string::npos);
    EXPECT_NE(only.out.find("no NVLink clique"), std::string::npos);  // tioga-1
    EXPECT_GT(only.out.find("tioga-1"), c2);
    std::ifstream r(dir / "racks-out" / "_nvlink-cliques.svg");
    EXPECT_EQ(std::string((std::istreambuf_iterator<char>(r)), std::istreambuf_iterator<char>()), only.out);
    // Without any clique no rack view is written.
    EXPECT_EQ(all.out.find("_nvlink-cliques"), std::string::npos);
  }

  // A file where the output directory should be: the write error names it.
  { std::ofstream(dir / "blocked") << "x"; }
  CliRun blocked = Cli({"draw", "-f", (dir / "in").string(), "-o", (dir / "blocked").string()});
  EXPECT_EQ(blocked.code, 2);
  EXPECT_NE(blocked.err.find("blocked"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace draguard::cli
