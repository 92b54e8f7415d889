#include "agent/assignment.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace hf::agent {
namespace {

using nlohmann::json;

Allocation Alloc(std::vector<GpuGrant> gpus, std::string rdma = "") {
  Allocation a;
  a.gpus = std::move(gpus);
  a.rdma_device = std::move(rdma);
  return a;
}

// A node of `n` devices of `vendor`, indices 0..n-1 (a declared inventory).
NodeDevices Node(const std::string& vendor, int n, int first_index = 0) {
  NodeDevices node;
  for (int i = 0; i < n; ++i) {
    GpuDevice g;
    g.index = first_index + i;
    g.vendor = vendor;
    node.gpus.push_back(g);
  }
  return node;
}

TEST(TaskEnvTest, CudaVisibleDevicesFollowsAllocationOrder) {
  Task t;
  t.env = {{"FOO", "bar"}, {"PATH", "/task/bin"}};
  const auto env = BuildTaskEnv({{"PATH", "/usr/bin"}, {"HOME", "/root"}}, 17, t,
                                Alloc({{.index = 3, .milli = 1000}, {.index = 1, .milli = 1000}}),
                                Node("nvidia", 4));
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "3,1");
  EXPECT_EQ(env.at("HETEROFLOW_TASK_ID"), "17");
  EXPECT_EQ(env.at("FOO"), "bar");
  EXPECT_EQ(env.at("PATH"), "/task/bin");  // the task's env wins over the agent's
  EXPECT_EQ(env.at("HOME"), "/root");
  EXPECT_EQ(env.count("HETEROFLOW_GPU_MILLI"), 0u);
  EXPECT_EQ(env.count("NCCL_IB_HCA"), 0u);
}

TEST(TaskEnvTest, NoGpuHidesAllGpus) {
  const auto env = BuildTaskEnv({{"CUDA_VISIBLE_DEVICES", "0,1"}}, 5, Task{}, Alloc({}), Node("nvidia", 2));
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "");
  EXPECT_EQ(env.count("HETEROFLOW_GPU_MILLI"), 0u);
  // A node whose inventory declares no device still hides NVIDIA GPUs.
  const auto cpu = BuildTaskEnv({{"CUDA_VISIBLE_DEVICES", "0,1"}}, 5, Task{}, Alloc({}), NodeDevices{});
  EXPECT_EQ(cpu.at("CUDA_VISIBLE_DEVICES"), "");
}

TEST(TaskEnvTest, EachVendorGetsItsOwnVariableAndNoOther) {
  const std::map<std::string, std::string> inherited = {
      {"CUDA_VISIBLE_DEVICES", "0"}, {"HIP_VISIBLE_DEVICES", "1"}, {"ROCR_VISIBLE_DEVICES", "2"},
      {"ASCEND_RT_VISIBLE_DEVICES", "3"}, {"ASCEND_VISIBLE_DEVICES", "3"},
      {"HABANA_VISIBLE_MODULES", "4"}, {"HABANA_VISIBLE_DEVICES", "4"}, {"GPU_DEVICE_ORDINAL", "5"}};
  const std::map<std::string, std::string> vars = {{"nvidia", "CUDA_VISIBLE_DEVICES"},
                                                   {"amd", "ROCR_VISIBLE_DEVICES"},
                                                   {"huawei", "ASCEND_RT_VISIBLE_DEVICES"},
                                                   {"habana", "HABANA_VISIBLE_MODULES"}};
  for (const auto& [vendor, var] : vars) {
    const auto env = BuildTaskEnv(inherited, 1, Task{},
                                  Alloc({{.index = 6, .milli = 1000}, {.index = 4, .milli = 1000}}),
                                  Node(vendor, 8));
    EXPECT_EQ(env.at(var), "6,4") << vendor;
    // Gaudi's container-runtime variable comes with its process variable.
    const std::string also = vendor == "habana" ? "HABANA_VISIBLE_DEVICES" : "";
    if (!also.empty()) EXPECT_EQ(env.at(also), "6,4");
    for (const auto& [k, v] : inherited) {
      if (k != var && k != also) EXPECT_EQ(env.count(k), 0u) << vendor << " task has " << k;
    }
  }
}

