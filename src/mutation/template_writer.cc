// The claim generator's template writer: one ResourceClaimTemplate per converted Pod, written from
// the planner's placements (planner.h), named by a hash of its content and remembered per
// topology snapshot.
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "draguard/dra/satisfiability.h"
#include "draguard/mutation/mutation.h"
#include "draguard/topology/snapshot.h"
#include "internal.h"
#include "planner.h"

namespace draguard::mutation {
namespace {

using admission::Json;

constexpr const char* kPcieRootAttr = "resource.kubernetes.io/pcieRoot";
constexpr const char* kNumaNodeAttr = "resource.kubernetes.io/numaNode";

// Templates generated on one snapshot, by MemoKey; kept with the snapshot (Snapshot::Memo).
class TemplateMemo {
 public:
  std::shared_ptr<const GeneratedTemplate> Find(const std::string& key) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = templates_.find(key);
    return it == templates_.end() ? nullptr : it->second;
  }
  void Remember(const std::string& key, const GeneratedTemplate& t) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (templates_.size() >= 4096) templates_.clear();  // bounded; rebuilt on demand
    templates_.emplace(key, std::make_shared<const GeneratedTemplate>(t));
  }

 private:
  mutable std::mutex mu_;
  mutable std::map<std::string, std::shared_ptr<const GeneratedTemplate>> templates_;  // guarded by mu_
};

std::shared_ptr<const TemplateMemo> MemoOf(const topology::Snapshot& snap) {
  return std::static_pointer_cast<const TemplateMemo>(
      snap.Memo("mutation.templates", [] { return std::make_shared<const TemplateMemo>(); }));
}

// Everything GenerateTemplate reads besides the snapshot: the policy (by its fingerprint, so every
// field counts), the namespace and the profile. Empty, so nothing is remembered, for a policy
// without a fingerprint.
std::string MemoKey(const ClaimProfile& profile, std::string_view ns, const policy::Policy& policy) {
  if (policy.fingerprint.empty()) return "";
  std::string k;
  auto add = [&k](std::string_view v) {
    k += std::to_string(v.size());
    k += ':';
    k += v;
  };
  add(policy.fingerprint);
  add(ns);
  for (const auto& e : profile.entries) {
    const RequestProfile& p = e.profile;
    add(e.request);
    add(std::to_string(static_cast<int>(p.kind)) + "/" + std::to_string(p.count) + "/" + std::to_string(p.mps_threads) +
        (p.latency_sensitive ? "/ls" : "/-"));
    add(p.mig_profile);
    add(p.memory);
    add(p.product);
    add(p.mps_memory);
    add(std::to_string(p.cpus));
  }
  add(profile.nic ? "nic" : "-");
  add(profile.interconnect);
  return k;
}

// The RDMA NIC request next to a full-GPU request.
Json NicRequest(const std::string& name, const policy::Policy& policy) {
  return {{"name", name},
          {"exactly",
           {{"deviceClassName", policy.mutation.nic.device_class},
            {"allocationMode", "ExactCount"},
            {"count", 1},
            {"selectors", Json::array({{{"cel", {{"expression", internal::NicSelector(policy)}}}}})}}}};
}

// The GPU request: `exactly` (with the only alternative's restriction), or one firstAvailable
// subrequest per planned alternative.
Json GpuRequest(const std::string& name, Json exactly, const Json& selectors, const internal::Plan& plan) {
  if (plan.alternatives.size() <= 1) {
    Json sel = selectors;
    if (!plan.alternatives.empty() && !plan.alternatives[0].restriction.empty()) {
      sel.push_back({{"cel", {{"expression", plan.alternatives[0].restriction}}}});
    }
    exactly["selectors"] = sel;
    return {{"name", name}, {"exactly", exactly}};
  }
  Json alts = Json::array();
  for (const auto& alt : plan.alternatives) {
    Json sub = exactly;
    sub["name"] = alt.name;
    Json sel = selectors;
    if (!alt.restriction.empty()) sel.push_back({{"cel", {{"expression", alt.restriction}}}});
    sub["selectors"] = sel;
    alts.push_back(sub);
  }
  return {{"name", name}, {"firstAvailable", alts}};
}

