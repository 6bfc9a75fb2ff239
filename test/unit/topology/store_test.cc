// Store: reload semantics, last-good retention, removal, conflicts, interning, metrics, the
// inotify directory source (including the ConfigMap `..data` swap) and readers during swaps.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "draguard/topology/shape_record.h"
#include "draguard/topology/store.h"

namespace draguard::topology {
namespace {

namespace fs = std::filesystem;
const std::string kDir = std::string(DRAGUARD_TEST_DATA) + "/hwloc/";
const std::string kPower8 = "hwloc_ibm-power8-minsky_2s_4xP100-SXM2_nvlink-gpu-cpu-hetero.xml";
const std::string kG4dn = "aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml";
const std::string kPascal = "llnl_pascal_relion-x1904gt_2s-e5-2695v4_2xP100-PCIe_cuda-nvml-opencl.xml";
const std::string kLassen = "llnl_lassen_ibm-ac922_2s-power9_4xV100-SXM2_cuda-nvml_4xmlx5.xml";
const std::string kLassenV1 = "llnl_lassen_ibm-ac922_2s-power9_4xV100_v1format-hwloc1.11.xml";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const fs::path& path, const std::string& bytes) {
  const fs::path tmp = path.parent_path() / (".tmp-" + path.filename().string());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << bytes;
  }
  fs::rename(tmp, path);  // atomic replace, like most writers
}

size_t Errors(const StoreMetrics& m, LoadErrorReason r) { return m.load_errors_total[static_cast<size_t>(r)]; }

// A unique temp directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("draguard-topo-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

// Waits (with a generous timeout, never a fixed sleep) until a reload publishes a snapshot that
// satisfies `pred`.
class ReloadWaiter {
 public:
  explicit ReloadWaiter(Store& store) : store_(store) {
    store_.SetOnReloadForTest([this](uint64_t) {
      std::lock_guard<std::mutex> l(mu_);
      ++reloads_;
      cv_.notify_all();
    });
  }
  ~ReloadWaiter() { store_.SetOnReloadForTest(nullptr); }
  template <typename Pred>
  bool WaitFor(Pred pred) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, std::chrono::seconds(20), [&] { return pred(*store_.Current()); });
  }

 private:
  Store& store_;
  std::mutex mu_;
  std::condition_variable cv_;
  int reloads_ = 0;
};

TEST(StoreTest, EmptyBeforeStart) {
  Store store;
  ASSERT_NE(store.Current(), nullptr);
  EXPECT_EQ(store.Current()->node_count(), 0u);
  EXPECT_FALSE(store.Reload().ok());
}

TEST(StoreTest, LastGoodKeptRemovedNodeDroppedErrorsCounted) {
  std::vector<std::string> logs;
  std::mutex log_mu;
  StoreOptions opts;
  opts.log = [&](LogLevel, const std::string& m) {
    std::lock_guard<std::mutex> l(log_mu);
    logs.push_back(m);
  };
  Store store(opts);
  auto src = std::make_unique<InMemorySource>(std::vector<InMemoryExport>{
      {"node-a", ReadFile(kDir + kPower8), "1", "a"},
      {"node-b", ReadFile(kDir + kG4dn), "1", "b"},
      {"node-c", ReadFile(kDir + kG4dn), "1", "c"},
  });
  InMemorySource* raw = src.get();
  ASSERT_TRUE(store.Start(std::move(src), /*watch=*/true).ok());
  auto s1 = store.Current();
  ASSERT_EQ(s1->node_count(), 3u);
  EXPECT_EQ(s1->shape_count(), 2u);  // b and c share one shape
  EXPECT_EQ(s1->Find("node-b")->shape.get(), s1->Find("node-c")->shape.get());
  StoreMetrics m = store.Metrics();
  EXPECT_EQ(m.nodes, 3u);
  EXPECT_EQ(m.shapes, 2u);
  EXPECT_EQ(m.exports_parsed_total, 3u);
  EXPECT_EQ(m.reloads_total, 1u);
  EXPECT_GT(m.last_reload_unix_ms, 0);

  // node-a turns into garbage (keeps its last good model), node-c disappears, b is unchanged.
  raw->Replace({{"node-a", "<not xml", "2", "a"}, {"node-b", ReadFile(kDir + kG4dn), "1", "b"}});
  auto s2 = store.Current();
  EXPECT_GT(s2->generation(), s1->generation());
  ASSERT_EQ(s2->node_count(), 2u);
  ASSERT_NE(s2->Find("node-a"), nullptr);
  EXPECT_EQ(s2->Find("node-a")->shape->gpus.size(), 4u);
  EXPECT_EQ(s2->Find("node-c"), nullptr);
  EXPECT_EQ(s2->Find("node-b"), s1->Find("node-b"));  // unchanged export: not re-parsed
  m = store.Metrics();
  EXPECT_EQ(m.exports_parsed_total, 3u);
  EXPECT_EQ(Errors(m, LoadErrorReason::kMalformed), 1u);
  ASSERT_EQ(store.problems().size(), 1u);
  EXPECT_EQ(store.problems()[0].node, "node-a");
  {
    std::lock_guard<std::mutex> l(log_mu);
    bool found = false;
    for (const auto& line : logs) found |= line.find("keeps its last good model") != std::string::npos;
    EXPECT_TRUE(found);
  }
  // The old snapshot is untouched.
  EXPECT_EQ(s1->node_count(), 3u);

  // A v3 export for a new node is refused; the node never appears.
  raw->Replace({{"node-a", "<not xml", "2", "a"},
                {"node-b", ReadFile(kDir + kG4dn), "1", "b"},
                {"node-d", ReadFile(kDir + "hwloc3-format_nvidia-dgx2h_v3.0.xml"), "1", "d"}});
  EXPECT_EQ(store.Current()->Find("node-d"), nullptr);
  EXPECT_EQ(Errors(store.Metrics(), LoadErrorReason::kUnsupportedVersion), 1u);
  EXPECT_EQ(Errors(store.Metrics(), LoadErrorReason::kMalformed), 1u);  // unchanged bad export not recounted
}

