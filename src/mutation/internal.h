// Helpers shared by the mutation module's files (internal).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "draguard/admission/review.h"
#include "draguard/dra/pod_specs.h"
#include "draguard/mutation/mutation.h"
#include "draguard/policy/policy.h"

namespace draguard::topology {
class Snapshot;
}  // namespace draguard::topology

namespace draguard::mutation::internal {

/// Bytes of a quantity string ("80G", "81559Mi"); nullopt when not a non-negative quantity.
std::optional<uint64_t> QuantityBytes(std::string_view text);

/// "81559Mi" when `bytes` is a whole number of MiB, else the byte count.
std::string BytesToQuantity(uint64_t bytes);

/// A CEL single-quoted string literal; nullopt when `text` holds characters a literal cannot
/// carry safely (quotes, backslashes, control characters).
std::optional<std::string> CelString(std::string_view text);

/// The memory floor to write for a request of `requested` (a quantity): lowered to the memory
/// the GPUs report when they are within 5 % below it (the 80Gi vs H100 80GB trap).
/// `topology_memories` are the figures the topology's GPUs report (empty: the NVML table).
/// `note` receives an explanation when the floor was changed.
std::string ResolveMemoryFloor(const std::string& requested, const std::set<uint64_t>& topology_memories,
                               std::string* note);

/// Guarded selector expressions for a full-GPU request (memory floor and product).
std::vector<std::string> GpuSelectors(const RequestProfile& profile);

/// Guarded selector for a MIG request pinned to `profile.mig_profile`.
std::string MigSelector(const RequestProfile& profile);

/// Selector for an RDMA NIC of the policy's NIC driver.
std::string NicSelector(const policy::Policy& policy);

/// Profile in words: "2x full GPU >= 80G", "1x MIG 3g.40gb".
std::string DescribeProfile(const RequestProfile& profile);

/// The Pod that pod spec `loc` of `object` stands for: `object` itself for a Pod, else a Pod with
/// the template's spec and metadata (converted as a Pod created from it would be).
admission::Json PodAt(const admission::Json& object, const dra::PodSpecLocation& loc);

/// A CPU request of a generated claim (mutation.cpu) with the GPU requests its
/// `matchAttribute: resource.kubernetes.io/numaNode` constraint keeps on its NUMA node.
struct CpuTie {
  std::string cpu_request;                ///< "cpu", "cpu-part-0", ...
  int64_t cpus = 0;                       ///< CPUs it asks for (count, or dra.cpu/cpu capacity)
  std::vector<std::string> gpu_requests;  ///< the GPU requests tied to it
  int64_t gpus = 0;                       ///< GPUs those requests allocate
};

/// The CPU requests (classes of deviceClasses.cpu) of `claim` (a ResourceClaimTemplate) and what
/// ties them to GPUs.
std::vector<CpuTie> CpuTies(const admission::Json& claim, const policy::Policy& policy);

/// mutation.computeDomains on a Pod that ConvertPod converted (`out->pod`, its GPU claims
/// written; `original` as it came): when the Pod belongs to a multi-node job unit
/// (dra::PodNvlinkJob) and the policy's mode applies on `topology`, labels the Pod with its unit
/// (kNvlinkUnitLabel), adds the required podAffinity on nvidia.com/gpu.clique over that label,
/// and, unless the Pod holds claims of its own, the claim kChannelClaimName of the unit's
/// ComputeDomain in the Pod and its GPU containers (`gpu_containers`: JSON Pointers), with the
/// ComputeDomain in out->compute_domains. Returns why the Pod must be refused ("" when not).
std::string AddComputeDomain(const admission::Json& original, std::string_view namespace_name,
                             const std::vector<std::string>& gpu_containers, const policy::Policy& policy,
                             const topology::Snapshot* topology, PodConversion* out);

/// Lower-case hex of the first `bytes` bytes of SHA-256(`data`).
std::string Sha256Hex(std::string_view data, std::size_t bytes);

}  // namespace draguard::mutation::internal
