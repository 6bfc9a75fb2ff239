// The resource.k8s.io/v1 ResourceSlices a node would publish once the DRA drivers draguard
// simulates are installed (`draguard topology slices`), and the DeviceClasses their deployments
// install: the NVIDIA GPU driver (gpu.nvidia.com: full GPUs and MIG devices, from
// topology::SimulateDraDevices through SimulateNode), dranet (dra.net: one device per PCI
// network function of the node's NICs) and, when asked for, dra-driver-cpu (dra.cpu: CPUs grouped
// per NUMA node or one device per CPU, from topology::SimulateCpuDevices). Pure functions of the topology model; values an hwloc
// export cannot tell are listed, never invented. See docs/topology.md ("draguard topology slices").
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "draguard/admission/review.h"
#include "draguard/status.h"
#include "draguard/topology/dra_devices.h"
#include "draguard/topology/model.h"

namespace draguard::dra {

/// Devices per ResourceSlice (k8s.io/api resource/v1 ResourceSliceMaxDevices; 64 applies only to
/// slices with taints, counters or list attributes, which these are not).
inline constexpr std::size_t kMaxDevicesPerSlice = 128;
/// Attributes plus capacities per device (ResourceSliceMaxAttributesAndCapacitiesPerDevice).
inline constexpr std::size_t kMaxAttributesAndCapacitiesPerDevice = 32;
/// Longest string or version attribute value (DeviceAttributeMaxValueLength).
inline constexpr std::size_t kMaxAttributeValueLength = 64;
/// The driver name (and attribute domain) of dranet.
inline constexpr std::string_view kDranetDriver = "dra.net";
/// The driver name (and attribute domain) of the NVIDIA DRA driver's ComputeDomain kubelet plugin.
inline constexpr std::string_view kComputeDomainDriver = "compute-domain.nvidia.com";

/// One driver's devices on one node, as one or more ResourceSlices of one pool.
struct DriverSlices {
  std::string driver;  ///< "gpu.nvidia.com", "dra.net" or "dra.cpu"
  /// ResourceSlice objects (apiVersion resource.k8s.io/v1), pool = node, resourceSliceCount =
  /// slices.size() (more than one only above kMaxDevicesPerSlice devices).
  std::vector<admission::Json> slices;
  /// Parallel to `slices`: lines (without "# ") saying what the export cannot tell for that
  /// slice's devices: "every device: not in the export: a, b" then "<device>: not in the export: c".
  std::vector<std::vector<std::string>> unknown;
};

/// Everything `topology slices` prints for one node.
struct NodeSlices {
  std::string node;                  ///< the node name used (pool name, spec.nodeName)
  /// gpu.nvidia.com first, then dra.net, then dra.cpu; drivers without devices omitted.
  std::vector<DriverSlices> drivers;
  /// Caveats that hold for the whole node ("dranet does not publish the uplink interface ...").
  std::vector<std::string> notes;
  /// Every attribute / capacity name some device lacks because the export cannot tell it, sorted.
  std::vector<std::string> unknown_names;
};

/// What BuildResourceSlices simulates besides GPUs and NICs.
struct SliceOptions {
  /// How dra-driver-cpu publishes CPUs; kNone (the default): the driver is not installed.
  topology::CpuDeviceMode cpu_mode = topology::CpuDeviceMode::kNone;
  /// dranet also publishes resource.kubernetes.io/numaNode (its main branch since commit a7fdaf0,
  /// after v1.4.0; policy mutation.nic.numaAttribute: standard); false: only dra.net/numaNode, as
  /// v1.4.0 does.
  bool nic_standard_numa_node = false;
};

/// The slices of `node` published under the Kubernetes node name `node_name`. Errors: `node_name`
/// not a DNS subdomain, or a slice name ("<node>-<driver, dots as dashes>[-<k>]") over 253
/// characters. Deterministic: the same input gives the same objects. With a CPU mode whose devices
/// the driver would not publish (it refuses the node), `notes` says why and dra.cpu is omitted.
/// A node whose GPUs are in an NVLink clique (NodeTopology::nvlink_clique) also gets the devices of
/// the ComputeDomain kubelet plugin (kComputeDomainDriver): `channel-0` and `daemon-0`.
Result<NodeSlices> BuildResourceSlices(const topology::NodeTopology& node, std::string_view node_name,
                                       const SliceOptions& options = {});

/// The DeviceClasses for the drivers above: `gpu.nvidia.com` (type gpu, extendedResourceName
/// nvidia.com/gpu) and `mig.nvidia.com` (type mig) as the NVIDIA chart installs them, `dranet`
/// (device.driver == 'dra.net'), which dranet's install.yaml does not ship but draguard's default
/// policy (mutation.nic.deviceClass) requests, and with `with_cpu` also `dra.cpu`
/// (device.driver == "dra.cpu") as the dra-driver-cpu chart installs it, then the NVIDIA chart's
/// ComputeDomain classes `compute-domain-default-channel.nvidia.com` and
/// `compute-domain-daemon.nvidia.com`. `comments` (parallel) says where each comes from.
std::vector<admission::Json> BuildDeviceClasses(std::vector<std::string>* comments = nullptr, bool with_cpu = false);

}  // namespace draguard::dra
