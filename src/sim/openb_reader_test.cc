#include "sim/openb_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ostream>

namespace hf::sim {
namespace {

using ::testing::HasSubstr;

constexpr const char* kPodHeader =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n";

TEST(OpenbReaderTest, ParsesFullPodRows) {
  const std::string text = std::string(kPodHeader) +
                           "p0,12000,16384,1,1000,,LS,Running,0,12537496,0\n"
                           "p1,6000,12288,1,460,V100M16|V100M32,BE,Pending,427061,12902960,\n"
                           "p2,88000,327680,0,0,,Burstable,Failed,5,9,5\n";
  auto pods = ParseOpenbPods(text, "pods.csv");
  ASSERT_TRUE(pods.ok()) << pods.status().message();
  ASSERT_EQ(pods->size(), 3u);
  const OpenbPod& p1 = (*pods)[1];
  EXPECT_EQ(p1.name, "p1");
  EXPECT_EQ(p1.cpu_milli, 6000);
  EXPECT_EQ(p1.memory_mib, 12288);
  EXPECT_EQ(p1.num_gpu, 1);
  EXPECT_EQ(p1.gpu_milli, 460);
  EXPECT_EQ(p1.gpu_spec, "V100M16|V100M32");
  EXPECT_EQ(p1.qos, "BE");
  EXPECT_EQ(p1.pod_phase, "Pending");
  EXPECT_EQ(p1.creation_time, 427061);
  EXPECT_EQ(p1.deletion_time, 12902960);
  EXPECT_FALSE(p1.scheduled_time.has_value());  // Pending pods have none
  EXPECT_EQ(p1.line, 3);
  EXPECT_EQ((*pods)[2].num_gpu, 0);
}

TEST(OpenbReaderTest, MultigpuFilesHaveNoTimes) {
  auto pods =
      ParseOpenbPods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,2048,8,1000\n", "m.csv");
  ASSERT_TRUE(pods.ok()) << pods.status().message();
  ASSERT_EQ(pods->size(), 1u);
  EXPECT_EQ((*pods)[0].num_gpu, 8);
  EXPECT_FALSE((*pods)[0].creation_time.has_value());
  EXPECT_EQ((*pods)[0].qos, "");
}

TEST(OpenbReaderTest, NomemFilesReadMemoryAsZero) {
  auto pods = ParseOpenbPods(
      "name,cpu_milli,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
      "scheduled_time\np0,12000,1,1000,,LS,Running,0,100,0\n",
      "n.csv");
  ASSERT_TRUE(pods.ok()) << pods.status().message();
  EXPECT_EQ((*pods)[0].memory_mib, 0);
  EXPECT_EQ((*pods)[0].cpu_milli, 12000);
}

TEST(OpenbReaderTest, ToleratesBomCrlfAndBlankLines) {
  auto nodes = ParseOpenbNodes(
      "\xEF\xBB\xBFsn,cpu_milli,memory_mib,gpu,model\r\n\r\nn0,64000,262144,2,P100\r\n\n",
      "nodes.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_EQ((*nodes)[0].model, "P100");
  EXPECT_EQ((*nodes)[0].line, 3);
}

TEST(OpenbReaderTest, CpuNodesHaveNoModel) {
  auto nodes =
      ParseOpenbNodes("sn,cpu_milli,memory_mib,gpu,model\nc0,32000,262144,0,\n", "nodes.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  const NodeSpec spec = ToNodeSpec((*nodes)[0]);
  EXPECT_TRUE(spec.gpus.empty());
  EXPECT_EQ(spec.cpu_milli, 32000);
}

struct BadCsv {
  const char* name;
  bool pods;  // else nodes
  std::string text;
  std::string want;  // expected in the message
};

// Names the case in test listings instead of dumping its bytes.
void PrintTo(const BadCsv& c, std::ostream* os) { *os << c.name; }

class OpenbReaderErrorTest : public ::testing::TestWithParam<BadCsv> {};

TEST_P(OpenbReaderErrorTest, NamesFileAndLine) {
  const BadCsv& c = GetParam();
  const Status st =
      c.pods ? ParseOpenbPods(c.text, "f.csv").status() : ParseOpenbNodes(c.text, "f.csv").status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr(c.want));
}

const std::string kNodeHeader = "sn,cpu_milli,memory_mib,gpu,model\n";
const std::string kPods = kPodHeader;
const std::string kGoodPod = "p0,1000,1024,1,500,,LS,Running,0,10,0\n";

INSTANTIATE_TEST_SUITE_P(
    Rows, OpenbReaderErrorTest,
    ::testing::Values(
        BadCsv{"empty", true, "", "f.csv:1: empty file"},
        BadCsv{"unknown_column", true, "name,cpu_milli,num_gpu,gpu_milli,colour\n",
               "f.csv:1: unknown column 'colour'"},
        BadCsv{"missing_column", true, "name,cpu_milli,num_gpu\n",
               "f.csv:1: missing column 'gpu_milli'"},
        BadCsv{"repeated_column", false, "sn,cpu_milli,gpu,gpu\n",
               "f.csv:1: column 'gpu' appears twice"},
        BadCsv{"too_few_fields", true, kPods + kGoodPod + "p1,1000,1024,1\n",
               "f.csv:3: expected 11 fields, got 4"},
        BadCsv{"too_many_fields", false, kNodeHeader + "n0,1,1,1,T4,x\n",
               "f.csv:2: expected 5 fields, got 6"},
        BadCsv{"not_integer", true, kPods + "p1,1e3,1024,1,500,,LS,Running,0,10,0\n",
               "f.csv:2: cpu_milli '1e3' is not an integer"},
        BadCsv{"trailing_junk", false, kNodeHeader + "n0,64000,1024x,2,T4\n",
               "f.csv:2: memory_mib '1024x'"},
        BadCsv{"empty_quantity", true, kPods + "p1,,1024,1,500,,LS,Running,0,10,0\n",
               "f.csv:2: cpu_milli is empty"},
        BadCsv{"negative_request", true, kPods + "p1,1000,-1,1,500,,LS,Running,0,10,0\n",
               "f.csv:2: memory_mib must be >= 0"},
        BadCsv{"negative_time", true, kPods + "p1,1000,1,1,500,,LS,Running,-5,10,0\n",
               "f.csv:2: creation_time must be >= 0"},
        BadCsv{"gpu_milli_over_1000", true, kPods + "p1,1000,1,1,1001,,LS,Running,0,10,0\n",
               "f.csv:2: gpu_milli must be <= 1000"},
        BadCsv{"out_of_range", true, kPods + "p1,99999999999999999999,1,1,1,,LS,Running,0,10,0\n",
               "out of range"},
        BadCsv{"unknown_qos", true, kPods + "p1,1000,1,1,500,,Gold,Running,0,10,0\n",
               "f.csv:2: unknown qos 'Gold'"},
        BadCsv{"duplicate_pod", true, kPods + kGoodPod + kGoodPod,
               "f.csv:3: duplicate pod name 'p0' (first on line 2)"},
        BadCsv{"empty_name", false, kNodeHeader + ",1,1,1,T4\n", "f.csv:2: node name is empty"},
        BadCsv{"quoted", false, kNodeHeader + "\"n0\",1,1,1,T4\n",
               "f.csv:2: quoted fields are not supported"},
        BadCsv{"too_many_gpus", false, kNodeHeader + "n0,1,1,5000,T4\n",
               "f.csv:2: gpu must be <= 1024"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(OpenbReaderTest, QosPriorities) {
  EXPECT_EQ(QosPriority("LS"), 3);
  EXPECT_EQ(QosPriority("Guaranteed"), 2);
  EXPECT_EQ(QosPriority("Burstable"), 1);
  EXPECT_EQ(QosPriority("BE"), 0);
  EXPECT_EQ(QosPriority(""), 0);
  EXPECT_FALSE(QosPriority("ls").has_value());
}

TEST(OpenbReaderTest, MapsNodeGpus) {
  OpenbNode n{"n0", 96000, 786432, 8, "G2", 2};
  const NodeSpec spec = ToNodeSpec(n);
  ASSERT_TRUE(spec.Validate().ok());
  ASSERT_EQ(spec.gpus.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(spec.gpus[size_t(i)].index, i);
    EXPECT_EQ(spec.gpus[size_t(i)].model, "G2");
    EXPECT_EQ(spec.gpus[size_t(i)].memory_mib, 0);
    EXPECT_EQ(spec.gpus[size_t(i)].numa, -1);
    EXPECT_EQ(spec.gpus[size_t(i)].pcie_switch, -1);
    EXPECT_EQ(spec.gpus[size_t(i)].fabric_domain, -1);
  }
}

TEST(OpenbReaderTest, MapsPodToTask) {
  OpenbPod p;
  p.name = "p7";
  p.cpu_milli = 6000;
  p.memory_mib = 12288;
  p.num_gpu = 1;
  p.gpu_milli = 460;
  p.gpu_spec = "V100M16|V100M32|V100M32";
  p.qos = "Burstable";
  p.creation_time = 10;
  p.deletion_time = 25;
  p.line = 9;
  const SimTask st = ToSimTask(p, 7, "pods.csv");
  EXPECT_EQ(st.task.key, 7u);
  EXPECT_EQ(st.task.name, "p7");
  EXPECT_EQ(st.task.priority, 1);
  EXPECT_TRUE(st.task.preemptible);
  EXPECT_EQ(st.task.requests.cpu_milli, 6000);
  EXPECT_EQ(st.task.requests.memory_mib, 12288);
  EXPECT_EQ(st.task.requests.gpu, 1);
  EXPECT_EQ(st.task.requests.gpu_milli, 460);
  EXPECT_EQ(st.task.requests.gpu_models, (std::vector<std::string>{"V100M16", "V100M32"}));
  EXPECT_EQ(st.create_ms, 10'000);
  EXPECT_EQ(st.delete_ms, 25'000);
  EXPECT_EQ(st.origin, "pods.csv:9");
  EXPECT_TRUE(st.task.requests.Validate().ok());
}

TEST(OpenbReaderTest, GpuPodWithoutShareAsksForWholeGpus) {
  OpenbPod p;
  p.name = "p";
  p.num_gpu = 2;
  p.gpu_milli = 0;
  EXPECT_EQ(ToSimTask(p, 0, "f").task.requests.gpu_milli, kWholeGpuMilli);
  p.num_gpu = 0;
  const SimTask cpu = ToSimTask(p, 0, "f");
  EXPECT_EQ(cpu.task.requests.gpu, 0);
  EXPECT_TRUE(cpu.task.requests.gpu_models.empty());
  EXPECT_FALSE(cpu.create_ms.has_value());
}

TEST(OpenbReaderTest, MissingFileNamesThePath) {
  auto w = LoadOpenbWorkload("/nonexistent/nodes.csv", "/nonexistent/pods.csv");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(w.status().message(), HasSubstr("/nonexistent/nodes.csv"));
}

}  // namespace
}  // namespace hf::sim
