#include "sim/simulator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <queue>
#include <random>
#include <set>
#include <span>
#include <unordered_map>
#include <unordered_set>

#include "core/clock.h"
#include "framework/registry.h"
#include "queues/backfill.h"
#include "queues/gate.h"
#include "queues/ledger.h"

namespace hf::sim {

const char* MethodName(Method m) {
  switch (m) {
    case Method::kFgd:
      return "fgd";
    case Method::kReplay:
      return "replay";
  }
  return "unknown";
}

std::optional<Method> ParseMethod(std::string_view name) {
  if (name == "fgd") return Method::kFgd;
  if (name == "replay") return Method::kReplay;
  return std::nullopt;
}

const char* QueueingName(Queueing q) { return q == Queueing::kFifo ? "fifo" : "fair"; }

std::optional<Queueing> ParseQueueing(std::string_view name) {
  if (name == "fifo") return Queueing::kFifo;
  if (name == "fair") return Queueing::kFair;
  return std::nullopt;
}

namespace {

// std::mt19937_64 is specified bit for bit by the standard, but the
// distributions and std::shuffle are not; these are, so a seed reproduces a
// run with any standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}

  // Uniform in [0, n), n > 0, without modulo bias: draws below 2^64 mod n
  // are rejected so that every residue has the same number of preimages.
  uint64_t Below(uint64_t n) {
    const uint64_t threshold = (0 - n) % n;
    uint64_t x;
    do {
      x = gen_();
    } while (x < threshold);
    return x % n;
  }

  template <typename T>
  void Shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[Below(i)]);
  }

 private:
  std::mt19937_64 gen_;
};

// Nearest-rank percentile of `v` (reordered); T{} when empty.
template <typename T>
T NearestRank(std::vector<T>& v, double p) {
  if (v.empty()) return T{};
  size_t rank = size_t(std::ceil(p * double(v.size())));
  rank = std::clamp<size_t>(rank, 1, v.size()) - 1;
  std::nth_element(v.begin(), v.begin() + ptrdiff_t(rank), v.end());
  return v[rank];
}

int64_t GpuDemand(const Task& t) {
  return t.requests.gpu > 0 ? int64_t{t.requests.gpu} * t.requests.gpu_milli : 0;
}

// GPU milli the grants hold.
int64_t HeldMilli(const std::vector<GpuGrant>& gpus) {
  int64_t m = 0;
  for (const GpuGrant& g : gpus) m += g.milli;
  return m;
}
int64_t HeldMilli(const Allocation& a) { return HeldMilli(a.gpus); }

// What both methods share: the cluster, the framework, the clock, and the
// bookkeeping behind the report's ratios and latencies.
class Engine {
 public:
  Status Init(const Workload& w, const SimOptions& options, const std::vector<size_t>& node_order) {
    for (size_t i : node_order) {
      const SimNode& n = w.nodes[i];
      auto id = cluster_.AddNode(n.spec);
      if (!id.ok()) return InvalidArgument(w.nodes_source + ": " + id.status().message());
      if (n.usage) {
        Status s = cluster_.ReportUsage(*id, *n.usage);
        if (!s.ok())
          return InvalidArgument(w.nodes_source + ": node " + n.spec.name + ": " + s.message());
      }
      capacity_ += cluster_.total_gpu_milli(*id);
    }
    auto fw = framework::Framework::Create(plugins::InTreeRegistry(), options.policy, &clock_);
    if (!fw.ok()) return InvalidArgument("policy: " + fw.status().message());
    fw_ = std::move(*fw);
    return Status::Ok();
  }

  int64_t capacity() const { return capacity_; }
  ClusterState& cluster() { return cluster_; }
  ManualClock& clock() { return clock_; }

  framework::Decision Decide(const Task& t, framework::ScheduleOptions opts = {}) {
    opts.bind_state = TaskState::kRunning;
    const auto start = std::chrono::steady_clock::now();
    framework::Decision d = fw_->Schedule(t, cluster_, opts);
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    latencies_ns_.push_back(ns);
    return d;
  }

  framework::GangDecision DecideGang(std::span<const Task* const> members, size_t need,
                                     const framework::GangOptions& gang,
                                     framework::ScheduleOptions opts = {}) {
    opts.bind_state = TaskState::kRunning;
    const auto start = std::chrono::steady_clock::now();
    framework::GangDecision d = fw_->ScheduleGang(members, need, cluster_, state_, opts, gang);
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    latencies_ns_.push_back(ns);
    return d;
  }

  void Arrive(int64_t demand_milli) { arrived_ += demand_milli; }
  void Hold(int64_t delta_milli) { allocated_ += delta_milli; }
  int64_t allocated() const { return allocated_; }
  double Ratio(int64_t milli) const {
    return capacity_ > 0 ? double(milli) / double(capacity_) : 0.0;
  }

