// Internal binary encoding of ParsedExport and the shape record (see export_codec.h).
#include "export_codec.h"

#include <cstdint>
#include <optional>
#include <vector>

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
  /// `budget`: bytes the decoded lists and strings may allocate in all, so that a few bytes of
  /// input claiming a long list of large elements cannot make the reader allocate gigabytes.
  Reader(std::string_view in, size_t budget) : in_(in), budget_(budget) {}
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
  // A count of elements each encoded in at least `min_bytes` bytes and taking `element_bytes`
  // in memory: never more than the remaining bytes can hold, nor more than the budget left.
  bool Count(size_t& n, size_t min_bytes, size_t element_bytes) {
    uint64_t x = 0;
    if (!U64(x) || x > (in_.size() - pos_) / min_bytes) return Fail();
    if (x > budget_ / element_bytes) return Fail();
    budget_ -= static_cast<size_t>(x) * element_bytes;
    n = static_cast<size_t>(x);
    return true;
  }
  bool Str(std::string& s) {
    size_t n = 0;
    if (!Count(n, 1, 1)) return false;
    s.assign(in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool Idx(std::vector<uint32_t>& v) {
    size_t n = 0;
    if (!Count(n, sizeof(uint64_t), sizeof(uint32_t))) return false;
    v.resize(n);
    for (auto& x : v) {
      if (!Num(x)) return false;
    }
    return true;
  }
  /// The next u64 without consuming it; false at the end of the input.
  bool Peek(uint64_t& v) const {
    if (in_.size() - pos_ < sizeof v) return false;
    v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(in_[pos_ + i])) << (8 * i);
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
  size_t budget_ = 0;
  bool ok_ = true;
};

constexpr uint64_t kMagic = 0x31304f5047524447ull;        // "GDRGPO01"
constexpr uint64_t kRecordMagic = 0x3130525347524447ull;  // "GDRGSR01"
// What a worker's answer may allocate when decoded (far above any real export's model).
constexpr size_t kDecodeBudget = 256u << 20;
constexpr uint64_t kMigSection = 0x47494dull;         // "MIG"
constexpr uint64_t kGpuMemorySection = 0x4e4d47ull;   // "GMN"

// One list of fields per type, walked by both directions: `io` is a Writer (through Out, const
// objects) or a Reader (through In). Each field is one call; a Reader's call fails on short or
// out-of-range input, which ends the walk.

// Writing: every call succeeds.
struct Out {
  Writer& w;
  bool U64(uint64_t v) { return w.U64(v), true; }
  template <typename T>
  bool Num(const T& v) { return U64(static_cast<uint64_t>(v)); }
  bool Str(const std::string& v) { return w.Str(v), true; }
  bool Idx(const std::vector<uint32_t>& v) { return w.Idx(v), true; }
  bool Flag(const bool& v) { return U64(v ? 1 : 0); }
  template <typename E>
  bool Enum(const E& v, uint64_t /*max*/) { return U64(static_cast<uint64_t>(v)); }
  template <typename T>
  bool Optional(const std::optional<T>& v) { return U64(v.has_value()) && U64(v.value_or(0)); }
  template <typename T, typename F>
  bool Each(const std::vector<T>& v, F&& f) {
    U64(v.size());
    for (const T& x : v) f(x);
    return true;
  }
};

// Reading: a call fails on short input, a count past the remaining bytes, or a value its field
// cannot hold.
struct In {
  Reader& r;
  bool U64(uint64_t& v) { return r.U64(v); }
  template <typename T>
  bool Num(T& v) { return r.Num(v); }
  bool Str(std::string& v) { return r.Str(v); }
  bool Idx(std::vector<uint32_t>& v) { return r.Idx(v); }
  bool Flag(bool& v) {
    uint64_t x = 0;
    if (!r.U64(x)) return false;
    v = x != 0;
    return true;
  }
  template <typename E>
  bool Enum(E& v, uint64_t max) {
    uint64_t x = 0;
    if (!r.U64(x) || x > max) return false;
    v = static_cast<E>(x);
    return true;
  }
  template <typename T>
  bool Optional(std::optional<T>& v) {
    uint64_t has = 0, x = 0;
    if (!r.U64(has) || !r.U64(x)) return false;
    if (has != 0) v = static_cast<T>(x);
    return true;
  }
  template <typename T, typename F>
  bool Each(std::vector<T>& v, F&& f) {
    size_t n = 0;  // every element is encoded in at least one u64
    if (!r.Count(n, sizeof(uint64_t), sizeof(T))) return false;
    v.resize(n);
    for (T& x : v) {
      if (!f(x)) return false;
    }
    return true;
  }
};

// An index into a list of `size` (kNoIndex allowed when `optional`): checked when reading.
bool InRange(uint64_t index, size_t size, bool optional = false) {
  return (optional && index == kNoIndex) || index < size;
}

template <typename Io, typename Ic>
bool IcFields(Io& io, Ic& ic, size_t gpus) {
  return io.Str(ic.source) && io.Flag(ic.via_switch) &&
         io.Each(ic.peers, [&](auto& l) {
           return io.Num(l.a) && io.Num(l.b) && io.U64(l.mbps) && InRange(l.a, gpus) && InRange(l.b, gpus);
         }) &&
         io.Each(ic.cpu_peers, [&](auto& l) {
           return io.Num(l.gpu) && io.Num(l.package_os_index) && io.U64(l.mbps) && InRange(l.gpu, gpus);
         });
}

// MIG: only when an export records it, so the encoding (and fingerprint) of every other shape
// stays what it was.
template <typename Io, typename S>
bool MigFields(Io& io, S& s) {
  uint64_t marker = kMigSection;
  if (!io.U64(marker) || marker != kMigSection) return false;
  for (auto& g : s.gpus) {
    if (!io.Enum(g.mig_mode, 2) ||
        !io.Each(g.mig_instances, [&](auto& m) {
          return io.Str(m.profile) && io.Num(m.id) && io.Num(m.profile_id) && io.Num(m.slices) &&
                 io.U64(m.memory_bytes) && io.Num(m.placement_start) && io.Num(m.placement_size);
        })) {
      return false;
    }
  }
  return true;
}

// GPU memory NUMA nodes: only when some GPU has one (Grace, POWER9), after the MIG section, so
// the encoding (and fingerprint) of every other shape stays what it was. Each is kNoIndex or the
// OS index of one of the shape's NUMA nodes.
template <typename Io, typename S>
bool GpuMemoryFields(Io& io, S& s) {
  uint64_t marker = kGpuMemorySection;
  if (!io.U64(marker) || marker != kGpuMemorySection) return false;
  for (auto& g : s.gpus) {
    if (!io.Num(g.memory_numa_node)) return false;
    if (g.memory_numa_node != kNoIndex && s.NumaIndex(g.memory_numa_node) == kNoIndex) return false;
  }
  return true;
}

// The hardware fields of a shape, in a fixed order (also the input of the shape fingerprint),
// without the MIG section.
template <typename Io, typename S>
bool ShapeFields(Io& io, S& s) {
  const auto& roots = s.pcie_roots;
  return io.Each(s.numa_nodes,
                 [&](auto& n) { return io.Num(n.os_index) && io.U64(n.memory_bytes) && io.Num(n.cpus) && io.Str(n.subtype); }) &&
         io.Each(s.pcie_roots,
                 [&](auto& r) {
                   return io.Str(r.id) && io.Num(r.domain) && io.Num(r.bus_first) && io.Num(r.bus_last) &&
                          io.Idx(r.numa_nodes);
                 }) &&
         io.Each(s.gpus,
                 [&](auto& g) {
                   return io.Str(g.pci_bus_id) && io.Enum(g.vendor, 1) && io.Num(g.vendor_id) && io.Num(g.device_id) &&
                          io.Num(g.pci_class) && io.Str(g.model) && io.Optional(g.memory_bytes) &&
                          io.Enum(g.memory_source, 4) && io.Optional(g.sm_count) && io.Num(g.pcie_root) &&
                          io.Idx(g.numa_nodes) && io.Each(g.os_devices, [&](auto& d) { return io.Str(d); }) &&
                          io.Num(g.partitions) && InRange(g.pcie_root, roots.size(), true);
                 }) &&
         io.Each(s.nics,
                 [&](auto& n) {
                   return io.Str(n.name) && io.Str(n.pci_bus_id) && io.Num(n.pcie_root) && io.Idx(n.numa_nodes) &&
                          io.Flag(n.rdma) && InRange(n.pcie_root, roots.size(), true);
                 }) &&
         IcFields(io, s.nvlink, s.gpus.size()) && IcFields(io, s.xgmi, s.gpus.size());
}

void WriteShape(Out& out, const Shape& s) {
  ShapeFields(out, s);
  bool mig = false;
  for (const Gpu& g : s.gpus) mig = mig || g.mig_mode != MigMode::kUnknown;
  if (mig) MigFields(out, s);
  bool memory = false;
  for (const Gpu& g : s.gpus) memory = memory || g.memory_numa_node != kNoIndex;
  if (memory) GpuMemoryFields(out, s);
}

// What is a node's own: its identity, its GPUs' UUIDs and their NVLink clique.
template <typename Io, typename P>
bool NodeFields(Io& io, P& p) {
  return io.Str(p.host_name) && io.Str(p.hwloc_version) && io.Str(p.xml_format) &&
         io.Each(p.gpu_uuids, [&](auto& u) { return io.Str(u); }) && io.Str(p.nvlink_clique);
}

// What nodes of one hardware shape share beside it (not hardware of the Shape, not in its
// fingerprint): the package of each NUMA node and the logical CPUs.
template <typename Io, typename P>
bool SharedFields(Io& io, P& p) {
  return io.Each(p.numa_packages, [&](auto& k) { return io.Num(k); }) &&
         io.Each(p.cpus, [&](auto& c) {
           return io.Num(c.os_index) && io.Num(c.core) && io.Num(c.core_group) && io.Num(c.package) &&
                  io.Num(c.numa_node) && io.Num(c.l3_cache) && io.Enum(c.kind, 2);
         });
}

// The worker encoding of an export: magic, identity, shared fields (its shape follows).
template <typename Io, typename P>
bool ExportFields(Io& io, P& p) {
  uint64_t magic = kMagic;
  return io.U64(magic) && magic == kMagic && NodeFields(io, p) && SharedFields(io, p);
}

// The shape record: magic and shared fields (its shape follows).
template <typename Io, typename P>
bool RecordFields(Io& io, P& p) {
  uint64_t magic = kRecordMagic;
  return io.U64(magic) && magic == kRecordMagic && SharedFields(io, p);
}

// Reads the shape after `head` (ExportFields or RecordFields), with its optional MIG section.
template <typename Head>
bool ReadWithShape(Reader& r, ParsedExport& p, Head&& head) {
  In in{r};
  if (!head(in, p) || !ShapeFields(in, p.shape)) return false;
  uint64_t marker = 0;
  if (r.ok() && r.Peek(marker) && marker == kMigSection && !MigFields(in, p.shape)) return false;
  if (r.ok() && !r.at_end() && !GpuMemoryFields(in, p.shape)) return false;
  return r.done();
}

}  // namespace

