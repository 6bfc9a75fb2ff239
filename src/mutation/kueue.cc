// The Kueue configuration that matches a policy (kueue.h).
#include "draguard/mutation/kueue.h"

#include <map>

namespace draguard::mutation {

Result<std::vector<KueueDeviceClassMapping>> KueueDeviceClassMappings(const policy::Policy& policy) {
  const policy::DeviceClasses& dc = policy.device_classes;
  std::vector<std::string> gpus = dc.gpu;
  gpus.insert(gpus.end(), dc.passthrough.begin(), dc.passthrough.end());
  std::vector<std::string> cpus = dc.cpu;
  if (policy.mutation.cpu.mode != policy::CpuMode::kNone) cpus.push_back(policy.mutation.cpu.device_class);
  const std::vector<KueueDeviceClassMapping> all = {
      {"nvidia.com/gpu", gpus, "whole GPUs (deviceClasses.gpu and .passthrough), the name legacy requests are charged as"},
      {"draguard.io/mig-devices", dc.mig, "MIG devices of any profile (deviceClasses.mig)"},
      {"draguard.io/nic-devices", {policy.mutation.nic.device_class}, "RDMA NICs next to GPUs (mutation.nic.deviceClass)"},
      {"draguard.io/cpu-devices", cpus,
       "dra-driver-cpu devices (deviceClasses.cpu): one per CPU in individual mode, one per NUMA node in grouped mode"},
      {"draguard.io/imex-channels", {std::string(kImexChannelClasses[0]), std::string(kImexChannelClasses[1])},
       "IMEX channels of ComputeDomains (NVIDIA DRA driver)"},
  };
  std::vector<KueueDeviceClassMapping> out;
  std::map<std::string, std::string> owner;  // DeviceClass -> the mapping it is in
  for (const auto& m : all) {
    KueueDeviceClassMapping kept{m.name, {}, m.what};
    for (const auto& c : m.device_classes) {
      if (c.empty()) continue;
      auto [it, fresh] = owner.emplace(c, m.name);
      if (fresh) {
        kept.device_classes.push_back(c);
      } else if (it->second != m.name) {
        return Status::InvalidArgument("DeviceClass " + c + " would be in Kueue's mappings " + it->second + " and " +
                                       m.name + "; Kueue allows a class in one mapping only (the policy names it "
                                       "for both kinds of device)");
      }
    }
    if (kept.device_classes.empty()) continue;
    if (kept.device_classes.size() > kKueueMaxClassesPerMapping) {
      return Status::InvalidArgument("mapping " + m.name + " would list " + std::to_string(kept.device_classes.size()) +
                                     " DeviceClasses; Kueue allows at most " +
                                     std::to_string(kKueueMaxClassesPerMapping) + " per mapping");
    }
    out.push_back(std::move(kept));
  }
  static_assert(5 <= kKueueMaxMappings, "draguard's mappings fit Kueue's limit");
  return out;
}

admission::Json KueueConfiguration(const std::vector<KueueDeviceClassMapping>& mappings) {
  admission::Json list = admission::Json::array();
  for (const auto& m : mappings) list.push_back({{"name", m.name}, {"deviceClassNames", m.device_classes}});
  return {{"apiVersion", "config.kueue.x-k8s.io/v1beta2"},
          {"kind", "Configuration"},
          {"resources", {{"deviceClassMappings", list}}}};
}

}  // namespace draguard::mutation
