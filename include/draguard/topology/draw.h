// SVG pictures of one node's topology for `draguard topology draw` and `draguard convert --draw`:
// CPU packages as boxes holding their NUMA nodes, NUMA nodes as boxes (CPU count, memory)
// holding their PCIe root complexes, which hold their
// GPUs (index, model, memory, PCI bus id) and NICs (name, RDMA), drawn as nested boxes the way
// lstopo draws them; below, one panel per GPU interconnect (NVLink, XGMI) with a line per linked
// GPU pair and its bandwidth (through an NVSwitch hub when the pairs were derived through
// NVSwitches). A placement picture additionally colours the devices each request of a claim can
// receive and, for a refusal, outlines the nearest miss and prints the reason.
//
// Pure: the same node and marks give the same bytes. Every string from the export is escaped
// (invalid UTF-8 and control characters replaced), so the result is always well-formed XML.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "draguard/topology/model.h"

namespace draguard::topology {

/// What a placement picture highlights on top of the topology.
struct DrawMarks {
  /// Lines printed under the node's title (what the picture shows, e.g. the Pod and its claim).
  std::vector<std::string> caption;
  /// Per GPU (parallel to Shape::gpus, or empty): the requests that can receive the GPU, in
  /// request order; a GPU with requests is filled with the colour of its first request.
  std::vector<std::vector<std::string>> gpu_requests;
  /// Per NIC (parallel to Shape::nics, or empty): as gpu_requests.
  std::vector<std::vector<std::string>> nic_requests;
  /// Per NUMA node (parallel to Shape::numa_nodes, or empty): the CPU requests that can take
  /// their CPUs there; such a node is outlined in the colour of its first request.
  std::vector<std::vector<std::string>> numa_requests;
  /// A refusal's reason, drawn as a red banner; empty when the claim was not refused.
  std::string miss;
  /// GPU indexes of the nearest miss, outlined in red.
  std::vector<uint32_t> miss_gpus;
};

/// The SVG document (UTF-8, ending with a newline) of `node`'s topology with `marks` on it.
std::string DrawSvg(const NodeTopology& node, const DrawMarks& marks = {});

/// At most this many nodes are drawn per clique in a rack view; the rest are counted.
inline constexpr std::size_t kMaxRackNodes = 72;

/// The rack view of `nodes` (any order) as an SVG document: one column per NVLink clique
/// (NodeTopology::nvlink_clique: the trays of one GB200/GB300 NVL72 rack share one), headed by the
/// clique and its node and GPU counts, holding a box per node (name, GPUs and their model, shape)
/// in name order; nodes without a clique in a last column. Columns are ordered by clique. Pure.
std::string DrawRacksSvg(const std::vector<const NodeTopology*>& nodes);

}  // namespace draguard::topology
