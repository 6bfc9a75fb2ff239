// Reading what a Pod's legacy GPU requests ask for (see mutation.h).
#include <algorithm>
#include <map>
#include <set>

#include "draguard/k8s/quantity.h"

#include "draguard/dra/pod_specs.h"
#include "draguard/mutation/mutation.h"
#include "internal.h"

namespace draguard::mutation {
namespace {

using admission::Json;

constexpr int64_t kMaxDevices = 32;  // DRA's per-claim device limit

std::map<std::string, std::string> StringMap(const Json& obj, const char* a, const char* b) {
  std::map<std::string, std::string> out;
  auto ia = obj.find(a);
  if (ia == obj.end() || !ia->is_object()) return out;
  auto ib = ia->find(b);
  if (ib == ia->end() || !ib->is_object()) return out;
  for (auto it = ib->begin(); it != ib->end(); ++it) {
    if (it->is_string()) out[it.key()] = it->get<std::string>();
  }
  return out;
}

// go-nvlib's MIG profile strings: "1g.10gb", "1c.3g.40gb", "1g.12gb+me", "3g.40gb-me".
bool IsMigProfileName(const std::string& s) {
  if (s.empty() || s.size() > 32 || s.find("g.") == std::string::npos) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '+' || c == '-')) return false;
  }
  return s[0] >= '0' && s[0] <= '9';
}

// A count of devices: a JSON integer or an integer quantity string ("2").
Result<int64_t> DeviceCount(const Json& v, const std::string& what) {
  std::optional<int64_t> n;
  if (v.is_number_integer()) {
    n = v.get<int64_t>();
  } else if (v.is_string()) {
    auto q = k8s::Quantity::Parse(v.get<std::string>());
    if (q.ok()) n = q->AsInt64();
  }
  if (!n || *n < 0) return Status::InvalidArgument(what + " " + v.dump() + " is not a whole number of devices");
  if (*n > kMaxDevices) {
    return Status::InvalidArgument(what + " asks for " + std::to_string(*n) + " devices; a DRA claim holds at most 32");
  }
  return *n;
}

// HAMi's gpumem: MiB per GPU, routinely larger than 32 (so not a DeviceCount).
Result<uint64_t> HamiMib(const Json& v, const std::string& what) {
  std::optional<int64_t> mib;
  if (v.is_number_integer()) mib = v.get<int64_t>();
  if (v.is_string()) {
    auto q = k8s::Quantity::Parse(v.get<std::string>());
    if (q.ok()) mib = q->AsInt64();
  }
  if (!mib || *mib <= 0) return Status::InvalidArgument(what + " is not a number of MiB");
  return static_cast<uint64_t>(*mib);
}

// The legacy entries of one container: resource name -> value (limits win over requests).
std::map<std::string, Json> LegacyEntries(const Json& container, const policy::Policy& policy) {
  std::map<std::string, Json> out;
  auto res = container.find("resources");
  if (res == container.end() || !res->is_object()) return out;
  for (const char* section : {"requests", "limits"}) {
    auto sec = res->find(section);
    if (sec == res->end() || !sec->is_object()) continue;
    for (auto it = sec->begin(); it != sec->end(); ++it) {
      if (policy.IsLegacyGpuRequest(it.key())) out[it.key()] = *it;  // limits overwrite requests
    }
  }
  return out;
}

struct ContainerInfo {
  std::string pointer;
  std::string name;
  bool init = false;     // a non-restartable init container
  RequestProfile profile;
  bool has_request = false;
};

// Pod-wide settings read from annotations and the policy.
struct PodSettings {
  std::string memory;
  std::string product;
  bool latency_sensitive = false;
  int64_t mps_threads = 0;
  std::string mps_memory;
};

