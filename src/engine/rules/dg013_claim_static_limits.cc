// DG013 claim-static-limits: the resource.k8s.io limits and name rules, with clear messages.
#include <set>

#include "draguard/cel/parser.h"
#include "draguard/dra/pod_specs.h"
#include "rules/rules.h"
#include "rules/util.h"

namespace draguard::engine::rules {
namespace {

using admission::Json;

constexpr std::size_t kMaxRequests = 32, kMaxConstraints = 32, kMaxConfig = 32, kMaxSelectors = 32;
constexpr std::size_t kMaxFirstAvailable = 8, kMaxTolerations = 16, kMaxOpaqueBytes = 10 * 1024;
constexpr int64_t kMaxDevices = 32;

// "<domain>/<name>" with a DNS-subdomain domain (≤ 63) and a C-identifier name (≤ 32).
bool FullyQualified(const std::string& s) {
  auto slash = s.find('/');
  if (slash == std::string::npos) return false;
  std::string domain = s.substr(0, slash);
  return domain.size() <= 63 && IsDnsSubdomain(domain) && IsCIdentifier(s.substr(slash + 1));
}

struct Collector {
  std::string owner;
  std::vector<Finding>* findings;
  void Add(const std::string& pointer, const std::string& message, const std::string& fix) {
    findings->push_back({pointer, owner + " " + message, fix, std::nullopt});
  }
};

std::size_t ArraySize(const Json* j) { return j != nullptr && j->is_array() ? j->size() : 0; }

class ClaimStaticLimits final : public Rule {
 public:
  std::string_view id() const override { return "DG013"; }
  std::string_view name() const override { return "claim-static-limits"; }
  policy::Action default_action() const override { return policy::Action::kDeny; }

