// Hostile and broken exports: each is refused with its reason, without crashing, within bounded
// time and memory.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "draguard/topology/import_sandbox.h"
#include "draguard/topology/loader.h"

namespace draguard::topology {
namespace {

const std::string kDir = std::string(DRAGUARD_TEST_DATA) + "/hwloc/";
const std::string kPower8 = "hwloc_ibm-power8-minsky_2s_4xP100-SXM2_nvlink-gpu-cpu-hetero.xml";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

LoadErrorReason ReasonOf(std::string_view xml, const LoaderLimits& limits = {}) {
  LoadErrorReason reason = LoadErrorReason::kNone;
  auto r = ParseHwlocXml(xml, limits, &reason);
  EXPECT_FALSE(r.ok());
  if (!r.ok()) EXPECT_FALSE(r.status().message().empty());
  return reason;
}

TEST(HostileTest, EmptyAndWhitespace) {
  EXPECT_EQ(ReasonOf(""), LoadErrorReason::kEmpty);
  EXPECT_EQ(ReasonOf(" \n\t\r\n"), LoadErrorReason::kEmpty);
  EXPECT_EQ(ReasonOf("\xEF\xBB\xBF"), LoadErrorReason::kEmpty);
}

TEST(HostileTest, NotXml) {
  EXPECT_EQ(ReasonOf("hello world"), LoadErrorReason::kNotXml);
  EXPECT_EQ(ReasonOf("{\"apiVersion\": \"v1\"}"), LoadErrorReason::kNotXml);
  EXPECT_EQ(ReasonOf(std::string("\x00\x01\x02\xff\xfe", 5)), LoadErrorReason::kNotXml);
  EXPECT_EQ(ReasonOf("<html><body>hi</body></html>"), LoadErrorReason::kNotXml);
  EXPECT_EQ(ReasonOf("<?xml version=\"1.0\"?>"), LoadErrorReason::kNotXml);
  EXPECT_EQ(ReasonOf("<?xml version=\"1.0\"?>\ntext<topology version=\"2.0\"/>"), LoadErrorReason::kNotXml);
}

TEST(HostileTest, TruncatedRealExportAtManyPoints) {
  const std::string xml = ReadFile(kDir + kPower8);
  ASSERT_GT(xml.size(), 1000u);
  for (size_t cut : {size_t{1}, size_t{10}, size_t{60}, size_t{200}, xml.size() / 4, xml.size() / 2,
                     xml.size() * 3 / 4, xml.size() - 20, xml.size() - 3}) {
    SCOPED_TRACE(cut);
    const LoadErrorReason r = ReasonOf(xml.substr(0, cut));
    EXPECT_TRUE(r == LoadErrorReason::kMalformed || r == LoadErrorReason::kNotXml) << LoadErrorReasonName(r);
  }
  // Cut right after a complete element: only libhwloc/the balance check can tell.
  const size_t after = xml.find("</object>", xml.size() / 2);
  ASSERT_NE(after, std::string::npos);
  EXPECT_EQ(ReasonOf(xml.substr(0, after + 9)), LoadErrorReason::kMalformed);
}

TEST(HostileTest, WellFormedButNotAValidTopology) {
  EXPECT_EQ(ReasonOf("<topology version=\"2.0\"><object type=\"Nonsense\" os_index=\"0\"/></topology>"),
            LoadErrorReason::kMalformed);
  EXPECT_EQ(ReasonOf("<topology version=\"2.0\"></topology>"), LoadErrorReason::kMalformed);
  EXPECT_EQ(ReasonOf("<topology version=\"2.0\"></object></topology>"), LoadErrorReason::kMalformed);
}

TEST(HostileTest, BillionLaughs) {
  std::string xml = "<?xml version=\"1.0\"?>\n<!DOCTYPE topology [\n <!ENTITY lol \"lol\">\n";
  for (int i = 1; i <= 9; ++i) {
    xml += " <!ENTITY lol" + std::to_string(i) + " \"";
    for (int k = 0; k < 10; ++k) xml += "&lol" + (i == 1 ? std::string() : std::to_string(i - 1)) + ";";
    xml += "\">\n";
  }
  xml += "]>\n<topology version=\"2.0\"><object type=\"Machine\" os_index=\"0\"><info name=\"HostName\" value=\"&lol9;\"/></object></topology>\n";
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(ReasonOf(xml), LoadErrorReason::kEntity);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  // A DTD internal subset without entities is refused too (attribute defaults, parameter entities).
  EXPECT_EQ(ReasonOf("<!DOCTYPE topology [ <!ATTLIST topology version CDATA \"2.0\"> ]><topology/>"),
            LoadErrorReason::kEntity);
  // An external DTD reference, as every real export has, is fine (not fetched).
  auto ok = ParseHwlocXml(ReadFile(kDir + kPower8));
  EXPECT_TRUE(ok.ok());
}

TEST(HostileTest, OversizedRefusedBeforeParsing) {
  // A 100 MB file (sparse: no disk use) is refused from its size alone.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("draguard-hostile-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "huge.xml").string();
  const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 100ll << 20), 0);
  ::close(fd);
  LoadErrorReason reason;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = ParseHwlocFile(path, {}, &reason);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(reason, LoadErrorReason::kTooLarge);
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  std::filesystem::remove_all(dir);

  // In memory, the cap applies before any scanning.
  LoaderLimits small;
  small.max_bytes = 1000;
  EXPECT_EQ(ReasonOf(ReadFile(kDir + kPower8), small), LoadErrorReason::kTooLarge);
}

