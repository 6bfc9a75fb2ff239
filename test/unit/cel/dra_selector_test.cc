// DRA selectors from real manifests and from the pitfalls of dra-reference.md §8, checked and
// evaluated against devices shaped like real ResourceSlices (test/data/cel/{selectors,devices}.json).
// Each case states what Kubernetes does: a compile error at admission, or true / false / a runtime
// error ("no such key", which aborts scheduling) per device.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "draguard/cel/checker.h"
#include "draguard/cel/cost.h"
#include "draguard/cel/device.h"
#include "draguard/cel/evaluator.h"

namespace draguard::cel {
namespace {

using nlohmann::json;

json LoadJson(const std::string& name) {
  std::ifstream f(std::string(DRAGUARD_TEST_DATA) + "/cel/" + name);
  EXPECT_TRUE(f.good()) << name;
  std::stringstream ss;
  ss << f.rdbuf();
  return json::parse(ss.str());
}

std::string FormatRef(const AttributeReference& r) {
  std::string s = r.kind == AttributeReference::Kind::kAttribute ? "attribute " : "capacity ";
  s += r.domain + (r.domain_is_driver ? "(driver)" : "") + "/" + r.name + " ";
  s += r.presence_test ? "presence-test" : r.guarded ? "guarded" : "UNGUARDED";
  return s;
}

std::map<std::string, Device> LoadDevices() {
  std::map<std::string, Device> out;
  const json all = LoadJson("devices.json");
  for (const auto& [name, d] : all.items()) {
    if (name[0] == '_') continue;
    auto dev = ParseDeviceJson(d.dump());
    EXPECT_TRUE(dev.ok()) << name << ": " << dev.status().ToString();
    if (dev.ok()) out[name] = *dev;
  }
  return out;
}

TEST(CelDraSelectors, RealManifestsAndPitfalls) {
  auto devices = LoadDevices();
  ASSERT_EQ(devices.size(), 4u);
  json cases = LoadJson("selectors.json");
  ASSERT_GT(cases.size(), 30u);
  int evaluations = 0;
  for (const auto& c : cases) {
    std::string name = c["name"];
    std::string expr = c["expr"];
    SCOPED_TRACE(name + ": " + expr);
    auto compiled = CompileSelector(expr);
    std::string check = c.value("check", "ok");
    if (check.rfind("error: ", 0) == 0) {
      ASSERT_FALSE(compiled.ok()) << "compiled, expected " << check;
      EXPECT_NE(compiled.status().message().find(check.substr(7)), std::string::npos) << compiled.status().message();
      continue;
    }
    ASSERT_TRUE(compiled.ok()) << compiled.status().message();
    // Every real selector is well under the API server's estimated cost limit; the runtime
    // cost-budget case (six nested all()) is over it, so the API server would reject it.
    if (name == "cost-budget") {
      EXPECT_FALSE(CheckCost(*compiled).ok());
    } else {
      EXPECT_TRUE(CheckCost(*compiled).ok()) << CheckCost(*compiled).message();
      EXPECT_LT(EstimateCost(*compiled).max, 10000u);
    }
    if (c.contains("refs")) {
      std::vector<std::string> got;
      for (const auto& r : compiled->references) got.push_back(FormatRef(r));
      EXPECT_EQ(got, c["refs"].get<std::vector<std::string>>());
    }
    for (const auto& [dev, want] : c["eval"].items()) {
      ASSERT_TRUE(devices.count(dev)) << dev;
      auto r = EvaluateSelector(*compiled, devices[dev]);
      std::string w = want.get<std::string>();
      ++evaluations;
      if (w.rfind("error: ", 0) == 0) {
        ASSERT_FALSE(r.ok()) << dev << ": evaluated to " << *r << ", expected " << w;
        EXPECT_NE(r.status().message().find(w.substr(7)), std::string::npos) << dev << ": " << r.status().message();
      } else {
        ASSERT_TRUE(r.ok()) << dev << ": " << r.status().message();
        EXPECT_EQ(*r ? "true" : "false", w) << dev;
      }
    }
  }
  EXPECT_GT(evaluations, 60);
}

TEST(CelDraSelectors, AllowMultipleAllocationsWithGate) {
  DraEnvOptions gate;
  gate.allow_multiple_allocations = true;
  auto c = CompileSelector("device.allowMultipleAllocations", gate);
  ASSERT_TRUE(c.ok()) << c.status().message();
  Device d;
  d.driver = "dra.cpu";
  d.allow_multiple_allocations = true;
  EXPECT_TRUE(*EvaluateSelector(*c, d));
}

TEST(CelDraSelectors, CostLimitIsNotAbsorbed) {
  // A budget error must not be swallowed by `|| true`.
  auto c = CompileSelector("[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, a + b > 0)) || true");
  ASSERT_TRUE(c.ok());
  Device d;
  EvalOptions tight;
  tight.cost_limit = 100;
  auto r = EvaluateSelector(*c, d, tight);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("cost limit"), std::string::npos);
  EXPECT_TRUE(*EvaluateSelector(*c, d));  // within the default budget
}

TEST(CelDraSelectors, DeviceJsonErrors) {
  EXPECT_FALSE(ParseDeviceJson("{").ok());
  EXPECT_FALSE(ParseDeviceJson(R"({"driver": 1})").ok());
  EXPECT_FALSE(ParseDeviceJson(R"({"drivr": "x"})").ok());
  EXPECT_FALSE(ParseDeviceJson(R"({"attributes": {"d": {"v": {"version": "1.2"}}}})").ok());
  EXPECT_FALSE(ParseDeviceJson(R"({"attributes": {"d": {"v": {"int": 1, "bool": true}}}})").ok());
  EXPECT_FALSE(ParseDeviceJson(R"({"capacity": {"d": {"memory": "80 Gi"}}})").ok());
  auto ok = ParseDeviceJson(R"({"driver": "d", "attributes": {"d": {"x/y": 1}}})");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(std::get<int64_t>(ok->attributes["x"]["y"]), 1);
}

}  // namespace
}  // namespace draguard::cel
