// A small Prometheus metrics registry (text exposition format 0.0.4).
//
// Families are created once at start-up and then updated lock-free on the hot path where
// possible (label lookups take a short per-family lock). Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace draguard::metrics {

/// Label values in the order of the family's label names.
using LabelValues = std::vector<std::string>;

/// Hashes label value lists and lists of views alike (LabelValuesEqual compares them).
struct LabelValuesHash {
  using is_transparent = void;  ///< enables lookups by std::span<const std::string_view>
  /// A hash of the values in order.
  template <class A>
  std::size_t operator()(const A& a) const {
    std::size_t h = 0;
    for (const auto& v : a) h = (h ^ std::hash<std::string_view>{}(std::string_view(v))) * 0x100000001b3ULL;
    return h;
  }
};

/// Equality of label value lists and lists of views.
struct LabelValuesEqual {
  using is_transparent = void;  ///< enables lookups by std::span<const std::string_view>
  /// True when both hold the same values in the same order.
  template <class A, class B>
  bool operator()(const A& a, const B& b) const {
    if (a.size() != b.size()) return false;
    auto bi = b.begin();
    for (const auto& v : a) {
      if (std::string_view(v) != std::string_view(*bi++)) return false;
    }
    return true;
  }
};

class CounterTable;

/// One series of a counter family, found once: adding to it takes no lock and no lookup. Valid
/// while its family lives (a counter family never removes a series).
class Counter {
 public:
  /// An empty handle: Inc does nothing.
  Counter() = default;
  /// The series held by `value`.
  explicit Counter(std::atomic<double>* value) : value_(value) {}
  /// Adds `v` (a negative `v` is ignored).
  void Inc(double v = 1.0) const;

 private:
  friend class CounterTable;
  std::atomic<double>* value_ = nullptr;
};

/// A monotonically increasing counter family.
class CounterFamily {
 public:
  CounterFamily(std::string name, std::string help, std::vector<std::string> labels);
  /// Adds `v` to the series with `labels`.
  void Inc(const LabelValues& labels, double v = 1.0);
  /// Adds `v` to each series whose label values lie end to end in `values`, as many per series
  /// as the family has labels, a trailing partial series ignored (one lock for all, no copy: a
  /// review's per-rule results).
  void IncEach(std::span<const std::string_view> values, double v = 1.0);
  /// The series of exactly as many `values` as the family has labels, created at 0 when new.
  Counter Series(std::span<const std::string_view> values);
  /// Sets a series to a total kept elsewhere (mirrors a counter owned by another module).
  void SetTotal(const LabelValues& labels, double total);
  /// Current value of a series (0 when absent).
  double Value(const LabelValues& labels) const;
  /// Appends the exposition text.
  void Render(std::string* out) const;

 private:
  std::string name_, help_;
  std::vector<std::string> labels_;
  mutable std::mutex mu_;
  std::map<LabelValues, std::unique_ptr<std::atomic<double>>> series_;
  // The series of series_ that IncEach asked for, by hash: its lookups compare no label order.
  std::unordered_map<LabelValues, std::atomic<double>*, LabelValuesHash, LabelValuesEqual> index_;
  // The series of `labels`, created at 0 when new; mu_ must be held.
  std::atomic<double>& SlotLocked(const LabelValues& labels);
  // The series of exactly labels_.size() `values`, created at 0 when new; mu_ must be held.
  std::atomic<double>& SlotLocked(std::span<const std::string_view> values);
};

/// Series of one counter family by a dense key the caller assigns to label values (e.g. rule ×
/// action × result): a key's series is found on its first use and then taken from a table, with
/// no lock and no hashing. The caller must give one key the same values every time.
class CounterTable {
 public:
  /// A table of keys 0 .. `keys` - 1 over `family`, which must outlive it.
  CounterTable(CounterFamily& family, std::size_t keys);
  /// Adds `v` to the series of `key`, whose label values are `values`; a key past the table
  /// falls back to the family's lookup.
  void Inc(std::size_t key, std::span<const std::string_view> values, double v = 1.0);

