// DG011 selector-validity: CEL selectors compile in the DRA environment and read only what the
// NVIDIA driver publishes.
#include <set>

#include "draguard/cel/checker.h"
#include "draguard/cel/cost.h"
#include "rules/rules.h"
#include "rules/util.h"

namespace draguard::engine::rules {
namespace {

using cel::AttributeReference;

constexpr const char* kGpu = "gpu.nvidia.com";
constexpr const char* kStd = "resource.kubernetes.io";

enum class DeviceType { kFull, kMig, kVfio };

// What one NVIDIA device type publishes (dra-reference.md §4.2).
struct Published {
  std::set<std::string> always;    // every device of the type
  std::set<std::string> optional;  // only some devices / driver versions: guard the read
};

Published Attributes(DeviceType t) {
  switch (t) {
    case DeviceType::kFull:
      return {{"type", "uuid", "productName", "brand", "architecture", "cudaComputeCapability", "driverVersion",
               "cudaDriverVersion"},
              {"addressingMode"}};
    case DeviceType::kMig:
      return {{"type", "uuid", "productName", "brand", "architecture", "cudaComputeCapability", "driverVersion",
               "cudaDriverVersion", "parentUUID", "profile"},
              {"addressingMode"}};
    case DeviceType::kVfio:
      return {{"type", "uuid", "deviceID", "vendorID", "productName"}, {"numa", "iommuFDEnabled"}};
  }
  return {};
}

Published Capacities(DeviceType t) {
  switch (t) {
    case DeviceType::kFull:
      return {{}, {"memory", "multiprocessors", "copyEngines", "decoders", "encoders", "jpegEngines", "ofaEngines"}};
    case DeviceType::kMig:
      return {{"memory", "multiprocessors", "copyEngines", "decoders", "encoders", "jpegEngines", "ofaEngines"}, {}};
    case DeviceType::kVfio:
      return {{}, {"addressableMemory"}};
  }
  return {};
}

// Attributes that existed in older drivers and abort scheduling on current ones.
std::string Removed(const std::string& name) {
  if (name == "index" || name == "minor" || name == "parentIndex") {
    return "existed only in driver v25.3.x (removed in v25.8)";
  }
  if (name == "pcieBusID") return "was replaced by resource.kubernetes.io/pciBusID in driver v25.12";
  if (name == "pcieRoot") return "is a standard attribute: device.attributes['resource.kubernetes.io'].pcieRoot";
  return "";
}

std::string FirstLine(const std::string& s) {
  std::string line = s.substr(0, s.find('\n'));
  return line.size() > 200 ? line.substr(0, 200) + "..." : line;
}

// The API server's field path of a JSON Pointer: /spec/devices/requests/0 -> spec.devices.requests[0].
std::string FieldPath(const std::string& pointer) {
  std::string out;
  size_t i = 1;
  while (i <= pointer.size()) {
    size_t next = pointer.find('/', i);
    std::string seg = pointer.substr(i, next == std::string::npos ? std::string::npos : next - i);
    bool index = !seg.empty() && seg.find_first_not_of("0123456789") == std::string::npos;
    out += index ? "[" + seg + "]" : (out.empty() ? "" : ".") + seg;
    if (next == std::string::npos) break;
    i = next + 1;
  }
  return out;
}

std::string Access(const AttributeReference& r, const std::string& domain) {
  return std::string(r.kind == AttributeReference::Kind::kCapacity ? "device.capacity" : "device.attributes") +
         "['" + domain + "']." + r.name;
}

class SelectorValidity final : public Rule {
 public:
  std::string_view id() const override { return "DG011"; }
  std::string_view name() const override { return "selector-validity"; }
  policy::Action default_action() const override { return policy::Action::kDeny; }

