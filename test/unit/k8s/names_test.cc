// Kubernetes object names: the DNS-1123 shapes and the node name derived from an export's file
// name, which test/cluster/cluster.sh and the Go harness's NodeName derive the same way.
#include "draguard/k8s/names.h"

#include <gtest/gtest.h>

#include <string>

namespace draguard::k8s {
namespace {

TEST(NamesTest, DnsShapes) {
  EXPECT_TRUE(IsDnsSubdomain("a.b-c.d"));
  EXPECT_FALSE(IsDnsSubdomain("a..b"));
  EXPECT_FALSE(IsDnsSubdomain("-a"));
  EXPECT_FALSE(IsDnsSubdomain("A"));
  EXPECT_FALSE(IsDnsSubdomain(""));
  EXPECT_TRUE(IsDnsSubdomain(std::string(100, 'a')));  // no per-label limit in IsDNS1123Subdomain
  EXPECT_FALSE(IsDnsSubdomain(std::string(254, 'a')));
  EXPECT_TRUE(IsDnsLabel(std::string(63, 'a')));
  EXPECT_FALSE(IsDnsLabel(std::string(64, 'a')));
  EXPECT_FALSE(IsDnsLabel("a.b"));
}

// The names the cluster tests' Nodes get (cluster.sh: lower case, `_`, `.` and `+` as `-`).
TEST(NamesTest, NodeNameFromAFileStemIsTheHarnessNodeName) {
  EXPECT_EQ(NodeNameFrom("aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa"),
            "aws-g4dn-metal-2s-8259cl-8xt4-cuda-nvml-opencl-efa");
  EXPECT_EQ(NodeNameFrom("hwloc3-format_nvidia-dgx2h_v3.0"), "hwloc3-format-nvidia-dgx2h-v3-0");
  EXPECT_EQ(NodeNameFrom("hwloc_supermicro-x9drg_2s-e5-2650_K40m+M2075+R9_mlx5_normalio"),
            "hwloc-supermicro-x9drg-2s-e5-2650-k40m-m2075-r9-mlx5-normalio");
  EXPECT_EQ(NodeNameFrom("xe8640-like_4xH100-SXM_4numa_nvlink-all_3xmlx5"), "xe8640-like-4xh100-sxm-4numa-nvlink-all-3xmlx5");
  // Cut to 63 characters (a label value: kubernetes.io/hostname), then '-' trimmed.
  EXPECT_EQ(NodeNameFrom("hwloc_nvidia-dgx2h_2s-xeon8174_16xV100-SXM3_12xNVSwitch_nvlink-hetero"),
            "hwloc-nvidia-dgx2h-2s-xeon8174-16xv100-sxm3-12xnvswitch-nvlink");
  EXPECT_EQ(NodeNameFrom("_x_ y@"), "x--y");
  EXPECT_EQ(NodeNameFrom("__"), "");
  EXPECT_EQ(NodeNameFrom(""), "");
}

// A name that is already a node name stays one (real nodes are named like this), lower-cased as
// the kubelet names a node after its host name.
TEST(NamesTest, NodeNamesStayAsTheyAre) {
  EXPECT_EQ(NodeNameFrom("gpu-node-1"), "gpu-node-1");
  EXPECT_EQ(NodeNameFrom("ip-10-0-0-1.ec2.internal"), "ip-10-0-0-1.ec2.internal");
  EXPECT_EQ(NodeNameFrom("DGX-A.Example.com"), "dgx-a.example.com");
  EXPECT_EQ(NodeNameFrom(std::string(100, 'a')), std::string(100, 'a'));
}

}  // namespace
}  // namespace draguard::k8s