  // Called after every decision: advances the curve and the at-100% mark.
  void Observe(SimReport& r) {
    const double alloc = Ratio(allocated_);
    r.gpu_alloc_ratio_peak = std::max(r.gpu_alloc_ratio_peak, alloc);
    if (capacity_ == 0) return;
    if (!r.arrived_100_reached && arrived_ >= capacity_) {
      r.arrived_100_reached = true;
      r.gpu_alloc_ratio_at_arrived_100 = alloc;
    }
    // Steps are integers (in 5% units) so that 20 steps land exactly on 100%.
    // One task can cross several steps on a small cluster: one point then.
    if (arrived_ * 20 >= next_step_ * capacity_) {
      r.curve.push_back({Ratio(arrived_), alloc});
      next_step_ = arrived_ * 20 / capacity_ + 1;
    }
  }

  void Finish(SimReport& r) {
    r.nodes = cluster_.node_count();
    r.gpu_capacity_milli = capacity_;
    r.gpus_total = capacity_ / kWholeGpuMilli;
    r.gpu_alloc_ratio_final = Ratio(allocated_);
    r.arrived_ratio_final = Ratio(arrived_);
    if (!r.arrived_100_reached) r.gpu_alloc_ratio_at_arrived_100 = r.gpu_alloc_ratio_final;
    r.plugins = fw_->Plugins();
    r.decisions = latencies_ns_.size();
    int64_t total = 0;
    for (int64_t ns : latencies_ns_) total += ns;
    r.schedule_seconds = double(total) / 1e9;
    if (!latencies_ns_.empty()) {
      r.latency_p50_us = Percentile(0.50);
      r.latency_p99_us = Percentile(0.99);
      r.latency_max_us =
          double(*std::max_element(latencies_ns_.begin(), latencies_ns_.end())) / 1e3;
    }
  }

 private:
  // In microseconds; reorders the samples.
  double Percentile(double p) { return double(NearestRank(latencies_ns_, p)) / 1e3; }

  ClusterState cluster_;
  ManualClock clock_;
  std::unique_ptr<framework::Framework> fw_;
  framework::CycleState state_;
  int64_t capacity_ = 0;
  int64_t allocated_ = 0;
  int64_t arrived_ = 0;
  int64_t next_step_ = 1;
  std::vector<int64_t> latencies_ns_;
};

void RecordPlacement(const ClusterState& cluster, const Allocation& a, PodPlacement& p) {
  p.node = cluster.spec(a.node).name;
  p.gpus = a.gpus;
}

Result<SimReport> RunFgd(const Workload& w, const SimOptions& options) {
  SimReport r;
  Rng rng(options.seed);
  std::vector<size_t> node_order(w.nodes.size());
  std::iota(node_order.begin(), node_order.end(), size_t{0});
  rng.Shuffle(node_order);
  Engine e;
  HF_RETURN_IF_ERROR(e.Init(w, options, node_order));
  if (e.capacity() == 0) {
    return InvalidArgument(w.nodes_source +
                           ": the cluster has no GPUs; --method fgd measures GPU allocation");
  }
  int64_t source_demand = 0;
  for (const SimTask& t : w.tasks) source_demand += GpuDemand(t.task);
  if (source_demand == 0) {
    return InvalidArgument(w.tasks_source +
                           ": no task requests a GPU; --method fgd samples GPU demand");
  }

  // Sample with replacement until demand reaches tune x capacity.
  const double target = options.tune * double(e.capacity());
  std::vector<uint32_t> sampled;
  int64_t demand = 0;
  while (double(demand) < target) {
    const uint32_t i = uint32_t(rng.Below(w.tasks.size()));
    sampled.push_back(i);
    demand += GpuDemand(w.tasks[i].task);
  }
  // order[k] = the sample scheduled k-th; sample s has key s.
  std::vector<uint32_t> order(sampled.size());
  std::iota(order.begin(), order.end(), uint32_t{0});
  rng.Shuffle(order);

  r.pods_total = sampled.size();
  r.placements.resize(sampled.size());
  std::vector<uint32_t> position(sampled.size());  // sample -> index in placements
  std::vector<uint8_t> ever_placed(sampled.size(), 0);
  for (size_t k = 0; k < order.size(); ++k) {
    const uint32_t s = order[k];
    position[s] = uint32_t(k);
    Task t = w.tasks[sampled[s]].task;
    t.key = s;
    t.name += '-';
    t.name += std::to_string(s);
    r.placements[k].pod = t.name;
    e.Arrive(GpuDemand(t));
    framework::Decision d = e.Decide(t);
    if (d.scheduled) {
      RecordPlacement(e.cluster(), d.alloc, r.placements[k]);
      ever_placed[s] = 1;
      e.Hold(HeldMilli(d.alloc));
      // Only a policy with preemption of running tasks evicts here; the
      // victims are gone for good, as nothing is retried in this method.
      for (TaskKey v : d.victims) {
        PodPlacement& p = r.placements[position[v]];
        const int64_t milli = HeldMilli(p.gpus);
        e.Hold(-milli);
        p.node.clear();
        p.gpus.clear();
        ++r.preemptions;
      }
    }
    e.Observe(r);
  }
  r.pods_scheduled = size_t(std::count(ever_placed.begin(), ever_placed.end(), 1));
  r.pods_failed = r.pods_total - r.pods_scheduled;
  e.Finish(r);
  return r;
}

