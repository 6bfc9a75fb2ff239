// Snapshot: the immutable whole-cluster topology view that the rules, the claim generator and the
// satisfiability check read: nodes by name, distinct shapes with their nodes, and memoized data
// derived from the snapshot. Per-GPU answers are in the model itself (model.h: Shape, derived).
//
// A Snapshot is created once (by the Store or LoadSnapshot) and never modified; share it as
// std::shared_ptr<const Snapshot>. All methods are const and thread-safe. Node lookup is a
// binary search over names sorted once at creation (well under a microsecond for 5,000 nodes).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "draguard/status.h"
#include "draguard/topology/loader.h"
#include "draguard/topology/model.h"

namespace draguard::topology {

/// One distinct hardware shape and the nodes that have it.
struct ShapeGroup {
  std::shared_ptr<const Shape> shape;  ///< never null
  std::vector<std::string> nodes;      ///< node names, ascending
};

/// The immutable cluster view.
class Snapshot {
 public:
  /// Builds a snapshot from per-node topologies (any order; names must be unique).
  /// `generation` is a caller-chosen counter that increases with every published snapshot.
  static std::shared_ptr<const Snapshot> Create(std::vector<std::shared_ptr<const NodeTopology>> nodes,
                                                uint64_t generation = 0);

  /// The node called `name`, or nullptr.
  const NodeTopology* Find(std::string_view name) const;
  /// All nodes, ascending by name.
  const std::vector<std::shared_ptr<const NodeTopology>>& nodes() const { return nodes_; }
  /// Distinct shapes with their nodes, ascending by fingerprint.
  const std::vector<ShapeGroup>& shapes() const { return shapes_; }
  /// Number of nodes.
  size_t node_count() const { return nodes_.size(); }
  /// Number of distinct shapes.
  size_t shape_count() const { return shapes_.size(); }
  /// Generation counter given at creation.
  uint64_t generation() const { return generation_; }

  /// The shape group whose fingerprint is `fingerprint`, or nullptr.
  const ShapeGroup* FindShape(std::string_view fingerprint) const;

  /// Data other modules derive from this snapshot, computed once per `key` on first use and kept
  /// as long as the snapshot lives (e.g. the claim generator's simulated devices per shape).
  /// Thread-safe; `compute` runs without a lock (it may call Memo for other keys) and, when
  /// threads race on a new key, more than once, the first stored value winning.
  std::shared_ptr<const void> Memo(const std::string& key,
                                   const std::function<std::shared_ptr<const void>()>& compute) const;

 private:
  Snapshot() = default;
  std::vector<std::shared_ptr<const NodeTopology>> nodes_;
  std::vector<ShapeGroup> shapes_;
  uint64_t generation_ = 0;
  mutable std::mutex memo_mu_;
  mutable std::unordered_map<std::string, std::shared_ptr<const void>> memo_;  // guarded by memo_mu_
};

/// Deduplicates shapes: identical hardware yields the same shared object. Thread-safe.
/// Holds weak references only, so shapes no node uses any more are freed.
class ShapeInterner {
 public:
  /// Returns the shared shape equal to `shape` (finalized), inserting it if new.
  std::shared_ptr<const Shape> Intern(Shape shape);
  /// Returns the shared CPU list equal to `cpus`, inserting it if new (identical nodes share one).
  std::shared_ptr<const CpuList> InternCpus(CpuList cpus);
  /// Number of live distinct shapes known to the interner.
  size_t size() const;
  /// Drops entries whose shapes have been freed.
  void Prune();

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::vector<std::weak_ptr<const Shape>>> by_fingerprint_;  // guarded by mu_
  std::unordered_map<uint64_t, std::vector<std::weak_ptr<const CpuList>>> cpus_by_hash_;     // guarded by mu_
};

/// Builds a NodeTopology from a parsed export (interning its shape).
std::shared_ptr<const NodeTopology> MakeNodeTopology(ParsedExport parsed, std::string name, std::string source,
                                                     std::string version, ShapeInterner& interner);

/// One export that could not be loaded by LoadSnapshot.
struct LoadProblem {
  std::string source;          ///< file path
  LoadErrorReason reason = LoadErrorReason::kNone;
  Status status;               ///< the reason in words
};

/// Loads a file, or every `*.xml` file of a directory (not recursive, hidden files skipped), into
/// a snapshot. Node names come from the file names (`<node>.xml`, `<node>.hwloc.xml`); two files
/// for one node: the newer file wins and a kConflict problem is reported. Exports that fail are
/// listed in `problems` (optional) and skipped. Fails only when `path` cannot be read.
Result<std::shared_ptr<const Snapshot>> LoadSnapshot(const std::string& path, const LoaderLimits& limits = {},
                                                     std::vector<LoadProblem>* problems = nullptr);

}  // namespace draguard::topology
