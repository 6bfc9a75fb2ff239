#include "draguard/metrics/metrics.h"

#include <cmath>
#include <cstdio>
#include <utility>

namespace draguard::metrics {
namespace {

void AtomicAdd(std::atomic<double>& a, double v) {
  double cur = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(cur, cur + v, std::memory_order_relaxed)) {
  }
}

std::string FormatDouble(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string LabelText(const std::vector<std::string>& names, const LabelValues& values,
                      const std::string& extra = {}) {
  std::string s;
  for (std::size_t i = 0; i < names.size() && i < values.size(); ++i) {
    if (!s.empty()) s += ',';
    s += names[i] + "=\"" + EscapeLabelValue(values[i]) + "\"";
  }
  if (!extra.empty()) {
    if (!s.empty()) s += ',';
    s += extra;
  }
  return s.empty() ? "" : "{" + s + "}";
}

void Header(std::string* out, const std::string& name, const std::string& help,
            const char* type) {
  *out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

LabelValues Normalize(const LabelValues& v, std::size_t n) {
  LabelValues out = v;
  out.resize(n);
  return out;
}

}  // namespace

std::string EscapeLabelValue(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

CounterFamily::CounterFamily(std::string name, std::string help, std::vector<std::string> labels)
    : name_(std::move(name)), help_(std::move(help)), labels_(std::move(labels)) {}

std::atomic<double>& CounterFamily::SlotLocked(const LabelValues& labels) {
  // The common case, a known series named in full, is found without copying the labels.
  if (labels.size() == labels_.size()) {
    if (auto it = series_.find(labels); it != series_.end()) return *it->second;
  }
  auto& slot = series_[Normalize(labels, labels_.size())];
  if (!slot) slot = std::make_unique<std::atomic<double>>(0.0);
  return *slot;
}

void CounterFamily::Inc(const LabelValues& labels, double v) {
  if (v < 0) return;
  std::atomic<double>* a;
  {
    std::lock_guard<std::mutex> lock(mu_);
    a = &SlotLocked(labels);
  }
  AtomicAdd(*a, v);
}

std::atomic<double>& CounterFamily::SlotLocked(std::span<const std::string_view> values) {
  if (auto it = index_.find(values); it != index_.end()) return *it->second;
  LabelValues labels(values.begin(), values.end());
  auto& slot = series_[labels];
  if (!slot) slot = std::make_unique<std::atomic<double>>(0.0);
  index_.emplace(std::move(labels), slot.get());
  return *slot;
}

void CounterFamily::IncEach(std::span<const std::string_view> values, double v) {
  if (v < 0) return;
  const std::size_t n = labels_.size();
  if (n == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (std::size_t i = 0; i + n <= values.size(); i += n) AtomicAdd(SlotLocked(values.subspan(i, n)), v);
}

Counter CounterFamily::Series(std::span<const std::string_view> values) {
  if (values.size() != labels_.size()) {
    std::vector<std::string> labels(values.begin(), values.end());
    std::lock_guard<std::mutex> lock(mu_);
    return Counter(&SlotLocked(labels));
  }
  std::lock_guard<std::mutex> lock(mu_);
  return Counter(&SlotLocked(values));
}

void Counter::Inc(double v) const {
  if (value_ != nullptr && v >= 0) AtomicAdd(*value_, v);
}

CounterTable::CounterTable(CounterFamily& family, std::size_t keys) : family_(family), slots_(keys) {}

void CounterTable::Inc(std::size_t key, std::span<const std::string_view> values, double v) {
  if (key >= slots_.size()) {
    family_.Series(values).Inc(v);
    return;
  }
  std::atomic<double>* a = slots_[key].load(std::memory_order_acquire);
  if (a == nullptr) {
    // Two threads may resolve the same key at once: both find the same series.
    a = family_.Series(values).value_;
    slots_[key].store(a, std::memory_order_release);
  }
  Counter(a).Inc(v);
}

void CounterFamily::SetTotal(const LabelValues& labels, double total) {
  std::lock_guard<std::mutex> lock(mu_);
  SlotLocked(labels).store(total);
}

double CounterFamily::Value(const LabelValues& labels) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = series_.find(Normalize(labels, labels_.size()));
  return it == series_.end() ? 0.0 : it->second->load();
}

void CounterFamily::Render(std::string* out) const {
  Header(out, name_, help_, "counter");
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [lv, v] : series_) {
    *out += name_ + LabelText(labels_, lv) + " " + FormatDouble(v->load()) + "\n";
  }
}

GaugeFamily::GaugeFamily(std::string name, std::string help, std::vector<std::string> labels)
    : name_(std::move(name)), help_(std::move(help)), labels_(std::move(labels)) {}

std::atomic<double>& GaugeFamily::Series(const LabelValues& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = series_[Normalize(labels, labels_.size())];
  if (!slot) slot = std::make_unique<std::atomic<double>>(0.0);
  return *slot;
}

void GaugeFamily::Set(const LabelValues& labels, double v) { Series(labels).store(v); }

void GaugeFamily::Add(const LabelValues& labels, double v) { AtomicAdd(Series(labels), v); }

void GaugeFamily::Replace(const std::map<LabelValues, double>& series) {
  std::lock_guard<std::mutex> lock(mu_);
  series_.clear();
  for (const auto& [lv, v] : series) {
    series_.emplace(Normalize(lv, labels_.size()), std::make_unique<std::atomic<double>>(v));
  }
}

double GaugeFamily::Value(const LabelValues& labels) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = series_.find(Normalize(labels, labels_.size()));
  return it == series_.end() ? 0.0 : it->second->load();
}

void GaugeFamily::Render(std::string* out) const {
  Header(out, name_, help_, "gauge");
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [lv, v] : series_) {
    *out += name_ + LabelText(labels_, lv) + " " + FormatDouble(v->load()) + "\n";
  }
}

