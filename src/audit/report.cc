#include "draguard/audit/report.h"

#include <iomanip>
#include <sstream>

#include "draguard/yamljson/yamljson.h"

namespace draguard::audit {
namespace {

using admission::Json;

constexpr std::size_t kMaxRefusalReasons = 20;

bool Interesting(const ObjectVerdict& v) {
  return !v.findings.empty() || v.verdict != engine::Verdict::kAllow || v.mutation != MutationOutcome::kNone;
}

Json VerdictJson(const ObjectVerdict& v, const std::string& where) {
  Json j = {{"source", where},
            {"apiVersion", v.api_version},
            {"kind", v.kind},
            {"namespace", v.namespace_},
            {"name", v.name},
            {"verdict", engine::VerdictName(v.verdict)}};
  if (!v.exemption.empty()) j["exemption"] = v.exemption;
  if (v.mutation != MutationOutcome::kNone) {
    j["mutation"] = {{"outcome", MutationOutcomeName(v.mutation)}};
    if (!v.mutation_reason.empty()) j["mutation"]["reason"] = v.mutation_reason;
  }
  Json findings = Json::array();
  for (const auto& f : v.findings) {
    Json fj = {{"rule", f.rule}, {"name", f.name}, {"action", f.action}, {"message", f.message}};
    if (!f.fix.empty()) fj["fix"] = f.fix;
    if (!f.path.empty()) fj["path"] = f.path;
    findings.push_back(std::move(fj));
  }
  j["findings"] = std::move(findings);
  return j;
}

std::string DeviceRef(const LocatedDevice& d) { return d.driver + "/" + d.pool + "/" + d.device; }

Json AllocationJson(const PodAllocation& a) {
  Json j = {{"source", a.where}, {"apiVersion", "v1"}, {"kind", "Pod"}, {"namespace", a.namespace_}, {"name", a.name}};
  if (a.where.empty()) j.erase("source");
  Json containers = Json::array();
  for (const auto& c : a.containers) {
    Json devices = Json::array();
    for (const auto& d : c.devices) {
      Json dj = {{"claim", d.claim}, {"request", d.request}, {"device", DeviceRef(d)}, {"kind", DeviceKindName(d.kind)}};
      if (!d.pci_bus_id.empty()) dj["pciBusID"] = d.pci_bus_id;
      if (!d.pcie_root.empty()) dj["pcieRoot"] = d.pcie_root;
      if (!d.numa.empty()) dj["numaNodes"] = d.numa;
      dj["located"] = d.located;
      devices.push_back(std::move(dj));
    }
    Json cj = {{"container", c.container}, {"alignment", AlignmentName(c.alignment)}, {"origin", ClaimOriginName(c.origin)},
               {"result", c.result},      {"gpus", c.gpus},                        {"message", c.message},
               {"claims", c.claims},      {"devices", std::move(devices)}};
    if (!c.cpu_numa.empty()) cj["cpuNumaNodes"] = c.cpu_numa;
    containers.push_back(std::move(cj));
  }
  j["allocation"] = {{"node", a.node}, {"containers", std::move(containers)}};
  if (!a.missing.empty()) j["allocation"]["missingClaims"] = a.missing;
  return j;
}

// `text` (YAML lines) as one item of a block sequence.
std::string AsListItem(const std::string& text, const std::string& indent) {
  std::string out;
  bool first = true;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    out += indent + (first ? "- " : "  ") + text.substr(pos, nl - pos) + "\n";
    first = false;
    pos = nl + 1;
  }
  return out;
}

std::string Indented(const std::string& text, const std::string& indent) {
  std::string out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    out += indent + text.substr(pos, nl - pos) + "\n";
    pos = nl + 1;
  }
  return out;
}

class TableWriter : public Writer {
 public:
  explicit TableWriter(std::ostream& out) : out_(out) {}
  void Object(const ObjectVerdict& v, const std::string&) override {
    for (const auto& f : v.findings) {
      if (!header_) {
        Row("KIND", "NAMESPACE/NAME", "RULE", "ACTION", "MESSAGE", "PATH");
        header_ = true;
      }
      Row(v.kind, v.namespace_ + "/" + v.name, f.rule, f.action, f.message, f.path);
    }
  }
  void Malformed(const std::string&, const std::string&) override {}
  void Allocation(const PodAllocation& a) override {
    for (const auto& c : a.containers) {
      if (c.result == "pass") continue;
      if (!header_) {
        Row("KIND", "NAMESPACE/NAME", "RULE", "ACTION", "MESSAGE", "PATH");
        header_ = true;
      }
      Row("Pod", a.namespace_ + "/" + a.name, "alloc", c.result, c.message, "");
    }
  }
  void End(const Summary&) override {
    if (!header_) out_ << "No findings.\n";
  }

