#include "sim/gangs.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "core/text.h"
#include "sim/random.h"

namespace hf::sim {
namespace {

constexpr int32_t kMaxGangSize = 1024;
// How long a job whose first pod never left runs: longer than any trace.
constexpr int64_t kForeverMs = int64_t{1} << 50;

}  // namespace

GangSizes DefaultGangSizes() { return {{2, 0.5}, {4, 0.3}, {8, 0.2}}; }

Result<GangSizes> ParseGangSizes(const std::string& text) {
  GangSizes out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string entry = text.substr(start, comma - start);
    const size_t colon = entry.find(':');
    const auto bad = [&](const std::string& why) {
      return InvalidArgument("--gang-sizes entry \"" + entry + "\": " + why);
    };
    if (colon == std::string::npos) return bad("want SIZE:WEIGHT, e.g. 4:0.3");
    int64_t size = 0;
    double weight = 0;
    try {
      size_t used = 0;
      size = std::stoll(entry.substr(0, colon), &used);
      if (used != colon) return bad("the size is not an integer");
      const std::string w = entry.substr(colon + 1);
      weight = std::stod(w, &used);
      if (used != w.size()) return bad("the weight is not a number");
    } catch (const std::exception&) {
      return bad("want SIZE:WEIGHT, e.g. 4:0.3");
    }
    if (size < 2 || size > kMaxGangSize) return bad("the size must be in 2..1024");
    if (!std::isfinite(weight) || weight <= 0) return bad("the weight must be > 0");
    out.emplace_back(int32_t(size), weight);
    start = comma + 1;
  }
  return out;
}

Status MakeGangs(Workload& w, double share, const GangSizes& sizes, uint64_t seed) {
  if (!(share >= 0 && share <= 1)) {
    return InvalidArgument("--gangs must be a share of the tasks in [0, 1], got " +
                           FormatNumber(share));
  }
  if (sizes.empty()) return InvalidArgument("--gang-sizes is empty");
  std::vector<uint32_t> order(w.tasks.size());
  std::iota(order.begin(), order.end(), 0u);
  for (const SimTask& t : w.tasks) {
    if (!t.create_ms) {
      return InvalidArgument(t.origin + ": task " + t.task.name +
                             " has no create time; --gangs needs arrival times");
    }
    if (t.task.job.id != 0) {
      return InvalidArgument(t.origin + ": task " + t.task.name + " is already a job's member");
    }
  }
  if (share == 0) return Status::Ok();
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return *w.tasks[a].create_ms < *w.tasks[b].create_ms;
  });
  double total_weight = 0, mean = 0;
  for (const auto& [k, weight] : sizes) total_weight += weight;
  for (const auto& [k, weight] : sizes) mean += k * weight / total_weight;
  // A task starts a job with probability p: of the tasks walked, p * mean
  // land in jobs for every 1 - p left alone, so share = p * mean / (1 - p +
  // p * mean).
  const double p = share / (mean - share * (mean - 1));
  std::mt19937_64 rng(seed);
  std::vector<bool> taken(w.tasks.size(), false);
  uint64_t next_id = 1;
  for (size_t at = 0; at < order.size(); ++at) {
    if (taken[order[at]]) continue;
    if (Uniform(rng) >= p) continue;
    double pick = Uniform(rng) * total_weight;
    int32_t k = sizes.back().first;
    for (const auto& [size, weight] : sizes) {
      if (pick < weight) {
        k = size;
        break;
      }
      pick -= weight;
    }
    std::vector<uint32_t> members{order[at]};
    for (size_t i = at + 1; i < order.size() && members.size() < size_t(k); ++i) {
      if (!taken[order[i]]) members.push_back(order[i]);
    }
    if (members.size() < 2) break;  // the trace's last task: left alone
    const uint64_t id = next_id++;
    const std::string name = "gang-" + std::to_string(id);
    const SimTask& first = w.tasks[members.front()];
    const int64_t run_ms = first.delete_ms ? *first.delete_ms - *first.create_ms : kForeverMs;
    const int32_t priority = first.task.priority;
    const int32_t world = int32_t(members.size());
    for (int32_t rank = 0; rank < world; ++rank) {
      SimTask& m = w.tasks[members[size_t(rank)]];
      taken[members[size_t(rank)]] = true;
      m.task.job = {id, name, "worker", rank, world, world};
      m.task.group = name;
      m.task.group_placement = GroupPlacement::kPack;
      m.task.priority = priority;
      m.delete_ms.reset();
      m.job_run_ms = std::max<int64_t>(run_ms, 0);
      m.job_gang.one_gpu_model = false;
    }
  }
  return Status::Ok();
}

}  // namespace hf::sim
