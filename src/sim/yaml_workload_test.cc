#include "sim/yaml_workload.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <ostream>

namespace hf::sim {
namespace {

using ::testing::HasSubstr;

constexpr const char* kFull = R"(plugins:
  binpack: {enabled: false}
  spread: {enabled: true, weight: 2}
scheduler:
  gpu_load_threshold: 0.5
nodes:
  - name: gpu-a1
    labels: {pool: training}
    cpu_milli: 96000
    memory_mib: 786432
    gpus:
      - {index: 0, model: A100-80G, vendor: nvidia, memory_mib: 81920, numa: 0, pcie_switch: 0, fabric_domain: 0, uuid: GPU-1}
      - {index: 3, model: A100-80G, memory_mib: 81920, numa: 1, pcie_switch: 2, fabric_domain: 1}
    rdma:
      - {name: mlx5_0, numa: 0, pcie_switch: 0}
    topology: {zone: z1, switch: s1, rack: r1}
    usage: {cpu_load: 0.35, memory_used: 0.4, gpus: [{index: 0, utilization: 0.95, memory_used_mib: 30000}]}
  - name: cpu-1
    cpu_milli: 8000
    memory_mib: 16384
tasks:
  - name: llama-ft-0
    group: llama-ft
    priority: 100
    kind: inference
    requests: {cpu_milli: 8000, memory_mib: 65536, gpu: 4, gpu_milli: 1000, gpu_memory_mib: 100, gpu_models: [A100-80G, H100]}
    rdma_required: true
    depends_on: [feature-store]
    preemptible: false
    command: [python3, train.py]
    env: {EPOCHS: "3"}
    create_time: 1.5
    delete_time: 60
  - name: feature-store
    requests: {cpu_milli: 1000}
)";

TEST(YamlWorkloadTest, ParsesEveryField) {
  auto w = ParseYamlWorkload(kFull, "w.yaml");
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_EQ(w->nodes.size(), 2u);
  const NodeSpec& a1 = w->nodes[0].spec;
  EXPECT_EQ(a1.name, "gpu-a1");
  EXPECT_EQ(a1.labels.at("pool"), "training");
  EXPECT_EQ(a1.cpu_milli, 96000);
  EXPECT_EQ(a1.memory_mib, 786432);
  ASSERT_EQ(a1.gpus.size(), 2u);
  EXPECT_EQ(a1.gpus[0].uuid, "GPU-1");
  EXPECT_EQ(a1.gpus[0].vendor, "nvidia");
  EXPECT_EQ(a1.gpus[1].index, 3);
  EXPECT_EQ(a1.gpus[1].memory_mib, 81920);
  EXPECT_EQ(a1.gpus[1].numa, 1);
  EXPECT_EQ(a1.gpus[1].pcie_switch, 2);
  EXPECT_EQ(a1.gpus[1].fabric_domain, 1);
  ASSERT_EQ(a1.rdma.size(), 1u);
  EXPECT_EQ(a1.rdma[0].name, "mlx5_0");
  EXPECT_EQ(a1.topology.zone, "z1");
  EXPECT_EQ(a1.topology.switch_name, "s1");
  EXPECT_EQ(a1.topology.rack, "r1");
  ASSERT_TRUE(w->nodes[0].usage.has_value());
  EXPECT_DOUBLE_EQ(w->nodes[0].usage->cpu_load, 0.35);
  ASSERT_EQ(w->nodes[0].usage->gpus.size(), 1u);
  EXPECT_DOUBLE_EQ(w->nodes[0].usage->gpus[0].utilization, 0.95);
  EXPECT_EQ(w->nodes[0].usage->gpus[0].memory_used_mib, 30000);
  EXPECT_FALSE(w->nodes[1].usage.has_value());

  ASSERT_EQ(w->tasks.size(), 2u);
  const SimTask& t = w->tasks[0];
  EXPECT_EQ(t.task.key, 0u);
  EXPECT_EQ(t.task.name, "llama-ft-0");
  EXPECT_EQ(t.task.group, "llama-ft");
  EXPECT_EQ(t.task.priority, 100);
  EXPECT_EQ(t.task.kind, TaskKind::kInference);
  EXPECT_EQ(t.task.requests.cpu_milli, 8000);
  EXPECT_EQ(t.task.requests.memory_mib, 65536);
  EXPECT_EQ(t.task.requests.gpu, 4);
  EXPECT_EQ(t.task.requests.gpu_milli, 1000);
  EXPECT_EQ(t.task.requests.gpu_memory_mib, 100);
  EXPECT_EQ(t.task.requests.gpu_models, (std::vector<std::string>{"A100-80G", "H100"}));
  EXPECT_TRUE(t.task.rdma_required);
  EXPECT_EQ(t.task.depends_on, (std::vector<std::string>{"feature-store"}));
  EXPECT_FALSE(t.task.preemptible);
  EXPECT_EQ(t.task.command, (std::vector<std::string>{"python3", "train.py"}));
  EXPECT_EQ(t.task.env.at("EPOCHS"), "3");
  EXPECT_EQ(t.create_ms, 1500);
  EXPECT_EQ(t.delete_ms, 60'000);
  EXPECT_EQ(t.origin, "w.yaml:22");

  const SimTask& fs = w->tasks[1];
  EXPECT_EQ(fs.task.key, 1u);
  EXPECT_EQ(fs.create_ms, 0);  // present from the start
  EXPECT_FALSE(fs.delete_ms.has_value());
  EXPECT_TRUE(fs.task.preemptible);
  EXPECT_EQ(fs.task.kind, TaskKind::kBatch);

  ASSERT_TRUE(w->policy.has_value());
  EXPECT_EQ(w->policy->plugins.at("spread")["weight"], 2);
  EXPECT_DOUBLE_EQ(w->policy->scheduler.gpu_load_threshold, 0.5);
}

TEST(YamlWorkloadTest, GpuIndexDefaultsToPosition) {
  auto w =
      ParseYamlWorkload("nodes:\n  - name: n\n    gpus: [{model: T4}, {model: T4}]\n", "w.yaml");
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ(w->nodes[0].spec.gpus[1].index, 1);
  EXPECT_EQ(w->nodes[0].spec.gpus[1].numa, -1);
  EXPECT_FALSE(w->policy.has_value());
  EXPECT_TRUE(w->tasks.empty());
}

TEST(YamlWorkloadTest, ReadsUsageFileBesideTheWorkload) {
  const auto dir = std::filesystem::temp_directory_path() / "hf_yaml_workload_test";
  std::filesystem::create_directories(dir / "usage");
  std::ofstream(dir / "usage" / "n.yaml")
      << "cpu_load: 0.9\ngpus: [{index: 0, utilization: 0.5}]\n";
  std::ofstream(dir / "w.yaml") << "nodes:\n  - name: n\n    usage_file: usage/n.yaml\n";
  auto w = LoadYamlWorkload((dir / "w.yaml").string());
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_TRUE(w->nodes[0].usage.has_value());
  EXPECT_DOUBLE_EQ(w->nodes[0].usage->cpu_load, 0.9);

  std::ofstream(dir / "usage" / "n.yaml") << "cpu_load: 2\n";
  w = LoadYamlWorkload((dir / "w.yaml").string());
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(w.status().message(),
              HasSubstr((dir / "usage" / "n.yaml").string() + ":1: usage.cpu_load"));
  std::filesystem::remove_all(dir);
}

struct BadYaml {
  const char* name;
  std::string text;
  std::string want;
};

// Names the case in test listings instead of dumping its bytes.
void PrintTo(const BadYaml& c, std::ostream* os) { *os << c.name; }

class YamlWorkloadErrorTest : public ::testing::TestWithParam<BadYaml> {};

TEST_P(YamlWorkloadErrorTest, NamesFileAndLine) {
  auto w = ParseYamlWorkload(GetParam().text, "w.yaml");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(w.status().message(), HasSubstr(GetParam().want));
}

const std::string kNode = "nodes:\n  - name: n\n    cpu_milli: 1000\n";

INSTANTIATE_TEST_SUITE_P(
    Entries, YamlWorkloadErrorTest,
    ::testing::Values(
        BadYaml{"syntax", "nodes: [\n", "w.yaml:2:"},
        BadYaml{"empty", "", "w.yaml:1: empty workload"},
        BadYaml{"not_a_mapping", "- a\n", "w.yaml:1: workload must be a mapping"},
        BadYaml{"unknown_top_key", kNode + "pods: []\n", "w.yaml:4: unknown key workload.pods"},
        BadYaml{"no_nodes", "tasks: []\n", "w.yaml: no nodes"},
        BadYaml{"unknown_node_key", kNode + "    colour: red\n",
                "w.yaml:4: unknown key nodes[0].colour"},
        BadYaml{"negative_cpu", "nodes:\n  - name: n\n    cpu_milli: -1\n",
                "w.yaml:3: nodes[0].cpu_milli must be in 0.."},
        BadYaml{"not_integer", "nodes:\n  - name: n\n    memory_mib: 1.5\n",
                "w.yaml:3: nodes[0].memory_mib must be an integer"},
        BadYaml{"duplicate_gpu", "nodes:\n  - name: n\n    gpus: [{index: 0}, {index: 0}]\n",
                "duplicate GPU index 0"},
        BadYaml{"duplicate_node", kNode + "  - name: n\n", "w.yaml:4: duplicate node name n"},
        BadYaml{"usage_range", kNode + "    usage: {cpu_load: 1.5}\n",
                "w.yaml:4: nodes[0].usage.cpu_load must be in 0..1"},
        BadYaml{"usage_twice", kNode + "    usage: {}\n    usage_file: u.yaml\n",
                "give usage or usage_file"},
        BadYaml{"missing_usage_file", kNode + "    usage_file: /nonexistent/u.yaml\n",
                "w.yaml:4: nodes[0].usage_file: /nonexistent/u.yaml"},
        BadYaml{"task_without_name", kNode + "tasks:\n  - {priority: 1}\n",
                "w.yaml:5: tasks[0].name is required"},
        BadYaml{"duplicate_task", kNode + "tasks:\n  - {name: a}\n  - {name: a}\n",
                "w.yaml:6: duplicate task name a"},
        BadYaml{"unknown_kind", kNode + "tasks:\n  - {name: a, kind: cron}\n",
                "tasks[0].kind must be batch or inference"},
        BadYaml{"bad_bool", kNode + "tasks:\n  - {name: a, rdma_required: maybe}\n",
                "tasks[0].rdma_required must be true or false"},
        BadYaml{"zero_share", kNode + "tasks:\n  - {name: a, requests: {gpu: 1, gpu_milli: 0}}\n",
                "tasks[0].requests.gpu_milli must be in 1.."},
        BadYaml{"share_over_1000",
                kNode + "tasks:\n  - {name: a, requests: {gpu: 1, gpu_milli: 1001}}\n",
                "gpu_milli must be in 1..1000"},
        BadYaml{"models_not_list", kNode + "tasks:\n  - {name: a, requests: {gpu_models: T4}}\n",
                "tasks[0].requests.gpu_models must be a list"},
        BadYaml{"deleted_before_created",
                kNode + "tasks:\n  - {name: a, create_time: 10, delete_time: 5}\n",
                "delete_time is before create_time"},
        BadYaml{"negative_time", kNode + "tasks:\n  - {name: a, create_time: -1}\n",
                "tasks[0].create_time must be in 0.."},
        BadYaml{"policy_type", kNode + "plugins:\n  binpack: {enabled: sometimes}\n",
                "w.yaml:5: plugins.binpack.enabled must be true or false"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace hf::sim

namespace hf::sim {
namespace {

constexpr const char* kJobs = R"(nodes:
  - {name: n1, cpu_milli: 8000, memory_mib: 8192, gpus: [{model: A100}, {model: A100}]}
tasks:
  - {name: solo, requests: {gpu: 1}}
jobs:
  - {name: train, create_time: 2, stagger: 0.5, duration: 60, priority: 3,
     roles: [{name: ps, replicas: 1}, {name: worker, replicas: 2, requests: {gpu: 1}}]}
)";

TEST(YamlWorkloadTest, JobsBecomeMembersAfterTheTasks) {
  Result<Workload> w = ParseYamlWorkload(kJobs, "jobs.yaml");
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_EQ(w->tasks.size(), 4u);
  EXPECT_EQ(w->tasks[0].task.job.id, 0u);
  for (size_t i = 1; i < 4; ++i) {
    const SimTask& m = w->tasks[i];
    EXPECT_EQ(m.task.key, i);
    EXPECT_EQ(m.task.job.id, 1u);
    EXPECT_EQ(m.task.job.rank, int32_t(i - 1));
    EXPECT_EQ(m.task.job.min_available, 3);
    EXPECT_EQ(m.task.priority, 3);
    EXPECT_EQ(m.create_ms, 2000 + 500 * int64_t(i - 1));
    EXPECT_EQ(m.job_run_ms, 60000);
    EXPECT_FALSE(m.delete_ms);
  }
  EXPECT_EQ(w->tasks[3].task.name, "train-worker-1");
}

TEST(YamlWorkloadTest, BadJobsNameTheEntry) {
  const std::string nodes = "nodes:\n  - {name: n1, cpu_milli: 1000, memory_mib: 1024}\n";
  struct Row {
    const char* jobs;
    const char* want;
  } rows[] = {
      {"jobs:\n  - {name: j, roles: [{name: w}]}\n", "jobs.yaml:4: jobs[0].duration is required"},
      {"jobs:\n  - {name: j, duration: -1, roles: [{name: w}]}\n", "jobs[0].duration must be"},
      {"jobs:\n  - {name: j, duration: 1, roles: [{name: w, replicas: 0}]}\n",
       "jobs[0]: roles[0].replicas must be >= 1"},
      {"jobs:\n  - {name: j, duration: 1, roles: [{name: w}]}\n  - {name: j, duration: 1, roles: "
       "[{name: w}]}\n",
       "duplicate task name j-w-0"},
  };
  for (const Row& r : rows) {
    Result<Workload> w = ParseYamlWorkload(nodes + r.jobs, "jobs.yaml");
    ASSERT_FALSE(w.ok()) << r.jobs;
    EXPECT_NE(w.status().message().find(r.want), std::string::npos) << w.status().message();
  }
}

}  // namespace
}  // namespace hf::sim
