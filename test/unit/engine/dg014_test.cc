// DG014 unsatisfiable-claim: table of pass / fail / skip cases against real hwloc exports, each
// action, exemption.
#include <filesystem>

#include <unistd.h>

#include "draguard/topology/snapshot.h"
#include "rule_test_util.h"

namespace draguard::engine::testing {
namespace {

namespace fs = std::filesystem;

constexpr const char* kG4dn = "aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml";
constexpr const char* kDgx2 = "hwloc_nvidia-dgx2h_2s-xeon8174_16xV100-SXM3_12xNVSwitch_nvlink-hetero.xml";
constexpr const char* kLassen = "llnl_lassen_ibm-ac922_2s-power9_4xV100-SXM2_cuda-nvml_4xmlx5.xml";

std::shared_ptr<const topology::Snapshot> Cluster(const std::vector<std::pair<std::string, std::string>>& nodes) {
  static int n = 0;
  fs::path dir = fs::path(::testing::TempDir()) / ("dg014-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
  fs::create_directories(dir);
  for (const auto& [name, file] : nodes) {
    fs::copy_file(fs::path(DRAGUARD_TEST_DATA) / "hwloc" / file, dir / (name + ".xml"),
                  fs::copy_options::overwrite_existing);
  }
  auto snap = topology::LoadSnapshot(dir.string());
  fs::remove_all(dir);
  EXPECT_TRUE(snap.ok()) << snap.status().ToString();
  return snap.ok() ? *snap : nullptr;
}

const std::shared_ptr<const topology::Snapshot>& Snap() {
  static const auto kSnap = Cluster({{"g4dn-a", kG4dn}, {"g4dn-b", kG4dn}, {"dgx", kDgx2}, {"lassen", kLassen}});
  return kSnap;
}

// The shipped defaults without parsing the policy file (struct defaults are the same classes).
policy::Policy Pol() { return policy::Policy{}; }

RuleResult RunDg014(const admission::AdmissionRequest& req, const topology::Snapshot* snap, const policy::Policy& pol = Pol()) {
  static const Registry kRegistry = DefaultRegistry();
  const Rule* rule = kRegistry.Find("DG014");
  EXPECT_NE(rule, nullptr);
  RuleInput in{req, pol, snap, {}};
  return rule->Evaluate(in);
}

std::string Gpus(int count, const std::string& selector = "", const std::string& constraints = "",
                 const std::string& metadata = R"({"name":"t"})") {
  std::string sel = selector.empty() ? "" : R"(,"selectors":[{"cel":{"expression":")" + selector + R"("}}])";
  return Template(R"({"devices":{"requests":[{"name":"gpus","exactly":{"deviceClassName":"gpu.nvidia.com","count":)" +
                      std::to_string(count) + sel + "}}]" +
                      (constraints.empty() ? "" : R"(,"constraints":[)" + constraints + "]") + "}}",
                  "v1", metadata);
}

const std::string kPcie = R"({"matchAttribute":"resource.kubernetes.io/pcieRoot"})";

TEST(Dg014, Table) {
  struct Row {
    const char* name;
    std::string object;
    RuleStatus want;
    std::string pointer;
    std::string message_part;
  };
  std::vector<Row> rows = {
      {"fits", Gpus(8), RuleStatus::kPass, "", ""},
      {"fits_dgx_only", Gpus(16), RuleStatus::kPass, "", ""},
      {"too_many", Gpus(17), RuleStatus::kFail, "/spec/spec/devices/requests/0/exactly",
       "ResourceClaimTemplate \"t\" cannot be satisfied by any node of the topology model: request \"gpus\" (17x "
       "gpu.nvidia.com): at most 16 of 17 GPUs qualify on one node (node dgx)"},
      {"four_under_one_root", Gpus(4, "", kPcie), RuleStatus::kPass, "", ""},
      {"five_under_one_root", Gpus(5, "", kPcie), RuleStatus::kFail, "/spec/spec/devices/constraints/0",
       "at most 4 of 5 GPUs under one PCIe root"},
      {"product_absent", Gpus(1, "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"),
       RuleStatus::kFail, "/spec/spec/devices/requests/0/exactly", "no GPU qualifies on any node"},
      {"unknown_driver_version_passes",
       Gpus(2, "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('550.0.0')) >= 0"), RuleStatus::kPass,
       "", ""},
      {"memory_unknown_on_dgx_passes", Gpus(2, "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0"),
       RuleStatus::kPass, "", ""},
      {"claim", Claim(R"({"devices":{"requests":[{"name":"g","exactly":{"deviceClassName":"gpu.nvidia.com","count":32}}]}})"),
       RuleStatus::kFail, "", "ResourceClaim \"c\" cannot be satisfied"},
      {"v1beta1", Template(R"({"devices":{"requests":[{"name":"g","deviceClassName":"gpu.nvidia.com","count":32}]}})", "v1beta1"),
       RuleStatus::kFail, "/spec/spec/devices/requests/0", ""},
      {"other_class_skipped", Template(R"({"devices":{"requests":[{"name":"c","exactly":{"deviceClassName":"dra.cpu"}}]}})"),
       RuleStatus::kSkip, "", ""},
      {"pod_skipped", R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[]}})", RuleStatus::kSkip,
       "", ""},
  };
  for (const auto& row : rows) {
    auto r = RunDg014(Request(row.object), Snap().get());
    EXPECT_EQ(RuleStatusName(r.status), std::string(RuleStatusName(row.want))) << row.name << ": " << r.error;
    if (!row.pointer.empty()) {
      EXPECT_EQ(Pointers(r), std::vector<std::string>{row.pointer}) << row.name;
    }
    if (!row.message_part.empty()) {
      ASSERT_FALSE(r.findings.empty()) << row.name;
      EXPECT_NE(r.findings.front().message.find(row.message_part), std::string::npos)
          << row.name << ": " << r.findings.front().message;
      EXPECT_FALSE(r.findings.front().fix.empty()) << row.name;
    }
  }
}