 private:
  CounterFamily& family_;
  std::vector<std::atomic<std::atomic<double>*>> slots_;
};

/// A gauge family (value may go up and down).
class GaugeFamily {
 public:
  GaugeFamily(std::string name, std::string help, std::vector<std::string> labels);
  /// Sets the series with `labels` to `v`.
  void Set(const LabelValues& labels, double v);
  /// Adds `v` (may be negative).
  void Add(const LabelValues& labels, double v);
  /// Replaces every series by `series` at once (a snapshot recomputed as a whole, e.g. per audit run).
  void Replace(const std::map<LabelValues, double>& series);
  /// Current value (0 when absent).
  double Value(const LabelValues& labels) const;
  /// Appends the exposition text.
  void Render(std::string* out) const;

 private:
  std::atomic<double>& Series(const LabelValues& labels);
  std::string name_, help_;
  std::vector<std::string> labels_;
  mutable std::mutex mu_;
  std::map<LabelValues, std::unique_ptr<std::atomic<double>>> series_;
};

/// A histogram family with fixed buckets (upper bounds, seconds or any unit).
class HistogramFamily {
  struct Series;

 public:
  /// One series of the family, found once: observing takes no lock and no lookup. Valid while
  /// the family lives.
  class Handle {
   public:
    /// An empty handle: Observe does nothing.
    Handle() = default;
    /// Records one observation.
    void Observe(double v) const;

   private:
    friend class HistogramFamily;
    Handle(const HistogramFamily* family, Series* series) : family_(family), series_(series) {}
    const HistogramFamily* family_ = nullptr;
    Series* series_ = nullptr;
  };

  HistogramFamily(std::string name, std::string help, std::vector<std::string> labels,
                  std::vector<double> buckets);
  /// Records one observation.
  void Observe(const LabelValues& labels, double v);
  /// The series with `labels`, created empty when new.
  Handle Find(const LabelValues& labels);
  /// Number of observations of a series.
  uint64_t Count(const LabelValues& labels) const;
  /// Appends the exposition text.
  void Render(std::string* out) const;

 private:
  struct Series {
    explicit Series(std::size_t n) : buckets(n) {}
    // Adds `v` to the first bucket whose bound it does not exceed, the count and the sum.
    void Add(const std::vector<double>& bounds, double v);
    std::vector<std::atomic<uint64_t>> buckets;
    std::atomic<uint64_t> count{0};
    std::atomic<double> sum{0};
  };
  std::string name_, help_;
  std::vector<std::string> labels_;
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::map<LabelValues, std::unique_ptr<Series>> series_;
};

/// Owns every family and renders them in registration order.
class Registry {
 public:
  /// Creates a counter family; the registry keeps ownership.
  CounterFamily& Counter(const std::string& name, const std::string& help,
                         std::vector<std::string> labels = {});
  /// Creates a gauge family.
  GaugeFamily& Gauge(const std::string& name, const std::string& help,
                     std::vector<std::string> labels = {});
  /// Creates a histogram family.
  HistogramFamily& Histogram(const std::string& name, const std::string& help,
                             std::vector<std::string> labels, std::vector<double> buckets);
  /// Adds a function run at the start of every Render(), to copy values kept by other
  /// modules (e.g. topology store counters) into families.
  void AddCollector(std::function<void()> collect);
  /// The whole exposition (text/plain; version=0.0.4).
  std::string Render() const;

 private:
  std::vector<std::function<void()>> collectors_;
  struct Entry {
    std::unique_ptr<CounterFamily> counter;
    std::unique_ptr<GaugeFamily> gauge;
    std::unique_ptr<HistogramFamily> histogram;
  };
  mutable std::mutex mu_;
  std::vector<Entry> entries_;
};

/// Escapes a label value for the exposition format (\\, \", \n).
std::string EscapeLabelValue(const std::string& v);

