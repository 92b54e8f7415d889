#include "agent/accelerators/amd/amd.h"

#include <gtest/gtest.h>

#include "agent/accelerators/testing/fixture.h"

namespace hf::agent::accel {
namespace {

using testing::Fixture;

TEST(RocmSmiTest, CsvOfMi100AndMi210) {
  Result<std::vector<Found>> mi100 = RocmSmiDevices(Fixture("amd/rocm-smi-csv-mi100-1x.txt"));
  ASSERT_TRUE(mi100.ok()) << mi100.status().ToString();
  ASSERT_EQ(mi100->size(), 1u);
  EXPECT_EQ((*mi100)[0].device.model, "MI100");  // "Arcturus GL-XL [Instinct MI100]"
  EXPECT_EQ((*mi100)[0].device.vendor, "amd");
  EXPECT_EQ((*mi100)[0].device.memory_mib, 34342961152 >> 20);
  EXPECT_EQ((*mi100)[0].device.uuid, "0x19645d9a01fc11bd");
  EXPECT_EQ((*mi100)[0].bind_id, "0");

  Result<std::vector<Found>> mi210 = RocmSmiDevices(Fixture("amd/rocm-smi-csv-mi210-2x.txt"));
  ASSERT_TRUE(mi210.ok()) << mi210.status().ToString();
  ASSERT_EQ(mi210->size(), 2u);
  EXPECT_EQ((*mi210)[1].device.index, 1);
  EXPECT_EQ((*mi210)[1].device.model, "MI210");
  EXPECT_EQ((*mi210)[1].device.memory_mib, 68702699520 >> 20);  // 65520 MiB
  EXPECT_EQ((*mi210)[1].bind_id, "1");

  // --showproductname alone: no VRAM, so no memory; "[AMD Instinct MI100]".
  Result<std::vector<Found>> names = RocmSmiDevices(Fixture("amd/rocm-smi-showproductname-csv-mi100-2x.txt"));
  ASSERT_TRUE(names.ok()) << names.status().ToString();
  ASSERT_EQ(names->size(), 2u);
  EXPECT_EQ((*names)[0].device.model, "MI100");
  EXPECT_EQ((*names)[0].device.memory_mib, 0);
}

TEST(RocmSmiTest, PlainTextOfMi300XAndAnOldRocm) {
  Result<std::vector<Found>> mi300 = RocmSmiDevices(Fixture("amd/rocm-smi-a-mi300x-4x.txt"));
  ASSERT_TRUE(mi300.ok()) << mi300.status().ToString();
  ASSERT_EQ(mi300->size(), 4u);
  EXPECT_EQ((*mi300)[2].device.model, "MI300X OAM");  // "AMD Instinct MI300X OAM"
  EXPECT_EQ((*mi300)[2].bus_id, "0000:65:00.0");
  EXPECT_EQ((*mi300)[2].device.uuid, "0xe8986800e182538a");
  // ROCm 4.0 printed the device id where the name goes: kept as the tool says.
  Result<std::vector<Found>> old = RocmSmiDevices(Fixture("amd/rocm-smi-showproductname-mi100-rocm4.0.txt"));
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  ASSERT_EQ(old->size(), 1u);
  EXPECT_EQ((*old)[0].device.model, "0x738c");
}

TEST(RocmSmiTest, JsonOfARadeonCard) {
  Result<std::vector<Found>> rx = RocmSmiDevices(Fixture("amd/rocm-smi-json-rx7800xt.txt"));
  ASSERT_TRUE(rx.ok()) << rx.status().ToString();
  ASSERT_EQ(rx->size(), 1u);
  EXPECT_EQ((*rx)[0].device.model, "Radeon RX 7700 XT / 7800 XT");
  EXPECT_EQ((*rx)[0].device.memory_mib, 17163091968 >> 20);
  Result<std::vector<GpuUsage>> u = RocmSmiUsage(Fixture("amd/rocm-smi-json-rx7800xt.txt"));
  ASSERT_TRUE(u.ok());
  EXPECT_DOUBLE_EQ((*u)[0].utilization, 1.0);
  EXPECT_EQ((*u)[0].memory_used_mib, 11615076352 >> 20);
}

TEST(RocmSmiTest, UsageOfMi308XAndMi210) {
  Result<std::vector<GpuUsage>> u = RocmSmiUsage(Fixture("amd/rocm-smi-showuse-showmeminfo-vram-mi308x-8x.txt"));
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  ASSERT_EQ(u->size(), 8u);
  EXPECT_EQ((*u)[7].index, 7);
  EXPECT_DOUBLE_EQ((*u)[7].utilization, 0);
  EXPECT_EQ((*u)[7].memory_used_mib, 297623552 >> 20);
  Result<std::vector<GpuUsage>> csv = RocmSmiUsage(Fixture("amd/rocm-smi-csv-mi210-2x.txt"));
  ASSERT_TRUE(csv.ok()) << csv.status().ToString();
  EXPECT_EQ((*csv)[0].memory_used_mib, 10960896 >> 20);
}

TEST(RocmSmiTest, XgmiHiveOfMi308XIsOneDomainOnTwoNumaNodes) {
  std::vector<GpuDevice> gpus(8);
  for (int i = 0; i < 8; ++i) gpus[size_t(i)].index = i;
  const Status s = ApplyRocmSmiTopology(Fixture("amd/rocm-smi-showtopo-mi308x-8x.txt"), gpus);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (const GpuDevice& g : gpus) {
    EXPECT_EQ(g.fabric_domain, 0) << g.index;
    EXPECT_EQ(g.numa, g.index < 4 ? 0 : 1) << g.index;
  }
  // PCIe only between two halves: two hives.
  std::string split = Fixture("amd/rocm-smi-showtopo-mi308x-8x.txt");
  const size_t matrix = split.find("Link Type between two GPUs");
  for (int a = 0; a < 8; ++a) {
    const size_t row = split.find("\nGPU" + std::to_string(a) + " ", matrix) + 1;
    const size_t end = split.find('\n', row);
    std::string line = split.substr(row, end - row);
    std::vector<std::string> cells = Words(line);
    for (int b = 0; b < 8; ++b) {
      if ((a < 4) != (b < 4)) cells[size_t(b) + 1] = "PCIE";
    }
    std::string rebuilt;
    for (const std::string& c : cells) rebuilt += c + "   ";
    split.replace(row, end - row, rebuilt);
  }
  ASSERT_TRUE(ApplyRocmSmiTopology(split, gpus).ok());
  for (const GpuDevice& g : gpus) EXPECT_EQ(g.fabric_domain, g.index < 4 ? 0 : 1) << g.index;
}

TEST(RocmSmiTest, MalformedOutputIsRefused) {
  EXPECT_FALSE(RocmSmiDevices("").ok());
  EXPECT_FALSE(RocmSmiDevices("WARNING: No AMD GPUs specified\n").ok());
  EXPECT_FALSE(RocmSmiDevices("{\"card0\": 3}").ok());
  EXPECT_FALSE(RocmSmiDevices("{not json").ok());
  // A CSV line with a field too few.
  std::string csv = Fixture("amd/rocm-smi-showproductname-csv-mi100-2x.txt");
  csv.replace(csv.find(",D34316"), 7, "");
  Result<std::vector<Found>> r = RocmSmiDevices(csv);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("line 2"), std::string::npos) << r.status().message();
  // A GPU line without its value.
  EXPECT_FALSE(RocmSmiDevices("GPU[0]\t\t: Card series\n").ok());
  // A GPU with no name at all.
  EXPECT_FALSE(RocmSmiDevices("GPU[0]\t\t: Unique ID: 0x1\n").ok());
  // A topology without the link matrix, or with a cell rocm-smi never prints.
  std::vector<GpuDevice> gpus(8);
  for (int i = 0; i < 8; ++i) gpus[size_t(i)].index = i;
  EXPECT_FALSE(ApplyRocmSmiTopology("=== Weight between two GPUs ===\n", gpus).ok());
  std::string topo = Fixture("amd/rocm-smi-showtopo-mi308x-8x.txt");
  topo.replace(topo.find("XGMI"), 4, "NVLK");
  EXPECT_FALSE(ApplyRocmSmiTopology(topo, gpus).ok());
}

TEST(RocmSmiTest, DiscoverKeepsTheDevicesWhenTheTopologyFails) {
  const AmdVendor v;
  const std::string csv = Fixture("amd/rocm-smi-csv-mi210-2x.txt");
  Result<std::vector<Found>> found = v.Discover("rocm-smi", [&](const std::string& cmd) -> std::optional<std::string> {
    if (cmd.find("--showproductname") != std::string::npos) return csv;
    return std::nullopt;  // --showtopo fails
  });
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  ASSERT_EQ(found->size(), 2u);
  EXPECT_EQ((*found)[0].device.fabric_domain, -1);
}

}  // namespace
}  // namespace hf::agent::accel