// With mutation.cpu: the whole CPUs of `container` that move into the claim of its GPUs, its cpu
// request (its limit when it has no request); 0, with a note saying why, for a fractional or
// missing cpu and for plain init containers (dra-driver-cpu gives a CPU claim to one container,
// and an init container's CPUs are released before the others start).
int64_t ClaimCpus(const Json& container, bool init, const std::string& who, std::vector<std::string>* notes) {
  const Json* resources = dra::Member(&container, "resources");
  const Json* requests = dra::Member(resources, "requests");
  const Json* cpu = dra::Member(requests, "cpu");
  if (cpu == nullptr) cpu = dra::Member(dra::Member(resources, "limits"), "cpu");
  auto skip = [&](const std::string& why) {
    notes->push_back(who + ": " + why + "; its CPUs stay with the kubelet, not in the claim of its GPUs");
    return int64_t{0};
  };
  if (init) return skip("a plain init container");
  if (cpu == nullptr) return skip("no cpu request");
  std::optional<k8s::Quantity> q;
  if (cpu->is_string()) {
    if (auto parsed = k8s::Quantity::Parse(cpu->get<std::string>()); parsed.ok()) q = *parsed;
  } else if (cpu->is_number_integer()) {
    q = k8s::Quantity::FromInt64(cpu->get<int64_t>());
  }
  if (!q) return skip("cpu is not a quantity");
  auto whole = q->AsInt64();
  if (!whole || *whole < 1) return skip("cpu " + q->ToString() + " is not a whole number of CPUs");
  return *whole;
}

