// The claim generator's placement planner (planner.cc), read by the template writer
// (template_writer.cc): which GPUs and NICs, and which nodes, a generated template asks for.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "draguard/cel/checker.h"
#include "draguard/dra/devices.h"
#include "draguard/mutation/mutation.h"
#include "draguard/policy/policy.h"
#include "draguard/status.h"
#include "draguard/topology/snapshot.h"

namespace draguard::mutation::internal {

/// One distinct shape with its simulated devices (from its first node).
struct ShapeDevices {
  const topology::ShapeGroup* group = nullptr;  ///< the shape and its nodes
  std::shared_ptr<const std::vector<dra::Device>> simulated;  ///< shared with the snapshot's memo
  /// The simulated devices.
  const std::vector<dra::Device>& devices() const { return *simulated; }
};

/// The topology as the planner needs it. Built once per snapshot and NIC driver (GetView) and
/// immutable afterwards, except for the cache of compiled selectors.
struct View {
  const topology::Snapshot* snapshot = nullptr;  ///< null: no topology
  std::vector<ShapeDevices> shapes;  ///< shapes with at least one NVIDIA GPU
  std::size_t gpu_nodes = 0;         ///< nodes of those shapes
  std::set<uint64_t> memories;       ///< GPU memory the simulated devices report

  /// Compiles a selector once per view.
  Result<std::shared_ptr<const cel::CheckedExpr>> Compile(const std::string& text) const;

 private:
  mutable std::mutex mu_;
  mutable std::map<std::string, std::shared_ptr<const cel::CheckedExpr>> compiled_;  // guarded by mu_
};

/// The view of `snap` (null: no topology), built on first use and kept with the snapshot.
std::shared_ptr<const View> GetView(const topology::Snapshot* snap, const policy::Policy& policy);

/// One way to place an entry's GPUs: the template's `exactly` when it is the only one, else one
/// firstAvailable subrequest. Every alternative is aligned on every node the Pod may use.
struct Alternative {
  std::string name;                         ///< "nvlink-1", "pcie-1", "numa-1" (its class and rank)
  Placement placement = Placement::kNone;   ///< the class every allocation it allows has
  bool constraint = false;                  ///< pcieRoot matchAttribute over its GPUs (and the NIC)
  bool numa_match = false;                  ///< numaNode matchAttribute over its GPUs (mutation.numaAlignment)
  std::string attr;                         ///< restricted resource.kubernetes.io attribute; "" = none
  std::vector<std::string> values;          ///< allowed values of `attr` (ascending)
  std::string restriction;                  ///< the extra selector; "" = none
  std::size_t fit = 0;                      ///< qualifying GPUs it offers on its tightest shape
};

/// The placement of one entry of a claim profile.
struct Plan {
  Placement placement = Placement::kNone;  ///< the strongest (first) alternative's class
  /// Empty: one device or unaligned (plain `exactly`); one: `exactly` with its restriction and
  /// constraint; more: firstAvailable in this order.
  std::vector<Alternative> alternatives;
  /// Rails: N single-GPU requests, each with an RDMA NIC under its root; the GPUs share
  /// `alternatives[0]`'s restriction (and are pairwise NVLink-connected or on one root).
  bool rails = false;
  /// With CPUs in the claim, GPUs that span NUMA nodes: the entry is split into `parts` equal GPU
  /// requests (on an NVLink-complete shape), or with `rails` its rails into `parts` equal groups
  /// (NVLink-connected GPUs), each with its share of the CPUs on its own NUMA node (0 = not split).
  std::size_t parts = 0;
  /// With CPUs in the claim, GPUs whose memory is a NUMA node of its own (Grace, POWER9): one
  /// alternative per CPU NUMA node (socket) that holds the GPUs and CPUs, ascending by that node.
  /// Each GPU is its own request that picks a socket by its GPUs' memory nodes; the CPUs pick it
  /// by its node; numaNode constraints over the subrequests of two sockets keep one socket (see
  /// template_writer.cc, AddSockets). Empty otherwise.
  struct Socket {
    uint32_t cpu_node = 0;              ///< OS index of the socket's CPU NUMA node
    std::vector<uint32_t> memory_nodes; ///< OS indexes of the memory nodes of its GPUs, ascending
  };
  std::vector<Socket> sockets;
  std::optional<std::set<std::size_t>> shapes;  ///< restriction to View::shapes indexes; nullopt = any
  std::string note;                        ///< for warnings
};

/// The numaNode constraints a sockets plan (Plan::sockets) of `gpus` GPUs over `sockets` sockets
/// writes: for every ordered pair of distinct sockets, one per GPU (with the CPUs) and one per
/// pair of GPUs.
std::size_t SocketConstraints(std::size_t gpus, std::size_t sockets);

/// Plans a full-GPU or shared entry `p` whose selectors are `selectors` (with an RDMA NIC when
/// `nic`). `interconnect` is the weakest class accepted ("auto", "nvlink", "pcie", "numa").
/// Fails when the selectors do not compile, or when no node can place the devices as required:
/// then the message starts with `who` ("request \"gpu\" (2x full GPU >= 1Gi)").
Result<Plan> PlanEntry(const std::string& who, const RequestProfile& p, bool nic, const std::string& interconnect,
                       const std::vector<std::string>& selectors, const View& view, const policy::Policy& policy);

/// Where a Pod using the template may run: the intersection of its entries' restrictions.
struct NodeRestriction {
  std::optional<std::set<std::size_t>> shapes;  ///< View::shapes indexes; nullopt = any
  /// Narrows the restriction to what `plan` allows as well.
  void Add(const Plan& plan);
};

/// Writes `where` into `out->nodes` and `out->shapes` (see GeneratedTemplate). Fails when no node
/// is left.
Status ResolveRestriction(const NodeRestriction& where, const View& view, const policy::Policy& policy,
                          GeneratedTemplate* out);

}  // namespace draguard::mutation::internal