// The requests-and-priority part of a task: what Filter and PostFilter look
// at. Within one retry pass free resources only shrink (binds take, nothing
// is released) unless a preemption happens, so a shape that failed once in
// the pass fails again and need not be tried.
std::string Shape(const Task& t) {
  const Requests& q = t.requests;
  std::string s = std::to_string(q.cpu_milli) + "/" + std::to_string(q.memory_mib) + "/" +
                  std::to_string(q.gpu) + "/" + std::to_string(q.gpu_milli) + "/" +
                  std::to_string(q.gpu_memory_mib) + "/" + std::to_string(t.priority) + "/" +
                  (t.rdma_required ? "r" : "-") + "/" + std::to_string(t.time_limit_s) + "/" +
                  t.queue;
  for (const auto& m : q.gpu_models) s += "/" + m;
  return s;
}

// Which task shapes (Shape) failed since the last clear: tasks' shapes are
// interned once, so that a pass over a long queue skips the tasks of a
// failed shape without building a string each.
class FailedShapes {
 public:
  explicit FailedShapes(const std::vector<Task>& tasks) : shape_(tasks.size()) {
    std::unordered_map<std::string, uint32_t> ids;
    for (size_t i = 0; i < tasks.size(); ++i) {
      shape_[i] = ids.emplace(Shape(tasks[i]), uint32_t(ids.size())).first->second;
    }
    failed_at_.assign(ids.size(), 0);
  }
  uint32_t id(uint32_t task) const { return shape_[task]; }
  bool count(uint32_t task) const { return failed_at_[shape_[task]] == generation_; }
  void insert(uint32_t task) { failed_at_[shape_[task]] = generation_; }
  void clear() { ++generation_; }

 private:
  std::vector<uint32_t> shape_;      // by task
  std::vector<uint64_t> failed_at_;  // by shape: the generation it failed in
  uint64_t generation_ = 1;
};

