#include "server/control_plane.h"

#include <sched.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "core/log.h"
#include "core/model_json.h"
#include "core/private_files.h"
#include "framework/registry.h"
#include "queues/queue_tree.h"
#include "http/client.h"
#include "http/relay.h"
#include "server/auth.h"
#include "server/codec.h"

namespace hf::server {

using http::HttpServer;
using http::HttpServerOptions;
using http::JsonError;
using http::JsonResponse;
using http::Reply;
using http::Request;
using http::Response;
using inference::InferenceService;
using scheduler::Scheduler;
using scheduler::SchedulerOptions;

namespace {

// The CPUs this process may run on (its affinity: taskset, a cgroup's
// cpuset), at least 1.
int UsableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

using nlohmann::json;

Result<framework::SchedulerConfig> SchedulerConfigFromJson(const json& j) {
  framework::SchedulerConfig c;
  if (!j.is_object()) return Internal("stored scheduler config is not an object");
  for (auto& [key, field] : {std::pair<const char*, double*>{"load_threshold", &c.load_threshold},
                             {"gpu_load_threshold", &c.gpu_load_threshold},
                             {"memory_threshold", &c.memory_threshold}}) {
    auto it = j.find(key);
    if (it == j.end()) continue;
    if (!it->is_number()) return Internal(std::string("stored scheduler.") + key + " is not a number");
    *field = it->get<double>();
  }
  if (auto it = j.find("percentage_of_nodes_to_score"); it != j.end()) {
    if (!it->is_number_integer()) {
      return Internal("stored scheduler.percentage_of_nodes_to_score is not an integer");
    }
    c.percentage_of_nodes_to_score = int(std::clamp<int64_t>(it->get<int64_t>(), -1, 101));
  }
  // Absent in a config stored before it existed: the default stays.
  if (auto it = j.find("exclusive_gpu_vendors"); it != j.end()) {
    if (!it->is_array() || !std::all_of(it->begin(), it->end(), [](const json& e) {
          return e.is_string();
        })) {
      return Internal("stored scheduler.exclusive_gpu_vendors is not a list of names");
    }
    c.exclusive_gpu_vendors = it->get<std::vector<std::string>>();
  }
  Status s = c.Validate();
  if (!s.ok()) return s;
  return c;
}

// A thread that calls fn every `period` until it is asked to stop.
std::jthread Periodic(std::chrono::milliseconds period, std::function<void()> fn) {
  return std::jthread([period, fn = std::move(fn)](std::stop_token stop) {
    std::mutex m;  // guards nothing: the wait wants a lock
    std::condition_variable_any cv;
    std::unique_lock lock(m);
    while (!cv.wait_for(lock, stop, period, [] { return false; })) {
      if (stop.stop_requested()) break;
      fn();
    }
  });
}

}  // namespace

int ServerOptions::heartbeat_interval_s() const {
  return std::max(1, std::min(5, static_cast<int>(node_grace_period_s / 3)));
}

ControlPlane::ControlPlane(ServerOptions options) : options_(std::move(options)) {}

ControlPlane::~ControlPlane() { Stop(); }

Status ControlPlane::Init() {
  // Owner only (0700), refused when others may write it (docs/SECURITY.md).
  Status dir = MakePrivateDir(options_.data_dir);
  if (!dir.ok()) return Status(dir.code(), "data dir: " + dir.message());
  // One server per store: held until this control plane is destroyed.
  HF_ASSIGN_OR_RETURN(DirLock lock, DirLock::Acquire(options_.data_dir));
  data_dir_lock_.emplace(std::move(lock));
  store::StoreOptions so;
  so.clock = &clock_;
  // SQLite: one server per file. PostgreSQL: any number of replicas, one
  // of them the leader (docs/HA.md).
  so.exclusive = !ha();
  Result<std::unique_ptr<store::Store>> st =
      store::Store::Open(options_.store.empty() ? options_.data_dir + "/heteroflow.db" : options_.store, so);
  // A replica that stepped down (it lost the database, say, while a
  // standby is promoted) waits for the database rather than exit.
  for (int tries = 1; ha() && options_.wait_for_store && !st.ok() &&
                      st.status().code() == StatusCode::kUnavailable;
       ++tries) {
    if (tries % 10 == 1) spdlog::warn("server: waiting for the database: {}", st.status().message());
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    st = store::Store::Open(options_.store, so);
  }
  if (!st.ok()) return st.status();
  store_ = std::move(st).value();
  RegisterMetrics();
  auth_ = std::make_unique<Authenticator>(*store_, clock_, options_.auth_failure_burst,
                                          *m_.auth_failures);
  ui_ = std::make_unique<api::UiApi>(options_.ui_dir);
  if (!ha()) return BuildLeader();
  forward_ = std::make_unique<http::UpstreamClient>(http::UpstreamOptions{});
  return Status::Ok();
}

Status ControlPlane::BuildLeader() {
  HF_RETURN_IF_ERROR(BootstrapAdminToken());
  HF_RETURN_IF_ERROR(auth_->Reload());
  HF_ASSIGN_OR_RETURN(std::unique_ptr<framework::Framework> framework, LoadPolicy());
  views_.Refresh(*framework);
  SchedulerOptions so_opts;
  so_opts.on_attempt = [this](std::string_view result, double secs) {
    m_.attempts->With({result}).Inc();
    m_.attempt_duration->With({result}).Observe(secs);
  };
  so_opts.on_plugin_timings = [this](const std::vector<framework::PluginTiming>& timings) {
    for (const framework::PluginTiming& t : timings) {
      m_.plugin_duration->With({t.plugin, t.point}).Observe(t.seconds);
    }
  };
  so_opts.on_commit_failure = [this](size_t n) {
    m_.attempts->With({"error"}).Inc(static_cast<double>(n));
  };
  so_opts.on_policy_change = [this](const framework::Framework& fw) { views_.Refresh(fw); };
  so_opts.on_preemption = [this](size_t victims) { m_.victims->Inc(static_cast<double>(victims)); };
  scheduler_ = std::make_unique<Scheduler>(store_.get(), std::move(framework), &clock_, &events_,
                                           std::move(so_opts));
  scheduler_->set_heartbeat_grace(std::chrono::milliseconds(
      static_cast<int64_t>(options_.node_grace_period_s * 1000)));
  scheduler_->set_fencing(
      std::chrono::milliseconds(static_cast<int64_t>(options_.fence_after_s * 1000)),
      std::chrono::milliseconds(static_cast<int64_t>(options_.fence_grace_s * 1000)));
  scheduler_->set_node_loss_storm(options_.node_loss_storm_fraction);
  HF_RETURN_IF_ERROR(RegisterDeclaredNodes());
  HF_RETURN_IF_ERROR(scheduler_->Recover());
  HF_RETURN_IF_ERROR(SeedDeclaredQueues());
  inference_ = std::make_unique<InferenceService>(store_.get(), scheduler_.get(), &events_, &clock_);
  HF_RETURN_IF_ERROR(inference_->Recover());
  AddRoutes();
  return Status::Ok();
}

void ControlPlane::StartLeader() {
  scheduler_->Start();
  inference_->Start();
  pinger_ = Periodic(std::chrono::seconds(15), [this] { events_.Ping(); });
  // (The scheduler watches the plugins' outside sources itself.)
  ready_ = true;
  leading_.store(true, std::memory_order_release);
}

void ControlPlane::OnElected(int64_t epoch) {
  // From here on the database refuses whatever this replica commits once
  // another one leads.
  store_->SetFence(epoch, [this](const Status& refusal) { StepDown(refusal.message()); });
  // Recovery reads the whole cluster; the elector must go on renewing
  // meanwhile.
  promote_ = std::jthread([this, epoch] {
    const auto t0 = std::chrono::steady_clock::now();
    Status s = BuildLeader();
    if (!s.ok()) {
      StepDown("cannot take over at epoch " + std::to_string(epoch) + ": " + s.ToString());
      return;
    }
    StartLeader();
    spdlog::info("server: leading at epoch {}, state recovered from the store in {} ms", epoch,
                 std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count());
  });
}

void ControlPlane::StepDown(const std::string& why) {
  MutexLock lock(step_mu_);
  if (step_down_.has_value()) return;
  step_down_ = why;
  step_cv_.notify_all();
}

std::optional<std::string> ControlPlane::WaitForStepDown(std::chrono::milliseconds timeout) {
  MutexLock lock(step_mu_);
  if (!step_down_.has_value()) lock.WaitFor(step_cv_, timeout);
  return step_down_;
}

void ControlPlane::RegisterMetrics() {
  auto must = [](auto r) {
    HF_CHECK(r.ok());
    return *r;
  };
  m_.attempts = must(metrics_.AddCounter("heteroflow_scheduler_schedule_attempts_total",
                                         "Scheduling attempts by result.", {"result"}));
  m_.attempt_duration = must(metrics_.AddHistogram(
      "heteroflow_scheduler_scheduling_attempt_duration_seconds",
      "Time to run the framework for one task, by result.", {"result"}));
  m_.attempts->With({"error"});
  for (const char* r : {"scheduled", "unschedulable"}) {
    m_.attempts->With({r});
    m_.attempt_duration->With({r});
  }
  m_.plugin_duration = must(metrics_.AddHistogram(
      "heteroflow_scheduler_plugin_execution_duration_seconds",
      "Time one plugin took at one extension point (one attempt in 10 is timed).",
      {"plugin", "extension_point"}));
  m_.victims = &must(metrics_.AddCounter("heteroflow_scheduler_preemption_victims_total",
                                         "Tasks evicted by preemption."))->With();
  HF_CHECK(metrics_.AddCollector(
      "heteroflow_scheduler_pending_tasks", "Tasks waiting: to be tried (active) or tried and "
      "found unschedulable.", MetricType::kGauge, {"queue"}, [this] {
        if (!leading()) return std::vector<CollectedSample>{};
        return std::vector<CollectedSample>{
            {{"active"}, static_cast<double>(scheduler_->active_count())},
            {{"unschedulable"}, static_cast<double>(scheduler_->unschedulable_count())}};
      }).ok());
  // Per node, GPU milli allocated (total: false) or in all (true).
  const auto gpu_milli = [this](bool total) {
    return [this, total] {
      std::vector<CollectedSample> rows;
      if (!leading()) return rows;
      for (const auto& [node, used, all] : scheduler_->GpuAllocation()) {
        rows.push_back({{node}, static_cast<double>(total ? all : used)});
      }
      return rows;
    };
  };
  HF_CHECK(metrics_.AddCollector("heteroflow_node_gpu_milli_allocated",
                                 "GPU share allocated on a node (1000 = one GPU).",
                                 MetricType::kGauge, {"node"}, gpu_milli(false)).ok());
  HF_CHECK(metrics_.AddCollector("heteroflow_node_gpu_milli_capacity",
                                 "GPU capacity of a node (1000 = one GPU).", MetricType::kGauge,
                                 {"node"}, gpu_milli(true)).ok());
  // Queues (docs/QUEUES.md): per queue and GPU model, what GET /api/v1/queues shows.
  using QueueRows = std::function<void(const scheduler::Scheduler::QueuesView&,
                                       std::vector<CollectedSample>&)>;
  struct QueueGauge {
    const char* name;
    const char* help;
    std::vector<std::string> labels;
    QueueRows rows;
  };
  const auto per_model = [](auto amount) -> QueueRows {
    return [amount](const scheduler::Scheduler::QueuesView& v, std::vector<CollectedSample>& rows) {
      for (const auto& q : v.queues) {
        for (size_t m = 0; m < v.models.size(); ++m) {
          const std::optional<double> gpus = amount(q, v.models[m], m);
          if (gpus) rows.push_back({{q.spec.name, v.models[m]}, *gpus});
        }
      }
    };
  };
  using QS = scheduler::Scheduler::QueueStatus;
  const auto gpus = [](int64_t milli) { return double(milli) / kWholeGpuMilli; };
  for (const QueueGauge& g : {
           QueueGauge{"heteroflow_queue_gpus_used", "GPUs a queue's tasks hold, with its descendants'.",
                      {"queue", "model"}, per_model([gpus](const QS& q, const std::string&, size_t m) {
                        return std::optional<double>(gpus(q.used.gpu_milli[m]));
                      })},
           QueueGauge{"heteroflow_queue_gpus_borrowed", "GPUs a queue holds above its guarantee.",
                      {"queue", "model"}, per_model([gpus](const QS& q, const std::string&, size_t m) {
                        return std::optional<double>(gpus(q.borrowed.gpu_milli[m]));
                      })},
           QueueGauge{"heteroflow_queue_gpus_guaranteed", "GPUs a queue is guaranteed.",
                      {"queue", "model"}, per_model([gpus](const QS& q, const std::string& model, size_t) {
                        return std::optional<double>(gpus(q.spec.guaranteed.Gpu(model).value_or(0)));
                      })},
           QueueGauge{"heteroflow_queue_gpus_max", "GPUs a queue may hold at most (queues with a limit).",
                      {"queue", "model"}, per_model([gpus](const QS& q, const std::string& model, size_t) {
                        const std::optional<int64_t> max = q.spec.max.Gpu(model);
                        return max ? std::optional<double>(gpus(*max)) : std::nullopt;
                      })},
           QueueGauge{"heteroflow_queue_dominant_share",
                      "The largest fraction of any one resource of the cluster a queue holds.",
                      {"queue"},
                      [](const scheduler::Scheduler::QueuesView& v, std::vector<CollectedSample>& rows) {
                        for (const auto& q : v.queues) rows.push_back({{q.spec.name}, q.share});
                      }},
           QueueGauge{"heteroflow_queue_weight", "A queue's weight among its siblings.", {"queue"},
                      [](const scheduler::Scheduler::QueuesView& v, std::vector<CollectedSample>& rows) {
                        for (const auto& q : v.queues) rows.push_back({{q.spec.name}, q.spec.weight});
                      }},
           QueueGauge{"heteroflow_queue_tasks",
                      "A queue's tasks, with its descendants': pending, admitted (placed, not "
                      "started) or running.",
                      {"queue", "state"},
                      [](const scheduler::Scheduler::QueuesView& v, std::vector<CollectedSample>& rows) {
                        for (const auto& q : v.queues) {
                          rows.push_back({{q.spec.name, "pending"}, double(q.pending)});
                          rows.push_back({{q.spec.name, "admitted"}, double(q.admitted)});
                          rows.push_back({{q.spec.name, "running"}, double(q.running)});
                        }
                      }}}) {
    HF_CHECK(metrics_.AddCollector(g.name, g.help, MetricType::kGauge, g.labels, [this, rows = g.rows] {
      std::vector<CollectedSample> out;
      if (leading()) rows(scheduler_->Queues(), out);
      return out;
    }).ok());
  }
  // Inference: one collector per figure, each reading the service's counts.
  using Counts = InferenceService::ModelCounts;
  struct ModelGauge {
    const char* name;
    const char* help;
    int Counts::*field;
  };
  for (const ModelGauge& g : {
           ModelGauge{"heteroflow_inference_replicas_ready", "Ready replicas of a model.", &Counts::ready},
           ModelGauge{"heteroflow_inference_replicas_desired", "Replicas a model should have.",
                      &Counts::desired},
           ModelGauge{"heteroflow_inference_inflight_requests", "Requests a model's replicas are answering.",
                      &Counts::inflight},
           ModelGauge{"heteroflow_inference_queued_requests", "Requests waiting for a ready replica.",
                      &Counts::queued}}) {
    HF_CHECK(metrics_.AddCollector(g.name, g.help, MetricType::kGauge, {"model"}, [this, field = g.field] {
      std::vector<CollectedSample> rows;
      if (!leading()) return rows;
      for (const Counts& c : inference_->ModelMetrics()) {
        rows.push_back({{c.model}, static_cast<double>(c.*field)});
      }
      return rows;
    }).ok());
  }
  HF_CHECK(metrics_.AddCollector(
      "heteroflow_inference_endpoint_requests_total",
      "Requests answered through an inference endpoint, by outcome (error: 5xx).",
      MetricType::kCounter, {"endpoint", "outcome"}, [this] {
        std::vector<CollectedSample> rows;
        if (!leading()) return rows;
        for (const auto& e : inference_->EndpointMetrics()) {
          rows.push_back({{e.endpoint, "ok"}, static_cast<double>(e.requests - e.errors)});
          rows.push_back({{e.endpoint, "error"}, static_cast<double>(e.errors)});
        }
        return rows;
      }).ok());
  m_.http_requests = must(metrics_.AddCounter("heteroflow_http_requests_total",
                                              "HTTP requests answered, by method and status.",
                                              {"method", "code"}));
  m_.http_duration = must(metrics_.AddHistogram("heteroflow_http_request_duration_seconds",
                                                "Time to answer an HTTP request.", {}));
  // The store's group commit: writes per commit is the mean group size.
  HF_CHECK(metrics_.AddCollector(
      "heteroflow_store_commits_total",
      "Transactions the store committed for writes, one fsync each (group commit).",
      MetricType::kCounter, {}, [this] {
        std::vector<CollectedSample> rows;
        if (store_) rows.push_back({{}, static_cast<double>(store_->commits())});
        return rows;
      }).ok());
  HF_CHECK(metrics_.AddCollector(
      "heteroflow_store_writes_total",
      "Writes the store committed; several share one commit when they arrive together.",
      MetricType::kCounter, {}, [this] {
        std::vector<CollectedSample> rows;
        if (store_) rows.push_back({{}, static_cast<double>(store_->writes())});
        return rows;
      }).ok());
  HF_CHECK(metrics_.AddCollector(
      "heteroflow_node_requeue_held",
      "1 while requeues of silent nodes' tasks are held because too many nodes went silent at "
      "once (--node-loss-storm-fraction), else 0.",
      MetricType::kGauge, {}, [this] {
        std::vector<CollectedSample> rows;
        if (leading()) rows.push_back({{}, scheduler_->requeue_held() ? 1.0 : 0.0});
        return rows;
      }).ok());
  HF_CHECK(metrics_.AddCollector(
      "heteroflow_http_connections_open", "Client connections open now.", MetricType::kGauge, {},
      [this] {
        std::vector<CollectedSample> rows;
        if (http_) rows.push_back({{}, static_cast<double>(http_->stats().open)});
        return rows;
      }).ok());
  HF_CHECK(metrics_.AddCollector(
      "heteroflow_http_connections_closed_total",
      "Client connections the server closed for want of room: evicted (a quiet one, to make "
      "room for a new one) or refused (a new one answered 503, none being quiet).",
      MetricType::kCounter, {"reason"}, [this] {
        std::vector<CollectedSample> rows;
        if (!http_) return rows;
        const HttpServer::Stats s = http_->stats();
        rows.push_back({{"evicted"}, static_cast<double>(s.evicted)});
        rows.push_back({{"refused"}, static_cast<double>(s.refused)});
        return rows;
      }).ok());
  // Replicas (docs/HA.md): this one's role, and how old the lease is as it
  // last saw it renewed.
  HF_CHECK(metrics_.AddCollector(
      "heteroflow_leader", "1 when this replica leads the control plane (always, with SQLite), "
      "else 0.", MetricType::kGauge, {"replica"}, [this] {
        return std::vector<CollectedSample>{
            {{options_.replica}, leading() ? 1.0 : 0.0}};
      }).ok());
  HF_CHECK(metrics_.AddCollector(
      "heteroflow_leader_lease_age_seconds",
      "Seconds since the leader's lease was last seen renewed, by this replica (absent with SQLite).",
      MetricType::kGauge, {}, [this] {
        std::vector<CollectedSample> rows;
        if (!elector_ready_.load(std::memory_order_acquire)) return rows;
        if (const int64_t age = elector_->lease_age_ms(); age >= 0) {
          rows.push_back({{}, static_cast<double>(age) / 1000.0});
        }
        return rows;
      }).ok());
  HF_CHECK(metrics_.AddCollector(
      "heteroflow_leader_epoch", "The leader lease's epoch as this replica last read it.",
      MetricType::kGauge, {}, [this] {
        std::vector<CollectedSample> rows;
        if (elector_ready_.load(std::memory_order_acquire)) {
          rows.push_back({{}, static_cast<double>(elector_->lease().epoch)});
        }
        return rows;
      }).ok());
  m_.auth_failures = must(metrics_.AddCounter(
      "heteroflow_http_auth_failures_total",
      "Requests refused for their token: unauthenticated (401), or throttled (429) while their "
      "address has failed too often.",
      {"outcome"}));
}

Status ControlPlane::SeedDeclaredQueues() {
  if (options_.config_path.empty()) return Status::Ok();
  HF_ASSIGN_OR_RETURN(json block, framework::LoadConfigBlock(options_.config_path, "queues"));
  if (block.is_null()) return Status::Ok();
  if (!block.is_array()) return InvalidArgument(options_.config_path + ": queues must be a list");
  std::vector<queues::QueueSpec> specs;
  for (size_t i = 0; i < block.size(); ++i) {
    Result<queues::QueueSpec> spec =
        queues::QueueSpecFromJson(block[i], "queues[" + std::to_string(i) + "]");
    if (!spec.ok()) return InvalidArgument(options_.config_path + ": " + spec.status().message());
    specs.push_back(std::move(*spec));
  }
  Status s = scheduler_->SeedQueues(specs, "config");
  if (!s.ok()) return InvalidArgument(options_.config_path + ": " + s.message());
  return Status::Ok();
}

Status ControlPlane::RegisterDeclaredNodes() {
  if (options_.config_path.empty()) return Status::Ok();
  HF_ASSIGN_OR_RETURN(json nodes, framework::LoadConfigBlock(options_.config_path, "nodes"));
  if (nodes.is_null()) return Status::Ok();
  if (!nodes.is_array()) return InvalidArgument(options_.config_path + ": nodes must be a list");
  std::vector<NodeSpec> specs;
  for (size_t i = 0; i < nodes.size(); ++i) {
    Result<NodeSpec> spec = NodeSpecFromJson(nodes[i]);
    if (!spec.ok()) {
      return InvalidArgument(options_.config_path + ": nodes[" + std::to_string(i) + "]: " +
                             spec.status().message());
    }
    specs.push_back(std::move(spec).value());
  }
  // Nodes already stored keep their stored spec: the API's changes win.
  return store_->Write([&](store::Tx& tx) -> Status {
    for (const NodeSpec& spec : specs) {
      Result<store::NodeRecord> existing = tx.GetNode(spec.name);
      if (existing.ok()) continue;
      if (existing.status().code() != StatusCode::kNotFound) return existing.status();
      HF_RETURN_IF_ERROR(tx.PutNode(spec));
    }
    return Status::Ok();
  });
}

Status ControlPlane::BootstrapAdminToken() {
  bool has_tokens = false;
  Status s = store_->Read([&](const store::ReadTx& tx) -> Status {
    Result<std::vector<store::TokenRecord>> t = tx.ListTokens();
    if (!t.ok()) return t.status();
    has_tokens = !t->empty();
    return Status::Ok();
  });
  if (!s.ok() || has_tokens) return s;
  const char* env = std::getenv("HETEROFLOW_ADMIN_TOKEN");
  const bool generated = env == nullptr || *env == '\0';
  const std::string token = generated ? GenerateToken() : std::string(env);
  s = store_->Write([&](store::Tx& tx) -> Status {
    Result<int64_t> id = tx.InsertToken("admin", RoleName(Role::kAdmin), HashToken(token), std::nullopt);
    return id.ok() ? Status::Ok() : id.status();
  });
  if (!s.ok() || !generated) return s;
  const std::string path = options_.data_dir + "/admin.token";
  HF_RETURN_IF_ERROR(WriteSecretFile(path, token + "\n"));
  std::printf("admin token: %s\n(also written to %s; it is shown only once)\n", token.c_str(),
              path.c_str());
  std::fflush(stdout);
  return Status::Ok();
}

Result<std::unique_ptr<framework::Framework>> ControlPlane::LoadPolicy() {
  framework::Policy policy;
  bool stored = false;
  Status s = store_->Read([&](const store::ReadTx& tx) -> Status {
    Result<std::map<std::string, json>> plugins = tx.ListPluginConfigs();
    if (!plugins.ok()) return plugins.status();
    Result<json> sched = tx.GetSchedulerConfig();
    if (!sched.ok() && sched.status().code() != StatusCode::kNotFound) return sched.status();
    stored = !plugins->empty() || sched.ok();
    policy.plugins = *plugins;
    if (sched.ok()) {
      Result<framework::SchedulerConfig> c = SchedulerConfigFromJson(*sched);
      if (!c.ok()) return c.status();
      policy.scheduler = *c;
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  if (!stored && !options_.config_path.empty()) {
    Result<framework::Policy> p = framework::LoadPolicyFile(options_.config_path);
    if (!p.ok()) return p.status();
    policy = std::move(p).value();
  }
  HF_ASSIGN_OR_RETURN(std::unique_ptr<framework::Framework> fw,
                      framework::Framework::Create(plugins::InTreeRegistry(), policy, &clock_));
  if (stored) {
    HF_RETURN_IF_ERROR(ReportConfigDrift(*fw));
    return fw;
  }
  const framework::Policy current = fw->CurrentPolicy();
  HF_RETURN_IF_ERROR(store_->Write([&](store::Tx& tx) -> Status {
    for (const auto& [name, settings] : current.plugins) {
      Status ps = tx.PutPluginConfig(name, settings);
      if (!ps.ok()) return ps;
    }
    return tx.PutSchedulerConfig(current.scheduler.ToJson());
  }));
  return fw;
}

Status ControlPlane::ReportConfigDrift(const framework::Framework& stored) const {
  if (options_.config_path.empty()) return Status::Ok();
  HF_ASSIGN_OR_RETURN(framework::Policy file_policy, framework::LoadPolicyFile(options_.config_path));
  HF_ASSIGN_OR_RETURN(auto file_fw,
                      framework::Framework::Create(plugins::InTreeRegistry(), file_policy, &clock_));
  const framework::Policy from_file = file_fw->CurrentPolicy();
  const framework::Policy from_store = stored.CurrentPolicy();
  std::vector<std::string> lines;
  auto compare = [&](const std::string& prefix, const json& a, const json& b) {
    std::set<std::string> keys;
    for (const auto& [k, v] : a.items()) keys.insert(k);
    for (const auto& [k, v] : b.items()) keys.insert(k);
    for (const std::string& k : keys) {
      const json fa = a.contains(k) ? a[k] : json(nullptr);
      const json fb = b.contains(k) ? b[k] : json(nullptr);
      // 1 and 1.0 are the same setting, and print as 1.
      auto show = [](const json& v) {
        if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>() &&
            std::fabs(v.get<double>()) < 1e15) {
          return json(static_cast<int64_t>(v.get<double>())).dump();
        }
        return v.dump();
      };
      if (show(fa) != show(fb)) {
        lines.push_back(prefix + k + ": file " + show(fa) + ", store " + show(fb));
      }
    }
  };
  for (const auto& [name, settings] : from_store.plugins) {
    auto it = from_file.plugins.find(name);
    compare("plugins." + name + ".", it == from_file.plugins.end() ? json::object() : it->second,
            settings);
  }
  compare("scheduler.", from_file.scheduler.ToJson(), from_store.scheduler.ToJson());
  for (const std::string& l : lines) {
    spdlog::warn("config: {} differs ({}); the stored value is used", l.substr(0, l.find(':')),
                 l.substr(l.find(':') + 2));
  }
  return Status::Ok();
}

Response ControlPlane::Handle(const Request& req) {
  const auto t0 = std::chrono::steady_clock::now();
  const bool gateway = InferenceService::IsGatewayPath(req.path);
  Response r = !leading() && (gateway || !api::UiApi::IsUiPath(req)) ? HandleFollower(req)
               : gateway                                              ? inference_->Gateway(req)
               : api::UiApi::IsUiPath(req)                            ? ui_->Serve(req)
                                                                      : routes_->Dispatch(req);
  // Methods outside the API's set are counted together, so a hostile
  // client cannot grow the label set without bound.
  static const std::set<std::string, std::less<>> kMethods = {"GET", "PUT", "POST", "DELETE"};
  std::string method = kMethods.count(req.method) ? req.method : std::string("other");
  if (r.defer) {
    // A long poll is counted when it is answered; its wait is not a
    // request duration, so it stays out of the histogram.
    r.defer = [this, method, inner = std::move(r.defer)](Reply reply) {
      inner([this, method, reply](Response res) {
        m_.http_requests->With({method, std::to_string(res.status)}).Inc();
        reply(std::move(res));
      });
    };
    return r;
  }
  m_.http_requests->With({method, std::to_string(r.status)}).Inc();
  m_.http_duration->With().Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return r;
}

json ControlPlane::RoleJson() const {
  if (!ha()) return json{{"role", "standalone"}};
  if (!elector_ready_.load(std::memory_order_acquire)) return json{{"role", "starting"}};
  const leader::LeaseView l = elector_->lease();
  json j{{"replica", options_.replica}};
  if (leading()) {
    j["role"] = "leader";
    j["epoch"] = elector_->epoch();
  } else {
    j["role"] = elector_->leading() ? "recovering" : "follower";
  }
  if (!l.holder.empty()) {
    j["leader"] = l.holder;
    j["leader_url"] = l.url;
    j["lease_epoch"] = l.epoch;
  }
  const int64_t age = elector_->lease_age_ms();
  if (age >= 0) j["lease_age_s"] = static_cast<double>(age) / 1000.0;
  return j;
}

Response ControlPlane::HandleFollower(const Request& req) {
  if (req.method == "GET" && req.path == "/livez") return api::SystemApi::Live(req);
  const json role = RoleJson();
  if (req.method == "GET" && req.path == "/readyz") {
    if (role["role"] == "starting") return JsonError(503, "unavailable", "starting");
    if (role["role"] == "recovering") {
      return JsonError(503, "unavailable", "recovering state: elected at epoch " +
                                               std::to_string(elector_->epoch()));
    }
    if (!role.contains("leader")) return JsonError(503, "unavailable", "no leader elected yet");
    json j = role;
    j["status"] = "ok";
    return JsonResponse(200, j);
  }
  if (req.method == "GET" && req.path == "/metrics") {
    // This replica's own metrics (its role, its HTTP traffic), with the
    // same token check as the leader's: tokens are read again at most once
    // a second, since a follower sees no token changes.
    {
      MutexLock lock(metrics_auth_mu_);
      const auto now = std::chrono::steady_clock::now();
      if (now - tokens_read_at_ >= std::chrono::seconds(1)) {
        if (Status s = auth_->Reload(); !s.ok()) {
          return JsonError(503, "unavailable", "cannot read the tokens: " + s.message());
        }
        tokens_read_at_ = now;
      }
    }
    Caller caller;
    Response denied;
    if (!auth_->Authorize(req, Action::kRead, caller, denied)) return denied;
    Response r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = metrics_.Render();
    return r;
  }
  Response busy = JsonError(503, "unavailable",
                            role["role"] == "recovering"
                                ? "this replica was just elected and is recovering the cluster's state"
                                : "no leader elected yet");
  busy.SetHeader("Retry-After", "1");
  if (role["role"] != "follower" || !role.contains("leader_url")) return busy;
  Result<http::ServerUrl> url = http::ParseServerUrl(role["leader_url"].get<std::string>());
  if (!url.ok()) {
    return JsonError(502, "bad_gateway", "the leader's address is unusable: " + url.status().message());
  }
  http::UpstreamRequest u;
  u.host = url->host;
  u.port = url->port;
  u.method = req.method;
  u.target = url->prefix + http::EncodePath(req.path) + http::EncodeQuery(req);
  u.headers = req.headers;
  u.headers.emplace_back("X-Forwarded-For", req.remote_address);
  u.body = req.body;
  // A long poll or an event stream may stay open long: the leader ends it.
  u.header_timeout = std::chrono::minutes(65);
  u.idle_timeout = std::chrono::minutes(65);
  const std::string leader = role["leader"].get<std::string>();
  Response r;
  r.defer = [this, u = std::move(u), leader](Reply reply) mutable {
    http::RelayHandlers h;
    h.decorate = [this](Response& res) { res.SetHeader("X-HeteroFlow-Replica", options_.replica); };
    h.on_done = [reply, leader](const http::UpstreamResult& res, bool answered, int) {
      if (answered) return;
      // The leader is gone or going: the client tries again (here, once a
      // follower leads, or at another replica).
      Response e = JsonError(503, "unavailable", "the leader " + leader + " did not answer: " +
                                                     res.status.message());
      e.SetHeader("Retry-After", "1");
      reply(std::move(e));
    };
    http::Relay(*forward_, std::move(u), reply, std::move(h));
  };
  return r;
}

Status ControlPlane::Start() {
  HttpServerOptions o;
  o.address = options_.address;
  o.port = options_.port;
  // Three sets of threads, so that one kind of traffic never waits behind
  // another: I/O for every connection, one per usable CPU up to 4 (never
  // blocking, more would only take turns on the same CPUs, each turn a
  // thread woken and switched to); the API's handlers, which block on the
  // store's fsync (enough of them that reads and health checks are not
  // stuck behind a burst of writes); and the gateway's, which never block
  // (they pick a replica and hand the call to the upstream client).
  o.worker_threads = std::min(4, UsableCpus());
  o.handler_threads = 16;
  o.handler_pools.push_back(
      {{std::begin(InferenceService::kGatewayPrefixes), std::end(InferenceService::kGatewayPrefixes)}, 4});
  // Answers kept in memory (the UI's files, routes registered inline) stay
  // on the I/O threads.
  o.runs_inline = [this](const Request& req) {
    if (InferenceService::IsGatewayPath(req.path)) return false;
    // A follower forwards, which never blocks.
    return api::UiApi::IsUiPath(req) || !leading() || routes_->RunsInline(req);
  };
  o.max_connections = options_.max_connections;
  o.max_connections_per_address = options_.max_connections_per_address;
  for (const char* prefix : InferenceService::kGatewayPrefixes) {
    o.body_limits.emplace_back(prefix, options_.gateway_max_body_bytes);
  }
  // The gateway holds a call while a replica cold-starts (up to an hour,
  // autoscaling.cold_start_timeout_s) or answers (up to 10 minutes), and
  // answers it itself when that runs out; the transport's own cut-off only
  // catches what nobody answers.
  o.deferred_timeout = std::chrono::minutes(65);
  http_ = std::make_unique<HttpServer>(o, [this](const Request& req) { return Handle(req); });
  HF_RETURN_IF_ERROR(http_->Start());
  if (!ha()) {
    StartLeader();
    return Status::Ok();
  }
  if (options_.advertise_url.empty()) {
    // The address it listens on, or loopback for a wildcard one: enough on
    // one machine; replicas on several name theirs (--advertise-url).
    std::string host = options_.address;
    if (host == "0.0.0.0" || host.empty()) host = "127.0.0.1";
    if (host == "::") host = "::1";
    if (host.find(':') != std::string::npos) host = "[" + host + "]";
    options_.advertise_url = "http://" + host + ":" + std::to_string(http_->bound_port());
  }
  if (options_.replica.empty()) options_.replica = options_.advertise_url.substr(7);
  leader::ElectorOptions eo;
  eo.uri = options_.store;
  eo.replica = options_.replica;
  eo.url = options_.advertise_url;
  const auto ms = [](double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000)); };
  eo.lease = ms(options_.leader_lease_s);
  eo.renew_deadline = ms(options_.leader_renew_deadline_s);
  eo.retry = ms(options_.leader_retry_s);
  eo.on_elected = [this](int64_t epoch) { OnElected(epoch); };
  eo.on_deposed = [this](const std::string& why) { StepDown(why); };
  HF_ASSIGN_OR_RETURN(elector_, leader::Elector::Create(std::move(eo)));
  spdlog::info("server: replica {} at {}, electing a leader on {}", options_.replica,
               options_.advertise_url, store_->path());
  elector_ready_.store(true, std::memory_order_release);
  elector_->Start();
  // Serving starts once this replica knows its role: it leads (with the
  // state recovered) or follows a leader; or, at worst, after a lease and a
  // round, when the silent leader's lease has run out.
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>((options_.leader_lease_s + 2 * options_.leader_retry_s) * 1000));
  while (std::chrono::steady_clock::now() < until) {
    const json role = RoleJson();
    if (role["role"] == "leader" || (role["role"] == "follower" && role.contains("leader"))) break;
    if (WaitForStepDown(std::chrono::milliseconds(20))) break;
  }
  return Status::Ok();
}

void ControlPlane::Stop() {
  ready_ = false;
  // No more rounds: a leader's session ends with it, so a follower takes
  // over at once.
  if (elector_) elector_->Stop();
  if (promote_.joinable()) promote_.join();
  // Inference first (it answers the requests it holds and ends forwarded
  // ones), then the scheduler: that ends agents' long polls, so the
  // transport's graceful stop does not wait for them.
  if (inference_) inference_->Stop();
  if (scheduler_) scheduler_->Stop();
  if (http_) http_->Stop();
  if (forward_) forward_->Stop();
  for (std::jthread* t : {&pinger_}) {
    if (!t->joinable()) continue;
    t->request_stop();
    t->join();
  }
  if (scheduler_) scheduler_->Stop();
}

uint16_t ControlPlane::bound_port() const { return http_ ? http_->bound_port() : 0; }

}  // namespace hf::server