HistogramFamily::HistogramFamily(std::string name, std::string help,
                                 std::vector<std::string> labels, std::vector<double> buckets)
    : name_(std::move(name)),
      help_(std::move(help)),
      labels_(std::move(labels)),
      bounds_(std::move(buckets)) {}

HistogramFamily::Handle HistogramFamily::Find(const LabelValues& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  // A known series named in full is found without copying the labels.
  auto it = labels.size() == labels_.size() ? series_.find(labels) : series_.end();
  if (it != series_.end()) return Handle(this, it->second.get());
  auto& slot = series_[Normalize(labels, labels_.size())];
  if (!slot) slot = std::make_unique<Series>(bounds_.size());
  return Handle(this, slot.get());
}

void HistogramFamily::Series::Add(const std::vector<double>& bounds, double v) {
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    if (v <= bounds[i]) {
      buckets[i].fetch_add(1, std::memory_order_relaxed);
      break;
    }
  }
  count.fetch_add(1, std::memory_order_relaxed);
  AtomicAdd(sum, v);
}

void HistogramFamily::Handle::Observe(double v) const {
  if (series_ != nullptr) series_->Add(family_->bounds_, v);
}

void HistogramFamily::Observe(const LabelValues& labels, double v) { Find(labels).Observe(v); }

uint64_t HistogramFamily::Count(const LabelValues& labels) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = series_.find(Normalize(labels, labels_.size()));
  return it == series_.end() ? 0 : it->second->count.load();
}

void HistogramFamily::Render(std::string* out) const {
  Header(out, name_, help_, "histogram");
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [lv, s] : series_) {
    uint64_t cumulative = 0;
    for (std::size_t i = 0; i < bounds_.size(); ++i) {
      cumulative += s->buckets[i].load();
      *out += name_ + "_bucket" + LabelText(labels_, lv, "le=\"" + FormatDouble(bounds_[i]) + "\"") +
              " " + std::to_string(cumulative) + "\n";
    }
    *out += name_ + "_bucket" + LabelText(labels_, lv, "le=\"+Inf\"") + " " +
            std::to_string(s->count.load()) + "\n";
    *out += name_ + "_sum" + LabelText(labels_, lv) + " " + FormatDouble(s->sum.load()) + "\n";
    *out += name_ + "_count" + LabelText(labels_, lv) + " " + std::to_string(s->count.load()) + "\n";
  }
}

CounterFamily& Registry::Counter(const std::string& name, const std::string& help,
                                 std::vector<std::string> labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry e;
  e.counter = std::make_unique<CounterFamily>(name, help, std::move(labels));
  entries_.push_back(std::move(e));
  return *entries_.back().counter;
}

GaugeFamily& Registry::Gauge(const std::string& name, const std::string& help,
                             std::vector<std::string> labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry e;
  e.gauge = std::make_unique<GaugeFamily>(name, help, std::move(labels));
  entries_.push_back(std::move(e));
  return *entries_.back().gauge;
}

HistogramFamily& Registry::Histogram(const std::string& name, const std::string& help,
                                     std::vector<std::string> labels,
                                     std::vector<double> buckets) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry e;
  e.histogram = std::make_unique<HistogramFamily>(name, help, std::move(labels), std::move(buckets));
  entries_.push_back(std::move(e));
  return *entries_.back().histogram;
}

void Registry::AddCollector(std::function<void()> collect) {
  std::lock_guard<std::mutex> lock(mu_);
  collectors_.push_back(std::move(collect));
}

std::string Registry::Render() const {
  std::vector<std::function<void()>> collectors;
  {
    std::lock_guard<std::mutex> lock(mu_);
    collectors = collectors_;
  }
  for (const auto& c : collectors) c();
  std::string out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& e : entries_) {
    if (e.counter) e.counter->Render(&out);
    if (e.gauge) e.gauge->Render(&out);
    if (e.histogram) e.histogram->Render(&out);
  }
  return out;
}

