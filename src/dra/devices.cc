// Simulated DRA devices as CEL values (see devices.h).
#include "draguard/dra/devices.h"

#include <variant>

#include "draguard/k8s/quantity.h"

namespace draguard::dra {

Result<cel::Device> ToCelDevice(const topology::SimulatedDevice& d) {
  cel::Device out;
  out.driver = d.driver;
  for (const auto& a : d.attributes) {
    std::visit([&](const auto& v) { out.attributes[a.domain][a.name] = cel::AttributeValue(v); }, a.value);
  }
  for (const auto& c : d.capacity) {
    std::string text = !c.count && c.bytes % (1024 * 1024) == 0 ? std::to_string(c.bytes / (1024 * 1024)) + "Mi"
                                                                : std::to_string(c.bytes);
    auto q = k8s::Quantity::Parse(text);
    if (!q.ok()) return q.status();
    out.capacity[c.domain][c.name] = *q;
  }
  return out;
}

NicOptions NicOptionsOf(const policy::Policy& p) {
  return NicOptions{p.mutation.nic.driver, p.mutation.nic.numa_attribute == policy::NicNumaAttribute::kStandard};
}

std::vector<Device> SimulateNode(const topology::NodeTopology& node, const NicOptions& nic) {
  std::vector<Device> out;
  const topology::Shape& shape = *node.shape;
  for (auto& sim : topology::SimulateDraDevices(node)) {
    auto cel_device = ToCelDevice(sim);
    if (!cel_device.ok()) continue;  // byte counts always parse; defensive
    Device d;
    d.name = sim.name;
    d.kind = sim.mig_instance >= 0 ? DeviceKind::kMig : DeviceKind::kGpu;
    d.index = sim.gpu_index;
    d.pcie_root = shape.PcieRootId(shape.gpus[sim.gpu_index]);
    d.device = std::move(*cel_device);
    d.value = cel::DeviceToValue(d.device);
    d.unknown = std::move(sim.unknown);
    out.push_back(std::move(d));
  }
  for (uint32_t i = 0; i < shape.nics.size(); ++i) {
    const topology::Nic& n = shape.nics[i];
    Device d;
    d.name = n.name;
    d.kind = DeviceKind::kNic;
    d.index = i;
    d.pcie_root = shape.PcieRootId(n);
    d.device.driver = nic.driver;
    auto& attrs = d.device.attributes[nic.driver];
    attrs["ifName"] = cel::AttributeValue(n.name);
    attrs["pciAddress"] = cel::AttributeValue(n.pci_bus_id);
    attrs["rdma"] = cel::AttributeValue(n.rdma);
    if (n.numa_nodes.size() == 1) {
      attrs["numaNode"] = cel::AttributeValue(static_cast<int64_t>(n.numa_nodes.front()));
    } else {
      d.unknown.push_back(nic.driver + "/numaNode");
    }
    if (!d.pcie_root.empty()) {
      d.device.attributes["resource.kubernetes.io"]["pcieRoot"] = cel::AttributeValue(d.pcie_root);
    } else {
      d.unknown.push_back("resource.kubernetes.io/pcieRoot");
    }
    if (nic.standard_numa_node && n.numa_nodes.size() == 1 && shape.numa_nodes.size() > 1) {
      d.device.attributes["resource.kubernetes.io"]["numaNode"] =
          cel::AttributeValue(static_cast<int64_t>(n.numa_nodes.front()));
    }
    d.value = cel::DeviceToValue(d.device);
    out.push_back(std::move(d));
  }
  return out;
}

std::shared_ptr<const std::vector<Device>> SimulateNode(const topology::Snapshot& snapshot,
                                                        const topology::NodeTopology& node, const NicOptions& nic) {
  return std::static_pointer_cast<const std::vector<Device>>(
      snapshot.Memo("dra/devices/" + nic.Key() + "/" + node.name, [&]() -> std::shared_ptr<const void> {
        return std::make_shared<const std::vector<Device>>(SimulateNode(node, nic));
      }));
}

}  // namespace draguard::dra
