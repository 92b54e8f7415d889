// Scheduling-core benchmark: decisions per second and decision latency on
// clusters of 1k, 5k and 10k nodes built from the Alibaba openb node shapes,
// with binpack (or, with --score fragment, the fragment plugin instead),
// preempt (running), rdma, topology and the always-on filters enabled. Run on
// purpose (bench/run.sh), not by ctest.
//
// Cluster: the openb GPU node list repeated until the size is reached; 8-GPU
// nodes get two RDMA NICs (one per PCIe switch); every node gets a position
// (32 nodes a rack, 8 racks a switch, 8 switches a zone); every 10th node
// reports measured usage every 256 decisions (derived from its allocations,
// as an agent's heartbeat would), so the threshold filter does real work.
// --percentage N sets scheduler.percentage_of_nodes_to_score (default 0:
// adaptive, so 10k nodes are sampled; 100: every node, every task).
// Workload: openb default pods sampled with replacement (seeded) until the
// requested GPUs reach --fill x cluster GPU capacity; multi-GPU pods form
// RDMA groups of two; every 10th pod depends on an earlier pod.
//
// --queues N (docs/QUEUES.md): the decisions go through a SchedulingQueue
// holding --pending tasks (at least those decided), as the scheduler's loop
// does: once with one queue (the pop and the decision), then spread over N
// leaf queues (weights 1-4), without guarantees and then each guaranteed 2
// GPUs of every model, where each decision also computes the ledger, picks
// the queue by fair share, admits the task and scopes its evictions. The
// three lines print, with the time the queues' part adds per decision.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/cluster_state.h"
#include "framework/framework.h"
#include "framework/queue.h"
#include "queues/gate.h"
#include "queues/ledger.h"
#include "queues/queue_tree.h"
#include "sim/openb_reader.h"

