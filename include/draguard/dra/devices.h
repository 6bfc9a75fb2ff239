// Simulated DRA devices as CEL selectors see them: the NVIDIA GPUs of a node (what the
// gpu.nvidia.com driver would publish, see topology/dra_devices.h) and its NICs (what the dranet
// driver would publish), converted once to cel::Device so that selectors can be evaluated against
// the real topology by the claim generator and the satisfiability check (DG014).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "draguard/cel/device.h"
#include "draguard/cel/value.h"
#include "draguard/policy/policy.h"
#include "draguard/status.h"
#include "draguard/topology/dra_devices.h"
#include "draguard/topology/model.h"
#include "draguard/topology/snapshot.h"

namespace draguard::dra {

/// What a simulated device is: a full NVIDIA GPU, a MIG device (a GPU instance of a GPU whose
/// export records MIG enabled), or a NIC.
enum class DeviceKind : uint8_t { kGpu, kNic, kMig };

/// One simulated device of one node.
struct Device {
  std::string name;         ///< "gpu-<n>", "gpu-<n>-mig-...", or the NIC's interface name
  DeviceKind kind = DeviceKind::kGpu;
  uint32_t index = 0;       ///< index into shape->gpus or shape->nics
  std::string pcie_root;    ///< "pci0000:17"; empty when unknown
  cel::Device device;       ///< driver, attributes and capacity
  cel::Value value;         ///< DeviceToValue(device), converted once
  /// Attribute / capacity names ("gpu.nvidia.com/driverVersion") the export cannot provide.
  std::vector<std::string> unknown;
};

/// How NICs are published.
struct NicOptions {
  std::string driver = "dra.net";  ///< driver name and attribute domain
  /// The driver also publishes the standard resource.kubernetes.io/numaNode (KEP-6072) on a NIC
  /// local to one NUMA node of a machine with several, as dranet does after v1.4.0
  /// (policy mutation.nic.numaAttribute: standard).
  bool standard_numa_node = false;
  /// A name for memo keys: the driver and the attributes it publishes.
  std::string Key() const { return driver + (standard_numa_node ? "+numaNode" : ""); }
};

/// The NIC options policy `p` describes (mutation.nic.driver, mutation.nic.numaAttribute).
NicOptions NicOptionsOf(const policy::Policy& p);

/// A simulated device as CEL sees it; byte counts become binary quantities ("81559Mi"), counts
/// plain numbers ("48").
Result<cel::Device> ToCelDevice(const topology::SimulatedDevice& device);

/// The NVIDIA GPUs and the NICs of `node` (GPUs first, in driver order; then NICs in shape order).
/// NICs carry `<driver>/ifName`, `pciAddress`, `rdma`, `numaNode` (when single), the standard
/// `resource.kubernetes.io/pcieRoot` (when known) and, with `nic.standard_numa_node`, the standard
/// `resource.kubernetes.io/numaNode` (a NIC local to one NUMA node of several).
std::vector<Device> SimulateNode(const topology::NodeTopology& node, const NicOptions& nic = {});

/// SimulateNode(node, nic), computed once per node and NIC driver for the lifetime of `snapshot`,
/// which must hold `node` (the claim generator and the satisfiability check share it).
std::shared_ptr<const std::vector<Device>> SimulateNode(const topology::Snapshot& snapshot,
                                                        const topology::NodeTopology& node,
                                                        const NicOptions& nic = {});

}  // namespace draguard::dra
