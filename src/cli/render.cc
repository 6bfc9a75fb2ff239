// `draguard render`: prints the ResourceClaimTemplates of the policy's mutation.catalogue
// (mutation::RenderCatalogue), once per --namespace, or without a namespace so that
// `kubectl apply -n NS -f -` places them. Names are content-addressed, so the output is stable.
// `draguard render --kueue` prints instead the Kueue Configuration fragment that matches the
// policy (mutation::KueueConfiguration).
//
// Exit codes: 0 ok (an empty catalogue prints nothing and says so on stderr), 1 some profile
// cannot be generated (the others are still printed), 2 usage error or bad policy/topology (or,
// with --kueue, DeviceClasses Kueue cannot map as the policy names them).
#include <iostream>
#include <set>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "draguard/mutation/kueue.h"
#include "draguard/mutation/mutation.h"
#include "draguard/policy/store.h"
#include "draguard/topology/store.h"
#include "draguard/yamljson/yamljson.h"
#include "flags.h"

namespace draguard::cli {
namespace {

// --kueue: the Kueue Configuration fragment, with what it means in comments (YAML) and notes on
// what in the policy works against Kueue on stderr.
int RenderKueue(const policy::Policy& pol, const std::string& format, std::ostream& out, std::ostream& err) {
  auto mappings = mutation::KueueDeviceClassMappings(pol);
  if (!mappings.ok()) {
    err << "draguard render --kueue: " << mappings.status().message() << "\n";
    return 2;
  }
  if (!pol.mutation.kueue) {
    err << "draguard render --kueue: note: the policy does not set mutation.kueue: true, so Pods that Kueue manages "
           "itself (its pod integration) may get claims with firstAvailable, which Kueue does not admit\n";
  }
  if (pol.mutation.numa_alignment != policy::NumaAlignment::kNumaNode) {
    err << "draguard render --kueue: note: mutation.numaAlignment is pcieRoots: with mutation.kueue, multi-GPU "
           "requests that only NUMA-local placements fit are refused (numaNode writes them as one constraint)\n";
  }
  const admission::Json config = mutation::KueueConfiguration(*mappings);
  if (format == "json") {
    out << config.dump(2) << "\n";
    return 0;
  }
  out << "# Kueue (v0.18 or newer, feature gate KueueDRAIntegration) for this draguard policy: merge into the\n"
         "# Configuration of Kueue's manager and restart it (it reads the mappings at start). Each name is a\n"
         "# resource a ClusterQueue quotas; cover every name a queue's workloads may use in its resourceGroups,\n"
         "# or set resources.quotaCheckStrategy: IgnoreUndeclared, else a Workload whose claims use such a class\n"
         "# is not admitted. Every class in a claim of a Workload must be mapped.\n";
  for (const auto& m : *mappings) out << "#   " << m.name << ": " << m.what << "\n";
  out << yamljson::ToYaml(config);
  return 0;
}

}  // namespace

int Render(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  constexpr int kOk = 0, kIncomplete = 1, kUsage = 2;
  Flags f = ParseFlags(args, {"--config", "--topology-dir", "--namespace", "-n", "-o", "--output"}, {"--kueue"});
  const bool kueue = f.Has("--kueue");
  if (f.error.empty() && f.positional.empty() && kueue && (f.Has("--topology-dir") || f.Has("--namespace") || f.Has("-n"))) {
    f.error = "--kueue takes no --topology-dir or --namespace";
  }
  if (!f.error.empty() || !f.positional.empty()) {
    err << "draguard render: " << (f.error.empty() ? "unexpected argument " + f.positional.front() : f.error)
        << "\nusage: draguard render [--config POLICY] [--topology-dir DIR|FILE] [--namespace NS]... "
           "[-o yaml|json]\n       draguard render --kueue [--config POLICY] [-o yaml|json]\n";
    return kUsage;
  }
  std::string format = CliOutputFormat(f, "render", err);
  if (format.empty()) return kUsage;
  if (kueue) {
    policy::PolicyStore policies;
    if (!LoadCliPolicy(f, policies, "render", err)) return kUsage;
    return RenderKueue(*policies.Current(), format, out, err);
  }
  std::vector<std::string> namespaces;
  for (const char* flag : {"--namespace", "-n"}) {
    if (auto it = f.values.find(flag); it != f.values.end()) {
      for (const auto& ns : it->second) {
        if (ns.empty()) {
          err << "draguard render: " << flag << " needs a namespace name\n";
          return kUsage;
        }
        namespaces.push_back(ns);
      }
    }
  }
  if (namespaces.empty()) namespaces.push_back("");  // no metadata.namespace

  policy::PolicyStore policies;
  if (!LoadCliPolicy(f, policies, "render", err)) return kUsage;
  auto pol = policies.Current();
  if (pol->mutation.catalogue.empty()) {
    err << "draguard render: the policy's mutation.catalogue is empty; nothing to render\n";
    return kOk;
  }
  auto store = LoadCliTopology(f, "render", err);
  if (store == nullptr) return kUsage;
  auto topo = store->Current();

  std::vector<mutation::GeneratedTemplate> rendered;
  std::set<std::string> errors;  // the same profile fails the same way in every namespace
  std::vector<std::string> error_order;
  for (const auto& ns : namespaces) {
    std::vector<std::string> errs;
    auto templates = mutation::RenderCatalogue(*pol, topo.get(), ns, &errs);
    for (auto& t : templates) rendered.push_back(std::move(t));
    for (auto& e : errs) {
      if (errors.insert(e).second) error_order.push_back(std::move(e));
    }
  }
  for (const auto& e : error_order) err << "draguard render: error: " << e << "\n";

  std::vector<nlohmann::json> objects;
  std::vector<std::string> descriptions;  // a "# description" line above each YAML document
  for (auto& t : rendered) {
    objects.push_back(std::move(t.object));
    descriptions.push_back(std::move(t.description));
  }
  PrintObjects(out, format, std::move(objects), descriptions);
  return error_order.empty() ? kOk : kIncomplete;
}

}  // namespace draguard::cli