// The MPS sharing config of a shared GPU request.
Json MpsConfig(const std::string& request, const RequestProfile& p) {
  return {{"requests", {request}},
          {"opaque",
           {{"driver", "gpu.nvidia.com"},
            {"parameters",
             {{"apiVersion", "resource.nvidia.com/v1beta1"},
              {"kind", "GpuConfig"},
              {"sharing",
               {{"strategy", "MPS"},
                {"mpsConfig",
                 {{"defaultActiveThreadPercentage", p.mps_threads},
                  {"defaultPinnedDeviceMemoryLimit", p.mps_memory}}}}}}}}}};
}

// The placement in words, appended to the profile's description.
std::string PlacementWords(const internal::Plan& plan, bool nic) {
  const std::string with_nic = nic ? " with 1 RDMA NIC" : "";
  std::string first;
  const internal::Alternative* a = plan.alternatives.empty() ? nullptr : &plan.alternatives.front();
  switch (plan.placement) {
    case Placement::kNvlink:
      first = a != nullptr && a->constraint ? ", NVLink-connected on one PCIe root" + with_nic : ", NVLink-connected";
      break;
    case Placement::kPcieRoot:
      first = nic ? ", same PCIe root as 1 RDMA NIC" : ", same PCIe root";
      break;
    case Placement::kNuma:
      first = ", NUMA-local";
      break;
    case Placement::kUnaligned:
      return ", unaligned";
    case Placement::kNone:
      return nic ? " + 1 RDMA NIC" : "";
  }
  if (plan.alternatives.size() > 1) {
    std::set<Placement> classes;
    for (const auto& alt : plan.alternatives) classes.insert(alt.placement);
    if (classes.count(Placement::kPcieRoot) && plan.placement != Placement::kPcieRoot) first += ", else same PCIe root";
    if (classes.count(Placement::kNuma) && plan.placement != Placement::kNuma) first += ", else NUMA-local";
    first += ", " + std::to_string(plan.alternatives.size()) + " alternatives first available";
  }
  return first;
}

std::string Join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? separator : "") + items[i];
  return out;
}

// Writes one template, entry by entry, from the planner's placements.
class Writer {
 public:
  Writer(const ClaimProfile& profile, const policy::Policy& policy, const internal::View& view)
      : profile_(profile), policy_(policy), view_(view) {}

  // Adds the requests, constraints and configs of `entry`.
  Status Add(const ClaimProfile::Entry& entry) {
    RequestProfile p = entry.profile;
    std::string note;
    if (p.kind != RequestProfile::Kind::kMig && !p.memory.empty()) {
      p.memory = internal::ResolveMemoryFloor(p.memory, view_.memories, &note);
      if (!note.empty()) out_.notes.push_back("request \"" + entry.request + "\": " + note);
    }
    std::string words = internal::DescribeProfile(p);
    Json exactly = {{"allocationMode", "ExactCount"}, {"count", p.count}};
    Placement placement = Placement::kNone;
    if (p.kind == RequestProfile::Kind::kMig) {
      placement = AddMig(entry.request, p, std::move(exactly), words);
    } else {
      auto planned = AddGpus(entry.request, p, std::move(exactly), words);
      if (!planned.ok()) return planned.status();
      placement = *planned;
    }
    out_.placements.push_back(placement);
    words_.push_back(profile_.entries.size() == 1 ? words : entry.request + ": " + words);
    return Status::Ok();
  }