TEST(StoreTest, HostNameFallbackAndConflictNewerWins) {
  Store store;
  auto src = std::make_unique<InMemorySource>(std::vector<InMemoryExport>{
      {"", ReadFile(kDir + kLassenV1), "1", "old"},
  });
  InMemorySource* raw = src.get();
  ASSERT_TRUE(store.Start(std::move(src), true).ok());
  ASSERT_NE(store.Current()->Find("lassen28"), nullptr);  // from HostName
  EXPECT_EQ(store.Current()->Find("lassen28")->xml_format, "1.x");
  // A second export claims lassen28; the one listed later (newer) wins and the conflict counts.
  raw->Replace({{"", ReadFile(kDir + kLassenV1), "1", "old"}, {"", ReadFile(kDir + kLassen), "1", "new"}});
  auto s = store.Current();
  ASSERT_EQ(s->node_count(), 1u);
  EXPECT_EQ(s->Find("lassen28")->xml_format, "2.0");
  EXPECT_EQ(Errors(store.Metrics(), LoadErrorReason::kConflict), 1u);
  bool conflict = false;
  for (const auto& p : store.problems()) conflict |= p.reason == LoadErrorReason::kConflict;
  EXPECT_TRUE(conflict);
  // A persisting conflict is reported in problems() on every reload but counted once.
  ASSERT_TRUE(store.Reload().ok());
  EXPECT_EQ(Errors(store.Metrics(), LoadErrorReason::kConflict), 1u);
  EXPECT_EQ(store.problems().size(), 1u);
}

TEST(StoreTest, OversizedExportRefusedBeforeReading) {
  StoreOptions opts;
  opts.limits.max_bytes = 4096;
  Store store(opts);
  ASSERT_TRUE(store.Start(std::make_unique<InMemorySource>(std::vector<InMemoryExport>{
                              {"big", ReadFile(kDir + kG4dn), "1", "big"}}),
                          false)
                  .ok());
  EXPECT_EQ(store.Current()->node_count(), 0u);
  EXPECT_EQ(Errors(store.Metrics(), LoadErrorReason::kTooLarge), 1u);
}

TEST(StoreTest, DirectorySourceWatchesCreateModifyDelete) {
  TempDir dir;
  WriteFile(dir.path() / "gpu-1.xml", ReadFile(kDir + kPower8));
  WriteFile(dir.path() / "notes.txt", "ignored");
  Store store;
  ReloadWaiter waiter(store);
  ASSERT_TRUE(store.Start(MakeDirectorySource(dir.path().string(), {.debounce_ms = 50, .max_delay_ms = 500}), true).ok());
  ASSERT_EQ(store.Current()->node_count(), 1u);
  EXPECT_EQ(store.Current()->Find("gpu-1")->source, (dir.path() / "gpu-1.xml").string());

  WriteFile(dir.path() / "gpu-2.hwloc.xml", ReadFile(kDir + kG4dn));
  ASSERT_TRUE(waiter.WaitFor([](const Snapshot& s) { return s.Find("gpu-2") != nullptr; }));

  // Modified to garbage: gpu-1 keeps its model, the error is counted.
  WriteFile(dir.path() / "gpu-1.xml", "garbage");
  ASSERT_TRUE(waiter.WaitFor([&](const Snapshot&) {
    return Errors(store.Metrics(), LoadErrorReason::kNotXml) == 1;
  }));
  ASSERT_NE(store.Current()->Find("gpu-1"), nullptr);
  EXPECT_EQ(store.Current()->Find("gpu-1")->shape->gpus.size(), 4u);

  // Fixed with another export: gpu-1 changes shape.
  WriteFile(dir.path() / "gpu-1.xml", ReadFile(kDir + kPascal));
  ASSERT_TRUE(waiter.WaitFor([](const Snapshot& s) {
    return s.Find("gpu-1") != nullptr && s.Find("gpu-1")->shape->gpus.size() == 2;
  }));

  fs::remove(dir.path() / "gpu-2.hwloc.xml");
  ASSERT_TRUE(waiter.WaitFor([](const Snapshot& s) { return s.Find("gpu-2") == nullptr && s.node_count() == 1; }));
  store.Stop();
}

