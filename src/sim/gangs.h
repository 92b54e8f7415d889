// Synthetic jobs for a trace without them (`heteroflow simulate --gangs`):
// a share of the trace's pods become members of multi-member jobs, so that
// the replay shows what gangs change (docs/JOBS.md, "In the simulator").
#ifndef HF_SIM_GANGS_H_
#define HF_SIM_GANGS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "sim/workload.h"

namespace hf::sim {

// Job sizes and their weights, e.g. {{2, 0.5}, {4, 0.3}, {8, 0.2}}.
using GangSizes = std::vector<std::pair<int32_t, double>>;

// The default: half the jobs of 2 members, 30% of 4, 20% of 8.
GangSizes DefaultGangSizes();

// "2:0.5,4:0.3,8:0.2": sizes 2..1024, weights > 0. InvalidArgument naming
// the entry otherwise.
Result<GangSizes> ParseGangSizes(const std::string& text);

// Walks the tasks in arrival order (create time, then key); at each task not
// yet in a job, starts a job with a probability chosen so that about `share`
// of the tasks end up in jobs. A job of size k (drawn from `sizes`) takes
// that task and the next k - 1 free tasks in arrival order: they keep their
// requests and arrival times (the members arrive as the trace's pods did),
// lose their delete times, and get the first member's priority. The job
// runs, once its whole gang runs, for as long as its first member's pod
// lived (for ever if that pod never left). Members keep their own GPU model
// constraints, so the jobs allow several models (placement.gpu_model any).
// Jobs are named "gang-N" (N from 1) and never take more tasks than are
// left. One std::mt19937_64 seeded with `seed` draws everything.
// InvalidArgument when share is outside [0, 1] or a task has no create time
// or is already a job's member.
Status MakeGangs(Workload& w, double share, const GangSizes& sizes, uint64_t seed);

}  // namespace hf::sim

#endif  // HF_SIM_GANGS_H_