 private:
  void Row(const std::string& kind, const std::string& name, const std::string& rule, const std::string& action,
           const std::string& message, const std::string& path) {
    out_ << std::left << std::setw(22) << kind << ' ' << std::setw(40) << name << ' ' << std::setw(6) << rule << ' '
         << std::setw(6) << action << ' ' << message;
    if (!path.empty()) out_ << "  (" << path << ")";
    out_ << "\n";
  }
  std::ostream& out_;
  bool header_ = false;
};

class JsonWriter : public Writer {
 public:
  explicit JsonWriter(std::ostream& out) : out_(out) {
    out_ << "{\"apiVersion\": \"draguard.io/v1alpha1\", \"kind\": \"AuditReport\", \"results\": [";
  }
  void Object(const ObjectVerdict& v, const std::string& where) override {
    if (Interesting(v)) Emit(VerdictJson(v, where));
  }
  void Malformed(const std::string& where, const std::string& error) override {
    Emit({{"source", where}, {"error", error}});
  }
  void Allocation(const PodAllocation& a) override { Emit(AllocationJson(a)); }
  void End(const Summary& s) override { out_ << (first_ ? "" : "\n") << "],\n\"summary\": " << s.ToJson().dump(2) << "}\n"; }

 private:
  void Emit(const Json& j) {
    out_ << (first_ ? "\n" : ",\n") << j.dump();
    first_ = false;
  }
  std::ostream& out_;
  bool first_ = true;
};

class YamlWriter : public Writer {
 public:
  explicit YamlWriter(std::ostream& out) : out_(out) { out_ << "apiVersion: draguard.io/v1alpha1\nkind: AuditReport\n"; }
  void Object(const ObjectVerdict& v, const std::string& where) override {
    if (Interesting(v)) Emit(VerdictJson(v, where));
  }
  void Malformed(const std::string& where, const std::string& error) override {
    Emit({{"source", where}, {"error", error}});
  }
  void Allocation(const PodAllocation& a) override { Emit(AllocationJson(a)); }
  void End(const Summary& s) override {
    if (first_) out_ << "results: []\n";
    out_ << "summary:\n" << Indented(yamljson::ToYaml(s.ToJson()), "  ");
  }

 private:
  void Emit(const Json& j) {
    if (first_) out_ << "results:\n";
    first_ = false;
    out_ << AsListItem(yamljson::ToYaml(j), "");
  }
  std::ostream& out_;
  bool first_ = true;
};

class PolicyReportWriter : public Writer {
 public:
  PolicyReportWriter(std::ostream& out, std::size_t max_results) : out_(out), builder_(max_results) {}
  void Object(const ObjectVerdict& v, const std::string&) override { builder_.Add(v); }
  void Malformed(const std::string&, const std::string&) override {}
  void Allocation(const PodAllocation& a) override { builder_.AddAllocation(a); }
  void End(const Summary&) override {
    for (const auto& r : builder_.Reports("draguard", {{"app.kubernetes.io/managed-by", "draguard"}})) {
      out_ << "---\n" << yamljson::ToYaml(r);
    }
  }

 private:
  std::ostream& out_;
  ReportBuilder builder_;
};

}  // namespace

void Summary::Add(const ObjectVerdict& v) {
  ++objects;
  ++verdicts[engine::VerdictName(v.verdict)];
  for (const auto& f : v.findings) ++findings[{f.rule, f.action}];
  switch (v.mutation) {
    case MutationOutcome::kNone: break;
    case MutationOutcome::kConverted: ++converted; break;
    case MutationOutcome::kExempt: ++mutation_exempt; break;
    case MutationOutcome::kRefused: {
      ++refused;
      std::string reason = v.mutation_reason.empty() ? "(no reason given)" : v.mutation_reason;
      if (refusals.count(reason) == 0 && refusals.size() >= kMaxRefusalReasons) reason = "other";
      ++refusals[reason];
      break;
    }
  }
}

void Summary::AddSpread(const ObjectVerdict& v) {
  ++nvlink_spread;
  for (const auto& f : v.findings) ++findings[{f.rule, f.action}];
}

void Summary::AddAllocation(const PodAllocation& a) {
  ++allocation_pods;
  if (!a.missing.empty()) ++allocation_unresolved;
  for (const auto& c : a.containers) ++allocations[{AlignmentName(c.alignment), ClaimOriginName(c.origin), c.result}];
}

std::uint64_t Summary::allocation_results(const std::string& result) const {
  std::uint64_t n = 0;
  for (const auto& [key, count] : allocations) n += std::get<2>(key) == result ? count : 0;
  return n;
}