  RuleResult Evaluate(const RuleInput& input) const override {
    auto claim = FindClaim(input.request);
    if (!claim) return Skip();
    const auto& dc = input.policy.device_classes;
    std::vector<Finding> findings;
    bool any = false;
    for (const auto& req : claim->requests) {
      for (const auto& alt : req.alternatives) {
        std::optional<DeviceType> type;
        if (InList(dc.gpu, alt.device_class)) type = DeviceType::kFull;
        else if (InList(dc.mig, alt.device_class)) type = DeviceType::kMig;
        else if (InList(dc.passthrough, alt.device_class)) type = DeviceType::kVfio;
        for (const auto& sel : alt.selectors) {
          any = true;
          std::string who = claim->owner + " " + Describe(alt) + " selector";
          auto compiled = cel::CompileSelector(sel.expression);
          if (!compiled.ok()) {
            auto gated = cel::CompileSelector(sel.expression, cel::DraEnvOptions{true});
            if (gated.ok()) {
              Finding f;
              f.pointer = sel.pointer;
              f.message = who + " uses device.allowMultipleAllocations, which compiles only with the "
                          "DRAConsumableCapacity gate (on by default from Kubernetes 1.36)";
              f.fix = "make sure the gate is on in the API server and scheduler, or drop the field";
              f.cap = policy::Action::kWarn;
              findings.push_back(std::move(f));
              compiled = std::move(gated);
            } else {
              Finding f;
              f.pointer = sel.pointer;
              f.message = who + " does not compile: " + FirstLine(compiled.status().message());
              f.fix = "use only device.driver, device.attributes['<domain>'].<name> and "
                      "device.capacity['<domain>'].<name> (e.g. device.attributes['resource.kubernetes.io'].pcieRoot)";
              findings.push_back(std::move(f));
              continue;
            }
          }
          // The API server's estimated cost check (CELSelectorExpressionMaxCost).
          if (Status cost = cel::CheckCost(*compiled); !cost.ok()) {
            Finding f;
            f.pointer = sel.pointer;
            f.message = who + " is rejected by the API server: " + FieldPath(sel.pointer) + ": Forbidden: " +
                        cost.message();
            f.fix = "bound the work: no macros over lists.range or over values of unknown size, fewer nested "
                    "macros";
            findings.push_back(std::move(f));
            continue;
          }
          if (!type) continue;
          CheckReferences(*compiled, *type, who, sel.pointer, &findings);
        }
      }
    }
    if (!any) return Skip();
    return Fail(std::move(findings));
  }

 private:
  static void CheckReferences(const cel::CheckedExpr& expr, DeviceType type, const std::string& who,
                              const std::string& pointer, std::vector<Finding>* findings) {
    std::set<std::string> seen;
    for (const auto& r : expr.references) {
      if (r.presence_test) continue;
      std::string domain = r.domain.empty() && r.domain_is_driver ? kGpu : r.domain;
      if (domain.empty()) continue;  // computed domain: cannot tell
      bool cap = r.kind == AttributeReference::Kind::kCapacity;
      std::string access = Access(r, domain);
      if (!seen.insert(access).second) continue;
      Finding f;
      f.pointer = pointer;
      auto add = [&](std::string message, std::string fix, bool warn) {
        f.message = who + " reads " + access + ", " + std::move(message);
        f.fix = std::move(fix);
        if (warn) f.cap = policy::Action::kWarn;
        findings->push_back(f);
      };
      std::string guard = "'" + r.name + "' in " + std::string(cap ? "device.capacity" : "device.attributes") +
                          "['" + domain + "'] && " + access;
      if (domain == kStd) {
        if (cap || (r.name != "pcieRoot" && r.name != "pciBusID")) {
          if (!r.guarded) add("which the NVIDIA driver does not publish (scheduling aborts with \"no such key\")",
                              "use resource.kubernetes.io/pcieRoot or pciBusID", false);
        } else if (!r.guarded) {
          add("which not every device publishes (VMs, older drivers); an unguarded read aborts scheduling",
              "guard it: " + guard, true);
        }
        continue;
      }
      if (domain != kGpu) {
        if (!r.guarded) add("but NVIDIA devices publish no domain \"" + domain + "\" (scheduling aborts with \"no such key\")",
                            "use domain gpu.nvidia.com or resource.kubernetes.io", false);
        continue;
      }
      Published pub = cap ? Capacities(type) : Attributes(type);
      Published other = cap ? Attributes(type) : Capacities(type);
      if (pub.always.count(r.name)) continue;
      if (pub.optional.count(r.name)) {
        if (!r.guarded) {
          add("which not every device publishes; an unguarded read aborts scheduling with \"no such key\"",
              "guard it: " + guard, true);
        }
        continue;
      }
      if (cap && type == DeviceType::kMig && r.name.rfind("memorySlice", 0) == 0) {
        if (!r.guarded) add("which only MIG devices on that slice publish", "guard it: " + guard, true);
        continue;
      }
      if (r.guarded) continue;  // a guarded unknown name is merely never true
      std::string removed = cap ? "" : Removed(r.name);
      if (!removed.empty()) {
        add("which " + removed + "; scheduling aborts with \"no such key\"",
            r.name == "pcieBusID" ? "use device.attributes['resource.kubernetes.io'].pciBusID (guarded)"
                                  : "select on uuid, productName or capacity instead",
            false);
      } else if (other.always.count(r.name) || other.optional.count(r.name)) {
        add(std::string("but ") + r.name + " is " + (cap ? "an attribute" : "a capacity"),
            std::string("use ") + (cap ? "device.attributes" : "device.capacity") + "['" + domain + "']." + r.name,
            false);
      } else {
        std::string what = type == DeviceType::kFull ? "full GPUs" : type == DeviceType::kMig ? "MIG devices" : "VFIO devices";
        add("which driver gpu.nvidia.com does not publish for " + what + " (scheduling aborts with \"no such key\")",
            "use a published name (dra-reference §4.2), e.g. productName, uuid, capacity memory", false);
      }
    }
  }
};

}  // namespace

std::unique_ptr<Rule> MakeSelectorValidity() { return std::make_unique<SelectorValidity>(); }

}  // namespace draguard::engine::rules