TEST(HostileTest, DeepNesting) {
  std::string xml = "<topology version=\"2.0\">";
  const int depth = 100000;
  xml.reserve(static_cast<size_t>(depth) * 40);
  for (int i = 0; i < depth; ++i) xml += "<object type=\"Group\">";
  for (int i = 0; i < depth; ++i) xml += "</object>";
  xml += "</topology>";
  EXPECT_EQ(ReasonOf(xml), LoadErrorReason::kTooDeep);
  // The limit is configurable and counts the root.
  LoaderLimits limits;
  limits.max_depth = 2;
  EXPECT_EQ(ReasonOf("<topology version=\"2.0\"><a><b><c/></b></a></topology>", limits), LoadErrorReason::kTooDeep);
}

TEST(HostileTest, UnsupportedVersions) {
  EXPECT_EQ(ReasonOf("<topology version=\"3.0\"><object type=\"Machine\"/></topology>"),
            LoadErrorReason::kUnsupportedVersion);
  EXPECT_EQ(ReasonOf("<topology version=\"9.1\"></topology>"), LoadErrorReason::kUnsupportedVersion);
  EXPECT_EQ(ReasonOf("<topology version=\"banana\"></topology>"), LoadErrorReason::kUnsupportedVersion);
}

TEST(HostileTest, NoPciInformation) {
  EXPECT_EQ(ReasonOf(ReadFile(kDir + "hwloc_supermicro-x9drg_2s-e5-2650_noio.xml")), LoadErrorReason::kNoPci);
  LoaderLimits lax;
  lax.require_pci = false;
  auto r = ParseHwlocXml(ReadFile(kDir + "hwloc_supermicro-x9drg_2s-e5-2650_noio.xml"), lax);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->shape.numa_nodes.size(), 2u);
  EXPECT_TRUE(r->shape.gpus.empty());
}

// libhwloc 2.9 dereferences a NULL bitmap when a PU lacks complete_cpuset (found by the
// mutation test below). The import sandbox turns that into one refused export, and the rest of
// the batch (handled by a fresh worker) still loads.
TEST(HostileTest, LibhwlocCrashIsContainedAndBatchContinues) {
  const std::string good = ReadFile(kDir + kPower8);
  const std::string needle = "<object type=\"PU\" os_index=\"97\" cpuset=\"0x00000002,,,0x0\" complete_cpuset=";
  const size_t at = good.find(needle);
  ASSERT_NE(at, std::string::npos);
  std::string crash = good;
  crash.replace(at + needle.size() - std::string("complete_cpuset=").size(), std::string("complete_cpuset=").size(),
                "complpuset=");
  ImportPool pool(1);
  std::vector<LoadErrorReason> reasons;
  auto res = pool.ParseBatch({good, crash, good, crash, good}, {}, &reasons);
  ASSERT_EQ(res.size(), 5u);
  for (size_t i : {0u, 2u, 4u}) {
    ASSERT_TRUE(res[i].ok()) << i << ": " << res[i].status().ToString();
    EXPECT_EQ(res[i]->shape.gpus.size(), 4u);
    EXPECT_EQ(reasons[i], LoadErrorReason::kNone);
  }
  for (size_t i : {1u, 3u}) {
    ASSERT_FALSE(res[i].ok());
    EXPECT_EQ(reasons[i], LoadErrorReason::kMalformed);
    EXPECT_NE(res[i].status().message().find("libhwloc crashed"), std::string::npos) << res[i].status().message();
  }

  // The pool replaces a crashed worker and keeps going across calls too.
  for (int round = 0; round < 2; ++round) {
    auto pr = pool.ParseBatch({good, crash, good}, {}, &reasons);
    ASSERT_EQ(pr.size(), 3u);
    EXPECT_TRUE(pr[0].ok());
    ASSERT_FALSE(pr[1].ok());
    EXPECT_EQ(reasons[1], LoadErrorReason::kMalformed);
    EXPECT_NE(pr[1].status().message().find("libhwloc crashed"), std::string::npos) << pr[1].status().message();
    ASSERT_TRUE(pr[2].ok()) << pr[2].status().ToString();
    EXPECT_EQ(pr[2]->shape.gpus.size(), 4u);
  }
}

// Deterministic mutations of a real export never crash; each outcome is a value or a reason.
TEST(HostileTest, RandomMutationsNeverCrash) {
  const std::string xml = ReadFile(kDir + kPower8);
  std::mt19937 rng(12345);
  int refused = 0;
  int crashed = 0;
  for (int iter = 0; iter < 300; ++iter) {
    std::string m = xml;
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits; ++e) {
      const size_t pos = rng() % m.size();
      switch (rng() % 4) {
        case 0: m[pos] = static_cast<char>(rng() % 256); break;
        case 1: m.erase(pos, 1 + rng() % 64); break;
        case 2: m.insert(pos, m.substr(rng() % m.size(), 1 + rng() % 64)); break;
        default: m[pos] = "<>\"/='&"[rng() % 7]; break;
      }
      if (m.empty()) m = "x";
    }
    LoadErrorReason reason = LoadErrorReason::kNone;
    auto r = ParseHwlocXml(m, {}, &reason);
    if (!r.ok()) {
      ++refused;
      EXPECT_NE(reason, LoadErrorReason::kNone) << r.status().ToString();
      crashed += r.status().message().find("libhwloc crashed") != std::string::npos;
    } else {
      EXPECT_EQ(reason, LoadErrorReason::kNone);
      EXPECT_EQ(r->shape.fingerprint.size(), 16u);
    }
  }
  EXPECT_GT(refused, 0);
  // Informational: how many mutations libhwloc itself could not survive (isolated in a child).
  RecordProperty("hwloc_crashes", crashed);
  std::printf("mutations refused: %d, of which libhwloc crashed on: %d\n", refused, crashed);
}

}  // namespace
}  // namespace draguard::topology