Status ReadContainer(const Json& container, const PodSettings& pod, const policy::Policy& policy, ContainerInfo* out,
                     std::vector<std::string>* notes) {
  auto entries = LegacyEntries(container, policy);
  if (entries.empty()) return Status::Ok();
  const std::string who = "container \"" + out->name + "\"";
  RequestProfile prof;
  prof.latency_sensitive = pod.latency_sensitive;
  int kinds = 0;
  std::optional<uint64_t> hami_mib;
  std::vector<std::string> soft;  // HAMi soft shares, dropped
  for (const auto& entry : entries) {
    const auto& name = entry.first;
    const auto& value = entry.second;
    const std::string what = who + " " + name;
    // A device count of `kind`: false when it asks for none (the entry is skipped), an error when
    // it is not a count.
    auto take = [&](RequestProfile::Kind kind) -> Result<bool> {
      auto n = DeviceCount(value, what);
      if (!n.ok()) return n.status();
      if (*n == 0) return false;
      ++kinds;
      prof.kind = kind;
      prof.count = *n;
      return true;
    };
    if (const std::string_view cls = policy.ImplicitGpuClass(name); !cls.empty()) {
      // KEP-5004's implicit name of a GPU DeviceClass: whole devices of that class.
      auto listed = [&](const std::vector<std::string>& list) {
        return std::find(list.begin(), list.end(), cls) != list.end();
      };
      if (listed(policy.device_classes.mig)) {
        return Status::FailedPrecondition(
            what + " asks for MIG devices without saying which profile. Fix: request nvidia.com/mig-<profile> "
                   "(e.g. nvidia.com/mig-1g.10gb), or a ResourceClaimTemplate of class " + std::string(cls) +
                   " with a profile selector");
      }
      if (!listed(policy.device_classes.gpu)) {
        return Status::FailedPrecondition(what + " (a passthrough GPU class) has no DRA conversion draguard can "
                                                 "generate. Fix: request the device through a ResourceClaimTemplate "
                                                 "of class " + std::string(cls));
      }
      auto taken = take(RequestProfile::Kind::kGpu);
      if (!taken.ok()) return taken.status();
      if (!*taken) continue;
      // The policy's first GPU class is the default one: a profile without a class, as for nvidia.com/gpu.
      if (cls != policy.device_classes.gpu.front()) prof.device_class = std::string(cls);
    } else if (name == "nvidia.com/gpu" || name == "nvidia.com/gpu.shared") {
      auto taken = take(name == "nvidia.com/gpu" ? RequestProfile::Kind::kGpu : RequestProfile::Kind::kShared);
      if (!taken.ok()) return taken.status();
      if (!*taken) continue;
      if (prof.kind == RequestProfile::Kind::kShared) prof.count = 1;  // shared replicas are one GPU under MPS
      if (prof.kind == RequestProfile::Kind::kShared) {
        if (policy.mutation.shared == policy::SharedMode::kDeny) {
          return Status::FailedPrecondition(
              what + ": time-sliced GPU sharing has no safe DRA conversion under this policy. Fix: request a "
                     "MIG profile (nvidia.com/mig-<profile>) or a ResourceClaim with a GpuConfig MPS config that "
                     "sets defaultActiveThreadPercentage and defaultPinnedDeviceMemoryLimit");
        }
        prof.mps_threads = pod.mps_threads;
        prof.mps_memory = pod.mps_memory;
      }
    } else if (name.rfind("nvidia.com/mig-", 0) == 0) {
      auto taken = take(RequestProfile::Kind::kMig);
      if (!taken.ok()) return taken.status();
      if (!*taken) continue;
      prof.mig_profile = name.substr(std::string("nvidia.com/mig-").size());
      if (!IsMigProfileName(prof.mig_profile)) {
        return Status::InvalidArgument(what + ": \"" + prof.mig_profile + "\" is not a MIG profile name");
      }
    } else if (name == "nvidia.com/gpumem") {
      auto mib = HamiMib(value, what);
      if (!mib.ok()) return mib.status();
      hami_mib = *mib;
    } else if (name == "nvidia.com/gpucores" || name == "nvidia.com/gpumem-percentage") {
      soft.push_back(name);
    } else {
      return Status::FailedPrecondition(what + " has no DRA equivalent draguard can generate. Fix: request the "
                                               "device through a ResourceClaimTemplate");
    }
  }
  if (kinds > 1) {
    return Status::FailedPrecondition(who + " mixes several legacy GPU kinds (full, MIG, shared); split it or "
                                            "write its ResourceClaim explicitly");
  }
  const bool mig = kinds > 0 && prof.kind == RequestProfile::Kind::kMig;
  for (const auto& name : soft) {
    notes->push_back(who + ": " + name + " (a soft share of one GPU) has no DRA equivalent and was dropped; the " +
                     (mig ? "container gets the whole MIG device (" + prof.mig_profile + ")"
                          : std::string(kinds > 0 ? "container gets whole GPUs" : "container asks for no GPU")));
  }
  if (mig && hami_mib) {
    notes->push_back(who + ": nvidia.com/gpumem (" + std::to_string(*hami_mib) +
                     " MiB) was dropped: the MIG profile " + prof.mig_profile + " fixes the device's memory");
  }
  if (kinds == 0) return Status::Ok();  // only zero counts or dropped soft limits
  if (prof.kind != RequestProfile::Kind::kMig) {
    prof.memory = pod.memory;
    prof.product = pod.product;
    if (hami_mib) {
      auto floor = internal::QuantityBytes(prof.memory);
      if (!floor || *floor < (*hami_mib << 20)) prof.memory = std::to_string(*hami_mib) + "Mi";
    }
  }
  if (policy.mutation.cpu.mode != policy::CpuMode::kNone && prof.kind == RequestProfile::Kind::kGpu) {
    prof.cpus = ClaimCpus(container, out->init, who, notes);
  }
  out->profile = prof;
  out->has_request = true;
  return Status::Ok();
}

using Annotations = std::map<std::string, std::string>;

// The annotation `key` of the Pod, or null.
const std::string* Annotation(const Annotations& ann, std::string_view key) {
  auto it = ann.find(std::string(key));
  return it == ann.end() ? nullptr : &it->second;
}

