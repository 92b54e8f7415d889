// A generated multi-team workload (`heteroflow simulate --generate teams`):
// a cluster of identical GPU nodes shared by teams, each a queue with a
// weight, submitting for a stated time a stated mix of work:
//
//   - many 1-GPU jobs: runs uniform in [10, 120] minutes, each with a time
//     limit of 1.5 x its run rounded up to 10 minutes (users ask for more
//     than they use, as they do under Slurm);
//   - a few gangs of 32 to 64 GPUs (4 to 8 members of 8 GPUs, uniform), a
//     share `large_share` of the jobs: runs uniform in [1, 4] hours, limit
//     1.25 x the run rounded up to 10 minutes.
//
// Arrivals are Poisson per team at `jobs_per_hour` (default: each team asks
// for the whole cluster's GPU time, so that every team always has work
// waiting beyond its share: demand without limit). Each job is submitted by one of the team's users
// (NAME-u1 .. NAME-uK, uniform). One std::mt19937_64 seeded with `seed`
// draws everything, with the simulator's own samplers.
#ifndef HF_SIM_TEAMS_H_
#define HF_SIM_TEAMS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "sim/workload.h"

namespace hf::sim {

struct Team {
  std::string name;
  double weight = 1;
  std::optional<double> jobs_per_hour;  // absent: the default (see above)
};

struct TeamsOptions {
  std::vector<Team> teams;
  int32_t nodes = 32;
  int32_t gpus_per_node = 8;
  double hours = 24;  // arrivals stop then
  double large_share = 0.005;
  int32_t users_per_team = 4;
  uint64_t seed = 42;
};

// "a:1,b:2,c:1" or "a:1:200,...": NAME:WEIGHT[:JOBS_PER_HOUR]. Names are
// queue names; weights in (0, 1e6]; rates > 0. InvalidArgument naming the
// entry otherwise.
Result<std::vector<Team>> ParseTeams(const std::string& text);

// "32x8": nodes x GPUs per node (1..100000 x 1..64).
Status ParseClusterShape(const std::string& text, int32_t& nodes, int32_t& gpus_per_node);

// The workload: nodes gpu-1 .. gpu-N (A100-80G, 96 CPUs, 768 GiB each),
// one queue per team, the jobs in arrival order.
Result<Workload> GenerateTeams(const TeamsOptions& options);

}  // namespace hf::sim

#endif  // HF_SIM_TEAMS_H_
