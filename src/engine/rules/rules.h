// Factories of the built-in rules (internal to the engine module).
#pragma once

#include <memory>
#include <string_view>

#include "draguard/engine/rule.h"

namespace draguard::engine::rules {

/// ID of DG001, the rule /mutate stands in for (MutationRule()).
inline constexpr std::string_view kLegacyGpuResourceId = "DG001";
/// DG001 legacy-gpu-resource: no device-plugin GPU resources in Pods and pod templates.
std::unique_ptr<Rule> MakeLegacyGpuResource();
/// DG002 gpu-device-class: GPU requests use a configured NVIDIA DeviceClass.
std::unique_ptr<Rule> MakeGpuDeviceClass();
/// DG003 memory-reservation: full-GPU requests bound device memory from below.
std::unique_ptr<Rule> MakeMemoryReservation();
/// DG004 mig-profile-pinned: MIG requests select exactly one profile.
std::unique_ptr<Rule> MakeMigProfilePinned();
/// DG005 topology-alignment: multi-device claims constrain pcieRoot or numaNode.
std::unique_ptr<Rule> MakeTopologyAlignment();
/// DG006 interconnect-declared: multi-GPU claims declare their interconnect.
std::unique_ptr<Rule> MakeInterconnectDeclared();
/// DG007 latency-sensitive-isolation: no shared GPUs for latency-sensitive work.
std::unique_ptr<Rule> MakeLatencySensitiveIsolation();
/// DG008 sharing-limits: strict NVIDIA opaque configs; MPS with limits.
std::unique_ptr<Rule> MakeSharingLimits();
/// DG009 no-admin-access: adminAccess only in allowed namespaces.
std::unique_ptr<Rule> MakeNoAdminAccess();
/// DG010 no-allocation-mode-all: allocationMode All on GPU classes only where allowed.
std::unique_ptr<Rule> MakeNoAllocationModeAll();
/// DG011 selector-validity: selectors compile and read published attributes.
std::unique_ptr<Rule> MakeSelectorValidity();
/// DG012 claim-api-version: claims in v1, not the betas.
std::unique_ptr<Rule> MakeClaimApiVersion();
/// DG013 claim-static-limits: resource.k8s.io limits and name rules.
std::unique_ptr<Rule> MakeClaimStaticLimits();
/// DG014 unsatisfiable-claim: some node of the topology model can allocate the claim.
std::unique_ptr<Rule> MakeUnsatisfiableClaim();
/// DG015 pod-claim-references: container claim references match spec.resourceClaims.
std::unique_ptr<Rule> MakePodClaimReferences();
/// DG016 gpu-cpu-alignment: exclusive CPUs of a container that uses DRA GPUs are in the GPUs' claim.
std::unique_ptr<Rule> MakeGpuCpuAlignment();
/// DG017 nvlink-domain: multi-node GPU jobs hold a ComputeDomain channel and stay in one NVLink clique.
std::unique_ptr<Rule> MakeNvlinkDomain();

}  // namespace draguard::engine::rules
