// Internal binary encoding of ParsedExport (see export_codec.h).
#include "export_codec.h"


namespace draguard::topology::internal {
namespace {

class Writer {
 public:
  void U64(uint64_t v) {  // little-endian on every host
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>(v >> (8 * i)));
  }
  void Str(std::string_view s) {
    U64(s.size());
    out_.append(s);
  }
  void Idx(const std::vector<uint32_t>& v) {
    U64(v.size());
    for (uint32_t x : v) U64(x);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool U64(uint64_t& v) {
    if (in_.size() - pos_ < sizeof v) return Fail();
    v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(in_[pos_ + i])) << (8 * i);
    pos_ += sizeof v;
    return true;
  }
  template <typename T>
  bool Num(T& v) {
    uint64_t x = 0;
    if (!U64(x)) return false;
    v = static_cast<T>(x);
    return static_cast<uint64_t>(v) == x || Fail();
  }
  bool Count(size_t& n) {  // a count can never exceed the remaining bytes
    uint64_t x = 0;
    if (!U64(x) || x > in_.size() - pos_) return Fail();
    n = static_cast<size_t>(x);
    return true;
  }
  bool Str(std::string& s) {
    size_t n = 0;
    if (!Count(n)) return false;
    s.assign(in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool Idx(std::vector<uint32_t>& v) {
    size_t n = 0;
    if (!Count(n)) return false;
    v.resize(n);
    for (auto& x : v) {
      if (!Num(x)) return false;
    }
    return true;
  }
  bool done() const { return ok_ && pos_ == in_.size(); }
  bool at_end() const { return pos_ == in_.size(); }
  bool ok() const { return ok_; }

 private:
  bool Fail() {
    ok_ = false;
    return false;
  }
  std::string_view in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

constexpr uint64_t kMagic = 0x31304f5047524447ull;  // "GDRGPO01"
constexpr uint64_t kMigSection = 0x47494dull;         // "MIG"

void WriteIc(Writer& w, const Interconnect& ic) {
  w.Str(ic.source);
  w.U64(ic.via_switch);
  w.U64(ic.peers.size());
  for (const GpuLink& l : ic.peers) {
    w.U64(l.a);
    w.U64(l.b);
    w.U64(l.mbps);
  }
  w.U64(ic.cpu_peers.size());
  for (const CpuLink& l : ic.cpu_peers) {
    w.U64(l.gpu);
    w.U64(l.package_os_index);
    w.U64(l.mbps);
  }
}

bool ReadIc(Reader& r, Interconnect& ic, size_t gpus) {
  uint64_t via = 0;
  size_t n = 0;
  if (!r.Str(ic.source) || !r.U64(via) || !r.Count(n)) return false;
  ic.via_switch = via != 0;
  ic.peers.resize(n);
  for (auto& l : ic.peers) {
    if (!r.Num(l.a) || !r.Num(l.b) || !r.U64(l.mbps) || l.a >= gpus || l.b >= gpus) return false;
  }
  if (!r.Count(n)) return false;
  ic.cpu_peers.resize(n);
  for (auto& l : ic.cpu_peers) {
    if (!r.Num(l.gpu) || !r.Num(l.package_os_index) || !r.U64(l.mbps) || l.gpu >= gpus) return false;
  }
  return true;
}

// The hardware fields of a shape, in a fixed order (also the input of the shape fingerprint).
void WriteShape(Writer& w, const Shape& s) {
  w.U64(s.numa_nodes.size());
  for (const NumaNode& n : s.numa_nodes) {
    w.U64(n.os_index);
    w.U64(n.memory_bytes);
    w.U64(n.cpus);
    w.Str(n.subtype);
  }
  w.U64(s.pcie_roots.size());
  for (const PcieRoot& r : s.pcie_roots) {
    w.Str(r.id);
    w.U64(r.domain);
    w.U64(r.bus_first);
    w.U64(r.bus_last);
    w.Idx(r.numa_nodes);
  }
  w.U64(s.gpus.size());
  for (const Gpu& g : s.gpus) {
    w.Str(g.pci_bus_id);
    w.U64(static_cast<uint64_t>(g.vendor));
    w.U64(g.vendor_id);
    w.U64(g.device_id);
    w.U64(g.pci_class);
    w.Str(g.model);
    w.U64(g.memory_bytes.has_value());
    w.U64(g.memory_bytes.value_or(0));
    w.U64(static_cast<uint64_t>(g.memory_source));
    w.U64(g.sm_count.has_value());
    w.U64(g.sm_count.value_or(0));
    w.U64(g.pcie_root);
    w.Idx(g.numa_nodes);
    w.U64(g.os_devices.size());
    for (const auto& d : g.os_devices) w.Str(d);
    w.U64(g.partitions);
  }
  w.U64(s.nics.size());
  for (const Nic& n : s.nics) {
    w.Str(n.name);
    w.Str(n.pci_bus_id);
    w.U64(n.pcie_root);
    w.Idx(n.numa_nodes);
    w.U64(n.rdma);
  }
  WriteIc(w, s.nvlink);
  WriteIc(w, s.xgmi);
  // MIG: only when an export records it, so the encoding (and fingerprint) of every other shape
  // stays what it was.
  bool mig = false;
  for (const Gpu& g : s.gpus) mig = mig || g.mig_mode != MigMode::kUnknown;
  if (!mig) return;
  w.U64(kMigSection);
  for (const Gpu& g : s.gpus) {
    w.U64(static_cast<uint64_t>(g.mig_mode));
    w.U64(g.mig_instances.size());
    for (const MigInstance& m : g.mig_instances) {
      w.Str(m.profile);
      w.U64(m.id);
      w.U64(m.profile_id);
      w.U64(m.slices);
      w.U64(m.memory_bytes);
      w.U64(m.placement_start);
      w.U64(m.placement_size);
    }
  }
}

bool ReadMig(Reader& r, Shape& s) {
  uint64_t marker = 0;
  if (!r.U64(marker) || marker != kMigSection) return false;
  for (Gpu& g : s.gpus) {
    uint64_t mode = 0;
    size_t n = 0;
    if (!r.U64(mode) || mode > 2 || !r.Count(n)) return false;
    g.mig_mode = static_cast<MigMode>(mode);
    g.mig_instances.resize(n);
    for (MigInstance& m : g.mig_instances) {
      if (!r.Str(m.profile) || !r.Num(m.id) || !r.Num(m.profile_id) || !r.Num(m.slices) || !r.U64(m.memory_bytes) ||
          !r.Num(m.placement_start) || !r.Num(m.placement_size)) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace

std::string EncodeShape(const Shape& s) {
  Writer w;
  WriteShape(w, s);
  return w.Take();
}

std::string EncodeExport(const ParsedExport& p) {
  Writer w;
  w.U64(kMagic);
  w.Str(p.host_name);
  w.Str(p.hwloc_version);
  w.Str(p.xml_format);
  w.U64(p.gpu_uuids.size());
  for (const auto& u : p.gpu_uuids) w.Str(u);
  WriteShape(w, p.shape);
  return w.Take();
}

Result<ParsedExport> DecodeExport(std::string_view bytes) {
  Reader r(bytes);
  ParsedExport p;
  Shape& s = p.shape;
  uint64_t magic = 0;
  size_t n = 0;
  auto bad = [] { return Status::Internal("isolated hwloc import returned a malformed result"); };
  if (!r.U64(magic) || magic != kMagic) return bad();
  if (!r.Str(p.host_name) || !r.Str(p.hwloc_version) || !r.Str(p.xml_format) || !r.Count(n)) return bad();
  p.gpu_uuids.resize(n);
  for (auto& u : p.gpu_uuids) {
    if (!r.Str(u)) return bad();
  }
  if (!r.Count(n)) return bad();
  s.numa_nodes.resize(n);
  for (NumaNode& m : s.numa_nodes) {
    if (!r.Num(m.os_index) || !r.U64(m.memory_bytes) || !r.Num(m.cpus) || !r.Str(m.subtype)) return bad();
  }
  if (!r.Count(n)) return bad();
  s.pcie_roots.resize(n);
  for (PcieRoot& x : s.pcie_roots) {
    if (!r.Str(x.id) || !r.Num(x.domain) || !r.Num(x.bus_first) || !r.Num(x.bus_last) || !r.Idx(x.numa_nodes)) {
      return bad();
    }
  }
  if (!r.Count(n)) return bad();
  s.gpus.resize(n);
  for (Gpu& g : s.gpus) {
    uint64_t vendor = 0, has_mem = 0, mem = 0, src = 0, has_sm = 0, sm = 0;
    size_t devs = 0;
    if (!r.Str(g.pci_bus_id) || !r.U64(vendor) || !r.Num(g.vendor_id) || !r.Num(g.device_id) || !r.Num(g.pci_class) ||
        !r.Str(g.model) || !r.U64(has_mem) || !r.U64(mem) || !r.U64(src) || !r.U64(has_sm) || !r.U64(sm) ||
        !r.Num(g.pcie_root) || !r.Idx(g.numa_nodes) || !r.Count(devs) || vendor > 1 || src > 4) {
      return bad();
    }
    g.vendor = static_cast<GpuVendor>(vendor);
    if (has_mem != 0) g.memory_bytes = mem;
    g.memory_source = static_cast<MemorySource>(src);
    if (has_sm != 0) g.sm_count = static_cast<uint32_t>(sm);
    g.os_devices.resize(devs);
    for (auto& d : g.os_devices) {
      if (!r.Str(d)) return bad();
    }
    if (!r.Num(g.partitions)) return bad();
    if (g.pcie_root != kNoIndex && g.pcie_root >= s.pcie_roots.size()) return bad();
  }
  if (!r.Count(n)) return bad();
  s.nics.resize(n);
  for (Nic& x : s.nics) {
    uint64_t rdma = 0;
    if (!r.Str(x.name) || !r.Str(x.pci_bus_id) || !r.Num(x.pcie_root) || !r.Idx(x.numa_nodes) || !r.U64(rdma)) {
      return bad();
    }
    x.rdma = rdma != 0;
    if (x.pcie_root != kNoIndex && x.pcie_root >= s.pcie_roots.size()) return bad();
  }
  if (!ReadIc(r, s.nvlink, s.gpus.size()) || !ReadIc(r, s.xgmi, s.gpus.size())) return bad();
  if (r.ok() && !r.at_end() && !ReadMig(r, s)) return bad();
  if (!r.done()) return bad();
  if (p.gpu_uuids.size() != s.gpus.size()) return bad();
  FinalizeShape(s);
  return p;
}

}  // namespace draguard::topology::internal