TEST(TaskEnvTest, DiscoveredBindIdsAndRanksOnAMixedNode) {
  // Four NVIDIA GPUs then four Gaudis (node indices 4..7) whose module ids
  // came from hl-smi.
  NodeDevices node = Node("nvidia", 4);
  for (const GpuDevice& g : Node("habana", 4, 4).gpus) node.gpus.push_back(g);
  node.bind_ids = {{4, "3"}, {5, "0"}, {6, "2"}, {7, "1"}};
  for (int32_t i = 4; i < 8; ++i) node.vendor_index[i] = {"habana", i - 4};
  const auto gaudi = BuildTaskEnv({}, 1, Task{}, Alloc({{.index = 5, .milli = 1000}, {.index = 7, .milli = 1000}}),
                                  node);
  EXPECT_EQ(gaudi.at("HABANA_VISIBLE_MODULES"), "0,1");  // module ids
  EXPECT_EQ(gaudi.at("HABANA_VISIBLE_DEVICES"), "1,3");  // hl-smi indices
  EXPECT_EQ(gaudi.at("CUDA_VISIBLE_DEVICES"), "");  // the node's other devices hidden
  // Declared devices bind by their rank among their vendor's.
  NodeDevices declared = Node("nvidia", 2);
  for (const GpuDevice& g : Node("huawei", 2, 2).gpus) declared.gpus.push_back(g);
  const auto npu = BuildTaskEnv({}, 1, Task{}, Alloc({{.index = 3, .milli = 1000}}), declared);
  EXPECT_EQ(npu.at("ASCEND_RT_VISIBLE_DEVICES"), "1");
  // A vendor the agent does not know gets no variable.
  const auto other = BuildTaskEnv({}, 1, Task{}, Alloc({{.index = 0, .milli = 1000}}), Node("cambricon", 1));
  EXPECT_EQ(other.count("CUDA_VISIBLE_DEVICES"), 1u);  // hides NVIDIA's, as a node without known devices does
  EXPECT_EQ(other.count("MLU_VISIBLE_DEVICES"), 0u);
}

TEST(TaskEnvTest, GpuMilliOnlyForShares) {
  const auto shared = BuildTaskEnv({}, 1, Task{}, Alloc({{.index = 2, .milli = 500}}), Node("nvidia", 4));
  EXPECT_EQ(shared.at("HETEROFLOW_GPU_MILLI"), "500");
  EXPECT_EQ(shared.at("CUDA_VISIBLE_DEVICES"), "2");
  Task t;
  t.env = {{"HETEROFLOW_GPU_MILLI", "1"}};  // the agent's value wins
  const auto whole = BuildTaskEnv({}, 1, t, Alloc({{.index = 2, .milli = 1000}}), Node("nvidia", 4));
  EXPECT_EQ(whole.count("HETEROFLOW_GPU_MILLI"), 0u);
}

TEST(TaskEnvTest, CollectiveVariablesFollowTheVendor) {
  const auto nccl = BuildTaskEnv({}, 1, Task{}, Alloc({{.index = 0, .milli = 1000}}, "mlx5_1"), Node("nvidia", 1));
  EXPECT_EQ(nccl.at("NCCL_IB_HCA"), "mlx5_1");
  const auto rccl = BuildTaskEnv({}, 1, Task{}, Alloc({{.index = 0, .milli = 1000}}, "mlx5_1"), Node("amd", 1));
  EXPECT_EQ(rccl.at("NCCL_IB_HCA"), "mlx5_1");
  // HCCL: the advertised address, for a job's member only.
  NodeDevices ascend = Node("huawei", 1);
  ascend.advertise_address = "10.0.0.7";
  const auto alone = BuildTaskEnv({{"NCCL_IB_HCA", "x"}}, 1, Task{}, Alloc({{.index = 0, .milli = 1000}}, "mlx5_1"),
                                  ascend);
  EXPECT_EQ(alone.count("HCCL_IF_IP"), 0u);
  EXPECT_EQ(alone.count("NCCL_IB_HCA"), 0u);
  const auto member = BuildTaskEnv({}, 1, Task{}, Alloc({{.index = 0, .milli = 1000}}), ascend, std::nullopt,
                                   {{"RANK", "0"}, {"MASTER_ADDR", "10.0.0.7"}});
  EXPECT_EQ(member.at("HCCL_IF_IP"), "10.0.0.7");
  EXPECT_EQ(EnvStrings({{"A", "1"}, {"B", ""}}), (std::vector<std::string>{"A=1", "B="}));
  // No NIC given: the task's own NCCL_IB_HCA stays; a NIC but no device of
  // a known vendor: NCCL's variable all the same.
  Task own;
  own.env = {{"NCCL_IB_HCA", "^mlx5_2"}};
  EXPECT_EQ(BuildTaskEnv({}, 1, own, Alloc({{.index = 0, .milli = 1000}}), Node("nvidia", 1)).at("NCCL_IB_HCA"),
            "^mlx5_2");
  EXPECT_EQ(BuildTaskEnv({}, 1, Task{}, Alloc({}, "mlx5_3"), NodeDevices{}).at("NCCL_IB_HCA"), "mlx5_3");
}

TEST(TaskEnvTest, PortOnlyForServiceTasks) {
  Task t;
  t.env = {{"PORT", "8000"}};  // the task's own PORT stays when it gets no port
  const auto plain = BuildTaskEnv({{"HETEROFLOW_PORT", "1"}}, 1, t, Alloc({}), NodeDevices{});
  EXPECT_EQ(plain.at("PORT"), "8000");
  EXPECT_EQ(plain.count("HETEROFLOW_PORT"), 0u);
  const auto service = BuildTaskEnv({}, 1, t, Alloc({}), NodeDevices{}, uint16_t{40123});
  EXPECT_EQ(service.at("PORT"), "40123");  // the agent's port wins
  EXPECT_EQ(service.at("HETEROFLOW_PORT"), "40123");
}

