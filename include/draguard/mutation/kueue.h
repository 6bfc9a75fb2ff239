// The Kueue (kubernetes-sigs/kueue) configuration that matches a draguard policy: the
// resources.deviceClassMappings under which Kueue's DRA integration charges the claims draguard
// generates, and hand-written claims of the same DeviceClasses, against the same ClusterQueue
// quota as legacy `nvidia.com/gpu` requests (`draguard render --kueue`; docs/deployment.md, "With
// Kueue").
//
// Pure functions of the policy: no I/O.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "draguard/admission/review.h"
#include "draguard/policy/policy.h"
#include "draguard/status.h"

namespace draguard::mutation {

/// The IMEX channel DeviceClasses of the NVIDIA DRA driver's ComputeDomains: the claims that
/// give a Pod a channel (the ComputeDomain controller's templates) request one of them.
inline constexpr std::array<std::string_view, 2> kImexChannelClasses = {"compute-domain-default-channel.nvidia.com",
                                                                        "compute-domain-channel.nvidia.com"};

/// Kueue's limits on resources.deviceClassMappings (v0.19, pkg/config/validation.go).
inline constexpr std::size_t kKueueMaxMappings = 16;
inline constexpr std::size_t kKueueMaxClassesPerMapping = 8;

/// One entry of Kueue's Configuration resources.deviceClassMappings.
struct KueueDeviceClassMapping {
  std::string name;                         ///< the resource ClusterQueues give quota ("nvidia.com/gpu")
  std::vector<std::string> device_classes;  ///< deviceClassNames, in the policy's order
  std::string what;                         ///< what is counted, in words, for the output's comments
};

/// The mappings for `policy`, one per kind of device a claim of draguard's may hold:
///   - `nvidia.com/gpu`: deviceClasses.gpu and deviceClasses.passthrough (whole GPUs). The name of
///     legacy requests, so that a Job's legacy template (charged through the DeviceClass whose
///     extendedResourceName is nvidia.com/gpu) and the claims of converted plain Pods and of
///     DRA-native workloads count against one quota;
///   - `draguard.io/mig-devices`: deviceClasses.mig (MIG devices, any profile);
///   - `draguard.io/nic-devices`: mutation.nic.deviceClass (the RDMA NIC requests);
///   - `draguard.io/cpu-devices`: deviceClasses.cpu (dra-driver-cpu's devices: one per CPU in
///     individual mode, one per NUMA node in grouped mode);
///   - `draguard.io/imex-channels`: kImexChannelClasses.
/// A list the policy leaves empty has no mapping. Fails (InvalidArgument) with the reason where
/// Kueue would refuse the mappings: a DeviceClass in two of them, more than 8 in one.
Result<std::vector<KueueDeviceClassMapping>> KueueDeviceClassMappings(const policy::Policy& policy);

/// The Kueue Configuration fragment that carries `mappings`:
/// `{apiVersion: config.kueue.x-k8s.io/v1beta2, kind: Configuration, resources: {deviceClassMappings: [{name, deviceClassNames}]}}`.
admission::Json KueueConfiguration(const std::vector<KueueDeviceClassMapping>& mappings);

}  // namespace draguard::mutation
