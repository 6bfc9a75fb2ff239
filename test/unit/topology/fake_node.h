// Test helper: a fake GPU node for the exporter. One description yields both a Linux sysfs tree
// (read by libhwloc through HWLOC_FSROOT: CPUs, NUMA nodes, PCI functions with their local CPUs)
// and the scenario of the fake libnvidia-ml.so.1 (fake_nvml.cc), so that the PCI devices, NUMA
// nodes and host bridges libhwloc sees are the ones the fake NVML reports.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace draguard::topotest {

/// One PCI function of the fake node.
struct FakePci {
  std::string bus;      ///< "dddd:bb:dd.f"
  uint32_t numa = 0;    ///< local NUMA node
  uint16_t vendor = 0x10de;
  uint16_t device = 0x2330;    ///< H100 SXM5
  uint32_t pci_class = 0x030200;  ///< 3D controller
};

/// One GPU as both sysfs and the fake NVML report it.
struct FakeGpu {
  FakePci pci;
  std::string uuid;
  uint64_t memory_mib = 81559;
  bool mig = false;
  std::string name = "NVIDIA H100 80GB HBM3";
};

/// A fake node: NUMA nodes with CPUs, GPUs, other PCI functions (NVSwitches) and the extra
/// scenario lines (links, errors, MIG profiles) of the fake NVML.
struct FakeNode {
  uint32_t numa_nodes = 2;
  uint32_t cpus_per_numa = 4;
  uint64_t memory_mib_per_numa = 65536;
  std::vector<FakeGpu> gpus;
  std::vector<FakePci> others;
  std::vector<std::string> nvml_lines;
};

inline void WriteText(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text << "\n";
}

inline std::string Hex(uint64_t v, const char* fmt = "%llx") {
  char buf[32];
  std::snprintf(buf, sizeof buf, fmt, static_cast<unsigned long long>(v));
  return buf;
}

/// CPU mask (hex, no prefix) of NUMA node `n`.
inline std::string CpuMask(const FakeNode& node, uint32_t n) {
  const uint64_t per = node.cpus_per_numa;
  return Hex(((uint64_t{1} << per) - 1) << (per * n));
}

inline void WritePci(const std::filesystem::path& root, const FakeNode& node, const FakePci& p) {
  const auto d = root / "sys/bus/pci/devices" / p.bus;
  WriteText(d / "vendor", "0x" + Hex(p.vendor, "%04llx"));
  WriteText(d / "device", "0x" + Hex(p.device, "%04llx"));
  WriteText(d / "class", "0x" + Hex(p.pci_class, "%06llx"));
  WriteText(d / "subsystem_vendor", "0x10de");
  WriteText(d / "subsystem_device", "0x16c1");
  WriteText(d / "local_cpus", CpuMask(node, p.numa));
  WriteText(d / "numa_node", std::to_string(p.numa));
  std::string config(64, '\0');  // type-0 header: an endpoint, not a bridge
  config[0] = static_cast<char>(p.vendor & 0xff);
  config[1] = static_cast<char>(p.vendor >> 8);
  config[2] = static_cast<char>(p.device & 0xff);
  config[3] = static_cast<char>(p.device >> 8);
  std::ofstream(d / "config", std::ios::binary).write(config.data(), static_cast<std::streamsize>(config.size()));
}

/// Writes the sysfs/procfs tree of `node` under `root`.
inline void WriteSysfs(const std::filesystem::path& root, const FakeNode& node) {
  const uint32_t cpus = node.numa_nodes * node.cpus_per_numa;
  const std::string all = "0-" + std::to_string(cpus - 1);
  const auto sys = root / "sys/devices/system";
  for (const char* f : {"online", "possible", "present"}) WriteText(sys / "cpu" / f, all);
  for (uint32_t c = 0; c < cpus; ++c) {
    const uint32_t n = c / node.cpus_per_numa;
    const auto t = sys / "cpu" / ("cpu" + std::to_string(c)) / "topology";
    WriteText(t / "physical_package_id", std::to_string(n));
    WriteText(t / "core_id", std::to_string(c % node.cpus_per_numa));
    WriteText(t / "thread_siblings", Hex(uint64_t{1} << c));
    WriteText(t / "core_siblings", CpuMask(node, n));
    WriteText(t.parent_path() / "online", "1");
  }
  const std::string nodes = "0-" + std::to_string(node.numa_nodes - 1);
  WriteText(sys / "node/online", nodes);
  WriteText(sys / "node/possible", nodes);
  for (uint32_t n = 0; n < node.numa_nodes; ++n) {
    const auto d = sys / "node" / ("node" + std::to_string(n));
    WriteText(d / "cpumap", CpuMask(node, n));
    WriteText(d / "meminfo", "Node " + std::to_string(n) + " MemTotal:       " +
                                 std::to_string(node.memory_mib_per_numa * 1024) + " kB");
  }
  WriteText(root / "proc/meminfo",
            "MemTotal:       " + std::to_string(node.memory_mib_per_numa * 1024 * node.numa_nodes) + " kB");
  WriteText(root / "proc/cpuinfo", "");
  for (const FakeGpu& g : node.gpus) WritePci(root, node, g.pci);
  for (const FakePci& p : node.others) WritePci(root, node, p);
}

