#include "inference/service.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/crypto.h"
#include "core/json_body.h"
#include "core/json_fields.h"
#include "core/text.h"
#include "http/relay.h"
#include "http/upstream.h"
#include "inference/autoscaler.h"

namespace hf::inference {

using http::HeaderList;
using http::JsonError;
using http::JsonResponse;
using http::Reply;
using http::Request;
using http::Response;
using http::UpstreamClient;
using http::UpstreamHandlers;
using http::UpstreamOptions;
using http::UpstreamRequest;
using http::UpstreamResult;
using scheduler::Scheduler;

using nlohmann::json;

namespace {

constexpr char kGroupPrefix[] = "inference.";
constexpr char kRevisionEnv[] = "HETEROFLOW_MODEL_REVISION";
constexpr char kActor[] = "inference";
constexpr size_t kLatencyWindow = 1024;
constexpr int64_t kRateWindowMs = 10'000;
constexpr int kMaxAttempts = 3;
constexpr size_t kMaxUnclaimed = 1024;

bool IsLive(TaskState s) {
  return s == TaskState::kPending || s == TaskState::kScheduled || s == TaskState::kRunning;
}

std::string Address(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

// One request through the gateway, from arrival to its last byte.
struct InferenceService::Call {
  std::string endpoint;
  std::string model;
  std::string method;
  std::string target;
  HeaderList headers;
  std::string body;
  Reply reply;
  std::shared_ptr<EndpointStats> stats;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  int64_t deadline_ms = 0;  // while queued
  int attempts = 0;
  std::set<TaskKey> tried;
  std::atomic<bool> finished{false};
};

InferenceService::InferenceService(store::Store* store, Scheduler* scheduler, EventSink* events,
                                   const Clock* clock, InferenceOptions options)
    : store_(store), scheduler_(scheduler), events_(events), clock_(clock), options_(options) {
  UpstreamOptions u;
  u.threads = options_.upstream_threads;
  upstream_ = std::make_unique<UpstreamClient>(u);
}

InferenceService::~InferenceService() { Stop(); }

// ---------------------------------------------------------------------------
// Lifecycle

Status InferenceService::Recover() {
  std::map<std::string, json> models, endpoints, addresses;
  std::map<std::string, std::vector<store::TaskRecord>> tasks;
  HF_RETURN_IF_ERROR(store_->Read([&](const store::ReadTx& tx) -> Status {
    HF_ASSIGN_OR_RETURN(models, tx.ListInferenceObjects("model"));
    HF_ASSIGN_OR_RETURN(endpoints, tx.ListInferenceObjects("endpoint"));
    HF_ASSIGN_OR_RETURN(addresses, tx.ListInferenceObjects("replica"));
    for (const auto& [name, body] : models) {
      store::TaskFilter f;
      f.group = kGroupPrefix + name;
      f.limit = 0;
      HF_ASSIGN_OR_RETURN(std::vector<store::TaskRecord> recs, tx.ListTasks(f));
      for (store::TaskRecord& r : recs) {
        if (IsLive(r.state) && r.task.kind == TaskKind::kInference) tasks[name].push_back(std::move(r));
      }
    }
    return Status::Ok();
  }));
  MutexLock lock(mu_);
  const int64_t now = clock_->NowMs();
  for (const auto& [name, body] : models) {
    Result<ModelSpec> spec = ModelSpecFromJson(body.value("spec", json()), name);
    if (!spec.ok()) return Internal("stored model " + name + ": " + spec.status().message());
    Model& m = models_[name];
    m.spec = std::move(*spec);
    m.revision = body.value("revision", int64_t{1});
    m.desired = body.value("desired", m.spec.min_replicas);
    m.next_replica = body.value("next_replica", int64_t{1});
    m.created_at_ms = body.value("created_at_ms", now);
    if (body.contains("last_decision")) m.last_decision = body["last_decision"];
    for (const store::TaskRecord& rec : tasks[name]) {
      Replica r;
      r.id = rec.task.key;
      r.name = rec.task.name;
      auto rev = rec.task.env.find(kRevisionEnv);
      r.revision = rev == rec.task.env.end() ? 0 : std::atoll(rev->second.c_str());
      r.state = rec.state;
      r.node = rec.node;
      r.pending_reason = rec.pending_reason;
      if (auto a = addresses.find(std::to_string(r.id)); a != addresses.end()) {
        r.host = a->second.value("host", "");
        r.port = static_cast<uint16_t>(a->second.value("port", 0));
      }
      if (r.state == TaskState::kRunning) r.running_since_ms = now;
      replica_model_[r.id] = name;
      m.replicas.emplace(r.id, std::move(r));
    }
  }
  for (const auto& [name, body] : endpoints) {
    Result<EndpointSpec> e = EndpointFromStored(body);
    if (!e.ok()) return e.status();
    for (const EndpointKey& k : e->keys) next_key_id_ = std::max(next_key_id_, k.id + 1);
    endpoints_[name].spec = std::move(*e);
  }
  return Status::Ok();
}

void InferenceService::Start() {
  MutexLock lock(mu_);
  if (started_) return;
  started_ = true;
  thread_ = std::thread([this] { Loop(); });
}

void InferenceService::Stop() {
  std::vector<std::shared_ptr<Call>> waiting;
  {
    MutexLock lock(mu_);
    if (stop_) return;
    stop_ = true;
    for (auto& [name, m] : models_) {
      for (auto& c : m.queue) waiting.push_back(c);
      m.queue.clear();
    }
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (auto& c : waiting) {
    c->reply(JsonError(503, "unavailable", "the server is stopping"));
    Finish(c, 503);
  }
  upstream_->Stop();
}

void InferenceService::Publish(json data) { events_->Publish("inference", std::move(data), clock_->NowMs()); }

// ---------------------------------------------------------------------------
// The controller loop

void InferenceService::Loop() {
  for (;;) {
    {
      MutexLock lock(mu_);
      if (stop_) return;
    }
    const int64_t now = clock_->NowMs();
    RefreshReplicaStates(now);
    StartHealthChecks(now);
    Actions actions;
    {
      MutexLock lock(mu_);
      TickLocked(now, actions);
    }
    Execute(actions);
    MutexLock lock(mu_);
    const auto until = std::chrono::steady_clock::now() + options_.tick;
    while (!stop_ && lock.WaitUntil(cv_, until) == std::cv_status::no_timeout) {
    }
  }
}

void InferenceService::RefreshReplicaStates(int64_t now) {
  std::vector<std::pair<TaskKey, TaskState>> ids;  // with the state last seen
  {
    MutexLock lock(mu_);
    for (const auto& [id, model] : replica_model_) {
      auto mi = models_.find(model);
      if (mi == models_.end()) continue;
      auto ri = mi->second.replicas.find(id);
      if (ri != mi->second.replicas.end()) ids.emplace_back(id, ri->second.state);
    }
  }
  if (ids.empty()) return;
  struct Seen {
    store::TaskRecord rec;
    TaskState before;  // the replica's state when the read began
    std::string last_event;
  };
  std::vector<Seen> seen;
  Status s = store_->Read([&](const store::ReadTx& tx) -> Status {
    for (const auto& [id, before] : ids) {
      Result<store::TaskRecord> rec = tx.GetTask(id);
      if (!rec.ok()) continue;
      Seen v{std::move(*rec), before, ""};
      // Why it ended or stopped running: its last event.
      if (!IsLive(v.rec.state) || (before == TaskState::kRunning && v.rec.state != TaskState::kRunning)) {
        Result<std::vector<store::TaskEvent>> ev = tx.ListTaskEvents(id);
        if (ev.ok() && !ev->empty()) v.last_event = ev->back().kind + ": " + ev->back().message;
      }
      seen.push_back(std::move(v));
    }
    return Status::Ok();
  });
  if (!s.ok()) return;
  std::vector<TaskKey> forget;
  {
    MutexLock lock(mu_);
    for (Seen& v : seen) {
      auto mi = replica_model_.find(v.rec.task.key);
      if (mi == replica_model_.end() || models_.count(mi->second) == 0) continue;
      Model& m = models_.at(mi->second);
      auto ri = m.replicas.find(v.rec.task.key);
      if (ri == m.replicas.end()) continue;
      Replica& r = ri->second;
      // Changed meanwhile (ReplicaStarted): this read is older than what
      // memory knows; the next tick reads again.
      if (r.state != v.before) continue;
      const TaskState prev = r.state;
      r.state = v.rec.state;
      r.node = v.rec.node;
      r.pending_reason = v.rec.pending_reason;
      if (!IsLive(r.state)) {
        const std::string why = "replica " + r.name + " (task " + std::to_string(r.id) + ") " +
                                TaskStateName(r.state) + (v.last_event.empty() ? "" : ": " + v.last_event);
        if (!r.draining) {
          if (!r.ever_ready) {
            CountFailureLocked(m, why, now);
          } else {
            m.lost = true;
            m.lost_reason = why;
          }
        }
        Publish({{"action", "replica_ended"}, {"model", mi->second}, {"task", r.id},
                 {"state", TaskStateName(r.state)}, {"message", why}});
        forget.push_back(r.id);
        m.replicas.erase(ri);
        replica_model_.erase(mi);
        continue;
      }
      if (prev == TaskState::kRunning && r.state != TaskState::kRunning) {
        // Preempted, or its node was lost: it will run again elsewhere.
        const std::string why = "replica " + r.name + " (task " + std::to_string(r.id) +
                                ") stopped running" + (v.last_event.empty() ? "" : ": " + v.last_event);
        if (r.ready || r.ever_ready) {
          m.lost = true;
          m.lost_reason = why;
        }
        MarkUnreadyLocked(m, r, why);
        r.port = 0;
        r.host.clear();
        r.running_since_ms = 0;
      }
      // The startup timeout runs from the first sight of it running, port
      // reported or not.
      if (r.state == TaskState::kRunning && r.running_since_ms == 0) r.running_since_ms = now;
    }
  }
  if (!forget.empty()) {
    (void)store_->Write([&](store::Tx& tx) -> Status {
      for (TaskKey id : forget) HF_RETURN_IF_ERROR(tx.DeleteInferenceObject("replica", std::to_string(id)));
      return Status::Ok();
    });
  }
}

void InferenceService::CountFailureLocked(Model& m, const std::string& why, int64_t now) {
  ++m.consecutive_failures;
  m.last_failure = why;
  if (m.consecutive_failures >= options_.crash_loop_threshold) {
    const int k = std::min(4, m.consecutive_failures - options_.crash_loop_threshold);
    m.backoff_until_ms = now + (int64_t{5000} << k);
  }
}

void InferenceService::MarkUnreadyLocked(Model& m, Replica& r, const std::string& why) {
  if (!r.ready) return;
  r.ready = false;
  Publish({{"action", "replica_unready"}, {"model", m.spec.name}, {"task", r.id}, {"message", why}});
}

void InferenceService::StartHealthChecks(int64_t now) {
  struct Check {
    std::string model;
    TaskKey id;
    std::string host;
    uint16_t port;
    std::string path;
  };
  std::vector<Check> checks;
  {
    MutexLock lock(mu_);
    for (auto& [name, m] : models_) {
      for (auto& [id, r] : m.replicas) {
        if (r.state != TaskState::kRunning || r.port == 0 || r.checking) continue;
        if (r.last_check_ms != 0 && now - r.last_check_ms < options_.health_interval.count()) continue;
        r.checking = true;
        r.last_check_ms = now;
        checks.push_back({name, id, r.host, r.port, m.spec.health_path});
      }
    }
  }
  for (Check& c : checks) {
    UpstreamRequest req;
    req.host = c.host;
    req.port = c.port;
    req.method = "GET";
    req.target = c.path;
    req.connect_timeout = options_.health_timeout;
    req.header_timeout = options_.health_timeout;
    req.idle_timeout = options_.health_timeout;
    auto status = std::make_shared<int>(0);
    UpstreamHandlers h;
    h.on_header = [status](int code, HeaderList) { *status = code; };
    h.on_body = [](std::string_view) { return true; };
    const std::string what = "GET " + c.path + " on " + Address(c.host, c.port);
    h.on_done = [this, c, status, what](const UpstreamResult& res) {
      if (!res.status.ok() && !res.header_received) {
        HealthResult(c.model, c.id, false, what + ": " + res.status.message());
      } else if (*status < 200 || *status >= 400) {
        HealthResult(c.model, c.id, false, what + " answered " + std::to_string(*status));
      } else {
        HealthResult(c.model, c.id, true, "");
      }
    };
    upstream_->Send(std::move(req), std::move(h));
  }
}

void InferenceService::HealthResult(const std::string& model, TaskKey id, bool ok,
                                    const std::string& error) {
  MutexLock lock(mu_);
  auto mi = models_.find(model);
  if (mi == models_.end()) return;
  auto ri = mi->second.replicas.find(id);
  if (ri == mi->second.replicas.end()) return;
  Model& m = mi->second;
  Replica& r = ri->second;
  r.checking = false;
  if (ok) {
    r.health_failures = 0;
    r.health_error.clear();
    if (!r.ready && !r.draining && r.state == TaskState::kRunning) {
      r.ready = true;
      r.ever_ready = true;
      m.consecutive_failures = 0;
      m.backoff_until_ms = 0;
      Publish({{"action", "replica_ready"}, {"model", model}, {"task", id}, {"node", r.node},
               {"address", Address(r.host, r.port)}});
      cv_.notify_all();  // queued requests can go now
    }
    return;
  }
  ++r.health_failures;
  r.health_error = error;
  MarkUnreadyLocked(m, r, "health check failed: " + error);
  if (r.ever_ready && !r.draining && r.health_failures >= options_.unhealthy_replace_after) {
    r.draining = true;
    r.drain_since_ms = clock_->NowMs();
    m.lost = true;
    m.lost_reason = "replica " + r.name + " failed " + std::to_string(r.health_failures) +
                    " health checks in a row (" + error + "); replacing it";
    Publish({{"action", "replica_replaced"}, {"model", model}, {"task", id}, {"message", m.lost_reason}});
  }
}

void InferenceService::TickLocked(int64_t now, Actions& actions) {
  for (auto it = models_.begin(); it != models_.end();) {
    Model& m = it->second;
    for (auto q = m.queue.begin(); q != m.queue.end();) {
      if ((*q)->deadline_ms <= now) {
        actions.answer.emplace_back(
            *q, JsonError(503, "unavailable",
                          "model " + m.spec.name + " has no ready replica: gave up after " +
                              FormatNumber(m.spec.autoscaling.cold_start_timeout_s) +
                              " s waiting for one to start (" + StatusLocked(m).second + ")"));
        q = m.queue.erase(q);
      } else {
        ++q;
      }
    }
    if (m.deleted) {
      m.desired = 0;
    } else {
      Autoscale(m, now, actions);
    }
    Reconcile(m, now, actions);
    if (!m.queue.empty() &&
        std::any_of(m.replicas.begin(), m.replicas.end(),
                    [](const auto& kv) { return kv.second.ready && !kv.second.draining; })) {
      for (auto& c : m.queue) actions.dispatch.push_back(c);
      m.queue.clear();
    }
    if (m.deleted && m.replicas.empty()) {
      it = models_.erase(it);
    } else {
      ++it;
    }
  }
}

void InferenceService::Autoscale(Model& m, int64_t now, Actions& actions) {
  const ModelSpec& spec = m.spec;
  if (!spec.autoscaling.enabled) {
    m.desired = spec.min_replicas;
    return;
  }
  const AutoscalingSpec& a = spec.autoscaling;
  int inflight = 0;
  for (const auto& [id, r] : m.replicas) inflight += r.live->inflight.load();
  std::optional<Autoscaler::Decision> d =
      m.autoscaler.Step(spec, m.desired, inflight + static_cast<double>(m.queue.size()),
                        m.queue.size(), now);
  if (!d) return;
  m.desired = d->to;
  m.scaling = true;
  m.last_decision = {{"time_ms", now},
                     {"from", d->from},
                     {"to", d->to},
                     {"reason", d->reason},
                     {"inputs",
                      {{"inflight", inflight},
                       {"queued", m.queue.size()},
                       {"mean_inflight", std::round(d->mean * 100) / 100},
                       {"window_s", a.window_s},
                       {"target_inflight_per_replica", a.target_inflight_per_replica},
                       {"min_replicas", spec.min_replicas},
                       {"max_replicas", spec.max_replicas},
                       {"upscale_delay_s", a.upscale_delay_s},
                       {"downscale_delay_s", a.downscale_delay_s}}}};
  json event = m.last_decision;
  event["action"] = "scaled";
  event["model"] = spec.name;
  Publish(std::move(event));
  actions.persist.insert(spec.name);
}

void InferenceService::Reconcile(Model& m, int64_t now, Actions& actions) {
  // Draining replicas stop once idle (or after the drain timeout).
  for (auto it = m.replicas.begin(); it != m.replicas.end();) {
    Replica& r = it->second;
    if (r.draining && (r.live->inflight.load() == 0 ||
                       now - r.drain_since_ms >= options_.drain_timeout.count())) {
      actions.cancel.emplace_back(m.spec.name, r.id);
      replica_model_.erase(r.id);
      it = m.replicas.erase(it);
      continue;
    }
    // A replica that never became ready in time is replaced.
    if (!r.draining && !r.ever_ready && r.running_since_ms > 0 &&
        now - r.running_since_ms >= static_cast<int64_t>(m.spec.startup_timeout_s * 1000)) {
      r.draining = true;
      r.drain_since_ms = now;
      CountFailureLocked(m,
                         "replica " + r.name + " was not ready within " +
                             FormatNumber(m.spec.startup_timeout_s) + " s" +
                             (r.health_error.empty() ? "" : " (" + r.health_error + ")"),
                         now);
      Publish({{"action", "replica_replaced"}, {"model", m.spec.name}, {"task", r.id},
               {"message", m.last_failure}});
    }
    ++it;
  }
  std::vector<Replica*> fresh, old;
  for (auto& [id, r] : m.replicas) {
    if (r.draining) continue;
    (r.revision == m.revision ? fresh : old).push_back(&r);
  }
  auto ready = [](const std::vector<Replica*>& v) {
    return static_cast<int32_t>(std::count_if(v.begin(), v.end(), [](Replica* r) { return r->ready; }));
  };
  // Surplus goes first where it serves least: not ready, then fewest in flight.
  // (Runs on this thread, within the lock.)
  auto drain = [&](std::vector<Replica*> v, size_t n) HF_REQUIRES(mu_) {
    std::sort(v.begin(), v.end(), [](Replica* a, Replica* b) {
      if (a->ready != b->ready) return !a->ready;
      if (a->state != b->state) return a->state == TaskState::kPending;
      return a->live->inflight.load() < b->live->inflight.load();
    });
    for (size_t i = 0; i < n && i < v.size(); ++i) {
      v[i]->draining = true;
      v[i]->drain_since_ms = now;
      MarkUnreadyLocked(m, *v[i], "draining");
    }
  };
  const bool may_start = now >= m.backoff_until_ms;
  const int32_t desired = m.desired;
  const int32_t nf = static_cast<int32_t>(fresh.size());
  if (old.empty()) {
    if (nf < desired && may_start) {
      // While crash-looping, one at a time.
      const int32_t n = m.consecutive_failures >= options_.crash_loop_threshold ? 1 : desired - nf;
      for (int32_t i = 0; i < n; ++i) actions.submit.emplace_back(m.spec.name, ReplicaTask(m));
    } else if (nf > desired) {
      drain(fresh, static_cast<size_t>(nf - desired));
    }
  } else {
    // Rolling update: one new replica at a time; an old one leaves only when
    // the ready count stays at or above what is desired without it.
    const int32_t fresh_ready = ready(fresh), old_ready = ready(old);
    if (nf < desired && nf == fresh_ready && may_start) {
      actions.submit.emplace_back(m.spec.name, ReplicaTask(m));
    }
    // Old replicas that never served or are not running go at once; one
    // that served and merely missed a check is not counted as gone.
    std::vector<Replica*> old_unready, old_serving, old_waiting;
    for (Replica* r : old) {
      (r->ready ? old_serving
                : (r->ever_ready && r->state == TaskState::kRunning ? old_waiting : old_unready))
          .push_back(r);
    }
    drain(old_unready, old_unready.size());
    if (desired == 0) {
      drain(old_serving, old_serving.size());
      drain(old_waiting, old_waiting.size());
    } else if (fresh_ready + old_ready > desired && !old_serving.empty()) {
      drain(old_serving, 1);
    } else if (fresh_ready >= desired) {
      drain(old_waiting, old_waiting.size());
    }
    if (nf > desired) drain(fresh, static_cast<size_t>(nf - desired));
  }
  if (!actions.submit.empty()) actions.persist.insert(m.spec.name);
  int32_t ready_now = 0;
  for (auto& [id, r] : m.replicas) ready_now += (r.ready && !r.draining) ? 1 : 0;
  if (ready_now >= desired) {
    m.lost = false;
    bool draining = std::any_of(m.replicas.begin(), m.replicas.end(),
                                [](const auto& kv) { return kv.second.draining; });
    if (!draining) m.scaling = false;
  }
}

Task InferenceService::ReplicaTask(Model& m) {
  Task t;
  t.name = m.spec.name + "-" + std::to_string(m.next_replica++);
  t.group = kGroupPrefix + m.spec.name;
  t.group_placement = m.spec.placement;
  t.kind = TaskKind::kInference;
  t.priority = m.spec.priority;
  t.preemptible = m.spec.preemptible;
  t.requests = m.spec.requests;
  t.command = m.spec.command;
  t.env = m.spec.env;
  t.env["HETEROFLOW_MODEL"] = m.spec.name;
  t.env["HETEROFLOW_MODEL_ID"] = m.spec.model;
  t.env[kRevisionEnv] = std::to_string(m.revision);
  return t;
}

void InferenceService::Execute(Actions& actions) {
  struct Address {
    TaskKey id;
    std::string host;
    uint16_t port;
  };
  std::vector<Address> persist_addresses;
  for (auto& [model, task] : actions.submit) {
    const int64_t revision = std::atoll(task.env[kRevisionEnv].c_str());
    Result<std::vector<store::TaskRecord>> recs = scheduler_->Submit({task}, kActor);
    MutexLock lock(mu_);
    auto mi = models_.find(model);
    if (!recs.ok()) {
      if (mi != models_.end()) {
        mi->second.last_failure = "cannot start a replica: " + recs.status().message();
      }
      continue;
    }
    const TaskKey id = recs->front().task.key;
    if (mi == models_.end()) {
      actions.cancel.emplace_back(model, id);
      continue;
    }
    Replica r;
    r.id = id;
    r.name = task.name;
    r.revision = revision;
    if (auto u = unclaimed_.find(id); u != unclaimed_.end()) {
      r.state = TaskState::kRunning;
      r.host = u->second.first;
      r.port = u->second.second;
      r.running_since_ms = clock_->NowMs();
      unclaimed_.erase(u);
      persist_addresses.push_back({id, r.host, r.port});
    }
    replica_model_[id] = model;
    mi->second.replicas.emplace(id, std::move(r));
    Publish({{"action", "replica_created"}, {"model", model}, {"task", id}, {"name", task.name},
             {"revision", revision}});
  }
  if (!persist_addresses.empty()) {
    (void)store_->Write([&](store::Tx& tx) -> Status {
      for (const Address& a : persist_addresses) {
        HF_RETURN_IF_ERROR(tx.PutInferenceObject("replica", std::to_string(a.id),
                                                 {{"host", a.host}, {"port", a.port}}));
      }
      return Status::Ok();
    });
  }
  {
    MutexLock lock(mu_);
    for (auto& o : orphans_) actions.cancel.push_back(std::move(o));
    orphans_.clear();
  }
  for (auto& [model, id] : actions.cancel) {
    Result<store::TaskRecord> rec = scheduler_->Cancel(id, kActor);
    if (!rec.ok() && rec.status().code() != StatusCode::kFailedPrecondition &&
        rec.status().code() != StatusCode::kNotFound) {
      // Try again on the next tick (from the orphan list when the model is
      // gone meanwhile).
      MutexLock lock(mu_);
      auto mi = models_.find(model);
      if (mi != models_.end()) {
        Replica r;
        r.id = id;
        r.draining = true;
        r.drain_since_ms = 0;
        replica_model_[id] = model;
        mi->second.replicas.emplace(id, std::move(r));
      } else {
        orphans_.emplace_back(model, id);
      }
      continue;
    }
    Publish({{"action", "replica_stopped"}, {"model", model}, {"task", id}});
    (void)store_->Write([id = id](store::Tx& tx) {
      return tx.DeleteInferenceObject("replica", std::to_string(id));
    });
  }
  if (!actions.persist.empty()) {
    MutexLock api(api_mu_);
    std::vector<std::pair<std::string, json>> bodies;
    {
      MutexLock lock(mu_);
      for (const std::string& n : actions.persist) {
        auto mi = models_.find(n);
        if (mi != models_.end() && !mi->second.deleted) bodies.emplace_back(n, StoredModel(mi->second));
      }
    }
    (void)store_->Write([&](store::Tx& tx) -> Status {
      for (auto& [n, b] : bodies) HF_RETURN_IF_ERROR(tx.PutInferenceObject("model", n, b));
      return Status::Ok();
    });
  }
  for (auto& [call, response] : actions.answer) {
    const int status = response.status;
    call->reply(std::move(response));
    Finish(call, status);
  }
  for (auto& call : actions.dispatch) {
    call->tried.clear();
    Dispatch(call);
  }
}

json InferenceService::StoredModel(const Model& m) const {
  return {{"spec", ModelSpecToJson(m.spec)},
          {"revision", m.revision},
          {"desired", m.desired},
          {"next_replica", m.next_replica},
          {"created_at_ms", m.created_at_ms},
          {"last_decision", m.last_decision}};
}

void InferenceService::ReplicaStarted(TaskKey id, const std::string& host, uint16_t port) {
  {
    MutexLock lock(mu_);
    auto mi = replica_model_.find(id);
    if (mi == replica_model_.end() || models_.count(mi->second) == 0) {
      // Possibly a replica whose agent was quicker than the loop that
      // submitted it (Execute records it once Submit returns).
      if (unclaimed_.size() >= kMaxUnclaimed) unclaimed_.erase(unclaimed_.begin());
      unclaimed_[id] = {host, port};
      return;
    }
    Model& m = models_.at(mi->second);
    auto ri = m.replicas.find(id);
    if (ri == m.replicas.end()) return;
    Replica& r = ri->second;
    if (r.host != host || r.port != port) {
      r.ready = false;
      r.health_failures = 0;
    }
    r.state = TaskState::kRunning;
    r.host = host;
    r.port = port;
    r.running_since_ms = clock_->NowMs();
    r.last_check_ms = 0;  // check at once
  }
  (void)store_->Write([&](store::Tx& tx) {
    return tx.PutInferenceObject("replica", std::to_string(id), {{"host", host}, {"port", port}});
  });
  cv_.notify_all();
}

// ---------------------------------------------------------------------------
// Models and endpoints

Result<json> InferenceService::CreateModel(const ModelSpec& spec, const std::string& actor) {
  MutexLock api(api_mu_);
  Model m;
  {
    MutexLock lock(mu_);
    if (models_.count(spec.name) != 0) {
      return AlreadyExists(models_[spec.name].deleted
                               ? "model " + spec.name + " is still being deleted"
                               : "model " + spec.name + " already exists");
    }
  }
  m.spec = spec;
  m.desired = spec.min_replicas;
  m.created_at_ms = clock_->NowMs();
  const json stored = StoredModel(m);
  HF_RETURN_IF_ERROR(store_->Write([&](store::Tx& tx) -> Status {
    HF_RETURN_IF_ERROR(tx.PutInferenceObject("model", spec.name, stored));
    return tx.AppendAudit(actor, "inference.models." + spec.name, nullptr, stored["spec"]);
  }));
  MutexLock lock(mu_);
  Model& placed = models_[spec.name] = std::move(m);
  Publish({{"action", "model_created"}, {"model", spec.name}, {"by", actor}});
  cv_.notify_all();
  return ModelViewLocked(placed);
}

Result<json> InferenceService::UpdateModel(const ModelSpec& spec, const std::string& actor) {
  MutexLock api(api_mu_);
  json old_spec, stored;
  {
    MutexLock lock(mu_);
    auto mi = models_.find(spec.name);
    if (mi == models_.end() || mi->second.deleted) return NotFound("no model named " + spec.name);
    Model copy;
    copy.spec = spec;
    copy.revision = mi->second.revision + (ReplicaTemplateDiffers(mi->second.spec, spec) ? 1 : 0);
    copy.desired = spec.autoscaling.enabled
                       ? std::clamp(mi->second.desired, spec.min_replicas, spec.max_replicas)
                       : spec.min_replicas;
    copy.next_replica = mi->second.next_replica;
    copy.created_at_ms = mi->second.created_at_ms;
    copy.last_decision = mi->second.last_decision;
    old_spec = ModelSpecToJson(mi->second.spec);
    stored = StoredModel(copy);
  }
  HF_RETURN_IF_ERROR(store_->Write([&](store::Tx& tx) -> Status {
    HF_RETURN_IF_ERROR(tx.PutInferenceObject("model", spec.name, stored));
    return tx.AppendAudit(actor, "inference.models." + spec.name, old_spec, stored["spec"]);
  }));
  MutexLock lock(mu_);
  Model& m = models_[spec.name];
  const bool rolled = stored["revision"].get<int64_t>() != m.revision;
  m.spec = spec;
  m.revision = stored["revision"].get<int64_t>();
  m.desired = stored["desired"].get<int32_t>();
  if (rolled) {
    m.consecutive_failures = 0;
    m.backoff_until_ms = 0;
  }
  Publish({{"action", "model_updated"}, {"model", spec.name}, {"by", actor}, {"revision", m.revision},
           {"rolling_update", rolled}});
  cv_.notify_all();
  return ModelViewLocked(m);
}

Status InferenceService::DeleteModel(const std::string& name, const std::string& actor) {
  MutexLock api(api_mu_);
  json old_spec;
  {
    MutexLock lock(mu_);
    auto mi = models_.find(name);
    if (mi == models_.end() || mi->second.deleted) return NotFound("no model named " + name);
    for (const auto& [ename, e] : endpoints_) {
      if (e.spec.model == name) {
        return FailedPrecondition("endpoint " + ename + " routes to model " + name +
                                  "; delete the endpoint first");
      }
    }
    old_spec = ModelSpecToJson(mi->second.spec);
  }
  HF_RETURN_IF_ERROR(store_->Write([&](store::Tx& tx) -> Status {
    HF_RETURN_IF_ERROR(tx.DeleteInferenceObject("model", name));
    return tx.AppendAudit(actor, "inference.models." + name, old_spec, nullptr);
  }));
  std::vector<std::shared_ptr<Call>> waiting;
  {
    MutexLock lock(mu_);
    Model& m = models_[name];
    m.deleted = true;
    m.desired = 0;
    for (auto& [id, r] : m.replicas) {
      if (!r.draining) {
        r.draining = true;
        r.drain_since_ms = clock_->NowMs();
        r.ready = false;
      }
    }
    waiting.assign(m.queue.begin(), m.queue.end());
    m.queue.clear();
    Publish({{"action", "model_deleted"}, {"model", name}, {"by", actor}});
  }
  for (auto& c : waiting) {
    c->reply(JsonError(503, "unavailable", "model " + name + " was deleted"));
    Finish(c, 503);
  }
  cv_.notify_all();
  return Status::Ok();
}

Result<json> InferenceService::GetModel(const std::string& name) const {
  MutexLock lock(mu_);
  auto mi = models_.find(name);
  if (mi == models_.end() || mi->second.deleted) return NotFound("no model named " + name);
  return ModelViewLocked(mi->second);
}

json InferenceService::ListModels() const {
  MutexLock lock(mu_);
  json out = json::array();
  for (const auto& [name, m] : models_) {
    if (!m.deleted) out.push_back(ModelViewLocked(m));
  }
  return out;
}

std::pair<std::string, std::string> InferenceService::StatusLocked(const Model& m) const {
  int32_t ready = 0, live = 0, draining = 0;
  bool old_exists = false, fresh_ever_ready = false;
  const Replica* first_unready = nullptr;
  for (const auto& [id, r] : m.replicas) {
    if (r.draining) {
      ++draining;
      continue;
    }
    ++live;
    if (r.ready) ++ready;
    if (r.revision != m.revision) old_exists = true;
    if (r.revision == m.revision && r.ever_ready) fresh_ever_ready = true;
    if (!r.ready && first_unready == nullptr) first_unready = &r;
  }
  const int32_t desired = m.desired;
  if (m.deleted) return {"stopped", "deleting: stopping " + std::to_string(m.replicas.size()) + " replica(s)"};
  if (desired == 0 && live == 0) {
    if (draining > 0) return {"scaling", "stopping " + std::to_string(draining) + " replica(s)"};
    if (m.spec.autoscaling.enabled && m.spec.max_replicas > 0) {
      return {"stopped", "scaled to zero; the next request starts a replica"};
    }
    return {"stopped", "min_replicas is 0"};
  }
  std::string detail;
  if (first_unready != nullptr) {
    const Replica& r = *first_unready;
    detail = "replica " + r.name + " ";
    if (r.state == TaskState::kPending) {
      detail += "pending" + (r.pending_reason.empty() ? std::string() : ": " + r.pending_reason);
    } else if (r.state == TaskState::kScheduled) {
      detail += "starting on " + r.node;
    } else if (r.port == 0) {
      detail += "running on " + r.node + ", waiting for its port";
    } else {
      detail += "not ready on " + r.node + " (" + Address(r.host, r.port) + ")" +
                (r.health_error.empty() ? "" : ": " + r.health_error);
    }
  }
  if (m.consecutive_failures >= options_.crash_loop_threshold && ready < desired) {
    const int64_t wait = std::max<int64_t>(0, m.backoff_until_ms - clock_->NowMs());
    return {"failed", m.last_failure + "; " + std::to_string(m.consecutive_failures) +
                          " replicas in a row failed before ready; next try in " +
                          std::to_string((wait + 999) / 1000) + " s"};
  }
  if (old_exists) {
    int32_t updated = 0;
    for (const auto& [id, r] : m.replicas) updated += (!r.draining && r.revision == m.revision && r.ready);
    return {"deploying", "rolling update to revision " + std::to_string(m.revision) + ": " +
                             std::to_string(updated) + "/" + std::to_string(desired) +
                             " replicas updated" + (detail.empty() ? "" : "; " + detail)};
  }
  if (ready >= desired) {
    if (draining > 0) return {"scaling", "stopping " + std::to_string(draining) + " replica(s)"};
    if (live > desired) return {"scaling", "stopping " + std::to_string(live - desired) + " replica(s)"};
    return {"running", ""};
  }
  const std::string counts = std::to_string(ready) + "/" + std::to_string(desired) + " ready";
  if (m.lost) return {"degraded", counts + ": " + m.lost_reason + (detail.empty() ? "" : "; " + detail)};
  if (m.scaling) return {"scaling", counts + (detail.empty() ? "" : ": " + detail)};
  if (!fresh_ever_ready) return {"deploying", counts + (detail.empty() ? "" : ": " + detail)};
  return {"degraded", counts + (detail.empty() ? "" : ": " + detail)};
}

json InferenceService::ModelViewLocked(const Model& m) const {
  json replicas = json::array();
  int32_t ready = 0;
  int inflight = 0;
  for (const auto& [id, r] : m.replicas) {
    const int n = r.live->inflight.load();
    inflight += n;
    if (r.ready && !r.draining) ++ready;
    json v = {{"task", r.id},          {"name", r.name},         {"revision", r.revision},
              {"state", TaskStateName(r.state)}, {"node", r.node}, {"ready", r.ready},
              {"draining", r.draining}, {"inflight", n}};
    v["address"] = r.port == 0 ? json(nullptr) : json(Address(r.host, r.port));
    if (!r.health_error.empty()) v["health_error"] = r.health_error;
    if (r.state == TaskState::kPending && !r.pending_reason.empty()) v["pending_reason"] = r.pending_reason;
    replicas.push_back(std::move(v));
  }
  json endpoints = json::array();
  for (const auto& [name, e] : endpoints_) {
    if (e.spec.model == m.spec.name) endpoints.push_back(name);
  }
  auto [status, reason] = StatusLocked(m);
  json j = ModelSpecToJson(m.spec);
  j["revision"] = m.revision;
  j["status"] = status;
  j["reason"] = reason;
  j["ready_replicas"] = ready;
  j["desired_replicas"] = m.desired;
  j["inflight"] = inflight;
  j["queued"] = m.queue.size();
  j["replicas"] = std::move(replicas);
  j["endpoints"] = std::move(endpoints);
  j["last_decision"] = m.last_decision;
  j["created_at_ms"] = m.created_at_ms;
  return j;
}

json InferenceService::EndpointViewLocked(const Endpoint& e) const {
  json keys = json::array();
  for (const EndpointKey& k : e.spec.keys) {
    keys.push_back({{"id", k.id}, {"name", k.name}, {"created_at_ms", k.created_at_ms}});
  }
  EndpointStats& s = *e.stats;
  std::vector<double> lat;
  double rate = 0;
  {
    MutexLock lock(s.mu);
    lat = s.latencies_ms;
    const int64_t now = clock_->NowMs();
    while (!s.recent_ms.empty() && s.recent_ms.front() < now - kRateWindowMs) s.recent_ms.pop_front();
    rate = static_cast<double>(s.recent_ms.size()) * 1000.0 / kRateWindowMs;
  }
  return {{"name", e.spec.name},
          {"model", e.spec.model},
          {"public", e.spec.public_access},
          {"routes",
           {"/inference/v1/chat/completions (\"model\": \"" + e.spec.name + "\")",
            "/serve/" + e.spec.name + "/"}},
          {"keys", keys},
          {"requests", s.requests.load()},
          {"errors", s.errors.load()},
          {"inflight", s.inflight.load()},
          {"requests_per_s", std::round(rate * 100) / 100},
          {"latency_ms", {{"p50", std::round(Percentile(lat, 0.5) * 100) / 100},
                          {"p99", std::round(Percentile(lat, 0.99) * 100) / 100}}}};
}

Result<json> InferenceService::CreateEndpoint(EndpointSpec spec, const std::string& actor) {
  MutexLock api(api_mu_);
  std::string secret;
  {
    MutexLock lock(mu_);
    if (endpoints_.count(spec.name) != 0) return AlreadyExists("endpoint " + spec.name + " already exists");
    auto mi = models_.find(spec.model);
    if (mi == models_.end() || mi->second.deleted) {
      return InvalidArgument("model: no model deployment named " + spec.model);
    }
    if (!spec.public_access) {
      secret = "hfk_" + RandomHex(32);
      spec.keys.push_back({next_key_id_++, "default", Sha256Hex(secret), clock_->NowMs()});
    }
  }
  const json stored = EndpointToStored(spec);
  HF_RETURN_IF_ERROR(store_->Write([&](store::Tx& tx) -> Status {
    HF_RETURN_IF_ERROR(tx.PutInferenceObject("endpoint", spec.name, stored));
    return tx.AppendAudit(actor, "inference.endpoints." + spec.name, nullptr,
                          json{{"model", spec.model}, {"public", spec.public_access}});
  }));
  MutexLock lock(mu_);
  Endpoint& e = endpoints_[spec.name];
  e.spec = std::move(spec);
  json view = EndpointViewLocked(e);
  if (!secret.empty()) view["key"] = {{"id", e.spec.keys.front().id}, {"name", "default"}, {"secret", secret}};
  Publish({{"action", "endpoint_created"}, {"endpoint", e.spec.name}, {"model", e.spec.model}, {"by", actor}});
  return view;
}

Status InferenceService::DeleteEndpoint(const std::string& name, const std::string& actor) {
  MutexLock api(api_mu_);
  json old;
  {
    MutexLock lock(mu_);
    auto ei = endpoints_.find(name);
    if (ei == endpoints_.end()) return NotFound("no endpoint named " + name);
    old = {{"model", ei->second.spec.model}, {"public", ei->second.spec.public_access}};
  }
  HF_RETURN_IF_ERROR(store_->Write([&](store::Tx& tx) -> Status {
    HF_RETURN_IF_ERROR(tx.DeleteInferenceObject("endpoint", name));
    return tx.AppendAudit(actor, "inference.endpoints." + name, old, nullptr);
  }));
  MutexLock lock(mu_);
  endpoints_.erase(name);
  Publish({{"action", "endpoint_deleted"}, {"endpoint", name}, {"by", actor}});
  return Status::Ok();
}

Result<json> InferenceService::GetEndpoint(const std::string& name) const {
  MutexLock lock(mu_);
  auto ei = endpoints_.find(name);
  if (ei == endpoints_.end()) return NotFound("no endpoint named " + name);
  return EndpointViewLocked(ei->second);
}

json InferenceService::ListEndpoints() const {
  MutexLock lock(mu_);
  json out = json::array();
  for (const auto& [name, e] : endpoints_) out.push_back(EndpointViewLocked(e));
  return out;
}

Result<json> InferenceService::AddKey(const std::string& endpoint, const std::string& key_name) {
  MutexLock api(api_mu_);
  EndpointSpec spec;
  const std::string secret = "hfk_" + RandomHex(32);
  EndpointKey key;
  {
    MutexLock lock(mu_);
    auto ei = endpoints_.find(endpoint);
    if (ei == endpoints_.end()) return NotFound("no endpoint named " + endpoint);
    spec = ei->second.spec;
    for (const EndpointKey& k : spec.keys) {
      if (k.name == key_name) return AlreadyExists("endpoint " + endpoint + " has a key named " + key_name);
    }
    key = {next_key_id_++, key_name, Sha256Hex(secret), clock_->NowMs()};
    spec.keys.push_back(key);
  }
  HF_RETURN_IF_ERROR(store_->Write(
      [&](store::Tx& tx) { return tx.PutInferenceObject("endpoint", endpoint, EndpointToStored(spec)); }));
  MutexLock lock(mu_);
  auto ei = endpoints_.find(endpoint);
  if (ei != endpoints_.end()) ei->second.spec.keys = spec.keys;
  return json{{"id", key.id}, {"name", key.name}, {"secret", secret}, {"endpoint", endpoint}};
}

Status InferenceService::RevokeKey(const std::string& endpoint, int64_t key_id) {
  MutexLock api(api_mu_);
  EndpointSpec spec;
  {
    MutexLock lock(mu_);
    auto ei = endpoints_.find(endpoint);
    if (ei == endpoints_.end()) return NotFound("no endpoint named " + endpoint);
    spec = ei->second.spec;
    auto k = std::find_if(spec.keys.begin(), spec.keys.end(),
                          [&](const EndpointKey& x) { return x.id == key_id; });
    if (k == spec.keys.end()) {
      return NotFound("endpoint " + endpoint + " has no key " + std::to_string(key_id));
    }
    spec.keys.erase(k);
  }
  HF_RETURN_IF_ERROR(store_->Write(
      [&](store::Tx& tx) { return tx.PutInferenceObject("endpoint", endpoint, EndpointToStored(spec)); }));
  MutexLock lock(mu_);
  auto ei = endpoints_.find(endpoint);
  if (ei != endpoints_.end()) ei->second.spec.keys = spec.keys;
  return Status::Ok();
}

std::vector<InferenceService::ModelCounts> InferenceService::ModelMetrics() const {
  MutexLock lock(mu_);
  std::vector<ModelCounts> out;
  for (const auto& [name, m] : models_) {
    if (m.deleted) continue;
    ModelCounts c{name, 0, m.desired, 0, static_cast<int>(m.queue.size())};
    for (const auto& [id, r] : m.replicas) {
      c.ready += (r.ready && !r.draining) ? 1 : 0;
      c.inflight += r.live->inflight.load();
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<InferenceService::EndpointCounts> InferenceService::EndpointMetrics() const {
  MutexLock lock(mu_);
  std::vector<EndpointCounts> out;
  for (const auto& [name, e] : endpoints_) {
    out.push_back({name, e.stats->requests.load(), e.stats->errors.load()});
  }
  return out;
}

std::map<TaskKey, std::string> InferenceService::ReplicaModels() const {
  MutexLock lock(mu_);
  return replica_model_;
}

// ---------------------------------------------------------------------------
// The gateway

bool InferenceService::IsGatewayPath(const std::string& path) {
  for (const char* prefix : kGatewayPrefixes) {
    if (path.starts_with(prefix)) return true;
  }
  return false;
}

namespace {

// An endpoint as OpenAI's Model object: the id clients put in "model".
// `created`: when its deployment was created (0 while it has none).
json OpenAiModel(const std::string& name, int64_t created_at_ms) {
  return {{"id", name}, {"object", "model"}, {"created", created_at_ms / 1000}, {"owned_by", "heteroflow"}};
}

// The SHA-256 of the request's bearer key, when it has one.
std::optional<std::string> BearerKeyHash(const Request& req) {
  if (auto h = req.Header("Authorization"); h && h->starts_with("Bearer ")) return Sha256Hex(h->substr(7));
  return std::nullopt;
}

}  // namespace

Response InferenceService::ListOpenAiModels(const Request& req) const {
  const std::optional<std::string> key_hash = BearerKeyHash(req);
  json data = json::array();
  MutexLock lock(mu_);
  for (const auto& [name, e] : endpoints_) {
    const bool allowed = e.spec.public_access ||
                         (key_hash && std::any_of(e.spec.keys.begin(), e.spec.keys.end(),
                                                  [&](const EndpointKey& k) { return k.hash == *key_hash; }));
    if (!allowed) continue;
    const auto m = models_.find(e.spec.model);
    data.push_back(OpenAiModel(name, m == models_.end() ? 0 : m->second.created_at_ms));
  }
  return JsonResponse(200, json{{"object", "list"}, {"data", data}});
}

Response InferenceService::RetrieveOpenAiModel(const Request& req, const std::string& name) const {
  const std::optional<std::string> key_hash = BearerKeyHash(req);
  MutexLock lock(mu_);
  const auto ei = endpoints_.find(name);
  if (ei == endpoints_.end()) {
    return JsonError(404, "not_found", "no inference endpoint named \"" + json_fields::Truncate(name) + "\"");
  }
  const EndpointSpec& spec = ei->second.spec;
  if (!spec.public_access) {
    if (!key_hash) {
      return JsonError(401, "unauthorized", "endpoint " + spec.name + " needs an API key: Authorization: Bearer <key>");
    }
    if (std::none_of(spec.keys.begin(), spec.keys.end(), [&](const EndpointKey& k) { return k.hash == *key_hash; })) {
      return JsonError(401, "unauthorized", "invalid API key for endpoint " + spec.name);
    }
  }
  const auto m = models_.find(spec.model);
  return JsonResponse(200, OpenAiModel(name, m == models_.end() ? 0 : m->second.created_at_ms));
}

Response InferenceService::Gateway(const Request& req) {
  auto call = std::make_shared<Call>();
  call->method = req.method;
  std::optional<json> openai_body;
  if (req.path.starts_with("/inference/v1/")) {
    if (req.method == "GET" && req.path == "/inference/v1/models") return ListOpenAiModels(req);
    constexpr std::string_view kModelPrefix = "/inference/v1/models/";
    if (req.method == "GET" && req.path.starts_with(kModelPrefix) && req.path.size() > kModelPrefix.size() &&
        req.path.find('/', kModelPrefix.size()) == std::string::npos) {
      return RetrieveOpenAiModel(req, req.path.substr(kModelPrefix.size()));
    }
    if (req.method != "POST") {
      return JsonError(405, "method_not_allowed",
                       "OpenAI-style routes take POST with a JSON body naming the endpoint in \"model\" "
                       "(and GET for /inference/v1/models and /inference/v1/models/{endpoint})");
    }
    // Depth-limited like every API body: the body is serialised again.
    Result<json> parsed = ParseJsonBody(req.body);
    if (!parsed.ok() || !parsed->is_object()) {
      return JsonError(400, "bad_request",
                       "the body must be a JSON object" +
                           (parsed.ok() ? std::string() : ": " + parsed.status().message()));
    }
    json& body = *parsed;
    if (!body.contains("model") || !body["model"].is_string()) {
      return JsonError(400, "bad_request", "model is required: the name of an inference endpoint");
    }
    call->endpoint = body["model"].get<std::string>();
    call->target = http::EncodePath(req.path.substr(std::string_view("/inference").size())) + http::EncodeQuery(req);
    openai_body = std::move(body);
  } else {
    const std::string rest = req.path.substr(std::string_view("/serve/").size());
    const size_t slash = rest.find('/');
    call->endpoint = rest.substr(0, slash);
    call->target =
        (slash == std::string::npos ? std::string("/") : http::EncodePath(rest.substr(slash))) + http::EncodeQuery(req);
    call->body = req.body;
  }
  // Hashed before taking the lock: SHA-256 is the costliest step here.
  std::optional<std::string> key_hash;
  if (auto h = req.Header("Authorization"); h && h->starts_with("Bearer ")) {
    key_hash = Sha256Hex(h->substr(7));
  }
  {
    MutexLock lock(mu_);
    auto ei = endpoints_.find(call->endpoint);
    if (ei == endpoints_.end()) {
      return JsonError(404, "not_found",
                       "no inference endpoint named \"" + json_fields::Truncate(call->endpoint) + "\"");
    }
    const Endpoint& e = ei->second;
    if (!e.spec.public_access) {
      if (!key_hash) {
        return JsonError(401, "unauthorized",
                         "endpoint " + e.spec.name + " needs an API key: Authorization: Bearer <key>");
      }
      if (std::none_of(e.spec.keys.begin(), e.spec.keys.end(),
                       [&](const EndpointKey& k) { return k.hash == *key_hash; })) {
        return JsonError(401, "unauthorized", "invalid API key for endpoint " + e.spec.name);
      }
    }
    auto mi = models_.find(e.spec.model);
    if (mi == models_.end() || mi->second.deleted) {
      return JsonError(503, "unavailable", "endpoint " + e.spec.name + " routes to model " +
                                               e.spec.model + ", which does not exist");
    }
    call->model = e.spec.model;
    call->stats = e.stats;
    if (openai_body) {
      // Replicas serve the model under its id, not the endpoint's name.
      (*openai_body)["model"] = mi->second.spec.model;
      call->body = openai_body->dump();
    }
  }
  // The endpoint key stays here; hop-by-hop headers, Host and
  // Content-Length are the upstream client's to drop.
  for (const auto& [name, value] : req.headers) {
    if (!IEquals(name, "Authorization")) call->headers.emplace_back(name, value);
  }
  call->headers.emplace_back("X-Forwarded-For", req.remote_address);
  call->stats->inflight.fetch_add(1);
  Response r;
  r.defer = [this, call](Reply reply) {
    call->reply = std::move(reply);
    Dispatch(call);
  };
  return r;
}

void InferenceService::Dispatch(std::shared_ptr<Call> call) {
  MutexLock lock(mu_);
  auto mi = models_.find(call->model);
  if (stop_ || mi == models_.end() || mi->second.deleted) {
    lock.Unlock();
    call->reply(JsonError(503, "unavailable", "model " + call->model + " is not available"));
    Finish(call, 503);
    return;
  }
  Model& m = mi->second;
  Replica* best = nullptr;
  for (auto& [id, r] : m.replicas) {
    if (!r.ready || r.draining || call->tried.count(id) != 0) continue;
    if (best == nullptr || r.live->inflight.load() < best->live->inflight.load()) best = &r;
  }
  if (best == nullptr) {
    // The answers are worded before the lock is let go: `m` lives in
    // models_, which mu_ guards.
    if (m.spec.max_replicas == 0 || (!m.spec.autoscaling.enabled && m.desired == 0)) {
      const std::string message = "model " + m.spec.name + " is stopped (" +
                                  (m.spec.max_replicas == 0 ? "max_replicas is 0"
                                                            : "min_replicas is 0 without autoscaling") +
                                  ")";
      lock.Unlock();
      call->reply(JsonError(503, "unavailable", message));
      Finish(call, 503);
      return;
    }
    if (static_cast<int32_t>(m.queue.size()) >= m.spec.autoscaling.queue_size) {
      const std::string message = "model " + call->model + " has no ready replica and " +
                                  std::to_string(m.spec.autoscaling.queue_size) +
                                  " requests already wait for one (" + StatusLocked(m).second + ")";
      lock.Unlock();
      call->reply(JsonError(503, "unavailable", message));
      Finish(call, 503);
      return;
    }
    call->deadline_ms = clock_->NowMs() + static_cast<int64_t>(m.spec.autoscaling.cold_start_timeout_s * 1000);
    m.queue.push_back(call);
    cv_.notify_all();
    return;
  }
  best->live->inflight.fetch_add(1);
  const std::string host = best->host;
  const uint16_t port = best->port;
  const TaskKey id = best->id;
  std::shared_ptr<ReplicaLive> live = best->live;
  lock.Unlock();
  Forward(std::move(call), host, port, id, std::move(live));
}

void InferenceService::Forward(std::shared_ptr<Call> call, const std::string& host, uint16_t port,
                               TaskKey replica, std::shared_ptr<ReplicaLive> live) {
  ++call->attempts;
  UpstreamRequest u;
  u.host = host;
  u.port = port;
  u.method = call->method;
  u.target = call->target;
  u.headers = call->headers;
  u.body = call->body;
  u.connect_timeout = options_.connect_timeout;
  u.header_timeout = options_.response_timeout;
  u.idle_timeout = options_.response_timeout;
  http::RelayHandlers h;
  h.decorate = [replica](Response& r) { r.SetHeader("X-HeteroFlow-Replica", std::to_string(replica)); };
  h.on_done = [this, call, replica, live, host, port](const UpstreamResult& res, bool answered,
                                                       int status) {
    live->inflight.fetch_sub(1);
    if (answered) {
      Finish(call, res.status.ok() ? status : 502);
      return;
    }
    const std::string why = "replica task " + std::to_string(replica) + " at " + Address(host, port) +
                            ": " + res.status.message();
    if (res.not_sent || !res.timed_out) {
      // Refused, reset or closed before any answer: the replica is gone or
      // going (a process that dies may still have its kernel accept the
      // connection). Take it out of rotation and try another, or wait for
      // one. An inference call has no side effects, so a request that may
      // have reached a dying replica is safe to send again.
      {
        MutexLock lock(mu_);
        auto mi = replica_model_.find(replica);
        if (mi != replica_model_.end() && models_.count(mi->second) != 0) {
          Model& m = models_.at(mi->second);
          auto ri = m.replicas.find(replica);
          if (ri != m.replicas.end()) {
            ri->second.health_error = "connection failed: " + res.status.message();
            MarkUnreadyLocked(m, ri->second, ri->second.health_error);
            ri->second.last_check_ms = 0;
          }
        }
      }
      if (call->attempts < kMaxAttempts) {
        call->tried.insert(replica);
        Dispatch(call);
        return;
      }
    }
    const int code = res.timed_out ? 504 : 502;
    call->reply(JsonError(code, res.timed_out ? "gateway_timeout" : "bad_gateway", why));
    Finish(call, code);
  };
  http::Relay(*upstream_, std::move(u), call->reply, std::move(h));
}

void InferenceService::Finish(const std::shared_ptr<Call>& call, int status) {
  if (call->finished.exchange(true)) return;
  EndpointStats& s = *call->stats;
  s.inflight.fetch_sub(1);
  s.requests.fetch_add(1);
  if (status >= 500) s.errors.fetch_add(1);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - call->start).count();
  MutexLock lock(s.mu);
  if (s.latencies_ms.size() < kLatencyWindow) {
    s.latencies_ms.push_back(ms);
  } else {
    s.latencies_ms[s.latency_next] = ms;
  }
  s.latency_next = (s.latency_next + 1) % kLatencyWindow;
  const int64_t now = clock_->NowMs();
  s.recent_ms.push_back(now);
  while (!s.recent_ms.empty() && s.recent_ms.front() < now - kRateWindowMs) s.recent_ms.pop_front();
}

}  // namespace hf::inference
