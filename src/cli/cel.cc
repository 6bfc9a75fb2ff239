// `draguard cel`: compiles a DRA device selector (check) and evaluates it against one device
// (eval --device) or against every simulated device of a topology node (eval --topology --node).
#include <optional>
#include <sstream>

#include "commands.h"
#include "draguard/read_file.h"
#include "draguard/cel/checker.h"
#include "draguard/cel/cost.h"
#include "draguard/cel/device.h"
#include "draguard/cel/evaluator.h"
#include "draguard/dra/devices.h"
#include "draguard/topology/dra_devices.h"
#include "draguard/topology/snapshot.h"
#include "flags.h"

namespace draguard::cli {
namespace {

constexpr const char* kUsage =
    "usage: draguard cel check EXPR [--allow-multiple-allocations]\n"
    "       draguard cel eval EXPR --device JSON|@FILE [--allow-multiple-allocations] [--cost-limit N]\n";

// Parsed command line of `cel check` and `cel eval --device`.
struct CelArgs {
  std::string command;
  std::string expr;
  std::optional<std::string> device;
  bool allow_multiple_allocations = false;
  int64_t cost_limit = cel::kDefaultCostLimit;
};

struct FlagSpec {
  const char* name;
  bool takes_value;
};
constexpr FlagSpec kFlags[] = {{"--device", true}, {"--allow-multiple-allocations", false}, {"--cost-limit", true}};

std::optional<CelArgs> ParseArgs(const std::vector<std::string>& args, std::ostream& err) {
  CelArgs a;
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& w = args[i];
    if (w.size() > 2 && w.rfind("--", 0) == 0) {
      std::string name = w, value;
      bool has_inline = false;
      if (size_t eq = w.find('='); eq != std::string::npos) {
        name = w.substr(0, eq);
        value = w.substr(eq + 1);
        has_inline = true;
      }
      const FlagSpec* spec = nullptr;
      for (const auto& f : kFlags) {
        if (name == f.name) spec = &f;
      }
      if (spec == nullptr) {
        err << "draguard cel: unknown flag " << name << "\n" << kUsage;
        return std::nullopt;
      }
      if (spec->takes_value && !has_inline) {
        if (i + 1 >= args.size()) {
          err << "draguard cel: " << name << " needs a value\n" << kUsage;
          return std::nullopt;
        }
        value = args[++i];
      }
      if (name == "--device") {
        a.device = value;
      } else if (name == "--allow-multiple-allocations") {
        a.allow_multiple_allocations = true;
      } else if (name == "--cost-limit") {
        try {
          size_t used = 0;
          a.cost_limit = std::stoll(value, &used);
          if (used != value.size() || a.cost_limit <= 0) throw std::invalid_argument(value);
        } catch (const std::exception&) {
          err << "draguard cel: --cost-limit needs a positive integer\n";
          return std::nullopt;
        }
      }
      continue;
    }
    positional.push_back(w);
  }
  if (positional.size() != 2 || (positional[0] != "check" && positional[0] != "eval")) {
    err << kUsage;
    return std::nullopt;
  }
  a.command = positional[0];
  a.expr = positional[1];
  if (a.command == "eval" && !a.device) {
    err << "draguard cel eval: --device is required\n" << kUsage;
    return std::nullopt;
  }
  if (a.command == "check" && a.device) {
    err << "draguard cel check: --device is only valid with eval\n" << kUsage;
    return std::nullopt;
  }
  return a;
}

void PrintReferences(const cel::CheckedExpr& c, std::ostream& out) {
  for (const auto& r : c.references) {
    out << "  " << (r.kind == cel::AttributeReference::Kind::kAttribute ? "attribute" : "capacity") << " ";
    if (r.domain_is_driver) out << (r.domain.empty() ? "<driver>" : r.domain) << "(driver)";
    else out << r.domain;
    out << "/" << r.name << " " << (r.presence_test ? "presence-test" : r.guarded ? "guarded" : "UNGUARDED") << " "
        << r.line << ":" << r.column << "\n";
  }
}

// `--device JSON|@FILE`: the JSON text itself, or the file's contents.
std::optional<std::string> DeviceText(const std::string& arg, std::ostream& err) {
  if (arg.empty() || arg[0] != '@') return arg;
  auto text = ReadFile(arg.substr(1));
  if (!text.ok()) {
    err << "draguard cel eval: " << text.status().message() << "\n";
    return std::nullopt;
  }
  return *std::move(text);
}

// `cel check EXPR` and `cel eval EXPR --device JSON|@FILE`.
int CelOnDevice(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto parsed = ParseArgs(args, err);
  if (!parsed) return kExitUsage;
  cel::DraEnvOptions env;
  env.allow_multiple_allocations = parsed->allow_multiple_allocations;
  auto compiled = cel::CompileSelector(parsed->expr, env);
  if (!compiled.ok()) {
    err << compiled.status().message() << "\n";
    return kExitRuntime;
  }
  // The API server rejects a selector whose estimated cost exceeds its limit: never evaluate one.
  if (Status cost = cel::CheckCost(*compiled); !cost.ok()) {
    err << "ERROR: " << cost.message() << "\n";
    return kExitRuntime;
  }
  if (parsed->command == "check") {
    out << "OK\nestimated cost: " << cel::EstimateCost(*compiled).max << " (limit " << cel::kSelectorMaxCost << ")\n";
    if (!compiled->references.empty()) {
      out << "references:\n";
      PrintReferences(*compiled, out);
    }
    return kExitOk;
  }
  auto text = DeviceText(*parsed->device, err);
  if (!text) return kExitUsage;
  auto device = cel::ParseDeviceJson(*text);
  if (!device.ok()) {
    err << "draguard cel eval: " << device.status().message() << "\n";
    return kExitUsage;
  }
  cel::EvalOptions opts;
  opts.cost_limit = parsed->cost_limit;
  auto r = cel::EvaluateSelector(*compiled, *device, opts);
  if (!r.ok()) {
    out << "error: CEL runtime error: " << r.status().message() << "\n";
    return kExitRuntime;
  }
  out << (*r ? "true" : "false") << "\n";
  return kExitOk;
}

// One line per simulated device: "NAME: true|false|error: ...", plus what the simulation lacks.
void PrintDeviceResult(const cel::CheckedExpr& checked, const topology::SimulatedDevice& d, std::ostream& out) {
  auto dev = dra::ToCelDevice(d);
  if (!dev.ok()) {
    out << d.name << ": error: " << dev.status().message() << "\n";
    return;
  }
  auto result = cel::EvaluateSelector(checked, *dev);
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

// `cel eval EXPR --topology FILE|DIR --node NAME`: the selector against every simulated device of
// one node (the devices the NVIDIA DRA driver would publish for its GPUs).
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
  if (Status cost = cel::CheckCost(*checked); !cost.ok()) {
    err << "ERROR: " << cost.message() << "\n";
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
  for (const auto& d : devices) PrintDeviceResult(*checked, d, out);
  return kExitOk;
}

}  // namespace

int Cel(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  for (const auto& a : args) {
    if (a == "--topology" || a.rfind("--topology=", 0) == 0) return CelEvalOnTopology(args, out, err);
  }
  return CelOnDevice(args, out, err);
}

}  // namespace draguard::cli
