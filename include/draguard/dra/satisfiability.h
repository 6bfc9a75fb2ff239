// Satisfiability of a DRA claim against the topology model: can any node of the snapshot
// allocate every request of a ResourceClaim / ResourceClaimTemplate?
//
// Devices per node come from draguard_dra (the NVIDIA GPUs and the NICs the drivers would
// publish). Each request's selectors are compiled once per check and evaluated against those
// devices; `count`, `allocationMode: All`, `firstAvailable`, distinct devices across the requests of
// the claim, and `constraints[].matchAttribute` / `distinctAttribute` are honoured by a bounded
// backtracking search per node (per distinct shape when no selector reads a UUID).
//
// The check is conservative: what the simulation cannot know never makes a claim unsatisfiable.
// An attribute the export cannot provide (e.g. gpu.nvidia.com/driverVersion) reads as "may
// match"; MIG classes are evaluated against the GPU instances the export records, and fit every
// node whose export lacks a GPU's MIG mode; classes that cannot be simulated (passthrough, other
// drivers) fit every node with an NVIDIA GPU (passthrough) or every node (others); an exhausted
// search budget counts as satisfiable. Each such assumption is noted in the report.
//
// Used by rule DG014 (unsatisfiable-claim) and by the claim generator. Pure; thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "draguard/admission/review.h"
#include "draguard/policy/policy.h"

namespace draguard::topology {
class Snapshot;
struct NodeTopology;
}  // namespace draguard::topology

namespace draguard::cel {
class Budget;
}  // namespace draguard::cel

namespace draguard::dra {

/// What CheckSatisfiable found.
struct SatisfiabilityReport {
  enum class Verdict { kSkipped, kSatisfiable, kUnsatisfiable };
  Verdict verdict = Verdict::kSkipped;
  /// Nodes that can satisfy the claim, ascending (empty unless kSatisfiable).
  std::vector<std::string> nodes;
  /// kUnsatisfiable: the nearest miss in words (at most 300 bytes, names at most 3 nodes then
  /// "+N more"). Otherwise notes on assumptions ("; "-separated), possibly empty.
  std::string message;
  /// Attribute / capacity names ("gpu.nvidia.com/driverVersion") read by selectors or constraints
  /// but unknown to the simulation (treated as satisfiable), ascending, unique.
  std::vector<std::string> unknown;
  /// kSkipped: why (no topology nodes, no GPU/NIC request, not a claim, ...).
  std::string skip_reason;
  /// kUnsatisfiable: JSON Pointer of the request or constraint the nearest miss is about.
  std::string pointer;
  /// kUnsatisfiable: what to change, in words.
  std::string hint;
  /// kSkipped because the CEL budget ran out before the check finished (`skip_reason` says which).
  bool budget_exhausted = false;
};

/// Checks whether some node of `topology` can allocate the claim `object`: a ResourceClaim or
/// ResourceClaimTemplate in any version the engine reads (v1, v1beta2, v1beta1, v1alpha3).
/// Classes come from `policy.device_classes` (GPU / MIG / passthrough) and
/// `policy.mutation.nic` (NIC class and driver). Selector evaluations charge `budget` (may be
/// null: each selector is bounded only by its own cost limit); once it is exhausted the check
/// stops and reports kSkipped with `budget_exhausted`.
SatisfiabilityReport CheckSatisfiable(const admission::Json& object, const policy::Policy& policy,
                                      const topology::Snapshot& topology, cel::Budget* budget = nullptr);

struct Device;  // devices.h

/// Where one claim can go on one node (`draguard convert --draw`): per request, the simulated
/// devices that belong to at least one allocation of the whole claim honouring every constraint.
struct ClaimPlacement {
  /// One request of the claim (in claim order) and what it can receive.
  struct Request {
    std::string name;                  ///< the request's name
    std::vector<std::size_t> devices;  ///< indexes into `devices`, ascending
  };
  bool satisfiable = false;  ///< some allocation of the whole claim exists on the node
  /// The search budget ran out for some device, which then counts as receivable (as in
  /// CheckSatisfiable, what cannot be decided never excludes).
  bool exceeded = false;
  std::vector<Request> requests;
  /// dra::SimulateNode(node) for the policy's NIC driver; GPU devices name shape GPUs by index.
  std::shared_ptr<const std::vector<Device>> devices;
};

/// Where the claim `object` (as CheckSatisfiable reads it) can go on `node`, a node of `topology`.
/// Requests that are not simulated (other drivers, MIG on an export without MIG mode) list no
/// devices. No CEL budget: an offline answer.
ClaimPlacement PlaceClaim(const admission::Json& object, const policy::Policy& policy,
                          const topology::Snapshot& topology, const topology::NodeTopology& node);

}  // namespace draguard::dra
