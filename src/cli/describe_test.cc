#include "cli/describe.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

namespace hf::cli {
namespace {

using nlohmann::json;

constexpr int64_t kNow = 1796220000;  // 2026-12-02T14:00:00Z

TEST(DescribeTest, PendingTaskWithEvents) {
  const json task = json::parse(R"({
    "id": 18, "name": "infer", "group": "", "priority": 3, "queue": "default", "kind": "inference",
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
            "Queue:           default\n"
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

TEST(DescribeTest, ReservedTaskShowsItsHeldRoom) {
  const json task = json::parse(R"json({
    "id": 21, "name": "big", "state": "pending", "queue": "team-a",
    "pending_reason": "0/2 nodes available: 2 Insufficient GPU",
    "reservation": {"start": "2026-12-02T14:10:00Z",
                    "nodes": [{"node": "n1", "members": 1}, {"node": "n2", "members": 2}]}})json");
  const std::string text = DescribeTask(task, kNow);
  EXPECT_NE(text.find("Queue:           team-a\n"), std::string::npos) << text;
  EXPECT_NE(text.find("Reservation:     room held from 2026-12-02T14:10:00Z on n1 (1), n2 (2)\n"),
            std::string::npos)
      << text;
  // Without one, no line.
  const json plain = json::parse(R"({"id": 22, "name": "small", "state": "pending",
                                     "reservation": null})");
  EXPECT_EQ(DescribeTask(plain, kNow).find("Reservation:"), std::string::npos);
}

TEST(DescribeTest, ScheduledTaskShowsItsAllocation) {
  const json task = json::parse(R"json({
    "id": 17, "name": "train", "state": "scheduled", "node": "gpu-a1", "rdma_required": true,
    "requests": {"cpu_milli": 4000, "memory_mib": 16384, "gpu": 2},
    "allocation": {"node": "gpu-a1", "cpu_milli": 4000, "memory_mib": 16384,
                   "gpus": [{"index": 0, "milli": 1000, "memory_mib": 0},
                            {"index": 1, "milli": 1000, "memory_mib": 40960}],
                   "rdma_device": "mlx5_0"},
    "pending_reason": "waiting for task 12 to exit (it holds GPU 0)"})json");
  const std::string text = DescribeTask(task, kNow);
  // Why its agent has not started it: a victim still holds its GPU.
  EXPECT_NE(text.find("Pending Reason:  waiting for task 12 to exit (it holds GPU 0)\n"),
            std::string::npos)
      << text;
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
    "gpus": [{"index": 0, "vendor": "nvidia", "model": "A100-80G", "memory_mib": 81920, "numa": 0,
              "pcie_switch": 0, "fabric_domain": 0, "allocated_milli": 1000,
              "allocated_memory_mib": 40960},
             {"index": 1, "vendor": "nvidia", "model": "A100-80G", "memory_mib": 81920, "numa": 1,
              "pcie_switch": 1, "fabric_domain": 0, "allocated_milli": 0,
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
            "  INDEX   VENDOR   MODEL      MEMORY   ALLOCATED   ALLOCATED MEMORY   NUMA   PCIE   FABRIC\n"
            "  0       nvidia   A100-80G   80Gi     1000m       40Gi               0      0      0\n"
            "  1       nvidia   A100-80G   80Gi     0m          0Mi                1      1      0\n");
  EXPECT_NE(DescribeNode(json::object()).find("GPUs:       <none>\n"), std::string::npos)
      << DescribeNode(json::object());
}

TEST(DescribeTest, Model) {
  const json model = json::parse(R"({
    "name": "qwen", "model": "Qwen/Qwen2-7B", "command": ["vllm", "serve", "--port", "{port}"],
    "env": {}, "health_path": "/health",
    "requests": {"gpu": 1, "gpu_milli": 1, "gpu_memory_mib": 20480},
    "priority": 0, "preemptible": true, "min_replicas": 1, "max_replicas": 4,
    "startup_timeout_s": 600,
    "autoscaling": {"target_inflight_per_replica": 8, "upscale_delay_s": 5,
                    "downscale_delay_s": 60, "window_s": 10, "queue_size": 100,
                    "cold_start_timeout_s": 120},
    "revision": 2, "status": "scaling", "reason": "1/2 ready: qwen-3 pending",
    "ready_replicas": 1, "desired_replicas": 2, "inflight": 5, "queued": 0,
    "replicas": [
      {"task": 31, "name": "qwen-2", "revision": 2, "state": "running", "node": "gpu-a1",
       "ready": true, "draining": false, "inflight": 5, "address": "10.0.0.5:41000"},
      {"task": 33, "name": "qwen-3", "revision": 2, "state": "pending", "node": null,
       "ready": false, "draining": false, "inflight": 0, "address": null,
       "pending_reason": "0/1 nodes available: 1 Insufficient GPU memory"}],
    "endpoints": ["chat"],
    "last_decision": {"time_ms": 1796219990000, "from": 1, "to": 2,
                      "reason": "mean load 9.5 over 10s > target 8",
                      "inputs": {"inflight": 9, "queued": 1}},
    "created_at_ms": 1796216400000})");
  const std::string text = DescribeModel(model, kNow);
  for (const char* line :
       {"Name:             qwen\n", "Status:           scaling\n",
        "Reason:           1/2 ready: qwen-3 pending\n",
        "Replicas:         1/2 ready (min 1, max 4)\n",
        "Command:          vllm serve --port {port}\n",
        "Requests:         cpu 0, memory 0Mi, gpu 1m (20Gi each)\n",
        "Autoscaling:      target 8 in flight per replica, window 10s, upscale delay 5s, "
        "downscale delay 60s, queue 100, cold start timeout 120s\n",
        "Last Decision:    1 -> 2 replicas: mean load 9.5 over 10s > target 8 (10s ago)\n",
        "Decision Inputs:  inflight=9, queued=1\n", "Endpoints:        chat\n",
        "Created:          2026-12-02T13:00:00Z (60m ago)\n",
        "Replica List:\n"
        "  NAME     TASK   REVISION   NODE     STATE     READY   INFLIGHT   ADDRESS          "
        "MESSAGE\n"
        "  qwen-2   31     2          gpu-a1   running   true    5          10.0.0.5:41000\n"
        "  qwen-3   33     2          <none>   pending   false   0          <none>           "
        "0/1 nodes available: 1 Insufficient GPU memory\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\nin:\n" << text;
  }
  const std::string bare = DescribeModel(json::object(), kNow);
  EXPECT_NE(bare.find("Autoscaling:      off (replicas = min_replicas)\n"), std::string::npos)
      << bare;
  EXPECT_NE(bare.find("Replica List:     <none>\n"), std::string::npos) << bare;
}

TEST(DescribeTest, Endpoint) {
  const json endpoint = json::parse(R"j({
    "name": "chat", "model": "qwen", "public": false,
    "routes": ["/inference/v1/chat/completions (\"model\": \"chat\")", "/serve/chat/"],
    "keys": [{"id": 1, "name": "default", "created_at_ms": 1796219700000}],
    "requests": 120, "errors": 2, "inflight": 1, "requests_per_s": 3.5,
    "latency_ms": {"p50": 41.5, "p99": 980}})j");
  EXPECT_EQ(DescribeEndpoint(endpoint, kNow),
            "Name:        chat\n"
            "Model:       qwen\n"
            "Public:      false\n"
            "Routes:      /inference/v1/chat/completions (\"model\": \"chat\"), /serve/chat/\n"
            "Requests:    120\n"
            "Errors:      2\n"
            "In Flight:   1\n"
            "Requests/s:  3.5\n"
            "Latency:     p50 41.5ms, p99 980ms\n"
            "Keys:\n"
            "  ID   NAME      AGE\n"
            "  1    default   5m\n");
}

TEST(DescribeTest, ShellQuoteLeavesPlainWordsBare) {
  EXPECT_EQ(ShellQuote("python"), "python");
  EXPECT_EQ(ShellQuote("--port=8000"), "--port=8000");
  EXPECT_EQ(ShellQuote("a/b.py"), "a/b.py");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("two words"), "'two words'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote("{port}"), "{port}");  // a template placeholder reads as written
  EXPECT_EQ(ShellQuote("{a,b}"), "'{a,b}'");  // bash would expand these
  EXPECT_EQ(ShellQuote("{1..3}"), "'{1..3}'");
}

TEST(DescribeTest, CommandLineIsShellQuoted) {
  const json task = {{"id", 7}, {"name", "sweep"}, {"state", "running"},
                     {"command", {"sh", "-c", "echo sweep trial a on GPUs $CUDA_VISIBLE_DEVICES; sleep 1"}}};
  EXPECT_NE(DescribeTask(task, kNow).find(
                "Command:         sh -c 'echo sweep trial a on GPUs $CUDA_VISIBLE_DEVICES; sleep 1'\n"),
            std::string::npos)
      << DescribeTask(task, kNow);
}

// What sh and bash make of the quoted arguments is the arguments themselves.
TEST(DescribeTest, ShellQuotedArgumentsReadBackThroughShAndBash) {
  const std::vector<std::string> args = {
      "plain", "two words", "it's", "'", "''", "$HOME", "`id`", "a\\b", "semi;colon", "*",
      "tab\there", "new\nline", "\"double\"", "!bang", "~", "#hash", "", "-n", "{port}", "{a,b}", "{1..3}"};
  std::string script = "printf '%s\\036'";
  for (const std::string& a : args) script += " " + ShellQuote(a);
  for (const char* shell : {"/bin/sh", "/bin/bash"}) {
    FILE* sh = popen((std::string(shell) + " -c " + ShellQuote(script)).c_str(), "r");
    ASSERT_NE(sh, nullptr) << shell;
    std::string out;
    std::array<char, 256> buf;
    for (size_t n; (n = fread(buf.data(), 1, buf.size(), sh)) > 0;) out.append(buf.data(), n);
    ASSERT_EQ(pclose(sh), 0) << shell;
    std::vector<std::string> back;
    for (size_t start = 0, sep; (sep = out.find('\036', start)) != std::string::npos; start = sep + 1) {
      back.push_back(out.substr(start, sep - start));
    }
    EXPECT_EQ(back, args) << shell;
  }
}

}  // namespace
}  // namespace hf::cli
