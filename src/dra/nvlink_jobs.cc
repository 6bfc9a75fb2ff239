#include "draguard/dra/nvlink_jobs.h"

#include <charconv>
#include <memory>
#include <set>

#include "draguard/topology/model.h"
#include "draguard/topology/snapshot.h"

namespace draguard::dra {
namespace {

using admission::Json;

constexpr std::string_view kCliqueKey = topology::kCliqueLabel;

// A label or annotation value of `metadata`, "" when absent or not a string.
std::string MetaValue(const Json* metadata, const char* map, const char* key) {
  return StringMember(Member(metadata, map), key);
}

// A decimal count from a label or annotation value; 0 when it is not one.
int64_t Count(std::string_view text) {
  int64_t v = 0;
  if (text.empty()) return 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  return (ec == std::errc() && end == text.data() + text.size() && v > 0) ? v : 0;
}

// A non-negative integer member, `fallback` when absent; -1 when present but not such an integer.
int64_t IntMember(const Json* obj, const char* key, int64_t fallback) {
  const Json* v = Member(obj, key);
  if (v == nullptr || v->is_null()) return fallback;
  if (v->is_number_unsigned()) return v->get<uint64_t>() > (1ull << 40) ? -1 : static_cast<int64_t>(v->get<uint64_t>());
  if (v->is_number_integer()) return v->get<int64_t>() < 0 ? -1 : v->get<int64_t>();
  return -1;
}

// The value at JSON Pointer `pointer` of `root`, or null (also for a malformed pointer).
const Json* At(const Json& root, std::string_view pointer) {
  try {
    const Json::json_pointer p{std::string(pointer)};
    return root.contains(p) ? &root.at(p) : nullptr;
  } catch (const Json::exception&) {
    return nullptr;
  }
}

// `pointer` without its suffix `tail`, or nullopt when it does not end so.
std::optional<std::string_view> Strip(std::string_view pointer, std::string_view tail) {
  if (pointer.size() < tail.size() || pointer.substr(pointer.size() - tail.size()) != tail) return std::nullopt;
  return pointer.substr(0, pointer.size() - tail.size());
}

// Product of counts, 0 when one is unreadable (-1), capped far above any cluster.
int64_t Times(int64_t a, int64_t b) {
  if (a < 0 || b < 0) return -1;
  constexpr int64_t kCap = int64_t{1} << 30;
  return (a > kCap || b > kCap || a * b > kCap) ? kCap : a * b;
}

// The kind of multi-node job a reviewed object is, "" when none.
std::string JobKind(const admission::AdmissionRequest& request) {
  const auto& k = request.kind;
  if (k.group == "leaderworkerset.x-k8s.io" && k.kind == "LeaderWorkerSet") return k.kind;
  if (k.group == "jobset.x-k8s.io" && k.kind == "JobSet") return k.kind;
  if (k.group == "batch" && k.kind == "Job") return k.kind;
  if (k.group == "kubeflow.org" && k.kind.size() > 3 && k.kind.substr(k.kind.size() - 3) == "Job") return k.kind;
  if (k.group == "ray.io" && (k.kind == "RayCluster" || k.kind == "RayJob" || k.kind == "RayService")) return k.kind;
  if (k.group == "batch.volcano.sh" && k.kind == "Job") return "Volcano Job";
  return "";
}

// The JSON Pointer of a Ray worker group's spec in a Ray object: "/spec/workerGroupSpecs/<i>" or
// under rayClusterSpec / rayClusterConfig.
std::optional<std::string_view> RayWorkerGroup(std::string_view spec_pointer) {
  auto group = Strip(spec_pointer, "/template/spec");
  if (!group) return std::nullopt;
  for (std::string_view prefix : {"/spec/workerGroupSpecs/", "/spec/rayClusterSpec/workerGroupSpecs/",
                                  "/spec/rayClusterConfig/workerGroupSpecs/"}) {
    if (group->substr(0, prefix.size()) == prefix && group->find('/', prefix.size()) == std::string_view::npos) {
      return group;
    }
  }
  return std::nullopt;
}

bool RequiredPodAffinityOnClique(const Json* spec) {
  const Json* terms = Member(Member(Member(spec, "affinity"), "podAffinity"), "requiredDuringSchedulingIgnoredDuringExecution");
  if (terms == nullptr || !terms->is_array()) return false;
  for (const auto& t : *terms) {
    if (StringMember(&t, "topologyKey") == kCliqueKey) return true;
  }
  return false;
}

// Every required nodeAffinity term pins the clique label to one value.
bool NodeAffinityPinsClique(const Json* spec) {
  const Json* terms = Member(Member(Member(Member(spec, "affinity"), "nodeAffinity"),
                                    "requiredDuringSchedulingIgnoredDuringExecution"),
                             "nodeSelectorTerms");
  if (terms == nullptr || !terms->is_array() || terms->empty()) return false;
  for (const auto& term : *terms) {
    bool pinned = false;
    const Json* exprs = Member(&term, "matchExpressions");
    if (exprs != nullptr && exprs->is_array()) {
      for (const auto& e : *exprs) {
        const Json* values = Member(&e, "values");
        pinned = pinned || (StringMember(&e, "key") == kCliqueKey && StringMember(&e, "operator") == "In" &&
                            values != nullptr && values->is_array() && values->size() == 1);
      }
    }
    if (!pinned) return false;
  }
  return true;
}

}  // namespace

bool IsComputeDomainChannelClass(std::string_view device_class) {
  return device_class == "compute-domain-default-channel.nvidia.com" || device_class == "compute-domain-channel.nvidia.com";
}

bool IsGeneratedChannelTemplateName(std::string_view name) {
  constexpr std::string_view kPrefix = "draguard-cd-", kSuffix = "-channel";
  if (name.size() != kPrefix.size() + 20 + kSuffix.size() || name.substr(0, kPrefix.size()) != kPrefix ||
      name.substr(name.size() - kSuffix.size()) != kSuffix) {
    return false;
  }
  for (char c : name.substr(kPrefix.size(), 20)) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string NvlinkJob::Key() const { return kind + "/" + name + (unit.empty() ? "" : "/" + unit); }

std::string NvlinkJob::Describe() const {
  return kind + " \"" + name + "\"" + (unit.empty() ? "" : " (" + unit + ")");
}

std::optional<NvlinkJob> PodNvlinkJob(const Json* pod_metadata) {
  auto label = [&](const char* key) { return MetaValue(pod_metadata, "labels", key); };
  auto annotation = [&](const char* key) { return MetaValue(pod_metadata, "annotations", key); };
  NvlinkJob job;
  if (std::string lws = label("leaderworkerset.sigs.k8s.io/name"); !lws.empty()) {
    job.kind = "LeaderWorkerSet";
    job.api_version = "leaderworkerset.x-k8s.io/v1";
    job.name = lws;
    const std::string group = label("leaderworkerset.sigs.k8s.io/group-index");
    // The leader's group index is set by LeaderWorkerSet's own Pod webhook; its group key by both.
    const std::string key = label("leaderworkerset.sigs.k8s.io/group-key");
    job.unit = !group.empty() ? "group " + group : (!key.empty() ? "group " + key : "");
    job.pods = Count(annotation("leaderworkerset.sigs.k8s.io/size"));
    if (job.pods == 1) return std::nullopt;
    return job;
  }
  if (std::string js = label("jobset.sigs.k8s.io/jobset-name"); !js.empty()) {
    job.kind = "JobSet";
    job.api_version = "jobset.x-k8s.io/v1alpha2";
    job.name = js;
    const int64_t jobs = Count(label("jobset.sigs.k8s.io/global-replicas"));
    job.pods = jobs > 1 ? jobs : 0;
    return job;
  }
  if (std::string tj = label("training.kubeflow.org/job-name"); !tj.empty()) {
    const std::string op = label("training.kubeflow.org/operator-name");
    if (label("training.kubeflow.org/job-role") == "launcher") return std::nullopt;
    job.kind = op == "mpi-operator"           ? "MPIJob"
               : op == "pytorchjob-controller" ? "PyTorchJob"
               : op == "tfjob-controller"      ? "TFJob"
               : op == "paddlejob-controller"  ? "PaddleJob"
               : op == "xgboostjob-controller" ? "XGBoostJob"
                                               : "training job";
    job.api_version = op == "mpi-operator" ? "kubeflow.org/v2beta1" : "kubeflow.org/v1";
    job.name = tj;
    return job;
  }
  if (!label("batch.kubernetes.io/job-completion-index").empty()) {
    std::string name = label("batch.kubernetes.io/job-name");
    if (name.empty()) name = label("job-name");
    if (name.empty()) return std::nullopt;
    job.kind = "Job";
    job.api_version = "batch/v1";
    job.name = name;
    return job;
  }
  if (label("ray.io/node-type") == "worker" && !label("ray.io/cluster").empty()) {
    job.kind = "RayCluster";
    job.api_version = "ray.io/v1";
    job.name = label("ray.io/cluster");
    const std::string group = label("ray.io/group");
    const std::string replica = label("ray.io/worker-group-replica-name");
    job.unit = replica.empty() ? "" : "worker group \"" + group + "\" replica \"" + replica + "\"";
    return job;
  }
  return std::nullopt;
}

int64_t TemplateUnitPods(const admission::AdmissionRequest& request, std::string_view spec_pointer) {
  const std::string kind = JobKind(request);
  if (kind.empty()) return -1;
  const Json& obj = request.object;
  if (kind == "LeaderWorkerSet") {
    const Json* lwt = At(obj, "/spec/leaderWorkerTemplate");
    const int64_t size = IntMember(lwt, "size", 1);
    if (size < 0) return -1;
    if (spec_pointer == "/spec/leaderWorkerTemplate/leaderTemplate/spec") return 1;
    if (spec_pointer == "/spec/leaderWorkerTemplate/workerTemplate/spec") {
      return Member(lwt, "leaderTemplate") != nullptr ? size - 1 : size;
    }
    return -1;
  }
  if (kind == "JobSet") {
    auto job_spec = Strip(spec_pointer, "/template/spec");  // "/spec/replicatedJobs/<i>/template/spec"
    auto rj = job_spec ? Strip(*job_spec, "/template/spec") : std::nullopt;
    if (!rj) return -1;
    return Times(IntMember(At(obj, *rj), "replicas", 1), IntMember(At(obj, *job_spec), "parallelism", 1));
  }
  if (kind == "Job") {
    if (spec_pointer != "/spec/template/spec" || StringMember(Member(&obj, "spec"), "completionMode") != "Indexed") return -1;
    return IntMember(Member(&obj, "spec"), "parallelism", 1);
  }
  if (kind.rfind("Ray", 0) == 0) {
    auto group = RayWorkerGroup(spec_pointer);
    if (!group) return -1;
    const Json* g = At(obj, *group);
    return Times(IntMember(g, "replicas", 1), IntMember(g, "numOfHosts", 1));
  }
  // Kubeflow *ReplicaSpecs.<type>.template and Volcano tasks[].template: replicas beside the template.
  auto replica_spec = Strip(spec_pointer, "/template/spec");
  if (!replica_spec) return -1;
  return IntMember(At(obj, *replica_spec), "replicas", 1);
}

std::optional<NvlinkJob> WorkloadNvlinkJob(const admission::AdmissionRequest& request, std::string_view spec_pointer) {
  if (TemplateUnitPods(request, spec_pointer) < 0) return std::nullopt;
  NvlinkJob job;
  job.kind = JobKind(request);
  job.api_version = request.kind.group.empty() ? request.kind.version : request.kind.group + "/" + request.kind.version;
  job.name = StringMember(Member(&request.object, "metadata"), "name");
  if (job.name.empty()) job.name = request.name;
  if (job.kind == "LeaderWorkerSet") job.unit = "each group";
  if (auto group = RayWorkerGroup(spec_pointer)) {
    const std::string name = StringMember(At(request.object, *group), "groupName");
    job.unit = "worker group \"" + name + "\"";
  }
  return job;
}

std::string KeptInOneClique(const Json* spec, const Json* pod_metadata, const Json* object_metadata) {
  if (RequiredPodAffinityOnClique(spec)) return "a required podAffinity on " + std::string(kCliqueKey);
  const Json* selector = Member(Member(spec, "nodeSelector"), std::string(kCliqueKey).c_str());
  if (selector != nullptr && selector->is_string()) return "nodeSelector " + std::string(kCliqueKey);
  if (NodeAffinityPinsClique(spec)) return "a required nodeAffinity on one " + std::string(kCliqueKey);
  for (const Json* meta : {pod_metadata, object_metadata}) {
    for (const char* key : {"leaderworkerset.sigs.k8s.io/exclusive-topology", "alpha.jobset.sigs.k8s.io/exclusive-topology",
                            "kueue.x-k8s.io/podset-required-topology"}) {
      if (MetaValue(meta, "annotations", key) == kCliqueKey) return "the annotation " + std::string(key);
    }
  }
  return "";
}

const NvlinkDomains& NvlinkDomainsOf(const topology::Snapshot& snapshot) {
  auto memo = snapshot.Memo("dra/nvlink-domains", [&]() -> std::shared_ptr<const void> {
    std::map<std::string_view, std::size_t> nodes;
    for (const auto& n : snapshot.nodes()) {
      if (!n->nvlink_clique.empty()) ++nodes[n->nvlink_clique];
    }
    auto d = std::make_shared<NvlinkDomains>();
    d->cliques = nodes.size();
    for (const auto& [clique, count] : nodes) {
      d->largest = std::max(d->largest, count);
      d->clique_nodes += count;
    }
    return d;
  });
  return *static_cast<const NvlinkDomains*>(memo.get());
}

}  // namespace draguard::dra
