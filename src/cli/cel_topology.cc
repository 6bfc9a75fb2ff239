// `draguard cel eval EXPR --topology FILE|DIR --node NAME`: evaluates a DRA selector against every
// simulated device of one node of the topology model (the devices the NVIDIA DRA driver would
// publish for its GPUs), one line per device.
#include <iostream>

#include "commands.h"
#include "draguard/cel/checker.h"
#include "draguard/cel/device.h"
#include "draguard/cel/evaluator.h"
#include "draguard/dra/devices.h"
#include "draguard/topology/dra_devices.h"
#include "draguard/topology/snapshot.h"
#include "flags.h"

namespace draguard::cli {

int CelEvalOnTopology(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  Flags f = ParseFlags(args, {"--topology", "--node"}, {});
  if (!f.error.empty() || f.positional.size() != 2 || f.positional[0] != "eval" ||
      !f.Has("--topology") || !f.Has("--node")) {
    err << "usage: draguard cel eval EXPR --topology FILE|DIR --node NAME"
        << (f.error.empty() ? "" : " (" + f.error + ")") << "\n";
    return kExitUsage;
  }
  auto checked = cel::CompileSelector(f.positional[1]);
  if (!checked.ok()) {
    err << checked.status().message() << "\n";
    return kExitRuntime;
  }
  std::vector<topology::LoadProblem> problems;
  auto snap = topology::LoadSnapshot(f.Get("--topology"), {}, &problems);
  if (!snap.ok()) {
    err << "draguard cel: --topology: " << snap.status().message() << "\n";
    return kExitRuntime;
  }
  for (const auto& p : problems) err << "draguard cel: skipped " << p.source << ": " << p.status.message() << "\n";
  const topology::NodeTopology* node = (*snap)->Find(f.Get("--node"));
  if (node == nullptr) {
    err << "draguard cel: node \"" << f.Get("--node") << "\" is not in " << f.Get("--topology") << "\n";
    return kExitRuntime;
  }
  auto devices = topology::SimulateDraDevices(*node);
  if (devices.empty()) out << "(node " << node->name << " has no simulated NVIDIA GPU devices)\n";
  for (const auto& d : devices) {
    auto dev = dra::ToCelDevice(d);
    if (!dev.ok()) {
      out << d.name << ": error: " << dev.status().message() << "\n";
      continue;
    }
    auto result = cel::EvaluateSelector(*checked, *dev);
    out << d.name << ": ";
    if (result.ok()) {
      out << (*result ? "true" : "false");
    } else {
      out << "error: " << result.status().message();
    }
    if (!d.unknown.empty()) {
      out << "  (unknown to the simulation:";
      for (const auto& u : d.unknown) out << " " << u;
      out << ")";
    }
    out << "\n";
  }
  return kExitOk;
}

}  // namespace draguard::cli
