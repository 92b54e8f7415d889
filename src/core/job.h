// Jobs (docs/JOBS.md): a distributed training run as one resource. A job has
// roles (e.g. one "launcher", eight "worker"), each with a number of
// replicas; every replica becomes one task, a member, with the job's name,
// its role and its rank. The members are placed as a gang: `min_available`
// of them (all by default) in one decision, or none.
#ifndef HF_CORE_JOB_H_
#define HF_CORE_JOB_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/status.h"

namespace hf {

// pending: no member placed yet (the gang waits); starting: the gang is
// placed and its members are starting; running: every member runs;
// restarting: a member failed and the job is placed again (restart_job);
// then one of the ends: succeeded (every member exited 0), failed,
// cancelled, timed_out.
enum class JobState : uint8_t {
  kPending,
  kStarting,
  kRunning,
  kRestarting,
  kSucceeded,
  kFailed,
  kCancelled,
  kTimedOut
};
const char* JobStateName(JobState s);
std::optional<JobState> ParseJobState(const std::string& s);
inline bool IsFinal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled ||
         s == JobState::kTimedOut;
}

// What happens when a member exits non-zero or its node is lost.
enum class OnMemberFailure : uint8_t {
  kFailJob,     // the job ends failed; every other member is stopped
  kRestartJob,  // every member is stopped and the gang placed again, up to max_restarts
};

struct JobRole {
  std::string name;
  int32_t replicas = 1;
  // Every task field but name, group and priority (the job's): requests,
  // command, env, secret_env, preemptible, rdma_required, ...
  Task member;
};

struct JobSpec {
  std::string name;
  std::string queue = kDefaultQueue;  // docs/QUEUES.md
  int32_t priority = 0;
  std::vector<JobRole> roles;
  int32_t min_available = 0;  // members placed together; 0 reads as every replica
  int64_t time_limit_s = 0;   // 0: none
  int32_t max_restarts = 0;
  OnMemberFailure on_member_failure = OnMemberFailure::kFailJob;
  // placement.pack: how close the members sit. "rack" (the default), "switch" and "node" ask the
  // topology plugin to pack the job's group; "none" leaves members where the
  // policy puts them.
  std::string pack = "rack";
  // placement.gpu_model: "same" (the default) puts every member's GPUs on
  // one model; "any" lets members use different models.
  bool one_gpu_model = true;

  int32_t replicas() const;
  int32_t gang_size() const { return min_available > 0 ? min_available : replicas(); }
  // The members as tasks (key 0; the store assigns them), in rank order:
  // the roles in order, each role's replicas in order. `id`: the job's id.
  std::vector<Task> Members(uint64_t id) const;
};

// The body of POST /api/v1/jobs (docs/JOBS.md), strictly: unknown fields,
// wrong types and out-of-range values are InvalidArgument naming the field,
// e.g. "roles[1].replicas must be >= 1", "min_available (9) is more than the
// job's 8 replicas", "roles[2].name \"worker\" is given twice".
Result<JobSpec> JobSpecFromJson(const nlohmann::json& j);
// Every field, defaults included: JobSpecFromJson(JobSpecToJson(s)) == s.
// It holds the members' secret_env values: for the store only.
nlohmann::json JobSpecToJson(const JobSpec& s);
// JobSpecToJson for everyone else: secret_env as the list of its names.
nlohmann::json JobSpecViewJson(const JobSpec& s);

inline constexpr size_t kMaxJobRoles = 16;

}  // namespace hf

#endif  // HF_CORE_JOB_H_
