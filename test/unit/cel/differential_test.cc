// Differential test: generated DRA selectors over generated devices, evaluated by draguard and by
// an independent implementation, npm @marcbachmann/cel-js (test/tools/cel_js_differential.mjs,
// with quantity() and semver() registered). Both must agree on every case: true, false or error.
// Skips (GTEST_SKIP) when node or the npm package is not installed (scripts/install-test-tools.sh).
#include <gtest/gtest.h>

#include <cstdio>
#include <unistd.h>

#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "draguard/cel/checker.h"
#include "draguard/cel/device.h"
#include "draguard/cel/evaluator.h"

namespace draguard::cel {
namespace {

using nlohmann::json;

// Deterministic generator (mt19937 output is fully specified by the standard).
class Gen {
 public:
  explicit Gen(uint32_t seed) : rng_(seed) {}
  uint32_t Below(uint32_t n) { return static_cast<uint32_t>(rng_() % n); }
  bool Chance(int percent) { return Below(100) < static_cast<uint32_t>(percent); }
  template <typename T>
  const T& Pick(const std::vector<T>& v) { return v[Below(static_cast<uint32_t>(v.size()))]; }

 private:
  std::mt19937 rng_;
};

struct Attr {
  std::string domain, name, kind;  // kind: int, string, bool, version
};

const std::vector<Attr>& Attrs() {
  static const std::vector<Attr> kAttrs = {
      {"gpu.nvidia.com", "type", "string"},         {"gpu.nvidia.com", "productName", "string"},
      {"gpu.nvidia.com", "index", "int"},           {"gpu.nvidia.com", "driverVersion", "version"},
      {"gpu.nvidia.com", "cudaComputeCapability", "version"},
      {"dra.net", "rdma", "bool"},                  {"dra.net", "numaNode", "int"},
      {"dra.net", "ifName", "string"},              {"resource.kubernetes.io", "pcieRoot", "string"},
  };
  return kAttrs;
}

const std::vector<std::string> kStrings = {"gpu", "mig", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "eth1",
                                           "pci0000:16", "pci0000:3a", ""};
const std::vector<std::string> kVersions = {"550.54.15", "535.161.8", "9.0.0", "8.0.0", "12.4.0", "550.0.0"};
const std::vector<std::string> kQuantities = {"81559Mi", "80Gi", "40Gi", "10240Mi", "80G", "79Gi", "1Ti", "0",
                                              "512Mi", "1.5Gi", "100k", "16"};

json AttrJson(Gen& g, const Attr& a) {
  if (a.kind == "int") return json{{"int", static_cast<int>(g.Below(8))}};
  if (a.kind == "bool") return json{{"bool", g.Chance(50)}};
  if (a.kind == "version") return json{{"version", g.Pick(kVersions)}};
  return json{{"string", g.Pick(kStrings)}};
}

json MakeDevice(Gen& g) {
  json d;
  d["driver"] = g.Chance(60) ? "gpu.nvidia.com" : "dra.net";
  json attrs = json::object();
  for (const char* dom : {"gpu.nvidia.com", "dra.net", "resource.kubernetes.io"}) attrs[dom] = json::object();
  for (const auto& a : Attrs()) {
    if (g.Chance(70)) attrs[a.domain][a.name] = AttrJson(g, a);
  }
  d["attributes"] = attrs;
  json caps = json::object();
  caps["gpu.nvidia.com"] = json::object();
  if (g.Chance(75)) caps["gpu.nvidia.com"]["memory"] = g.Pick(kQuantities);
  if (g.Chance(40)) caps["gpu.nvidia.com"]["multiprocessors"] = g.Pick(kQuantities);
  d["capacity"] = caps;
  return d;
}

std::string Quote(const std::string& s) { return "'" + s + "'"; }

std::string AttrRef(Gen& g, const Attr& a) {
  std::string base = "device.attributes[" + Quote(a.domain) + "]";
  return g.Chance(50) ? base + "." + a.name : base + "[" + Quote(a.name) + "]";
}

std::string Literal(Gen& g, const std::string& kind) {
  if (kind == "int") return std::to_string(g.Below(8));
  if (kind == "bool") return g.Chance(50) ? "true" : "false";
  return Quote(g.Pick(kStrings));
}

std::string Atom(Gen& g) {
  const Attr& a = g.Pick(Attrs());
  switch (g.Below(11)) {
    case 0: return "device.driver == " + Quote(g.Chance(50) ? "gpu.nvidia.com" : "dra.net");
    case 1: {
      // Deliberately sometimes of the wrong type: == is then false, not an error.
      std::string kind = g.Chance(85) ? a.kind : "int";
      if (a.kind == "version") return AttrRef(g, a) + ".compareTo(semver(" + Quote(g.Pick(kVersions)) + ")) == 0";
      return AttrRef(g, a) + (g.Chance(50) ? " == " : " != ") + Literal(g, kind);
    }
    case 2: return Quote(a.name) + " in device.attributes[" + Quote(a.domain) + "]";
    case 3: return "has(device.attributes[" + Quote(a.domain) + "]." + a.name + ")";
    case 4: {
      static const std::vector<std::string> ops = {" < ", " <= ", " > ", " >= "};
      if (a.kind == "int" || g.Chance(10)) return AttrRef(g, a) + g.Pick(ops) + std::to_string(g.Below(8));
      return AttrRef(g, {a.domain, a.name, a.kind}) + " == " + Literal(g, a.kind == "version" ? "string" : a.kind);
    }
    case 5: {
      static const std::vector<std::string> fns = {"startsWith", "endsWith", "contains"};
      const Attr& s = Attrs()[g.Chance(50) ? 1 : 7];
      return AttrRef(g, s) + "." + g.Pick(fns) + "(" + Quote(g.Pick(kStrings).substr(0, g.Below(6))) + ")";
    }
    case 6: {
      std::string cap = g.Chance(80) ? "memory" : "multiprocessors";
      std::string ref = "device.capacity['gpu.nvidia.com']" + (g.Chance(50) ? "." + cap : "[" + Quote(cap) + "]");
      switch (g.Below(3)) {
        case 0: return ref + ".compareTo(quantity(" + Quote(g.Pick(kQuantities)) + ")) >= 0";
        case 1: return ref + ".isGreaterThan(quantity(" + Quote(g.Pick(kQuantities)) + "))";
        default: return ref + ".isLessThan(quantity(" + Quote(g.Pick(kQuantities)) + "))";
      }
    }
    case 7: {
      const Attr& v = Attrs()[g.Chance(50) ? 3 : 4];
      switch (g.Below(3)) {
        case 0: return AttrRef(g, v) + ".isGreaterThan(semver(" + Quote(g.Pick(kVersions)) + "))";
        case 1: return AttrRef(g, v) + ".major() >= " + std::to_string(g.Below(600));
        default: return AttrRef(g, v) + ".isLessThan(semver(" + Quote(g.Pick(kVersions)) + "))";
      }
    }
    case 8: return "size(" + AttrRef(g, Attrs()[1]) + ") > " + std::to_string(g.Below(25));
    case 9: return Quote(g.Pick(std::vector<std::string>{"gpu.nvidia.com", "dra.net", "example.com"})) +
                   " in device.attributes";
    default: return "'memory' in device.capacity['gpu.nvidia.com']";
  }
}

std::string Selector(Gen& g, int depth) {
  if (depth <= 0 || g.Chance(35)) return Atom(g);
  switch (g.Below(5)) {
    case 0:
    case 1: return "(" + Selector(g, depth - 1) + " && " + Selector(g, depth - 1) + ")";
    case 2: return "(" + Selector(g, depth - 1) + " || " + Selector(g, depth - 1) + ")";
    case 3: return "!(" + Selector(g, depth - 1) + ")";
    default:
      return "(" + Selector(g, depth - 1) + " ? " + Selector(g, depth - 1) + " : " + Selector(g, depth - 1) + ")";
  }
}

std::string RunNode(const std::string& input_path, std::string* err) {
  std::string dir = std::string(DRAGUARD_SOURCE_DIR) + "/test/tools";
  std::string cmd = "cd '" + dir + "' && node cel_js_differential.mjs '" + input_path + "' 2>&1";
  std::FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    *err = "cannot run node";
    return "";
  }
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  if (pclose(p) != 0) {
    *err = "node failed: " + out.substr(0, 500);
    return "";
  }
  return out;
}

TEST(CelDifferential, AgreesWithCelJs) {
  std::string probe = std::string(DRAGUARD_SOURCE_DIR) + "/test/tools/node_modules/@marcbachmann/cel-js/package.json";
  if (std::FILE* f = std::fopen(probe.c_str(), "r")) {
    std::fclose(f);
  } else {
    GTEST_SKIP() << "@marcbachmann/cel-js not installed (" << probe << "); run scripts/install-test-tools.sh";
  }
  Gen g(20261129);
  json devices = json::array();
  std::vector<Value> values;
  for (int i = 0; i < 16; ++i) {
    json d = MakeDevice(g);
    auto dev = ParseDeviceJson(d.dump());
    ASSERT_TRUE(dev.ok()) << dev.status().ToString();
    devices.push_back(d);
    values.push_back(DeviceToValue(*dev));
  }
  json cases = json::array();
  std::vector<std::string> ours;
  int compiled = 0;
  for (int i = 0; i < 600; ++i) {
    std::string expr = Selector(g, 3);
    auto c = CompileSelector(expr);
    ASSERT_TRUE(c.ok()) << expr << ": " << c.status().message();
    ++compiled;
    for (int k = 0; k < 3; ++k) {
      int dev = static_cast<int>(g.Below(static_cast<uint32_t>(values.size())));
      auto r = EvaluateSelectorValue(*c, values[static_cast<size_t>(dev)]);
      ours.push_back(r.ok() ? (*r ? "true" : "false") : "error");
      cases.push_back({{"expr", expr}, {"device", dev}});
    }
  }
  std::string path = ::testing::TempDir() + "cel_differential_cases." + std::to_string(::getpid()) + ".json";
  std::ofstream(path) << json{{"devices", devices}, {"cases", cases}}.dump();
  std::string err;
  std::string out = RunNode(path, &err);
  std::remove(path.c_str());
  if (out.empty()) GTEST_SKIP() << err;
  json theirs = json::parse(out, nullptr, false);
  ASSERT_FALSE(theirs.is_discarded()) << out.substr(0, 300);
  ASSERT_EQ(theirs.size(), cases.size());
  int agree = 0, disagree = 0, errors = 0, trues = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    std::string t = theirs[i].contains("value") ? (theirs[i]["value"].get<bool>() ? "true" : "false") : "error";
    if (ours[i] == "error") ++errors;
    if (ours[i] == "true") ++trues;
    if (t == ours[i]) {
      ++agree;
    } else {
      ++disagree;
      ADD_FAILURE() << "disagreement on " << cases[i]["expr"].get<std::string>() << "\n  device "
                    << devices[cases[i]["device"].get<size_t>()].dump() << "\n  draguard: " << ours[i]
                    << "  cel-js: " << theirs[i].dump();
      if (disagree > 10) break;
    }
  }
  std::cout << "differential: " << compiled << " selectors, " << cases.size() << " evaluations, " << agree
            << " agree, " << disagree << " disagree (draguard: " << trues << " true, " << errors << " errors)\n";
  // The generator must exercise all three outcomes, or the comparison says little.
  EXPECT_GT(trues, 100);
  EXPECT_GT(errors, 100);
  EXPECT_GT(static_cast<int>(cases.size()) - trues - errors, 100);
}

}  // namespace
}  // namespace draguard::cel
