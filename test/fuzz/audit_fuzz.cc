// Fuzzes the audit's input path: the streaming reader (YAML or JSON, Lists item by item), the
// judgement of every object it yields, and the allocation audit's join of its Pods, ResourceClaims
// and ResourceSlices on the g4dn.metal's topology, and the running jobs' NVLink clique spread (the node
// "g4dn" in one clique, "g4dn-b" in another), as `draguard audit` runs them.
#include <cstdint>
#include <sstream>
#include <string>

#include "draguard/audit/allocation.h"
#include "draguard/audit/judge.h"
#include "draguard/audit/nvlink_spread.h"
#include "draguard/audit/reader.h"
#include "draguard/engine/registry.h"
#include "draguard/policy/policy.h"
#include "draguard/topology/snapshot.h"
#include "draguard/webhook/reviewer.h"

namespace {

struct Env {
  Env() : registry(draguard::engine::DefaultRegistry()), reviewer(registry) {
    auto p = draguard::policy::ParsePolicy(draguard::policy::DefaultPolicyYaml());
    if (p.ok()) policy = *p;
    // Slices in the seeds name the node "g4dn" (draguard topology slices --node g4dn).
    auto t = draguard::topology::LoadSnapshot(std::string(DRAGUARD_SOURCE_DIR) +
                                              "/test/data/hwloc/aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml");
    if (t.ok()) topology = *t;
    if (topology != nullptr && !topology->nodes().empty()) {
      std::vector<std::shared_ptr<const draguard::topology::NodeTopology>> nodes;
      for (const char* clique : {"1", "2"}) {
        auto n = std::make_shared<draguard::topology::NodeTopology>(*topology->nodes().front());
        n->nvlink_clique = std::string("6f1c2e3a-0b4d-4c5e-8f9a-1b2c3d4e5f60.") + clique;
        if (nodes.size() == 1) n->name += "-b";
        nodes.push_back(std::move(n));
      }
      cliques = draguard::topology::Snapshot::Create(std::move(nodes));
    }
  }
  draguard::engine::Registry registry;
  draguard::webhook::Reviewer reviewer;
  draguard::policy::Policy policy;
  std::shared_ptr<const draguard::topology::Snapshot> topology;
  std::shared_ptr<const draguard::topology::Snapshot> cliques;  // the same node twice, in two cliques
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Env env;
  draguard::audit::JudgeContext ctx{env.reviewer, env.registry, env.policy, nullptr, {}, "default"};
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  draguard::audit::ReadLimits limits;
  limits.max_document_bytes = 1 << 20;
  draguard::audit::AllocationLimits caps;
  caps.max_claims = caps.max_devices = caps.max_waiting_pods = 64;
  draguard::audit::AllocationJoin join(env.topology.get(), caps);
  draguard::audit::NvlinkSpread spread(env.cliques.get(), env.policy);
  const draguard::audit::AllocationJoin::Sink sink = [](draguard::audit::PodAllocation&& a) {
    for (const auto& c : a.containers) {
      if (c.result != "pass" && c.result != "warn" && c.result != "fail") __builtin_trap();
    }
  };
  draguard::audit::ReadStream(in, "fuzz", [&](draguard::audit::Document&& d) {
    const auto& o = d.object;
    if (!d.error.empty() || !o.is_object() || !o.contains("kind") || !o["kind"].is_string()) return true;
    join.AddSlice(o);
    join.AddClaim(o);
    join.AddPod(o, sink, d.Where());
    spread.AddPod(o);
    std::string api = o.contains("apiVersion") && o["apiVersion"].is_string() ? o["apiVersion"].get<std::string>() : "";
    std::string group = api.find('/') == std::string::npos ? "" : api.substr(0, api.find('/'));
    if (!draguard::audit::IsAudited(group, o["kind"].get<std::string>(), env.policy)) return true;
    try {
      (void)draguard::audit::JudgeObject(std::move(d.object), ctx);
    } catch (const std::exception&) {
      // Contained at the edge in the CLI as well ("could not be judged").
    }
    return true;
  }, limits);
  join.Finish(sink);
  for (const auto& v : spread.Spread()) {
    if (v.findings.size() != 1 || v.findings.front().rule != "DG017") __builtin_trap();
  }
  return 0;
}