  // The template in `namespace_name`, once every entry is added.
  Result<GeneratedTemplate> Finish(std::string_view namespace_name) {
    DRAGUARD_RETURN_IF_ERROR(internal::ResolveRestriction(where_, view_, policy_, &out_));
    Json devices = {{"requests", requests_}};
    if (!constraints_.empty()) devices["constraints"] = constraints_;
    if (!configs_.empty()) devices["config"] = configs_;
    out_.description = Join(words_, "; ");
    Json object = {{"apiVersion", "resource.k8s.io/v1"},
                   {"kind", "ResourceClaimTemplate"},
                   {"metadata",
                    {{"labels", {{"app.kubernetes.io/managed-by", "draguard"}}},
                     {"annotations", {{std::string(kProfileAnnotation), out_.description}}}}},
                   {"spec", {{"metadata", ClaimMetadata()}, {"spec", {{"devices", devices}}}}}};
    // Content address: everything but name and namespace (nlohmann objects dump with sorted keys).
    out_.name = std::string(kNamePrefix) + internal::Sha256Hex(object.dump(), 10);
    object["metadata"]["name"] = out_.name;
    if (!namespace_name.empty()) object["metadata"]["namespace"] = std::string(namespace_name);
    out_.object = std::move(object);
    return std::move(out_);
  }

 private:
  // A MIG entry: the profile's selector, on one PCIe root when it asks for several devices.
  Placement AddMig(const std::string& request, const RequestProfile& p, Json exactly, std::string& words) {
    const auto& classes = policy_.device_classes.mig;
    exactly["deviceClassName"] = classes.empty() ? "mig.nvidia.com" : classes[0];
    Placement placement = Placement::kNone;
    if (p.count >= 2) {
      placement = Placement::kPcieRoot;
      constraints_.push_back({{"requests", {request}}, {"matchAttribute", kPcieRootAttr}});
      words += ", same PCIe root";
    }
    exactly["selectors"] = Json::array({{{"cel", {{"expression", internal::MigSelector(p)}}}}});
    requests_.push_back({{"name", request}, {"exactly", exactly}});
    return placement;
  }

  // A full-GPU or shared entry, placed by the planner, with its NIC and MPS config.
  Result<Placement> AddGpus(const std::string& request, const RequestProfile& p, Json exactly, std::string& words) {
    const auto& classes = policy_.device_classes.gpu;
    exactly["deviceClassName"] = !p.device_class.empty() ? p.device_class
                                 : classes.empty()       ? std::string("gpu.nvidia.com")
                                                         : classes[0];
    const std::vector<std::string> texts = internal::GpuSelectors(p);
    Json selectors = Json::array();
    for (const auto& t : texts) selectors.push_back({{"cel", {{"expression", t}}}});
    gpus_ += p.count;
    const bool nic = profile_.nic && p.kind == RequestProfile::Kind::kGpu;
    const std::string who = "request \"" + request + "\" (" + words + ")";
    auto plan = internal::PlanEntry(who, p, nic, profile_.interconnect, texts, view_, policy_);
    if (!plan.ok()) return plan.status();
    if (!plan->note.empty()) out_.notes.push_back("request \"" + request + "\": " + plan->note);
    where_.Add(*plan);
    if (plan->rails) return AddRails(request, p, std::move(exactly), selectors, *plan, words);
    if (plan->parts > 1) return AddNumaParts(request, p, std::move(exactly), selectors, *plan, words);
    if (!plan->sockets.empty()) return AddSockets(request, p, std::move(exactly), selectors, *plan, words);
    requests_.push_back(GpuRequest(request, std::move(exactly), selectors, *plan));
    std::vector<std::string> covered = {request};
    if (nic) {
      requests_.push_back(NicRequest(request + "-nic", policy_));
      covered.push_back(request + "-nic");
    }
    for (const auto& alt : plan->alternatives) {
      if (!alt.constraint && !alt.numa_match) continue;
      Json reqs = covered;
      if (plan->alternatives.size() > 1) reqs[0] = request + "/" + alt.name;
      constraints_.push_back({{"requests", reqs}, {"matchAttribute", alt.numa_match ? kNumaNodeAttr : kPcieRootAttr}});
    }
    for (const auto& alt : plan->alternatives) nvlink_ = nvlink_ || alt.placement == Placement::kNvlink;
    words += PlacementWords(*plan, nic);
    AddCpus(request, nic ? WithNics({request}) : std::vector<std::string>{request}, p, words);
    if (p.kind == RequestProfile::Kind::kShared) configs_.push_back(MpsConfig(request, p));
    return plan->placement;
  }

