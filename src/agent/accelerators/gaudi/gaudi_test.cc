#include "agent/accelerators/gaudi/gaudi.h"

#include <gtest/gtest.h>

#include "agent/accelerators/testing/fixture.h"

namespace hf::agent::accel {
namespace {

using testing::Fixture;

TEST(HlSmiTest, TablesOfThreeGenerations) {
  Result<std::vector<HlSmiRow>> g1 = ParseHlSmiTable(Fixture("gaudi/hl-smi-hl205-8x-v1.4.1.txt"));
  ASSERT_TRUE(g1.ok()) << g1.status().ToString();
  ASSERT_EQ(g1->size(), 8u);
  EXPECT_EQ((*g1)[0].name, "HL-205");
  EXPECT_EQ((*g1)[0].bus_id, "0000:20:1d.0");
  EXPECT_EQ((*g1)[0].memory_mib, 32768);  // "512Mib / 32768Mib"
  EXPECT_EQ((*g1)[0].memory_used_mib, 512);
  EXPECT_DOUBLE_EQ((*g1)[0].utilization, 0.02);

  Result<std::vector<HlSmiRow>> g2 = ParseHlSmiTable(Fixture("gaudi/hl-smi-hl225-8x-v1.21.1.txt"));
  ASSERT_TRUE(g2.ok()) << g2.status().ToString();
  ASSERT_EQ(g2->size(), 8u);  // then the Compute Processes table
  EXPECT_EQ((*g2)[0].name, "HL-225");
  EXPECT_EQ((*g2)[0].memory_used_mib, 94963);
  EXPECT_EQ((*g2)[0].memory_mib, 98304);
  EXPECT_DOUBLE_EQ((*g2)[0].utilization, 0.88);
  EXPECT_EQ((*g2)[7].bus_id, "0000:4d:00.0");

  Result<std::vector<HlSmiRow>> one = ParseHlSmiTable(Fixture("gaudi/hl-smi-hl225-1x-v1.15.1.txt"));
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_EQ(one->size(), 1u);

  // Gaudi 3: a six-digit total pushes the cell's bar out of line.
  Result<std::vector<HlSmiRow>> g3 = ParseHlSmiTable(Fixture("gaudi/hl-smi-hl325-1x-v1.18.0.txt"));
  ASSERT_TRUE(g3.ok()) << g3.status().ToString();
  ASSERT_EQ(g3->size(), 1u);
  EXPECT_EQ((*g3)[0].name, "HL-325");
  EXPECT_EQ((*g3)[0].memory_mib, 131072);
  EXPECT_EQ((*g3)[0].memory_used_mib, 672);
}

TEST(HlSmiTest, QueryCsvBindsByModuleId) {
  Result<std::vector<Found>> g3 = HlSmiQueryDevices(Fixture("gaudi/hl-smi-query-csv-hl325l-8x.txt"));
  ASSERT_TRUE(g3.ok()) << g3.status().ToString();
  ASSERT_EQ(g3->size(), 8u);
  EXPECT_EQ((*g3)[0].device.index, 0);
  EXPECT_EQ((*g3)[0].bind_id, "1");  // module id, not the index
  EXPECT_EQ((*g3)[4].bind_id, "0");
  EXPECT_EQ((*g3)[0].device.model, "HL-325L");
  EXPECT_EQ((*g3)[0].device.vendor, "habana");
  EXPECT_EQ((*g3)[0].device.memory_mib, 131072);  // "131072 MiB"
  EXPECT_EQ((*g3)[0].device.uuid, "01P4-HL3090A0-18-UAN071-12-03-01");
  EXPECT_EQ((*g3)[0].bus_id, "0000:3b:00.0");

  // Another field list, without index or module id: line order, bound by index.
  Result<std::vector<Found>> g1 = HlSmiQueryDevices(Fixture("gaudi/hl-smi-query-aip-csv-hl205-8x.txt"));
  ASSERT_TRUE(g1.ok()) << g1.status().ToString();
  ASSERT_EQ(g1->size(), 8u);
  EXPECT_EQ((*g1)[5].device.index, 5);
  EXPECT_EQ((*g1)[5].bind_id, "5");
  EXPECT_EQ((*g1)[5].device.memory_mib, 32768);
  Result<std::vector<GpuUsage>> u = HlSmiQueryUsage(Fixture("gaudi/hl-smi-query-aip-csv-hl205-8x.txt"));
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_DOUBLE_EQ((*u)[0].utilization, 0.15);
  EXPECT_EQ((*u)[0].memory_used_mib, 512);
}

TEST(HlSmiTest, MalformedOutputIsRefused) {
  EXPECT_FALSE(ParseHlSmiTable("").ok());
  EXPECT_FALSE(ParseHlSmiTable("hl-smi: no devices found\n").ok());
  std::string t = Fixture("gaudi/hl-smi-hl225-8x-v1.21.1.txt");
  std::string cut = t;
  cut.replace(cut.find("94963MiB /  98304MiB"), 20, "                    ");
  Result<std::vector<HlSmiRow>> r = ParseHlSmiTable(cut);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("hl-smi line"), std::string::npos) << r.status().message();
  EXPECT_FALSE(HlSmiQueryDevices("index, name, module_id\n0, HL-225, x\n").ok());
  EXPECT_FALSE(HlSmiQueryDevices("index, name, module_id\n0, HL-225\n").ok());
  EXPECT_FALSE(HlSmiQueryDevices("index, name, module_id\n0, , 1\n").ok());
}

TEST(HlSmiTest, DiscoverFallsBackToTheTableBoundByIndex) {
  const GaudiVendor v;
  const std::string table = Fixture("gaudi/hl-smi-hl225-8x-v1.21.1.txt");
  Result<std::vector<Found>> found = v.Discover("hl-smi", [&](const std::string& cmd) -> std::optional<std::string> {
    if (cmd == "hl-smi") return table;
    return std::nullopt;  // no query mode
  });
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  ASSERT_EQ(found->size(), 8u);
  EXPECT_EQ((*found)[6].bind_id, "6");
  EXPECT_EQ((*found)[6].device.memory_mib, 98304);
  const std::string csv = Fixture("gaudi/hl-smi-query-csv-hl325l-8x.txt");
  Result<std::vector<Found>> query = v.Discover("hl-smi", [&](const std::string& cmd) -> std::optional<std::string> {
    if (cmd.find("-Q index,name") != std::string::npos) return csv;
    return std::nullopt;
  });
  ASSERT_TRUE(query.ok());
  EXPECT_EQ((*query)[3].bind_id, "6");
}

}  // namespace
}  // namespace hf::agent::accel