Result<SimReport> RunReplay(const Workload& w, const SimOptions& options) {
  SimReport r;
  const size_t n = w.tasks.size();
  size_t without_time = 0;
  for (const SimTask& t : w.tasks) without_time += !t.create_ms;
  if (without_time == n && n > 0) {
    return InvalidArgument(w.tasks_source +
                           ": no creation times (no creation_time column?); --method replay needs "
                           "them, use --method fgd");
  }
  for (const SimTask& t : w.tasks) {
    if (!t.create_ms)
      return InvalidArgument(t.origin + ": no creation time; --method replay needs one");
  }
  auto built = queues::QueueTree::Build(w.queues);
  if (!built.ok()) return InvalidArgument(w.tasks_source + ": " + built.status().message());
  const queues::QueueTree tree = std::move(*built);
  for (const SimTask& t : w.tasks) {
    const size_t q = tree.Find(t.task.queue);
    if (q == queues::QueueTree::kNone || !tree.leaf(q)) {
      return InvalidArgument(
          t.origin + ": task " + t.task.name + ": queue " + t.task.queue +
          (q == queues::QueueTree::kNone ? " is not in queues:" : " has child queues"));
    }
  }
  const bool fair = options.queueing == Queueing::kFair && !tree.trivial();
  bool any_limit = false;
  for (const SimTask& t : w.tasks) any_limit |= t.task.time_limit_s > 0;
  const bool backfill = options.backfill && any_limit;

  std::vector<size_t> node_order(w.nodes.size());
  std::iota(node_order.begin(), node_order.end(), size_t{0});
  Engine e;
  HF_RETURN_IF_ERROR(e.Init(w, options, node_order));
  // Keys index the bookkeeping below (and come back as preemption victims),
  // so they are the tasks' positions whatever the reader chose.
  std::vector<Task> tasks(n);
  for (size_t i = 0; i < n; ++i) {
    tasks[i] = w.tasks[i].task;
    tasks[i].key = i;
  }

  enum Kind : uint8_t { kDelete = 0, kCreate = 1 };  // deletions first at equal times
  struct Event {
    int64_t t;
    Kind kind;
    uint32_t task;
  };
  std::vector<Event> events;
  events.reserve(2 * n);
  for (uint32_t i = 0; i < n; ++i) {
    events.push_back({*w.tasks[i].create_ms, kCreate, i});
    if (w.tasks[i].delete_ms) events.push_back({*w.tasks[i].delete_ms, kDelete, i});
  }
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    if (a.t != b.t) return a.t < b.t;
    if (a.kind != b.kind) return a.kind < b.kind;
    return a.task < b.task;
  });

  enum State : uint8_t { kWaiting, kPending, kRunning, kGone };
  std::vector<State> state(n, kWaiting);
  std::vector<uint8_t> ever_placed(n, 0);
  r.pods_total = n;
  r.placements.resize(n);
  for (size_t i = 0; i < n; ++i) r.placements[i].pod = w.tasks[i].task.name;

  const auto before = [&](uint32_t a, uint32_t b) {
    const Task& x = tasks[a];
    const Task& y = tasks[b];
    if (x.priority != y.priority) return x.priority > y.priority;
    if (*w.tasks[a].create_ms != *w.tasks[b].create_ms)
      return *w.tasks[a].create_ms < *w.tasks[b].create_ms;
    return a < b;
  };
  std::set<uint32_t, decltype(before)> pending(before);
  // Shapes that failed in this pass (FailedShapes).
  FailedShapes failed_shapes(tasks);

  // Runs: a job's members, or a task with a duration, placed, running for
  // their duration, then leaving. Keyed by job id, or kSolo | task index.
  constexpr uint64_t kSolo = uint64_t{1} << 63;
  const auto limit_ms = [&](uint32_t i) { return tasks[i].time_limit_s * 1000; };
  const auto run_of = [&](uint32_t i) -> uint64_t {
    if (tasks[i].job.id != 0) return tasks[i].job.id;
    return w.tasks[i].run_ms ? kSolo | i : 0;
  };
  struct JobRun {
    std::vector<uint32_t> members;
    size_t need = 0;  // min_available
    int64_t run_ms = 0;
    size_t placed = 0;
    int64_t held = 0;
    bool running = false;
    bool done = false;
    uint64_t epoch = 0;  // a run's end is stale once its epoch moved on
  };
  std::map<uint64_t, JobRun> jobs;
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t id = run_of(i);
    if (id == 0) continue;
    JobRun& j = jobs[id];
    j.members.push_back(i);
    const bool solo = id & kSolo;
    j.need = solo ? 1 : size_t(tasks[i].job.min_available);
    j.run_ms = solo ? *w.tasks[i].run_ms : w.tasks[i].job_run_ms.value_or(0);
    if (limit_ms(i) > 0) j.run_ms = std::min(j.run_ms, limit_ms(i));  // stopped at its limit
    r.jobs_total += !solo && j.members.size() == 1;
  }

  // Jobs for the report: a job, or a task outside one. Arrival: its first
  // member's; start: when it first ran whole (a task: was first placed).
  struct Unit {
    std::string name;
    size_t queue = 0;  // into r.queues
    double gpus = 0;
    int64_t arrival_ms = INT64_MAX;
    std::optional<int64_t> start_ms;
    std::optional<int64_t> first_reservation_ms;
  };
  std::vector<Unit> units;
  std::vector<uint32_t> unit_of(n);
  std::vector<size_t> report_queue(n);  // task -> index into r.queues
  std::vector<size_t> leaf_of_report;   // r.queues index -> tree index
  {
    std::map<uint64_t, uint32_t> job_unit;
    std::map<size_t, size_t> by_leaf;
    for (uint32_t i = 0; i < n; ++i) {
      const size_t leaf = tree.Find(tasks[i].queue);
      auto [it, fresh] = by_leaf.emplace(leaf, r.queues.size());
      if (fresh) {
        QueueStats& q = r.queues.emplace_back();
        q.name = tasks[i].queue;
        q.weight = tree.spec(leaf).weight;
        leaf_of_report.push_back(leaf);
      }
      report_queue[i] = it->second;
      const uint64_t id = tasks[i].job.id;
      uint32_t u;
      if (id != 0 && job_unit.count(id)) {
        u = job_unit[id];
      } else {
        u = uint32_t(units.size());
        Unit& unit = units.emplace_back();
        unit.name = id != 0 ? tasks[i].job.name : tasks[i].name;
        unit.queue = it->second;
        if (id != 0) job_unit[id] = u;
      }
      unit_of[i] = u;
      Unit& unit = units[u];
      unit.gpus += double(GpuDemand(tasks[i])) / kWholeGpuMilli;
      unit.arrival_ms = std::min(unit.arrival_ms, *w.tasks[i].create_ms);
    }
  }
  std::vector<int64_t> queue_held(r.queues.size(), 0);
  std::vector<double> queue_area(r.queues.size(), 0);
  std::vector<std::map<std::string, double>> user_area(r.queues.size());
  std::map<std::pair<size_t, std::string>, int64_t> user_held;
  uint64_t changes = 0;  // placements, evictions and releases so far
  const auto hold = [&](uint32_t i, int64_t delta) {
    ++changes;
    e.Hold(delta);
    queue_held[report_queue[i]] += delta;
    user_held[{report_queue[i], w.tasks[i].user}] += delta;
  };
  const auto started = [&](uint32_t i, int64_t now) {
    Unit& u = units[unit_of[i]];
    if (!u.start_ms) u.start_ms = now;
  };

  struct End {
    int64_t t;
    uint64_t job, epoch;
    bool operator>(const End& o) const { return t != o.t ? t > o.t : job > o.job; }
  };
  std::priority_queue<End, std::vector<End>, std::greater<End>> ends;
  // Gangs tried this pass that did not fit, by job and by shape (their
  // waiting members' shapes, how many are placed and must go, and how).
  std::unordered_set<uint64_t> failed_jobs;
  std::unordered_set<std::string> failed_gang_shapes;

  // Backfill: the reservation (its task: the task's index, as keys are).
  std::optional<queues::Reservation> reservation;
  const auto reserved_for = [&](uint32_t i) {
    return reservation && reservation->Holds(i, tasks[i].job.id);
  };
  const auto end_of = [&](uint32_t i, int64_t now) {
    return limit_ms(i) > 0 ? now + limit_ms(i) : INT64_MAX;
  };
  // Plans the reservation for waiting task i (a gang's first member), unless
  // one is held for work that ranks higher. True when it is new or moved.
  const auto reserve = [&](uint32_t i, int64_t now) {
    if (reservation && !reserved_for(i) && !reservation->TakenOverBy(tasks[i].priority)) {
      return false;
    }
    queues::GangNeed g{tasks[i].requests, 1};
    if (tasks[i].job.id != 0) {
      const JobRun& j = jobs[tasks[i].job.id];
      std::vector<const Requests*> waiting;
      for (uint32_t m : j.members) {
        if (state[m] == kPending) waiting.push_back(&tasks[m].requests);
      }
      g = queues::NeedOf(tasks[i].requests, waiting, int32_t(j.need), int32_t(j.placed));
    }
    std::optional<queues::Reservation> plan = queues::PlanReservation(
        e.cluster(), tasks[i], g.member, g.need, now, [&](const PlacedTask& p) {
          const uint32_t k = uint32_t(p.key);
          return limit_ms(k) > 0 ? *r.placements[k].placed_ms + limit_ms(k) : INT64_MAX;
        });
    if (!plan) {
      if (reserved_for(i)) reservation.reset();
      return false;
    }
    Unit& u = units[unit_of[i]];
    if (!u.first_reservation_ms) u.first_reservation_ms = plan->start_ms;
    const bool moved = !reserved_for(i) || reservation->start_ms != plan->start_ms ||
                       reservation->holds.size() != plan->holds.size();
    reservation = std::move(plan);
    r.reservations += moved;
    return moved;
  };

  // The ledger, computed again only once the cluster changed.
  queues::Ledger ledger;
  uint64_t ledger_at = UINT64_MAX;  // `changes` when last computed
  const auto current_ledger = [&]() -> const queues::Ledger& {
    if (ledger_at != changes) {
      ledger.Compute(tree, e.cluster());
      ledger_at = changes;
    }
    return ledger;
  };

  const auto commit = [&](uint32_t i, const framework::Decision& d, int64_t now) {
    pending.erase(i);
    state[i] = kRunning;
    ever_placed[i] = 1;
    PodPlacement& p = r.placements[i];
    RecordPlacement(e.cluster(), d.alloc, p);
    p.placed_ms = now;
    p.released_ms.reset();
    hold(i, HeldMilli(d.alloc));
    if (const uint64_t id = run_of(i); id != 0) {
      JobRun& j = jobs[id];
      ++j.placed;
      j.held += HeldMilli(d.alloc);
      if (j.placed == j.members.size() && !j.running) {
        j.running = true;
        started(i, now);
        ends.push({now + j.run_ms, id, ++j.epoch});
      }
    } else {
      started(i, now);
    }
    for (TaskKey v : d.victims) {
      PodPlacement& vp = r.placements[v];
      const int64_t milli = HeldMilli(vp.gpus);
      hold(uint32_t(v), -milli);
      vp.released_ms = now;
      state[v] = kPending;
      pending.insert(uint32_t(v));
      ++r.preemptions;
      if (const uint64_t id = run_of(uint32_t(v)); id != 0) {
        JobRun& j = jobs[id];
        --j.placed;
        j.held -= milli;
        if (j.running) ++j.epoch;  // its run stops; it runs again once whole
        j.running = false;
      }
      failed_shapes.clear();  // an eviction can free more than the preemptor took
      failed_jobs.clear();
      failed_gang_shapes.clear();
    }
  };

  std::vector<NodeId> held;
  // What a decision for `lead` (a task, or a gang's first waiting member)
  // may use: admission by its queue (fair), and the nodes a reservation
  // holds against it (backfill). False when its queue refuses it now.
  std::unique_ptr<framework::EvictionScope> scope;
  std::vector<Task> narrowed;
  const auto prepare = [&](uint32_t lead, std::vector<const Task*>& members, int64_t now,
                           framework::ScheduleOptions& opt) {
    opt.bind_state = TaskState::kRunning;
    scope.reset();
    if (fair) {
      const queues::Ledger& l = current_ledger();
      queues::Demand demand;
      for (const Task* m : members) demand.Add(m->requests);
      const queues::Gate gate =
          queues::Admit(tree, l, e.cluster(), tasks[lead].queue, demand, members);
      if (!gate.admitted) return false;
      scope = queues::Scope(tree, l, e.cluster(), gate);
      opt.eviction = scope.get();
      if (gate.narrowed) {
        narrowed.clear();
        narrowed.reserve(members.size());
        for (const Task*& m : members)
          m = &narrowed.emplace_back(queues::Narrowed(e.cluster(), *m, gate));
      }
    }
    held.clear();
    if (reservation && !reserved_for(lead)) {
      queues::HeldAgainst(*reservation, tasks[lead].requests, end_of(lead, now), held);
      std::sort(held.begin(), held.end());
      held.erase(std::unique(held.begin(), held.end()), held.end());
      opt.excluded = held;
    }
    return true;
  };
  bool first_failure = true;  // no task has failed to start in this pass yet
  // After a decision for `lead`: the reservation follows (backfill).
  const auto after = [&](uint32_t lead, bool placed, std::span<const framework::Decision> decisions,
                         int64_t now) {
    if (!backfill) return;
    if (!placed) {
      // As the server: only the pass's first task that cannot start may
      // take a free reservation; the holder's is planned again.
      const bool first = first_failure;
      first_failure = false;
      if ((first || reserved_for(lead)) && reserve(lead, now)) {
        failed_shapes.clear();  // held room moved: what failed may fit elsewhere
        failed_jobs.clear();
        failed_gang_shapes.clear();
      }
    } else if (reserved_for(lead)) {
      reservation.reset();
    } else if (reservation) {
      for (const framework::Decision& d : decisions) {
        if (d.scheduled) queues::Charge(*reservation, d.alloc, end_of(lead, now));
      }
    }
  };

  const auto try_place = [&](uint32_t i, int64_t now) {
    const Task& t = tasks[i];
    framework::ScheduleOptions opt;
    if (t.job.id != 0 && options.gang) {
      // The gang: tried once enough members have arrived, all in one decision.
      JobRun& j = jobs[t.job.id];
      if (failed_jobs.count(t.job.id)) return;
      std::vector<uint32_t> waiting;
      for (uint32_t m : j.members) {
        if (state[m] == kPending) waiting.push_back(m);
      }
      if (waiting.size() + j.placed < j.need) return;
      const uint32_t lead = waiting.front();
      const framework::GangOptions& how = w.tasks[i].job_gang;
      std::string shape = std::to_string(j.placed) + "/" + std::to_string(j.need) + "/" +
                          (how.one_gpu_model ? "1" : "*") + how.gpu_model + "/" +
                          std::to_string(int(how.domain));
      for (uint32_t m : waiting) shape += "/" + std::to_string(failed_shapes.id(m));
      if (!reserved_for(lead) && failed_gang_shapes.count(shape)) return;
      std::vector<const Task*> ptrs;
      for (uint32_t m : waiting) ptrs.push_back(&tasks[m]);
      if (!prepare(lead, ptrs, now, opt)) {
        failed_jobs.insert(t.job.id);
        return;
      }
      framework::GangDecision g =
          e.DecideGang(ptrs, j.need > j.placed ? j.need - j.placed : 0, how, opt);
      if (!g.scheduled) {
        failed_jobs.insert(t.job.id);
        failed_gang_shapes.insert(std::move(shape));
      }
      for (size_t k = 0; k < waiting.size(); ++k) {
        if (g.members[k].scheduled) commit(waiting[k], g.members[k], now);
      }
      after(lead, g.scheduled, g.members, now);
      e.Observe(r);
      return;
    }
    // The reservation's holder may use held room others of its shape may not.
    if (failed_shapes.count(i) && !reserved_for(i)) return;
    std::vector<const Task*> one{&t};
    if (!prepare(i, one, now, opt)) {
      failed_shapes.insert(i);
      return;
    }
    framework::Decision d = e.Decide(*one.front(), opt);
    if (!d.scheduled) {
      failed_shapes.insert(i);
      after(i, false, {}, now);
      e.Observe(r);
      return;
    }
    commit(i, d, now);
    after(i, true, std::span<const framework::Decision>(&d, 1), now);
    e.Observe(r);
  };
  // GPU milli held by members of jobs whose gang is not whole.
  const auto partial_held = [&] {
    int64_t held_milli = 0;
    for (const auto& [id, j] : jobs) {
      if (!(id & kSolo) && !j.running && !j.done && j.placed > 0) held_milli += j.held;
    }
    return held_milli;
  };

  // One pass over `snapshot`: in rank order (fifo), or queue by queue as
  // fair share picks them, each queue's in rank order.
  std::vector<std::vector<uint32_t>> by_queue(tree.size());
  std::vector<size_t> cursor(tree.size(), 0);
  const auto pass = [&](const std::vector<uint32_t>& snapshot, int64_t now) {
    if (reservation && state[reservation->task] != kPending) reservation.reset();
    first_failure = true;
    if (!fair) {
      for (uint32_t i : snapshot) {
        if (state[i] == kPending) try_place(i, now);
      }
      return;
    }
    std::vector<size_t> candidates;
    for (uint32_t i : snapshot) {
      const size_t q = leaf_of_report[report_queue[i]];
      if (by_queue[q].empty()) candidates.push_back(q);
      by_queue[q].push_back(i);
    }
    // The queue whose turn it is stays so until a placement changes what
    // queues hold: its tasks are tried in rank order until one is placed.
    size_t q = queues::QueueTree::kNone;
    uint64_t seen = changes - 1;
    while (!candidates.empty()) {
      if (seen != changes || q == queues::QueueTree::kNone) {
        q = candidates.front();
        if (candidates.size() > 1) q = current_ledger().PickFair(candidates);
        seen = changes;
      }
      const uint32_t i = by_queue[q][cursor[q]++];
      if (cursor[q] == by_queue[q].size()) {
        by_queue[q].clear();
        cursor[q] = 0;
        candidates.erase(std::find(candidates.begin(), candidates.end(), q));
        q = queues::QueueTree::kNone;
      }
      if (state[i] == kPending) try_place(i, now);
    }
  };

  double area = 0;          // integral of allocated milli over trace time
  double partial_area = 0;  // of milli held by members of partial gangs
  const int64_t first_t = events.empty() ? 0 : events.front().t;
  int64_t last_t = first_t;
  const auto integrate = [&](int64_t until) {
    const double dt = double(until - last_t);
    area += double(e.allocated()) * dt;
    partial_area += double(partial_held()) * dt;
    for (size_t q = 0; q < queue_held.size(); ++q) queue_area[q] += double(queue_held[q]) * dt;
    for (const auto& [key, milli] : user_held)
      user_area[key.first][key.second] += double(milli) * dt;
    last_t = until;
  };
  std::vector<uint32_t> arrivals, snapshot;
  for (size_t b = 0; b < events.size() || !ends.empty();) {
    const int64_t now = b < events.size() && (ends.empty() || events[b].t <= ends.top().t)
                            ? events[b].t
                            : ends.top().t;
    if (options.horizon_ms && now > *options.horizon_ms) break;
    integrate(now);
    e.clock().Set(now);
    bool freed = false;
    arrivals.clear();
    // Runs that end now: every member leaves.
    while (!ends.empty() && ends.top().t == now) {
      const End end = ends.top();
      ends.pop();
      JobRun& j = jobs[end.job];
      if (end.epoch != j.epoch || !j.running) continue;
      for (uint32_t m : j.members) {
        if (state[m] != kRunning) continue;
        HF_CHECK(e.cluster().Release(m).ok());
        PodPlacement& p = r.placements[m];
        hold(m, -HeldMilli(p.gpus));
        p.released_ms = now;
        state[m] = kGone;
      }
      j.running = false;
      j.done = true;
      j.placed = 0;
      j.held = 0;
      r.jobs_completed += !(end.job & kSolo);
      freed = true;
    }
    for (; b < events.size() && events[b].t == now; ++b) {
      const uint32_t i = events[b].task;
      if (events[b].kind == kDelete) {
        if (state[i] == kRunning) {
          HF_CHECK(e.cluster().Release(i).ok());
          PodPlacement& p = r.placements[i];
          hold(i, -HeldMilli(p.gpus));
          p.released_ms = now;
          freed = true;
        } else if (state[i] == kPending) {
          pending.erase(i);
          ++r.dropped_pending;
        } else if (state[i] == kWaiting) {
          ++r.dropped_pending;  // gone at the instant it came: never tried
        }
        state[i] = kGone;
      } else if (state[i] == kWaiting) {
        state[i] = kPending;
        e.Arrive(GpuDemand(tasks[i]));
        pending.insert(i);
        arrivals.push_back(i);
      }
    }
    failed_shapes.clear();
    failed_jobs.clear();
    failed_gang_shapes.clear();
    // After a release everything waiting is tried again; otherwise only the
    // arrivals (nothing else can fit until something is freed). With queues,
    // an arrival can change whose turn it is, so everything is tried.
    if (freed || (fair && !arrivals.empty())) {
      snapshot.assign(pending.begin(), pending.end());
    } else {
      std::sort(arrivals.begin(), arrivals.end(), before);
      snapshot.swap(arrivals);
    }
    // Victims evicted during the pass wait for the next release.
    pass(snapshot, now);
  }
  const int64_t end_t = options.horizon_ms
                            ? *options.horizon_ms
                            : (events.empty() ? 0 : std::max(last_t, events.back().t));
  integrate(std::max(end_t, last_t));
  r.gpu_seconds_held_by_partial_gangs = partial_area / 1e6;  // milli x ms -> GPU-seconds
  for (const auto& [id, j] : jobs) {
    r.jobs_partial_at_end += !(id & kSolo) && !j.running && !j.done && j.placed > 0;
  }
  r.trace_span_ms = last_t - first_t;
  r.gpu_alloc_ratio_time_avg = r.trace_span_ms > 0 ? area / double(r.trace_span_ms) /
                                                         double(std::max<int64_t>(e.capacity(), 1))
                                                   : e.Ratio(e.allocated());
  r.pods_scheduled = size_t(std::count(ever_placed.begin(), ever_placed.end(), 1));
  r.pods_failed = r.pods_total - r.pods_scheduled;

  // Per queue.
  r.queueing = options.queueing;
  r.backfill = options.backfill;
  double total_area = 0;
  for (double a : queue_area) total_area += a;
  std::vector<std::vector<double>> waits(r.queues.size());
  std::vector<const Unit*> largest(r.queues.size(), nullptr);
  const Unit* overall = nullptr;
  const auto bigger = [](const Unit* a, const Unit& b) {
    return !a || b.gpus > a->gpus || (b.gpus == a->gpus && b.arrival_ms < a->arrival_ms);
  };
  for (const Unit& u : units) {
    if (u.arrival_ms > last_t) continue;  // arrived after the span
    QueueStats& q = r.queues[u.queue];
    ++q.jobs;
    if (u.start_ms) {
      ++q.started;
      waits[u.queue].push_back(double(*u.start_ms - u.arrival_ms) / 1000.0);
    }
    if (bigger(largest[u.queue], u)) largest[u.queue] = &u;
    if (bigger(overall, u)) overall = &u;
  }
  // Entitlement: down the tree, by weight among siblings with work.
  std::vector<uint8_t> has_work(tree.size(), 0);
  for (size_t k = 0; k < r.queues.size(); ++k) {
    if (r.queues[k].jobs == 0) continue;
    for (size_t q : tree.PathUp(leaf_of_report[k])) has_work[q] = 1;
  }
  const auto entitled = [&](size_t leaf) {
    double e_share = 1;
    for (size_t q : tree.PathUp(leaf)) {
      const size_t parent = tree.parent(q);
      double sum = 0;
      for (size_t c : tree.children(parent)) sum += has_work[c] ? tree.spec(c).weight : 0;
      e_share *= sum > 0 ? tree.spec(q).weight / sum : 0;
    }
    return e_share;
  };
  const double capacity_area = double(e.capacity()) * double(std::max<int64_t>(r.trace_span_ms, 1));
  double sum_x = 0, sum_x2 = 0;
  size_t with_work = 0;
  for (size_t k = 0; k < r.queues.size(); ++k) {
    QueueStats& q = r.queues[k];
    q.gpu_hours = queue_area[k] / 1000.0 / 3.6e6;  // milli x ms -> GPU-hours
    q.share = total_area > 0 ? queue_area[k] / total_area : 0;
    q.utilisation = capacity_area > 0 ? queue_area[k] / capacity_area : 0;
    q.entitled = q.jobs > 0 ? entitled(leaf_of_report[k]) : 0;
    q.wait_p50_s = NearestRank(waits[k], 0.50);
    q.wait_p95_s = NearestRank(waits[k], 0.95);
    q.wait_max_s = waits[k].empty() ? 0 : *std::max_element(waits[k].begin(), waits[k].end());
    if (const Unit* u = largest[k]) {
      q.largest_job = u->name;
      q.largest_job_gpus = u->gpus;
      if (u->start_ms) q.largest_job_wait_s = double(*u->start_ms - u->arrival_ms) / 1000.0;
    }
    for (const auto& [user, a] : user_area[k]) q.user_gpu_hours[user] = a / 1000.0 / 3.6e6;
    if (q.entitled > 0) {
      const double x = q.share / q.entitled;
      sum_x += x;
      sum_x2 += x * x;
      ++with_work;
    }
  }
  r.jain_index = sum_x2 > 0 ? sum_x * sum_x / (double(with_work) * sum_x2) : 1;
  if (overall) {
    JobTimes& l = r.largest_job;
    l.name = overall->name;
    l.queue = r.queues[overall->queue].name;
    l.gpus = overall->gpus;
    l.arrival_s = double(overall->arrival_ms) / 1000.0;
    if (overall->first_reservation_ms)
      l.first_reservation_s = double(*overall->first_reservation_ms) / 1000.0;
    if (overall->start_ms) l.start_s = double(*overall->start_ms) / 1000.0;
  }
  e.Finish(r);
  return r;
}

}  // namespace

Result<SimReport> Simulate(const Workload& workload, const SimOptions& options) {
  if (!(options.tune > 0 && options.tune <= 100)) {
    return InvalidArgument("tune must be in (0, 100], got " + std::to_string(options.tune));
  }
  if (workload.tasks.size() > UINT32_MAX)
    return InvalidArgument(workload.tasks_source + ": too many tasks");
  Result<SimReport> r =
      options.method == Method::kFgd ? RunFgd(workload, options) : RunReplay(workload, options);
  if (!r.ok()) return r;
  r->method = options.method;
  r->tune = options.tune;
  r->seed = options.seed;
  r->source_tasks = workload.tasks.size();
  return r;
}

}  // namespace hf::sim