  // Rails: one single-GPU request and one NIC request per GPU ("gpu-rail-0", "gpu-rail-0-nic",
  // ...), each pair on one PCIe root; the GPUs share the plan's restriction (NVLink) or one root.
  Result<Placement> AddRails(const std::string& request, const RequestProfile& p, Json exactly, const Json& selectors,
                             const internal::Plan& plan, std::string& words) {
    exactly["count"] = 1;
    Json gpus = Json::array();
    for (int64_t i = 0; i < p.count; ++i) {
      const std::string name = request + "-rail-" + std::to_string(i);
      internal::Plan one = plan;
      requests_.push_back(GpuRequest(name, exactly, selectors, one));
      requests_.push_back(NicRequest(name + "-nic", policy_));
      constraints_.push_back({{"requests", {name, name + "-nic"}}, {"matchAttribute", kPcieRootAttr}});
      gpus.push_back(name);
    }
    if (plan.alternatives[0].constraint) constraints_.push_back({{"requests", gpus}, {"matchAttribute", kPcieRootAttr}});
    nvlink_ = nvlink_ || plan.placement == Placement::kNvlink;
    out_.whole_claim = true;
    words += std::string(plan.placement == Placement::kNvlink ? ", NVLink-connected" : ", same PCIe root") +
             ", rails: 1 RDMA NIC per GPU on its PCIe root";
    std::vector<std::string> gpu_names;
    for (const auto& g : gpus) gpu_names.push_back(g.get<std::string>());
    if (plan.parts > 1 && p.cpus > 0) {
      // Rails split per NUMA node: rails [i*k, (i+1)*k) with "cpu-part-<i>" on their NUMA node.
      const auto parts = static_cast<int64_t>(plan.parts);
      const int64_t k = p.count / parts;
      for (int64_t i = 0; i < parts; ++i) {
        std::vector<std::string> part(gpu_names.begin() + i * k, gpu_names.begin() + (i + 1) * k);
        AddCpuRequest(request + "-part-" + std::to_string(i), WithNics(part), p.cpus / parts);
      }
      words += ", on " + std::to_string(parts) + " NUMA nodes: " + std::to_string(k) + " GPUs with their NICs and " +
               std::to_string(p.cpus / parts) + " CPUs on each";
      return plan.placement;
    }
    AddCpus(request, WithNics(gpu_names), p, words);
    return plan.placement;
  }

  // The GPU requests `gpus` and, when the NIC driver publishes resource.kubernetes.io/numaNode
  // (mutation.nic.numaAttribute: standard), their NIC requests ("<gpu>-nic"): what a CPU request's
  // numaNode constraint ties.
  std::vector<std::string> WithNics(std::vector<std::string> gpus) const {
    if (!profile_.nic || policy_.mutation.nic.numa_attribute != policy::NicNumaAttribute::kStandard) return gpus;
    const std::size_t n = gpus.size();
    for (std::size_t i = 0; i < n; ++i) gpus.push_back(gpus[i] + "-nic");
    return gpus;
  }

  // With CPUs in the claim (p.cpus, mutation.cpu): the CPU request "cpu" ("cpu-<i>" next to
  // "gpu-<i>") as dra-driver-cpu's mode wants it, tied to the GPU requests `gpus` by
  // matchAttribute resource.kubernetes.io/numaNode.
  void AddCpus(const std::string& request, const std::vector<std::string>& gpus, const RequestProfile& p,
               std::string& words) {
    if (p.cpus <= 0) return;
    AddCpuRequest(request, gpus, p.cpus);
    words += ", " + std::to_string(p.cpus) + " CPUs on their NUMA node";
  }

