// DG005 topology-alignment: table of pass / fail / skip / error cases, each action, exemption.
#include "rule_test_util.h"

namespace draguard::engine::testing {
namespace {

const std::string kGpus2 = R"({"name":"gpus","exactly":{"deviceClassName":"gpu.nvidia.com","count":2}})";
const std::string kNic = R"({"name":"nic","exactly":{"deviceClassName":"dranet"}})";
const std::string kPcie = R"({"matchAttribute":"resource.kubernetes.io/pcieRoot"})";

std::string Devices(const std::string& requests, const std::string& constraints = "") {
  return Template(R"({"devices":{"requests":[)" + requests + "]" +
                  (constraints.empty() ? "" : R"(,"constraints":[)" + constraints + "]") + "}}");
}

TEST(Dg005, Table) {
  std::vector<Case> cases = {
      {"single_gpu", Devices(R"({"name":"g","exactly":{"deviceClassName":"gpu.nvidia.com"}})"), RuleStatus::kPass, {}, ""},
      {"two_gpus_aligned_all", Devices(kGpus2, kPcie), RuleStatus::kPass, {}, ""},
      {"gpu_nic_aligned_named", Devices(kGpus2 + "," + kNic, R"({"requests":["gpus","nic"],"matchAttribute":"resource.kubernetes.io/pcieRoot"})"),
       RuleStatus::kPass, {}, ""},
      {"two_gpus_unaligned", Devices(kGpus2), RuleStatus::kFail, {"/spec/spec/devices"}, "allocates 2 devices"},
      {"gpu_nic_partial_constraint", Devices(kGpus2 + "," + kNic, R"({"requests":["gpus"],"matchAttribute":"resource.kubernetes.io/pcieRoot"})"),
       RuleStatus::kFail, {"/spec/spec/devices/constraints"}, "\"gpus\" x2, \"nic\""},
      {"other_attribute", Devices(kGpus2, R"({"matchAttribute":"gpu.nvidia.com/productName"})"), RuleStatus::kFail, {}, ""},
      {"unqualified_pcieRoot_does_not_count", Devices(kGpus2, R"({"matchAttribute":"pcieRoot"})"), RuleStatus::kFail, {}, ""},
      {"first_available_covered_alternative",
       Devices(R"({"name":"gpu","firstAvailable":[{"name":"big","deviceClassName":"gpu.nvidia.com"},{"name":"two","deviceClassName":"gpu.nvidia.com","count":2}]})",
               R"({"requests":["gpu/two"],"matchAttribute":"resource.kubernetes.io/pcieRoot"})"),
       RuleStatus::kPass, {}, ""},
      {"first_available_uncovered_alternative",
       Devices(R"({"name":"gpu","firstAvailable":[{"name":"big","deviceClassName":"gpu.nvidia.com"},{"name":"two","deviceClassName":"gpu.nvidia.com","count":2}]})"),
       RuleStatus::kFail, {}, "alternative allocates 2 devices (\"gpu/two\" x2)"},
      {"imex_channel_exempt", Devices(R"({"name":"g","exactly":{"deviceClassName":"gpu.nvidia.com"}},{"name":"ch","exactly":{"deviceClassName":"compute-domain-default-channel.nvidia.com"}})"),
       RuleStatus::kPass, {}, ""},
      {"nics_only_skipped", Devices(R"({"name":"nic","exactly":{"deviceClassName":"dranet","count":8}})"), RuleStatus::kSkip, {}, ""},
      {"v1beta1_flat", Template(R"({"devices":{"requests":[{"name":"g","deviceClassName":"gpu.nvidia.com","count":4}]}})", "v1beta1"),
       RuleStatus::kFail, {}, "allocates 4 devices"},
  };
  for (const auto& c : cases) CheckCase("DG005", c);
}

std::string Sel(const std::string& expr) { return R"(,"selectors":[{"cel":{"expression":")" + expr + R"("}}])"; }

const std::string kRoots = "device.attributes['resource.kubernetes.io'].pcieRoot in ['pci0000:17', 'pci0000:34']";

// Placements the claim generator emits: selector-restricted PCIe roots / GPU UUIDs, or NVLink.
// Rails: single-GPU requests with one NIC each on its GPU's root (pcieRoot constraint per pair).
TEST(Dg005, Rails) {
  const std::string one_gpu = R"({"deviceClassName":"gpu.nvidia.com","count":1})";
  const std::string reqs = R"({"name":"g0","exactly":)" + one_gpu + R"(},{"name":"n0","exactly":{"deviceClassName":"dranet"}},)" +
                           R"({"name":"g1","exactly":)" + one_gpu + R"(},{"name":"n1","exactly":{"deviceClassName":"dranet"}})";
  const std::string pairs = R"({"requests":["g0","n0"],"matchAttribute":"resource.kubernetes.io/pcieRoot"},)"
                            R"({"requests":["g1","n1"],"matchAttribute":"resource.kubernetes.io/pcieRoot"})";
  auto tmpl = [&](const std::string& constraints, const std::string& annotation) {
    return R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaimTemplate","metadata":{"name":"t"},"spec":{)" +
           (annotation.empty() ? std::string()
                               : R"("metadata":{"annotations":{"draguard.io/interconnect":")" + annotation + R"("}},)") +
           R"("spec":{"devices":{"requests":[)" + reqs + "]" +
           (constraints.empty() ? "" : R"(,"constraints":[)" + constraints + "]") + "}}}}";
  };
  std::vector<Case> cases = {
      {"nvlink_rails", tmpl(pairs, "nvlink"), RuleStatus::kPass, {}, ""},
      // Without NVLink the two pairs may sit on different roots.
      {"rails_without_nvlink", tmpl(pairs, ""), RuleStatus::kFail, {}, "allocates 4 devices"},
      // One root for all GPUs ties the pairs together.
      {"rails_on_one_root",
       tmpl(pairs + R"(,{"requests":["g0","g1"],"matchAttribute":"resource.kubernetes.io/pcieRoot"})", ""),
       RuleStatus::kPass, {}, ""},
      {"nvlink_rail_nic_uncovered",
       tmpl(R"({"requests":["g0","n0"],"matchAttribute":"resource.kubernetes.io/pcieRoot"})", "nvlink"),
       RuleStatus::kFail, {}, ""},
  };
  for (const auto& c : cases) CheckCase("DG005", c);
}

TEST(Dg005, SelectorRestrictedAndNvlinkAlignment) {
  auto gpus = [](const std::string& expr, int count = 2) {
    return R"({"name":"gpus","exactly":{"deviceClassName":"gpu.nvidia.com","count":)" + std::to_string(count) +
           (expr.empty() ? "" : Sel(expr)) + "}}";
  };
  auto nic = [](const std::string& expr) {
    return R"({"name":"nic","exactly":{"deviceClassName":"dranet")" + (expr.empty() ? "" : Sel(expr)) + "}}";
  };
  const std::string numa_local =
      R"({"name":"gpu","firstAvailable":[{"name":"numa0","deviceClassName":"gpu.nvidia.com","count":2)" + Sel(kRoots) +
      R"(},{"name":"numa1","deviceClassName":"gpu.nvidia.com","count":2)" +
      Sel("device.attributes['resource.kubernetes.io'].pcieRoot in ['pci0000:e6', 'pci0000:f3']") + "}]}";
  const std::string nvlink_meta = R"({"name":"t","annotations":{"draguard.io/interconnect":"nvlink"}})";
  auto nvlink_template = [&](const std::string& requests) {
    return R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaimTemplate","metadata":{"name":"t"},)"
           R"("spec":{"metadata":{"annotations":{"draguard.io/interconnect":"nvlink"}},"spec":{"devices":{"requests":[)" +
           requests + "]}}}}";
  };
  std::vector<Case> cases = {
      {"numa_local_first_available", Devices(numa_local), RuleStatus::kPass, {}, ""},
      {"root_equality", Devices(gpus("device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:17'")),
       RuleStatus::kPass, {}, ""},
      {"root_guarded", Devices(gpus("'pcieRoot' in device.attributes['resource.kubernetes.io'] && "
                                    "device.attributes['resource.kubernetes.io']['pcieRoot'] in ['pci0000:17'] && "
                                    "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('10Gi')) >= 0")),
       RuleStatus::kPass, {}, ""},
      {"uuid_list", Devices(gpus("device.attributes['gpu.nvidia.com'].uuid in ['GPU-1', 'GPU-2']")), RuleStatus::kPass, {}, ""},
      // One socket of a Grace or POWER9 node: GPUs by their memory nodes, CPUs by their node (int literals).
      {"numa_node_literals",
       Devices(gpus("'numaNode' in device.attributes['resource.kubernetes.io'] && "
                    "device.attributes['resource.kubernetes.io'].numaNode in [253, 254, 255]") +
               R"(,{"name":"cpu","exactly":{"deviceClassName":"dra.cpu","count":8)" +
               Sel("device.attributes['resource.kubernetes.io'].numaNode == 0") + "}}"),
       RuleStatus::kPass, {}, ""},
      {"numa_node_unrestricted_cpu",
       Devices(gpus("device.attributes['resource.kubernetes.io'].numaNode in [253, 254, 255]") +
               R"(,{"name":"cpu","exactly":{"deviceClassName":"dra.cpu","count":8}})"),
       RuleStatus::kFail, {}, ""},
      {"nvlink_template_metadata", nvlink_template(gpus("", 8)), RuleStatus::kPass, {}, ""},
      {"nvlink_object_annotation",
       Template(R"({"devices":{"requests":[)" + gpus("", 8) + "]}}", "v1", nvlink_meta), RuleStatus::kPass, {}, ""},
      {"nvlink_gpu_and_restricted_nic",
       nvlink_template(gpus("", 8) + "," + nic("device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:c2'")),
       RuleStatus::kPass, {}, ""},
      {"nvlink_gpu_nic_uncovered", nvlink_template(gpus("", 8) + "," + nic("")), RuleStatus::kFail, {},
       "allocates 9 devices"},
      {"restricted_gpus_nic_uncovered", Devices(gpus(kRoots) + "," + nic("")), RuleStatus::kFail, {}, ""},
      {"restricted_gpus_and_nic", Devices(gpus(kRoots) + "," + nic(kRoots)), RuleStatus::kPass, {}, ""},
      {"pcie_annotation_is_not_alignment",
       Template(R"({"devices":{"requests":[)" + gpus("", 2) + "]}}", "v1",
                R"({"name":"t","annotations":{"draguard.io/interconnect":"pcie"}})"),
       RuleStatus::kFail, {}, ""},
      {"restriction_in_a_disjunction",
       Devices(gpus("device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:17' || "
                    "device.attributes['gpu.nvidia.com'].productName == 'Tesla T4'")),
       RuleStatus::kFail, {}, ""},
      {"negated_restriction", Devices(gpus("!(" + kRoots + ")")), RuleStatus::kFail, {}, ""},
      {"driver_domain_is_not_the_standard_attribute",
       Devices(gpus("device.attributes[device.driver].pcieRoot == 'pci0000:17'")), RuleStatus::kFail, {}, ""},
      {"text_is_not_analysed", Devices(gpus("device.attributes['gpu.nvidia.com'].productName == 'pcieRoot in [x]'")),
       RuleStatus::kFail, {}, ""},
      {"root_from_a_variable_list",
       Devices(gpus("device.attributes['resource.kubernetes.io'].pcieRoot in device.attributes['gpu.nvidia.com'].productName.split(' ')")),
       RuleStatus::kFail, {}, ""},
  };
  for (const auto& c : cases) CheckCase("DG005", c);
}

// CPUs (dra-driver-cpu, class dra.cpu) and NICs in a GPU claim: aligned with the GPUs by a
// pcieRoot or numaNode matchAttribute, or by the driver-specific NUMA attributes where the devices
// publish them (dra.net/numaNode on NICs and CPUs; no GPU driver publishes it).
TEST(Dg005, CpusAndNicsWithGpus) {
  const std::string gpu = R"({"name":"gpu","exactly":{"deviceClassName":"gpu.nvidia.com"}})";
  const std::string cpus = R"({"name":"cpu","exactly":{"deviceClassName":"dra.cpu","count":8}})";
  const std::string grouped =
      R"({"name":"cpu","exactly":{"deviceClassName":"dra.cpu","capacity":{"requests":{"dra.cpu/cpu":"8"}}}})";
  auto on = [](const std::string& attr, const std::string& requests) {
    return R"({"requests":[)" + requests + R"(],"matchAttribute":")" + attr + R"("})";
  };
  const std::string numa = "resource.kubernetes.io/numaNode";
  std::vector<Case> cases = {
      {"gpu_cpu_unaligned", Devices(gpu + "," + cpus), RuleStatus::kFail, {"/spec/spec/devices"},
       R"(allocates 9 devices ("gpu", "cpu" x8) mixes GPUs with CPUs without a matchAttribute )"
       "resource.kubernetes.io/numaNode or resource.kubernetes.io/pcieRoot constraint"},
      {"gpu_grouped_cpu_unaligned", Devices(gpu + "," + grouped), RuleStatus::kFail, {}, R"(("gpu", "cpu") mixes GPUs with CPUs)"},
      {"gpu_cpu_numa", Devices(gpu + "," + cpus, on(numa, R"("gpu","cpu")")), RuleStatus::kPass, {}, ""},
      {"gpu_cpu_numa_all_requests", Devices(gpu + "," + grouped, R"({"matchAttribute":")" + numa + R"("})"),
       RuleStatus::kPass, {}, ""},
      {"gpu_cpu_pcie_root", Devices(gpu + "," + cpus, on("resource.kubernetes.io/pcieRoot", R"("gpu","cpu")")),
       RuleStatus::kPass, {}, ""},
      {"numa_over_gpus_only", Devices(kGpus2 + "," + cpus, on(numa, R"("gpus")")), RuleStatus::kFail,
       {"/spec/spec/devices/constraints"}, "mixes GPUs with CPUs"},
      {"two_gpus_numa", Devices(kGpus2, on(numa, R"("gpus")")), RuleStatus::kPass, {}, ""},
      // dra.net/numaNode is published by dranet NICs and dra-driver-cpu CPUs, not by GPUs.
      {"dranet_numa_cannot_tie_a_gpu", Devices(gpu + "," + cpus, on("dra.net/numaNode", R"("gpu","cpu")")),
       RuleStatus::kFail, {}, ""},
      {"nic_on_gpu_root_cpu_on_nic_numa",
       Devices(gpu + "," + cpus + "," + kNic, on("resource.kubernetes.io/pcieRoot", R"("gpu","nic")") + "," +
                                                  on("dra.net/numaNode", R"("cpu","nic")")),
       RuleStatus::kPass, {}, ""},
      {"cpu_only_numa_id_leaves_gpu_apart", Devices(gpu + "," + cpus, on("dra.cpu/numaNodeID", R"("cpu")")),
       RuleStatus::kFail, {}, ""},
      {"gpu_cpu_nic_unaligned", Devices(gpu + "," + cpus + "," + kNic), RuleStatus::kFail, {},
       "mixes GPUs with CPUs and NICs"},
      {"gpu_cpu_nic_numa", Devices(gpu + "," + cpus + "," + kNic, on(numa, R"("gpu","cpu","nic")")), RuleStatus::kPass, {}, ""},
      {"gpu_nic_unaligned", Devices(gpu + "," + kNic), RuleStatus::kFail, {}, "mixes GPUs with NICs"},
      {"gpu_nic_numa", Devices(gpu + "," + kNic, on(numa, R"("gpu","nic")")), RuleStatus::kPass, {}, ""},
      {"cpus_only_skipped", Devices(cpus), RuleStatus::kSkip, {}, ""},
  };
  for (const auto& c : cases) CheckCase("DG005", c);
}

// The fix names the requests of the uncovered allocation and the attribute to add: numaNode with
// CPUs, pcieRoot for GPUs and NICs (GPUDirect RDMA wants the NIC on its GPU's root).
TEST(Dg005, FixNamesTheRequests) {
  const std::string gpu = R"({"name":"gpu","exactly":{"deviceClassName":"gpu.nvidia.com"}})";
  const std::string cpus = R"({"name":"cpu","exactly":{"deviceClassName":"dra.cpu","count":8}})";
  auto fix = [](const std::string& object) {
    auto r = RunRule("DG005", Request(object), DefaultPolicy());
    return r.findings.empty() ? std::string() : r.findings[0].fix;
  };
  EXPECT_EQ(fix(Devices(gpu + "," + cpus + "," + kNic)),
            "add constraints: [{requests: [gpu, cpu, nic], matchAttribute: resource.kubernetes.io/numaNode}]");
  EXPECT_EQ(fix(Devices(gpu + "," + kNic)),
            "add constraints: [{requests: [gpu, nic], matchAttribute: resource.kubernetes.io/pcieRoot}]");
  EXPECT_EQ(fix(Devices(kGpus2)),
            "add constraints: [{requests: [...all of them...], matchAttribute: resource.kubernetes.io/pcieRoot}]");
  // The policy's CPU and NIC classes decide what a request is.
  auto pol = DefaultPolicy();
  pol.device_classes.cpu = {"cpus.example.com"};
  auto r = RunRule("DG005", Request(Devices(gpu + "," + cpus)), pol);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].message.find("mixes GPUs with CPUs"), std::string::npos) << r.findings[0].message;
}

TEST(Dg005, ExemptClassesFromPolicy) {
  auto pol = DefaultPolicy();
  pol.alignment_exempt_classes.push_back("dranet");
  CheckCase("DG005", {"nic_exempt", Devices(R"({"name":"g","exactly":{"deviceClassName":"gpu.nvidia.com"}},)" + kNic),
                      RuleStatus::kPass, {}, ""}, pol);
}

TEST(Dg005, TooManyCombinationsIsAnError) {
  std::string reqs;
  for (int i = 0; i < 13; ++i) {
    if (i) reqs += ",";
    reqs += R"({"name":"r)" + std::to_string(i) +
            R"(","firstAvailable":[{"name":"a","deviceClassName":"gpu.nvidia.com"},{"name":"b","deviceClassName":"gpu.nvidia.com"}]})";
  }
  CheckCase("DG005", {"8192_combinations", Devices(reqs), RuleStatus::kError, {}, ""});
}

TEST(Dg005, ActionsAndExemption) { ExpectActionsAndExemption("DG005", Request(Devices(kGpus2))); }

}  // namespace
}  // namespace draguard::engine::testing