// A mounted ConfigMap: visible files are symlinks into `..data`, which kubelet swaps atomically.
TEST(StoreTest, DirectorySourceFollowsConfigMapDataSwap) {
  TempDir dir;
  const fs::path d = dir.path();
  fs::create_directory(d / "..2026_01_01_00_00_00.1");
  WriteFile(d / "..2026_01_01_00_00_00.1" / "cm-node.xml", ReadFile(kDir + kPower8));
  fs::create_directory_symlink("..2026_01_01_00_00_00.1", d / "..data");
  fs::create_symlink("..data/cm-node.xml", d / "cm-node.xml");

  Store store;
  ReloadWaiter waiter(store);
  ASSERT_TRUE(store.Start(MakeDirectorySource(d.string(), {.debounce_ms = 50, .max_delay_ms = 500}), true).ok());
  ASSERT_EQ(store.Current()->node_count(), 1u);
  ASSERT_EQ(store.Current()->Find("cm-node")->shape->gpus.size(), 4u);

  fs::create_directory(d / "..2026_01_01_00_00_01.2");
  WriteFile(d / "..2026_01_01_00_00_01.2" / "cm-node.xml", ReadFile(kDir + kG4dn));
  fs::create_directory_symlink("..2026_01_01_00_00_01.2", d / "..data_tmp");
  fs::rename(d / "..data_tmp", d / "..data");
  fs::remove_all(d / "..2026_01_01_00_00_00.1");
  ASSERT_TRUE(waiter.WaitFor([](const Snapshot& s) {
    return s.Find("cm-node") != nullptr && s.Find("cm-node")->shape->gpus.size() == 8;
  }));
  EXPECT_EQ(store.Current()->node_count(), 1u);
  store.Stop();
}

// Readers running during swaps see either the old or the new snapshot, never a mix.
TEST(StoreTest, ConcurrentReadersSeeWholeSnapshots) {
  StoreOptions opts;
  opts.limits.isolate = false;  // speed: these exports are trusted fixtures
  Store store(opts);
  const std::string a_xml = ReadFile(kDir + kPower8);
  const std::string b_xml = ReadFile(kDir + kG4dn);
  auto set_a = [&] {
    std::vector<InMemoryExport> v;
    for (int i = 0; i < 3; ++i) v.push_back({"a-" + std::to_string(i), a_xml, "a", ""});
    return v;
  };
  auto set_b = [&] {
    std::vector<InMemoryExport> v;
    for (int i = 0; i < 5; ++i) v.push_back({"b-" + std::to_string(i), b_xml, "b", ""});
    return v;
  };
  auto src = std::make_unique<InMemorySource>(set_a());
  InMemorySource* raw = src.get();
  ASSERT_TRUE(store.Start(std::move(src), true).ok());

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> reads{0};
  std::atomic<uint64_t> bad{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      uint64_t last_gen = 0;
      while (!stop.load()) {
        auto s = store.Current();
        const bool is_a = s->node_count() == 3;
        const size_t want_gpus = is_a ? 4 : 8;
        bool ok = (s->node_count() == 3 || s->node_count() == 5) && s->shape_count() == 1 && s->generation() >= last_gen;
        for (const auto& n : s->nodes()) {
          ok = ok && n->name[0] == (is_a ? 'a' : 'b') && n->shape->gpus.size() == want_gpus &&
               n->shape.get() == s->nodes()[0]->shape.get();
        }
        if (!ok) bad.fetch_add(1);
        last_gen = s->generation();
        reads.fetch_add(1);
      }
    });
  }
  for (int i = 0; i < 40; ++i) raw->Replace(i % 2 == 0 ? set_b() : set_a());
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_GT(reads.load(), 0u);
  EXPECT_EQ(store.Metrics().reloads_total, 41u);
  EXPECT_EQ(store.Current()->node_count(), 3u);
}

