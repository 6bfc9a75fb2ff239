// DG008 sharing-limits: NVIDIA opaque configs decode strictly and bound MPS sharing.
#include <set>

#include "draguard/k8s/quantity.h"
#include "draguard/dra/pod_specs.h"
#include "rules/rules.h"
#include "rules/util.h"

namespace draguard::engine::rules {
namespace {

using admission::Json;

constexpr const char* kApiVersion = "resource.nvidia.com/v1beta1";

struct Checker {
  std::string owner;
  std::vector<Finding>* findings;

  void Add(const std::string& pointer, const std::string& message, const std::string& fix,
           std::optional<policy::Action> cap = std::nullopt) {
    Finding f;
    f.pointer = pointer;
    f.message = owner + " " + message;
    f.fix = fix;
    f.cap = cap;
    findings->push_back(std::move(f));
  }

  // The driver decodes with a strict decoder: unknown fields fail NodePrepareResources.
  bool Known(const Json& obj, const std::string& pointer, const std::set<std::string>& allowed,
             const std::string& what) {
    if (!obj.is_object()) {
      Add(pointer, what + " must be an object", "see the NVIDIA driver's " + what + " schema");
      return false;
    }
    bool ok = true;
    for (const auto& [k, v] : obj.items()) {
      if (allowed.count(k)) continue;
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      Add(pointer + "/" + EscapePointerToken(k), "has unknown field \"" + k + "\" in " + what +
          " (the driver decodes strictly and fails the Pod)", "allowed fields: " + list);
      ok = false;
    }
    return ok;
  }

  void Quantity(const Json* v, const std::string& pointer, const std::string& field) {
    if (v == nullptr) return;
    bool ok = v->is_string() ? k8s::Quantity::Parse(v->get<std::string>()).ok() : v->is_number();
    if (!ok) Add(pointer, field + " is not a quantity", "use a quantity such as 10Gi");
  }

  void Mps(const Json& mps, const std::string& pointer) {
    if (!Known(mps, pointer, {"defaultActiveThreadPercentage", "defaultPinnedDeviceMemoryLimit",
                              "defaultPerDevicePinnedMemoryLimit"}, "mpsConfig")) {
      if (!mps.is_object()) return;
    }
    const Json* pct = Member(&mps, "defaultActiveThreadPercentage");
    if (pct != nullptr && (!pct->is_number_integer() || pct->get<int64_t>() < 0 || pct->get<int64_t>() > 100)) {
      Add(pointer + "/defaultActiveThreadPercentage", "defaultActiveThreadPercentage must be an integer 0-100",
          "set defaultActiveThreadPercentage: 50 (for example)");
    }
    Quantity(Member(&mps, "defaultPinnedDeviceMemoryLimit"), pointer + "/defaultPinnedDeviceMemoryLimit",
             "defaultPinnedDeviceMemoryLimit");
    if (const Json* per = Member(&mps, "defaultPerDevicePinnedMemoryLimit")) {
      if (!per->is_object()) {
        Add(pointer + "/defaultPerDevicePinnedMemoryLimit", "defaultPerDevicePinnedMemoryLimit must be a map",
            "map device index or UUID to a quantity");
      } else {
        for (const auto& [k, v] : per->items()) {
          Quantity(&v, pointer + "/defaultPerDevicePinnedMemoryLimit/" + EscapePointerToken(k),
                   "defaultPerDevicePinnedMemoryLimit[" + k + "]");
        }
      }
    }
  }

