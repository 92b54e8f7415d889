#include "sim/gangs.h"

#include <gtest/gtest.h>

#include <map>

namespace hf::sim {
namespace {

// `n` tasks arriving one a second (in reverse key order, so that arrival
// order is not key order), each living 100 s, priorities by key.
Workload Trace(int n) {
  Workload w;
  for (int i = 0; i < n; ++i) {
    SimTask t;
    t.task.key = TaskKey(i);
    t.task.name = "p" + std::to_string(i);
    t.task.priority = i % 3;
    t.create_ms = int64_t(n - i) * 1000;
    t.delete_ms = *t.create_ms + 100'000 + i;
    t.origin = "pods.csv:" + std::to_string(i + 2);
    w.tasks.push_back(t);
  }
  return w;
}

TEST(GangsTest, AShareOfTheTasksBecomesJobsOfConsecutiveArrivals) {
  Workload w = Trace(4000);
  ASSERT_TRUE(MakeGangs(w, 0.3, DefaultGangSizes(), 42).ok());
  std::map<uint64_t, std::vector<const SimTask*>> jobs;
  size_t in_jobs = 0;
  for (const SimTask& t : w.tasks) {
    if (t.task.job.id == 0) {
      EXPECT_TRUE(t.delete_ms.has_value());
      continue;
    }
    ++in_jobs;
    jobs[t.task.job.id].push_back(&t);
  }
  // About the share asked for (binomial noise over ~1,000 starts).
  EXPECT_NEAR(double(in_jobs) / double(w.tasks.size()), 0.3, 0.03);
  std::map<int32_t, int> sizes;
  for (auto& [id, members] : jobs) {
    const int32_t world = int32_t(members.size());
    ++sizes[world];
    std::sort(members.begin(), members.end(), [](const SimTask* a, const SimTask* b) {
      return a->task.job.rank < b->task.job.rank;
    });
    const SimTask& first = *members.front();
    for (int32_t r = 0; r < world; ++r) {
      const SimTask& m = *members[size_t(r)];
      EXPECT_EQ(m.task.job.rank, r);
      EXPECT_EQ(m.task.job.world_size, world);
      EXPECT_EQ(m.task.job.min_available, world);
      EXPECT_EQ(m.task.job.name, "gang-" + std::to_string(id));
      EXPECT_EQ(m.task.group, m.task.job.name);
      EXPECT_EQ(m.task.priority, first.task.priority);
      EXPECT_FALSE(m.delete_ms.has_value());
      EXPECT_EQ(m.job_run_ms, 100'000 + int64_t(first.task.key));
      EXPECT_FALSE(m.job_gang.one_gpu_model);
      // Ranks in arrival order.
      if (r > 0) EXPECT_GT(*m.create_ms, *members[size_t(r - 1)]->create_ms);
    }
  }
  // Every size of the distribution occurs, the commonest the most.
  EXPECT_GT(sizes[2], sizes[4]);
  EXPECT_GT(sizes[4], sizes[8]);
  EXPECT_GT(sizes[8], 0);
  // The same seed draws the same jobs.
  Workload again = Trace(4000);
  ASSERT_TRUE(MakeGangs(again, 0.3, DefaultGangSizes(), 42).ok());
  for (size_t i = 0; i < w.tasks.size(); ++i)
    EXPECT_EQ(again.tasks[i].task.job, w.tasks[i].task.job);
}

TEST(GangsTest, NoShareChangesNothingAndBadInputIsRefused) {
  Workload w = Trace(10);
  ASSERT_TRUE(MakeGangs(w, 0, DefaultGangSizes(), 1).ok());
  for (const SimTask& t : w.tasks) EXPECT_EQ(t.task.job.id, 0u);
  EXPECT_FALSE(MakeGangs(w, 1.5, DefaultGangSizes(), 1).ok());
  EXPECT_FALSE(MakeGangs(w, -0.1, DefaultGangSizes(), 1).ok());
  Workload untimed = Trace(3);
  untimed.tasks[1].create_ms.reset();
  Status s = MakeGangs(untimed, 0.5, DefaultGangSizes(), 1);
  EXPECT_NE(s.message().find("pods.csv:3"), std::string::npos) << s.message();
  // Everything in jobs: a share of 1 leaves no task alone but perhaps the last.
  Workload all = Trace(100);
  ASSERT_TRUE(MakeGangs(all, 1, {{4, 1}}, 7).ok());
  size_t alone = 0;
  for (const SimTask& t : all.tasks) alone += t.task.job.id == 0;
  EXPECT_EQ(alone, 0u);
}

TEST(GangsTest, SizesParseStrictly) {
  Result<GangSizes> ok = ParseGangSizes("2:0.5,16:1");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(*ok, (GangSizes{{2, 0.5}, {16, 1.0}}));
  for (const char* bad : {"", "2", "2:", "x:1", "1:1", "2:0", "2:-1", "2:1,", "2:1x", "4096:1"}) {
    EXPECT_FALSE(ParseGangSizes(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace hf::sim
