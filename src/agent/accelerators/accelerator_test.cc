#include "agent/accelerators/accelerator.h"

#include <gtest/gtest.h>

#include "agent/accelerators/amd/amd.h"
#include "agent/accelerators/ascend/ascend.h"
#include "agent/accelerators/gaudi/gaudi.h"
#include "agent/accelerators/nvidia/nvidia.h"
#include "agent/accelerators/testing/fixture.h"

namespace hf::agent::accel {
namespace {

using testing::Fixture;

// The vendors, with NVIDIA's NVML never found: the tests run the tools'
// text through their runners, whatever the machine has.
const std::vector<const Vendor*>& Vendors() {
  static const NvidiaVendor nvidia("/nonexistent/libnvidia-ml.so.1");
  static const AmdVendor amd;
  static const AscendVendor ascend;
  static const GaudiVendor gaudi;
  static const std::vector<const Vendor*> all = {&nvidia, &amd, &ascend, &gaudi};
  return all;
}

TEST(DiscoverAllTest, AbsentToolsAreSkippedAndFailuresLeaveTheOthers) {
  const std::string nvidia = "index, uuid, name, memory.total [MiB]\n"
                             "0, GPU-a, NVIDIA A100-SXM4-80GB, 81920\n"
                             "1, GPU-b, NVIDIA A100-SXM4-80GB, 81920\n";
  const std::string hl = Fixture("gaudi/hl-smi-query-csv-hl325l-8x.txt");
  std::vector<std::string> ran;
  const Runner run = [&](const std::string& cmd) -> std::optional<std::string> {
    ran.push_back(cmd);
    if (cmd.rfind("nvidia-smi --query-gpu=index,uuid", 0) == 0) return nvidia;
    if (cmd.rfind("hl-smi -Q index,name", 0) == 0) return hl;
    if (cmd.rfind("npu-smi", 0) == 0) return std::string("npu-smi: driver not loaded\n");
    return std::nullopt;
  };
  // rocm-smi is not installed: never run. npu-smi prints what no parser
  // reads: left out. NVIDIA and Gaudi devices are numbered for the node.
  const Discovered d = DiscoverAll(run, [](const std::string& tool) { return tool != "rocm-smi"; }, Vendors());
  for (const std::string& cmd : ran) EXPECT_EQ(cmd.find("rocm-smi"), std::string::npos) << cmd;
  ASSERT_EQ(d.gpus.size(), 10u);
  EXPECT_EQ(d.tools.size(), 2u);
  EXPECT_EQ(d.tools.count("huawei"), 0u);
  for (size_t i = 0; i < d.gpus.size(); ++i) EXPECT_EQ(d.gpus[i].index, int32_t(i));
  EXPECT_EQ(d.gpus[1].vendor, "nvidia");
  EXPECT_EQ(d.gpus[1].model, "A100-SXM4-80GB");
  EXPECT_EQ(d.gpus[2].vendor, "habana");
  EXPECT_EQ(d.gpus[2].model, "HL-325L");
  EXPECT_EQ(d.bind_ids.at(1), "1");
  EXPECT_EQ(d.bind_ids.at(2), "1");  // hl-smi index 0 has module id 1
  EXPECT_EQ(d.bind_ids.at(6), "0");  // index 4, module id 0
  EXPECT_EQ(d.vendor_index.at(6), (std::pair<std::string, int32_t>{"habana", 4}));
  ASSERT_EQ(d.bus_ids.size(), 10u);
  EXPECT_EQ(d.bus_ids[2], "0000:3b:00.0");

  // Usage comes back by node index.
  const Runner usage = [](const std::string& cmd) -> std::optional<std::string> {
    if (cmd.rfind("nvidia-smi", 0) == 0) return std::string("index, utilization.gpu [%], memory.used [MiB]\n0, 50, 100\n1, 0, 0\n");
    if (cmd.rfind("hl-smi", 0) == 0) return std::string("index, utilization.aip [%], memory.used [MiB]\n4, 80, 2048\n");
    return std::nullopt;
  };
  const std::vector<GpuUsage> u = MeasureAll(d, usage, Vendors());
  ASSERT_EQ(u.size(), 3u);
  EXPECT_EQ(u[2].index, 6);
  EXPECT_DOUBLE_EQ(u[2].utilization, 0.8);
  EXPECT_EQ(u[2].memory_used_mib, 2048);
}

TEST(DiscoverAllTest, NoToolNoDevice) {
  const Discovered d = DiscoverAll([](const std::string&) { return std::nullopt; },
                                   [](const std::string&) { return false; }, Vendors());
  EXPECT_TRUE(d.gpus.empty());
  EXPECT_TRUE(d.tools.empty());
}

TEST(QueryCsvTest, HeaderOrPositionalAndUnits) {
  auto rows = ParseQueryCsv("a, b [MiB]\n1, 2 MiB\n", "t", {"a", "b"});
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].at("b"), "2 MiB");
  EXPECT_EQ(Quantity((*rows)[0].at("b")), 2);
  rows = ParseQueryCsv("1, 2\n3, 4\n", "t", {"a", "b"});
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ((*rows)[1].at("a"), "3");
  EXPECT_FALSE(ParseQueryCsv("a, b\n1\n", "t", {"a", "b"}).ok());
  EXPECT_EQ(Quantity("[N/A]"), std::nullopt);
  EXPECT_EQ(Quantity("95 %"), 95);
  EXPECT_EQ(Quantity("512Mib"), 512);
}