TEST(Dg014, SkippedWithoutTopology) {
  EXPECT_EQ(RunDg014(Request(Gpus(17)), nullptr).status, RuleStatus::kSkip);
  auto empty = topology::Snapshot::Create({});
  EXPECT_EQ(RunDg014(Request(Gpus(17)), empty.get()).status, RuleStatus::kSkip);
}

TEST(Dg014, UpdatesAreNotJudged) {
  // Claim specs are immutable; an UPDATE (a finalizer removed) must not be blocked.
  auto upd = Request(Gpus(17), "team-a", admission::Operation::kUpdate);
  EXPECT_EQ(RunDg014(upd, Snap().get()).status, RuleStatus::kSkip);
}

TEST(Dg014, MessageIsBoundedAndNamesTheFix) {
  auto r = RunDg014(Request(Gpus(1, "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('16Gi')) >= 0")),
               Cluster({{"g4dn", kG4dn}}).get());
  ASSERT_EQ(r.status, RuleStatus::kFail);
  EXPECT_NE(r.findings.front().message.find("'memory' >= 16Gi: the largest GPU reports 15843721216 (~14.8Gi) on Tesla T4"),
            std::string::npos)
      << r.findings.front().message;
  EXPECT_NE(r.findings.front().fix.find("lower the memory floor"), std::string::npos);
}

TEST(Dg014, ActionsAndExemption) {
  static const Registry kRegistry = DefaultRegistry();
  auto decide = [&](const admission::AdmissionRequest& req, const policy::Policy& pol) {
    RuleInput in{req, pol, Snap().get(), {}};
    return Decide(Evaluate(in, kRegistry), pol);
  };
  auto failing = Request(Gpus(17, "", "", R"({"name":"t","annotations":{"draguard.io/interconnect":"nvlink"}})"));
  for (auto action : {policy::Action::kDeny, policy::Action::kWarn, policy::Action::kAudit, policy::Action::kOff}) {
    auto pol = Pol();
    pol.rules["DG014"].action = action;
    auto d = decide(failing, pol);
    EXPECT_EQ(Contains(d.denied_rules, "DG014"), action == policy::Action::kDeny);
    EXPECT_EQ(Contains(d.warned_rules, "DG014"), action == policy::Action::kWarn);
    EXPECT_EQ(Contains(d.audited_rules, "DG014"), action == policy::Action::kAudit);
  }
  auto exempt = failing;
  exempt.object["metadata"]["annotations"]["draguard.io/exempt"] = "DG014";
  exempt.object["metadata"]["annotations"]["draguard.io/exempt-reason"] = "hardware arriving next week";
  EXPECT_TRUE(Contains(decide(exempt, Pol()).denied_rules, "DG014"));  // annotation alone: ignored
  auto granted = Pol();
  granted.annotation_exceptions = {{{exempt.namespace_}, {}, {}, {"DG014"}}};
  auto d = decide(exempt, granted);
  EXPECT_FALSE(Contains(d.denied_rules, "DG014"));
}

}  // namespace
}  // namespace draguard::engine::testing
