// Shape finalisation (derived answers, fingerprint) and small model helpers.
#include <algorithm>
#include <bit>
#include <cstdio>
#include <string>

#include "draguard/topology/model.h"

namespace draguard::topology {
namespace {

const std::string kEmpty;

// FNV-1a 64-bit over a canonical byte form of the hardware fields.
class Hasher {
 public:
  void Bytes(std::string_view s) {
    U64(s.size());
    for (unsigned char c : s) Byte(c);
  }
  void U64(uint64_t v) {
    for (int i = 0; i < 8; ++i) Byte(static_cast<unsigned char>(v >> (8 * i)));
  }
  void Indexes(const std::vector<uint32_t>& v) {
    U64(v.size());
    for (uint32_t x : v) U64(x);
  }
  uint64_t value() const { return h_; }

 private:
  void Byte(unsigned char c) {
    h_ ^= c;
    h_ *= 0x100000001b3ull;
  }
  uint64_t h_ = 0xcbf29ce484222325ull;
};

void HashInterconnect(Hasher& h, const Interconnect& ic) {
  h.Bytes(ic.source);
  h.U64(ic.via_switch);
  h.U64(ic.peers.size());
  for (const GpuLink& l : ic.peers) {
    h.U64(l.a);
    h.U64(l.b);
    h.U64(l.mbps);
  }
  h.U64(ic.cpu_peers.size());
  for (const CpuLink& l : ic.cpu_peers) {
    h.U64(l.gpu);
    h.U64(l.package_os_index);
    h.U64(l.mbps);
  }
}

std::string Fingerprint(const Shape& s) {
  Hasher h;
  h.Bytes("draguard-shape-v1");
  h.U64(s.numa_nodes.size());
  for (const NumaNode& n : s.numa_nodes) {
    h.U64(n.os_index);
    h.U64(n.memory_bytes);
    h.U64(n.cpus);
    h.Bytes(n.subtype);
  }
  h.U64(s.pcie_roots.size());
  for (const PcieRoot& r : s.pcie_roots) {
    h.Bytes(r.id);
    h.U64(r.domain);
    h.U64(r.bus_first);
    h.U64(r.bus_last);
    h.Indexes(r.numa_nodes);
  }
  h.U64(s.gpus.size());
  for (const Gpu& g : s.gpus) {
    h.Bytes(g.pci_bus_id);
    h.U64(static_cast<uint64_t>(g.vendor));
    h.U64(g.vendor_id);
    h.U64(g.device_id);
    h.U64(g.pci_class);
    h.Bytes(g.model);
    h.U64(g.memory_bytes.has_value());
    h.U64(g.memory_bytes.value_or(0));
    h.U64(static_cast<uint64_t>(g.memory_source));
    h.U64(g.sm_count.has_value());
    h.U64(g.sm_count.value_or(0));
    h.U64(g.pcie_root);
    h.Indexes(g.numa_nodes);
    h.U64(g.os_devices.size());
    for (const std::string& d : g.os_devices) h.Bytes(d);
    h.U64(g.partitions);
  }
  h.U64(s.nics.size());
  for (const Nic& n : s.nics) {
    h.Bytes(n.name);
    h.Bytes(n.pci_bus_id);
    h.U64(n.pcie_root);
    h.Indexes(n.numa_nodes);
    h.U64(n.rdma);
  }
  HashInterconnect(h, s.nvlink);
  HashInterconnect(h, s.xgmi);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h.value()));
  return buf;
}

bool Intersects(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  for (uint32_t x : a) {
    if (std::find(b.begin(), b.end(), x) != b.end()) return true;
  }
  return false;
}

// Bron-Kerbosch with pivoting over bit masks (at most 64 GPUs).
void BronKerbosch(uint64_t r, uint64_t p, uint64_t x, const std::vector<uint64_t>& adj,
                  std::vector<uint64_t>& out) {
  if (p == 0 && x == 0) {
    out.push_back(r);
    return;
  }
  const uint64_t px = p | x;
  const int pivot = std::countr_zero(px);
  uint64_t candidates = p & ~adj[static_cast<size_t>(pivot)];
  while (candidates != 0) {
    const int v = std::countr_zero(candidates);
    const uint64_t bit = 1ull << v;
    BronKerbosch(r | bit, p & adj[static_cast<size_t>(v)], x & adj[static_cast<size_t>(v)], adj, out);
    p &= ~bit;
    x |= bit;
    candidates &= ~bit;
  }
}

}  // namespace

const char* GpuVendorName(GpuVendor vendor) { return vendor == GpuVendor::kNvidia ? "nvidia" : "amd"; }

const char* MemorySourceName(MemorySource source) {
  switch (source) {
    case MemorySource::kCudaGlobalMemory: return "CUDAGlobalMemorySize";
    case MemorySource::kRsmiVram: return "RSMIVRAMSize";
    case MemorySource::kOpenClGlobalMemory: return "OpenCLGlobalMemorySize";
    case MemorySource::kUnknown: break;
  }
  return "";
}