TEST(PortTest, NeedsPortLooksInEveryElement) {
  EXPECT_FALSE(NeedsPort({}));
  EXPECT_FALSE(NeedsPort({"python3", "train.py", "--port", "8000", "{por}", "port}"}));
  EXPECT_TRUE(NeedsPort({"python3", "server.py", "--port", "{port}"}));
  EXPECT_TRUE(NeedsPort({"sh", "-c", "exec server --listen=:{port}"}));
}

TEST(PortTest, SubstitutesEveryPlaceholder) {
  using V = std::vector<std::string>;
  EXPECT_EQ(SubstitutePort({"python3", "server.py", "--port", "{port}"}, 8123),
            (V{"python3", "server.py", "--port", "8123"}));
  EXPECT_EQ(SubstitutePort({"sh", "-c", "a={port} b={port}{port}", "--x={port}/{port"}, 1),
            (V{"sh", "-c", "a=1 b=11", "--x=1/{port"}));
  // A value that itself holds the placeholder text cannot loop: it is a number.
  EXPECT_EQ(SubstitutePort({"{{port}}"}, 65535), (V{"{65535}"}));
  EXPECT_EQ(SubstitutePort({"plain"}, 5), (V{"plain"}));
}

TEST(PortTest, PickFreePortGivesABindablePort) {
  Result<uint16_t> port = PickFreePort();
  ASSERT_TRUE(port.ok()) << port.status().ToString();
  EXPECT_GT(*port, 0);
  // The port is released: a server can bind it now.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(*port);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  close(fd);
}

TEST(AssignmentsTest, ParsesTheProtocolsAnswer) {
  const json body = json::parse(R"({"version": 4, "tasks": [
    {"id": 17, "state": "scheduled",
     "task": {"id": 17, "name": "train", "state": "scheduled", "node": "n1",
              "command": ["sh", "-c", "exit 0"], "env": {"A": "1"},
              "requests": {"cpu_milli": 1000, "gpu": 2}, "rdma_required": true},
     "allocation": {"node": "n1", "cpu_milli": 1000, "memory_mib": 0,
                    "gpus": [{"index": 1, "milli": 1000, "memory_mib": 0},
                             {"index": 0, "milli": 1000, "memory_mib": 0}],
                    "rdma_device": "mlx5_0"}},
    {"id": 18, "state": "running", "task": {"command": 3}, "allocation": {}}]})");
  Result<AssignmentList> list = ParseAssignments(body);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(list->version, 4);
  ASSERT_EQ(list->tasks.size(), 1u);
  const Assignment& a = list->tasks[0];
  EXPECT_EQ(a.id, 17u);
  EXPECT_EQ(a.task.command, (std::vector<std::string>{"sh", "-c", "exit 0"}));
  ASSERT_EQ(a.allocation.gpus.size(), 2u);
  EXPECT_EQ(a.allocation.gpus[0].index, 1);
  EXPECT_EQ(a.allocation.rdma_device, "mlx5_0");
  ASSERT_EQ(list->bad.count(18), 1u);
  EXPECT_FALSE(ParseAssignments(json::parse(R"({"tasks": []})")).ok());
  EXPECT_FALSE(ParseAssignments(json::parse(R"({"version": 1})")).ok());
}

TEST(AssignmentsTest, ReadsAJobMembersLaunchAndHold) {
  const auto parse = [](const std::string& launch) {
    return ParseAssignments(json::parse(R"({"version": 2, "tasks": [
      {"id": 5, "state": "scheduled", "task": {"name": "w", "command": ["true"]},
       "allocation": {"cpu_milli": 0, "memory_mib": 0, "gpus": []},
       "launch": )" + launch + "}]}"));
  };
  Result<AssignmentList> held = parse(R"({"env": {"RANK": "1"}, "hold": true})");
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  ASSERT_EQ(held->tasks.size(), 1u);
  EXPECT_TRUE(held->tasks[0].hold);
  EXPECT_EQ(held->tasks[0].launch_env.at("RANK"), "1");
  Result<AssignmentList> released = parse(R"({"env": {"RANK": "1"}, "hold": false})");
  ASSERT_TRUE(released.ok());
  EXPECT_FALSE(released->tasks.at(0).hold);
  // A server that does not know the barrier sends no hold: start at once.
  Result<AssignmentList> older = parse(R"({"env": {"RANK": "1"}})");
  ASSERT_TRUE(older.ok());
  EXPECT_FALSE(older->tasks.at(0).hold);
  // A hold that is not a boolean is not guessed at: the entry is bad.
  Result<AssignmentList> bad = parse(R"({"env": {}, "hold": "yes"})");
  ASSERT_TRUE(bad.ok());
  EXPECT_TRUE(bad->tasks.empty());
  ASSERT_EQ(bad->bad.count(5), 1u);
  EXPECT_NE(bad->bad.at(5).find("launch.hold"), std::string::npos);
}

}  // namespace
}  // namespace hf::agent