namespace {

// --score: the scoring plugin, binpack (default) or fragment (with binpack off).
std::string g_score = "binpack";

struct Figures {
  size_t nodes = 0, decisions = 0, placed = 0, preemptions = 0;
  size_t refused = 0;  // --queues: refused by admission
  // --queues: microseconds in the framework's decisions, and around them in
  // the queues' part (pop by fair share, ledger, admission, eviction scope).
  double framework_us = 0, queues_us = 0;
  double per_second = 0, p50_us = 0, p99_us = 0, p999_us = 0, max_us = 0;
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

// The queue tree of --queues: n leaves under root, or root and default alone.
hf::queues::QueueTree Tree(int n, bool guarantees) {
  if (n <= 1) return hf::queues::QueueTree();
  std::vector<hf::queues::QueueSpec> specs;
  for (int i = 0; i < n; ++i) {
    hf::queues::QueueSpec& q = specs.emplace_back();
    q.name = "q-" + std::to_string(i);
    q.parent = hf::queues::kRoot;
    q.weight = 1 + i % 4;
    if (guarantees) q.guaranteed.gpu_milli[hf::queues::kEveryOtherModel] = 2000;
    q.max.gpu_milli[hf::queues::kEveryOtherModel] = 100000 * 1000;
  }
  auto tree = hf::queues::QueueTree::Build(std::move(specs));
  HF_CHECK(tree.ok());
  return std::move(*tree);
}

// --percentage: scheduler.percentage_of_nodes_to_score (0: the default,
// adaptive; 100: every node examined for every task).
int percentage_of_nodes_to_score = 0;

Figures RunOne(const hf::sim::Workload& openb, size_t node_count, double fill, uint64_t seed,
               int gang, int queue_count = 0, size_t pending = 0, bool guarantees = true) {
  using hf::NodeId;
  hf::ClusterState cluster;
  int64_t gpu_capacity = 0;
  for (size_t i = 0; i < node_count; ++i) {
    hf::NodeSpec spec = openb.nodes[i % openb.nodes.size()].spec;
    spec.name = "node-" + std::to_string(i);
    for (size_t g = 0; g < spec.gpus.size(); ++g) {
      spec.gpus[g].numa = spec.gpus[g].pcie_switch = spec.gpus[g].fabric_domain = int32_t(g / 4);
    }
    if (spec.gpus.size() == 8) spec.rdma = {{"mlx5_0", 0, 0}, {"mlx5_1", 1, 1}};
    spec.topology = {"zone-" + std::to_string(i / 2048), "switch-" + std::to_string(i / 256),
                     "rack-" + std::to_string(i / 32)};
    gpu_capacity += int64_t(spec.gpus.size()) * 1000;
    const NodeId id = *cluster.AddNode(spec);
    (void)id;
  }

  hf::framework::Policy policy;
  policy.plugins["binpack"] = {{"enabled", g_score == "binpack"}};
  if (g_score == "fragment") policy.plugins["fragment"] = {{"enabled", true}};
  policy.plugins["preempt"] = {{"enabled", true}, {"mode", "running"}, {"min_runtime_seconds", 0}};
  policy.plugins["rdma"] = {{"enabled", true}};
  policy.plugins["topology"] = {{"enabled", true}};
  policy.scheduler.percentage_of_nodes_to_score = percentage_of_nodes_to_score;
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
  size_t decided = 0;  // tasks to decide: those up to the fill
  while (demand < int64_t(fill * double(gpu_capacity)) || tasks.size() < pending) {
    if (demand < int64_t(fill * double(gpu_capacity))) decided = tasks.size() + 1;
    hf::Task t = openb.tasks[pick(rng)].task;
    t.key = tasks.size();
    t.name = "pod-" + std::to_string(t.key);
    if (t.requests.gpu > 1) {
      t.group = "job-" + std::to_string(groups++ / 2);
      t.rdma_required = true;
    }
    if (t.key % 10 == 9) t.depends_on = {"pod-" + std::to_string(t.key / 2)};
    if (queue_count > 1) t.queue = "q-" + std::to_string(t.key % size_t(queue_count));
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
  // One decision's latency and outcome.
  const auto record = [&](std::chrono::steady_clock::time_point start,
                          const hf::framework::Decision& d) {
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    lat_us.push_back(us);
    total_us += us;
    f.placed += d.scheduled;
    f.preemptions += d.victims.size();
  };
  if (queue_count == 0) {
    for (const hf::Task& t : tasks) {
      clock.Advance(1000);
      if (t.key % 256 == 0) {
        for (NodeId id = 0; id < cluster.node_count(); id += 10) report(id);
      }
      const auto start = std::chrono::steady_clock::now();
      hf::framework::Decision d = (*fw)->Schedule(t, cluster, opts);
      record(start, d);
    }
    f.decisions = tasks.size();
  } else {
    // As the scheduler's loop: pop by fair share, admit, decide.
    const hf::queues::QueueTree tree = Tree(queue_count, guarantees);
    hf::queues::Ledger ledger;
    hf::framework::SchedulingQueue waiting;
    for (const hf::Task& t : tasks) waiting.Add(t.key, t.priority, "", t.queue);
    std::vector<size_t> candidates;
    uint64_t candidates_version = UINT64_MAX;
    for (size_t n = 0; n < decided; ++n) {
      clock.Advance(1000);
      if (n % 256 == 0) {
        for (NodeId id = 0; id < cluster.node_count(); id += 10) report(id);
      }
      const auto start = std::chrono::steady_clock::now();
      std::optional<hf::TaskKey> key;
      if (tree.trivial()) {
        key = waiting.Pop();
      } else {
        // As Scheduler::PopNextLocked.
        ledger.Compute(tree, cluster);
        if (candidates_version != waiting.active_queues_version()) {
          candidates.clear();
          for (const std::string_view name : waiting.ActiveQueues()) {
            candidates.push_back(tree.Find(name));
          }
          candidates_version = waiting.active_queues_version();
        }
        key = waiting.Pop(tree.spec(ledger.PickFair(candidates)).name);
      }
      HF_CHECK(key.has_value());
      const hf::Task& t = tasks[*key];
      hf::framework::Decision d;
      const auto us_since = [](std::chrono::steady_clock::time_point t0) {
        return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
            .count();
      };
      if (tree.trivial()) {
        f.queues_us += us_since(start);
        const auto decide = std::chrono::steady_clock::now();
        d = (*fw)->Schedule(t, cluster, opts);
        f.framework_us += us_since(decide);
      } else {
        hf::queues::Demand demand;
        demand.Add(t.requests);
        const hf::queues::Gate gate = hf::queues::Admit(tree, ledger, cluster, t.queue, demand, {&t});
        if (gate.admitted) {
          const auto scope = hf::queues::Scope(tree, ledger, cluster, gate);
          hf::framework::ScheduleOptions o = opts;
          o.eviction = scope.get();
          hf::Task narrowed;
          if (gate.narrowed) narrowed = hf::queues::Narrowed(cluster, t, gate);
          f.queues_us += us_since(start);
          const auto decide = std::chrono::steady_clock::now();
          d = (*fw)->Schedule(gate.narrowed ? narrowed : t, cluster, o);
          f.framework_us += us_since(decide);
        } else {
          f.queues_us += us_since(start);
          ++f.refused;
        }
      }
      if (d.scheduled) {
        waiting.Remove(*key);
      } else {
        waiting.SetUnschedulable(*key, d.reason);
      }
      record(start, d);
    }
    f.decisions = decided;
  }
  f.per_second = double(f.decisions) / (total_us / 1e6);
  f.p50_us = Percentile(lat_us, 0.50);
  f.p99_us = Percentile(lat_us, 0.99);
  f.p999_us = Percentile(lat_us, 0.999);
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
  int gang = 0, queue_count = 0;
  size_t pending = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--trace-dir") trace = argv[i + 1];
    else if (flag == "--nodes") sizes = {size_t(std::strtoull(argv[i + 1], nullptr, 10))};
    else if (flag == "--fill") fill = std::atof(argv[i + 1]);
    else if (flag == "--seed") seed = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--gang") gang = std::atoi(argv[i + 1]);
    else if (flag == "--queues") queue_count = std::atoi(argv[i + 1]);
    else if (flag == "--percentage") percentage_of_nodes_to_score = std::atoi(argv[i + 1]);
    else if (flag == "--pending") pending = size_t(std::strtoull(argv[i + 1], nullptr, 10));
    else if (flag == "--score") g_score = argv[i + 1];
    else {
      std::fprintf(stderr,
                   "usage: hf_bench [--trace-dir DIR] [--fill X] [--seed N] [--nodes N] [--gang N]\n"
                   "                [--queues N [--pending P]] [--percentage 0-100]\n"
                   "                [--score binpack|fragment]\n");
      return 2;
    }
  }
  auto openb = hf::sim::LoadOpenbWorkload(trace + "/openb_node_list_gpu_node.csv",
                                          trace + "/openb_pod_list_default.csv");
  if (!openb.ok()) {
    std::fprintf(stderr, "hf_bench: %s\n", openb.status().message().c_str());
    return 2;
  }
  std::printf("scheduling core: %s + preempt(running) + rdma + topology + fit + load_threshold,\n"
              "percentage_of_nodes_to_score %d (%s); GPU demand up to %.0f%% of capacity\n\n",
              g_score.c_str(), percentage_of_nodes_to_score,
              percentage_of_nodes_to_score == 0     ? "adaptive: every node up to 5,000 nodes, then 5%"
              : percentage_of_nodes_to_score >= 100 ? "every node examined for every task"
                                                    : "sampled",
              fill * 100);
  std::printf("%8s %10s %9s %12s %9s %9s %9s %9s %7s\n", "nodes", "decisions", "placed",
              "decisions/s", "p50_us", "p99_us", "p99.9_us", "max_us", "evicted");
  if (queue_count > 0) {
    std::printf("through a SchedulingQueue of %zu tasks or more: 1 queue, then %d queues with fair "
                "share and admission\n",
                pending, queue_count);
    for (size_t n : sizes) {
      const Figures one = RunOne(*openb, n, fill, seed, 0, 1, pending);
      const Figures weights = RunOne(*openb, n, fill, seed, 0, queue_count, pending, false);
      const Figures many = RunOne(*openb, n, fill, seed, 0, queue_count, pending, true);
      const char* names[] = {"1 queue", "queues, weights only", "queues, weights and guarantees"};
      const Figures* runs[] = {&one, &weights, &many};
      for (int k = 0; k < 3; ++k) {
        const Figures* f = runs[k];
        std::printf("%8zu %10zu %9zu %12.0f %9.1f %9.1f %9.1f %9.1f %7zu  %s (%zu refused)\n",
                    f->nodes, f->decisions, f->placed, f->per_second, f->p50_us, f->p99_us,
                    f->p999_us, f->max_us, f->preemptions, names[k], f->refused);
      }
      std::printf("%8s per decision, 1 queue: %.2f us popping, %.2f us in the framework\n", "",
                  one.queues_us / double(one.decisions), one.framework_us / double(one.decisions));
      for (int k = 1; k < 3; ++k) {
        const Figures* f = runs[k];
        std::printf("%8s per decision, %s: %.2f us in fair share and admission (%.1f%% of the "
                    "1-queue decision), %.2f us in the framework\n",
                    "", names[k], f->queues_us / double(f->decisions),
                    100.0 * (f->queues_us / double(f->decisions)) /
                        (one.framework_us / double(one.decisions)),
                    f->framework_us / double(f->decisions));
        std::printf("%8s mean decision time, all included, %s: %+.1f%%\n", "", names[k],
                    100.0 * (one.per_second / f->per_second - 1.0));
      }
      std::fflush(stdout);
    }
    return 0;
  }
  for (size_t n : sizes) {
    Figures f = RunOne(*openb, n, fill, seed, gang);
    std::printf("%8zu %10zu %9zu %12.0f %9.1f %9.1f %9.1f %9.1f %7zu\n", f.nodes, f.decisions,
                f.placed, f.per_second, f.p50_us, f.p99_us, f.p999_us, f.max_us, f.preemptions);
    if (gang > 0) {
      std::printf("%8s %zu gangs of %d members (4 GPUs each): %zu placed; per gang decision "
                  "p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
                  "", f.gangs, gang, f.gangs_placed, f.gang_p50_ms, f.gang_p99_ms, f.gang_max_ms);
    }
    std::fflush(stdout);
  }
  return 0;
}
