// Checks every GPU, NIC and host bridge of every export in test/data/hwloc against
// ground-truth.md (produced independently with hwloc 2.9's C API and hwloc-calc). The expected
// values are parsed from the Markdown, not restated here.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "draguard/topology/loader.h"

namespace draguard::topology {
namespace {

const std::string kDir = std::string(DRAGUARD_TEST_DATA) + "/hwloc/";

struct Expected {
  struct Device {
    std::string pcie_root;       // pciDDDD:BB
    std::set<uint32_t> numa;
  };
  std::map<std::string, Device> gpus;           // by PCI bus id
  std::map<std::string, Device> nics;           // by OS device name
  std::map<std::string, std::set<uint32_t>> roots;  // pcieRoot -> NUMA
  int numa_count = -1;
  int package_count = -1;
  std::map<uint32_t, uint32_t> numa_package;  // NUMA OS index -> package of a host bridge local to it
  std::string host;
  std::string exporter;
  struct Matrix {
    std::string name;
    std::vector<std::string> objs;
    std::vector<std::vector<uint64_t>> rows;
  };
  std::vector<Matrix> matrices;
};

std::string RootOf(const std::string& hostbridge) {  // "0000:[4e-67]" -> "pci0000:4e"
  static const std::regex re(R"(([0-9a-f]+):\[([0-9a-f]+)-[0-9a-f]+\])");
  std::smatch m;
  if (!std::regex_search(hostbridge, m, re)) return "?";
  return "pci" + m[1].str() + ":" + m[2].str();
}

std::set<uint32_t> NodesetBits(const std::string& s) {  // "0x00000001", "0xf0000000,,0x00000101"
  std::set<uint32_t> out;
  std::vector<std::string> words;
  std::stringstream ss(s);
  std::string w;
  while (std::getline(ss, w, ',')) words.push_back(w);
  for (size_t i = 0; i < words.size(); ++i) {
    const uint64_t v = words[i].empty() ? 0 : std::stoull(words[i], nullptr, 16);
    const size_t base = 32 * (words.size() - 1 - i);
    for (int b = 0; b < 32; ++b) {
      if ((v >> b) & 1u) out.insert(static_cast<uint32_t>(base + b));
    }
  }
  return out;
}

std::set<uint32_t> NumaList(const std::string& s) {  // "0", "(none)", "[0]", "0,8"
  std::set<uint32_t> out;
  std::string digits;
  for (char c : s + ",") {
    if (c >= '0' && c <= '9') {
      digits += c;
    } else if (!digits.empty()) {
      out.insert(static_cast<uint32_t>(std::stoul(digits)));
      digits.clear();
    }
  }
  return out;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '`')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '`')) ++i;
  return s.substr(i);
}

