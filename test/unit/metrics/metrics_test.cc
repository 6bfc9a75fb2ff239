#include "draguard/metrics/metrics.h"

#include <thread>

#include <gtest/gtest.h>

namespace draguard::metrics {
namespace {

TEST(Metrics, RendersPrometheusTextFormat) {
  Registry r;
  auto& c = r.Counter("x_total", "Things.", {"a", "b"});
  c.Inc({"1", "q\"uote"});
  c.Inc({"1", "q\"uote"}, 2);
  auto& g = r.Gauge("g", "Gauge.");
  g.Set({}, 5);
  g.Add({}, -2);
  auto& h = r.Histogram("h_seconds", "Hist.", {"w"}, {0.001, 0.01});
  h.Observe({"v"}, 0.0005);
  h.Observe({"v"}, 0.005);
  h.Observe({"v"}, 1);
  std::string text = r.Render();
  EXPECT_NE(text.find("# HELP x_total Things.\n# TYPE x_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("x_total{a=\"1\",b=\"q\\\"uote\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE g gauge\ng 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("h_seconds_bucket{w=\"v\",le=\"0.001\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("h_seconds_bucket{w=\"v\",le=\"0.01\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("h_seconds_bucket{w=\"v\",le=\"+Inf\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("h_seconds_count{w=\"v\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("h_seconds_sum{w=\"v\"} 1.0055"), std::string::npos) << text;
}

TEST(Metrics, CountersAreThreadSafe) {
  Registry r;
  auto& c = r.Counter("c_total", "C.", {"k"});
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) c.Inc({"x"});
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(c.Value({"x"}), 40000);
}

TEST(Metrics, IncEachAddsToEverySeriesLikeInc) {
  Registry r;
  auto& c = r.Counter("r_total", "R.", {"rule", "action", "result"});
  c.Inc({"DG001", "deny", "fail"});
  // Repeated and new series, three values each; a trailing partial series is ignored.
  const std::vector<std::string_view> values = {"DG001", "deny", "fail", "DG002", "warn", "pass",
                                                "DG001", "deny", "fail", "DG003", "", "",
                                                "DG004", "deny"};
  c.IncEach(values);
  c.IncEach({}, 5);
  const std::vector<std::string_view> negative = {"DG002", "warn", "pass"};
  c.IncEach(negative, -1);  // negative: ignored, as by Inc
  EXPECT_EQ(c.Value({"DG001", "deny", "fail"}), 3);
  EXPECT_EQ(c.Value({"DG002", "warn", "pass"}), 1);
  EXPECT_EQ(c.Value({"DG003", "", ""}), 1);
  EXPECT_EQ(c.Value({"DG003"}), 1);
  EXPECT_EQ(c.Value({"DG004", "deny", ""}), 0);
  // The series made by IncEach and by Inc are one and the same, in the exposition too.
  std::string text;
  c.Render(&text);
  EXPECT_NE(text.find("r_total{rule=\"DG001\",action=\"deny\",result=\"fail\"} 3\n"), std::string::npos) << text;
}

TEST(Metrics, CounterHandleAndTableAddToTheFamilysSeries) {
  Registry r;
  auto& c = r.Counter("t_total", "T.", {"rule", "action", "result"});
  const std::string_view fail[] = {"DG001", "deny", "fail"};
  const std::string_view pass[] = {"DG002", "warn", "pass"};
  Counter handle = c.Series(fail);
  handle.Inc();
  handle.Inc(2);
  handle.Inc(-1);  // ignored, as by Inc
  Counter().Inc();  // an empty handle does nothing
  EXPECT_EQ(c.Value({"DG001", "deny", "fail"}), 3);

  CounterTable table(c, 4);
  table.Inc(0, fail);
  table.Inc(0, fail);
  table.Inc(3, pass);
  table.Inc(9, pass, 5);  // past the table: found by its values
  table.Inc(3, pass, -2);
  EXPECT_EQ(c.Value({"DG001", "deny", "fail"}), 5);
  EXPECT_EQ(c.Value({"DG002", "warn", "pass"}), 6);
  // A handle for too few values names the series padded with empty values, as Inc does.
  const std::string_view short_values[] = {"DG003"};
  c.Series(short_values).Inc();
  EXPECT_EQ(c.Value({"DG003", "", ""}), 1);
  std::string text;
  c.Render(&text);
  EXPECT_NE(text.find("t_total{rule=\"DG002\",action=\"warn\",result=\"pass\"} 6\n"), std::string::npos) << text;
}

TEST(Metrics, CounterTableResolvesEachKeyOnceAcrossThreads) {
  Registry r;
  auto& c = r.Counter("u_total", "U.", {"k"});
  CounterTable table(c, 8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        const std::string key = std::to_string(i % 8);
        const std::string_view values[] = {key};
        table.Inc(static_cast<std::size_t>(i % 8), values);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int k = 0; k < 8; ++k) EXPECT_EQ(c.Value({std::to_string(k)}), 500) << k;
}

TEST(Metrics, HistogramHandleObservesLikeObserve) {
  Registry r;
  auto& h = r.Histogram("h_seconds", "H.", {"webhook"}, {0.1, 1});
  auto handle = h.Find({"validate"});
  handle.Observe(0.05);
  handle.Observe(5);
  h.Observe({"validate"}, 0.5);
  HistogramFamily::Handle().Observe(1);  // an empty handle does nothing
  EXPECT_EQ(h.Count({"validate"}), 3u);
  std::string text;
  h.Render(&text);
  EXPECT_NE(text.find("h_seconds_bucket{webhook=\"validate\",le=\"0.10000000000000001\"} 1\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("h_seconds_sum{webhook=\"validate\"} 5.5499999999999998\n"), std::string::npos) << text;
}

TEST(Metrics, ServerMetricsHaveTheDocumentedNames) {
  Registry r;
  ServerMetrics m(r);
  m.requests.Inc({"validate", "CREATE", "Pod", "deny"});
  m.duration.Observe({"validate"}, 0.0001);
  std::string text = r.Render();
  for (const char* name :
       {"draguard_admission_requests_total{webhook=\"validate\",operation=\"CREATE\",kind=\"Pod\",decision=\"deny\"} 1",
        "draguard_admission_duration_seconds_bucket{webhook=\"validate\",le=\"5.0000000000000002e-05\"}",
        "# TYPE draguard_admission_inflight gauge", "# TYPE draguard_rule_results_total counter",
        "# TYPE draguard_policy_reload_total counter", "# TYPE draguard_tls_reload_total counter",
        "# TYPE draguard_tls_cert_expiry_timestamp_seconds gauge"}) {
    EXPECT_NE(text.find(name), std::string::npos) << name << "\n" << text;
  }
}

TEST(Metrics, TopologyMetricsHaveTheDocumentedNamesAndHelp) {
  Registry r;
  TopologyMetrics m(r);
  m.nodes.Set({}, 3);
  m.reloads.SetTotal({"success"}, 2);
  m.load_errors.SetTotal({"parse"}, 1);
  std::string text = r.Render();
  for (const char* line :
       {"# HELP draguard_topology_nodes Nodes in the topology model.\n# TYPE draguard_topology_nodes gauge\n"
        "draguard_topology_nodes 3\n",
        "# HELP draguard_topology_shapes Distinct hardware shapes in the topology model.\n"
        "# TYPE draguard_topology_shapes gauge\n",
        "# HELP draguard_topology_reload_total Topology reloads by result.\n"
        "# TYPE draguard_topology_reload_total counter\ndraguard_topology_reload_total{result=\"success\"} 2\n",
        "# HELP draguard_topology_last_reload_timestamp_seconds Unix time of the last topology reload.\n"
        "# TYPE draguard_topology_last_reload_timestamp_seconds gauge\n",
        "# HELP draguard_topology_last_reload_duration_seconds Duration of the last topology reload.\n"
        "# TYPE draguard_topology_last_reload_duration_seconds gauge\n",
        "# HELP draguard_topology_load_errors_total Refused hwloc exports by reason.\n"
        "# TYPE draguard_topology_load_errors_total counter\ndraguard_topology_load_errors_total{reason=\"parse\"} 1\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
}

}  // namespace
}  // namespace draguard::metrics
