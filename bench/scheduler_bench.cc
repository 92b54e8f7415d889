// Scheduling-core benchmark: decisions per second and decision latency on
// clusters of 1k, 5k and 10k nodes built from the Alibaba openb node shapes,
// with binpack, preempt (running), rdma, topology and the always-on filters
// enabled. Run on purpose (bench/run.sh), not by ctest.
//
// Cluster: the openb GPU node list repeated until the size is reached; 8-GPU
// nodes get two RDMA NICs (one per PCIe switch); every node gets a position
// (32 nodes a rack, 8 racks a switch, 8 switches a zone); every 10th node
// reports measured usage every 256 decisions (derived from its allocations,
// as an agent's heartbeat would), so the threshold filter does real work.
// Workload: openb default pods sampled with replacement (seeded) until the
// requested GPUs reach --fill x cluster GPU capacity; multi-GPU pods form
// RDMA groups of two; every 10th pod depends on an earlier pod.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/cluster_state.h"
#include "framework/framework.h"
#include "sim/openb_reader.h"

namespace {

struct Figures {
  size_t nodes = 0, decisions = 0, placed = 0, preemptions = 0;
  double per_second = 0, p50_us = 0, p99_us = 0, max_us = 0;
  // --gang N: N-member gangs (4 GPUs a member) decided on the filled cluster.
  size_t gangs = 0, gangs_placed = 0;
  double gang_p50_ms = 0, gang_p99_ms = 0, gang_max_ms = 0;
};

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, size_t(q * double(v.size())));
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[k];
}

