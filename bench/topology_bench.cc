// Topology benchmarks: loading 1,000 and 5,000 node exports (generated at bench time by copying
// the fixtures with distinct host names and GPU UUIDs), and looking up a node's derived answers.
//
// Besides the Google Benchmark timings, each load reports counters: nodes, shapes, peak RSS of
// the process (VmHWM) and the RSS growth per node after interning.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "draguard/topology/store.h"

namespace {

namespace fs = std::filesystem;
using namespace draguard::topology;

const std::vector<std::string> kFixtures = {
    "hwloc_nvidia-dgx2h_2s-xeon8174_16xV100-SXM3_12xNVSwitch_nvlink-hetero.xml",
    "aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml",
    "llnl_lassen_ibm-ac922_2s-power9_4xV100-SXM2_cuda-nvml_4xmlx5.xml",
    "llnl_tioga_hpe-ex235a_epyc7a53_4numa_8xMI250X-GCD_rsmi_xgmi.xml",
    "clemson-palmetto_dell-r740_2s-gold6248_2xV100-PCIe_cuda-nvml_mlx5.xml",
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

long StatusKb(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::stol(line.substr(std::string(key).size()));
  }
  return 0;
}

// Replaces host names and UUID-like values so every node export is distinct.
std::string Personalise(std::string xml, int node, std::mt19937_64& rng) {
  auto replace_values = [&](const std::string& info) {
    const std::string needle = "name=\"" + info + "\" value=\"";
    for (size_t p = xml.find(needle); p != std::string::npos; p = xml.find(needle, p + 1)) {
      const size_t v = p + needle.size();
      const size_t end = xml.find('"', v);
      std::string repl;
      if (info == "HostName") {
        repl = "gpu-node-" + std::to_string(node);
      } else {
        char buf[64];
        std::snprintf(buf, sizeof buf, "GPU-%016llx-%08x", static_cast<unsigned long long>(rng()),
                      static_cast<unsigned>(rng()));
        repl = buf;
      }
      xml.replace(v, end - v, repl);
    }
  };
  replace_values("HostName");
  replace_values("NVIDIAUUID");
  replace_values("AMDUUID");
  if (xml.find("name=\"HostName\"") == std::string::npos) {
    const size_t machine = xml.find("<object type=\"Machine\"");
    const size_t close = xml.find('>', machine);
    xml.insert(close + 1, "\n    <info name=\"HostName\" value=\"gpu-node-" + std::to_string(node) + "\"/>");
  }
  return xml;
}

fs::path MakeCluster(int nodes) {
  const fs::path dir = fs::temp_directory_path() / ("draguard-bench-" + std::to_string(::getpid()) + "-" + std::to_string(nodes));
  if (fs::exists(dir / ".complete")) return dir;
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<std::string> sources;
  for (const auto& f : kFixtures) sources.push_back(ReadFile(std::string(DRAGUARD_SOURCE_DIR) + "/test/data/hwloc/" + f));
  std::mt19937_64 rng(42);
  for (int i = 0; i < nodes; ++i) {
    std::ofstream(dir / ("gpu-node-" + std::to_string(i) + ".xml")) << Personalise(sources[i % sources.size()], i, rng);
  }
  std::ofstream(dir / ".complete") << "ok";
  return dir;
}

void BM_LoadCluster(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const bool isolate = state.range(1) != 0;
  const fs::path dir = MakeCluster(nodes);
  const long rss_before = StatusKb("VmRSS:");
  size_t shapes = 0;
  long rss_after = 0;
  for (auto _ : state) {
    StoreOptions opts;
    opts.limits.isolate = isolate;
    Store store(opts);
    auto st = store.Start(MakeDirectorySource(dir.string()), false);
    if (!st.ok() || store.Current()->node_count() != static_cast<size_t>(nodes)) {
      state.SkipWithError("load failed");
      break;
    }
    shapes = store.Current()->shape_count();
    rss_after = StatusKb("VmRSS:");
    benchmark::DoNotOptimize(store.Current());
  }
  state.counters["nodes"] = nodes;
  state.counters["shapes"] = static_cast<double>(shapes);
  state.counters["peak_rss_MiB"] = StatusKb("VmHWM:") / 1024.0;
  state.counters["rss_growth_bytes_per_node"] = (rss_after - rss_before) * 1024.0 / nodes;
}
BENCHMARK(BM_LoadCluster)
    ->Args({1000, 1})
    ->Args({5000, 1})
    ->Args({1000, 0})
    ->Args({5000, 0})
    ->ArgNames({"nodes", "isolate"})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseRealTime();

// Exact retained bytes of the model per node (shared shapes counted once), independent of RSS.
void BM_ModelBytesPerNode(benchmark::State& state) {
  const fs::path dir = MakeCluster(1000);
  StoreOptions opts;
  opts.limits.isolate = false;
  Store store(opts);
  (void)store.Start(MakeDirectorySource(dir.string()), false);
  auto snap = store.Current();
  auto str = [](const std::string& s) { return s.capacity() > 15 ? s.capacity() + 1 : 0; };
  size_t per_node = 0;
  for (const auto& n : snap->nodes()) {
    per_node += sizeof(NodeTopology) + str(n->name) + str(n->source) + str(n->version) + str(n->hwloc_version) +
                str(n->host_name) + str(n->xml_format) + n->gpu_uuids.capacity() * sizeof(std::string) + 16;
    for (const auto& u : n->gpu_uuids) per_node += str(u);
  }
  for (auto _ : state) benchmark::DoNotOptimize(per_node);
  state.counters["node_bytes_per_node"] = static_cast<double>(per_node) / snap->node_count();
  state.counters["shapes"] = static_cast<double>(snap->shape_count());
}
BENCHMARK(BM_ModelBytesPerNode)->Iterations(1);

// Lookup of one node's derived answers in a 5,000-node snapshot.
void BM_LookupDerived(benchmark::State& state) {
  const fs::path dir = MakeCluster(5000);
  StoreOptions opts;
  opts.limits.isolate = false;
  Store store(opts);
  (void)store.Start(MakeDirectorySource(dir.string()), false);
  std::vector<std::string> names;
  for (const auto& n : store.Current()->nodes()) names.push_back(n->name);
  std::mt19937 rng(7);
  size_t i = 0;
  for (auto _ : state) {
    auto snap = store.Current();
    const NodeTopology* n = snap->Find(names[(i++ * 2654435761u) % names.size()]);
    const DerivedAnswers& d = n->shape->derived;
    benchmark::DoNotOptimize(d.max_gpus_per_root + d.max_gpus_per_numa + d.max_gpus_per_clique);
    benchmark::DoNotOptimize(d.local_nics.data());
  }
}
BENCHMARK(BM_LookupDerived)->Unit(benchmark::kNanosecond);

}  // namespace

BENCHMARK_MAIN();
