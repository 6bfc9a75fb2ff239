// Shape records (shape_record.h): every real export survives record + facts unchanged, records
// are deterministic and shared, and hostile records (truncated, mutated, huge counts, another
// version, over the caps) are refused without crashing or allocating without bound.
#include "draguard/topology/shape_record.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <random>

#include "draguard/topology/loader.h"
#include "draguard/topology/snapshot.h"

namespace draguard::topology {
namespace {

namespace fs = std::filesystem;

// Every export the loader accepts in the repository's export directories.
std::vector<std::pair<std::string, ParsedExport>> AllExports() {
  std::vector<std::pair<std::string, ParsedExport>> out;
  for (const std::string& dir : {std::string(DRAGUARD_TEST_DATA) + "/hwloc", std::string(DRAGUARD_TEST_DATA) + "/hwloc-synthetic",
                                std::string(DRAGUARD_TEST_DATA) + "/hwloc-derived",
                                std::string(DRAGUARD_SOURCE_DIR) + "/deploy/examples/topology"}) {
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() != ".xml") continue;
      LoaderLimits limits;
      limits.require_pci = false;
      auto p = ParseHwlocFile(e.path().string(), limits);
      if (p.ok()) out.emplace_back(e.path().filename().string(), std::move(p).value());
    }
  }
  return out;
}

const std::vector<std::pair<std::string, ParsedExport>>& Exports() {
  static const auto* all = new std::vector<std::pair<std::string, ParsedExport>>(AllExports());
  return *all;
}

ParsedExport ExportNamed(const std::string& prefix) {
  for (const auto& [name, p] : Exports()) {
    if (name.rfind(prefix, 0) == 0) return p;
  }
  ADD_FAILURE() << "no export " << prefix;
  return {};
}

TEST(ShapeRecordTest, EveryExportRoundTripsThroughRecordAndFacts) {
  ASSERT_GE(Exports().size(), 24u);
  for (const auto& [name, parsed] : Exports()) {
    SCOPED_TRACE(name);
    ShapeInterner interner;
    const std::string bytes = EncodeShapeRecord(parsed);
    EXPECT_EQ(bytes, EncodeShapeRecord(parsed)) << "deterministic";
    auto record = DecodeShapeRecord(bytes, interner);
    ASSERT_TRUE(record.ok()) << record.status().ToString();
    auto node = MakeNodeTopology(*record, FactsOf(parsed), "n", "src", "1");
    ASSERT_TRUE(node.ok()) << node.status().ToString();
    auto want = MakeNodeTopology(parsed, "n", "src", "1", interner);
    const NodeTopology& a = **node;
    EXPECT_TRUE(a.shape->SameHardware(*want->shape));
    EXPECT_EQ(a.shape->fingerprint, parsed.shape.fingerprint);
    EXPECT_EQ(a.shape->derived, parsed.shape.derived);
    EXPECT_EQ(a.shape, want->shape) << "interned: one Shape for both";
    EXPECT_EQ(a.cpus, want->cpus) << "interned: one CPU list for both";
    EXPECT_EQ(a.numa_packages, want->numa_packages);
    EXPECT_EQ(a.gpu_uuids, want->gpu_uuids);
    EXPECT_EQ(a.host_name, want->host_name);
    EXPECT_EQ(a.hwloc_version, want->hwloc_version);
    EXPECT_EQ(a.xml_format, want->xml_format);
    // The record holds nothing of the node's own: a copy with other UUIDs and host name encodes alike.
    ParsedExport other = parsed;
    other.host_name = "another-host";
    for (auto& u : other.gpu_uuids) u = "GPU-00000000-0000-0000-0000-000000000000";
    EXPECT_EQ(EncodeShapeRecord(other), bytes);
  }
}

TEST(ShapeRecordTest, FactsHoldOnlyWhatIsTheNodesOwn) {
  ParsedExport g4dn = ExportNamed("aws_g4dn-metal");
  NodeFacts f = FactsOf(g4dn);
  EXPECT_EQ(f.gpu_uuids.size(), 8u);
  EXPECT_EQ(f.gpu_uuids[0], "GPU-029490c8-a116-638b-7018-1a6b7a9002ef");
  EXPECT_EQ(f.xml_format, "2.0");
  // No UUID at all: no list.
  ParsedExport none = g4dn;
  for (auto& u : none.gpu_uuids) u.clear();
  EXPECT_TRUE(FactsOf(none).gpu_uuids.empty());
}

