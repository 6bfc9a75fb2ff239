// Fuzzes the audit's input path: the streaming reader (YAML or JSON, Lists item by item) and the
// judgement of every object it yields, as `draguard audit` runs them.
#include <cstdint>
#include <sstream>
#include <string>

#include "draguard/audit/judge.h"
#include "draguard/audit/reader.h"
#include "draguard/engine/registry.h"
#include "draguard/policy/policy.h"
#include "draguard/webhook/reviewer.h"

namespace {

struct Env {
  Env() : registry(draguard::engine::DefaultRegistry()), reviewer(registry) {
    auto p = draguard::policy::ParsePolicy(draguard::policy::DefaultPolicyYaml());
    if (p.ok()) policy = *p;
  }
  draguard::engine::Registry registry;
  draguard::webhook::Reviewer reviewer;
  draguard::policy::Policy policy;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Env env;
  draguard::audit::JudgeContext ctx{env.reviewer, env.registry, env.policy, nullptr, {}, "default"};
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  draguard::audit::ReadLimits limits;
  limits.max_document_bytes = 1 << 20;
  draguard::audit::ReadStream(in, "fuzz", [&](draguard::audit::Document&& d) {
    const auto& o = d.object;
    if (!d.error.empty() || !o.is_object() || !o.contains("kind") || !o["kind"].is_string()) return true;
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
  return 0;
}
