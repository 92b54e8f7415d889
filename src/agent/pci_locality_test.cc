#include "agent/pci_locality.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "agent/accelerators/nvidia/nvidia.h"
#include "agent/inventory.h"

namespace hf::agent {
namespace {

// A DGX-like machine (testdata/hwloc-dgx-like.xml, made for these tests):
// two packages with one NUMA node each; per package a host bridge with two
// PCIe switches, each holding two GPUs and one InfiniBand NIC; on package 1
// a fifth NIC, mlx5_4, on a root port of its own.
//   switch  GPUs (bus)   NIC     NUMA
//   A       07, 0f       mlx5_0  0
//   B       47, 4e       mlx5_1  0
//   C       87, 90       mlx5_2  1
//   D       b7, bd       mlx5_3  1
//   -       -            mlx5_4  1 (alone behind its root port)
const std::string kDgx = std::string(HF_AGENT_TESTDATA) + "/hwloc-dgx-like.xml";
const std::vector<std::string> kBusIds = {
    // As nvidia-smi prints them (eight-digit domain), in GPU index order.
    "00000000:07:00.0", "00000000:0F:00.0", "00000000:47:00.0", "00000000:4E:00.0",
    "00000000:87:00.0", "00000000:90:00.0", "00000000:B7:00.0", "00000000:BD:00.0"};

std::vector<GpuDevice> EightGpus() {
  std::vector<GpuDevice> gpus(8);
  for (int i = 0; i < 8; ++i) {
    gpus[size_t(i)].index = i;
    gpus[size_t(i)].pcie_switch = 90 + i;  // what nvidia-smi's topology said
  }
  return gpus;
}

std::vector<RdmaDevice> FiveNics() {
  std::vector<RdmaDevice> nics;
  for (int i = 0; i < 5; ++i) nics.push_back({.name = "mlx5_" + std::to_string(i)});
  return nics;
}

TEST(PciLocalityTest, EachNicLandsOnItsGpusSwitchAndNumaNode) {
  std::vector<GpuDevice> gpus = EightGpus();
  std::vector<RdmaDevice> nics = FiveNics();
  ASSERT_TRUE(ApplyPciLocality(kDgx, kBusIds, gpus, nics).ok());
  // Switch ids in the order the GPUs meet them: A=0, B=1, C=2, D=3.
  const std::vector<int32_t> gpu_switch = {0, 0, 1, 1, 2, 2, 3, 3};
  const std::vector<int32_t> gpu_numa = {0, 0, 0, 0, 1, 1, 1, 1};
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(gpus[i].pcie_switch, gpu_switch[i]) << "GPU " << i;
    EXPECT_EQ(gpus[i].numa, gpu_numa[i]) << "GPU " << i;
  }
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(nics[size_t(s)].pcie_switch, s) << nics[size_t(s)].name;
    EXPECT_EQ(nics[size_t(s)].numa, s < 2 ? 0 : 1) << nics[size_t(s)].name;
  }
  // Behind no GPU's switch: an id of its own, on package 1's NUMA node.
  EXPECT_EQ(nics[4].pcie_switch, 4);
  EXPECT_EQ(nics[4].numa, 1);
}

TEST(PciLocalityTest, WithoutEveryGpuTheNicsGetTheirNumaNodeOnly) {
  std::vector<GpuDevice> gpus = EightGpus();
  std::vector<RdmaDevice> nics = FiveNics();
  std::vector<std::string> ids = kBusIds;
  ids[5] = "";  // one GPU's bus id unknown
  ASSERT_TRUE(ApplyPciLocality(kDgx, ids, gpus, nics).ok());
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(gpus[i].pcie_switch, 90 + int(i)) << "kept, GPU " << i;
  for (const RdmaDevice& n : nics) {
    EXPECT_EQ(n.pcie_switch, -1) << n.name;
    EXPECT_NE(n.numa, -1) << n.name;
  }
}

TEST(PciLocalityTest, UnknownNicsAndAGpulessNodeAreLeftAlone) {
  std::vector<GpuDevice> none;
  std::vector<RdmaDevice> nics = {{.name = "mlx5_9"}, {.name = "mlx5_2"}};
  ASSERT_TRUE(ApplyPciLocality(kDgx, {}, none, nics).ok());
  EXPECT_EQ(nics[0].numa, -1);
  EXPECT_EQ(nics[0].pcie_switch, -1);
  EXPECT_EQ(nics[1].numa, 1);
  EXPECT_EQ(nics[1].pcie_switch, 0);  // the first switch met: no GPU came first
}

TEST(PciLocalityTest, ATopologyThatDoesNotLoadIsAnErrorAndChangesNothing) {
  const std::string bad = testing::TempDir() + "/hwloc-bad.xml";
  std::ofstream(bad) << "<topology version=\"2.0\"><object type=\"Machine\"";
  std::vector<GpuDevice> gpus = EightGpus();
  std::vector<RdmaDevice> nics = FiveNics();
  const Status s = ApplyPciLocality(bad, kBusIds, gpus, nics);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("hwloc"), std::string::npos) << s.message();
  EXPECT_EQ(gpus[0].pcie_switch, 90);
  EXPECT_EQ(nics[0].numa, -1);
  EXPECT_FALSE(ApplyPciLocality("/nonexistent/topology.xml", kBusIds, gpus, nics).ok());
}

TEST(PciLocalityTest, NvidiaSmiBusIdsByIndex) {
  std::vector<GpuDevice> gpus(3);
  for (int i = 0; i < 3; ++i) gpus[size_t(i)].index = i;
  // Out of order, one line malformed, one GPU missing, one unknown index.
  const std::string csv =
      "1, 00000000:0F:00.0\n"
      "0, 00000000:07:00.0\r\n"
      "2, not-a-bus-id\n"
      "7, 00000000:90:00.0\n"
      "garbage\n";
  EXPECT_EQ(accel::ParseNvidiaSmiBusIds(csv, gpus),
            (std::vector<std::string>{"00000000:07:00.0", "00000000:0F:00.0", ""}));
  EXPECT_EQ(accel::ParseNvidiaSmiBusIds("", gpus), (std::vector<std::string>{"", "", ""}));
}

}  // namespace
}  // namespace hf::agent