  // `cpus` CPUs as dra-driver-cpu's mode wants them: a count of devices (individual), or the
  // dra.cpu/cpu capacity of one grouped device.
  Json CpuDevices(int64_t cpus) const {
    Json exactly = {{"deviceClassName", policy_.mutation.cpu.device_class}, {"allocationMode", "ExactCount"}};
    if (policy_.mutation.cpu.mode == policy::CpuMode::kGrouped) {
      exactly["count"] = 1;
      exactly["capacity"] = {{"requests", {{"dra.cpu/cpu", std::to_string(cpus)}}}};
    } else {
      exactly["count"] = cpus;
    }
    return exactly;
  }

  // The CPU request that goes with GPU request `request` (`cpus` CPUs) and its numaNode
  // constraint over `gpus` and it.
  void AddCpuRequest(const std::string& request, const std::vector<std::string>& gpus, int64_t cpus) {
    const std::string name = CpuRequestName(request);
    requests_.push_back({{"name", name}, {"exactly", CpuDevices(cpus)}});
    Json tied = gpus;
    tied.push_back(name);
    constraints_.push_back({{"requests", tied}, {"matchAttribute", kNumaNodeAttr}});
  }

  // NUMA parts (plan.parts): per part "gpu-part-<i>" with its share of the GPUs and "cpu-part-<i>"
  // with its share of the CPUs, tied by numaNode; the GPUs are NVLink-connected on every shape
  // the Pod may use.
  Result<Placement> AddNumaParts(const std::string& request, const RequestProfile& p, Json exactly,
                                 const Json& selectors, const internal::Plan& plan, std::string& words) {
    const auto parts = static_cast<int64_t>(plan.parts);
    exactly["count"] = p.count / parts;
    exactly["selectors"] = selectors;
    for (int64_t i = 0; i < parts; ++i) {
      const std::string name = request + "-part-" + std::to_string(i);
      requests_.push_back({{"name", name}, {"exactly", exactly}});
      AddCpuRequest(name, {name}, p.cpus / parts);
    }
    nvlink_ = true;
    words += ", NVLink-connected, on " + std::to_string(parts) + " NUMA nodes: " + std::to_string(p.count / parts) +
             " GPUs with " + std::to_string(p.cpus / parts) + " CPUs on each";
    return plan.placement;
  }