std::string EncodeShape(const Shape& s) {
  Writer w;
  Out out{w};
  WriteShape(out, s);
  return w.Take();
}

std::string EncodeExport(const ParsedExport& p) {
  Writer w;
  Out out{w};
  ExportFields(out, p);
  WriteShape(out, p.shape);
  return w.Take();
}

Result<ParsedExport> DecodeExport(std::string_view bytes) {
  Reader r(bytes, kDecodeBudget);
  ParsedExport p;
  auto bad = [] { return Status::Internal("isolated hwloc import returned a malformed result"); };
  if (!ReadWithShape(r, p, [](In& in, ParsedExport& x) { return ExportFields(in, x); })) return bad();
  if (p.gpu_uuids.size() != p.shape.gpus.size()) return bad();
  if (!p.numa_packages.empty() && p.numa_packages.size() != p.shape.numa_nodes.size()) return bad();
  FinalizeShape(p.shape);
  return p;
}

std::string EncodeRecord(const ParsedExport& p) {
  Writer w;
  Out out{w};
  RecordFields(out, p);
  WriteShape(out, p.shape);
  return w.Take();
}

Result<ParsedExport> DecodeRecord(std::string_view bytes, size_t budget) {
  Reader r(bytes, budget);
  ParsedExport p;
  if (bytes.size() >= sizeof(uint64_t)) {
    uint64_t magic = 0;
    Reader head(bytes.substr(0, sizeof magic), sizeof magic);
    if (head.U64(magic) && magic != kRecordMagic) {
      return Status::InvalidArgument("not a shape record of this version (unknown magic; written by another "
                                     "draguard release?)");
    }
  }
  if (!ReadWithShape(r, p, [](In& in, ParsedExport& x) { return RecordFields(in, x); })) {
    return Status::InvalidArgument("malformed shape record (truncated, a count or index out of range, or "
                                   "bytes left over)");
  }
  if (!p.numa_packages.empty() && p.numa_packages.size() != p.shape.numa_nodes.size()) {
    return Status::InvalidArgument("malformed shape record: packages do not match the NUMA nodes");
  }
  p.gpu_uuids.assign(p.shape.gpus.size(), std::string());
  return p;
}

}  // namespace draguard::topology::internal