// The memory floor and product of full GPUs: the policy's default floor, or the annotations.
Status ReadGpuSettings(const Annotations& ann, const policy::Policy& policy, PodSettings* settings) {
  settings->memory = !policy.mutation.default_memory.empty() ? policy.mutation.default_memory : policy.memory_minimum;
  if (const std::string* m = Annotation(ann, kMemoryAnnotation)) {
    if (!internal::QuantityBytes(*m)) {
      return Status::InvalidArgument(std::string(kMemoryAnnotation) + " \"" + *m + "\" is not a quantity (e.g. 80G)");
    }
    auto floor = internal::QuantityBytes(*m);
    auto minimum = internal::QuantityBytes(policy.memory_minimum);
    if (minimum && *floor < *minimum) {
      return Status::InvalidArgument(std::string(kMemoryAnnotation) + " \"" + *m +
                                     "\" is below the policy's memoryReservation.minimum " + policy.memory_minimum);
    }
    settings->memory = *m;
  }
  if (const std::string* p = Annotation(ann, kProductAnnotation)) {
    if (p->empty() || !internal::CelString(*p)) {
      return Status::InvalidArgument(std::string(kProductAnnotation) + " \"" + *p + "\" is not a product name");
    }
    settings->product = *p;
  }
  return Status::Ok();
}

// The MPS limits of shared GPUs: the policy's, or the annotations.
Status ReadMpsSettings(const Annotations& ann, const policy::Policy& policy, PodSettings* settings) {
  settings->mps_threads = policy.mutation.mps.active_thread_percentage;
  settings->mps_memory = policy.mutation.mps.pinned_memory_limit;
  if (const std::string* t = Annotation(ann, kMpsThreadsAnnotation)) {
    char* end = nullptr;
    long v = std::strtol(t->c_str(), &end, 10);
    if (t->empty() || end != t->c_str() + t->size() || v < 1 || v > 100) {
      return Status::InvalidArgument(std::string(kMpsThreadsAnnotation) + " \"" + *t + "\" must be 1..100");
    }
    settings->mps_threads = v;
  }
  if (const std::string* m = Annotation(ann, kMpsMemoryAnnotation)) {
    if (!internal::QuantityBytes(*m)) {
      return Status::InvalidArgument(std::string(kMpsMemoryAnnotation) + " \"" + *m + "\" is not a quantity");
    }
    settings->mps_memory = *m;
  }
  return Status::Ok();
}

// The containers, then init containers, with legacy GPU requests (restartable init containers are
// sidecars that run alongside).
Result<std::vector<ContainerInfo>> ReadContainers(const Json& spec, const PodSettings& settings,
                                                  const policy::Policy& policy, std::vector<std::string>* notes) {
  std::vector<ContainerInfo> infos;
  for (const char* list : {"containers", "initContainers"}) {
    auto it = spec.find(list);
    if (it == spec.end() || !it->is_array()) continue;
    for (std::size_t i = 0; i < it->size(); ++i) {
      const Json& c = (*it)[i];
      if (!c.is_object()) continue;
      ContainerInfo info;
      info.pointer = std::string("/spec/") + list + "/" + std::to_string(i);
      if (auto n = c.find("name"); n != c.end() && n->is_string()) info.name = n->get<std::string>();
      if (std::string(list) == "initContainers") {
        auto rp = c.find("restartPolicy");
        info.init = !(rp != c.end() && rp->is_string() && rp->get<std::string>() == "Always");
      }
      DRAGUARD_RETURN_IF_ERROR(ReadContainer(c, settings, policy, &info, notes));
      if (info.has_request) infos.push_back(std::move(info));
    }
  }
  return infos;
}

// One request per container in `out`; a plain init container that needs exactly what a regular
// container needs reuses that request (it finishes before the regular containers start).
// `covered` receives, per request, the containers it covers.
void AssignRequests(const std::vector<ContainerInfo>& infos, ClaimProfile* out,
                    std::vector<std::vector<std::string>>* covered) {
  for (const auto& info : infos) {
    if (info.init) {
      bool shared = false;
      for (std::size_t e = 0; e < out->entries.size(); ++e) {
        if (out->entries[e].profile == info.profile) {
          (*covered)[e].push_back(info.pointer);
          shared = true;
          break;
        }
      }
      if (shared) continue;
    }
    // Request names depend only on the position, so equal profiles give equal templates whatever
    // the containers are called.
    std::string name = out->entries.empty() ? "gpu" : "gpu-" + std::to_string(out->entries.size());
    out->entries.push_back({name, info.profile});
    covered->push_back({info.pointer});
  }
}

}  // namespace

