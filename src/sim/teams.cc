#include "sim/teams.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "core/job.h"
#include "core/json_fields.h"
#include "core/text.h"
#include "sim/random.h"

namespace hf::sim {
namespace {

double Between(std::mt19937_64& rng, double lo, double hi) { return lo + (hi - lo) * Uniform(rng); }
// Exponential with mean `mean` (Poisson inter-arrival times).
double Exponential(std::mt19937_64& rng, double mean) { return -mean * std::log1p(-Uniform(rng)); }

constexpr int64_t kTenMinutesS = 600;
int64_t LimitFor(double run_s, double factor) {
  return int64_t(std::ceil(run_s * factor / kTenMinutesS)) * kTenMinutesS;
}

// Mean GPU-hours one job asks for, for the default arrival rate.
double MeanGpuHours(double large_share) {
  const double small = 1.0 * (10 + 120) / 2 / 60;  // 1 GPU x 65 min
  const double large = (32.0 + 64.0) / 2 * 2.5;    // 48 GPUs x 2.5 h (uniform 4..8 members)
  return (1 - large_share) * small + large_share * large;
}

}  // namespace

Result<std::vector<Team>> ParseTeams(const std::string& text) {
  std::vector<Team> out;
  for (const std::string& entry : Split(text, ',')) {
    const auto bad = [&](const std::string& why) {
      return InvalidArgument("--teams entry \"" + entry + "\": " + why);
    };
    const std::vector<std::string> parts = Split(entry, ':');
    if (parts.size() < 2 || parts.size() > 3)
      return bad("want NAME:WEIGHT or NAME:WEIGHT:JOBS_PER_HOUR");
    Team t;
    t.name = parts[0];
    if (!json_fields::IsValidName(t.name)) {
      return bad(
          "the name must be 1..253 characters of [a-z0-9._-], starting and ending with a "
          "letter or digit");
    }
    if (t.name == "root") return bad("root is the top of the queue tree");
    const auto number = [](const std::string& s, double& v) {
      try {
        size_t used = 0;
        v = std::stod(s, &used);
        return used == s.size() && std::isfinite(v);
      } catch (const std::exception&) {
        return false;
      }
    };
    if (!number(parts[1], t.weight) || t.weight <= 0 || t.weight > 1e6) {
      return bad("the weight must be a number in (0, 1e6]");
    }
    if (parts.size() == 3) {
      double rate = 0;
      if (!number(parts[2], rate) || rate <= 0 || rate > 1e6) {
        return bad("jobs per hour must be a number in (0, 1e6]");
      }
      t.jobs_per_hour = rate;
    }
    for (const Team& o : out) {
      if (o.name == t.name) return bad("team " + t.name + " is named twice");
    }
    out.push_back(std::move(t));
  }
  return out;
}

Status ParseClusterShape(const std::string& text, int32_t& nodes, int32_t& gpus_per_node) {
  const std::vector<std::string> parts = Split(text, 'x');
  long long n = 0, g = 0;
  const auto integer = [](const std::string& s, long long& v) {
    try {
      size_t used = 0;
      v = std::stoll(s, &used);
      return used == s.size();
    } catch (const std::exception&) {
      return false;
    }
  };
  if (parts.size() != 2 || !integer(parts[0], n) || !integer(parts[1], g) || n < 1 || n > 100000 ||
      g < 1 || g > 64) {
    return InvalidArgument("--cluster \"" + text +
                           "\": want NODESxGPUS, nodes in 1..100000 and GPUs per node in 1..64, "
                           "e.g. 32x8");
  }
  nodes = int32_t(n);
  gpus_per_node = int32_t(g);
  return Status::Ok();
}

Result<Workload> GenerateTeams(const TeamsOptions& o) {
  if (o.teams.empty()) return InvalidArgument("--teams: at least one team");
  if (!(o.hours > 0 && o.hours <= 24 * 365)) {
    return InvalidArgument("--hours must be in (0, 8760], got " + FormatNumber(o.hours));
  }
  if (!(o.large_share >= 0 && o.large_share <= 1)) {
    return InvalidArgument("--large-share must be in [0, 1], got " + FormatNumber(o.large_share));
  }
  if (o.users_per_team < 1) return InvalidArgument("--users-per-team must be at least 1");
  Workload w;
  w.nodes_source = w.tasks_source = "--generate teams";
  for (int32_t i = 1; i <= o.nodes; ++i) {
    SimNode& n = w.nodes.emplace_back();
    n.spec.name = "gpu-" + std::to_string(i);
    n.spec.cpu_milli = 96000;
    n.spec.memory_mib = 768 * 1024;
    for (int32_t g = 0; g < o.gpus_per_node; ++g) {
      GpuDevice& d = n.spec.gpus.emplace_back();
      d.index = g;
      d.model = "A100-80G";
      d.vendor = "nvidia";
      d.memory_mib = 81920;
    }
  }
  const double gpus = double(o.nodes) * o.gpus_per_node;
  const double default_rate = gpus / MeanGpuHours(o.large_share);
  const int64_t end_ms = std::llround(o.hours * 3.6e6);

  struct Arrival {
    int64_t at_ms;
    size_t team;
    bool large;
    int32_t members;
    double run_s;
    int32_t user;
  };
  std::vector<Arrival> arrivals;
  std::mt19937_64 rng(o.seed);
  for (size_t t = 0; t < o.teams.size(); ++t) {
    const Team& team = o.teams[t];
    queues::QueueSpec& q = w.queues.emplace_back();
    q.name = team.name;
    q.parent = queues::kRoot;
    q.weight = team.weight;
    const double mean_gap_ms = 3.6e6 / team.jobs_per_hour.value_or(default_rate);
    for (double at = Exponential(rng, mean_gap_ms); at < double(end_ms);
         at += Exponential(rng, mean_gap_ms)) {
      Arrival a;
      a.at_ms = std::llround(at);
      a.team = t;
      a.large = Uniform(rng) < o.large_share;
      a.members = a.large ? 4 + int32_t(rng() % 5) : 1;
      a.run_s = a.large ? Between(rng, 3600, 4 * 3600) : Between(rng, 600, 7200);
      a.user = 1 + int32_t(rng() % uint64_t(o.users_per_team));
      arrivals.push_back(a);
      if (arrivals.size() > 5'000'000) {
        return InvalidArgument(
            "--generate teams: more than 5,000,000 jobs; lower the rates or --hours");
      }
    }
  }
  std::stable_sort(arrivals.begin(), arrivals.end(),
                   [](const Arrival& a, const Arrival& b) { return a.at_ms < b.at_ms; });
  uint64_t job_id = 0;
  size_t small = 0;
  for (const Arrival& a : arrivals) {
    const Team& team = o.teams[a.team];
    const std::string user = team.name + "-u" + std::to_string(a.user);
    const int64_t run_ms = std::llround(a.run_s * 1000);
    if (!a.large) {
      SimTask& s = w.tasks.emplace_back();
      s.task.key = TaskKey(w.tasks.size() - 1);
      s.task.name = team.name + "-" + std::to_string(++small);
      s.task.queue = team.name;
      s.task.requests.cpu_milli = 4000;
      s.task.requests.memory_mib = 32768;
      s.task.requests.gpu = 1;
      s.task.time_limit_s = LimitFor(a.run_s, 1.5);
      s.create_ms = a.at_ms;
      s.run_ms = run_ms;
      s.user = user;
      s.origin = "--generate teams";
      continue;
    }
    JobSpec spec;
    spec.name = team.name + "-gang-" + std::to_string(job_id + 1);
    spec.queue = team.name;
    spec.time_limit_s = LimitFor(a.run_s, 1.25);
    spec.pack = "none";
    JobRole& role = spec.roles.emplace_back();
    role.name = "worker";
    role.replicas = a.members;
    role.member.requests.cpu_milli = 32000;
    role.member.requests.memory_mib = 262144;
    role.member.requests.gpu = std::min(8, o.gpus_per_node);
    for (Task& t : spec.Members(++job_id)) {
      SimTask& s = w.tasks.emplace_back();
      t.key = TaskKey(w.tasks.size() - 1);
      s.task = std::move(t);
      s.create_ms = a.at_ms;
      s.job_run_ms = run_ms;
      s.job_gang = framework::GangOptions::For(spec);
      s.user = user;
      s.origin = "--generate teams";
    }
  }
  return w;
}

}  // namespace hf::sim
