#include "agent/inventory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace hf::agent {
namespace {

TEST(InventoryTest, DeclaredYamlReadsEveryField) {
  const char* yaml = R"(
name: gpu-a1
labels: {pool: train, "example.com/tier": "1"}
cpu_milli: 64000
memory_mib: 262144
gpus:
  - {index: 0, uuid: GPU-aaa, model: A100-80G, memory_mib: 81920, numa: 0, pcie_switch: 0, fabric_domain: 0}
  - {index: 1, uuid: GPU-bbb, model: A100-80G, memory_mib: 81920, numa: 1, pcie_switch: 1, fabric_domain: 0}
rdma:
  - {name: mlx5_0, numa: 0, pcie_switch: 0}
topology: {zone: z1, switch: s1, rack: r1}
usage_file: /tmp/usage.yaml
)";
  Result<Inventory> inv = ParseInventory(yaml, "inv.yaml");
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->spec.name, "gpu-a1");
  EXPECT_EQ(inv->spec.labels.at("example.com/tier"), "1");
  EXPECT_EQ(inv->spec.cpu_milli, 64000);
  EXPECT_EQ(inv->spec.memory_mib, 262144);
  ASSERT_EQ(inv->spec.gpus.size(), 2u);
  EXPECT_EQ(inv->spec.gpus[1].uuid, "GPU-bbb");
  EXPECT_EQ(inv->spec.gpus[1].numa, 1);
  EXPECT_EQ(inv->spec.gpus[1].pcie_switch, 1);
  ASSERT_EQ(inv->spec.rdma.size(), 1u);
  EXPECT_EQ(inv->spec.rdma[0].name, "mlx5_0");
  EXPECT_EQ(inv->spec.topology.switch_name, "s1");
  EXPECT_EQ(inv->spec.topology.rack, "r1");
  EXPECT_EQ(inv->usage_file, "/tmp/usage.yaml");
}

TEST(InventoryTest, DeclaredWithoutNameLeavesItEmpty) {
  Result<Inventory> inv = ParseInventory("cpu_milli: 1000\n", "inv.yaml");
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->spec.name, "");
  EXPECT_EQ(inv->usage_file, "");
}

TEST(InventoryTest, DeclaredErrorsNameTheFileAndField) {
  Result<Inventory> inv = ParseInventory("name: n1\ncpu_milli: lots\n", "inv.yaml");
  ASSERT_FALSE(inv.ok());
  EXPECT_NE(inv.status().message().find("inv.yaml"), std::string::npos);
  EXPECT_NE(inv.status().message().find("cpu_milli"), std::string::npos);
  EXPECT_FALSE(ParseInventory("name: n1\ngpus: [{index: 0}, {index: 0}]\n", "x").ok());
  EXPECT_FALSE(ParseInventory("name: n1\nbogus: 1\n", "x").ok());
  EXPECT_FALSE(ParseInventory("name: n1\nusage_file: 3\n", "x").ok());
  EXPECT_FALSE(ParseInventory("[1, 2]\n", "x").ok());
}

TEST(InventoryTest, ProcFiles) {
  const char* meminfo =
      "MemTotal:       16384000 kB\nMemFree:         1000000 kB\nMemAvailable:    4096000 kB\n";
  EXPECT_EQ(MemTotalMib(meminfo), 16000);
  EXPECT_DOUBLE_EQ(MemoryUsedRatio(meminfo), 0.75);
  EXPECT_EQ(MemoryUsedRatio("MemTotal: 100 kB\n"), 0);
  EXPECT_EQ(CpuCount("processor\t: 0\nmodel name\t: x\n\nprocessor\t: 1\nmodel name\t: x\n"), 2);
}

TEST(InventoryTest, UsageFile) {
  Result<NodeUsage> u = ParseUsage(
      "cpu_load: 0.42\nmemory_used: 0.3\ngpus:\n  - {index: 0, utilization: 0.95, memory_used_mib: "
      "30000}\n  - {index: 1, utilization: 1.5}\n",
      "usage.yaml");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_DOUBLE_EQ(u->cpu_load, 0.42);
  EXPECT_DOUBLE_EQ(u->memory_used, 0.3);
  ASSERT_EQ(u->gpus.size(), 2u);
  EXPECT_EQ(u->gpus[0].memory_used_mib, 30000);
  EXPECT_DOUBLE_EQ(u->gpus[1].utilization, 1.0);  // clamped
  // JSON is YAML too.
  Result<NodeUsage> j = ParseUsage(R"({"cpu_load": 0.1})", "usage.json");
  ASSERT_TRUE(j.ok());
  EXPECT_DOUBLE_EQ(j->cpu_load, 0.1);
  EXPECT_FALSE(ParseUsage("cpu_load: high\n", "u").ok());
  EXPECT_FALSE(ParseUsage("cpu: 1\n", "u").ok());
  EXPECT_FALSE(ParseUsage("gpus: [{index: -1}]\n", "u").ok());

  const nlohmann::json out = UsageToJson(*u);
  EXPECT_DOUBLE_EQ(out["cpu_load"].get<double>(), 0.42);
  EXPECT_EQ(out["gpus"][0]["memory_used_mib"], 30000);
}

TEST(InventoryTest, MeasuredUsageIsInRange) {
  const NodeUsage u = MeasureUsage(1000, accel::Discovered{});
  EXPECT_GE(u.cpu_load, 0);
  EXPECT_LE(u.cpu_load, 1);
  EXPECT_GE(u.memory_used, 0);
  EXPECT_LE(u.memory_used, 1);
  const Inventory inv = DiscoverInventory();
  EXPECT_GT(inv.spec.cpu_milli, 0);
  EXPECT_GT(inv.spec.memory_mib, 0);
}

}  // namespace
}  // namespace hf::agent