/// Writes the fake NVML scenario of `node` to `path`.
inline void WriteScenario(const std::filesystem::path& path, const FakeNode& node) {
  std::ofstream out(path);
  for (const FakeGpu& g : node.gpus) {
    out << "gpu " << g.pci.bus << " " << g.uuid << " " << g.memory_mib << " " << (g.mig ? 1 : 0) << " " << g.name
        << "\n";
  }
  for (const std::string& l : node.nvml_lines) out << l << "\n";
}

/// "0000:BB:00.0" for bus number `bus`.
inline std::string Bus(uint32_t bus) { return "0000:" + Hex(bus, "%02llx") + ":00.0"; }

/// GPU `i` of a node on bus `bus`, local to `numa`.
inline FakeGpu MakeGpu(uint32_t i, uint32_t bus, uint32_t numa) {
  FakeGpu g;
  g.pci.bus = Bus(bus);
  g.pci.numa = numa;
  g.uuid = "GPU-" + Hex(0xa0000000u + i, "%08llx") + "-1111-2222-3333-" + Hex(0x400000000000ull + i, "%012llx");
  return g;
}

/// HGX H100-style: 8 GPUs (4 per NUMA node), 4 NVSwitches; each GPU has 18 NVLink 4.0 links
/// (NVML version 6), 5/4/4/5 of them to switches 0..3.
inline FakeNode HgxNode() {
  FakeNode n;
  const uint32_t buses[8] = {0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb};
  for (uint32_t i = 0; i < 8; ++i) n.gpus.push_back(MakeGpu(i, buses[i], i / 4));
  for (uint32_t s = 0; s < 4; ++s) {
    FakePci sw;
    sw.bus = Bus(0x05 + s);
    sw.numa = 0;
    sw.device = 0x22a3;
    sw.pci_class = 0x068000;
    n.others.push_back(sw);
  }
  const uint32_t per_switch[4] = {5, 4, 4, 5};
  for (uint32_t g = 0; g < 8; ++g) {
    uint32_t link = 0;
    for (uint32_t s = 0; s < 4; ++s) {
      for (uint32_t k = 0; k < per_switch[s]; ++k) {
        n.nvml_lines.push_back("link " + std::to_string(g) + " " + std::to_string(link++) + " 6 " + Bus(0x05 + s));
      }
    }
  }
  return n;
}

/// Four GPUs, every pair joined by `links` links of NVML version `version`.
inline FakeNode AllToAllNode(uint32_t links = 6, uint32_t version = 6) {
  FakeNode n;
  const uint32_t buses[4] = {0x1b, 0x43, 0x52, 0x61};
  for (uint32_t i = 0; i < 4; ++i) n.gpus.push_back(MakeGpu(i, buses[i], i / 2));
  for (uint32_t a = 0; a < 4; ++a) {
    uint32_t link = 0;
    for (uint32_t b = 0; b < 4; ++b) {
      if (a == b) continue;
      for (uint32_t k = 0; k < links; ++k) {
        n.nvml_lines.push_back("link " + std::to_string(a) + " " + std::to_string(link++) + " " +
                               std::to_string(version) + " " + n.gpus[b].pci.bus);
      }
    }
  }
  return n;
}

/// Four A100-style GPUs linked in pairs (0-1, 2-3) by 4 NVLink 3.0 links (NVML version 4), plus an
/// inactive link each.
inline FakeNode PairsNode() {
  FakeNode n;
  const uint32_t buses[4] = {0x07, 0x0f, 0x47, 0x4e};
  for (uint32_t i = 0; i < 4; ++i) {
    FakeGpu g = MakeGpu(i, buses[i], i / 2);
    g.pci.device = 0x20b0;
    g.memory_mib = 40960;
    g.name = "NVIDIA A100-SXM4-40GB";
    n.gpus.push_back(g);
  }
  for (uint32_t a = 0; a < 4; ++a) {
    const uint32_t b = a ^ 1u;
    for (uint32_t k = 0; k < 4; ++k) {
      n.nvml_lines.push_back("link " + std::to_string(a) + " " + std::to_string(k) + " 4 " + n.gpus[b].pci.bus);
    }
    n.nvml_lines.push_back("down " + std::to_string(a) + " 4");
  }
  return n;
}

}  // namespace draguard::topotest
