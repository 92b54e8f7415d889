#include "core/job.h"

#include <gtest/gtest.h>

namespace hf {
namespace {

using nlohmann::json;

json Role(const char* name, int replicas, int gpu = 1) {
  return {{"name", name},
          {"replicas", replicas},
          {"command", {"python3", "train.py"}},
          {"requests", {{"gpu", gpu}, {"cpu_milli", 1000}}}};
}

TEST(JobSpecTest, MembersGetRanksInRoleOrderAndTheJobsFields) {
  Result<JobSpec> s = JobSpecFromJson({{"name", "llama"},
                                       {"priority", 7},
                                       {"time_limit_s", 3600},
                                       {"roles", {Role("launcher", 1, 0), Role("worker", 3)}}});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->replicas(), 4);
  EXPECT_EQ(s->gang_size(), 4);  // all, by default
  const std::vector<Task> m = s->Members(12);
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0].name, "llama-launcher-0");
  EXPECT_EQ(m[3].name, "llama-worker-2");
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(m[i].job.rank, i);
    EXPECT_EQ(m[i].job.id, 12u);
    EXPECT_EQ(m[i].job.world_size, 4);
    EXPECT_EQ(m[i].group, "llama.12");
    EXPECT_EQ(m[i].priority, 7);
    EXPECT_EQ(m[i].time_limit_s, 3600);
  }
  EXPECT_EQ(m[0].job.role, "launcher");
  EXPECT_EQ(m[0].requests.gpu, 0);
  EXPECT_EQ(m[1].job.role, "worker");
  EXPECT_EQ(m[1].requests.gpu, 1);
}

TEST(JobSpecTest, RoundTripsThroughJson) {
  Result<JobSpec> s = JobSpecFromJson(
      {{"name", "j"},
       {"queue", "team-a"},
       {"roles", {Role("w", 4)}},
       {"min_available", 2},
       {"restart", {{"max_restarts", 3}, {"on_member_failure", "restart_job"}}},
       {"placement", {{"pack", "switch"}, {"gpu_model", "any"}}}});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_FALSE(s->one_gpu_model);
  const json once = JobSpecToJson(*s);
  Result<JobSpec> back = JobSpecFromJson(once);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(JobSpecToJson(*back), once);
  EXPECT_EQ(back->gang_size(), 2);
  EXPECT_EQ(back->max_restarts, 3);
  EXPECT_EQ(back->on_member_failure, OnMemberFailure::kRestartJob);
  EXPECT_EQ(back->pack, "switch");
  EXPECT_FALSE(back->one_gpu_model);
  EXPECT_TRUE(JobSpecFromJson({{"name", "j"}, {"roles", {Role("w", 1)}}})->one_gpu_model);
  EXPECT_EQ(back->queue, "team-a");
}

TEST(JobSpecTest, BadSpecsNameTheField) {
  const json ok = {Role("w", 2)};
  struct Row {
    json body;
    const char* want;
  } rows[] = {
      {{{"roles", ok}}, "name is required"},
      {{{"name", "j"}}, "roles is required"},
      {{{"name", "j"}, {"roles", json::array()}}, "roles must not be empty"},
      {{{"name", "j"}, {"roles", {Role("w", 0)}}}, "roles[0].replicas must be >= 1"},
      {{{"name", "j"}, {"roles", {Role("w", 1), Role("w", 1)}}}, "roles[1].name \"w\" is given twice"},
      {{{"name", "j"}, {"roles", ok}, {"min_available", 3}}, "min_available (3) is more than"},
      {{{"name", "j"}, {"roles", ok}, {"min_available", 0}}, "min_available must be >= 1"},
      {{{"name", "j"}, {"roles", {Role("w", 1025)}}}, "roles[0].replicas must be <= 1024"},
      {{{"name", "j"}, {"roles", {Role("a", 600), Role("b", 600)}}}, "at most 1024 per job"},
      {{{"name", "j"}, {"roles", ok}, {"placement", {{"pack", "zone"}}}}, "placement.pack"},
      {{{"name", "j"}, {"roles", ok}, {"placement", {{"gpu_model", 2}}}}, "placement.gpu_model"},
      {{{"name", "j"}, {"roles", ok}, {"restart", {{"max_restarts", -1}}}},
       "restart.max_restarts must be >= 0"},
      {{{"name", "j"}, {"roles", ok}, {"time_limit_s", 0}}, "time_limit_s must be >= 1"},
      {{{"name", "j"}, {"roles", {{{"name", "w"}, {"group", "g"}}}}}, "roles[0].group is the job's"},
      {{{"name", "j"}, {"roles", {{{"name", "w"}, {"requests", {{"gpu", "x"}}}}}}},
       "roles[0].requests.gpu"},
      {{{"name", "j"}, {"roles", ok}, {"extra", 1}}, "extra"},
  };
  for (const Row& r : rows) {
    Result<JobSpec> s = JobSpecFromJson(r.body);
    ASSERT_FALSE(s.ok()) << r.body.dump();
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << r.body.dump();
    EXPECT_NE(s.status().message().find(r.want), std::string::npos)
        << r.body.dump() << " -> " << s.status().message();
  }
}

TEST(JobSpecTest, StatesHaveNames) {
  for (JobState s : {JobState::kPending, JobState::kStarting, JobState::kRunning,
                     JobState::kRestarting, JobState::kSucceeded, JobState::kFailed,
                     JobState::kCancelled, JobState::kTimedOut}) {
    EXPECT_EQ(ParseJobState(JobStateName(s)), s);
  }
  EXPECT_EQ(ParseJobState("done"), std::nullopt);
  EXPECT_TRUE(IsFinal(JobState::kTimedOut));
  EXPECT_FALSE(IsFinal(JobState::kRestarting));
}

}  // namespace
}  // namespace hf