Figures RunOne(const hf::sim::Workload& openb, size_t node_count, double fill, uint64_t seed,
               int gang) {
  using hf::NodeId;
  hf::ClusterState cluster;
  int64_t gpu_capacity = 0;
  for (size_t i = 0; i < node_count; ++i) {
    hf::NodeSpec spec = openb.nodes[i % openb.nodes.size()].spec;
    spec.name = "node-" + std::to_string(i);
    for (size_t g = 0; g < spec.gpus.size(); ++g) {
      spec.gpus[g].numa = spec.gpus[g].pcie_switch = spec.gpus[g].nvlink_domain = int32_t(g / 4);
    }
    if (spec.gpus.size() == 8) spec.rdma = {{"mlx5_0", 0, 0}, {"mlx5_1", 1, 1}};
    spec.topology = {"zone-" + std::to_string(i / 2048), "switch-" + std::to_string(i / 256),
                     "rack-" + std::to_string(i / 32)};
    gpu_capacity += int64_t(spec.gpus.size()) * 1000;
    const NodeId id = *cluster.AddNode(spec);
    (void)id;
  }

  hf::framework::Policy policy;
  policy.plugins["binpack"] = {{"enabled", true}};
  policy.plugins["preempt"] = {{"enabled", true}, {"mode", "running"}, {"min_runtime_seconds", 0}};
  policy.plugins["rdma"] = {{"enabled", true}};
  policy.plugins["topology"] = {{"enabled", true}};
  hf::ManualClock clock(0);
  auto fw = hf::framework::Framework::Create(hf::plugins::InTreeRegistry(), policy, &clock);
  if (!fw.ok()) {
    std::fprintf(stderr, "framework: %s\n", fw.status().ToString().c_str());
    std::exit(1);
  }

  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, openb.tasks.size() - 1);
  std::vector<hf::Task> tasks;
  int64_t demand = 0;
  int groups = 0;
  while (demand < int64_t(fill * double(gpu_capacity))) {
    hf::Task t = openb.tasks[pick(rng)].task;
    t.key = tasks.size();
    t.name = "pod-" + std::to_string(t.key);
    if (t.requests.gpu > 1) {
      t.group = "job-" + std::to_string(groups++ / 2);
      t.rdma_required = true;
    }
    if (t.key % 10 == 9) t.depends_on = {"pod-" + std::to_string(t.key / 2)};
    demand += int64_t(t.requests.gpu) * t.requests.gpu_milli;
    tasks.push_back(std::move(t));
  }

  Figures f;
  f.nodes = node_count;
  std::vector<double> lat_us;
  lat_us.reserve(tasks.size());
  double total_us = 0;
  hf::framework::ScheduleOptions opts;
  opts.bind_state = hf::TaskState::kRunning;
  const auto report = [&](NodeId id) {
    hf::NodeUsage u;
    u.cpu_load = 0.6 * (1.0 - double(cluster.free_cpu(id)) / double(cluster.total_cpu(id)));
    u.memory_used = 0.5 * (1.0 - double(cluster.free_memory(id)) / double(cluster.total_memory(id)));
    const auto free = cluster.gpu_free_milli(id);
    for (size_t g = 0; g < free.size(); ++g) {
      u.gpus.push_back({cluster.spec(id).gpus[g].index, 0.8 * (1000 - free[g]) / 1000.0, 0});
    }
    HF_CHECK(cluster.ReportUsage(id, u).ok());
  };
  for (const hf::Task& t : tasks) {
    clock.Advance(1000);
    if (t.key % 256 == 0) {
      for (NodeId id = 0; id < cluster.node_count(); id += 10) report(id);
    }
    const auto start = std::chrono::steady_clock::now();
    hf::framework::Decision d = (*fw)->Schedule(t, cluster, opts);
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    lat_us.push_back(us);
    total_us += us;
    f.placed += d.scheduled;
    f.preemptions += d.victims.size();
  }
  f.decisions = tasks.size();
  f.per_second = double(f.decisions) / (total_us / 1e6);
  f.p50_us = Percentile(lat_us, 0.50);
  f.p99_us = Percentile(lat_us, 0.99);
  f.max_us = *std::max_element(lat_us.begin(), lat_us.end());
  if (gang <= 0) return f;
  // Gangs on the filled cluster: each decided in one ScheduleGang call, then
  // released, so that every gang sees the same cluster.
  std::vector<double> gang_ms;
  hf::framework::CycleState state;
  for (int g = 0; g < 50; ++g) {
    std::vector<hf::Task> members;
    for (int r = 0; r < gang; ++r) {
      hf::Task t;
      t.key = tasks.size() + size_t(g) * size_t(gang) + size_t(r);
      t.name = "gang-" + std::to_string(g) + "-" + std::to_string(r);
      t.group = "gang." + std::to_string(g);
      t.priority = 0;
      t.requests.gpu = 4;
      t.requests.cpu_milli = 8000;
      t.requests.memory_mib = 32768;
      t.job = {uint64_t(1000 + g), "gang", "worker", r, gang, gang};
      members.push_back(std::move(t));
    }
    std::vector<const hf::Task*> ptrs;
    for (const hf::Task& t : members) ptrs.push_back(&t);
    const auto start = std::chrono::steady_clock::now();
    hf::framework::GangDecision d = (*fw)->ScheduleGang(ptrs, size_t(gang), cluster, state, opts);
    gang_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    f.gangs_placed += d.scheduled;
    if (d.scheduled) {
      for (const hf::Task& t : members) HF_CHECK(cluster.Release(t.key).ok());
    }
  }
  f.gangs = gang_ms.size();
  f.gang_p50_ms = Percentile(gang_ms, 0.50);
  f.gang_p99_ms = Percentile(gang_ms, 0.99);
  f.gang_max_ms = *std::max_element(gang_ms.begin(), gang_ms.end());
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  std::string trace = "../shared/traces/alibaba-openb";
  double fill = 0.9;
  uint64_t seed = 42;
  std::vector<size_t> sizes = {1000, 5000, 10000};
  int gang = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--trace-dir") trace = argv[i + 1];
    else if (flag == "--nodes") sizes = {size_t(std::strtoull(argv[i + 1], nullptr, 10))};
    else if (flag == "--fill") fill = std::atof(argv[i + 1]);
    else if (flag == "--seed") seed = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--gang") gang = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr,
                   "usage: hf_bench [--trace-dir DIR] [--fill X] [--seed N] [--nodes N] [--gang N]\n");
      return 2;
    }
  }
  auto openb = hf::sim::LoadOpenbWorkload(trace + "/openb_node_list_gpu_node.csv",
                                          trace + "/openb_pod_list_default.csv");
  if (!openb.ok()) {
    std::fprintf(stderr, "hf_bench: %s\n", openb.status().message().c_str());
    return 2;
  }
  std::printf("scheduling core: binpack + preempt(running) + rdma + topology + fit + load_threshold,\n"
              "every node examined for every task (no sampling); GPU demand up to %.0f%% of capacity\n\n",
              fill * 100);
  std::printf("%8s %10s %9s %12s %9s %9s %9s %7s\n", "nodes", "decisions", "placed", "decisions/s",
              "p50_us", "p99_us", "max_us", "evicted");
  for (size_t n : sizes) {
    Figures f = RunOne(*openb, n, fill, seed, gang);
    std::printf("%8zu %10zu %9zu %12.0f %9.1f %9.1f %9.1f %7zu\n", f.nodes, f.decisions, f.placed,
                f.per_second, f.p50_us, f.p99_us, f.max_us, f.preemptions);
    if (gang > 0) {
      std::printf("%8s %zu gangs of %d members (4 GPUs each): %zu placed; per gang decision "
                  "p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
                  "", f.gangs, gang, f.gangs_placed, f.gang_p50_ms, f.gang_p99_ms, f.gang_max_ms);
    }
    std::fflush(stdout);
  }
  return 0;
}
