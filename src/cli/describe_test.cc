#include "cli/describe.h"

#include <gtest/gtest.h>

namespace hf::cli {
namespace {

using nlohmann::json;

constexpr int64_t kNow = 1796220000;  // 2026-12-02T14:00:00Z

TEST(DescribeTest, PendingTaskWithEvents) {
  const json task = json::parse(R"({
    "id": 18, "name": "infer", "group": "", "priority": 3, "kind": "inference",
    "state": "pending", "node": null, "preemptible": true,
    "requests": {"cpu_milli": 2000, "memory_mib": 8192, "gpu": 1, "gpu_milli": 500,
                 "gpu_memory_mib": 20480, "gpu_models": ["A100-80G", "H100"]},
    "allocation": null,
    "pending_reason": "0/2 nodes available: 2 Insufficient GPU",
    "command": ["python", "serve.py"], "env": {"A": "1"}, "depends_on": [],
    "created_at": "2026-12-02T13:59:00Z", "updated_at": "2026-12-02T13:59:30Z",
    "events": [{"time": "2026-12-02T13:59:00Z", "kind": "submitted", "message": "submitted"},
               {"time": "2026-12-02T13:59:30Z", "kind": "unschedulable",
                "message": "0/2 nodes available"}]})");
  EXPECT_EQ(DescribeTask(task, kNow),
            "Name:            infer\n"
            "ID:              18\n"
            "State:           pending\n"
            "Priority:        3\n"
            "Group:           <none>\n"
            "Kind:            inference\n"
            "Preemptible:     true\n"
            "Node:            <none>\n"
            "Requests:        cpu 2, memory 8Gi, gpu 500m (20Gi each), models A100-80G,H100\n"
            "Allocation:      <none>\n"
            "Pending Reason:  0/2 nodes available: 2 Insufficient GPU\n"
            "Depends On:      <none>\n"
            "Command:         python serve.py\n"
            "Env:             A=1\n"
            "Created:         2026-12-02T13:59:00Z (60s ago)\n"
            "Updated:         2026-12-02T13:59:30Z (30s ago)\n"
            "Events:\n"
            "  AGE   KIND            MESSAGE\n"
            "  60s   submitted       submitted\n"
            "  30s   unschedulable   0/2 nodes available\n");
}

TEST(DescribeTest, ScheduledTaskShowsItsAllocation) {
  const json task = json::parse(R"({
    "id": 17, "name": "train", "state": "scheduled", "node": "gpu-a1", "rdma_required": true,
    "requests": {"cpu_milli": 4000, "memory_mib": 16384, "gpu": 2},
    "allocation": {"node": "gpu-a1", "cpu_milli": 4000, "memory_mib": 16384,
                   "gpus": [{"index": 0, "milli": 1000, "memory_mib": 0},
                            {"index": 1, "milli": 1000, "memory_mib": 40960}],
                   "rdma_device": "mlx5_0"}})");
  const std::string text = DescribeTask(task, kNow);
  EXPECT_NE(text.find("RDMA:            required\n"), std::string::npos) << text;
  EXPECT_NE(text.find("Allocation:      cpu 4, memory 16Gi, gpus 0 (1000m), 1 (1000m, 40Gi), "
                      "rdma mlx5_0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Events:          <none>\n"), std::string::npos) << text;
}

TEST(DescribeTest, Node) {
  const json node = json::parse(R"({
    "name": "gpu-a1", "condition": "Ready", "labels": {"pool": "train"},
    "cpu_milli": 64000, "memory_mib": 524288,
    "gpus": [{"index": 0, "model": "A100-80G", "memory_mib": 81920, "numa": 0,
              "pcie_switch": 0, "nvlink_domain": 0, "allocated_milli": 1000,
              "allocated_memory_mib": 40960},
             {"index": 1, "model": "A100-80G", "memory_mib": 81920, "numa": 1,
              "pcie_switch": 1, "nvlink_domain": 0, "allocated_milli": 0,
              "allocated_memory_mib": 0}],
    "rdma": [{"name": "mlx5_0", "numa": 0, "pcie_switch": 0}],
    "topology": {"zone": "z1", "switch": "s1", "rack": "r1"},
    "allocated": {"cpu_milli": 16000, "memory_mib": 65536, "gpu_milli": 1000},
    "tasks": [17, 21]})");
  EXPECT_EQ(DescribeNode(node),
            "Name:       gpu-a1\n"
            "Condition:  Ready\n"
            "Labels:     pool=train\n"
            "Topology:   zone z1, switch s1, rack r1\n"
            "Capacity:   cpu 64, memory 512Gi, gpus 2\n"
            "Allocated:  cpu 16 (25%), memory 64Gi (12%), gpus 1 (50%)\n"
            "RDMA:       mlx5_0 (numa 0)\n"
            "Tasks:      17, 21\n"
            "GPUs:\n"
            "  INDEX   MODEL      MEMORY   ALLOCATED   ALLOCATED MEMORY   NUMA   PCIE   NVLINK\n"
            "  0       A100-80G   80Gi     1000m       40Gi               0      0      0\n"
            "  1       A100-80G   80Gi     0m          0Mi                1      1      0\n");
  EXPECT_NE(DescribeNode(json::object()).find("GPUs:       <none>\n"), std::string::npos)
      << DescribeNode(json::object());
}

}  // namespace
}  // namespace hf::cli
