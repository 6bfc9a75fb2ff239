// ResourceSlices and DeviceClasses of the simulated drivers (see resource_slices.h).
#include "draguard/dra/resource_slices.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <variant>

#include "draguard/dra/devices.h"
#include "draguard/k8s/names.h"
#include "draguard/topology/dra_devices.h"

namespace draguard::dra {
namespace {

using admission::Json;

constexpr std::string_view kStandardDomain = "resource.kubernetes.io";

// Kernel RDMA device name prefixes (OpenFabrics OS devices: driver names, and rdma-core's
// predictable names rdmap/rocep/iwp... as EFA uses); any other NIC OS device is a netdev (eth0,
// ib0, ens5 and the IPoIB "ibp..." names).
constexpr std::string_view kRdmaPrefixes[] = {"mlx4_", "mlx5_",   "efa_",  "hfi1_", "qib",        "bnxt_re", "irdma",
                                              "rxe",   "siw",     "usnic_", "qedr", "cxgb4_",     "ocrdma",  "vmw_pvrdma",
                                              "erdma", "hns_",    "mana_ib", "ionic_", "rdmap",    "rocep",   "roceo",
                                              "rocex", "iwp",     "iwo",   "iwx"};

// dranet attributes read from netlink / the PCI database at run time, which no export carries
// (pkg/apis/attributes.go, pkg/inventory/db.go discoverPCIDevices / addLinkAttributes).
constexpr const char* kDranetNeverInExport[] = {
    "dra.net/mac",          "dra.net/mtu",   "dra.net/pciVendor", "dra.net/pciDevice", "dra.net/pciSubsystem",
    "dra.net/encapsulation", "dra.net/alias", "dra.net/state",     "dra.net/type",      "dra.net/ebpf",
    "dra.net/sriov",        "dra.net/virtual"};

bool IsRdmaName(const std::string& name) {
  for (std::string_view p : kRdmaPrefixes) {
    if (name.rfind(p, 0) == 0) return true;
  }
  return false;
}

// One device before it becomes JSON: attributes as "<domain>/<name>" -> {type: value}.
struct SliceDevice {
  std::string name;
  std::map<std::string, Json> attributes;
  std::map<std::string, Json> capacity;
  std::vector<std::string> unknown;
  bool allow_multiple_allocations = false;
};

// The ResourceSlice key of `domain`/`name`: unqualified in the driver's own domain when the driver
// writes it so (the NVIDIA driver does, dranet qualifies every name).
std::string Key(const std::string& domain, const std::string& name, const std::string& driver, bool unqualified_own) {
  return unqualified_own && domain == driver ? name : domain + "/" + name;
}

// A string attribute, or an unknown entry when the value is over the API's length limit.
void PutString(SliceDevice& d, const std::string& key, const std::string& qualified, const std::string& v) {
  if (v.size() > kMaxAttributeValueLength) {
    d.unknown.push_back(qualified + " (value over " + std::to_string(kMaxAttributeValueLength) + " characters)");
    return;
  }
  d.attributes[key] = {{"string", v}};
}

SliceDevice FromSimulated(const Device& dev, const std::string& driver, bool unqualified_own = true) {
  SliceDevice d;
  d.name = dev.name;
  for (const auto& [domain, attrs] : dev.device.attributes) {
    for (const auto& [name, value] : attrs) {
      const std::string key = Key(domain, name, driver, unqualified_own);
      const std::string qualified = domain + "/" + name;
      std::visit(
          [&](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, int64_t>) {
              d.attributes[key] = {{"int", v}};
            } else if constexpr (std::is_same_v<T, bool>) {
              d.attributes[key] = {{"bool", v}};
            } else if constexpr (std::is_same_v<T, std::string>) {
              PutString(d, key, qualified, v);
            } else {
              d.attributes[key] = {{"version", v.ToString()}};
            }
          },
          value);
    }
  }
  for (const auto& [domain, caps] : dev.device.capacity) {
    for (const auto& [name, q] : caps) {
      d.capacity[Key(domain, name, driver, unqualified_own)] = {{"value", q.ToString()}};
    }
  }
  d.unknown.insert(d.unknown.end(), dev.unknown.begin(), dev.unknown.end());
  return d;
}

// dranet: one device per PCI function of the node's NICs, named "pci-<address, ':' and '.' as
// '-'>" (pkg/inventory/db.go discoverPCIDevices, names.NormalizePCIAddress); with
// `standard_numa_node` also resource.kubernetes.io/numaNode (addPCIAttributes, main since a7fdaf0).
std::vector<SliceDevice> DranetDevices(const topology::Shape& shape, bool standard_numa_node) {
  std::vector<SliceDevice> out;
  const std::string dom(kDranetDriver);
  for (std::size_t i = 0; i < shape.nics.size();) {
    std::size_t j = i;
    std::vector<std::string> netdevs, rdma_devs;
    bool rdma = false;
    for (; j < shape.nics.size() && shape.nics[j].pci_bus_id == shape.nics[i].pci_bus_id; ++j) {
      const topology::Nic& n = shape.nics[j];
      (IsRdmaName(n.name) ? rdma_devs : netdevs).push_back(n.name);
      rdma = rdma || n.rdma;
    }
    const topology::Nic& n = shape.nics[i];
    SliceDevice d;
    d.name = "pci-" + n.pci_bus_id;
    std::replace_if(d.name.begin(), d.name.end(), [](char c) { return c == ':' || c == '.'; }, '-');
    PutString(d, dom + "/pciAddress", dom + "/pciAddress", n.pci_bus_id);
    if (netdevs.size() == 1) {
      PutString(d, dom + "/ifName", dom + "/ifName", netdevs.front());
    } else if (netdevs.size() > 1) {
      std::string list;
      for (const auto& s : netdevs) list += (list.empty() ? "" : ", ") + s;
      d.unknown.push_back(dom + "/ifName (one of " + list + ")");
    } else if (!rdma_devs.empty()) {
      PutString(d, dom + "/rdmaDevice", dom + "/rdmaDevice", rdma_devs.front());  // IB-only: no netdev
    }
    d.attributes[dom + "/rdma"] = {{"bool", rdma}};
    // dranet reads numa_node of the PCI function from sysfs, for both attributes (the standard one
    // through k8s.io/dynamic-resource-allocation/deviceattribute, scalar form).
    const std::string standard = std::string(kStandardDomain) + "/numaNode";
    if (n.numa_nodes.size() == 1 && shape.numa_nodes.size() > 1) {
      d.attributes[dom + "/numaNode"] = {{"int", static_cast<int64_t>(n.numa_nodes.front())}};
      if (standard_numa_node) d.attributes[standard] = {{"int", static_cast<int64_t>(n.numa_nodes.front())}};
    } else {
      d.unknown.push_back(dom + "/numaNode");
      if (standard_numa_node) d.unknown.push_back(standard);
    }
    if (const std::string& root = shape.PcieRootId(n); !root.empty()) {
      d.attributes[std::string(kStandardDomain) + "/pcieRoot"] = {{"string", root}};
    } else {
      d.unknown.push_back(std::string(kStandardDomain) + "/pcieRoot");
    }
    for (const char* a : kDranetNeverInExport) d.unknown.emplace_back(a);
    out.push_back(std::move(d));
    i = j;
  }
  std::sort(out.begin(), out.end(), [](const SliceDevice& a, const SliceDevice& b) { return a.name < b.name; });
  return out;
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// The slices of one driver's devices (chunks of kMaxDevicesPerSlice) and their unknown lines.
Result<DriverSlices> MakeSlices(const std::string& node, const std::string& driver, std::vector<SliceDevice> devices) {
  DriverSlices out;
  out.driver = driver;
  std::string base = node + "-" + driver;
  std::replace(base.begin(), base.end(), '.', '-');
  const std::size_t count = (devices.size() + kMaxDevicesPerSlice - 1) / kMaxDevicesPerSlice;
  for (std::size_t k = 0; k < count; ++k) {
    const std::string name = count == 1 ? base : base + "-" + std::to_string(k);
    if (!k8s::IsDnsSubdomain(name)) {
      return Status::InvalidArgument("ResourceSlice name \"" + name + "\" is not a DNS subdomain (at most 253 characters)");
    }
    Json items = Json::array();
    std::vector<const SliceDevice*> chunk;
    for (std::size_t i = k * kMaxDevicesPerSlice; i < std::min(devices.size(), (k + 1) * kMaxDevicesPerSlice); ++i) {
      const SliceDevice& d = devices[i];
      if (!k8s::IsDnsLabel(d.name)) return Status::Internal("device name \"" + d.name + "\" is not a DNS label");
      if (d.attributes.size() + d.capacity.size() > kMaxAttributesAndCapacitiesPerDevice) {
        return Status::Internal("device " + d.name + " has more than 32 attributes and capacities");
      }
      Json dev = {{"name", d.name}, {"attributes", Json::object()}};
      if (d.allow_multiple_allocations) dev["allowMultipleAllocations"] = true;
      for (const auto& [key, v] : d.attributes) dev["attributes"][key] = v;
      if (!d.capacity.empty()) {
        dev["capacity"] = Json::object();
        for (const auto& [key, v] : d.capacity) dev["capacity"][key] = v;
      }
      items.push_back(std::move(dev));
      chunk.push_back(&d);
    }
    // What every device of the slice lacks, once; then what only some lack.
    std::vector<std::string> common;
    if (!chunk.empty()) {
      for (const auto& u : chunk.front()->unknown) {
        const bool all = std::all_of(chunk.begin(), chunk.end(), [&](const SliceDevice* d) {
          return std::find(d->unknown.begin(), d->unknown.end(), u) != d->unknown.end();
        });
        if (all && std::find(common.begin(), common.end(), u) == common.end()) common.push_back(u);
      }
    }
    std::vector<std::string> lines;
    if (!common.empty()) lines.push_back("every device: not in the export: " + Join(common));
    for (const SliceDevice* d : chunk) {
      std::vector<std::string> rest;
      for (const auto& u : d->unknown) {
        if (std::find(common.begin(), common.end(), u) == common.end()) rest.push_back(u);
      }
      if (!rest.empty()) lines.push_back(d->name + ": not in the export: " + Join(rest));
    }
    Json slice = {{"apiVersion", "resource.k8s.io/v1"},
                  {"kind", "ResourceSlice"},
                  {"metadata", {{"name", name}}},
                  {"spec",
                   {{"driver", driver},
                    {"nodeName", node},
                    {"pool", {{"name", node}, {"generation", 1}, {"resourceSliceCount", count}}},
                    {"devices", std::move(items)}}}};
    out.slices.push_back(std::move(slice));
    out.unknown.push_back(std::move(lines));
  }
  return out;
}

// The ComputeDomain kubelet plugin's devices (dra-driver-nvidia-gpu v0.5.0,
// cmd/compute-domain-kubelet-plugin: deviceinfo.go CanonicalName "<type>-<id>", attributes `type`
// and `id`; driver.go publishes channel-0 and daemon-0 only, in one pool named after the node).
std::vector<SliceDevice> ComputeDomainDevices() {
  std::vector<SliceDevice> out;
  for (const char* type : {"channel", "daemon"}) {
    SliceDevice d;
    d.name = std::string(type) + "-0";
    d.attributes["type"] = {{"string", type}};
    d.attributes["id"] = {{"int", 0}};
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace

// dra-driver-cpu's devices in `mode`; every name qualified (the driver writes "dra.cpu/cpuID").
std::vector<SliceDevice> CpuDevices(const topology::NodeTopology& node, topology::CpuDeviceMode mode,
                                    std::vector<std::string>& notes) {
  std::vector<SliceDevice> out;
  const std::string dom(topology::kCpuDriver);
  topology::SimulatedCpuDevices sim = topology::SimulateCpuDevices(node, mode);
  if (!sim.refused.empty()) notes.push_back(dom + ": no devices: " + sim.refused);
  for (const auto& n : sim.notes) notes.push_back(dom + ": " + n);
  if (!sim.devices.empty()) {
    notes.push_back(dom + ": assumes no reservedCPUs (the driver's default); reserved CPUs are left out of every "
                          "device, and in individual mode the later devices are renumbered");
  }
  for (topology::SimulatedDevice& s : sim.devices) {
    auto cel_device = ToCelDevice(s);
    if (!cel_device.ok()) continue;  // counts always parse; defensive
    Device d;
    d.name = s.name;
    d.device = std::move(*cel_device);
    d.unknown = std::move(s.unknown);
    SliceDevice sd = FromSimulated(d, dom, /*unqualified_own=*/false);
    sd.allow_multiple_allocations = s.allow_multiple_allocations;
    out.push_back(std::move(sd));
  }
  return out;
}

Result<NodeSlices> BuildResourceSlices(const topology::NodeTopology& node, std::string_view node_name,
                                       const SliceOptions& options) {
  if (!k8s::IsDnsSubdomain(node_name)) {
    return Status::InvalidArgument("node name \"" + std::string(node_name) +
                                   "\" is not a valid Kubernetes node name (a DNS subdomain: lower-case "
                                   "letters, digits, '-' and '.', at most 253 characters)");
  }
  NodeSlices out;
  out.node = std::string(node_name);
  const std::string nvidia(topology::kNvidiaDriver);
  std::vector<SliceDevice> gpus;
  for (const Device& d : SimulateNode(node)) {
    if (d.kind == DeviceKind::kNic) continue;
    SliceDevice sd = FromSimulated(d, nvidia);
    const topology::Gpu& g = node.shape->gpus[d.index];
    if (d.kind == DeviceKind::kGpu && sd.capacity.count("memory") != 0 &&
        topology::NvmlTotalMemoryBytes(g.device_id) == 0) {
      // Not from the NVML table: the export's figure, which differs from NVML Total.
      sd.unknown.push_back("exact gpu.nvidia.com/memory (shown: the export's " +
                           std::string(topology::MemorySourceName(g.memory_source)) + ", NVML Total differs)");
    }
    gpus.push_back(std::move(sd));
  }
  std::vector<SliceDevice> nics = DranetDevices(*node.shape, options.nic_standard_numa_node);
  std::vector<std::string> cpu_notes;
  std::vector<SliceDevice> cpus = CpuDevices(node, options.cpu_mode, cpu_notes);
  std::set<std::string> unknown;
  for (auto* list : {&gpus, &nics, &cpus}) {
    for (const auto& d : *list) unknown.insert(d.unknown.begin(), d.unknown.end());
  }
  out.unknown_names.assign(unknown.begin(), unknown.end());
  if (!gpus.empty()) {
    out.notes.push_back(nvidia + ": devices are named by the GPU's position in PCI bus order; the driver uses the "
                        "GPU's /dev/nvidia minor number, which is usually the same");
    auto s = MakeSlices(out.node, nvidia, std::move(gpus));
    if (!s.ok()) return s.status();
    out.drivers.push_back(std::move(*s));
  }
  if (!nics.empty()) {
    out.notes.push_back(std::string(kDranetDriver) +
                        ": dranet does not publish the interface that carries the default route, nor PCI "
                        "functions outside the network class (02); the export cannot tell which those are");
    auto s = MakeSlices(out.node, std::string(kDranetDriver), std::move(nics));
    if (!s.ok()) return s.status();
    out.drivers.push_back(std::move(*s));
  }
  out.notes.insert(out.notes.end(), cpu_notes.begin(), cpu_notes.end());
  if (!cpus.empty()) {
    auto s = MakeSlices(out.node, std::string(topology::kCpuDriver), std::move(cpus));
    if (!s.ok()) return s.status();
    out.drivers.push_back(std::move(*s));
  }
  if (!node.nvlink_clique.empty() && !node.shape->gpus.empty()) {
    out.notes.push_back(std::string(kComputeDomainDriver) + ": NVLink clique " + node.nvlink_clique +
                        "; the ComputeDomain plugin publishes IMEX channel 0 only, which one claim at a time "
                        "can hold on a node, and daemon-0 for the domain's IMEX daemon");
    auto s = MakeSlices(out.node, std::string(kComputeDomainDriver), ComputeDomainDevices());
    if (!s.ok()) return s.status();
    out.drivers.push_back(std::move(*s));
  }
  return out;
}

std::vector<admission::Json> BuildDeviceClasses(std::vector<std::string>* comments, bool with_cpu) {
  auto cls = [](const std::string& name, const std::string& expr) {
    return Json{{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "DeviceClass"},
                {"metadata", {{"name", name}}},
                {"spec", {{"selectors", Json::array({{{"cel", {{"expression", expr}}}}})}}}};
  };
  std::vector<Json> out;
  Json gpu = cls("gpu.nvidia.com",
                 "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'");
  gpu["spec"]["extendedResourceName"] = "nvidia.com/gpu";
  out.push_back(std::move(gpu));
  out.push_back(
      cls("mig.nvidia.com", "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"));
  out.push_back(cls("dranet", "device.driver == 'dra.net'"));
  if (with_cpu) out.push_back(cls("dra.cpu", "device.driver == \"dra.cpu\""));
  // deviceclass-compute-domain-default-channel.yaml and deviceclass-compute-domain-daemon.yaml of
  // the driver's chart (v0.5.0), rendered while resources.computeDomains.enabled (the default).
  const std::string cd(kComputeDomainDriver);
  out.push_back(cls("compute-domain-default-channel.nvidia.com",
                    "device.driver == '" + cd + "' && device.attributes['" + cd + "'].type == 'channel' && " +
                        "device.attributes['" + cd + "'].id == 0"));
  out.push_back(cls("compute-domain-daemon.nvidia.com",
                    "device.driver == '" + cd + "' && device.attributes['" + cd + "'].type == 'daemon'"));
  if (comments != nullptr) {
    *comments = {
        "installed by the NVIDIA DRA driver's Helm chart (deviceclass-gpu); extendedResourceName needs the "
        "DRAExtendedResource gate (beta, on from 1.36) and is dropped without it",
        "installed by the NVIDIA DRA driver's Helm chart (deviceclass-mig)",
        "not shipped by dranet's install.yaml: the class draguard's default policy requests for RDMA NICs "
        "(mutation.nic.deviceClass)"};
    if (with_cpu) {
      comments->push_back(
          "installed by the dra-driver-cpu Helm chart (deviceclass.yaml); the class draguard's policy requests for "
          "CPUs (mutation.cpu.deviceClass)");
    }
    comments->push_back("installed by the NVIDIA DRA driver's Helm chart (deviceclass-compute-domain-default-channel, "
                        "with resources.computeDomains.enabled, the default): a ComputeDomain's IMEX channel");
    comments->push_back("installed by the NVIDIA DRA driver's Helm chart (deviceclass-compute-domain-daemon): the "
                        "IMEX daemon of a ComputeDomain, claimed by the driver's own DaemonSet");
  }
  return out;
}

}  // namespace draguard::dra
