// `draguard cel` subcommands. See include/draguard/cel/cli.h.
#include "draguard/cel/cli.h"

#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "draguard/cel/checker.h"
#include "draguard/cel/device.h"
#include "draguard/cel/evaluator.h"

namespace draguard::cel {
namespace {

constexpr const char* kUsage =
    "usage: draguard cel check EXPR [--allow-multiple-allocations]\n"
    "       draguard cel eval EXPR --device JSON|@FILE [--allow-multiple-allocations] [--cost-limit N]\n";

// Parsed command line. New flags (e.g. --topology FILE --node NAME) are added to kFlags and here.
struct CelArgs {
  std::string command;
  std::string expr;
  std::optional<std::string> device;
  bool allow_multiple_allocations = false;
  int64_t cost_limit = kDefaultCostLimit;
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

void PrintReferences(const CheckedExpr& c, std::ostream& out) {
  for (const auto& r : c.references) {
    out << "  " << (r.kind == AttributeReference::Kind::kAttribute ? "attribute" : "capacity") << " ";
    if (r.domain_is_driver) out << (r.domain.empty() ? "<driver>" : r.domain) << "(driver)";
    else out << r.domain;
    out << "/" << r.name << " " << (r.presence_test ? "presence-test" : r.guarded ? "guarded" : "UNGUARDED") << " "
        << r.line << ":" << r.column << "\n";
  }
}

}  // namespace

int RunCelCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto parsed = ParseArgs(args, err);
  if (!parsed) return kCelExitUsage;
  DraEnvOptions env;
  env.allow_multiple_allocations = parsed->allow_multiple_allocations;
  auto compiled = CompileSelector(parsed->expr, env);
  if (!compiled.ok()) {
    err << compiled.status().message() << "\n";
    return kCelExitError;
  }
  if (parsed->command == "check") {
    out << "OK\n";
    if (!compiled->references.empty()) {
      out << "references:\n";
      PrintReferences(*compiled, out);
    }
    return kCelExitOk;
  }
  std::string text = *parsed->device;
  if (!text.empty() && text[0] == '@') {
    std::ifstream f(text.substr(1));
    if (!f) {
      err << "draguard cel eval: cannot read " << text.substr(1) << "\n";
      return kCelExitUsage;
    }
    std::ostringstream ss;
    ss << f.rdbuf();
    text = ss.str();
  }
  auto device = ParseDeviceJson(text);
  if (!device.ok()) {
    err << "draguard cel eval: " << device.status().message() << "\n";
    return kCelExitUsage;
  }
  EvalOptions opts;
  opts.cost_limit = parsed->cost_limit;
  auto r = EvaluateSelector(*compiled, *device, opts);
  if (!r.ok()) {
    out << "error: CEL runtime error: " << r.status().message() << "\n";
    return kCelExitError;
  }
  out << (*r ? "true" : "false") << "\n";
  return kCelExitOk;
}

}  // namespace draguard::cel
