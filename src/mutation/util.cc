// Small helpers of the mutation module (see internal.h).
#include <openssl/evp.h>

#include <algorithm>
#include <map>
#include <set>

#include "draguard/k8s/quantity.h"
#include "draguard/topology/dra_devices.h"
#include "internal.h"

namespace draguard::mutation::internal {

std::optional<uint64_t> QuantityBytes(std::string_view text) {
  auto q = k8s::Quantity::Parse(text);
  if (!q.ok() || q->Sign() < 0) return std::nullopt;
  auto v = q->AsInt64();
  if (!v) return std::nullopt;
  return static_cast<uint64_t>(*v);
}

std::string BytesToQuantity(uint64_t bytes) {
  if (bytes != 0 && bytes % (1ull << 30) == 0) return std::to_string(bytes >> 30) + "Gi";
  if (bytes % (1ull << 20) == 0) return std::to_string(bytes >> 20) + "Mi";
  return std::to_string(bytes);
}

std::optional<std::string> CelString(std::string_view text) {
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f || c == '\'' || c == '"' || c == '\\') return std::nullopt;
  }
  return "'" + std::string(text) + "'";
}

std::string ResolveMemoryFloor(const std::string& requested, const std::set<uint64_t>& topology_memories,
                               std::string* note) {
  auto want = QuantityBytes(requested);
  if (!want || *want == 0) return requested;
  // What GPUs report: the simulated devices of the topology, or the NVML table without one.
  std::set<uint64_t> reported = topology_memories;
  if (reported.empty()) {
    for (uint64_t b : topology::NvmlKnownMemoryBytes()) reported.insert(b);
  }
  // GPUs within 5 % below the floor are the ones meant ("80Gi" means the 80 GB class).
  std::optional<uint64_t> lowest_meant;
  for (uint64_t m : reported) {
    if (static_cast<long double>(m) >= 0.95L * static_cast<long double>(*want)) {
      lowest_meant = lowest_meant ? std::min(*lowest_meant, m) : m;
    }
  }
  if (!lowest_meant || *lowest_meant >= *want) return requested;
  // Whole MiB, rounded down so the reported figure still passes.
  std::string floor = BytesToQuantity(*lowest_meant >> 20 << 20);
  if (note != nullptr) {
    *note = "memory floor " + requested + " lowered to " + floor + ": GPUs of that class report " + floor +
            " (the driver publishes NVML total memory), so " + requested + " would exclude them";
  }
  return floor;
}

std::vector<std::string> GpuSelectors(const RequestProfile& profile) {
  std::vector<std::string> out;
  if (!profile.memory.empty()) {
    out.push_back("'memory' in device.capacity['gpu.nvidia.com'] && "
                  "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('" +
                  profile.memory + "')) >= 0");
  }
  if (!profile.product.empty()) {
    out.push_back("'productName' in device.attributes['gpu.nvidia.com'] && "
                  "device.attributes['gpu.nvidia.com'].productName == " +
                  CelString(profile.product).value_or("''"));
  }
  return out;
}

std::string MigSelector(const RequestProfile& profile) {
  return "'profile' in device.attributes['gpu.nvidia.com'] && device.attributes['gpu.nvidia.com'].profile == " +
         CelString(profile.mig_profile).value_or("''");
}

std::string NicSelector(const policy::Policy& policy) {
  const std::string dom = "device.attributes['" + policy.mutation.nic.driver + "']";
  return "'rdma' in " + dom + " && " + dom + ".rdma == true";
}

std::string DescribeProfile(const RequestProfile& p) {
  std::string out = std::to_string(p.count) + "x ";
  switch (p.kind) {
    case RequestProfile::Kind::kMig:
      return out + "MIG " + p.mig_profile;
    case RequestProfile::Kind::kShared:
      out += "GPU shared with MPS (" + std::to_string(p.mps_threads) + "% SMs, " + p.mps_memory + " pinned)";
      break;
    case RequestProfile::Kind::kGpu:
      out += "full GPU";
      if (!p.device_class.empty()) out += " of class " + p.device_class;
      break;
  }
  if (!p.memory.empty()) out += " >= " + p.memory;
  if (!p.product.empty()) out += " " + p.product;
  return out;
}

