// `draguard cel check|eval` through cli::Cel: outputs and exit codes.
#include <gtest/gtest.h>

#include <sstream>

#include "commands.h"

namespace draguard::cli {
namespace {

struct CliRun {
  int code;
  std::string out;
  std::string err;
};

CliRun Cel(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  int code = cli::Cel(args, out, err);
  return {code, out.str(), err.str()};
}

constexpr const char* kH100 =
    R"({"driver": "gpu.nvidia.com",
        "attributes": {"gpu.nvidia.com": {"type": {"string": "gpu"}, "driverVersion": {"version": "550.54.15"}}},
        "capacity": {"gpu.nvidia.com": {"memory": "81559Mi"}}})";

TEST(CelCli, CheckPrintsOkAndReferences) {
  CliRun r = Cel({"check", "device.attributes['gpu.nvidia.com'].type == 'gpu' && "
                        "'memory' in device.capacity['gpu.nvidia.com'] && "
                        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "OK\nestimated cost: 16 (limit 1000000)\nreferences:\n"
            "  attribute gpu.nvidia.com/type UNGUARDED 1:36\n"
            "  capacity gpu.nvidia.com/memory presence-test 1:63\n"
            "  capacity gpu.nvidia.com/memory guarded 1:136\n");
}

TEST(CelCli, CheckErrorHasPositionAndCaret) {
  CliRun r = Cel({"check", "device.topology.pcie.rootComplex == 'x'"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "ERROR: <input>:1:7: undefined field 'topology'\n"
            " | device.topology.pcie.rootComplex == 'x'\n"
            " | ......^\n");
}

TEST(CelCli, EvalTrueFalseAndRuntimeError) {
  CliRun t = Cel({"eval", "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80G')) >= 0", "--device", kH100});
  EXPECT_EQ(t.code, 0) << t.err;
  EXPECT_EQ(t.out, "true\n");
  CliRun f = Cel({"eval", "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0", "--device", kH100});
  EXPECT_EQ(f.code, 0);
  EXPECT_EQ(f.out, "false\n");
  CliRun e = Cel({"eval", "device.attributes['gpu.nvidia.com'].index == 0", "--device", kH100});
  EXPECT_EQ(e.code, 2);
  EXPECT_EQ(e.out, "error: CEL runtime error: no such key: index\n");
  const std::string inline_device = std::string("--device=").append(kH100);
  CliRun inl = Cel({"eval", "device.driver == 'gpu.nvidia.com'", inline_device});
  EXPECT_EQ(inl.out, "true\n");
}

TEST(CelCli, EvalDeviceFromFile) {
  const std::string device_file = std::string("@").append(DRAGUARD_TEST_DATA).append("/cel/nic_device.json");
  CliRun r = Cel({"eval", "device.driver == 'dra.net'", "--device", device_file});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "true\n");
  CliRun missing = Cel({"eval", "true", "--device", "@/nonexistent/device.json"});
  EXPECT_EQ(missing.code, 1);
}

TEST(CelCli, UsageErrors) {
  EXPECT_EQ(Cel({}).code, 1);
  EXPECT_EQ(Cel({"check"}).code, 1);
  EXPECT_EQ(Cel({"frobnicate", "true"}).code, 1);
  EXPECT_EQ(Cel({"eval", "true"}).code, 1);                                  // --device missing
  EXPECT_EQ(Cel({"eval", "true", "--device"}).code, 1);                      // value missing
  EXPECT_EQ(Cel({"check", "true", "--bogus"}).code, 1);                      // unknown flag
  EXPECT_EQ(Cel({"eval", "true", "--device", "{not json"}).code, 1);         // bad device
  EXPECT_EQ(Cel({"eval", "true", "--device", "{}", "--cost-limit", "x"}).code, 1);
  CliRun r = Cel({"check"});
  EXPECT_NE(r.err.find("usage: draguard cel check EXPR"), std::string::npos);
}

TEST(CelCli, CostLimitFlagAndGate) {
  CliRun r = Cel({"eval", "[1,2,3].all(x, [1,2,3].all(y, x + y > 0))", "--device", "{}", "--cost-limit", "10"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("cost limit exceeded"), std::string::npos);
  EXPECT_EQ(Cel({"check", "device.allowMultipleAllocations"}).code, 2);
  EXPECT_EQ(Cel({"check", "device.allowMultipleAllocations", "--allow-multiple-allocations"}).code, 0);
}

}  // namespace
}  // namespace draguard::cli
