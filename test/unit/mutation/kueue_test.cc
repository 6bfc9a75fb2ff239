// KueueDeviceClassMappings / KueueConfiguration: the Kueue configuration that matches a policy.
#include "draguard/mutation/kueue.h"

#include <set>

#include "draguard/mutation/mutation.h"
#include "testing.h"

namespace draguard::mutation {
namespace {

using testing::DefaultPolicy;
using testing::Json;

// The mapping named `name`, or null.
const KueueDeviceClassMapping* Find(const std::vector<KueueDeviceClassMapping>& all, const std::string& name) {
  for (const auto& m : all) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

TEST(KueueDeviceClassMappings, EveryClassOfTheDefaultPolicyUnderOneName) {
  auto m = KueueDeviceClassMappings(DefaultPolicy());
  ASSERT_TRUE(m.ok()) << m.status().message();
  // Whole GPUs under the name of legacy requests, so both count against one quota.
  ASSERT_NE(Find(*m, "nvidia.com/gpu"), nullptr);
  EXPECT_EQ(Find(*m, "nvidia.com/gpu")->device_classes,
            (std::vector<std::string>{"gpu.nvidia.com", "vfio.gpu.nvidia.com"}));
  EXPECT_EQ(Find(*m, "draguard.io/mig-devices")->device_classes, std::vector<std::string>{"mig.nvidia.com"});
  EXPECT_EQ(Find(*m, "draguard.io/nic-devices")->device_classes, std::vector<std::string>{"dranet"});
  EXPECT_EQ(Find(*m, "draguard.io/cpu-devices")->device_classes, std::vector<std::string>{"dra.cpu"});
  EXPECT_EQ(Find(*m, "draguard.io/imex-channels")->device_classes,
            (std::vector<std::string>{"compute-domain-default-channel.nvidia.com", "compute-domain-channel.nvidia.com"}));
  // Kueue's rules: at most 16 mappings, 1 to 8 classes each, every class in one mapping only.
  EXPECT_LE(m->size(), kKueueMaxMappings);
  std::set<std::string> seen;
  for (const auto& e : *m) {
    EXPECT_FALSE(e.device_classes.empty()) << e.name;
    EXPECT_LE(e.device_classes.size(), kKueueMaxClassesPerMapping) << e.name;
    EXPECT_FALSE(e.what.empty()) << e.name;
    for (const auto& c : e.device_classes) EXPECT_TRUE(seen.insert(c).second) << c;
  }
}

// Every DeviceClass a conversion can put into a claim is mapped: the classes of the templates
// generated for GPUs (several), MIG, an RDMA NIC and CPUs.
TEST(KueueDeviceClassMappings, CoverEveryClassAConversionWrites) {
  std::string yaml(policy::DefaultPolicyYaml());
  yaml.replace(yaml.find("numaAlignment: pcieRoots"), 24, "numaAlignment: numaNode");
  yaml.replace(yaml.find("cpu: {mode: none"), 16, "cpu: {mode: grouped");
  yaml.replace(yaml.find("kueue: false"), 12, "kueue: true");
  auto parsed = policy::ParsePolicy(yaml);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const policy::Policy& pol = *parsed;
  auto m = KueueDeviceClassMappings(pol);
  ASSERT_TRUE(m.ok()) << m.status().message();
  std::set<std::string> mapped;
  for (const auto& e : *m) mapped.insert(e.device_classes.begin(), e.device_classes.end());
  const auto g4dn = testing::Topo(testing::kG4dn);
  const auto mig = testing::Topo(testing::kXeMig);
  const auto rails = testing::MixedRails();  // an RDMA NIC under the root of three H100s
  struct Case {
    Json pod;
    const topology::Snapshot* topo;
  };
  Json nic = testing::PodWith({{"nvidia.com/gpu", 1}});
  nic["metadata"]["annotations"] = {{"draguard.io/nic", "rdma"}};
  Json cpus = testing::PodWith({{"nvidia.com/gpu", 1}, {"cpu", "4"}});
  const std::vector<Case> cases = {{testing::PodWith({{"nvidia.com/gpu", 4}}), g4dn.get()},
                                   {nic, rails.get()},
                                   {cpus, g4dn.get()},
                                   {testing::PodWith({{"nvidia.com/mig-1g.10gb", 1}}), mig.get()}};
  std::set<std::string> written;
  for (const auto& c : cases) {
    auto conv = ConvertPod(c.pod, "ml", pol, c.topo);
    ASSERT_EQ(conv.outcome, PodConversion::Outcome::kConverted) << conv.reason << "\n" << c.pod.dump();
    for (const auto& t : conv.templates) {
      for (const auto& r : t.object["spec"]["spec"]["devices"]["requests"]) {
        ASSERT_TRUE(r.contains("exactly")) << "no firstAvailable under mutation.kueue: " << r.dump();
        written.insert(r["exactly"]["deviceClassName"].get<std::string>());
      }
    }
  }
  EXPECT_EQ(written, (std::set<std::string>{"gpu.nvidia.com", "dranet", "dra.cpu", "mig.nvidia.com"}));
  for (const auto& c : written) EXPECT_TRUE(mapped.count(c)) << c << " is not mapped";
}

TEST(KueueDeviceClassMappings, FollowThePolicysClassesAndRefuseWhatKueueWould) {
  auto pol = DefaultPolicy();
  pol.device_classes.gpu = {"gpu.nvidia.com", "h100.example.com"};
  pol.device_classes.mig = {};
  pol.mutation.nic.device_class = "rdma.example.com";
  auto m = KueueDeviceClassMappings(pol);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(Find(*m, "nvidia.com/gpu")->device_classes,
            (std::vector<std::string>{"gpu.nvidia.com", "h100.example.com", "vfio.gpu.nvidia.com"}));
  EXPECT_EQ(Find(*m, "draguard.io/mig-devices"), nullptr);  // no class: no mapping
  EXPECT_EQ(Find(*m, "draguard.io/nic-devices")->device_classes, std::vector<std::string>{"rdma.example.com"});

  // A class named for two kinds of device would be in two mappings.
  auto twice = pol;
  twice.device_classes.cpu = {"dra.cpu", "h100.example.com"};
  auto t = KueueDeviceClassMappings(twice);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("h100.example.com"), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find("one mapping only"), std::string::npos) << t.status().message();
  // Named twice in one list: once.
  auto dup = pol;
  dup.device_classes.gpu = {"gpu.nvidia.com", "gpu.nvidia.com"};
  ASSERT_TRUE(KueueDeviceClassMappings(dup).ok());
  EXPECT_EQ(Find(*KueueDeviceClassMappings(dup), "nvidia.com/gpu")->device_classes.size(), 2u);
  // More than 8 classes in one mapping.
  auto many = pol;
  many.device_classes.gpu.clear();
  for (int i = 0; i < 8; ++i) many.device_classes.gpu.push_back("gpu" + std::to_string(i) + ".example.com");
  auto n = KueueDeviceClassMappings(many);  // 8 + the passthrough class
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("at most 8"), std::string::npos) << n.status().message();
}

TEST(KueueConfiguration, IsAConfigurationWithTheMappings) {
  auto m = KueueDeviceClassMappings(DefaultPolicy());
  ASSERT_TRUE(m.ok());
  const Json c = KueueConfiguration(*m);
  EXPECT_EQ(c["apiVersion"], "config.kueue.x-k8s.io/v1beta2");
  EXPECT_EQ(c["kind"], "Configuration");
  ASSERT_EQ(c["resources"].size(), 1u) << c.dump();
  const Json& list = c["resources"]["deviceClassMappings"];
  ASSERT_EQ(list.size(), m->size());
  EXPECT_EQ(list[0], Json({{"name", "nvidia.com/gpu"}, {"deviceClassNames", {"gpu.nvidia.com", "vfio.gpu.nvidia.com"}}}));
  for (const auto& e : list) EXPECT_EQ(e.size(), 2u) << e.dump();  // only the keys Kueue knows
}

}  // namespace
}  // namespace draguard::mutation
