#include "agent/accelerators/nvidia/nvidia.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "agent/accelerators/testing/fixture.h"

namespace hf::agent::accel {
namespace {

using testing::Fixture;

TEST(NvidiaSmiTest, RealQueryOutputsReadByTheirHeaders) {
  // 16 V100s, a field list without index or memory.total: line order, no memory.
  Result<std::vector<GpuDevice>> v100 = ParseNvidiaSmiInventory(Fixture("nvidia/nvidia-smi-query-gpu-csv-v100-sxm3-16x.txt"));
  ASSERT_TRUE(v100.ok()) << v100.status().ToString();
  ASSERT_EQ(v100->size(), 16u);
  EXPECT_EQ((*v100)[15].index, 15);
  EXPECT_EQ((*v100)[15].model, "Tesla V100-SXM3-32GB");
  EXPECT_EQ((*v100)[0].uuid, "GPU-ad466f2f-575d-d949-35e0-9a7d912d974e");
  EXPECT_EQ((*v100)[0].memory_mib, 0);
  Result<std::vector<GpuUsage>> v100u = ParseNvidiaSmiUsage(Fixture("nvidia/nvidia-smi-query-gpu-csv-v100-sxm3-16x.txt"));
  ASSERT_TRUE(v100u.ok()) << v100u.status().ToString();
  EXPECT_DOUBLE_EQ((*v100u)[1].utilization, 0.98);
  EXPECT_EQ((*v100u)[1].memory_used_mib, 11149);
  // An H100 with every field the driver knows, units in the header.
  Result<std::vector<GpuDevice>> h100 = ParseNvidiaSmiInventory(Fixture("nvidia/nvidia-smi-query-gpu-allfields-csv-h100-1x.txt"));
  ASSERT_TRUE(h100.ok()) << h100.status().ToString();
  ASSERT_EQ(h100->size(), 1u);
  EXPECT_EQ((*h100)[0].model, "H100 80GB HBM3");
  EXPECT_EQ((*h100)[0].memory_mib, 81559);
  // An A10 sampled in a loop, values with units: usage reads; no name, no device.
  Result<std::vector<GpuUsage>> a10 = ParseNvidiaSmiUsage(Fixture("nvidia/nvidia-smi-query-gpu-csv-a10-loop.txt"));
  ASSERT_TRUE(a10.ok()) << a10.status().ToString();
  EXPECT_EQ((*a10)[0].memory_used_mib, 21);
  EXPECT_FALSE(ParseNvidiaSmiInventory(Fixture("nvidia/nvidia-smi-query-gpu-csv-a10-loop.txt")).ok());
}

TEST(NvidiaSmiTest, RealTopologiesOfA100AndH100) {
  std::vector<GpuDevice> a100(8);
  for (int i = 0; i < 8; ++i) a100[size_t(i)].index = i;
  const Status a = ApplyNvidiaSmiTopology(Fixture("nvidia/nvidia-smi-topo-m-a100-8x.txt"), a100);
  ASSERT_TRUE(a.ok()) << a.ToString();
  for (const GpuDevice& g : a100) EXPECT_EQ(g.fabric_domain, 0) << g.index;
  std::vector<GpuDevice> h100(4);
  for (int i = 0; i < 4; ++i) h100[size_t(i)].index = i;
  const Status h = ApplyNvidiaSmiTopology(Fixture("nvidia/nvidia-smi-topo-m-h100-4x.txt"), h100);
  ASSERT_TRUE(h.ok()) << h.ToString();
  for (const GpuDevice& g : h100) EXPECT_EQ(g.fabric_domain, 0) << g.index;
  // A10s on PCIe only: no fabric.
  std::vector<GpuDevice> a10(4);
  for (int i = 0; i < 4; ++i) a10[size_t(i)].index = i;
  const Status p = ApplyNvidiaSmiTopology(Fixture("nvidia/nvidia-smi-topo-m-a10-4x.txt"), a10);
  ASSERT_TRUE(p.ok()) << p.ToString();
  for (const GpuDevice& g : a10) EXPECT_EQ(g.fabric_domain, -1) << g.index;
}

TEST(NvidiaSmiTest, Inventory) {
  // Real output of --query-gpu=index,uuid,name,memory.total --format=csv,noheader,nounits.
  const char* out =
      "0, GPU-8f3c1d2e-aaaa-bbbb-cccc-000000000000, NVIDIA H100 80GB HBM3, 81559\n"
      "1, GPU-8f3c1d2e-aaaa-bbbb-cccc-000000000001, NVIDIA H100 80GB HBM3, 81559\n"
      "2, GPU-0000, Tesla T4, 15360\n";
  Result<std::vector<GpuDevice>> gpus = ParseNvidiaSmiInventory(out);
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  ASSERT_EQ(gpus->size(), 3u);
  EXPECT_EQ((*gpus)[0].index, 0);
  EXPECT_EQ((*gpus)[0].uuid, "GPU-8f3c1d2e-aaaa-bbbb-cccc-000000000000");
  EXPECT_EQ((*gpus)[0].model, "H100 80GB HBM3");
  EXPECT_EQ((*gpus)[0].memory_mib, 81559);
  EXPECT_EQ((*gpus)[0].numa, -1);
  EXPECT_EQ((*gpus)[2].model, "Tesla T4");
  EXPECT_EQ((*gpus)[2].vendor, "nvidia");
  EXPECT_TRUE(ParseNvidiaSmiInventory("").ok());
  EXPECT_FALSE(ParseNvidiaSmiInventory("0, GPU-x, H100\n").ok());
  EXPECT_FALSE(ParseNvidiaSmiInventory("x, GPU-x, H100, 1\n").ok());
}

TEST(NvidiaSmiTest, Usage) {
  Result<std::vector<GpuUsage>> u = ParseNvidiaSmiUsage("0, 95, 30000\n1, [N/A], 0\n");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  ASSERT_EQ(u->size(), 2u);
  EXPECT_DOUBLE_EQ((*u)[0].utilization, 0.95);
  EXPECT_EQ((*u)[0].memory_used_mib, 30000);
  EXPECT_DOUBLE_EQ((*u)[1].utilization, 0);
}

// `nvidia-smi topo -m` samples, written in the real format: a header that
// starts with a tab, tab-separated cells with " X " on the diagonal, empty
// affinity cells on NIC rows, then the legend. The lines are as wide as the
// real output, so clang-format is kept off them.
// clang-format off
// The legend every version prints after the matrix (NIC rows, if any, come
// before it; the NIC legend after it).
const std::string kLegend =
    "\n"
    "Legend:\n"
    "\n"
    "  X    = Self\n"
    "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n"
    "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node\n"
    "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
    "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)\n"
    "  PIX  = Connection traversing at most a single PCIe bridge\n"
    "  NV#  = Connection traversing a bonded set of # NVLinks\n";

// A DGX A100 (driver 535): NV12 all-to-all, ten NICs, NPS4 NUMA.
const std::string kDgxA100 =
    "\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tNIC0\tNIC1\tNIC2\tNIC3\tNIC4\tNIC5\tNIC6\tNIC7\tNIC8\tNIC9\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tNV12\tNV12\tNV12\tNV12\tNV12\tNV12\tNV12\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t48-63,176-191\t3\t\tN/A\n"
    "GPU1\tNV12\t X \tNV12\tNV12\tNV12\tNV12\tNV12\tNV12\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t48-63,176-191\t3\t\tN/A\n"
    "GPU2\tNV12\tNV12\t X \tNV12\tNV12\tNV12\tNV12\tNV12\tSYS\tSYS\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t16-31,144-159\t1\t\tN/A\n"
    "GPU3\tNV12\tNV12\tNV12\t X \tNV12\tNV12\tNV12\tNV12\tSYS\tSYS\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t16-31,144-159\t1\t\tN/A\n"
    "GPU4\tNV12\tNV12\tNV12\tNV12\t X \tNV12\tNV12\tNV12\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tPXB\tPXB\tSYS\tSYS\t112-127,240-255\t7\t\tN/A\n"
    "GPU5\tNV12\tNV12\tNV12\tNV12\tNV12\t X \tNV12\tNV12\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tPXB\tPXB\tSYS\tSYS\t112-127,240-255\t7\t\tN/A\n"
    "GPU6\tNV12\tNV12\tNV12\tNV12\tNV12\tNV12\t X \tNV12\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tPXB\tPXB\t80-95,208-223\t5\t\tN/A\n"
    "GPU7\tNV12\tNV12\tNV12\tNV12\tNV12\tNV12\tNV12\t X \tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tPXB\tPXB\t80-95,208-223\t5\t\tN/A\n"
    "NIC0\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t X \tPIX\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t\t\t\t\n"
    "NIC1\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tPIX\t X \tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t\t\t\t\n"
    "NIC2\tSYS\tSYS\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t X \tPIX\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t\t\t\t\n"
    "NIC3\tSYS\tSYS\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tPIX\t X \tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t\t\t\t\n"
    "NIC4\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t X \tPIX\tSYS\tSYS\tSYS\tSYS\t\t\t\t\n"
    "NIC5\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tPIX\t X \tSYS\tSYS\tSYS\tSYS\t\t\t\t\n"
    "NIC6\tSYS\tSYS\tSYS\tSYS\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t X \tPIX\tSYS\tSYS\t\t\t\t\n"
    "NIC7\tSYS\tSYS\tSYS\tSYS\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tPIX\t X \tSYS\tSYS\t\t\t\t\n"
    "NIC8\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t X \tPIX\t\t\t\t\n"
    "NIC9\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tPIX\t X \t\t\t\t\n" +
    kLegend +
    "\n"
    "NIC Legend:\n"
    "\n"
    "  NIC0: mlx5_0\n"
    "  NIC1: mlx5_1\n"
    "  NIC2: mlx5_2\n"
    "  NIC3: mlx5_3\n"
    "  NIC4: mlx5_4\n"
    "  NIC5: mlx5_5\n"
    "  NIC6: mlx5_6\n"
    "  NIC7: mlx5_7\n"
    "  NIC8: mlx5_8\n"
    "  NIC9: mlx5_9\n";

// A PCIe-only box (driver 470): switches {0,1} (PIX), {2,3} (PIX), {4,5} (PXB);
// 6 and 7 share only a host bridge; two sockets.
const std::string kPcieOnly =
    "\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tmlx5_0\tmlx5_1\tCPU Affinity\tNUMA Affinity\n"
    "GPU0\t X \tPIX\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\tPIX\tSYS\t0-23,48-71\t0\n"
    "GPU1\tPIX\t X \tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\tNODE\tSYS\t0-23,48-71\t0\n"
    "GPU2\tNODE\tNODE\t X \tPIX\tSYS\tSYS\tSYS\tSYS\tNODE\tSYS\t0-23,48-71\t0\n"
    "GPU3\tNODE\tNODE\tPIX\t X \tSYS\tSYS\tSYS\tSYS\tNODE\tSYS\t0-23,48-71\t0\n"
    "GPU4\tSYS\tSYS\tSYS\tSYS\t X \tPXB\tNODE\tNODE\tSYS\tPIX\t24-47,72-95\t1\n"
    "GPU5\tSYS\tSYS\tSYS\tSYS\tPXB\t X \tNODE\tNODE\tSYS\tNODE\t24-47,72-95\t1\n"
    "GPU6\tSYS\tSYS\tSYS\tSYS\tNODE\tNODE\t X \tPHB\tSYS\tNODE\t24-47,72-95\t1\n"
    "GPU7\tSYS\tSYS\tSYS\tSYS\tNODE\tNODE\tPHB\t X \tSYS\tNODE\t24-47,72-95\t1\n"
    "mlx5_0\tPIX\tNODE\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\t X \tSYS\t\t\n"
    "mlx5_1\tSYS\tSYS\tSYS\tSYS\tPIX\tNODE\tNODE\tNODE\tSYS\t X \t\t\n" +
    kLegend;

// Eight PCIe cards joined in pairs by NVLink bridges (NV4); each socket's four
// under one PCIe switch tree (PXB).
const std::string kBridgedPairs =
    "\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tNV4\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\t0-31,64-95\t0\t\tN/A\n"
    "GPU1\tNV4\t X \tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\t0-31,64-95\t0\t\tN/A\n"
    "GPU2\tPXB\tPXB\t X \tNV4\tSYS\tSYS\tSYS\tSYS\t0-31,64-95\t0\t\tN/A\n"
    "GPU3\tPXB\tPXB\tNV4\t X \tSYS\tSYS\tSYS\tSYS\t0-31,64-95\t0\t\tN/A\n"
    "GPU4\tSYS\tSYS\tSYS\tSYS\t X \tNV4\tPXB\tPXB\t32-63,96-127\t1\t\tN/A\n"
    "GPU5\tSYS\tSYS\tSYS\tSYS\tNV4\t X \tPXB\tPXB\t32-63,96-127\t1\t\tN/A\n"
    "GPU6\tSYS\tSYS\tSYS\tSYS\tPXB\tPXB\t X \tNV4\t32-63,96-127\t1\t\tN/A\n"
    "GPU7\tSYS\tSYS\tSYS\tSYS\tPXB\tPXB\tNV4\t X \t32-63,96-127\t1\t\tN/A\n" +
    kLegend;

// A DGX-1 (V100 hybrid cube mesh, NV1/NV2) on an older driver: no NUMA Affinity.
const std::string kDgx1Old =
    "\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tmlx5_0\tmlx5_1\tmlx5_2\tmlx5_3\tCPU Affinity\n"
    "GPU0\t X \tNV1\tNV1\tNV2\tNV2\tSYS\tSYS\tSYS\tPIX\tPHB\tSYS\tSYS\t0-19,40-59\n"
    "GPU1\tNV1\t X \tNV2\tNV1\tSYS\tNV2\tSYS\tSYS\tPIX\tPHB\tSYS\tSYS\t0-19,40-59\n"
    "GPU2\tNV1\tNV2\t X \tNV2\tSYS\tSYS\tNV1\tSYS\tPHB\tPIX\tSYS\tSYS\t0-19,40-59\n"
    "GPU3\tNV2\tNV1\tNV2\t X \tSYS\tSYS\tSYS\tNV1\tPHB\tPIX\tSYS\tSYS\t0-19,40-59\n"
    "GPU4\tNV2\tSYS\tSYS\tSYS\t X \tNV1\tNV1\tNV2\tSYS\tSYS\tPIX\tPHB\t20-39,60-79\n"
    "GPU5\tSYS\tNV2\tSYS\tSYS\tNV1\t X \tNV2\tNV1\tSYS\tSYS\tPIX\tPHB\t20-39,60-79\n"
    "GPU6\tSYS\tSYS\tNV1\tSYS\tNV1\tNV2\t X \tNV2\tSYS\tSYS\tPHB\tPIX\t20-39,60-79\n"
    "GPU7\tSYS\tSYS\tSYS\tNV1\tNV2\tNV1\tNV2\t X \tSYS\tSYS\tPHB\tPIX\t20-39,60-79\n"
    "mlx5_0\tPIX\tPIX\tPHB\tPHB\tSYS\tSYS\tSYS\tSYS\t X \tPHB\tSYS\tSYS\t\n"
    "mlx5_1\tPHB\tPHB\tPIX\tPIX\tSYS\tSYS\tSYS\tSYS\tPHB\t X \tSYS\tSYS\t\n"
    "mlx5_2\tSYS\tSYS\tSYS\tSYS\tPIX\tPIX\tPHB\tPHB\tSYS\tSYS\t X \tPHB\t\n"
    "mlx5_3\tSYS\tSYS\tSYS\tSYS\tPHB\tPHB\tPIX\tPIX\tSYS\tSYS\tPHB\t X \t\n" +
    kLegend;
// clang-format on

// Four GPUs in two NVLink-bridged pairs, pasted from a terminal (spaces only),
// with NUMA Affinity "N/A" as a VM reports it.
const std::string kTwoPairsSpaces =
    "        GPU0    GPU1    GPU2    GPU3    CPU Affinity    NUMA Affinity   GPU NUMA ID\n"
    "GPU0     X      NV4     SYS     SYS     0-15            N/A             N/A\n"
    "GPU1    NV4      X      SYS     SYS     0-15            N/A             N/A\n"
    "GPU2    SYS     SYS      X      NV4     16-31           N/A             N/A\n"
    "GPU3    SYS     SYS     NV4      X      16-31           N/A             N/A\n" +
    kLegend;

// The same, with tabs, runs of spaces, tabs padded by spaces and a CRLF.
const std::string kTwoPairsMixed =
    "\tGPU0 \tGPU1\t  GPU2\tGPU3\t\tCPU Affinity\tNUMA Affinity   GPU NUMA ID\r\n"
    "GPU0\t X \tNV4     SYS\tSYS  \t0-15\tN/A\t\tN/A\r\n"
    "GPU1  NV4\t X\tSYS\t \tSYS\t0-15    N/A\t\tN/A\r\n"
    "GPU2\tSYS\tSYS\t X \tNV4\t16-31\tN/A\t\tN/A\r\n"
    "GPU3 SYS SYS NV4 X 16-31 N/A N/A\r\n" +
    kLegend;

// GPUs with index 0..n-1 and every locality id set to `id`.
std::vector<GpuDevice> Gpus(int n, int32_t id = -1) {
  std::vector<GpuDevice> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    out[i].index = i;
    out[i].numa = out[i].pcie_switch = out[i].fabric_domain = id;
  }
  return out;
}

std::vector<int32_t> Ids(const std::vector<GpuDevice>& gpus, int32_t GpuDevice::*field) {
  std::vector<int32_t> out;
  for (const GpuDevice& g : gpus) out.push_back(g.*field);
  return out;
}

using Ints = std::vector<int32_t>;

TEST(NvidiaSmiTopologyTest, DgxA100IsOneNvlinkDomain) {
  std::vector<GpuDevice> gpus = Gpus(8, 9);
  ASSERT_TRUE(ApplyNvidiaSmiTopology(kDgxA100, gpus).ok());
  EXPECT_EQ(Ids(gpus, &GpuDevice::fabric_domain), Ints(8, 0));
  // Every GPU pair shows NV12, which hides the PCIe switches they share.
  EXPECT_EQ(Ids(gpus, &GpuDevice::pcie_switch), Ints(8, -1));
  // The host's NUMA node numbers, not renumbered.
  EXPECT_EQ(Ids(gpus, &GpuDevice::numa), (Ints{3, 3, 1, 1, 7, 7, 5, 5}));
}

TEST(NvidiaSmiTopologyTest, PcieOnlyBoxGroupsPixAndPxb) {
  std::vector<GpuDevice> gpus = Gpus(8);
  ASSERT_TRUE(ApplyNvidiaSmiTopology(kPcieOnly, gpus).ok());
  EXPECT_EQ(Ids(gpus, &GpuDevice::fabric_domain), Ints(8, -1));
  // {0,1} PIX, {2,3} PIX, {4,5} PXB; 6 and 7 meet only at a host bridge (PHB).
  EXPECT_EQ(Ids(gpus, &GpuDevice::pcie_switch), (Ints{0, 0, 1, 1, 2, 2, -1, -1}));
  EXPECT_EQ(Ids(gpus, &GpuDevice::numa), (Ints{0, 0, 0, 0, 1, 1, 1, 1}));
}

TEST(NvidiaSmiTopologyTest, BridgedPairsAreSeparateDomainsUnderOneSwitchTree) {
  std::vector<GpuDevice> gpus = Gpus(8);
  ASSERT_TRUE(ApplyNvidiaSmiTopology(kBridgedPairs, gpus).ok());
  EXPECT_EQ(Ids(gpus, &GpuDevice::fabric_domain), (Ints{0, 0, 1, 1, 2, 2, 3, 3}));
  // GPU0-GPU1 is NV4, but both are PXB to GPU2, so all four share the tree.
  EXPECT_EQ(Ids(gpus, &GpuDevice::pcie_switch), (Ints{0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(Ids(gpus, &GpuDevice::numa), (Ints{0, 0, 0, 0, 1, 1, 1, 1}));
}

TEST(NvidiaSmiTopologyTest, HybridCubeMeshIsOneDomainOnAnOldDriver) {
  std::vector<GpuDevice> gpus = Gpus(8, 9);
  ASSERT_TRUE(ApplyNvidiaSmiTopology(kDgx1Old, gpus).ok());
  // GPU0 and GPU5 are SYS to each other but joined through GPU1 and GPU4.
  EXPECT_EQ(Ids(gpus, &GpuDevice::fabric_domain), Ints(8, 0));
  EXPECT_EQ(Ids(gpus, &GpuDevice::pcie_switch), Ints(8, -1));
  // No NUMA Affinity column: unknown, overwriting what was there.
  EXPECT_EQ(Ids(gpus, &GpuDevice::numa), Ints(8, -1));
}

TEST(NvidiaSmiTopologyTest, SpacesAndMixedSeparatorsReadTheSame) {
  for (const std::string* text : {&kTwoPairsSpaces, &kTwoPairsMixed}) {
    std::vector<GpuDevice> gpus = Gpus(4, 9);
    const Status s = ApplyNvidiaSmiTopology(*text, gpus);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(Ids(gpus, &GpuDevice::fabric_domain), (Ints{0, 0, 1, 1}));
    EXPECT_EQ(Ids(gpus, &GpuDevice::pcie_switch), Ints(4, -1));
    EXPECT_EQ(Ids(gpus, &GpuDevice::numa), Ints(4, -1));
  }
}

TEST(NvidiaSmiTopologyTest, UnderlinedHeaderSingleGpuAndGpuOrder) {
  // Recent drivers underline the header with ANSI escapes.
  const std::string one =
      "\x1b[4m\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
      "GPU0\t X \t0-63\t0\t\tN/A\n" +
      kLegend;
  std::vector<GpuDevice> gpus = Gpus(1);
  ASSERT_TRUE(ApplyNvidiaSmiTopology(one, gpus).ok());
  EXPECT_EQ(gpus[0].fabric_domain, -1);
  EXPECT_EQ(gpus[0].pcie_switch, -1);
  EXPECT_EQ(gpus[0].numa, 0);

  // GPUs are matched by index, not position, and ids follow the lowest index.
  std::vector<GpuDevice> reversed = Gpus(4);
  std::reverse(reversed.begin(), reversed.end());
  ASSERT_TRUE(ApplyNvidiaSmiTopology(kTwoPairsSpaces, reversed).ok());
  EXPECT_EQ(Ids(reversed, &GpuDevice::fabric_domain), (Ints{1, 1, 0, 0}));
}

TEST(NvidiaSmiTopologyTest, NumaAffinityCells) {
  // One row per case: the cell, then the NUMA node it gives.
  const std::vector<std::pair<std::string, int32_t>> cases = {
      {"0", 0}, {"12", 12}, {"N/A", -1}, {"0-1", -1}, {"0,2", -1}, {"1-1", 1}, {"3,3", 3}};
  for (const auto& [cell, want] : cases) {
    const std::string text =
        "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"
        "GPU0\t X \tPIX\t0-7\t" +
        cell +
        "\n"
        "GPU1\tPIX\t X \t0-7\t0\n";
    std::vector<GpuDevice> gpus = Gpus(2);
    const Status s = ApplyNvidiaSmiTopology(text, gpus);
    ASSERT_TRUE(s.ok()) << cell << ": " << s.ToString();
    EXPECT_EQ(gpus[0].numa, want) << cell;
    EXPECT_EQ(gpus[0].pcie_switch, 0) << cell;
  }
}

// Replaces the first `from` in `text` by `to`.
std::string Replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(NvidiaSmiTopologyTest, MalformedOutputIsAnErrorAndChangesNothing) {
  const std::string gpu2_row =
      "GPU2\tPXB\tPXB\t X \tNV4\tSYS\tSYS\tSYS\tSYS\t0-31,64-95\t0\t\tN/A\n";
  ASSERT_NE(kBridgedPairs.find(gpu2_row), std::string::npos);
  // One row per case: the text, the GPUs it is applied to, and words the
  // message must hold.
  struct Case {
    std::string text;
    int gpus;
    std::vector<std::string> words;
  };
  const std::vector<Case> cases = {
      {"", 8, {"empty"}},
      {"No devices were found\n", 8, {"no GPU<n> columns"}},
      // A cell dropped from GPU2's row.
      {Replace(kBridgedPairs, "\tNV4\tSYS\tSYS\tSYS\tSYS\t0-31", "\tNV4\tSYS\tSYS\tSYS\t0-31"),
       8,
       {"GPU2", "10 cells", "11 columns"}},
      // An extra cell.
      {Replace(kBridgedPairs, "\t0-31,64-95\t0\t\tN/A\n", "\t0-31,64-95\t0\tN/A\tN/A\n"),
       8,
       {"GPU0", "12 cells"}},
      // GPU2's row missing.
      {Replace(kBridgedPairs, gpu2_row, ""), 8, {"no row for GPU2"}},
      // The query found a GPU the matrix does not list.
      {kTwoPairsSpaces, 5, {"GPU4", "--query-gpu"}},
      // The matrix lists a GPU the query did not.
      {kTwoPairsSpaces, 3, {"GPU3", "--query-gpu"}},
      {Replace(kTwoPairsSpaces, "NV4     SYS     SYS     0-15", "NVX     SYS     SYS     0-15"),
       4,
       {"unknown link 'NVX'", "GPU0 to GPU1"}},
      {Replace(kTwoPairsSpaces, "GPU1    NV4      X ", "GPU1    NV4     NV4"),
       4,
       {"GPU1 to GPU1", "should be X"}},
      {Replace(kPcieOnly, "\t0-23,48-71\t0\n", "\t0-23,48-71\tzero\n"),
       8,
       {"GPU0", "NUMA Affinity 'zero'"}},
      {Replace(kTwoPairsSpaces, "GPU3    SYS", "GPU2    SYS"), 4, {"GPU2 appears twice"}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    std::vector<GpuDevice> gpus = Gpus(cases[i].gpus, 9);
    const Status s = ApplyNvidiaSmiTopology(cases[i].text, gpus);
    ASSERT_FALSE(s.ok()) << "case " << i;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << "case " << i;
    for (const std::string& w : cases[i].words) {
      EXPECT_NE(s.message().find(w), std::string::npos) << "case " << i << ": " << s.message();
    }
    for (const GpuDevice& g : gpus) {
      EXPECT_EQ(g.fabric_domain, 9) << "case " << i;
      EXPECT_EQ(g.pcie_switch, 9) << "case " << i;
      EXPECT_EQ(g.numa, 9) << "case " << i;
    }
  }
}

}  // namespace
}  // namespace hf::agent::accel