/// The server's metrics, created in one place.
struct ServerMetrics {
  explicit ServerMetrics(Registry& r);
  CounterFamily& requests;        ///< draguard_admission_requests_total{webhook,operation,kind,decision}
  HistogramFamily& duration;      ///< draguard_admission_duration_seconds{webhook}
  GaugeFamily& inflight;          ///< draguard_admission_inflight
  CounterFamily& rule_results;    ///< draguard_rule_results_total{rule,action,result}
  CounterFamily& conversions;     ///< draguard_mutate_conversions_total{reason}
  CounterFamily& scheduler_claims;  ///< draguard_extended_resource_claims_total{creator}
  CounterFamily& policy_reloads;  ///< draguard_policy_reload_total{result}
  CounterFamily& tls_reloads;     ///< draguard_tls_reload_total{result}
  GaugeFamily& cert_expiry;       ///< draguard_tls_cert_expiry_timestamp_seconds
  CounterFamily& http_errors;     ///< draguard_http_errors_total{code}
  CounterFamily& shed;            ///< draguard_connections_shed_total
  GaugeFamily& ready;             ///< draguard_ready
};

/// The topology model's families; their values are copied from the topology store by a
/// collector (Registry::AddCollector) at every Render().
struct TopologyMetrics {
  explicit TopologyMetrics(Registry& r);
  GaugeFamily& nodes;             ///< draguard_topology_nodes
  GaugeFamily& shapes;            ///< draguard_topology_shapes
  CounterFamily& reloads;         ///< draguard_topology_reload_total{result}
  GaugeFamily& last_reload;       ///< draguard_topology_last_reload_timestamp_seconds
  GaugeFamily& reload_duration;   ///< draguard_topology_last_reload_duration_seconds
  CounterFamily& load_errors;     ///< draguard_topology_load_errors_total{reason}
  /// draguard_topology_node_publications{state}: built | waiting (for its shape object) | refused
  GaugeFamily& node_publications;
  GaugeFamily& shape_objects;     ///< draguard_topology_shape_objects{state}: valid | refused
  GaugeFamily& legacy_configmaps; ///< draguard_topology_legacy_configmaps (per-node ConfigMaps of earlier releases)
  CounterFamily& shape_objects_collected;  ///< draguard_topology_shape_objects_collected_total
};

/// The families of `topology export --publish` (the per-node exporter).
struct ExporterMetrics {
  explicit ExporterMetrics(Registry& r);
  CounterFamily& publishes;     ///< draguard_topology_export_publish_total{result}
  CounterFamily& writes;        ///< draguard_topology_export_writes_total{kind} (shape, node, legacy-delete)
  GaugeFamily& last_success;    ///< draguard_topology_export_last_success_timestamp_seconds
  GaugeFamily& nvml_gpus;       ///< draguard_topology_export_nvml_gpus
  GaugeFamily& export_bytes;    ///< draguard_topology_export_bytes
};

/// The background audit's families (`draguard serve --audit-interval`).
struct AuditMetrics {
  explicit AuditMetrics(Registry& r);
  GaugeFamily& violations;     ///< draguard_audit_violations{rule,action,namespace}: findings of the last run
  CounterFamily& objects;      ///< draguard_audit_objects_total: objects judged, over all runs
  GaugeFamily& last_run;       ///< draguard_audit_last_run_timestamp_seconds: end of the last complete run
  GaugeFamily& duration;       ///< draguard_audit_duration_seconds: duration of the last complete run
  CounterFamily& runs;         ///< draguard_audit_runs_total{result}: complete | partial | aborted
  CounterFamily& skipped;      ///< draguard_audit_skipped_kinds_total{kind,reason}: kinds not listed
  CounterFamily& reports;      ///< draguard_audit_report_writes_total{operation}: create | update | delete | unchanged | error
  GaugeFamily& leader;         ///< draguard_audit_leader: 1 while this replica holds the audit Lease
  /// draguard_audit_allocations{alignment,origin,result}: containers with GPUs of the last run by
  /// what their GPUs share, who wrote their claim and the allocation audit's result.
  GaugeFamily& allocations;
};

}  // namespace draguard::metrics