Result<ClaimProfile> ProfilePod(const admission::Json& pod, const policy::Policy& policy,
                                std::vector<std::vector<std::string>>* containers) {
  if (!pod.is_object()) return Status::InvalidArgument("the object is not a Pod");
  const Annotations ann = StringMap(pod, "metadata", "annotations");
  auto labels = StringMap(pod, "metadata", "labels");
  const Json* spec = nullptr;
  if (auto it = pod.find("spec"); it != pod.end() && it->is_object()) spec = &*it;
  if (spec == nullptr) return Status::InvalidArgument("the Pod has no spec");

  ClaimProfile out;
  PodSettings settings;
  std::string priority;
  if (auto it = spec->find("priorityClassName"); it != spec->end() && it->is_string()) priority = it->get<std::string>();
  settings.latency_sensitive = dra::IsLatencySensitive(policy, labels, priority);
  DRAGUARD_RETURN_IF_ERROR(ReadGpuSettings(ann, policy, &settings));
  DRAGUARD_RETURN_IF_ERROR(ReadMpsSettings(ann, policy, &settings));
  if (const std::string* i = Annotation(ann, kInterconnectAnnotation)) {
    if (*i != "auto" && *i != "nvlink" && *i != "pcie" && *i != "numa" && *i != "any") {
      return Status::InvalidArgument(std::string(kInterconnectAnnotation) + " \"" + *i +
                                     "\" must be auto, nvlink, pcie, numa or any");
    }
    out.interconnect = *i;
  }

  auto infos = ReadContainers(*spec, settings, policy, &out.notes);
  if (!infos.ok()) return infos.status();
  std::vector<std::vector<std::string>> covered;
  AssignRequests(*infos, &out, &covered);

  int64_t gpus = 0;
  for (const auto& e : out.entries) {
    if (e.profile.kind == RequestProfile::Kind::kGpu) gpus += e.profile.count;
  }
  const std::string* nic = Annotation(ann, kNicAnnotation);
  if (nic != nullptr && *nic != "rdma" && *nic != "none") {
    return Status::InvalidArgument(std::string(kNicAnnotation) + " \"" + *nic + "\" must be rdma or none");
  }
  out.nic = gpus > 0 && (nic != nullptr ? *nic == "rdma" : policy.mutation.nic.default_for_multi_gpu == "rdma" && gpus >= 2);
  if (containers != nullptr) *containers = std::move(covered);
  return out;
}

ClaimProfile ProfileFromCatalogue(const policy::CatalogueProfile& entry, const policy::Policy& policy) {
  ClaimProfile out;
  RequestProfile p;
  if (!entry.mig.empty()) {
    p.kind = RequestProfile::Kind::kMig;
    p.mig_profile = entry.mig;
    p.count = 1;
  } else {
    p.kind = RequestProfile::Kind::kGpu;
    p.count = entry.gpus;
    p.memory = !entry.memory.empty() ? entry.memory
               : !policy.mutation.default_memory.empty() ? policy.mutation.default_memory
                                                          : policy.memory_minimum;
    p.product = entry.product;
  }
  p.latency_sensitive = entry.latency_sensitive;
  out.entries.push_back({"gpu", p});
  out.nic = p.kind == RequestProfile::Kind::kGpu &&
            (entry.nic.empty() ? policy.mutation.nic.default_for_multi_gpu == "rdma" && p.count >= 2 : entry.nic == "rdma");
  out.interconnect = entry.interconnect;
  return out;
}

}  // namespace draguard::mutation
