#include "rules/util.h"

#include <cctype>

#include "draguard/cel/parser.h"
#include "draguard/dra/selector_analysis.h"

namespace draguard::engine::rules {

RuleResult NamespaceGatedFindings(const RuleInput& input, const std::vector<std::string>& allowed,
                                  const std::function<bool(const Alternative&)>& flagged,
                                  const std::function<GatedFinding(const ClaimRef&, const Alternative&)>& describe) {
  auto claim = FindClaim(input.request);
  if (!claim) return Skip();
  std::vector<Finding> findings;
  if (NamespaceAllowed(allowed, input.request.namespace_)) return Fail(std::move(findings));
  for (const auto& req : claim->requests) {
    for (const auto& alt : req.alternatives) {
      if (!flagged(alt)) continue;
      GatedFinding g = describe(*claim, alt);
      Finding f;
      f.pointer = alt.pointer + "/" + g.field;
      f.message = std::move(g.message);
      f.fix = std::move(g.fix);
      findings.push_back(std::move(f));
    }
  }
  return Fail(std::move(findings));
}

bool IsDnsLabel(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && !(c == '-' && i != 0 && i + 1 != s.size())) return false;
  }
  return true;
}

bool IsDnsSubdomain(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  std::size_t start = 0;
  while (true) {
    std::size_t dot = s.find('.', start);
    if (!IsDnsLabel(s.substr(start, dot == std::string::npos ? std::string::npos : dot - start))) return false;
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

bool IsCIdentifier(const std::string& s) {
  if (s.empty() || s.size() > 32) return false;
  if (!(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

bool ForEachCombination(const ClaimRef& claim, std::size_t limit,
                        const std::function<void(const Combination&)>& fn) {
  std::vector<const DeviceRequestRef*> reqs;
  std::size_t total = 1;
  for (const auto& r : claim.requests) {
    if (r.alternatives.empty()) continue;
    reqs.push_back(&r);
    total *= r.alternatives.size();
    if (total > limit) return false;
  }
  std::vector<std::size_t> idx(reqs.size(), 0);
  Combination combo(reqs.size());
  for (std::size_t n = 0; n < total; ++n) {
    for (std::size_t i = 0; i < reqs.size(); ++i) combo[i] = &reqs[i]->alternatives[idx[i]];
    fn(combo);
    for (std::size_t i = reqs.size(); i-- > 0;) {
      if (++idx[i] < reqs[i]->alternatives.size()) break;
      idx[i] = 0;
    }
  }
  return true;
}

bool Names(const ConstraintRef& c, const Alternative& alt) {
  if (c.requests.empty()) return true;
  return InList(c.requests, alt.ref.substr(0, alt.ref.find('/'))) || InList(c.requests, alt.ref);
}

bool CoversAll(const ConstraintRef& c, const std::vector<const Alternative*>& alts) {
  if (c.match_attribute != kPcieRoot) return false;
  for (const auto* a : alts) {
    if (!Names(c, *a)) return false;
  }
  return true;
}

DeviceRole RoleOf(const Alternative& alt, const policy::Policy& policy) {
  if (policy.device_classes.IsGpuClass(alt.device_class)) return DeviceRole::kGpu;
  if (policy.device_classes.IsCpuClass(alt.device_class)) return DeviceRole::kCpu;
  if (!alt.device_class.empty() && alt.device_class == policy.mutation.nic.device_class) return DeviceRole::kNic;
  return DeviceRole::kOther;
}

bool AlignsWith(const ConstraintRef& c, const Alternative& alt, const policy::Policy& policy) {
  if (!Names(c, alt)) return false;
  const std::string& attr = c.match_attribute;
  if (attr == kPcieRoot || attr == kNumaNode) return true;
  switch (RoleOf(alt, policy)) {
    case DeviceRole::kNic: return attr == policy.mutation.nic.driver + "/numaNode";
    case DeviceRole::kCpu: return attr == "dra.net/numaNode" || attr == "dra.cpu/numaNodeID";
    default: return false;
  }
}

bool OneConstraintAligns(const ClaimRef& claim, const std::vector<const Alternative*>& alts,
                         const policy::Policy& policy) {
  for (const auto& c : claim.constraints) {
    bool all = true;
    for (const auto* a : alts) all = all && AlignsWith(c, *a, policy);
    if (all) return true;
  }
  return false;
}

bool PcieRootCovers(const ClaimRef& claim, const std::vector<const Alternative*>& alts) {
  for (const auto& c : claim.constraints) {
    if (CoversAll(c, alts)) return true;
  }
  return false;
}

bool SelectorAligned(const Alternative& alt) {
  for (const auto& s : alt.selectors) {
    auto ast = cel::Parse(s.expression);
    if (!ast.ok()) continue;
    auto root = ConjunctRestriction(*ast->root, "resource.kubernetes.io", "pcieRoot", false);
    if (root && !root->empty()) return true;
    auto uuid = ConjunctRestriction(*ast->root, "gpu.nvidia.com", "uuid", true);
    if (uuid && !uuid->empty()) return true;
    auto numa = ConjunctRestriction(*ast->root, "resource.kubernetes.io", "numaNode", false);
    if (numa && !numa->empty()) return true;
  }
  return false;
}

bool DeclaresNvlink(const ClaimRef& claim) {
  auto it = claim.annotations.find(kInterconnectAnnotation);
  return it != claim.annotations.end() && it->second == "nvlink";
}

bool AlignmentCovers(const ClaimRef& claim, const std::vector<const Alternative*>& alts,
                     const policy::Policy& policy) {
  if (OneConstraintAligns(claim, alts, policy)) return true;
  bool nvlink = DeclaresNvlink(claim);
  for (const auto* a : alts) {
    if (nvlink && policy.device_classes.IsGpuClass(a->device_class)) continue;
    if (!SelectorAligned(*a)) return false;
  }
  return true;
}

std::string DescribeCombination(const std::vector<const Alternative*>& alts) {
  std::string out;
  for (const auto* a : alts) {
    if (!out.empty()) out += ", ";
    out += "\"" + a->ref + "\"";
    if (a->all) out += " (All)";
    else if (a->count > 1) out += " x" + std::to_string(a->count);
  }
  return out;
}

}  // namespace draguard::engine::rules

namespace draguard::engine::rules {

std::optional<SharingInfo> ReadSharing(const ConfigRef& config) {
  if (config.driver != "gpu.nvidia.com" || config.parameters == nullptr || !config.parameters->is_object()) {
    return std::nullopt;
  }
  SharingInfo s;
  s.kind = StringMember(config.parameters, "kind");
  const admission::Json* sharing = Member(config.parameters, "sharing");
  if (sharing == nullptr || !sharing->is_object()) return s;
  s.has_sharing = true;
  s.strategy = StringMember(sharing, "strategy");
  s.has_time_slicing_config = Member(sharing, "timeSlicingConfig") != nullptr;
  const admission::Json* mps = Member(sharing, "mpsConfig");
  s.has_thread_percentage = Member(mps, "defaultActiveThreadPercentage") != nullptr;
  const admission::Json* per = Member(mps, "defaultPerDevicePinnedMemoryLimit");
  s.has_pinned_limit = Member(mps, "defaultPinnedDeviceMemoryLimit") != nullptr ||
                       (per != nullptr && per->is_object() && !per->empty());
  return s;
}

std::vector<const Alternative*> ConfigTargets(const ClaimRef& claim, const ConfigRef& config) {
  std::vector<const Alternative*> out;
  for (const auto& r : claim.requests) {
    for (const auto& a : r.alternatives) {
      if (config.requests.empty() || InList(config.requests, r.name) || InList(config.requests, a.ref)) {
        out.push_back(&a);
      }
    }
  }
  return out;
}

}  // namespace draguard::engine::rules