  RuleResult Evaluate(const RuleInput& input) const override {
    auto claim = FindClaim(input.request);
    if (!claim) return Skip();
    std::vector<Finding> findings;
    Collector c{claim->owner, &findings};
    std::string dp = claim->spec_pointer + "/devices";
    if (claim->requests.size() > kMaxRequests) {
      c.Add(dp + "/requests", "has " + std::to_string(claim->requests.size()) + " requests (limit 32)",
            "split the claim");
    }
    if (claim->constraints.size() > kMaxConstraints) {
      c.Add(dp + "/constraints", "has " + std::to_string(claim->constraints.size()) + " constraints (limit 32)",
            "merge constraints");
    }
    if (claim->configs.size() > kMaxConfig) {
      c.Add(dp + "/config", "has " + std::to_string(claim->configs.size()) + " config entries (limit 32)",
            "merge config entries");
    }
    bool flat = claim->version == "v1beta1" || claim->version == "v1alpha3";
    std::set<std::string> names;
    // Valid constraint / config references: "main" and "main/sub".
    std::set<std::string> refs;
    int64_t devices = 0;
    for (const auto& req : claim->requests) {
      if (!IsDnsLabel(req.name)) {
        c.Add(req.pointer + "/name", "request name \"" + req.name + "\" is not a DNS label",
              "use lower-case letters, digits and '-', at most 63 characters");
      } else if (!names.insert(req.name).second) {
        c.Add(req.pointer + "/name", "has two requests named \"" + req.name + "\"", "give every request a unique name");
      }
      refs.insert(req.name);
      if (!flat && req.has_exactly == req.first_available) {
        c.Add(req.pointer, "request \"" + req.name + "\" must set exactly one of exactly and firstAvailable",
              "wrap the device fields in exactly: {...} (resource.k8s.io/" + claim->version + " shape)");
      }
      if (flat && req.first_available && Member(req.obj, "deviceClassName") != nullptr) {
        c.Add(req.pointer, "request \"" + req.name + "\" sets both deviceClassName and firstAvailable",
              "keep one: firstAvailable subrequests carry their own deviceClassName");
      }
      if (req.first_available) {
        if (req.first_available_count == 0) {
          c.Add(req.pointer + "/firstAvailable", "request \"" + req.name + "\" has an empty firstAvailable",
                "list at least one subrequest");
        }
        if (req.first_available_count > kMaxFirstAvailable) {
          c.Add(req.pointer + "/firstAvailable",
                "request \"" + req.name + "\" has " + std::to_string(req.first_available_count) +
                    " firstAvailable entries (limit 8)",
                "keep at most 8 alternatives");
        }
      }
      std::set<std::string> subs;
      int64_t most = 0;
      for (const auto& alt : req.alternatives) {
        std::string who = Describe(alt);
        if (!alt.name.empty() || req.first_available) {
          if (!IsDnsLabel(alt.name)) {
            c.Add(alt.pointer + "/name", "subrequest name \"" + alt.name + "\" of request \"" + req.name +
                  "\" is not a DNS label", "use lower-case letters, digits and '-'");
          } else if (!subs.insert(alt.name).second) {
            c.Add(alt.pointer + "/name", "request \"" + req.name + "\" has two subrequests named \"" + alt.name + "\"",
                  "give every subrequest a unique name");
          }
          refs.insert(req.name + "/" + alt.name);
        }
        if (alt.device_class.empty()) {
          c.Add(alt.pointer + "/deviceClassName", who + " has no deviceClassName", "set deviceClassName");
        } else if (!IsDnsSubdomain(alt.device_class)) {
          c.Add(alt.pointer + "/deviceClassName", who + " deviceClassName \"" + alt.device_class +
                "\" is not a DNS subdomain", "use the DeviceClass's name");
        }
        if (alt.selector_count > kMaxSelectors) {
          c.Add(alt.pointer + "/selectors", who + " has " + std::to_string(alt.selector_count) + " selectors (limit 32)",
                "combine selectors with &&");
        }
        for (const auto& s : alt.selectors) {
          if (s.expression.size() > cel::kMaxExpressionLength) {
            c.Add(s.pointer, who + " selector is " + std::to_string(s.expression.size()) +
                  " characters long (limit 10240)", "shorten the expression");
          }
        }
        if (!alt.allocation_mode.empty() && alt.allocation_mode != "ExactCount" && alt.allocation_mode != "All") {
          c.Add(alt.pointer + "/allocationMode", who + " allocationMode \"" + alt.allocation_mode +
                "\" is not ExactCount or All", "use ExactCount or All");
        }
        if (alt.all && alt.count_set) {
          c.Add(alt.pointer + "/count", who + " sets count with allocationMode All", "remove count");
        } else if (alt.count_set && alt.count <= 0) {
          c.Add(alt.pointer + "/count", who + " count must be a positive integer", "set count: 1 or more");
        } else if (!alt.all && alt.count > kMaxDevices) {
          c.Add(alt.pointer + "/count", who + " asks for " + std::to_string(alt.count) +
                " devices; a claim holds at most 32", "lower count, or split across claims");
        }
        if (ArraySize(Member(alt.obj, "tolerations")) > kMaxTolerations) {
          c.Add(alt.pointer + "/tolerations", who + " has more than 16 tolerations", "keep at most 16");
        }
        if (!alt.all && alt.count > 0) most = std::max(most, alt.count);
      }
      devices += most;
    }
    if (devices > kMaxDevices) {
      c.Add(dp + "/requests", "asks for up to " + std::to_string(devices) +
            " devices; allocation fails above 32 per claim (\"exceeds the claim limit\")",
            "lower the counts or split the claim");
    }
    auto check_refs = [&](const std::vector<std::string>& list, const std::string& pointer, const char* what) {
      for (std::size_t i = 0; i < list.size(); ++i) {
        if (refs.count(list[i])) continue;
        c.Add(pointer + "/requests/" + std::to_string(i), std::string(what) + " names request \"" + list[i] +
              "\", which the claim does not have", "name an existing request (\"main\" or \"main/sub\")");
      }
    };
    for (const auto& con : claim->constraints) {
      check_refs(con.requests, con.pointer, "constraint");
      bool match = !con.match_attribute.empty(), distinct = !con.distinct_attribute.empty();
      if (match == distinct) {
        c.Add(con.pointer, "constraint must set exactly one of matchAttribute and distinctAttribute",
              "set matchAttribute: resource.kubernetes.io/pcieRoot (for example)");
      }
      for (const auto* attr : {&con.match_attribute, &con.distinct_attribute}) {
        if (attr->empty() || FullyQualified(*attr)) continue;
        std::string field = attr == &con.match_attribute ? "matchAttribute" : "distinctAttribute";
        std::string fix = attr->find('/') == std::string::npos
                              ? "qualify it with its domain, e.g. resource.kubernetes.io/" + *attr
                              : "use <domain>/<name> with a C identifier name";
        c.Add(con.pointer + "/" + field, field + " \"" + *attr + "\" is not fully qualified", fix);
      }
    }
    for (const auto& cfg : claim->configs) {
      check_refs(cfg.requests, cfg.pointer, "config");
      if (cfg.driver.empty()) {
        c.Add(cfg.pointer + "/opaque", "config has no opaque.driver", "set opaque.driver, e.g. gpu.nvidia.com");
      }
      if (cfg.parameters == nullptr || !cfg.parameters->is_object()) {
        c.Add(cfg.parameters_pointer, "config opaque.parameters must be a JSON object", "set parameters: {...}");
      } else if (cfg.parameters->dump().size() > kMaxOpaqueBytes) {
        c.Add(cfg.parameters_pointer, "config opaque.parameters exceed 10 KiB", "shrink the parameters");
      }
    }
    return Fail(std::move(findings));
  }
};

}  // namespace

std::unique_ptr<Rule> MakeClaimStaticLimits() { return std::make_unique<ClaimStaticLimits>(); }

}  // namespace draguard::engine::rules
