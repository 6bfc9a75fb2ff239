// `draguard backstop`: prints the ValidatingAdmissionPolicy + binding that back DG001 up in-tree
// (engine::MakeBackstop), after compiling every expression with the project's CEL front end.
#include <nlohmann/json.hpp>

#include "commands.h"
#include "draguard/cel/checker.h"
#include "draguard/engine/backstop.h"
#include "draguard/policy/store.h"
#include "flags.h"

namespace draguard::cli {
namespace {

// Every expression compiles in the admission environment (variables as dyn) to a bool.
Status CheckBackstopCel(const engine::Backstop& b) {
  cel::Env env;
  for (const char* var : {"object", "oldObject", "request", "params", "namespaceObject", "authorizer", "variables"}) {
    env.Declare(var, cel::Type::Of(cel::Type::Kind::kDyn));
  }
  std::vector<std::pair<std::string, std::string>> all = b.match_conditions;
  all.emplace_back("validation", b.validation);
  for (const auto& [name, expr] : all) {
    auto c = cel::Compile(expr, env);
    if (!c.ok()) return Status::InvalidArgument(name + ": " + c.status().message());
    if (c->result_type.kind != cel::Type::Kind::kBool && c->result_type.kind != cel::Type::Kind::kDyn) {
      return Status::InvalidArgument(name + ": the expression is not a bool but " + c->result_type.ToString());
    }
  }
  return Status::Ok();
}

}  // namespace

int Backstop(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  Flags f = ParseFlags(args, {"--config", "--name", "--namespace", "-o", "--output"}, {});
  if (!f.error.empty() || !f.positional.empty()) {
    err << "draguard backstop: " << (f.error.empty() ? "unexpected argument " + f.positional.front() : f.error)
        << "\nusage: draguard backstop [--config POLICY] [--name NAME] [--namespace NS] [-o yaml|json]\n";
    return kExitUsage;
  }
  std::string format = CliOutputFormat(f, "backstop", err);
  if (format.empty()) return kExitUsage;
  const std::string name = f.Get("--name", "draguard-backstop");
  if (name.empty()) {
    err << "draguard backstop: --name needs a name\n";
    return kExitUsage;
  }
  std::vector<std::string> always_exempt;
  if (f.Has("--namespace")) always_exempt.push_back(f.Get("--namespace"));
  policy::PolicyStore policies(always_exempt);
  if (!LoadCliPolicy(f, policies, "backstop", err)) return kExitUsage;
  auto b = engine::MakeBackstop(*policies.Current());
  if (!b.ok()) {
    err << "draguard backstop: " << b.status().message() << "\n";
    return kExitUsage;
  }
  if (Status st = CheckBackstopCel(*b); !st.ok()) {
    err << "draguard backstop: generated CEL does not compile: " << st.message() << "\n";
    return kExitRuntime;
  }
  auto objects = engine::BackstopObjects(*b, name);
  if (objects.empty()) {
    err << "draguard backstop: DG001 is off in this policy; no backstop\n";
    return kExitOk;
  }
  PrintObjects(out, format, std::move(objects));
  return kExitOk;
}

}  // namespace draguard::cli