void Summary::Merge(const Summary& o) {
  documents += o.documents;
  objects += o.objects;
  skipped += o.skipped;
  malformed += o.malformed;
  for (const auto& [k, n] : o.verdicts) verdicts[k] += n;
  for (const auto& [k, n] : o.findings) findings[k] += n;
  converted += o.converted;
  refused += o.refused;
  mutation_exempt += o.mutation_exempt;
  for (const auto& [reason, n] : o.refusals) {
    std::string r = refusals.count(reason) == 0 && refusals.size() >= kMaxRefusalReasons ? "other" : reason;
    refusals[r] += n;
  }
  allocation_pods += o.allocation_pods;
  allocation_unresolved += o.allocation_unresolved;
  for (const auto& [k, n] : o.allocations) allocations[k] += n;
  nvlink_spread += o.nvlink_spread;
}

std::uint64_t Summary::denied() const {
  auto it = verdicts.find("deny");
  return it == verdicts.end() ? 0 : it->second;
}

Json Summary::ToJson() const {
  Json j = {{"documents", documents}, {"objects", objects}, {"skipped", skipped}, {"malformed", malformed}};
  j["verdicts"] = Json::object();
  for (const auto& [k, n] : verdicts) j["verdicts"][k] = n;
  Json f = Json::array();
  for (const auto& [key, n] : findings) f.push_back({{"rule", key.first}, {"action", key.second}, {"count", n}});
  j["findings"] = std::move(f);
  Json r = Json::array();
  for (const auto& [reason, n] : refusals) r.push_back({{"reason", reason}, {"count", n}});
  j["mutation"] = {{"converted", converted}, {"refused", refused}, {"exempt", mutation_exempt}, {"refusals", std::move(r)}};
  Json containers = Json::array();
  for (const auto& [key, n] : allocations) {
    containers.push_back({{"alignment", std::get<0>(key)}, {"origin", std::get<1>(key)}, {"result", std::get<2>(key)},
                          {"count", n}});
  }
  j["allocations"] = {{"pods", allocation_pods}, {"unresolved", allocation_unresolved}, {"containers", std::move(containers)}};
  j["nvlinkSpread"] = nvlink_spread;
  return j;
}

std::string SummaryText(const Summary& s) {
  std::ostringstream o;
  o << s.documents << " documents read: " << s.objects << " objects judged, " << s.skipped
    << " of kinds draguard does not review, " << s.malformed << " malformed\n";
  o << "verdicts:";
  if (s.verdicts.empty()) o << " none";
  for (const auto& [k, n] : s.verdicts) o << " " << k << "=" << n;
  o << "\n";
  if (!s.findings.empty()) {
    o << "findings:";
    for (const auto& [key, n] : s.findings) o << " " << key.first << "/" << key.second << "=" << n;
    o << "\n";
  }
  o << "mutation: " << s.converted << " would be converted by /mutate, " << s.refused << " refused, "
    << s.mutation_exempt << " exempt\n";
  for (const auto& [reason, n] : s.refusals) o << "  refused (" << n << "): " << reason << "\n";
  if (s.nvlink_spread > 0) o << "nvlink: " << s.nvlink_spread << " running job units span NVLink cliques (DG017)\n";
  if (s.allocation_pods > 0) {
    std::map<std::string, std::uint64_t> by_alignment;
    std::uint64_t containers = 0;
    for (const auto& [key, n] : s.allocations) {
      by_alignment[std::get<0>(key)] += n;
      containers += n;
    }
    o << "allocations: " << s.allocation_pods << " Pods, " << containers << " containers with GPUs:";
    for (const auto& [k, n] : by_alignment) o << " " << k << "=" << n;
    o << "; fail=" << s.allocation_results("fail") << " warn=" << s.allocation_results("warn");
    if (s.allocation_unresolved > 0) o << "; " << s.allocation_unresolved << " Pods use claims not in the input";
    o << "\n";
  }
  return o.str();
}

const char* ReportResult(const std::string& action) {
  if (action == "deny" || action == "audit") return "fail";
  if (action == "warn") return "warn";
  return "error";
}

