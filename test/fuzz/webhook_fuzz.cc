// Fuzzes the whole review path: decode → rules → decision → encode, as /validate and /mutate, under
// the default policy and one that puts CPUs in GPU claims (mutation.cpu) and ComputeDomains in multi-node
// jobs' Pods (mutation.computeDomains), without a topology model and
// with the bundled nodes in two NVLink cliques, and differentially: the fast decode (simdjson, rule fields only) must answer byte-for-byte as the
// reference decode (nlohmann_json, every field); and a decode that rebuilds the previous input's
// recycled object must give the document a fresh decode gives.
#include <chrono>
#include <cstdint>
#include <string_view>

#include "draguard/admission/codec.h"
#include "draguard/engine/registry.h"
#include "draguard/policy/policy.h"
#include "draguard/topology/snapshot.h"
#include "draguard/topology/store.h"
#include "draguard/webhook/reviewer.h"

namespace {

draguard::admission::DecodeLimits Reference() {
  draguard::admission::DecodeLimits l;
  l.decoder = draguard::admission::Decoder::kReference;
  return l;
}

struct Env {
  Env() : registry(draguard::engine::DefaultRegistry()), reviewer(registry), reference(registry, Reference()) {
    auto p = draguard::policy::ParsePolicy(draguard::policy::DefaultPolicyYaml());
    if (p.ok()) policy = *p;
    auto c = draguard::policy::ParsePolicy(
        "apiVersion: draguard.io/v1alpha1\nkind: Policy\n"
        "mutation: {numaAlignment: numaNode, cpu: {mode: grouped}, computeDomains: auto}\n");
    if (c.ok()) cpu_policy = *c;
    // The bundled example nodes, parsed in-process, so /mutate plans against a real topology.
    draguard::topology::ShapeInterner interner;
    std::vector<std::shared_ptr<const draguard::topology::NodeTopology>> nodes;
    for (const auto& e : draguard::topology::BundledExamples()) {
      auto parsed = draguard::topology::ParseHwlocXml(e.bytes);
      if (!parsed.ok()) continue;
      // Two NVLink cliques over the nodes, so DG017 judges multi-node jobs.
      auto node = std::make_shared<draguard::topology::NodeTopology>(
          *draguard::topology::MakeNodeTopology(std::move(*parsed), e.node, e.origin, e.version, interner));
      node->nvlink_clique = std::string("6f1c2e3a-0b4d-4c5e-8f9a-1b2c3d4e5f60.") + (nodes.size() % 2 == 0 ? "1" : "2");
      nodes.push_back(std::move(node));
    }
    topology = draguard::topology::Snapshot::Create(std::move(nodes));
  }
  draguard::engine::Registry registry;
  draguard::webhook::Reviewer reviewer;
  draguard::webhook::Reviewer reference;  // the oracle of the fast decode
  draguard::policy::Policy policy;
  draguard::policy::Policy cpu_policy;  // mutation.cpu grouped, numaAlignment numaNode, computeDomains auto
  std::shared_ptr<const draguard::topology::Snapshot> topology;
  draguard::admission::DecodePool pool;  // holds the previous input's objects
};

// Decodes `body` with the pool's recycled object and without, in both scopes; traps when they differ.
void CheckRecycledDecode(const draguard::admission::DecodePool& pool, std::string_view body) {
  using draguard::admission::DecodeScope;
  for (DecodeScope scope : {DecodeScope::kRuleFields, DecodeScope::kFull}) {
    auto fresh = draguard::admission::DecodeReview(body, {}, scope);
    auto rebuilt = draguard::admission::DecodeReview(body, {}, scope, &pool);
    if (fresh.ok() != rebuilt.ok()) __builtin_trap();
    if (!fresh.ok()) continue;
    if (fresh->object != rebuilt->object || fresh->object.dump() != rebuilt->object.dump()) __builtin_trap();
    pool.Recycle(rebuilt->object, body.size());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Env env;
  std::string_view body(reinterpret_cast<const char*>(data), size);
  CheckRecycledDecode(env.pool, body);
  for (const draguard::policy::Policy* policy : {&env.policy, &env.cpu_policy}) {
    for (auto kind : {draguard::admission::WebhookKind::kValidating,
                      draguard::admission::WebhookKind::kMutating}) {
      for (const draguard::topology::Snapshot* topo : {static_cast<const draguard::topology::Snapshot*>(nullptr),
                                                       env.topology.get()}) {
        auto out = env.reviewer.Review(body, kind, *policy, topo, std::chrono::system_clock::time_point{},
                                       std::chrono::steady_clock::now() + draguard::webhook::kDefaultReviewTimeout);
        if (out.body.empty()) __builtin_trap();  // every request gets an answer
        if (out.http_status != 200 && out.http_status != 400 && out.http_status != 413) __builtin_trap();
        auto ref = env.reference.Review(body, kind, *policy, topo, std::chrono::system_clock::time_point{},
                                        std::chrono::steady_clock::now() + draguard::webhook::kDefaultReviewTimeout);
        if (ref.http_status != out.http_status || ref.body != out.body || ref.error != out.error ||
            ref.verdict != out.verdict || ref.rules != out.rules) {
          __builtin_trap();  // the fast decode changed an answer
        }
      }
    }
  }
  return 0;
}
