// Shape records (shape_record.h) on top of the codec's field lists (export_codec.cc).
#include "draguard/topology/shape_record.h"

#include <algorithm>

#include "export_codec.h"

namespace draguard::topology {
namespace {

// The first count of `parsed` over its cap, as "N GPUs (at most M)"; empty when all fit.
std::string OverCap(const ParsedExport& p, const ShapeRecordLimits& l) {
  auto over = [](size_t n, size_t max, const char* what) {
    return n > max ? std::to_string(n) + " " + what + " (at most " + std::to_string(max) + ")" : std::string();
  };
  const Shape& s = p.shape;
  for (std::string o : {over(s.numa_nodes.size(), l.max_numa_nodes, "NUMA nodes"),
                        over(s.pcie_roots.size(), l.max_pcie_roots, "PCIe roots"),
                        over(s.gpus.size(), l.max_gpus, "GPUs"), over(s.nics.size(), l.max_nics, "NICs"),
                        over(p.cpus.size(), l.max_cpus, "logical CPUs")}) {
    if (!o.empty()) return o;
  }
  size_t locality = 0, os_devices = 0, mig = 0;
  for (const PcieRoot& r : s.pcie_roots) locality = std::max(locality, r.numa_nodes.size());
  for (const Nic& n : s.nics) locality = std::max(locality, n.numa_nodes.size());
  for (const Gpu& g : s.gpus) {
    locality = std::max(locality, g.numa_nodes.size());
    os_devices = std::max(os_devices, g.os_devices.size());
    mig = std::max(mig, g.mig_instances.size());
  }
  for (std::string o : {over(locality, l.max_locality, "NUMA nodes local to one device"),
                        over(os_devices, l.max_os_devices, "OS devices of one GPU"),
                        over(mig, l.max_mig_instances, "MIG instances of one GPU")}) {
    if (!o.empty()) return o;
  }
  // Each linked pair once: no more links than pairs.
  const size_t pairs = s.gpus.size() * (s.gpus.size() + 1) / 2;
  for (const Interconnect* ic : {&s.nvlink, &s.xgmi}) {
    if (ic->peers.size() > pairs) return over(ic->peers.size(), pairs, "GPU links");
    if (ic->cpu_peers.size() > s.gpus.size() * l.max_numa_nodes) {
      return over(ic->cpu_peers.size(), s.gpus.size() * l.max_numa_nodes, "GPU-CPU links");
    }
  }
  return {};
}

}  // namespace

std::string EncodeShapeRecord(const ParsedExport& parsed) { return internal::EncodeRecord(parsed); }

NodeFacts FactsOf(const ParsedExport& parsed) {
  NodeFacts f;
  f.host_name = parsed.host_name;
  f.hwloc_version = parsed.hwloc_version;
  f.xml_format = parsed.xml_format;
  f.nvlink_clique = parsed.nvlink_clique;
  if (std::any_of(parsed.gpu_uuids.begin(), parsed.gpu_uuids.end(), [](const std::string& u) { return !u.empty(); })) {
    f.gpu_uuids = parsed.gpu_uuids;
  }
  return f;
}

Result<ShapeRecord> DecodeShapeRecord(std::string_view bytes, ShapeInterner& interner, const ShapeRecordLimits& limits) {
  if (bytes.size() > limits.max_bytes) {
    return Status::InvalidArgument("shape record of " + std::to_string(bytes.size()) + " bytes is over the " +
                                   std::to_string(limits.max_bytes) + "-byte limit");
  }
  // Lists and strings may take at most 16 bytes of memory per byte of input (the model of a real
  // record takes about 3).
  Result<ParsedExport> parsed = internal::DecodeRecord(bytes, 16 * bytes.size() + 4096);
  if (!parsed.ok()) return parsed.status();
  if (std::string o = OverCap(*parsed, limits); !o.empty()) {
    return Status::InvalidArgument("shape record has " + o);
  }
  // One content, one encoding: a record that decodes but is not what the encoder writes for its
  // content (a flag of 2, a value behind an absent optional, an empty MIG section) is refused, so a
  // digest names exactly one content and each content exactly one digest.
  if (internal::EncodeRecord(*parsed) != bytes) {
    return Status::InvalidArgument("shape record is not in the encoder's form");
  }
  FinalizeShape(parsed->shape);
  ShapeRecord r;
  r.numa_packages = std::move(parsed->numa_packages);
  r.cpus = interner.InternCpus(std::move(parsed->cpus));
  r.shape = interner.Intern(std::move(parsed->shape));
  return r;
}

Result<std::shared_ptr<const NodeTopology>> MakeNodeTopology(const ShapeRecord& record, NodeFacts facts,
                                                             std::string name, std::string source,
                                                             std::string version) {
  if (record.shape == nullptr) return Status::InvalidArgument("no shape");
  if (!facts.gpu_uuids.empty() && facts.gpu_uuids.size() != record.shape->gpus.size()) {
    return Status::InvalidArgument(std::to_string(facts.gpu_uuids.size()) + " GPU UUIDs for a shape of " +
                                   std::to_string(record.shape->gpus.size()) + " GPUs");
  }
  auto n = std::make_shared<NodeTopology>();
  n->name = std::move(name);
  n->source = std::move(source);
  n->version = std::move(version);
  n->hwloc_version = std::move(facts.hwloc_version);
  n->host_name = std::move(facts.host_name);
  n->xml_format = std::move(facts.xml_format);
  n->nvlink_clique = std::move(facts.nvlink_clique);
  n->gpu_uuids = std::move(facts.gpu_uuids);
  n->gpu_uuids.shrink_to_fit();
  n->numa_packages = record.numa_packages;
  n->cpus = record.cpus != nullptr ? record.cpus : std::make_shared<const CpuList>();
  n->shape = record.shape;
  return std::shared_ptr<const NodeTopology>(std::move(n));
}

}  // namespace draguard::topology
