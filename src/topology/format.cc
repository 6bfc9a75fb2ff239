// JSON and table renderings for `draguard topology show`.
#include "draguard/topology/format.h"

#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

namespace draguard::topology {
namespace {

using json = nlohmann::ordered_json;

json Indexes(const std::vector<uint32_t>& v) {
  json a = json::array();
  for (uint32_t x : v) a.push_back(x);
  return a;
}

json OrNull(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

json LinksJson(const Interconnect& ic) {
  json o = json::object();
  o["source"] = OrNull(ic.source);
  json peers = json::array();
  for (const GpuLink& l : ic.peers) peers.push_back(json::array({l.a, l.b, l.mbps}));
  o["peers"] = std::move(peers);
  return o;
}

json NodeJson(const NodeTopology& n) {
  const Shape& s = *n.shape;
  json o = json::object();
  o["node"] = n.name;
  o["source"] = n.source;
  o["hwlocVersion"] = OrNull(n.hwloc_version);
  o["shape"] = s.fingerprint;  // the node's draguard.io/topology-shape label value
  if (!n.nvlink_clique.empty()) o["nvlinkClique"] = n.nvlink_clique;  // nvidia.com/gpu.clique
  json numa = json::array();
  for (uint32_t i = 0; i < s.numa_nodes.size(); ++i) {
    const NumaNode& m = s.numa_nodes[i];
    const uint32_t package = n.NumaPackage(i);
    numa.push_back({{"osIndex", m.os_index},
                    {"memoryBytes", m.memory_bytes},
                    {"cpus", m.cpus},
                    {"package", package == kNoIndex ? json(nullptr) : json(package)}});
  }
  o["numaNodes"] = std::move(numa);
  json roots = json::array();
  for (const PcieRoot& r : s.pcie_roots) roots.push_back({{"id", r.id}, {"numaNodes", Indexes(r.numa_nodes)}});
  o["pcieRoots"] = std::move(roots);
  json gpus = json::array();
  for (uint32_t i = 0; i < s.gpus.size(); ++i) {
    const Gpu& g = s.gpus[i];
    json j = json::object();
    j["pciBusId"] = g.pci_bus_id;
    j["vendor"] = GpuVendorName(g.vendor);
    j["model"] = g.model;
    j["memoryBytes"] = g.memory_bytes ? json(*g.memory_bytes) : json(nullptr);
    const auto uuid = n.GpuUuid(i);
    j["uuid"] = uuid ? json(std::string(*uuid)) : json(nullptr);
    j["pcieRoot"] = OrNull(s.PcieRootId(g));
    j["numaNodes"] = Indexes(g.numa_nodes);
    if (g.memory_numa_node != kNoIndex) j["memoryNumaNode"] = g.memory_numa_node;  // Grace, POWER9
    j["osDevices"] = g.os_devices;
    gpus.push_back(std::move(j));
  }
  o["gpus"] = std::move(gpus);
  json nics = json::array();
  for (const Nic& c : s.nics) {
    nics.push_back({{"name", c.name},
                    {"pciBusId", c.pci_bus_id},
                    {"pcieRoot", OrNull(s.PcieRootId(c))},
                    {"numaNodes", Indexes(c.numa_nodes)},
                    {"rdma", c.rdma}});
  }
  o["nics"] = std::move(nics);
  o["nvlink"] = LinksJson(s.nvlink);
  o["xgmi"] = LinksJson(s.xgmi);
  return o;
}

std::string JoinIndexes(const std::vector<uint32_t>& v) {
  std::string out;
  for (uint32_t x : v) {
    if (!out.empty()) out += ",";
    out += std::to_string(x);
  }
  return out.empty() ? "-" : out;
}

}  // namespace

std::string FormatJson(const Snapshot& snapshot, std::string_view node) {
  json arr = json::array();
  for (const auto& n : snapshot.nodes()) {
    if (!node.empty() && n->name != node) continue;
    arr.push_back(NodeJson(*n));
  }
  return arr.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string FormatTable(const Snapshot& snapshot, std::string_view node) {
  std::ostringstream out;
  out << std::left << std::setw(24) << "NODE" << " " << std::setw(16) << "SHAPE" << " " << std::setw(13) << "PCI" << " " << std::setw(28) << "MODEL" << " "
      << std::setw(9) << "MEMORY" << " " << std::setw(11) << "PCIE-ROOT" << " " << std::setw(6) << "NUMA" << " "
      << std::setw(24) << "LOCAL-NICS" << " " << "NVLINK-PEERS\n";
  for (const auto& n : snapshot.nodes()) {
    if (!node.empty() && n->name != node) continue;
    const Shape& s = *n->shape;
    if (s.gpus.empty()) {  // still one line, so that every node's shape is listed
      out << std::left << std::setw(24) << n->name << " " << std::setw(16) << s.fingerprint << " " << std::setw(13)
          << "-" << " " << std::setw(28) << "(no GPUs)" << "\n";
    }
    for (uint32_t i = 0; i < s.gpus.size(); ++i) {
      const Gpu& g = s.gpus[i];
      std::string mem = g.memory_bytes ? std::to_string(*g.memory_bytes >> 20) + "Mi" : "-";
      std::string nics;
      for (uint32_t k : s.derived.local_nics[i]) {
        if (!nics.empty()) nics += ",";
        nics += s.nics[k].name;
      }
      std::string peers = JoinIndexes(s.derived.link_peers[i]);
      for (const CpuLink& c : s.nvlink.cpu_peers) {
        if (c.gpu == i) peers += (peers == "-" ? "" : ",") + std::string("cpu") + std::to_string(c.package_os_index);
      }
      if (peers.empty()) peers = "-";
      std::string root = s.PcieRootId(g);
      std::string numa = JoinIndexes(g.numa_nodes);
      if (g.memory_numa_node != kNoIndex) numa += " mem:" + std::to_string(g.memory_numa_node);
      out << std::left << std::setw(24) << n->name << " " << std::setw(16) << s.fingerprint << " " << std::setw(13)
          << g.pci_bus_id << " " << std::setw(28)
          << (g.model.empty() ? "-" : g.model.substr(0, 28)) << " " << std::setw(9) << mem << " " << std::setw(11)
          << (root.empty() ? "-" : root) << " " << std::setw(6) << numa << " " << std::setw(24)
          << (nics.empty() ? "-" : nics) << " " << peers << "\n";
    }
  }
  return out.str();
}

}  // namespace draguard::topology
