// Shape finalisation (derived answers, fingerprint) and small model helpers.
#include <algorithm>
#include <bit>
#include <cstdio>
#include <string>

#include "draguard/topology/model.h"
#include "export_codec.h"

namespace draguard::topology {
namespace {

const std::string kEmpty;

// FNV-1a 64-bit over the canonical byte form of the hardware fields (EncodeShape), so that the
// fingerprint and the worker encoding can never disagree on which fields count.
std::string Fingerprint(const Shape& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto feed = [&h](std::string_view bytes) {
    for (unsigned char c : bytes) {
      h ^= c;
      h *= 0x100000001b3ull;
    }
  };
  const std::string_view kVersion = "draguard-shape-v1";
  std::string prefix;
  for (int i = 0; i < 8; ++i) prefix.push_back(static_cast<char>(kVersion.size() >> (8 * i)));
  feed(prefix);
  feed(kVersion);
  feed(internal::EncodeShape(s));
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
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
    case MemorySource::kNvmlTotalMemory: return "NVMLTotalMemorySize";
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

bool IsNvlinkClique(std::string_view s) {
  const size_t dot = s.find('.');
  if (dot != 36 || s.size() - dot - 1 < 1 || s.size() - dot - 1 > 10) return false;
  for (size_t i = 0; i < 36; ++i) {
    const char c = s[i];
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  for (size_t i = dot + 1; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

uint32_t Shape::AlignableNumaNode(const Gpu& gpu) const {
  if (gpu.memory_numa_node != kNoIndex || gpu.numa_nodes.size() != 1 || numa_nodes.size() < 2) return kNoIndex;
  return gpu.numa_nodes.front();
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

uint32_t NodeTopology::NumaPackage(uint32_t numa_index) const {
  return numa_index < numa_packages.size() ? numa_packages[numa_index] : kNoIndex;
}

}  // namespace draguard::topology