const std::string& Shape::PcieRootId(const Gpu& gpu) const {
  return gpu.pcie_root < pcie_roots.size() ? pcie_roots[gpu.pcie_root].id : kEmpty;
}

const std::string& Shape::PcieRootId(const Nic& nic) const {
  return nic.pcie_root < pcie_roots.size() ? pcie_roots[nic.pcie_root].id : kEmpty;
}

uint32_t Shape::NumaIndex(uint32_t os_index) const {
  for (size_t i = 0; i < numa_nodes.size(); ++i) {
    if (numa_nodes[i].os_index == os_index) return static_cast<uint32_t>(i);
  }
  return kNoIndex;
}

bool Shape::SameHardware(const Shape& o) const {
  return numa_nodes == o.numa_nodes && pcie_roots == o.pcie_roots && gpus == o.gpus && nics == o.nics &&
         nvlink == o.nvlink && xgmi == o.xgmi;
}

void FinalizeShape(Shape& s) {
  DerivedAnswers d;
  const size_t ng = s.gpus.size();
  d.gpus_by_root.resize(s.pcie_roots.size());
  d.gpus_by_numa.resize(s.numa_nodes.size());
  for (uint32_t g = 0; g < ng; ++g) {
    const Gpu& gpu = s.gpus[g];
    if (gpu.pcie_root < s.pcie_roots.size()) d.gpus_by_root[gpu.pcie_root].push_back(g);
    for (uint32_t os : gpu.numa_nodes) {
      const uint32_t idx = s.NumaIndex(os);
      if (idx != kNoIndex) d.gpus_by_numa[idx].push_back(g);
    }
  }
  for (const auto& v : d.gpus_by_root) d.max_gpus_per_root = std::max<uint32_t>(d.max_gpus_per_root, v.size());
  for (const auto& v : d.gpus_by_numa) d.max_gpus_per_numa = std::max<uint32_t>(d.max_gpus_per_numa, v.size());

  d.nics_same_root.resize(ng);
  d.nics_same_numa.resize(ng);
  d.local_nics.resize(ng);
  for (uint32_t g = 0; g < ng; ++g) {
    const Gpu& gpu = s.gpus[g];
    for (uint32_t n = 0; n < s.nics.size(); ++n) {
      const Nic& nic = s.nics[n];
      if (gpu.pcie_root != kNoIndex && nic.pcie_root == gpu.pcie_root) d.nics_same_root[g].push_back(n);
      if (Intersects(gpu.numa_nodes, nic.numa_nodes)) d.nics_same_numa[g].push_back(n);
    }
    d.local_nics[g] = d.nics_same_root[g];
    for (uint32_t n : d.nics_same_numa[g]) {
      if (std::find(d.local_nics[g].begin(), d.local_nics[g].end(), n) == d.local_nics[g].end()) {
        d.local_nics[g].push_back(n);
      }
    }
  }

  const Interconnect& ic = !s.nvlink.peers.empty() ? s.nvlink : s.xgmi;
  d.link_peers.resize(ng);
  for (const GpuLink& l : ic.peers) {
    if (l.a >= ng || l.b >= ng) continue;
    d.link_peers[l.a].push_back(l.b);
    d.link_peers[l.b].push_back(l.a);
  }
  for (auto& v : d.link_peers) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
  size_t linked_pairs = 0;
  for (const auto& v : d.link_peers) linked_pairs += v.size();
  linked_pairs /= 2;
  d.link_fully_connected = ng >= 2 && linked_pairs == ng * (ng - 1) / 2;
  d.max_gpus_per_clique = ng > 0 ? 1 : 0;
  if (!ic.peers.empty() && ng <= 64) {
    std::vector<uint64_t> adj(ng, 0);
    for (uint32_t g = 0; g < ng; ++g) {
      for (uint32_t p : d.link_peers[g]) adj[g] |= 1ull << p;
    }
    std::vector<uint64_t> cliques;
    const uint64_t all = ng == 64 ? ~0ull : ((1ull << ng) - 1);
    BronKerbosch(0, all, 0, adj, cliques);
    for (uint64_t c : cliques) {
      if (std::popcount(c) < 2) continue;
      std::vector<uint32_t> members;
      for (uint32_t g = 0; g < ng; ++g) {
        if ((c >> g) & 1u) members.push_back(g);
      }
      d.link_cliques.push_back(std::move(members));
    }
    std::sort(d.link_cliques.begin(), d.link_cliques.end(), [](const auto& a, const auto& b) {
      return a.size() != b.size() ? a.size() > b.size() : a < b;
    });
    if (!d.link_cliques.empty()) d.max_gpus_per_clique = static_cast<uint32_t>(d.link_cliques.front().size());
  }
  s.derived = std::move(d);
  s.fingerprint = Fingerprint(s);
}

std::optional<std::string_view> NodeTopology::GpuUuid(uint32_t gpu_index) const {
  if (gpu_index >= gpu_uuids.size() || gpu_uuids[gpu_index].empty()) return std::nullopt;
  return std::string_view(gpu_uuids[gpu_index]);
}

}  // namespace draguard::topology
