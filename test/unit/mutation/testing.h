// Shared fixtures for the mutation tests.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "draguard/admission/review.h"
#include "draguard/policy/policy.h"
#include "draguard/topology/snapshot.h"

namespace draguard::mutation::testing {

using admission::Json;

/// The default policy.
inline policy::Policy DefaultPolicy() {
  auto p = policy::ParsePolicy(policy::DefaultPolicyYaml());
  EXPECT_TRUE(p.ok()) << p.status().message();
  return *p;
}

/// A snapshot of one export of test/data/hwloc (cached per file).
inline std::shared_ptr<const topology::Snapshot> Topo(const std::string& file) {
  static std::map<std::string, std::shared_ptr<const topology::Snapshot>> cache;
  auto it = cache.find(file);
  if (it != cache.end()) return it->second;
  auto snap = topology::LoadSnapshot(std::string(DRAGUARD_TEST_DATA) + "/hwloc/" + file);
  EXPECT_TRUE(snap.ok()) << snap.status().message();
  cache[file] = *snap;
  return *snap;
}

inline constexpr const char* kG4dn = "aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml";
inline constexpr const char* kDgx2h = "hwloc_nvidia-dgx2h_2s-xeon8174_16xV100-SXM3_12xNVSwitch_nvlink-hetero.xml";
inline constexpr const char* kMinsky = "hwloc_ibm-power8-minsky_2s_4xP100-SXM2_nvlink-gpu-cpu-hetero.xml";
inline constexpr const char* kLassen = "llnl_lassen_ibm-ac922_2s-power9_4xV100-SXM2_cuda-nvml_4xmlx5.xml";
inline constexpr const char* kPascal = "llnl_pascal_relion-x1904gt_2s-e5-2695v4_2xP100-PCIe_cuda-nvml-opencl.xml";
inline constexpr const char* kR740 = "clemson-palmetto_dell-r740_2s-gold6248_2xV100-PCIe_cuda-nvml_mlx5.xml";
/// 4x H100 with MIG: GPU 0 as 7 x 1g.10gb, GPU 1 as 2 x 3g.40gb, GPUs 2-3 whole (synthetic).
inline constexpr const char* kXeMig = "../hwloc-synthetic/xe8640-like_4xH100-SXM_mig.xml";

/// POWER9 with 6 V100 whose memory is kept as NUMA nodes 250-255, 3 GPUs per socket (derived).
inline constexpr const char* kPower9GpuMemory = "../hwloc-derived/ibm-power9-8335gtw_2s_6xV100_gpu-numa-nodes.xml";

/// A snapshot of exports (paths under test/data) loaded under the given node names.
inline std::shared_ptr<const topology::Snapshot> Nodes(const std::vector<std::pair<std::string, std::string>>& files) {
  namespace fs = std::filesystem;
  static int n = 0;
  fs::path dir = fs::temp_directory_path() / ("draguard-mut-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
  fs::create_directories(dir);
  for (const auto& [file, node] : files) {
    fs::copy_file(std::string(DRAGUARD_TEST_DATA) + "/" + file, dir / (node + ".xml"), fs::copy_options::overwrite_existing);
  }
  auto s = topology::LoadSnapshot(dir.string());
  fs::remove_all(dir);
  EXPECT_TRUE(s.ok());
  return s.ok() ? *s : nullptr;
}

/// Two g4dn.metal nodes (g4dn-a, g4dn-b) and one DGX-2H (dgx-a).
inline std::shared_ptr<const topology::Snapshot> Mixed() {
  static std::shared_ptr<const topology::Snapshot> snap = Nodes({{std::string("hwloc/") + kG4dn, "g4dn-a"},
                                                                 {std::string("hwloc/") + kG4dn, "g4dn-b"},
                                                                 {std::string("hwloc/") + kDgx2h, "dgx-a"}});
  return snap;
}

/// One XE8640-like node (4 NVLinked H100, an RDMA NIC under the roots of three of them), one
/// g4dn.metal (no NVLink) and one Lassen (AC922).
inline std::shared_ptr<const topology::Snapshot> MixedRails() {
  static std::shared_ptr<const topology::Snapshot> snap =
      Nodes({{"hwloc-synthetic/xe8640-like_4xH100-SXM_4numa_nvlink-all_3xmlx5.xml", "xe-a"},
             {std::string("hwloc/") + kG4dn, "g4dn-a"},
             {std::string("hwloc/") + kLassen, "lassen-a"}});
  return snap;
}

/// A Pod with one container "main" whose limits are `limits`, plus `annotations`.
inline Json PodWith(Json limits, Json annotations = Json::object()) {
  return Json{{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "p"}, {"namespace", "ml"}, {"annotations", annotations}}},
              {"spec", {{"containers", Json::array({{{"name", "main"}, {"image", "x"},
                                                     {"resources", {{"limits", limits}}}}})}}}};
}

}  // namespace draguard::mutation::testing