// Parses ground-truth.md into per-file expectations. The "restricted allowed set" special case
// (§4) describes the INCLUDE_DISALLOWED load we do; it overrides the default-load section.
std::map<std::string, Expected> ParseGroundTruth() {
  std::ifstream in(kDir + "ground-truth.md");
  std::map<std::string, Expected> out;
  Expected* cur = nullptr;
  std::string line;
  static const std::regex file_hdr(R"(^### `([^`]+)`)");
  static const std::regex summary(R"(^#? ?file=(\S+) host=(\S+) exporter_hwloc=(\S+))");
  static const std::regex counts(R"(numanodes=(\d+))");
  static const std::regex packages(R"(packages=(\d+))");
  static const std::regex bridge_package(R"([0-9a-f]{4,}:\[[0-9a-f]+-[0-9a-f]+\] parent=Package#P(\d+) nodeset=(\S+))");
  static const std::regex bridge(R"(^\s*(?:HOSTBRIDGE )?([0-9a-f]{4,}:\[[0-9a-f]+-[0-9a-f]+\]) parent=\S+ nodeset=(\S+))");
  static const std::regex osdev(R"(^OSDEV (\S+) type=\S+ .*pci=(\S+) .*hostbridge=(\S+) .*numa_os=\[([0-9,]*)\])");
  static const std::regex gpupci(R"(^\s*GPU-PCI .* pci=(\S+) class=\S+ id=([0-9a-f]+):([0-9a-f]+) hostbridge=(\S+) .*numa_os=\[([0-9,]*)\])");
  static const std::regex nic(R"(([A-Za-z0-9_/.]+) @ (\S+) \((\S+)\) -> NUMA ([0-9,]+|\(none\)))");
  static const std::regex dist(R"(^\s*DISTANCES name=(\S+) kind=\S+ nbobjs=(\d+))");
  bool special_condor = false;
  Expected::Matrix* matrix = nullptr;
  size_t matrix_rows = 0;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, file_hdr)) {
      cur = &out[m[1].str()];
      special_condor = false;
      matrix = nullptr;
      continue;
    }
    if (line.find("GT_DISALLOWED=1 tools/gt") != std::string::npos) {
      cur = &out["hwloc_sgi-uv2000-condor_8numa_irregular-groups_2xK5000_restricted-allowed-set.xml"];
      cur->gpus.clear();
      cur->roots.clear();
      special_condor = true;
      continue;
    }
    if (cur == nullptr) continue;
    if (matrix != nullptr) {
      if (line.find("objs:") != std::string::npos) {
        std::stringstream ss(line.substr(line.find("objs:") + 5));
        std::string o;
        while (ss >> o) matrix->objs.push_back(o);
        continue;
      }
      std::stringstream ss(line);
      std::vector<uint64_t> row;
      uint64_t v;
      while (ss >> v) row.push_back(v);
      if (!row.empty()) {
        matrix->rows.push_back(row);
        if (matrix->rows.size() == matrix_rows) matrix = nullptr;
      }
      continue;
    }
    if (std::regex_search(line, m, dist)) {
      cur->matrices.push_back({m[1].str(), {}, {}});
      matrix = &cur->matrices.back();
      matrix_rows = std::stoul(m[2].str());
      continue;
    }
    if (std::regex_search(line, m, summary)) {
      cur->host = m[2].str();
      cur->exporter = m[3].str();
      continue;
    }
    if (line.rfind("packages=", 0) == 0 || line.find("# packages=") != std::string::npos) {
      if (std::regex_search(line, m, counts)) cur->numa_count = std::stoi(m[1].str());
      if (std::regex_search(line, m, packages)) cur->package_count = std::stoi(m[1].str());
      continue;
    }
    if (std::regex_search(line, m, bridge_package)) {
      for (uint32_t numa : NodesetBits(m[2].str())) cur->numa_package[numa] = static_cast<uint32_t>(std::stoul(m[1].str()));
    }
    if (std::regex_search(line, m, bridge)) {
      cur->roots[RootOf(m[1].str())] = NodesetBits(m[2].str());
      continue;
    }
    if (std::regex_search(line, m, osdev)) {
      cur->nics[m[1].str()] = {RootOf(m[3].str()), NumaList(m[4].str())};
      continue;
    }
    if (special_condor && std::regex_search(line, m, gpupci)) {
      const std::string vendor = m[2].str();
      if (vendor == "10de" || vendor == "1002") cur->gpus[m[1].str()] = {RootOf(m[4].str()), NumaList(m[5].str())};
      continue;
    }
    if (line.rfind("NICs:", 0) == 0) {
      std::string rest = line.substr(5);
      for (std::sregex_iterator it(rest.begin(), rest.end(), nic), end; it != end; ++it) {
        std::stringstream names((*it)[1].str());
        std::string name;
        while (std::getline(names, name, '/')) cur->nics[name] = {RootOf((*it)[3].str()), NumaList((*it)[4].str())};
      }
      continue;
    }
    if (line.rfind("| ", 0) == 0) {
      std::vector<std::string> cols;
      std::stringstream ss(line);
      std::string c;
      while (std::getline(ss, c, '|')) cols.push_back(Trim(c));
      // cols[0] is empty (leading '|'): devices, model, busid, class, ids, bridge, under, numa
      static const std::regex busid(R"(^[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]$)");
      if (cols.size() >= 9 && !special_condor && std::regex_match(cols[3], busid)) {
        cur->gpus[cols[3]] = {RootOf(cols[6]), NumaList(cols[8])};
      }
    }
  }
  return out;
}

class GroundTruthTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { truth_ = new std::map<std::string, Expected>(ParseGroundTruth()); }
  static void TearDownTestSuite() { delete truth_; }
  static std::map<std::string, Expected>* truth_;
};
std::map<std::string, Expected>* GroundTruthTest::truth_ = nullptr;

TEST_F(GroundTruthTest, ParsedEnoughOfTheGroundTruth) {
  // Guards against a parser regression silently turning the checks below into no-ops.
  ASSERT_GE(truth_->size(), 20u);
  size_t gpus = 0, nics = 0, roots = 0;
  for (const auto& [f, e] : *truth_) {
    gpus += e.gpus.size();
    nics += e.nics.size();
    roots += e.roots.size();
  }
  EXPECT_EQ(gpus, 69u);
  EXPECT_GE(nics, 60u) << nics;
  EXPECT_EQ(roots, 79u);
}

TEST_F(GroundTruthTest, EveryGpuNicAndRootMatches) {
  size_t checked_files = 0;
  for (const auto& [file, exp] : *truth_) {
    SCOPED_TRACE(file);
    LoadErrorReason reason;
    auto res = ParseHwlocFile(kDir + file, {}, &reason);
    if (file.find("hwloc3-format") == 0) {
      EXPECT_EQ(reason, LoadErrorReason::kUnsupportedVersion);
      continue;
    }
    if (file.find("noio") != std::string::npos) {
      EXPECT_EQ(reason, LoadErrorReason::kNoPci) << res.status().ToString();
      continue;
    }
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    ++checked_files;
    const ParsedExport& p = res.value();
    const Shape& s = p.shape;
    if (exp.host != "-") EXPECT_EQ(p.host_name, exp.host);
    if (exp.exporter != "-") EXPECT_EQ(p.hwloc_version, exp.exporter);
    if (exp.numa_count >= 0) EXPECT_EQ(s.numa_nodes.size(), static_cast<size_t>(exp.numa_count));

    std::map<std::string, const Gpu*> gpus;
    for (const Gpu& g : s.gpus) gpus[g.pci_bus_id] = &g;
    EXPECT_EQ(gpus.size(), exp.gpus.size());
    for (const auto& [bus, e] : exp.gpus) {
      SCOPED_TRACE("gpu " + bus);
      ASSERT_TRUE(gpus.count(bus)) << "GPU missing";
      EXPECT_EQ(s.PcieRootId(*gpus[bus]), e.pcie_root);
      EXPECT_EQ(std::set<uint32_t>(gpus[bus]->numa_nodes.begin(), gpus[bus]->numa_nodes.end()), e.numa);
    }
    std::map<std::string, const Nic*> nics;
    for (const Nic& n : s.nics) nics[n.name] = &n;
    for (const auto& [name, e] : exp.nics) {
      SCOPED_TRACE("nic " + name);
      ASSERT_TRUE(nics.count(name)) << "NIC missing";
      EXPECT_EQ(s.PcieRootId(*nics[name]), e.pcie_root);
      EXPECT_EQ(std::set<uint32_t>(nics[name]->numa_nodes.begin(), nics[name]->numa_nodes.end()), e.numa);
    }
    for (const auto& [root, numa] : exp.roots) {
      SCOPED_TRACE("root " + root);
      auto it = std::find_if(s.pcie_roots.begin(), s.pcie_roots.end(), [&](const PcieRoot& r) { return r.id == root; });
      ASSERT_NE(it, s.pcie_roots.end()) << "PCIe root missing";
      EXPECT_EQ(std::set<uint32_t>(it->numa_nodes.begin(), it->numa_nodes.end()), numa);
    }
  }
  EXPECT_GE(checked_files, 18u);
}

