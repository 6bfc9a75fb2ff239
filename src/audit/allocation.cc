#include "draguard/audit/allocation.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "draguard/cel/parser.h"
#include "draguard/dra/claims.h"
#include "draguard/dra/pod_specs.h"
#include "draguard/dra/selector_analysis.h"
#include "draguard/topology/snapshot.h"

namespace draguard::audit {
namespace {

using admission::Json;
using dra::Member;
using dra::StringMember;

constexpr std::string_view kStandard = "resource.kubernetes.io";
constexpr const char* kExtendedAnnotation = "resource.kubernetes.io/extended-resource-claim";
constexpr const char* kManagedBy = "app.kubernetes.io/managed-by";
constexpr const char* kInterconnect = "draguard.io/interconnect";
constexpr uint32_t kNoGpu = 0xffffffffu;

std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "0000:17:00.0" from any case and from NVML's 8-digit domain ("00000000:17:00.0").
std::string NormalizeBusId(std::string s) {
  s = Lower(std::move(s));
  const auto colon = s.find(':');
  if (colon == std::string::npos || s.find(':', colon + 1) == std::string::npos) return s;
  std::size_t skip = 0;
  while (colon - skip > 4 && s[skip] == '0') ++skip;
  return s.substr(skip);
}

const Json* Attribute(const Json& attrs, const std::string& qualified, const std::string& driver) {
  if (auto it = attrs.find(qualified); it != attrs.end()) return &*it;
  // Unqualified names are in the driver's domain.
  const auto slash = qualified.find('/');
  if (slash != std::string::npos && qualified.compare(0, slash, driver) == 0) {
    if (auto it = attrs.find(qualified.substr(slash + 1)); it != attrs.end()) return &*it;
  }
  return nullptr;
}

std::string StringAttr(const Json& attrs, const std::string& qualified, const std::string& driver) {
  const Json* a = Attribute(attrs, qualified, driver);
  if (a == nullptr || !a->is_object()) return "";
  if (auto s = a->find("string"); s != a->end() && s->is_string()) return s->get<std::string>();
  if (auto s = a->find("strings"); s != a->end() && s->is_array() && s->size() == 1 && (*s)[0].is_string()) {
    return (*s)[0].get<std::string>();
  }
  return "";
}

std::vector<int64_t> IntAttr(const Json& attrs, const std::string& qualified, const std::string& driver) {
  std::vector<int64_t> out;
  const Json* a = Attribute(attrs, qualified, driver);
  if (a == nullptr || !a->is_object()) return out;
  if (auto i = a->find("int"); i != a->end() && i->is_number_integer()) out.push_back(i->get<int64_t>());
  if (auto l = a->find("ints"); l != a->end() && l->is_array()) {
    for (const auto& v : *l) {
      if (v.is_number_integer()) out.push_back(v.get<int64_t>());
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

int64_t IntMember(const Json* obj, const char* key, int64_t fallback) {
  const Json* m = Member(obj, key);
  return m != nullptr && m->is_number_integer() ? m->get<int64_t>() : fallback;
}

std::string DeviceKey(std::string_view driver, std::string_view pool, std::string_view device) {
  std::string k;
  k.reserve(driver.size() + pool.size() + device.size() + 2);
  k.append(driver).push_back('\0');
  k.append(pool).push_back('\0');
  k.append(device);
  return k;
}

std::string PoolKey(std::string_view driver, std::string_view pool) {
  std::string k(driver);
  k.push_back('\0');
  k.append(pool);
  return k;
}

// "gpu" matches the results of request "gpu" and of its subrequests "gpu/x"; "gpu/x" only those.
bool Names(const std::string& entry, const std::string& result_request) {
  if (entry == result_request) return true;
  const auto slash = result_request.find('/');
  return slash != std::string::npos && slash == entry.size() && result_request.compare(0, slash, entry) == 0;
}

std::string Subrequest(const std::string& request) {
  const auto slash = request.find('/');
  return slash == std::string::npos ? "" : request.substr(slash + 1);
}

std::string Join(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

template <typename T>
std::string JoinNumbers(const std::vector<T>& v) {
  std::vector<std::string> s;
  for (const auto& x : v) s.push_back(std::to_string(x));
  return Join(s);
}

Promise::Kind AttributeKind(const std::string& attribute, bool* topological) {
  *topological = true;
  if (attribute == "resource.kubernetes.io/pcieRoot") return Promise::Kind::kPcieRoot;
  if (attribute == "resource.kubernetes.io/numaNode" || attribute == "dra.net/numaNode" ||
      attribute == "dra.cpu/numaNodeID" || attribute == "gpu.nvidia.com/numa") {
    return Promise::Kind::kNuma;
  }
  *topological = false;
  return Promise::Kind::kPcieRoot;
}

void AddPromise(std::vector<Promise>& out, Promise p) {
  if (p.results.size() < 2) return;  // one device keeps any promise
  std::sort(p.results.begin(), p.results.end());
  for (const auto& q : out) {
    if (q.kind == p.kind && q.results == p.results) return;  // said twice (a constraint and a name)
  }
  out.push_back(std::move(p));
}

// The promises of a claim's spec (see ReadAllocatedClaim).
std::vector<Promise> Promises(const Json& claim, const std::vector<AllocatedResult>& results, bool generated) {
  std::vector<Promise> out;
  auto ref = dra::FindClaim(admission::CreateRequestFor(claim));
  if (!ref) return out;
  for (const auto& c : ref->constraints) {
    bool topological = false;
    Promise p;
    p.kind = AttributeKind(c.match_attribute, &topological);
    if (!topological) continue;
    for (uint32_t i = 0; i < results.size(); ++i) {
      bool named = c.requests.empty();
      for (const auto& e : c.requests) named = named || Names(e, results[i].request);
      if (named) p.results.push_back(i);
    }
    p.source = "constraint matchAttribute " + c.match_attribute +
               (c.requests.empty() ? " (every request)" : " (requests " + Join(c.requests) + ")");
    AddPromise(out, std::move(p));
  }
  auto ann = ref->annotations.find(kInterconnect);
  if (ann != ref->annotations.end() && ann->second == "nvlink") {
    Promise p;
    p.kind = Promise::Kind::kNvlink;
    p.source = std::string("annotation ") + kInterconnect + ": nvlink";
    for (uint32_t i = 0; i < results.size(); ++i) {
      const std::string sub = Subrequest(results[i].request);
      // The generator annotates a claim nvlink when one alternative relies on NVLink; the
      // alternatives of the other classes promise their own class only.
      if (generated && !sub.empty() && sub.rfind("nvlink-", 0) != 0) continue;
      p.results.push_back(i);
    }
    AddPromise(out, std::move(p));
  }
  for (const auto& r : ref->requests) {
    for (const auto& alt : r.alternatives) {
      Promise p;
      for (uint32_t i = 0; i < results.size(); ++i) {
        if (results[i].request == alt.ref) p.results.push_back(i);
      }
      if (p.results.size() < 2) continue;
      if (generated && alt.name.rfind("nvlink-", 0) == 0) {
        p.kind = Promise::Kind::kNvlink;
        p.source = "alternative " + alt.ref + " of the claim draguard generated";
        AddPromise(out, std::move(p));
        continue;
      }
      if (generated && alt.name.rfind("numa-", 0) == 0) {
        p.kind = Promise::Kind::kNuma;
        p.source = "alternative " + alt.ref + " of the claim draguard generated";
        AddPromise(out, std::move(p));
        continue;
      }
      for (const auto& s : alt.selectors) {
        auto ast = cel::Parse(s.expression);
        if (!ast.ok()) continue;
        auto roots = dra::ConjunctRestriction(*ast->root, std::string(kStandard), "pcieRoot", false);
        if (!roots || roots->empty()) continue;
        std::vector<std::string> listed(roots->begin(), roots->end());
        if (generated) {
          p.kind = Promise::Kind::kNuma;
          p.source = "selector of " + alt.ref + " restricting resource.kubernetes.io/pcieRoot to the roots of one NUMA node (" +
                     Join(listed) + ")";
        } else if (listed.size() == 1) {
          p.kind = Promise::Kind::kPcieRoot;
          p.source = "selector of " + alt.ref + " restricting resource.kubernetes.io/pcieRoot to " + listed.front();
        } else {
          continue;
        }
        AddPromise(out, p);
        break;
      }
    }
  }
  return out;
}

// ---- Locating devices ---------------------------------------------------------------------------

struct Located {
  const topology::NodeTopology* node = nullptr;
  LocatedDevice device;
};

std::vector<uint32_t> ToNuma(const std::vector<int64_t>& v) {
  std::vector<uint32_t> out;
  for (int64_t x : v) {
    if (x >= 0 && x <= 0xffffffffLL) out.push_back(static_cast<uint32_t>(x));
  }
  return out;
}

std::vector<uint32_t> ShapeNuma(const topology::Shape& shape, const std::vector<uint32_t>& numa) {
  if (!numa.empty() || shape.numa_nodes.size() != 1) return numa;
  return {shape.numa_nodes.front().os_index};  // one NUMA node: every device is local to it
}

Located Locate(const ClaimAllocation& claim, const AllocatedResult& r, const AllocationLookup& lookup) {
  Located out;
  LocatedDevice& d = out.device;
  d.claim = claim.name;
  d.request = r.request;
  d.driver = r.driver;
  d.pool = r.pool;
  d.device = r.device;
  const SliceDevice* s = lookup.device ? lookup.device(r.driver, r.pool, r.device) : nullptr;
  if (s == nullptr) {
    // Not published (or not held): a GPU of the NVIDIA driver is still a GPU.
    d.kind = r.driver == "gpu.nvidia.com" ? DeviceKind::kGpu : DeviceKind::kOther;
    return out;
  }
  d.found = true;
  d.kind = s->kind;
  d.node = s->node;
  d.pci_bus_id = s->pci_bus_id;
  d.published_root = s->pcie_root;
  d.pcie_root = s->pcie_root;
  d.published_numa = s->numa;
  d.numa = ToNuma(s->numa);
  const topology::NodeTopology* node =
      lookup.topology != nullptr && !s->node.empty() ? lookup.topology->Find(s->node) : nullptr;
  if (node == nullptr) return out;
  out.node = node;
  const topology::Shape& shape = *node->shape;
  if (d.kind == DeviceKind::kCpu) {
    if (s->cpu_id >= 0) {
      for (const auto& cpu : *node->cpus) {
        if (cpu.os_index == s->cpu_id && cpu.numa_node != topology::kNoIndex) {
          d.numa = {cpu.numa_node};
          d.located = true;
        }
      }
    }
    return out;
  }
  for (uint32_t i = 0; i < shape.gpus.size(); ++i) {
    const bool by_bus = !s->pci_bus_id.empty() && shape.gpus[i].pci_bus_id == s->pci_bus_id;
    const bool by_uuid = s->pci_bus_id.empty() && !s->uuid.empty() && node->GpuUuid(i) == std::string_view(s->uuid);
    if (!by_bus && !by_uuid) continue;
    d.kind = DeviceKind::kGpu;
    d.gpu = i;
    d.located = true;
    d.pcie_root = shape.PcieRootId(shape.gpus[i]);
    d.numa = ShapeNuma(shape, shape.gpus[i].numa_nodes);
    return out;
  }
  if (!s->pci_bus_id.empty()) {
    for (const auto& nic : shape.nics) {
      if (nic.pci_bus_id != s->pci_bus_id) continue;
      d.kind = DeviceKind::kNic;
      d.located = true;
      d.pcie_root = shape.PcieRootId(nic);
      d.numa = ShapeNuma(shape, nic.numa_nodes);
      return out;
    }
  }
  return out;
}

// ---- What a set of devices shares ---------------------------------------------------------------

std::string Identity(const LocatedDevice& d) {
  if (d.gpu != kNoGpu) return d.node + "#" + std::to_string(d.gpu);
  if (!d.pci_bus_id.empty()) return d.node + "#" + d.pci_bus_id;
  return DeviceKey(d.driver, d.pool, d.device);
}

// One device per physical GPU (MIG devices of one GPU count once).
std::vector<const Located*> DistinctGpus(const std::vector<const Located*>& devices) {
  std::vector<const Located*> out;
  std::set<std::string> seen;
  for (const auto* l : devices) {
    if (l->device.kind == DeviceKind::kGpu && seen.insert(Identity(l->device)).second) out.push_back(l);
  }
  return out;
}

Proof AllLinked(const std::vector<const Located*>& gpus) {
  if (gpus.size() < 2) return Proof::kYes;
  Proof p = Proof::kYes;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    for (std::size_t j = i + 1; j < gpus.size(); ++j) {
      const Located& a = *gpus[i];
      const Located& b = *gpus[j];
      if (a.device.located && b.device.located) {
        if (a.node != b.node) return Proof::kNo;
        const auto& peers = a.node->shape->derived.link_peers;
        const bool linked = a.device.gpu < peers.size() &&
                            std::binary_search(peers[a.device.gpu].begin(), peers[a.device.gpu].end(), b.device.gpu);
        if (!linked) return Proof::kNo;
      } else if (!a.device.node.empty() && !b.device.node.empty() && a.device.node != b.device.node) {
        return Proof::kNo;
      } else {
        p = Proof::kUnknown;
      }
    }
  }
  return p;
}

// One PCIe root for every device with one (CPUs have none of their own).
Proof OneRoot(const std::vector<const Located*>& devices, std::vector<std::string>* roots) {
  bool unknown = false;
  for (const auto* l : devices) {
    if (l->device.kind == DeviceKind::kCpu) continue;
    if (l->device.pcie_root.empty()) {
      unknown = true;
    } else if (std::find(roots->begin(), roots->end(), l->device.pcie_root) == roots->end()) {
      roots->push_back(l->device.pcie_root);
    }
  }
  std::sort(roots->begin(), roots->end());
  if (roots->size() > 1) return Proof::kNo;
  return unknown ? Proof::kUnknown : Proof::kYes;
}

// A NUMA node common to every device; `all` collects the NUMA nodes seen.
Proof CommonNuma(const std::vector<const Located*>& devices, std::vector<uint32_t>* all) {
  bool unknown = false, first = true;
  std::vector<uint32_t> common;
  for (const auto* l : devices) {
    const auto& n = l->device.numa;
    if (n.empty()) {
      unknown = true;
      continue;
    }
    for (uint32_t x : n) {
      if (std::find(all->begin(), all->end(), x) == all->end()) all->push_back(x);
    }
    if (first) {
      common = n;
      first = false;
    } else {
      std::vector<uint32_t> both;
      std::set_intersection(common.begin(), common.end(), n.begin(), n.end(), std::back_inserter(both));
      common = std::move(both);
    }
  }
  std::sort(all->begin(), all->end());
  if (!first && common.empty()) return Proof::kNo;
  return unknown ? Proof::kUnknown : Proof::kYes;
}

std::string Where(const LocatedDevice& d) {
  std::string s = d.device;
  if (d.pcie_root.empty() && d.numa.empty()) return s;
  s += " (";
  if (!d.pcie_root.empty()) s += d.pcie_root;
  if (!d.numa.empty()) s += std::string(d.pcie_root.empty() ? "" : ", ") + "NUMA " + JoinNumbers(d.numa);
  const bool root_differs = d.located && !d.published_root.empty() && d.published_root != d.pcie_root;
  const bool numa_differs = d.located && !d.published_numa.empty() && ToNuma(d.published_numa) != d.numa;
  if (root_differs || numa_differs) {
    std::vector<std::string> pub;
    if (root_differs) pub.push_back(d.published_root);
    if (numa_differs) pub.push_back("NUMA " + JoinNumbers(d.published_numa));
    s += "; its slice publishes " + Join(pub);
  }
  return s + ")";
}

std::string DeviceNames(const std::vector<const Located*>& devices) {
  std::vector<std::string> out;
  for (const auto* l : devices) out.push_back(l->device.device);
  return Join(out);
}

// Whether the claim's allocation keeps `p`; the message when it does not.
std::optional<std::string> Broken(const ClaimAllocation& claim, const Promise& p, const std::vector<Located>& located) {
  std::vector<const Located*> covered;
  for (uint32_t i : p.results) {
    if (i < located.size()) covered.push_back(&located[i]);
  }
  std::vector<const Located*> shown;
  switch (p.kind) {
    case Promise::Kind::kNvlink: {
      shown = DistinctGpus(covered);
      if (shown.size() < 2 || AllLinked(shown) != Proof::kNo) return std::nullopt;
      break;
    }
    case Promise::Kind::kPcieRoot: {
      for (const auto* l : covered) {
        if (l->device.kind != DeviceKind::kCpu) shown.push_back(l);
      }
      std::vector<std::string> roots;
      if (shown.size() < 2 || OneRoot(shown, &roots) != Proof::kNo) return std::nullopt;
      break;
    }
    case Promise::Kind::kNuma: {
      shown = covered;
      std::vector<uint32_t> all;
      if (shown.size() < 2 || CommonNuma(shown, &all) != Proof::kNo) return std::nullopt;
      break;
    }
  }
  std::vector<std::string> where;
  for (const auto* l : shown) where.push_back(Where(l->device));
  const char* fact = p.kind == Promise::Kind::kNvlink ? "are not all NVLink-connected"
                     : p.kind == Promise::Kind::kPcieRoot ? "are under different PCIe roots"
                                                          : "share no NUMA node";
  return "claim \"" + claim.name + "\" promises " + PromiseWords(p.kind) + " (" + p.source + "), but " + Join(where) +
         " " + fact + " by the node's topology";
}

std::string Describe(const ContainerAllocation& c, const std::vector<const Located*>& gpus,
                     const std::vector<std::string>& roots, const std::vector<const Located*>& others) {
  std::string s = "container \"" + c.container + "\": " + std::to_string(c.gpus) + (c.gpus == 1 ? " GPU" : " GPUs") +
                  " (" + DeviceNames(gpus) + ")" + (c.node.empty() ? "" : " on node " + c.node);
  std::vector<std::string> facts;
  if (c.gpus >= 2) {
    facts.push_back(c.nvlink == Proof::kYes  ? "pairwise NVLink-connected"
                    : c.nvlink == Proof::kNo ? "not all NVLink-connected"
                                             : "NVLink unknown (no topology of the node)");
  }
  if (c.one_root == Proof::kYes) {
    facts.push_back((c.gpus >= 2 ? "under one PCIe root " : "under PCIe root ") + roots.front());
  } else if (c.one_root == Proof::kNo) {
    facts.push_back("under PCIe roots " + Join(roots));
  } else {
    facts.push_back("PCIe root unknown");
  }
  if (c.one_numa == Proof::kYes) {
    facts.push_back("on NUMA node " + JoinNumbers(c.gpu_numa));
  } else if (c.one_numa == Proof::kNo) {
    facts.push_back("on NUMA nodes " + JoinNumbers(c.gpu_numa));
  } else {
    facts.push_back("NUMA node unknown");
  }
  s += ": " + Join(facts);
  std::vector<std::string> nics;
  for (const auto* l : others) {
    if (l->device.kind == DeviceKind::kNic) nics.push_back(Where(l->device));
  }
  if (!nics.empty()) s += "; NICs " + Join(nics);
  if (!c.cpu_numa.empty()) {
    s += "; CPUs on NUMA node" + std::string(c.cpu_numa.size() > 1 ? "s " : " ") + JoinNumbers(c.cpu_numa);
    if (c.cpus_with_gpus == Proof::kYes) s += ", with its GPUs";
  }
  return s;
}

}  // namespace

const char* AlignmentName(Alignment alignment) {
  switch (alignment) {
    case Alignment::kSingle: return "single";
    case Alignment::kNvlink: return "nvlink";
    case Alignment::kPcieRoot: return "pcie-root";
    case Alignment::kNuma: return "numa";
    case Alignment::kNone: return "none";
    case Alignment::kUnknown: return "unknown";
  }
  return "unknown";
}

const char* ClaimOriginName(ClaimOrigin origin) {
  switch (origin) {
    case ClaimOrigin::kUser: return "user";
    case ClaimOrigin::kDraguard: return "draguard";
    case ClaimOrigin::kScheduler: return "scheduler";
  }
  return "user";
}

const char* DeviceKindName(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kOther: return "other";
    case DeviceKind::kGpu: return "gpu";
    case DeviceKind::kNic: return "nic";
    case DeviceKind::kCpu: return "cpu";
  }
  return "other";
}

const char* PromiseWords(Promise::Kind kind) {
  switch (kind) {
    case Promise::Kind::kNvlink: return "NVLink between all its GPUs";
    case Promise::Kind::kPcieRoot: return "one PCIe root";
    case Promise::Kind::kNuma: return "one NUMA node";
  }
  return "";
}

std::optional<SliceRead> ReadResourceSlice(const Json& slice) {
  if (!slice.is_object() || StringMember(&slice, "kind") != "ResourceSlice") return std::nullopt;
  if (StringMember(&slice, "apiVersion").rfind("resource.k8s.io/", 0) != 0) return std::nullopt;
  const Json* spec = Member(&slice, "spec");
  SliceRead out;
  out.driver = StringMember(spec, "driver");
  const Json* pool = Member(spec, "pool");
  out.pool = StringMember(pool, "name");
  out.generation = IntMember(pool, "generation", 0);
  out.slice_count = std::max<int64_t>(1, IntMember(pool, "resourceSliceCount", 1));
  if (out.driver.empty() || out.pool.empty()) return std::nullopt;
  const std::string node = StringMember(spec, "nodeName");
  const Json* devices = Member(spec, "devices");
  if (devices == nullptr || !devices->is_array()) return out;
  static const Json kNoAttributes = Json::object();
  const std::string& drv = out.driver;
  for (const auto& dev : *devices) {
    const std::string name = StringMember(&dev, "name");
    if (name.empty()) continue;
    const Json* a = Member(&dev, "attributes");
    const Json& attrs = a != nullptr && a->is_object() ? *a : kNoAttributes;
    SliceDevice d;
    d.node = StringMember(&dev, "nodeName");  // perDeviceNodeSelection
    if (d.node.empty()) d.node = node;
    d.generation = out.generation;
    for (const char* key : {"resource.kubernetes.io/pciBusID", "/pcieBusID", "/pciBusID", "/pciAddress"}) {
      std::string q = key[0] == '/' ? drv + key : key;
      if (std::string v = StringAttr(attrs, q, drv); !v.empty()) {
        d.pci_bus_id = NormalizeBusId(v);
        break;
      }
    }
    d.pcie_root = Lower(StringAttr(attrs, "resource.kubernetes.io/pcieRoot", drv));
    for (const char* key : {"resource.kubernetes.io/numaNode", "dra.net/numaNode", "dra.cpu/numaNodeID", "/numa",
                            "/numaNode"}) {
      std::string q = key[0] == '/' ? drv + key : key;
      if (auto v = IntAttr(attrs, q, drv); !v.empty()) {
        d.numa = std::move(v);
        break;
      }
    }
    if (d.pci_bus_id.empty()) {  // the address locates the device; else its (parent's) UUID
      d.uuid = StringAttr(attrs, drv + "/parentUUID", drv);
      if (d.uuid.empty()) d.uuid = StringAttr(attrs, drv + "/uuid", drv);
    }
    const std::string type = StringAttr(attrs, drv + "/type", drv);
    if (drv == "dra.cpu") {
      d.kind = DeviceKind::kCpu;
      if (auto id = IntAttr(attrs, "dra.cpu/cpuID", drv); id.size() == 1) d.cpu_id = id.front();
    } else if (drv == "dra.net") {
      d.kind = DeviceKind::kNic;
    } else if (drv == "gpu.nvidia.com" && (type.empty() || type == "gpu" || type == "mig" || type == "vfio")) {
      d.kind = DeviceKind::kGpu;
    }
    if (d.kind == DeviceKind::kOther && d.pci_bus_id.empty() && d.pcie_root.empty() && d.numa.empty() &&
        d.uuid.empty()) {
      continue;  // nothing locates it (a ComputeDomain channel, ...)
    }
    out.devices.emplace_back(name, std::move(d));
  }
  return out;
}

std::optional<ClaimAllocation> ReadAllocatedClaim(const Json& claim) {
  if (!claim.is_object() || StringMember(&claim, "kind") != "ResourceClaim") return std::nullopt;
  if (StringMember(&claim, "apiVersion").rfind("resource.k8s.io/", 0) != 0) return std::nullopt;
  const Json* results = Member(Member(Member(Member(&claim, "status"), "allocation"), "devices"), "results");
  if (results == nullptr || !results->is_array() || results->empty()) return std::nullopt;
  ClaimAllocation out;
  const Json* md = Member(&claim, "metadata");
  out.namespace_ = StringMember(md, "namespace");
  out.name = StringMember(md, "name");
  for (const auto& r : *results) {
    AllocatedResult a{StringMember(&r, "request"), StringMember(&r, "driver"), StringMember(&r, "pool"),
                      StringMember(&r, "device")};
    if (a.driver.empty() || a.pool.empty() || a.device.empty()) continue;
    out.results.push_back(std::move(a));
  }
  if (out.results.empty()) return std::nullopt;
  const auto annotations = dra::StringMapAt(claim, {"metadata", "annotations"});
  const auto labels = dra::StringMapAt(claim, {"metadata", "labels"});
  if (auto it = annotations.find(kExtendedAnnotation); it != annotations.end() && it->second == "true") {
    out.origin = ClaimOrigin::kScheduler;
  } else if (auto l = labels.find(kManagedBy); l != labels.end() && l->second == "draguard") {
    out.origin = ClaimOrigin::kDraguard;
  }
  out.promises = Promises(claim, out.results, out.origin == ClaimOrigin::kDraguard);
  return out;
}

std::optional<PodClaims> ReadPodClaims(const Json& pod, std::string_view default_namespace) {
  if (!pod.is_object() || StringMember(&pod, "kind") != "Pod" || StringMember(&pod, "apiVersion") != "v1") {
    return std::nullopt;
  }
  const Json* spec = Member(&pod, "spec");
  const Json* status = Member(&pod, "status");
  PodClaims out;
  out.node = StringMember(spec, "nodeName");
  if (out.node.empty()) return std::nullopt;
  const Json* md = Member(&pod, "metadata");
  out.namespace_ = StringMember(md, "namespace");
  if (out.namespace_.empty()) out.namespace_ = std::string(default_namespace);
  out.name = StringMember(md, "name");
  out.uid = StringMember(md, "uid");
  // Pod claim name -> ResourceClaim name (for templates, as the status names it).
  std::map<std::string, std::string> generated_names;
  std::map<std::string, std::string> by_template;
  if (const Json* st = Member(status, "resourceClaimStatuses"); st != nullptr && st->is_array()) {
    for (const auto& s : *st) by_template[StringMember(&s, "name")] = StringMember(&s, "resourceClaimName");
  }
  std::map<std::string, std::string> claim_of;
  if (const Json* rcs = Member(spec, "resourceClaims"); rcs != nullptr && rcs->is_array()) {
    for (const auto& rc : *rcs) {
      const std::string name = StringMember(&rc, "name");
      std::string claim = StringMember(&rc, "resourceClaimName");
      const std::string tmpl = StringMember(&rc, "resourceClaimTemplateName");
      if (claim.empty() && !tmpl.empty()) {
        auto it = by_template.find(name);
        if (it != by_template.end()) claim = it->second;
      }
      if (claim.empty()) continue;  // not made yet (or not needed)
      claim_of[name] = claim;
      if (dra::IsGeneratedTemplateName(tmpl)) out.generated.insert(claim);
    }
  }
  auto container_entry = [&](const std::string& name) -> ContainerClaims& {
    for (auto& c : out.containers) {
      if (c.name == name) return c;
    }
    out.containers.push_back({name, {}});
    return out.containers.back();
  };
  for (const char* list : {"initContainers", "containers"}) {
    const Json* cs = Member(spec, list);
    if (cs == nullptr || !cs->is_array()) continue;
    for (const auto& c : *cs) {
      const Json* claims = Member(Member(&c, "resources"), "claims");
      if (claims == nullptr || !claims->is_array()) continue;
      for (const auto& use : *claims) {
        auto it = claim_of.find(StringMember(&use, "name"));
        if (it == claim_of.end()) continue;
        container_entry(StringMember(&c, "name")).uses.push_back({it->second, StringMember(&use, "request")});
      }
    }
  }
  if (const Json* ext = Member(status, "extendedResourceClaimStatus"); ext != nullptr && ext->is_object()) {
    out.extended_claim = StringMember(ext, "resourceClaimName");
    const Json* mappings = Member(ext, "requestMappings");
    if (!out.extended_claim.empty() && mappings != nullptr && mappings->is_array()) {
      for (const auto& m : *mappings) {
        const std::string container = StringMember(&m, "containerName");
        const std::string request = StringMember(&m, "requestName");
        if (container.empty() || request.empty()) continue;
        container_entry(container).uses.push_back({out.extended_claim, request});
      }
    }
  }
  if (out.containers.empty()) return std::nullopt;
  return out;
}

bool Reportable(const ContainerAllocation& c) {
  if (c.gpus >= 2) return true;
  for (const auto& d : c.devices) {
    if (d.kind == DeviceKind::kNic || d.kind == DeviceKind::kCpu) return true;
  }
  return false;
}

PodAllocation AnalyzePod(const PodClaims& pod, const AllocationLookup& lookup) {
  PodAllocation out;
  out.namespace_ = pod.namespace_;
  out.name = pod.name;
  out.uid = pod.uid;
  out.node = pod.node;
  // Every claim the Pod uses, located once: (claim, its devices, which promises it breaks).
  struct ClaimState {
    const ClaimAllocation* claim = nullptr;
    std::vector<Located> located;
    std::vector<std::optional<std::string>> broken;  // per promise
  };
  std::map<std::string, ClaimState> claims;
  for (const auto& c : pod.containers) {
    for (const auto& use : c.uses) {
      if (claims.count(use.claim) != 0) continue;
      ClaimState& st = claims[use.claim];
      st.claim = lookup.claim ? lookup.claim(pod.namespace_, use.claim) : nullptr;
      if (st.claim == nullptr) {
        out.missing.push_back(use.claim);
        continue;
      }
      for (const auto& r : st.claim->results) st.located.push_back(Locate(*st.claim, r, lookup));
      for (const auto& p : st.claim->promises) st.broken.push_back(Broken(*st.claim, p, st.located));
    }
  }
  for (const auto& c : pod.containers) {
    ContainerAllocation ca;
    ca.container = c.name;
    ca.node = pod.node;
    std::vector<const Located*> mine;
    std::set<std::pair<std::string, uint32_t>> taken;
    for (const auto& use : c.uses) {
      const ClaimState& st = claims[use.claim];
      if (st.claim == nullptr) continue;
      if (std::find(ca.claims.begin(), ca.claims.end(), use.claim) == ca.claims.end()) ca.claims.push_back(use.claim);
      for (uint32_t i = 0; i < st.claim->results.size(); ++i) {
        if (!use.request.empty() && !Names(use.request, st.claim->results[i].request)) continue;
        if (st.located[i].device.kind == DeviceKind::kOther) continue;
        if (taken.insert({use.claim, i}).second) mine.push_back(&st.located[i]);
      }
    }
    const auto gpus = DistinctGpus(mine);
    if (gpus.empty()) continue;
    ca.gpus = static_cast<uint32_t>(gpus.size());
    std::vector<const Located*> others, cpus;
    for (const auto* l : mine) {
      ca.devices.push_back(l->device);
      if (l->device.kind != DeviceKind::kGpu) others.push_back(l);
      if (l->device.kind == DeviceKind::kCpu) cpus.push_back(l);
    }
    std::vector<std::string> roots;
    ca.nvlink = AllLinked(gpus);
    ca.one_root = OneRoot(gpus, &roots);
    ca.one_numa = CommonNuma(gpus, &ca.gpu_numa);
    if (ca.gpus == 1) {
      ca.alignment = Alignment::kSingle;
    } else if (ca.nvlink == Proof::kYes) {
      ca.alignment = Alignment::kNvlink;
    } else if (ca.one_root == Proof::kYes) {
      ca.alignment = Alignment::kPcieRoot;
    } else if (ca.one_numa == Proof::kYes) {
      ca.alignment = Alignment::kNuma;
    } else if (ca.nvlink == Proof::kNo && ca.one_root == Proof::kNo && ca.one_numa == Proof::kNo) {
      ca.alignment = Alignment::kNone;
    } else {
      ca.alignment = Alignment::kUnknown;
    }
    if (!cpus.empty()) {
      CommonNuma(cpus, &ca.cpu_numa);
      ca.cpus_with_gpus = ca.cpu_numa.empty() ? Proof::kUnknown : Proof::kYes;
      for (const auto* g : gpus) {
        if (ca.cpu_numa.empty() || ca.cpus_with_gpus == Proof::kNo) break;
        const auto& n = g->device.numa;
        bool shares = false;
        for (uint32_t x : n) shares = shares || std::binary_search(ca.cpu_numa.begin(), ca.cpu_numa.end(), x);
        if (n.empty()) {
          ca.cpus_with_gpus = Proof::kUnknown;
        } else if (!shares) {
          ca.cpus_with_gpus = Proof::kNo;
        }
      }
    }
    // The origin of the claims holding its GPUs: the scheduler's, else draguard's, else the user's.
    for (const auto* g : gpus) {
      const ClaimAllocation* claim = claims[g->device.claim].claim;
      ClaimOrigin o = claim->origin;
      // The annotation proves nothing alone: kube-scheduler's claim is the one the Pod's status
      // (written through pods/status, which tenants cannot) names.
      if (o == ClaimOrigin::kScheduler && claim->name != pod.extended_claim) o = ClaimOrigin::kUser;
      if (o == ClaimOrigin::kUser && pod.generated.count(claim->name) != 0) o = ClaimOrigin::kDraguard;
      if (o == ClaimOrigin::kScheduler || (o == ClaimOrigin::kDraguard && ca.origin == ClaimOrigin::kUser)) ca.origin = o;
    }
    // Promises of its claims that cover one of its devices and are not kept.
    for (const auto& name : ca.claims) {
      const ClaimState& st = claims[name];
      for (std::size_t k = 0; k < st.claim->promises.size(); ++k) {
        if (!st.broken[k]) continue;
        bool mine_too = false;
        for (uint32_t i : st.claim->promises[k].results) mine_too = mine_too || taken.count({name, i}) != 0;
        if (mine_too) ca.broken.push_back({name, *st.broken[k]});
      }
    }
    ca.message = Describe(ca, gpus, roots, others);
    if (!ca.broken.empty()) {
      ca.result = "fail";
      for (const auto& b : ca.broken) ca.message += "; " + b.message;
    } else if (ca.origin == ClaimOrigin::kScheduler && ca.gpus >= 2 && ca.one_numa == Proof::kNo &&
               ca.nvlink != Proof::kYes) {
      ca.result = "warn";
      ca.message += "; kube-scheduler allocated them for the container's extended resources with no constraint: "
                    "let draguard convert the Pod, or give it a claim that aligns its GPUs";
    } else if (ca.cpus_with_gpus == Proof::kNo) {
      ca.result = "warn";
      ca.message += "; its GPUs are on NUMA node" + std::string(ca.gpu_numa.size() > 1 ? "s " : " ") +
                    JoinNumbers(ca.gpu_numa) + ", its CPUs on no common one: put GPUs and CPUs in one claim with "
                    "matchAttribute resource.kubernetes.io/numaNode";
    } else {
      ca.result = "pass";
    }
    out.containers.push_back(std::move(ca));
  }
  return out;
}

// ---- The join -----------------------------------------------------------------------------------

AllocationJoin::AllocationJoin(const topology::Snapshot* topology, AllocationLimits limits)
    : topology_(topology), limits_(limits) {}

void AllocationJoin::AddClaim(const Json& claim) {
  auto c = ReadAllocatedClaim(claim);
  if (!c) return;
  std::string key = c->namespace_ + "/" + c->name;
  auto it = claims_.find(key);
  if (it == claims_.end() && claims_.size() >= limits_.max_claims) {
    ++stats_.dropped;
    return;
  }
  if (claims_complete_) {
    for (const auto& r : c->results) Name(DeviceKey(r.driver, r.pool, r.device));
  }
  if (it == claims_.end()) {
    claims_.emplace(std::move(key), std::move(*c));
  } else {
    it->second = std::move(*c);
  }
  stats_.claims = claims_.size();
}

void AllocationJoin::AddSlice(const Json& slice) {
  auto s = ReadResourceSlice(slice);
  if (!s) return;
  Pool& pool = pools_[PoolKey(s->driver, s->pool)];
  if (s->generation < pool.generation) return;  // consumers use only the newest generation
  if (s->generation > pool.generation) pool = {s->generation, s->slice_count, 0};
  ++pool.seen;
  for (auto& [name, device] : s->devices) {
    std::string key = DeviceKey(s->driver, s->pool, name);
    auto it = devices_.find(key);
    if (it == devices_.end()) {
      if (claims_complete_) continue;  // no claim allocated it
      if (devices_.size() >= limits_.max_devices) {
        ++stats_.dropped;
        continue;
      }
      devices_.emplace(std::move(key), Held{std::move(device), true});
    } else if (!it->second.published || device.generation >= it->second.device.generation) {
      it->second = Held{std::move(device), true};
    }
  }
  stats_.devices = devices_.size();
}

bool AllocationJoin::Name(std::string key) {
  if (devices_.count(key) != 0) return true;
  if (devices_.size() >= limits_.max_devices) {
    ++stats_.dropped;
    return false;
  }
  devices_.emplace(std::move(key), Held{});
  return true;
}

void AllocationJoin::ClaimsComplete() {
  claims_complete_ = true;
  // Devices held before that no claim names are not needed; the ones named wait for their slice.
  std::unordered_set<std::string> named;
  const bool prune = !devices_.empty();
  for (const auto& [key, c] : claims_) {
    for (const auto& r : c.results) {
      std::string k = DeviceKey(r.driver, r.pool, r.device);
      if (prune) named.insert(k);
      Name(std::move(k));
    }
  }
  if (prune) {
    for (auto it = devices_.begin(); it != devices_.end();) {
      it = named.count(it->first) == 0 ? devices_.erase(it) : std::next(it);
    }
  }
  stats_.devices = devices_.size();
}

void AllocationJoin::InputsComplete() {
  if (!claims_complete_) ClaimsComplete();
  inputs_complete_ = true;
}

bool AllocationJoin::Ready(const PodClaims& pod) const {
  if (inputs_complete_) return true;
  for (const auto& c : pod.containers) {
    for (const auto& use : c.uses) {
      auto it = claims_.find(pod.namespace_ + "/" + use.claim);
      if (it == claims_.end()) return false;
      for (const auto& r : it->second.results) {
        auto p = pools_.find(PoolKey(r.driver, r.pool));
        if (p == pools_.end() || p->second.seen < p->second.expected) return false;
      }
    }
  }
  return true;
}

PodAllocation AllocationJoin::Analyze(const PodClaims& pod) const {
  AllocationLookup lookup;
  lookup.topology = topology_;
  lookup.claim = [this](std::string_view ns, std::string_view name) -> const ClaimAllocation* {
    std::string key(ns);
    key.push_back('/');
    key.append(name);
    auto it = claims_.find(key);
    return it == claims_.end() ? nullptr : &it->second;
  };
  lookup.device = [this](std::string_view driver, std::string_view pool,
                         std::string_view device) -> const SliceDevice* {
    auto it = devices_.find(DeviceKey(driver, pool, device));
    return it == devices_.end() || !it->second.published ? nullptr : &it->second.device;
  };
  return AnalyzePod(pod, lookup);
}

void AllocationJoin::AddPod(const Json& pod, const Sink& sink, const std::string& where,
                            std::string_view default_namespace) {
  auto p = ReadPodClaims(pod, default_namespace);
  if (!p) return;
  if (Ready(*p) || waiting_.size() >= limits_.max_waiting_pods) {
    if (!Ready(*p)) ++stats_.dropped;  // over the cap: analysed with what is known now
    PodAllocation a = Analyze(*p);
    a.where = where;
    if (!a.containers.empty() || !a.missing.empty()) sink(std::move(a));
    return;
  }
  waiting_.push_back({std::move(*p), where});
  stats_.waiting = waiting_.size();
  stats_.peak_waiting = std::max(stats_.peak_waiting, waiting_.size());
}

void AllocationJoin::Finish(const Sink& sink) {
  for (auto& w : waiting_) {
    PodAllocation a = Analyze(w.pod);
    a.where = std::move(w.where);
    if (!a.containers.empty() || !a.missing.empty()) sink(std::move(a));
  }
  waiting_.clear();
  waiting_.shrink_to_fit();
  stats_.waiting = 0;
}

}  // namespace draguard::audit