namespace {

// Devices (or, for a CPU request in grouped mode, CPUs) one request allocates: exactly's count or
// dra.cpu/cpu capacity, a firstAvailable request's first subrequest.
int64_t RequestSize(const admission::Json& request) {
  const admission::Json* exactly = dra::Member(&request, "exactly");
  if (exactly == nullptr) {
    const admission::Json* alts = dra::Member(&request, "firstAvailable");
    if (alts == nullptr || !alts->is_array() || alts->empty()) return 0;
    exactly = &(*alts)[0];
  }
  const admission::Json* q = dra::Member(dra::Member(dra::Member(exactly, "capacity"), "requests"), "dra.cpu/cpu");
  if (q != nullptr && q->is_string()) {
    auto n = QuantityBytes(q->get<std::string>());
    return n ? static_cast<int64_t>(*n) : 0;
  }
  const admission::Json* count = dra::Member(exactly, "count");
  return count != nullptr && count->is_number_integer() ? count->get<int64_t>() : 1;
}

}  // namespace

std::vector<CpuTie> CpuTies(const admission::Json& claim, const policy::Policy& policy) {
  std::vector<CpuTie> out;
  const admission::Json* devices = dra::Member(dra::Member(dra::Member(&claim, "spec"), "spec"), "devices");
  const admission::Json* requests = dra::Member(devices, "requests");
  const admission::Json* constraints = dra::Member(devices, "constraints");
  if (requests == nullptr || !requests->is_array()) return out;
  // The GPU requests (an `exactly` or first subrequest of a GPU class) and what they allocate;
  // NIC requests in a numaNode constraint (mutation.nic.numaAttribute: standard) are not GPUs.
  std::map<std::string, int64_t> sizes;
  for (const auto& r : *requests) {
    const admission::Json* first = dra::Member(&r, "exactly");
    if (const admission::Json* alts = dra::Member(&r, "firstAvailable"); first == nullptr && alts != nullptr &&
                                                                         alts->is_array() && !alts->empty()) {
      first = &(*alts)[0];
    }
    if (first != nullptr && policy.device_classes.IsGpuClass(dra::StringMember(first, "deviceClassName"))) {
      sizes[dra::StringMember(&r, "name")] = RequestSize(r);
    }
  }
  for (const auto& r : *requests) {
    const admission::Json* exactly = dra::Member(&r, "exactly");
    if (exactly == nullptr || !policy.device_classes.IsCpuClass(dra::StringMember(exactly, "deviceClassName"))) continue;
    CpuTie tie;
    tie.cpu_request = dra::StringMember(&r, "name");
    tie.cpus = RequestSize(r);
    if (constraints != nullptr && constraints->is_array()) {
      for (const auto& c : *constraints) {
        const admission::Json* names = dra::Member(&c, "requests");
        if (dra::StringMember(&c, "matchAttribute") != "resource.kubernetes.io/numaNode" || names == nullptr ||
            !names->is_array() || std::find(names->begin(), names->end(), admission::Json(tie.cpu_request)) == names->end()) {
          continue;
        }
        for (const auto& n : *names) {
          if (!n.is_string()) continue;
          auto gpu = sizes.find(n.get<std::string>());
          if (gpu == sizes.end()) continue;  // the CPU request itself, a NIC
          tie.gpu_requests.push_back(gpu->first);
          tie.gpus += gpu->second;
        }
      }
    }
    out.push_back(std::move(tie));
  }
  return out;
}

std::string Sha256Hex(std::string_view data, std::size_t bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr) != 1) len = 0;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < std::min<std::size_t>(bytes, len); ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 15]);
  }
  return out;
}

}  // namespace draguard::mutation::internal
