// The simulator's queues: fair share, backfill, the per-queue report, and
// the generated teams workload (docs/QUEUES.md, "In the simulator").
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "core/job.h"
#include "sim/simulator.h"
#include "sim/teams.h"
#include "sim/yaml_workload.h"

namespace hf::sim {
namespace {

using ::testing::HasSubstr;

SimNode GpuNode(const std::string& name, int gpus) {
  SimNode n;
  n.spec.name = name;
  n.spec.cpu_milli = 64000;
  n.spec.memory_mib = 262144;
  for (int i = 0; i < gpus; ++i) {
    GpuDevice& g = n.spec.gpus.emplace_back();
    g.index = i;
    g.model = "A100-80G";
  }
  return n;
}

// A 1-GPU task of `queue` arriving at `at_s`, running `run_s` (its limit too
// when `limit` is set).
SimTask OneGpu(const std::string& name, const std::string& queue, int64_t at_s, int64_t run_s,
               bool limit = true) {
  SimTask t;
  t.task.name = name;
  t.task.queue = queue;
  t.task.requests.cpu_milli = 1000;
  t.task.requests.memory_mib = 1024;
  t.task.requests.gpu = 1;
  if (limit) t.task.time_limit_s = run_s;
  t.create_ms = at_s * 1000;
  t.run_ms = run_s * 1000;
  t.origin = "test:" + name;
  return t;
}

// A job of `members` x `gpus` arriving at `at_s`.
void AddJob(Workload& w, const std::string& name, int members, int gpus, int64_t at_s,
            int64_t run_s, uint64_t id, const std::string& queue = "default") {
  JobSpec spec;
  spec.name = name;
  spec.queue = queue;
  spec.time_limit_s = run_s;
  spec.pack = "none";
  JobRole& role = spec.roles.emplace_back();
  role.name = "worker";
  role.replicas = members;
  role.member.requests.cpu_milli = 1000;
  role.member.requests.memory_mib = 1024;
  role.member.requests.gpu = gpus;
  for (Task& t : spec.Members(id)) {
    SimTask& s = w.tasks.emplace_back();
    t.key = TaskKey(w.tasks.size() - 1);
    s.task = std::move(t);
    s.create_ms = at_s * 1000;
    s.job_run_ms = run_s * 1000;
    s.job_gang = framework::GangOptions::For(spec);
    s.origin = "test:" + name;
  }
}

// 8 GPUs; 1-GPU tasks that run their 600 s limit arrive every 60 s for
// `stream_s` seconds (more than the cluster can run); an 8-GPU job comes
// 30 s in.
Workload Starvation(int64_t stream_s) {
  Workload w;
  w.nodes_source = w.tasks_source = "test";
  w.nodes = {GpuNode("n1", 4), GpuNode("n2", 4)};
  for (int64_t at = 0; at < stream_s; at += 60) {
    for (int k = 0; k < 2; ++k) {
      w.tasks.push_back(
          OneGpu("s" + std::to_string(at) + "-" + std::to_string(k), "default", at, 600));
      w.tasks.back().task.key = TaskKey(w.tasks.size() - 1);
    }
  }
  AddJob(w, "large", 2, 4, 30, 1200, 1);
  return w;
}

SimReport Replay(const Workload& w, Queueing q, bool backfill) {
  SimOptions o;
  o.method = Method::kReplay;
  o.queueing = q;
  o.backfill = backfill;
  auto r = Simulate(w, o);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : SimReport{};
}

TEST(QueuesSimTest, WithoutBackfillTheLargeJobWaitsForTheStreamToEnd) {
  const Workload w = Starvation(7200);
  const SimReport off = Replay(w, Queueing::kFifo, false);
  ASSERT_EQ(off.largest_job.name, "large");
  ASSERT_TRUE(off.largest_job.start_s);
  // Two arrivals a minute against 8 GPUs of 10-minute tasks (0.8 a minute
  // each): every freed GPU goes to a waiting 1-GPU task until the stream's
  // backlog is gone, well after the last arrival.
  EXPECT_GT(*off.largest_job.start_s, 7200);
  EXPECT_FALSE(off.largest_job.first_reservation_s);
  EXPECT_EQ(off.reservations, 0u);
}

TEST(QueuesSimTest, WithBackfillTheLargeJobStartsByItsFirstReservation) {
  const Workload w = Starvation(7200);
  const SimReport on = Replay(w, Queueing::kFifo, true);
  ASSERT_TRUE(on.largest_job.start_s);
  ASSERT_TRUE(on.largest_job.first_reservation_s);
  // At 30 s the 8 GPUs run tasks that arrived at 0 s (limit 600 s): it
  // reserves them from 600 s, and nothing ending later may take them.
  EXPECT_EQ(*on.largest_job.first_reservation_s, 600);
  EXPECT_LE(*on.largest_job.start_s, *on.largest_job.first_reservation_s);
  EXPECT_GE(on.reservations, 1u);
  // What holding room costs: utilisation within 90% of the run without.
  const SimReport off = Replay(w, Queueing::kFifo, false);
  EXPECT_GE(on.gpu_alloc_ratio_time_avg, 0.9 * off.gpu_alloc_ratio_time_avg);
  // Nothing is placed twice at once: every placement's GPUs stayed within
  // capacity (the framework refuses otherwise), and every task ran.
  EXPECT_EQ(on.pods_failed, 0u);
}

TEST(QueuesSimTest, TasksWithoutTimeLimitsNeverBackfillOntoHeldRoom) {
  // The same stream without limits: no reservation can be computed (nothing
  // is known to end), so the large job waits as without backfill.
  Workload w = Starvation(3600);
  for (SimTask& t : w.tasks) {
    if (t.task.job.id == 0) t.task.time_limit_s = 0;
  }
  const SimReport on = Replay(w, Queueing::kFifo, true);
  ASSERT_TRUE(on.largest_job.start_s);
  EXPECT_FALSE(on.largest_job.first_reservation_s);
  EXPECT_GT(*on.largest_job.start_s, 3600);
}

// Three queues 1:2:1, each with more 1-GPU work than the cluster can run.
Workload ThreeTeams(int64_t hours) {
  Workload w;
  w.nodes_source = w.tasks_source = "test";
  for (int i = 0; i < 4; ++i) w.nodes.push_back(GpuNode("n" + std::to_string(i), 8));
  const std::pair<const char*, double> teams[] = {{"a", 1}, {"b", 2}, {"c", 1}};
  for (const auto& [name, weight] : teams) {
    queues::QueueSpec& q = w.queues.emplace_back();
    q.name = name;
    q.parent = queues::kRoot;
    q.weight = weight;
  }
  // Each team submits 32 tasks every 10 minutes (the cluster runs 32 of
  // 10 minutes each per 10 minutes): three times what can run.
  for (int64_t at = 0; at < hours * 3600; at += 600) {
    for (const auto& [name, weight] : teams) {
      for (int k = 0; k < 32; ++k) {
        w.tasks.push_back(
            OneGpu(std::string(name) + "-" + std::to_string(at) + "-" + std::to_string(k), name, at,
                   600 + 7 * k));
        w.tasks.back().task.key = TaskKey(w.tasks.size() - 1);
      }
    }
  }
  return w;
}

TEST(QueuesSimTest, FairShareGivesEachQueueItsWeight) {
  const Workload w = ThreeTeams(24);
  SimOptions o;
  o.method = Method::kReplay;
  o.horizon_ms = 24 * 3600 * 1000;
  o.queueing = Queueing::kFair;
  auto fair = Simulate(w, o);
  ASSERT_TRUE(fair.ok()) << fair.status().message();
  ASSERT_EQ(fair->queues.size(), 3u);
  for (const QueueStats& q : fair->queues) {
    EXPECT_NEAR(q.entitled, q.name == "b" ? 0.5 : 0.25, 1e-9) << q.name;
    EXPECT_NEAR(q.share / q.entitled, 1.0, 0.05) << q.name;
  }
  EXPECT_GE(fair->jain_index, 0.99);
  // FIFO ignores the weights: equal arrivals get about equal shares.
  o.queueing = Queueing::kFifo;
  auto fifo = Simulate(w, o);
  ASSERT_TRUE(fifo.ok());
  EXPECT_NEAR(fifo->queues[1].share, 1.0 / 3, 0.05);
  EXPECT_LT(fifo->jain_index, 0.95);
}

TEST(QueuesSimTest, GuaranteedQueueReclaimsWhatOthersBorrowed) {
  // b is guaranteed all 8 GPUs but idle at first; a borrows them, then b's
  // work takes them back by reclaim (a's tasks have no limit: they would
  // never end otherwise).
  Workload w;
  w.nodes_source = w.tasks_source = "test";
  w.nodes = {GpuNode("n1", 8)};
  queues::QueueSpec a, b;
  a.name = "a";
  b.name = "b";
  a.parent = b.parent = queues::kRoot;
  b.guaranteed.gpu_milli["A100-80G"] = 8000;
  w.queues = {a, b};
  for (int k = 0; k < 8; ++k) {
    w.tasks.push_back(OneGpu("a" + std::to_string(k), "a", 0, 100000, false));
    w.tasks.push_back(OneGpu("b" + std::to_string(k), "b", 60, 600));
  }
  for (size_t i = 0; i < w.tasks.size(); ++i) w.tasks[i].task.key = TaskKey(i);
  const SimReport fair = Replay(w, Queueing::kFair, true);
  EXPECT_EQ(fair.preemptions, 8u);
  ASSERT_EQ(fair.queues.size(), 2u);
  EXPECT_EQ(fair.queues[1].name, "b");
  EXPECT_EQ(fair.queues[1].wait_max_s, 0);  // placed the moment it came
  // FIFO knows no queues: b waits for a's tasks.
  const SimReport fifo = Replay(w, Queueing::kFifo, true);
  EXPECT_EQ(fifo.preemptions, 0u);
  EXPECT_GT(fifo.queues[1].wait_max_s, 90000);
}

TEST(QueuesSimTest, UnknownQueueIsRefusedNamingTheTask) {
  Workload w = ThreeTeams(1);
  w.tasks[5].task.queue = "nope";
  SimOptions o;
  o.method = Method::kReplay;
  auto r = Simulate(w, o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("queue nope is not in queues:"));
  EXPECT_THAT(r.status().message(), HasSubstr(w.tasks[5].task.name));
}

TEST(QueuesSimTest, GeneratedTeamsAreSeededAndStated) {
  TeamsOptions o;
  auto teams = ParseTeams("a:1,b:2:50,c:1");
  ASSERT_TRUE(teams.ok()) << teams.status().message();
  o.teams = *teams;
  o.nodes = 8;
  o.hours = 4;
  o.large_share = 0.05;
  auto w1 = GenerateTeams(o);
  auto w2 = GenerateTeams(o);
  ASSERT_TRUE(w1.ok() && w2.ok());
  ASSERT_EQ(w1->tasks.size(), w2->tasks.size());
  for (size_t i = 0; i < w1->tasks.size(); ++i) {
    EXPECT_EQ(w1->tasks[i].task.name, w2->tasks[i].task.name);
    EXPECT_EQ(w1->tasks[i].create_ms, w2->tasks[i].create_ms);
  }
  EXPECT_EQ(w1->nodes.size(), 8u);
  ASSERT_EQ(w1->queues.size(), 3u);
  EXPECT_EQ(w1->queues[1].weight, 2);
  size_t gang_members = 0, b = 0;
  for (const SimTask& t : w1->tasks) {
    EXPECT_LT(*t.create_ms, 4 * 3600 * 1000);
    EXPECT_FALSE(t.user.empty());
    if (t.task.job.id != 0) {
      ++gang_members;
      EXPECT_EQ(t.task.requests.gpu, 8);
      EXPECT_GE(t.task.job.world_size, 4);
      EXPECT_LE(t.task.job.world_size, 8);
      EXPECT_GT(t.task.time_limit_s * 1000, 0);
      EXPECT_LE(*t.job_run_ms, t.task.time_limit_s * 1000);
    } else {
      EXPECT_EQ(t.task.requests.gpu, 1);
      EXPECT_LE(*t.run_ms, t.task.time_limit_s * 1000);
      b += t.task.queue == "b";
    }
  }
  EXPECT_GT(gang_members, 0u);
  // b's stated 50 jobs an hour for 4 hours (Poisson): about 200.
  EXPECT_GT(b, 150u);
  EXPECT_LT(b, 250u);
  SimOptions so;
  so.method = Method::kReplay;
  so.horizon_ms = 4 * 3600 * 1000;
  auto r = Simulate(*w1, so);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->queues.size(), 3u);
  EXPECT_EQ(r->trace_span_ms, 4 * 3600 * 1000 - *w1->tasks.front().create_ms);
}

TEST(QueuesSimTest, TeamsAndClusterShapesAreChecked) {
  EXPECT_THAT(ParseTeams("a").status().message(), HasSubstr("want NAME:WEIGHT"));
  EXPECT_THAT(ParseTeams("a:0").status().message(), HasSubstr("weight"));
  EXPECT_THAT(ParseTeams("a:1,a:2").status().message(), HasSubstr("named twice"));
  EXPECT_THAT(ParseTeams("A B:1").status().message(), HasSubstr("name"));
  EXPECT_THAT(ParseTeams("a:1:-3").status().message(), HasSubstr("jobs per hour"));
  int32_t n = 0, g = 0;
  EXPECT_TRUE(ParseClusterShape("32x8", n, g).ok());
  EXPECT_EQ(n, 32);
  EXPECT_EQ(g, 8);
  EXPECT_FALSE(ParseClusterShape("32x", n, g).ok());
  EXPECT_FALSE(ParseClusterShape("0x8", n, g).ok());
  EXPECT_FALSE(ParseClusterShape("4x65", n, g).ok());
}

TEST(QueuesSimTest, YamlCarriesQueuesDurationsAndCopies) {
  auto w = ParseYamlWorkload(R"(
nodes:
  - {name: n1, cpu_milli: 8000, memory_mib: 8192, gpus: [{model: A100-80G}]}
queues:
  - {name: team-a, weight: 2, guaranteed: {gpu: {A100-80G: 1}}}
tasks:
  - {name: s, queue: team-a, user: alice, duration: 60, time_limit_s: 90, count: 3, every: 10,
     requests: {gpu: 1}}
jobs:
  - {name: j, queue: team-a, user: bob, duration: 30, count: 2, every: 100,
     roles: [{name: w, replicas: 1, requests: {gpu: 1}}]}
)",
                             "w.yaml");
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_EQ(w->queues.size(), 1u);
  EXPECT_EQ(w->queues[0].weight, 2);
  ASSERT_EQ(w->tasks.size(), 5u);
  EXPECT_EQ(w->tasks[2].task.name, "s-2");
  EXPECT_EQ(*w->tasks[2].create_ms, 20000);
  EXPECT_EQ(*w->tasks[2].run_ms, 60000);
  EXPECT_EQ(w->tasks[2].task.time_limit_s, 90);
  EXPECT_EQ(w->tasks[2].task.queue, "team-a");
  EXPECT_EQ(w->tasks[2].user, "alice");
  EXPECT_EQ(w->tasks[4].task.job.name, "j-1");
  EXPECT_EQ(w->tasks[4].task.job.id, 2u);
  EXPECT_EQ(*w->tasks[4].create_ms, 100000);
  EXPECT_EQ(w->tasks[4].user, "bob");
  EXPECT_EQ(w->tasks[4].task.queue, "team-a");

  const auto error = [](const std::string& text) {
    auto r = ParseYamlWorkload(text, "w.yaml");
    return r.ok() ? std::string() : r.status().message();
  };
  const std::string node = "nodes: [{name: n1, cpu_milli: 8000, memory_mib: 8192}]\n";
  EXPECT_THAT(error(node + "tasks: [{name: s, duration: 5, delete_time: 9}]"),
              HasSubstr("not both"));
  EXPECT_THAT(error(node + "tasks: [{name: s, every: 5}]"), HasSubstr("every needs count"));
  EXPECT_THAT(error(node + "tasks: [{name: s, count: 0}]"), HasSubstr("count"));
  EXPECT_THAT(error(node + "tasks: [{name: s, duration: 0}]"), HasSubstr("duration must be > 0"));
  EXPECT_THAT(error(node + "queues: [{name: a, parent: b}]"), HasSubstr("b"));
  EXPECT_THAT(error(node + "queues: [{name: a, weight: -1}]"), HasSubstr("weight"));
}

}  // namespace
}  // namespace hf::sim
