// Fuzzes the audit's input path: the streaming reader (YAML or JSON, Lists item by item), the
// judgement of every object it yields, and the allocation audit's join of its Pods, ResourceClaims
// and ResourceSlices on the g4dn.metal's topology, as `draguard audit` runs them.
#include <cstdint>
#include <sstream>
#include <string>

#include "draguard/audit/allocation.h"
#include "draguard/audit/judge.h"
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
  }
  draguard::engine::Registry registry;
  draguard::webhook::Reviewer reviewer;
  draguard::policy::Policy policy;
  std::shared_ptr<const draguard::topology::Snapshot> topology;
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
  return 0;
}