  // Sockets (plan.sockets; Grace and POWER9, whose GPUs publish their own memory node as
  // resource.kubernetes.io/numaNode, which no CPU shares): GPU i is request "<request>-<i>" of one
  // device, the CPUs request "cpu"; each has one firstAvailable subrequest per socket ("numa-<k>")
  // that selects the socket's devices by numaNode (the GPUs' memory nodes, the CPUs' node). For
  // every two sockets a and b, a numaNode matchAttribute over "<gpu>/numa-a" and "cpu/numa-b", and
  // over "<gpu i>/numa-a" and "<gpu j>/numa-b": a constraint sees only the devices of the
  // subrequests chosen, so it holds while one socket is chosen (one device, or CPUs of one node)
  // and fails when two are (a GPU's memory node is no other socket's node). Every device of the
  // claim is then on one socket.
  Result<Placement> AddSockets(const std::string& request, const RequestProfile& p, Json exactly, const Json& selectors,
                               const internal::Plan& plan, std::string& words) {
    exactly["count"] = 1;
    auto on = [&](Json base, const std::vector<uint32_t>& nodes) {
      std::string list;
      for (uint32_t n : nodes) list += (list.empty() ? "" : ", ") + std::to_string(n);
      base["selectors"].push_back({{"cel", {{"expression", std::string("'numaNode' in device.attributes['resource.kubernetes.io'] && "
                                                                        "device.attributes['resource.kubernetes.io'].numaNode in [") +
                                                                list + "]"}}}});
      return base;
    };
    auto sub = [](std::size_t k) { return "numa-" + std::to_string(k + 1); };
    std::vector<std::string> gpus;
    for (int64_t i = 0; i < p.count; ++i) {
      const std::string name = request + "-" + std::to_string(i);
      Json alternatives = Json::array();
      for (std::size_t k = 0; k < plan.sockets.size(); ++k) {
        Json alt = exactly;
        alt["selectors"] = selectors;
        alt = on(std::move(alt), plan.sockets[k].memory_nodes);
        alt["name"] = sub(k);
        alternatives.push_back(std::move(alt));
      }
      requests_.push_back({{"name", name}, {"firstAvailable", std::move(alternatives)}});
      gpus.push_back(name);
    }
    const std::string cpu = CpuRequestName(request);
    const Json cpu_exactly = CpuDevices(p.cpus);
    Json cpu_alternatives = Json::array();
    for (std::size_t k = 0; k < plan.sockets.size(); ++k) {
      Json alt = on(cpu_exactly, {plan.sockets[k].cpu_node});
      alt["name"] = sub(k);
      cpu_alternatives.push_back(std::move(alt));
    }
    requests_.push_back({{"name", cpu}, {"firstAvailable", std::move(cpu_alternatives)}});
    for (std::size_t a = 0; a < plan.sockets.size(); ++a) {
      for (std::size_t b = 0; b < plan.sockets.size(); ++b) {
        if (a == b) continue;
        for (std::size_t i = 0; i < gpus.size(); ++i) {
          constraints_.push_back({{"requests", {gpus[i] + "/" + sub(a), cpu + "/" + sub(b)}}, {"matchAttribute", kNumaNodeAttr}});
        }
        for (std::size_t i = 0; i < gpus.size(); ++i) {
          for (std::size_t j = i + 1; j < gpus.size(); ++j) {
            constraints_.push_back(
                {{"requests", {gpus[i] + "/" + sub(a), gpus[j] + "/" + sub(b)}}, {"matchAttribute", kNumaNodeAttr}});
          }
        }
      }
    }
    nvlink_ = nvlink_ || plan.placement == Placement::kNvlink;
    words += std::string(plan.placement == Placement::kNvlink ? ", NVLink-connected" : "") + ", with " +
             std::to_string(p.cpus) + " CPUs on one socket (" + std::to_string(plan.sockets.size()) +
             (plan.sockets.size() == 1 ? " socket fits" : " sockets fit") + ")";
    return plan.placement;
  }

  // The claims' metadata: draguard's label, the latency-sensitive class labels, the interconnect.
  Json ClaimMetadata() const {
    Json meta = {{"labels", {{"app.kubernetes.io/managed-by", "draguard"}}}};
    bool latency = false;
    for (const auto& e : profile_.entries) latency = latency || e.profile.latency_sensitive;
    if (latency) {
      for (const auto& [k, v] : policy_.latency_sensitive.labels) meta["labels"][k] = v;
    }
    if (gpus_ >= 2) meta["annotations"] = {{std::string(kInterconnectAnnotation), nvlink_ ? "nvlink" : "pcie"}};
    return meta;
  }

  const ClaimProfile& profile_;
  const policy::Policy& policy_;
  const internal::View& view_;
  GeneratedTemplate out_;
  Json requests_ = Json::array();
  Json constraints_ = Json::array();
  Json configs_ = Json::array();
  std::vector<std::string> words_;  // per entry, in words
  internal::NodeRestriction where_;
  bool nvlink_ = false;
  int64_t gpus_ = 0;
};

// The most devices one allocation of `claim` can take: the counts of its `exactly` requests plus,
// per firstAvailable request, its largest subrequest.
int64_t MaxDevices(const Json& claim) {
  int64_t total = 0;
  for (const auto& r : claim["spec"]["spec"]["devices"]["requests"]) {
    if (r.contains("exactly")) {
      total += r["exactly"].value("count", int64_t{1});
    } else if (r.contains("firstAvailable")) {
      int64_t most = 0;
      for (const auto& sub : r["firstAvailable"]) most = std::max(most, sub.value("count", int64_t{1}));
      total += most;
    }
  }
  return total;
}

