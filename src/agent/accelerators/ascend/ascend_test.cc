#include "agent/accelerators/ascend/ascend.h"

#include <gtest/gtest.h>

#include "agent/accelerators/testing/fixture.h"

namespace hf::agent::accel {
namespace {

using testing::Fixture;

TEST(NpuSmiTest, Ascend910B3ReadsHbmAsTheDevicesMemory) {
  for (const char* f : {"ascend/npu-smi-info-910b3-8x-v24.1.rc1.txt", "ascend/npu-smi-info-910b3-8x-v23.0.7.txt"}) {
    Result<std::vector<NpuChip>> chips = ParseNpuSmiInfo(Fixture(f));
    ASSERT_TRUE(chips.ok()) << f << ": " << chips.status().ToString();
    ASSERT_EQ(chips->size(), 8u) << f;
    EXPECT_EQ((*chips)[0].name, "910B3");
    EXPECT_EQ((*chips)[0].npu, 0);
    EXPECT_EQ((*chips)[0].logic_id, 0);
    EXPECT_EQ((*chips)[0].bus_id, "0000:C1:00.0");
    EXPECT_EQ((*chips)[0].memory_mib, 65536);  // HBM, not the 0 / 0 DDR column
    EXPECT_GT((*chips)[0].memory_used_mib, 3000);
    EXPECT_EQ((*chips)[7].logic_id, 7);
  }
  const std::vector<Found> devices = NpuDevices(*ParseNpuSmiInfo(Fixture("ascend/npu-smi-info-910b3-8x-v24.1.rc1.txt")));
  ASSERT_EQ(devices.size(), 8u);
  EXPECT_EQ(devices[3].device.model, "Ascend910B3");
  EXPECT_EQ(devices[3].device.vendor, "huawei");
  EXPECT_EQ(devices[3].device.index, 3);
  EXPECT_EQ(devices[3].bind_id, "3");
  EXPECT_EQ(devices[3].bus_id, "0000:82:00.0");
}

TEST(NpuSmiTest, Ascend910ANumbersItsChipsInTableOrder) {
  Result<std::vector<NpuChip>> chips = ParseNpuSmiInfo(Fixture("ascend/npu-smi-info-910a-8x-v22.0.3.1.txt"));
  ASSERT_TRUE(chips.ok()) << chips.status().ToString();
  ASSERT_EQ(chips->size(), 8u);
  EXPECT_EQ((*chips)[3].npu, 3);
  EXPECT_EQ((*chips)[3].logic_id, 3);
  EXPECT_EQ((*chips)[3].name, "910A");
  EXPECT_EQ((*chips)[3].memory_mib, 32768);  // HBM, not Memory-Usage's 15077
  EXPECT_EQ((*chips)[3].bus_id, "0000:3E:00.0");
  // A server whose NPU 3 is gone (pulled, or failed): the runtime's logical
  // ids are 0..6 in table order, so NPU 4 is device 3.
  std::string text = Fixture("ascend/npu-smi-info-910a-8x-v22.0.3.1.txt");
  const size_t npu3 = text.find("| 3     910A");
  const size_t next = text.find("| 4     910A");
  text.erase(npu3, next - npu3);
  Result<std::vector<NpuChip>> seven = ParseNpuSmiInfo(text);
  ASSERT_TRUE(seven.ok()) << seven.status().ToString();
  ASSERT_EQ(seven->size(), 7u);
  EXPECT_EQ((*seven)[3].npu, 4);
  EXPECT_EQ((*seven)[3].logic_id, 3);
}

TEST(NpuSmiTest, Ascend310CardsOfFourChipsUseTheDeviceColumn) {
  Result<std::vector<NpuChip>> v21 = ParseNpuSmiInfo(Fixture("ascend/npu-smi-info-310-4chip-v21.0.4.txt"));
  ASSERT_TRUE(v21.ok()) << v21.status().ToString();
  ASSERT_EQ(v21->size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ((*v21)[i].npu, 6);
    EXPECT_EQ((*v21)[i].chip, int32_t(i));
    EXPECT_EQ((*v21)[i].logic_id, int32_t(i) + 3);  // the Device column
    EXPECT_EQ((*v21)[i].memory_mib, 8192);          // no HBM column: Memory-Usage
  }
  EXPECT_EQ((*v21)[0].memory_used_mib, 2703);
  // The older table, without the Hugepages column.
  Result<std::vector<NpuChip>> v20 = ParseNpuSmiInfo(Fixture("ascend/npu-smi-info-310-4chip-v20.2.0.txt"));
  ASSERT_TRUE(v20.ok()) << v20.status().ToString();
  ASSERT_EQ(v20->size(), 4u);
  EXPECT_EQ((*v20)[1].npu, 215);
  EXPECT_EQ((*v20)[1].logic_id, 1);
  EXPECT_EQ(NpuDevices(*v20)[1].device.model, "Ascend310");
}

TEST(NpuSmiTest, Ascend310P3DuoStopsAtTheProcessTable) {
  Result<std::vector<NpuChip>> duo = ParseNpuSmiInfo(Fixture("ascend/npu-smi-info-310p3-duo-4x.txt"));
  ASSERT_TRUE(duo.ok()) << duo.status().ToString();
  ASSERT_EQ(duo->size(), 8u);
  EXPECT_EQ((*duo)[7].npu, 5);
  EXPECT_EQ((*duo)[7].logic_id, 7);
  EXPECT_EQ((*duo)[7].memory_mib, 43693);
  Result<std::vector<NpuChip>> one = ParseNpuSmiInfo(Fixture("ascend/npu-smi-info-310p3-duo-1x-npu1792.txt"));
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_EQ(one->size(), 2u);
  EXPECT_EQ((*one)[1].npu, 1792);
  // The vendor's documented sample, with process rows after the devices.
  Result<std::vector<NpuChip>> doc = ParseNpuSmiInfo(Fixture("ascend/npu-smi-info-910-8x-v24.1.RC2-docsample.txt"));
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  EXPECT_EQ(doc->size(), 8u);
}

TEST(NpuSmiTest, HccsTopologyJoinsEveryNpuOf910B3) {
  const std::vector<NpuChip> chips = *ParseNpuSmiInfo(Fixture("ascend/npu-smi-info-910b3-8x-v24.1.rc1.txt"));
  std::vector<GpuDevice> gpus;
  for (const Found& f : NpuDevices(chips)) gpus.push_back(f.device);
  ASSERT_TRUE(ApplyNpuSmiTopology(Fixture("ascend/npu-smi-info-t-topo-910b3-8x.txt"), chips, gpus).ok());
  for (const GpuDevice& g : gpus) EXPECT_EQ(g.fabric_domain, 0) << g.index;
  // A card of several chips: the NPU matrix cannot say which chip is which.
  const std::vector<NpuChip> c310 = *ParseNpuSmiInfo(Fixture("ascend/npu-smi-info-310-4chip-v21.0.4.txt"));
  std::vector<GpuDevice> g310;
  for (const Found& f : NpuDevices(c310)) g310.push_back(f.device);
  EXPECT_FALSE(ApplyNpuSmiTopology(Fixture("ascend/npu-smi-info-t-topo-910b3-8x.txt"), c310, g310).ok());
}

TEST(NpuSmiTest, MalformedTablesAreRefusedNamingTheLine) {
  EXPECT_FALSE(ParseNpuSmiInfo("").ok());
  EXPECT_FALSE(ParseNpuSmiInfo("npu-smi: command failed\n").ok());
  std::string t = Fixture("ascend/npu-smi-info-910b3-8x-v24.1.rc1.txt");
  // A chip line cut short: its memory pair gone.
  std::string cut = t;
  cut.replace(cut.find("3318 / 65536"), 12, "            ");
  Result<std::vector<NpuChip>> r = ParseNpuSmiInfo(cut);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("npu-smi info line"), std::string::npos) << r.status().message();
  // An NPU id that is not a number.
  std::string bad = t;
  bad.replace(bad.find("| 0     910B3"), 13, "| x     910B3");
  EXPECT_FALSE(ParseNpuSmiInfo(bad).ok());
  // The header only.
  EXPECT_FALSE(ParseNpuSmiInfo(t.substr(0, t.find("| 0     910B3"))).ok());
}

TEST(NpuSmiTest, DiscoverAndMeasureRunTheToolThroughTheRunner) {
  const AscendVendor v;
  const std::string info = Fixture("ascend/npu-smi-info-910b3-8x-v24.1.rc1.txt");
  const std::string topo = Fixture("ascend/npu-smi-info-t-topo-910b3-8x.txt");
  std::vector<std::string> ran;
  const Runner run = [&](const std::string& cmd) -> std::optional<std::string> {
    ran.push_back(cmd);
    if (cmd == "npu-smi info") return info;
    if (cmd == "npu-smi info -t topo") return topo;
    return std::nullopt;
  };
  Result<std::vector<Found>> found = v.Discover("npu-smi", run);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  ASSERT_EQ(found->size(), 8u);
  EXPECT_EQ((*found)[5].device.fabric_domain, 0);
  Result<std::vector<GpuUsage>> usage = v.Measure("npu-smi", run);
  ASSERT_TRUE(usage.ok());
  EXPECT_EQ((*usage)[0].memory_used_mib, 3318);
  // A failing tool is an error the caller logs.
  EXPECT_FALSE(v.Discover("npu-smi", [](const std::string&) { return std::nullopt; }).ok());
}

}  // namespace
}  // namespace hf::agent::accel