// A NUMA node local to a host bridge attached under package P#k lies in package k, and no
// export names more packages than it has.
TEST_F(GroundTruthTest, NumaNodesLieInThePackageOfTheirHostBridges) {
  size_t checked = 0;
  for (const auto& [file, exp] : *truth_) {
    SCOPED_TRACE(file);
    auto res = ParseHwlocFile(kDir + file, {.require_pci = false});
    if (!res.ok()) continue;  // the hwloc 3 export
    const ParsedExport& p = res.value();
    ASSERT_TRUE(p.numa_packages.empty() || p.numa_packages.size() == p.shape.numa_nodes.size());
    std::set<uint32_t> named(p.numa_packages.begin(), p.numa_packages.end());
    named.erase(kNoIndex);
    if (exp.package_count >= 0) EXPECT_LE(named.size(), static_cast<size_t>(exp.package_count));
    for (const auto& [numa, package] : exp.numa_package) {
      const uint32_t k = p.shape.NumaIndex(numa);
      if (k == kNoIndex) continue;  // outside the allowed set of the restricted export
      ASSERT_LT(k, p.numa_packages.size()) << "NUMA node " << numa << " has no package";
      EXPECT_EQ(p.numa_packages[k], package) << "NUMA node " << numa;
      ++checked;
    }
  }
  EXPECT_GE(checked, 15u);
}

// GPU-GPU and GPU-CPU links of every matrix without NVSwitch peers equal the raw matrix.
TEST_F(GroundTruthTest, DirectLinkMatricesMatch) {
  size_t matrices = 0;
  for (const auto& [file, exp] : *truth_) {
    for (const auto& mx : exp.matrices) {
      if (mx.name != "NVLinkBandwidth" && mx.name != "XGMIBandwidth") continue;
      bool has_switch = false;
      for (const auto& o : mx.objs) has_switch |= o.find("NVSwitch") != std::string::npos;
      if (has_switch) continue;  // covered by the DGX-2 test
      SCOPED_TRACE(file + " " + mx.name);
      auto res = ParseHwlocFile(kDir + file);
      ASSERT_TRUE(res.ok());
      const Shape& s = res.value().shape;
      ++matrices;
      auto gpu_of = [&](const std::string& osdev) -> int {
        for (size_t g = 0; g < s.gpus.size(); ++g) {
          for (const auto& d : s.gpus[g].os_devices) {
            if (d == osdev) return static_cast<int>(g);
          }
        }
        return -1;
      };
      std::set<std::tuple<uint32_t, uint32_t, uint64_t>> want_pairs, got_pairs;
      std::set<std::tuple<uint32_t, uint32_t, uint64_t>> want_cpu, got_cpu;
      const size_t n = mx.objs.size();
      for (size_t i = 0; i < n; ++i) {
        for (size_t j = 0; j < n; ++j) {
          const uint64_t v = std::max(mx.rows[i][j], mx.rows[j][i]);
          if (i == j || v == 0) continue;
          const int gi = gpu_of(mx.objs[i]);
          const int gj = gpu_of(mx.objs[j]);
          if (gi >= 0 && gj >= 0 && i < j) {
            want_pairs.insert({std::min(gi, gj), std::max(gi, gj), v});
          } else if (gi >= 0 && mx.objs[j].rfind("Package:P#", 0) == 0) {
            want_cpu.insert({gi, std::stoul(mx.objs[j].substr(10)), v});
          }
        }
      }
      const Interconnect& ic = mx.name == "NVLinkBandwidth" ? s.nvlink : s.xgmi;
      EXPECT_EQ(ic.source, mx.name);
      for (const auto& l : ic.peers) got_pairs.insert({l.a, l.b, l.mbps});
      for (const auto& l : ic.cpu_peers) got_cpu.insert({l.gpu, l.package_os_index, l.mbps});
      EXPECT_FALSE(want_pairs.empty());
      EXPECT_EQ(got_pairs, want_pairs);
      EXPECT_EQ(got_cpu, want_cpu);
    }
  }
  EXPECT_GE(matrices, 2u);  // POWER8 NVLink, Tioga XGMI
}

}  // namespace
}  // namespace draguard::topology