// A claim allocates at most 32 devices (resource.k8s.io/v1 AllocationResultsMaxSize); CPUs in
// individual mode are one device each.
Status CheckDeviceLimit(const GeneratedTemplate& t, const ClaimProfile& profile, const policy::Policy& policy) {
  constexpr int64_t kMaxDevices = 32;
  const int64_t devices = MaxDevices(t.object);
  if (devices <= kMaxDevices) return Status::Ok();
  std::string why = "the claim (" + t.description + ") would allocate " + std::to_string(devices) +
                    " devices, more than the " + std::to_string(kMaxDevices) + " one claim can hold";
  int64_t cpus = 0;
  for (const auto& e : profile.entries) cpus += e.profile.cpus;
  if (cpus > 0 && policy.mutation.cpu.mode == policy::CpuMode::kIndividual) {
    why += " (in mutation.cpu individual mode each CPU is a device). Fix: ask for at most " +
           std::to_string(std::max<int64_t>(0, kMaxDevices - (devices - cpus))) +
           " CPUs, or run dra-driver-cpu in grouped mode (mutation.cpu.mode: grouped)";
  }
  return Status::FailedPrecondition(why);
}

}  // namespace

std::string CpuRequestName(std::string_view gpu_request) {
  if (gpu_request.rfind("gpu", 0) == 0) return "cpu" + std::string(gpu_request.substr(3));
  return std::string(gpu_request) + "-cpu";
}

const char* PlacementName(Placement placement) {
  switch (placement) {
    case Placement::kNone: return "none";
    case Placement::kPcieRoot: return "pcieRoot";
    case Placement::kNuma: return "numa";
    case Placement::kNvlink: return "nvlink";
    case Placement::kUnaligned: return "unaligned";
  }
  return "none";
}

Result<GeneratedTemplate> GenerateTemplate(const ClaimProfile& profile, std::string_view namespace_name,
                                           const policy::Policy& policy, const topology::Snapshot* topology) {
  if (profile.entries.empty()) return Status::InvalidArgument("nothing to convert");
  std::shared_ptr<const TemplateMemo> memo;
  std::string memo_key;
  if (topology != nullptr) {
    memo_key = MemoKey(profile, namespace_name, policy);
    if (!memo_key.empty()) memo = MemoOf(*topology);
    if (memo) {
      if (auto known = memo->Find(memo_key)) return *known;
    }
  }
  const std::shared_ptr<const internal::View> view = internal::GetView(topology, policy);
  Writer writer(profile, policy, *view);
  for (const auto& entry : profile.entries) DRAGUARD_RETURN_IF_ERROR(writer.Add(entry));
  auto out = writer.Finish(namespace_name);
  if (!out.ok()) return out;
  DRAGUARD_RETURN_IF_ERROR(CheckDeviceLimit(*out, profile, policy));
  // The generated claim must be satisfiable on the topology (as DG014 would judge it).
  if (topology != nullptr && !view->shapes.empty()) {
    auto report = dra::CheckSatisfiable(out->object, policy, *topology);
    if (report.verdict == dra::SatisfiabilityReport::Verdict::kUnsatisfiable) {
      return Status::FailedPrecondition("the generated claim (" + out->description +
                                        ") cannot be satisfied by any node: " + report.message);
    }
  }
  if (memo) memo->Remember(memo_key, *out);
  return out;
}

std::vector<GeneratedTemplate> RenderCatalogue(const policy::Policy& policy, const topology::Snapshot* topology,
                                               std::string_view namespace_name, std::vector<std::string>* errors) {
  std::vector<GeneratedTemplate> out;
  std::set<std::string> names;
  for (std::size_t i = 0; i < policy.mutation.catalogue.size(); ++i) {
    auto t = GenerateTemplate(ProfileFromCatalogue(policy.mutation.catalogue[i], policy), namespace_name, policy,
                              topology);
    if (!t.ok()) {
      if (errors != nullptr) {
        errors->push_back("mutation.catalogue[" + std::to_string(i) + "]: " + t.status().message());
      }
      continue;
    }
    if (names.insert(t->name).second) out.push_back(std::move(*t));
  }
  return out;
}

}  // namespace draguard::mutation
