// Shape records: the part of an export that nodes of identical hardware share, in a compact,
// versioned binary form, so that a cluster publishes it once per distinct record instead of once
// per node (kubetopo/shape_object.h stores it; every webhook replica decodes it once).
//
// An export (ParsedExport) splits in two:
//   * its shape record: the Shape's hardware fields, the package of each NUMA node and the
//     logical CPUs. Nodes with the same hardware and the same CPU numbering have byte-identical
//     records, so the record's digest names it;
//   * its node facts (NodeFacts): what is the node's own, the GPU UUIDs, the host name, the
//     hwloc version and XML dialect of its export. Further per-node facts (an NVLink clique, say)
//     belong here too, so that they never split a shape or change its fingerprint.
// EncodeShapeRecord + FactsOf carry everything of a ParsedExport: decoding the record and adding
// the facts back gives a node equal to the one parsed from the export.
//
// Decoding trusts nothing: the record may come from any writer. Every length, index and enum is
// checked, allocations are bounded by the input and by `ShapeRecordLimits`, and the counts that
// FinalizeShape's work grows with are capped, so a hostile record costs a bounded refusal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "draguard/status.h"
#include "draguard/topology/loader.h"
#include "draguard/topology/model.h"
#include "draguard/topology/snapshot.h"

namespace draguard::topology {

/// What a node holds of its own beside its shape record.
struct NodeFacts {
  std::string host_name;                ///< export's `HostName`; empty when absent
  std::string hwloc_version;            ///< exporter's `hwlocVersion`; empty when absent
  std::string xml_format;               ///< "1.x" or "2.0"; empty when unknown
  std::vector<std::string> gpu_uuids;   ///< parallel to the shape's GPUs, or empty when none is known
  std::string nvlink_clique;            ///< the GPUs' NVLink clique (IsNvlinkClique); empty when none
  bool operator==(const NodeFacts&) const = default;
};

/// Caps applied when decoding a record, far above every known export (the 24-socket SGI UV2000
/// export has 8 NUMA nodes in its restricted form and the DGX-2H 16 GPUs).
struct ShapeRecordLimits {
  size_t max_bytes = 4u << 20;        ///< encoded record
  size_t max_numa_nodes = 1024;       ///< NUMA nodes
  size_t max_pcie_roots = 1024;       ///< host bridges
  size_t max_gpus = 256;              ///< GPUs
  size_t max_nics = 1024;             ///< NICs
  size_t max_locality = 64;           ///< NUMA nodes listed for one root, GPU or NIC
  size_t max_cpus = 1u << 16;         ///< logical CPUs
  size_t max_os_devices = 64;         ///< OS devices of one GPU
  size_t max_mig_instances = 64;      ///< MIG instances of one GPU
};

/// One decoded record, its parts shared with every node that uses it.
struct ShapeRecord {
  std::shared_ptr<const Shape> shape;                                    ///< finalized; never null
  std::shared_ptr<const CpuList> cpus = std::make_shared<const CpuList>();  ///< never null
  std::vector<uint32_t> numa_packages;  ///< parallel to shape->numa_nodes, or empty
};

/// The record of `parsed` (its shape, packages and CPUs; deterministic bytes).
std::string EncodeShapeRecord(const ParsedExport& parsed);

/// The node facts of `parsed`; gpu_uuids is empty when no GPU has a UUID.
NodeFacts FactsOf(const ParsedExport& parsed);

/// Decodes a record, checks it against `limits` and that it is exactly what EncodeShapeRecord
/// writes for its content, finalizes its shape and interns shape and CPU list in `interner` (so
/// equal records share them). InvalidArgument naming the problem otherwise.
Result<ShapeRecord> DecodeShapeRecord(std::string_view bytes, ShapeInterner& interner,
                                      const ShapeRecordLimits& limits = {});

/// A node from a decoded record and its own facts, with no export parsed. InvalidArgument (not
/// naming the node) when `facts.gpu_uuids` is neither empty nor one per GPU of the record's shape.
Result<std::shared_ptr<const NodeTopology>> MakeNodeTopology(const ShapeRecord& record, NodeFacts facts,
                                                             std::string name, std::string source,
                                                             std::string version);

}  // namespace draguard::topology