TEST(ShapeRecordTest, NodeWithTheWrongNumberOfUuidsIsRefused) {
  ShapeInterner interner;
  ParsedExport g4dn = ExportNamed("aws_g4dn-metal");
  auto record = DecodeShapeRecord(EncodeShapeRecord(g4dn), interner);
  ASSERT_TRUE(record.ok());
  NodeFacts f = FactsOf(g4dn);
  f.gpu_uuids.pop_back();
  auto node = MakeNodeTopology(*record, f, "n", "s", "v");
  ASSERT_FALSE(node.ok());
  EXPECT_NE(node.status().message().find("7 GPU UUIDs for a shape of 8 GPUs"), std::string::npos);
}

TEST(ShapeRecordTest, EveryTruncationIsRefused) {
  ShapeInterner interner;
  const std::string bytes = EncodeShapeRecord(ExportNamed("llnl_lassen_ibm-ac922_2s-power9_4xV100-SXM2"));
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto r = DecodeShapeRecord(std::string_view(bytes).substr(0, n), interner);
    ASSERT_FALSE(r.ok()) << "prefix of " << n << " bytes";
  }
  auto longer = DecodeShapeRecord(bytes + std::string(8, '\0'), interner);
  EXPECT_FALSE(longer.ok()) << "bytes left over";
}

TEST(ShapeRecordTest, MutatedRecordsNeverCrashAndDecodeOrRefuse) {
  ShapeInterner interner;
  const std::string bytes = EncodeShapeRecord(ExportNamed("hwloc_nvidia-dgx2h"));
  std::mt19937_64 rng(46);
  size_t refused = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string m = bytes;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      const size_t at = rng() % m.size();
      // Counts and indexes are the interesting targets: write large, boundary and random values.
      switch (rng() % 3) {
        case 0: m[at] = static_cast<char>(rng()); break;
        case 1: m[at] = '\xff'; break;
        default: m[at] = '\x7f'; break;
      }
    }
    auto r = DecodeShapeRecord(m, interner);
    if (!r.ok()) {
      ++refused;
      continue;
    }
    // Whatever decodes is a consistent shape: indexes point into their lists.
    const Shape& s = *r->shape;
    for (const Gpu& g : s.gpus) EXPECT_TRUE(g.pcie_root == kNoIndex || g.pcie_root < s.pcie_roots.size());
    for (const GpuLink& l : s.nvlink.peers) EXPECT_TRUE(l.a < s.gpus.size() && l.b < s.gpus.size());
  }
  EXPECT_GT(refused, 1000u);
}

TEST(ShapeRecordTest, HugeCountsAreRefusedWithoutAllocatingThem) {
  ShapeInterner interner;
  std::string bytes = EncodeShapeRecord(ExportNamed("aws_g4dn-metal"));
  // The first count after the magic is the number of packages: claim 2^40 of them.
  std::string huge = bytes;
  const uint64_t n = uint64_t{1} << 40;
  for (int i = 0; i < 8; ++i) huge[8 + i] = static_cast<char>(n >> (8 * i));
  const auto start = std::chrono::steady_clock::now();
  auto r = DecodeShapeRecord(huge, interner);
  EXPECT_FALSE(r.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(ShapeRecordTest, AnotherVersionIsNamedAsSuch) {
  ShapeInterner interner;
  std::string bytes = EncodeShapeRecord(ExportNamed("aws_g4dn-metal"));
  bytes[7] = '2';  // "GDRGSR02"
  auto r = DecodeShapeRecord(bytes, interner);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown magic"), std::string::npos) << r.status().ToString();
  EXPECT_FALSE(DecodeShapeRecord("", interner).ok());
}

TEST(ShapeRecordTest, CountsOverTheCapsAreNamed) {
  ShapeInterner interner;
  const std::string bytes = EncodeShapeRecord(ExportNamed("hwloc_nvidia-dgx2h"));
  ShapeRecordLimits limits;
  limits.max_gpus = 8;
  auto r = DecodeShapeRecord(bytes, interner, limits);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("16 GPUs (at most 8)"), std::string::npos) << r.status().ToString();
  limits = {};
  limits.max_bytes = bytes.size() - 1;
  r = DecodeShapeRecord(bytes, interner, limits);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("-byte limit"), std::string::npos);
  limits = {};
  limits.max_cpus = 2;
  EXPECT_NE(DecodeShapeRecord(bytes, interner, limits).status().message().find("logical CPUs (at most 2)"),
            std::string::npos);
}

}  // namespace
}  // namespace draguard::topology
