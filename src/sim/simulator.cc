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
#include <unordered_set>

#include "core/clock.h"
#include "framework/registry.h"

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

  framework::Decision Decide(const Task& t) {
    framework::ScheduleOptions opts;
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
                                     const framework::GangOptions& gang) {
    framework::ScheduleOptions opts;
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
  // Nearest-rank percentile; reorders the samples.
  double Percentile(double p) {
    const size_t n = latencies_ns_.size();
    size_t rank = size_t(std::ceil(p * double(n)));
    rank = std::clamp<size_t>(rank, 1, n) - 1;
    std::nth_element(latencies_ns_.begin(), latencies_ns_.begin() + ptrdiff_t(rank),
                     latencies_ns_.end());
    return double(latencies_ns_[rank]) / 1e3;
  }

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
                  (t.rdma_required ? "r" : "-");
  for (const auto& m : q.gpu_models) s += "/" + m;
  return s;
}

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
  std::unordered_set<std::string> failed_shapes;

  // Jobs: their members (rank order), what they hold, and whether they run.
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
    const JobMember& m = tasks[i].job;
    if (m.id == 0) continue;
    JobRun& j = jobs[m.id];
    j.members.push_back(i);
    j.need = size_t(m.min_available);
    j.run_ms = w.tasks[i].job_run_ms.value_or(0);
  }
  r.jobs_total = jobs.size();
  struct End {
    int64_t t;
    uint64_t job, epoch;
    bool operator>(const End& o) const { return t != o.t ? t > o.t : job > o.job; }
  };
  std::priority_queue<End, std::vector<End>, std::greater<End>> ends;
  std::unordered_set<uint64_t> failed_jobs;  // tried this pass, and did not fit

  const auto commit = [&](uint32_t i, const framework::Decision& d, int64_t now) {
    pending.erase(i);
    state[i] = kRunning;
    ever_placed[i] = 1;
    PodPlacement& p = r.placements[i];
    RecordPlacement(e.cluster(), d.alloc, p);
    p.placed_ms = now;
    p.released_ms.reset();
    e.Hold(HeldMilli(d.alloc));
    if (const uint64_t id = tasks[i].job.id; id != 0) {
      JobRun& j = jobs[id];
      ++j.placed;
      j.held += HeldMilli(d.alloc);
      if (j.placed == j.members.size() && !j.running) {
        j.running = true;
        ends.push({now + j.run_ms, id, ++j.epoch});
      }
    }
    for (TaskKey v : d.victims) {
      PodPlacement& vp = r.placements[v];
      const int64_t milli = HeldMilli(vp.gpus);
      e.Hold(-milli);
      vp.released_ms = now;
      state[v] = kPending;
      pending.insert(uint32_t(v));
      ++r.preemptions;
      if (const uint64_t id = tasks[v].job.id; id != 0) {
        JobRun& j = jobs[id];
        --j.placed;
        j.held -= milli;
        if (j.running) ++j.epoch;  // its run stops; it runs again once whole
        j.running = false;
      }
      failed_shapes.clear();  // an eviction can free more than the preemptor took
      failed_jobs.clear();
    }
  };

  const auto try_place = [&](uint32_t i, int64_t now) {
    const Task& t = tasks[i];
    if (t.job.id != 0 && options.gang) {
      // The gang: tried once enough members have arrived, all in one decision.
      JobRun& j = jobs[t.job.id];
      if (failed_jobs.count(t.job.id)) return;
      std::vector<uint32_t> waiting;
      for (uint32_t m : j.members) {
        if (state[m] == kPending) waiting.push_back(m);
      }
      if (waiting.size() + j.placed < j.need) return;
      std::vector<const Task*> ptrs;
      for (uint32_t m : waiting) ptrs.push_back(&tasks[m]);
      framework::GangDecision g = e.DecideGang(ptrs, j.need > j.placed ? j.need - j.placed : 0,
                                               w.tasks[i].job_gang);
      if (!g.scheduled) failed_jobs.insert(t.job.id);
      for (size_t k = 0; k < waiting.size(); ++k) {
        if (g.members[k].scheduled) commit(waiting[k], g.members[k], now);
      }
      e.Observe(r);
      return;
    }
    std::string shape = Shape(t);
    if (failed_shapes.count(shape)) return;
    framework::Decision d = e.Decide(t);
    if (!d.scheduled) {
      failed_shapes.insert(std::move(shape));
      e.Observe(r);
      return;
    }
    commit(i, d, now);
    e.Observe(r);
  };
  // GPU milli held by members of jobs whose gang is not whole.
  const auto partial_held = [&] {
    int64_t held = 0;
    for (const auto& [id, j] : jobs) {
      if (!j.running && !j.done && j.placed > 0) held += j.held;
    }
    return held;
  };

  double area = 0;          // integral of allocated milli over trace time
  double partial_area = 0;  // of milli held by members of partial gangs
  int64_t last_t = events.empty() ? 0 : events.front().t;
  std::vector<uint32_t> arrivals, snapshot;
  for (size_t b = 0; b < events.size() || !ends.empty();) {
    const int64_t now = b < events.size() && (ends.empty() || events[b].t <= ends.top().t)
                            ? events[b].t
                            : ends.top().t;
    area += double(e.allocated()) * double(now - last_t);
    partial_area += double(partial_held()) * double(now - last_t);
    last_t = now;
    e.clock().Set(now);
    bool freed = false;
    arrivals.clear();
    // Jobs whose run ends now: every member leaves.
    while (!ends.empty() && ends.top().t == now) {
      const End end = ends.top();
      ends.pop();
      JobRun& j = jobs[end.job];
      if (end.epoch != j.epoch || !j.running) continue;
      for (uint32_t m : j.members) {
        if (state[m] != kRunning) continue;
        HF_CHECK(e.cluster().Release(m).ok());
        PodPlacement& p = r.placements[m];
        const int64_t milli = HeldMilli(p.gpus);
        e.Hold(-milli);
        p.released_ms = now;
        state[m] = kGone;
      }
      j.running = false;
      j.done = true;
      j.placed = 0;
      j.held = 0;
      ++r.jobs_completed;
      freed = true;
    }
    for (; b < events.size() && events[b].t == now; ++b) {
      const uint32_t i = events[b].task;
      if (events[b].kind == kDelete) {
        if (state[i] == kRunning) {
          HF_CHECK(e.cluster().Release(i).ok());
          PodPlacement& p = r.placements[i];
          const int64_t milli = HeldMilli(p.gpus);
          e.Hold(-milli);
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
    if (freed) {
      snapshot.assign(pending.begin(), pending.end());
    } else {
      std::sort(arrivals.begin(), arrivals.end(), before);
      snapshot.swap(arrivals);
    }
    // Victims evicted during the pass wait for the next release.
    for (uint32_t i : snapshot) {
      if (state[i] == kPending) try_place(i, now);
    }
  }
  r.gpu_seconds_held_by_partial_gangs = partial_area / 1e6;  // milli x ms -> GPU-seconds
  for (const auto& [id, j] : jobs) r.jobs_partial_at_end += !j.running && !j.done && j.placed > 0;
  r.trace_span_ms = events.empty() ? 0 : std::max(last_t, events.back().t) - events.front().t;
  r.gpu_alloc_ratio_time_avg = r.trace_span_ms > 0 ? area / double(r.trace_span_ms) /
                                                         double(std::max<int64_t>(e.capacity(), 1))
                                                   : e.Ratio(e.allocated());
  r.pods_scheduled = size_t(std::count(ever_placed.begin(), ever_placed.end(), 1));
  r.pods_failed = r.pods_total - r.pods_scheduled;
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