TEST(LinkMatrixTest, ComponentsNumberedByLowestIndex) {
  std::vector<GpuDevice> gpus(4);
  for (int i = 0; i < 4; ++i) gpus[size_t(i)].index = 3 - i;  // any order
  const std::string text =
      "       D0   D1   D2   D3   CPU Affinity\n"
      "D0     X    L    -    -    0-7\n"
      "D1     L    X    -    -    0-7\n"
      "D2     -    -    X    L    8-15\n"
      "D3     -    -    L    X    8-15\n";
  const std::vector<std::string_view> lines = Lines(text);
  ASSERT_TRUE(ApplyLinkMatrix(lines, 0, "D", "test", [](const std::string& c) { return c == "L"; }, gpus).ok());
  for (const GpuDevice& g : gpus) EXPECT_EQ(g.fabric_domain, g.index < 2 ? 0 : 1) << g.index;
  std::vector<GpuDevice> more(5);
  for (int i = 0; i < 5; ++i) more[size_t(i)].index = i;
  EXPECT_FALSE(ApplyLinkMatrix(lines, 0, "D", "test", [](const std::string&) { return true; }, more).ok());
  EXPECT_EQ(more[0].fabric_domain, -1);  // unchanged on error
  EXPECT_FALSE(ApplyLinkMatrix(Lines("D0 X\n"), 0, "D", "test", [](const std::string&) { return true; }, gpus).ok());
}

TEST(BindingEnvTest, VariablesToClearAreTheOtherVendorsOnes) {
  const std::map<std::string, std::string> b = {{"ROCR_VISIBLE_DEVICES", "0"}};
  const std::vector<std::string> clear = VariablesToClear(b);
  for (const char* v : {"CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES",
                        "HABANA_VISIBLE_MODULES", "HABANA_VISIBLE_DEVICES"}) {
    EXPECT_NE(std::find(clear.begin(), clear.end(), v), clear.end()) << v;
  }
  EXPECT_EQ(std::find(clear.begin(), clear.end(), "ROCR_VISIBLE_DEVICES"), clear.end());
  EXPECT_EQ(FindVendor("habana")->BindingVariable(), "HABANA_VISIBLE_MODULES");
  EXPECT_EQ(FindVendor("cambricon"), nullptr);
}

}  // namespace
}  // namespace hf::agent::accel