ServerMetrics::ServerMetrics(Registry& r)
    : requests(r.Counter("draguard_admission_requests_total",
                         "Admission reviews answered, by webhook, operation, kind and decision.",
                         {"webhook", "operation", "kind", "decision"})),
      duration(r.Histogram("draguard_admission_duration_seconds",
                           "Time from request body received to response encoded.", {"webhook"},
                           {50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3,
                            50e-3, 100e-3, 250e-3, 500e-3, 1.0, 2.5, 5.0})),
      inflight(r.Gauge("draguard_admission_inflight", "Admission reviews being processed.")),
      rule_results(r.Counter("draguard_rule_results_total",
                             "Rule evaluations by rule, effective action and result.",
                             {"rule", "action", "result"})),
      conversions(r.Counter("draguard_mutate_conversions_total",
                            "Pod CREATEs judged by /mutate, by how the conversion ended (a closed set of reasons).",
                            {"reason"})),
      scheduler_claims(r.Counter("draguard_extended_resource_claims_total",
                                 "ResourceClaims carrying resource.kubernetes.io/extended-resource-claim reviewed by "
                                 "/validate, by creator: scheduler (a trusted scheduler, admitted as the Pod's "
                                 "request) or other (judged like any claim).",
                                 {"creator"})),
      policy_reloads(r.Counter("draguard_policy_reload_total", "Policy (re)loads by result.",
                               {"result"})),
      tls_reloads(r.Counter("draguard_tls_reload_total",
                            "Serving certificate (re)loads by result.", {"result"})),
      cert_expiry(r.Gauge("draguard_tls_cert_expiry_timestamp_seconds",
                          "Unix time at which the serving certificate expires.")),
      http_errors(r.Counter("draguard_http_errors_total",
                            "Requests answered with an HTTP error, by status code.", {"code"})),
      shed(r.Counter("draguard_connections_shed_total",
                     "Connections answered 503 because the worker queue was full.")),
      ready(r.Gauge("draguard_ready", "1 when /readyz reports ready.")) {}

TopologyMetrics::TopologyMetrics(Registry& r)
    : nodes(r.Gauge("draguard_topology_nodes", "Nodes in the topology model.")),
      shapes(r.Gauge("draguard_topology_shapes", "Distinct hardware shapes in the topology model.")),
      reloads(r.Counter("draguard_topology_reload_total", "Topology reloads by result.", {"result"})),
      last_reload(r.Gauge("draguard_topology_last_reload_timestamp_seconds",
                          "Unix time of the last topology reload.")),
      reload_duration(r.Gauge("draguard_topology_last_reload_duration_seconds",
                              "Duration of the last topology reload.")),
      load_errors(r.Counter("draguard_topology_load_errors_total", "Refused hwloc exports by reason.",
                            {"reason"})),
      node_publications(r.Gauge("draguard_topology_node_publications",
                                "Node topology publications by state (built, waiting for the shape object, refused).",
                                {"state"})),
      shape_objects(r.Gauge("draguard_topology_shape_objects", "Shape objects by state (valid, refused).", {"state"})),
      legacy_configmaps(r.Gauge("draguard_topology_legacy_configmaps",
                                "Per-node topology ConfigMaps of earlier releases being read.")),
      shape_objects_collected(r.Counter("draguard_topology_shape_objects_collected_total",
                                        "Shape objects this replica deleted because no node used them.")) {}

ExporterMetrics::ExporterMetrics(Registry& r)
    : publishes(r.Counter("draguard_topology_export_publish_total", "Export publish attempts by result.",
                          {"result"})),
      writes(r.Counter("draguard_topology_export_writes_total", "API writes by kind (shape: a shape object created, node: a Node's label and annotation, legacy-delete: the per-node ConfigMap of an earlier release deleted).",
                       {"kind"})),
      last_success(r.Gauge("draguard_topology_export_last_success_timestamp_seconds",
                           "Unix time of the last successful publish.")),
      nvml_gpus(r.Gauge("draguard_topology_export_nvml_gpus", "GPUs NVML reported in the last export.")),
      export_bytes(r.Gauge("draguard_topology_export_bytes", "Size of the last export in bytes.")) {}

AuditMetrics::AuditMetrics(Registry& r)
    : violations(r.Gauge("draguard_audit_violations",
                         "Findings of the last background audit run by rule, action and namespace (namespaces "
                         "beyond the cap are summed as \"other\").",
                         {"rule", "action", "namespace"})),
      objects(r.Counter("draguard_audit_objects_total", "Objects judged by the background audit.")),
      last_run(r.Gauge("draguard_audit_last_run_timestamp_seconds", "Unix time the last audit run ended.")),
      duration(r.Gauge("draguard_audit_duration_seconds", "Duration of the last audit run.")),
      runs(r.Counter("draguard_audit_runs_total", "Background audit runs by result.", {"result"})),
      skipped(r.Counter("draguard_audit_skipped_kinds_total", "Kinds an audit run could not list, by reason.",
                        {"kind", "reason"})),
      reports(r.Counter("draguard_audit_report_writes_total", "PolicyReport writes by operation.", {"operation"})),
      leader(r.Gauge("draguard_audit_leader", "1 while this replica holds the audit Lease.")),
      allocations(r.Gauge("draguard_audit_allocations",
                          "Containers with GPUs in the last background audit run by what their GPUs share "
                          "(single, nvlink, pcie-root, numa, none, unknown), who wrote their claim (scheduler, "
                          "draguard, user) and the result (pass, warn, fail).",
                          {"alignment", "origin", "result"})) {}

}  // namespace draguard::metrics