TEST(StoreTest, BundledExamplesLoad) {
  const auto examples = BundledExamples();
  ASSERT_EQ(examples.size(), 2u);
  Store store;
  ASSERT_TRUE(store.Start(MakeBundledExampleSource(), true).ok());
  auto s = store.Current();
  ASSERT_EQ(s->node_count(), 2u);
  const NodeTopology* dgx = s->Find("example-dgx2h");
  ASSERT_NE(dgx, nullptr);
  EXPECT_EQ(dgx->shape->gpus.size(), 16u);
  EXPECT_TRUE(dgx->shape->derived.link_fully_connected);
  const NodeTopology* pcie = s->Find("example-pcie-2xp100");
  ASSERT_NE(pcie, nullptr);
  EXPECT_EQ(pcie->shape->gpus.size(), 2u);
  EXPECT_TRUE(pcie->shape->nvlink.peers.empty());
  EXPECT_EQ(pcie->source, "bundled:deploy/examples/topology/example-pcie-2xp100.xml");
  // The embedded bytes are exactly the files shipped under deploy/.
  for (const auto& e : examples) {
    const std::string file = std::string(DRAGUARD_SOURCE_DIR) + "/deploy/examples/topology/" + e.node + ".xml";
    EXPECT_EQ(e.bytes, ReadFile(file)) << file;
  }
}

// A source whose entries come built (as kubetopo's node source delivers them) beside one export
// to parse; counts the reads.
class BuiltSource : public Source {
 public:
  std::string Describe() const override { return "built"; }
  Result<std::vector<SourceEntry>> List() override {
    std::lock_guard<std::mutex> l(mu);
    return entries;
  }
  Result<std::string> Read(const SourceEntry& e, size_t) override {
    std::lock_guard<std::mutex> l(mu);
    reads.push_back(e.origin);
    return ReadFile(kDir + kLassen);
  }
  std::mutex mu;
  std::vector<SourceEntry> entries;
  std::vector<std::string> reads;
};

TEST(StoreTest, BuiltEntriesAreTakenAsTheyAreAndNeverRead) {
  auto parsed = ParseHwlocFile(kDir + kG4dn);
  ASSERT_TRUE(parsed.ok());
  ShapeInterner interner;
  auto record = DecodeShapeRecord(EncodeShapeRecord(*parsed), interner);
  ASSERT_TRUE(record.ok());
  auto built = [&](const std::string& name, const std::string& version) {
    auto n = MakeNodeTopology(*record, FactsOf(*parsed), name, "node " + name, version);
    EXPECT_TRUE(n.ok());
    SourceEntry e;
    e.node = name;
    e.origin = "node " + name;
    e.version = version;
    e.built = *n;
    return e;
  };
  auto source = std::make_unique<BuiltSource>();
  BuiltSource* src = source.get();
  src->entries = {built("gpu-1", "1"), built("gpu-2", "1"), {"lassen", "7", "configmap ns/lassen", 1, nullptr}};
  Store store;
  ASSERT_TRUE(store.Start(std::move(source), /*watch=*/false).ok());
  auto snap = store.Current();
  EXPECT_EQ(snap->node_count(), 3u);
  EXPECT_EQ(snap->shape_count(), 2u);
  EXPECT_EQ(snap->Find("gpu-1")->shape, record->shape);
  EXPECT_EQ(snap->Find("gpu-2")->GpuUuid(0), parsed->gpu_uuids[0]);
  EXPECT_EQ(src->reads, std::vector<std::string>{"configmap ns/lassen"});
  EXPECT_EQ(store.Metrics().exports_parsed_total, 1u);  // built nodes are not parses
  // A new version of one built node replaces it; an unchanged one is kept as it was.
  const NodeTopology* kept = snap->Find("gpu-1");
  src->entries[1] = built("gpu-2", "2");
  ASSERT_TRUE(store.Reload().ok());
  snap = store.Current();
  EXPECT_EQ(snap->Find("gpu-1"), kept);
  EXPECT_EQ(snap->Find("gpu-2")->version, "2");
  EXPECT_EQ(src->reads.size(), 1u);
  // Gone from the list: gone from the model.
  src->entries.erase(src->entries.begin());
  ASSERT_TRUE(store.Reload().ok());
  EXPECT_EQ(store.Current()->Find("gpu-1"), nullptr);
  EXPECT_EQ(store.Current()->node_count(), 2u);
}

}  // namespace
}  // namespace draguard::topology
