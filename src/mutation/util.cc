// Small helpers of the mutation module (see internal.h).
#include <openssl/evp.h>

#include <algorithm>
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
      break;
  }
  if (!p.memory.empty()) out += " >= " + p.memory;
  if (!p.product.empty()) out += " " + p.product;
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