  void Sharing(const Json& sharing, const std::string& pointer, bool mig, bool latency_sensitive) {
    std::set<std::string> allowed = {"strategy", "mpsConfig"};
    if (!mig) allowed.insert("timeSlicingConfig");
    if (mig && sharing.is_object() && sharing.contains("timeSlicingConfig")) {
      Add(pointer + "/timeSlicingConfig", "sets timeSlicingConfig in a MigDeviceConfig, which the driver rejects",
          "remove timeSlicingConfig (MIG sharing has no time-slice interval)");
    }
    std::set<std::string> check = allowed;
    if (mig) check.insert("timeSlicingConfig");  // reported above with a better message
    if (!Known(sharing, pointer, check, "sharing") && !sharing.is_object()) return;
    std::string strategy = StringMember(&sharing, "strategy");
    const Json* mps = Member(&sharing, "mpsConfig");
    const Json* ts = Member(&sharing, "timeSlicingConfig");
    if (strategy != "MPS" && strategy != "TimeSlicing") {
      Add(pointer + "/strategy", "sharing.strategy is \"" + strategy + "\", not TimeSlicing or MPS",
          "set sharing.strategy: MPS (with limits) or TimeSlicing");
      return;
    }
    if (strategy == "MPS") {
      if (ts != nullptr && !mig) {
        Add(pointer + "/timeSlicingConfig", "sets timeSlicingConfig with strategy MPS",
            "remove timeSlicingConfig or use strategy TimeSlicing");
      }
      bool pct = mps != nullptr && Member(mps, "defaultActiveThreadPercentage") != nullptr;
      const Json* per = mps != nullptr ? Member(mps, "defaultPerDevicePinnedMemoryLimit") : nullptr;
      bool pinned = mps != nullptr && (Member(mps, "defaultPinnedDeviceMemoryLimit") != nullptr ||
                                       (per != nullptr && per->is_object() && !per->empty()));
      if (!pct || !pinned) {
        std::string missing = !pct && !pinned ? "defaultActiveThreadPercentage and a pinned memory limit"
                              : !pct          ? "defaultActiveThreadPercentage"
                                              : "defaultPinnedDeviceMemoryLimit (or per-device limits)";
        Add(pointer + (mps != nullptr ? "/mpsConfig" : ""), "uses MPS without " + missing +
            ", so one client can take every SM and all memory",
            "set mpsConfig.defaultActiveThreadPercentage (0-100) and defaultPinnedDeviceMemoryLimit");
      }
      if (mps != nullptr) Mps(*mps, pointer + "/mpsConfig");
      return;
    }
    // TimeSlicing.
    if (mps != nullptr) {
      Add(pointer + "/mpsConfig", "sets mpsConfig with strategy TimeSlicing", "remove mpsConfig or use strategy MPS");
    }
    if (ts != nullptr && !mig && Known(*ts, pointer + "/timeSlicingConfig", {"interval"}, "timeSlicingConfig")) {
      std::string interval = StringMember(ts, "interval");
      if (Member(ts, "interval") != nullptr && interval != "Default" && interval != "Short" &&
          interval != "Medium" && interval != "Long") {
        Add(pointer + "/timeSlicingConfig/interval", "timeSlicingConfig.interval is \"" + interval + "\"",
            "use Default, Short, Medium or Long");
      }
    }
    if (!latency_sensitive && !mig) {  // latency-sensitive time-slicing is DG007's deny
      Add(pointer + "/strategy", "time-slices its GPU: co-located processes get no memory or SM isolation",
          "prefer MPS with limits or MIG for shared GPUs", policy::Action::kWarn);
    }
  }
};

class SharingLimits final : public Rule {
 public:
  std::string_view id() const override { return "DG008"; }
  std::string_view name() const override { return "sharing-limits"; }
  policy::Action default_action() const override { return policy::Action::kDeny; }

  RuleResult Evaluate(const RuleInput& input) const override {
    auto claim = FindClaim(input.request);
    if (!claim) return Skip();
    bool ls = IsLatencySensitive(input.policy, claim->labels, "");
    std::vector<Finding> findings;
    bool applies = false;
    for (const auto& cfg : claim->configs) {
      if (cfg.driver != "gpu.nvidia.com" && cfg.driver != "compute-domain.nvidia.com") continue;
      applies = true;
      Checker c{claim->owner + " config", &findings};
      const Json* p = cfg.parameters;
      const std::string& pp = cfg.parameters_pointer;
      if (p == nullptr || !p->is_object()) {
        c.Add(pp, "opaque parameters must be a JSON object", "set apiVersion resource.nvidia.com/v1beta1 and a kind");
        continue;
      }
      std::string api = StringMember(p, "apiVersion");
      if (api != kApiVersion) {
        c.Add(pp + "/apiVersion", "has apiVersion \"" + api + "\", not " + kApiVersion,
              std::string("set apiVersion: ") + kApiVersion);
      }
      std::string kind = StringMember(p, "kind");
      if (cfg.driver == "compute-domain.nvidia.com") {
        if (kind == "ComputeDomainChannelConfig") {
          c.Known(*p, pp, {"apiVersion", "kind", "domainID", "allocationMode"}, kind);
        } else if (kind == "ComputeDomainDaemonConfig") {
          c.Known(*p, pp, {"apiVersion", "kind", "domainID"}, kind);
        } else {
          c.Add(pp + "/kind", "has kind \"" + kind + "\" for driver compute-domain.nvidia.com",
                "use ComputeDomainChannelConfig or ComputeDomainDaemonConfig");
        }
        continue;
      }
      if (kind == "GpuConfig" || kind == "MigDeviceConfig") {
        bool mig = kind == "MigDeviceConfig";
        c.Known(*p, pp, {"apiVersion", "kind", "sharing"}, kind);
        if (const Json* s = Member(p, "sharing")) c.Sharing(*s, pp + "/sharing", mig, ls);
      } else if (kind == "VfioDeviceConfig") {
        c.Known(*p, pp, {"apiVersion", "kind", "iommu"}, kind);
      } else {
        c.Add(pp + "/kind", "has kind \"" + kind + "\", which driver gpu.nvidia.com does not know",
              "use GpuConfig, MigDeviceConfig or VfioDeviceConfig");
      }
    }
    if (!applies) return Skip();
    return Fail(std::move(findings));
  }
};

}  // namespace

std::unique_ptr<Rule> MakeSharingLimits() { return std::make_unique<SharingLimits>(); }

}  // namespace draguard::engine::rules