void ReportBuilder::Add(const ObjectVerdict& v) {
  Report& r = reports_[v.namespace_];
  if (v.verdict == engine::Verdict::kExempt) {
    ++r.skip;
    return;
  }
  if (v.findings.empty()) {
    ++r.pass;
    return;
  }
  Json resource = {{"apiVersion", v.api_version}, {"kind", v.kind}, {"name", v.name}};
  if (!v.namespace_.empty()) resource["namespace"] = v.namespace_;
  if (!v.uid.empty()) resource["uid"] = v.uid;
  for (const auto& f : v.findings) {
    const std::string result = ReportResult(f.action);
    if (result == "fail") {
      ++r.fail;
    } else if (result == "warn") {
      ++r.warn;
    } else {
      ++r.error;
    }
    if (r.results.size() >= max_results_) {
      ++r.dropped;
      continue;
    }
    Json properties = {{"action", f.action}, {"ruleName", f.name}};
    if (!f.path.empty()) properties["path"] = f.path;
    if (!f.fix.empty()) properties["fix"] = f.fix;
    r.results.push_back({{"policy", "draguard"},
                         {"rule", f.rule},
                         {"result", result},
                         {"scored", true},
                         {"source", "draguard"},
                         {"message", f.message},
                         {"properties", std::move(properties)},
                         {"resources", Json::array({resource})}});
  }
}

void ReportBuilder::AddAllocation(const PodAllocation& a) {
  for (const auto& c : a.containers) {
    if (!Reportable(c)) continue;
    Report& r = reports_[a.namespace_];
    std::string devices;
    for (const auto& d : c.devices) devices += (devices.empty() ? "" : ", ") + DeviceRef(d);
    std::string claims;
    for (const auto& n : c.claims) claims += (claims.empty() ? "" : ", ") + n;
    Json resource = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"name", a.name}, {"namespace", a.namespace_}};
    if (!a.uid.empty()) resource["uid"] = a.uid;
    Json result = {{"policy", "draguard"},
                   {"rule", "allocation"},
                   {"result", c.result},
                   {"scored", true},
                   {"source", "draguard"},
                   {"message", c.message},
                   {"properties",
                    {{"container", c.container},
                     {"alignment", AlignmentName(c.alignment)},
                     {"origin", ClaimOriginName(c.origin)},
                     {"node", c.node},
                     {"devices", devices},
                     {"claims", claims}}},
                   {"resources", Json::array({resource})}};
    if (c.result == "pass") {
      ++r.pass;
      if (r.passes.size() < max_results_) {
        r.passes.push_back(std::move(result));
      } else {
        ++r.dropped;
      }
      continue;
    }
    ++(c.result == "fail" ? r.fail : r.warn);
    if (r.results.size() >= max_results_) {
      ++r.dropped;
      continue;
    }
    r.results.push_back(std::move(result));
  }
}

void ReportBuilder::Merge(const ReportBuilder& other) {
  for (const auto& [ns, o] : other.reports_) {
    Report& r = reports_[ns];
    r.pass += o.pass;
    r.fail += o.fail;
    r.warn += o.warn;
    r.error += o.error;
    r.skip += o.skip;
    r.dropped += o.dropped;
    for (const auto& result : o.results) {
      if (r.results.size() >= max_results_) {
        ++r.dropped;
      } else {
        r.results.push_back(result);
      }
    }
    for (const auto& result : o.passes) {
      if (r.passes.size() >= max_results_) {
        ++r.dropped;
      } else {
        r.passes.push_back(result);
      }
    }
  }
}

std::vector<Json> ReportBuilder::Reports(const std::string& name,
                                         const std::map<std::string, std::string>& labels) const {
  std::vector<Json> out;
  for (const auto& [ns, r] : reports_) {
    // Passing allocation results take the room the others leave.
    Json results = r.results;
    std::uint64_t dropped = r.dropped;
    for (const auto& p : r.passes) {
      if (results.size() < max_results_) {
        results.push_back(p);
      } else {
        ++dropped;
      }
    }
    Json metadata = {{"name", name}};
    if (!ns.empty()) metadata["namespace"] = ns;
    if (!labels.empty()) metadata["labels"] = labels;
    if (dropped > 0) {
      metadata["annotations"] = {{"draguard.io/results-dropped", std::to_string(dropped)}};
    }
    out.push_back({{"apiVersion", "wgpolicyk8s.io/v1alpha2"},
                   {"kind", ns.empty() ? "ClusterPolicyReport" : "PolicyReport"},
                   {"metadata", std::move(metadata)},
                   {"summary", {{"pass", r.pass}, {"fail", r.fail}, {"warn", r.warn}, {"error", r.error}, {"skip", r.skip}}},
                   {"results", std::move(results)}});
  }
  return out;
}

std::unique_ptr<Writer> MakeWriter(std::string_view format, std::ostream& out, std::size_t max_results) {
  if (format == "table") return std::make_unique<TableWriter>(out);
  if (format == "json") return std::make_unique<JsonWriter>(out);
  if (format == "yaml") return std::make_unique<YamlWriter>(out);
  if (format == "policyreport") return std::make_unique<PolicyReportWriter>(out, max_results);
  return nullptr;
}

}  // namespace draguard::audit
