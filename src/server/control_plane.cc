#include "server/control_plane.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <condition_variable>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <functional>
#include <map>
#include <set>
#include <shared_mutex>
#include <unordered_map>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "core/log.h"
#include "core/model_json.h"
#include "core/private_files.h"
#include "framework/registry.h"
#include "server/codec.h"

namespace hf::server {

using http::Handler;
using http::HttpServer;
using http::HttpServerOptions;
using http::JsonError;
using http::JsonResponse;
using http::Reply;
using http::Request;
using http::Response;
using http::StaticFiles;
using inference::InferenceService;
using scheduler::Scheduler;
using scheduler::SchedulerOptions;

namespace {

using nlohmann::json;

// One plugin's stored form: its config keys plus enabled / weight / mode, as
// Framework::CurrentPolicy writes it (and Framework::Create reads it).
json StoredPluginSettings(const framework::Framework& fw, const std::string& name) {
  framework::Policy p = fw.CurrentPolicy();
  auto it = p.plugins.find(name);
  return it == p.plugins.end() ? json() : it->second;
}

std::map<std::string, double> ScoreWeights(const framework::Framework& fw) {
  std::map<std::string, double> w;
  for (const framework::PluginInfo& p : fw.Plugins()) {
    if (p.points & framework::kScorePoint) w[p.name] = p.settings.weight;
  }
  return w;
}

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

// A policy change that the store refused: nothing changed.
Response PersistError(const Status& s) {
  return JsonError(s.code() == StatusCode::kUnavailable ? 503 : 500, StatusCodeToApiCode(s.code()),
                   "could not persist the change: " + s.message());
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
  store::StoreOptions so;
  so.clock = &clock_;
  Result<std::unique_ptr<store::Store>> st = store::Store::Open(options_.data_dir + "/heteroflow.db", so);
  if (!st.ok()) return st.status();
  store_ = std::move(st).value();
  HF_RETURN_IF_ERROR(BootstrapAdminToken());
  HF_RETURN_IF_ERROR(ReloadTokens());
  HF_ASSIGN_OR_RETURN(std::unique_ptr<framework::Framework> framework, LoadPolicy());
  LoadUi();
  RefreshViews(*framework);
  RegisterMetrics();
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
  so_opts.on_policy_change = [this](const framework::Framework& fw) { RefreshViews(fw); };
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
  inference_ = std::make_unique<InferenceService>(store_.get(), scheduler_.get(), &events_, &clock_);
  HF_RETURN_IF_ERROR(inference_->Recover());
  AddRoutes();
  return Status::Ok();
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
        return std::vector<CollectedSample>{
            {{"active"}, static_cast<double>(scheduler_->active_count())},
            {{"unschedulable"}, static_cast<double>(scheduler_->unschedulable_count())}};
      }).ok());
  // Per node, GPU milli allocated (total: false) or in all (true).
  const auto gpu_milli = [this](bool total) {
    return [this, total] {
      std::vector<CollectedSample> rows;
      for (const auto& [node, used, all] : scheduler_->GpuAllocation()) {
        rows.push_back({{node}, static_cast<double>(total ? all : used)});
      }
      return rows;
    };
  };
  HF_CHECK(metrics_.AddCollector("heteroflow_node_gpu_milli_allocated",
                                 "GPU share allocated on a node (1000 = one GPU).",
                                 MetricType::kGauge, {"node"}, gpu_milli(false)).ok());
  HF_CHECK(metrics_.AddCollector("heteroflow_node_gpu_milli_total",
                                 "GPU capacity of a node (1000 = one GPU).", MetricType::kGauge,
                                 {"node"}, gpu_milli(true)).ok());
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
      if (!inference_) return rows;
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
        if (!inference_) return rows;
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
  HF_CHECK(metrics_.AddCollector(
      "heteroflow_node_requeue_held",
      "1 while requeues of silent nodes' tasks are held because too many nodes went silent at "
      "once (--node-loss-storm-fraction), else 0.",
      MetricType::kGauge, {}, [this] {
        std::vector<CollectedSample> rows;
        if (scheduler_) rows.push_back({{}, scheduler_->requeue_held() ? 1.0 : 0.0});
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
  m_.auth_failures = must(metrics_.AddCounter(
      "heteroflow_http_auth_failures_total",
      "Requests refused for their token: unauthenticated (401), or throttled (429) while their "
      "address has failed too often.",
      {"outcome"}));
}

Response ControlPlane::Metrics() const {
  Response r;
  r.status = 200;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = metrics_.Render();
  return r;
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

Status ControlPlane::ReloadTokens() {
  // Read and swap under one lock, so the last swap always holds the newest read.
  SharedLock lock(tokens_mu_, kExclusive);
  std::unordered_map<std::string, store::TokenRecord> tokens;
  HF_RETURN_IF_ERROR(store_->Read([&](const store::ReadTx& tx) -> Status {
    HF_ASSIGN_OR_RETURN(std::vector<store::TokenRecord> all, tx.ListTokens());
    for (auto& t : all) tokens.emplace(t.hash, std::move(t));
    return Status::Ok();
  }));
  tokens_ = std::move(tokens);
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

bool ControlPlane::Authorize(const Request& req, Action action, Caller& caller,
                             Response& denied) const {
  const int64_t now = clock_.NowMs();
  // An address that failed too often is not told whether its token is good.
  if (const double wait = auth_failures_.RetryAfter(req.remote_address, now); wait > 0) {
    const int retry = static_cast<int>(std::ceil(wait));
    denied = JsonError(429, "too_many_requests",
                       "too many failed authentications from this address; retry in " +
                           std::to_string(retry) + " s");
    denied.SetHeader("Retry-After", std::to_string(retry));
    m_.auth_failures->With({"throttled"}).Inc();
    return false;
  }
  const auto unauthenticated = [&](const char* why) {
    auth_failures_.Failed(req.remote_address, now);
    m_.auth_failures->With({"unauthenticated"}).Inc();
    denied = JsonError(401, "unauthenticated", why);
    return false;
  };
  std::optional<std::string_view> header = req.Header("Authorization");
  std::optional<std::string> token = header ? BearerToken(*header) : std::nullopt;
  if (!token) return unauthenticated("missing or malformed bearer token");
  std::optional<store::TokenRecord> rec;
  {
    SharedLock lock(tokens_mu_, kShared);
    auto it = tokens_.find(HashToken(*token));
    if (it != tokens_.end()) rec = it->second;
  }
  std::optional<Role> role = rec ? ParseRole(rec->role) : std::nullopt;
  if (!rec || !rec->ActiveAt(now) || !role) {
    return unauthenticated("invalid, expired or revoked token");
  }
  if (!Allows(*role, action)) {
    denied = JsonError(403, "forbidden", std::string("role ") + RoleName(*role) +
                                             " may not " + ActionName(action));
    return false;
  }
  caller = {rec->name, *role, rec->node};
  return true;
}

void ControlPlane::Route(const char* method, const char* path, Action action, const char* summary,
                         std::function<Response(const Request&, const Caller&)> fn, const char* body) {
  route_docs_.push_back({method, path, summary, true, body});
  HF_CHECK(router_.Add(method, path, [this, action, fn = std::move(fn)](const Request& req) {
    Caller caller;
    Response denied;
    if (!Authorize(req, action, caller, denied)) return denied;
    return fn(req, caller);
  }).ok());
}

void ControlPlane::PublicRoute(const char* method, const char* path, const char* summary, Handler fn) {
  route_docs_.push_back({method, path, summary, false, ""});
  HF_CHECK(router_.Add(method, path, std::move(fn)).ok());
}

Response ControlPlane::WhoAmI(const Caller& caller) const {
  return JsonResponse(200, json{{"name", caller.name}, {"role", RoleName(caller.role)}});
}

void ControlPlane::LoadUi() {
  std::string dir = options_.ui_dir;
  if (dir.empty()) {
    std::error_code ec;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    dir = ec ? "ui" : (exe.parent_path() / "ui").string();
  }
  Result<StaticFiles> ui = StaticFiles::Load(dir);
  if (ui.ok()) {
    ui_ = std::move(ui).value();
    spdlog::info("server: web UI from {} ({} files)", dir, ui_->file_count());
  } else {
    ui_missing_ = ui.status().message();
    spdlog::warn("server: no web UI: {}", ui_missing_);
  }
}

// Everything outside the API, health and metrics is the UI's: its files and
// its own routes (/plugins, /tasks/17).
bool ControlPlane::IsUiPath(const Request& req) {
  if (req.method != "GET") return false;
  const std::string& p = req.path;
  return !(p == "/api" || p.rfind("/api/", 0) == 0 || p == "/livez" || p == "/readyz" ||
           p == "/metrics");
}

Response ControlPlane::ServeUi(const Request& req) const {
  if (ui_) return ui_->Serve(req);
  return JsonError(404, "not_found",
                   "the web UI is not installed (" + ui_missing_ +
                       "); build it with scripts/build.sh, or pass --ui-dir");
}

void ControlPlane::AddRoutes() {
  using A = Action;
  PublicRoute("GET", "/livez", "liveness: the process serves",
              [](const Request&) { return JsonResponse(200, json{{"status", "ok"}}); });
  PublicRoute("GET", "/readyz",
              "readiness: cluster state recovered and the store takes commits",
              [this](const Request&) {
                if (!ready_) return JsonError(503, "unavailable", "recovering state");
                // Honest: a full disk or a lock held elsewhere means nothing
                // can be acknowledged, whatever else still answers.
                if (Status s = store_->CanCommit(); !s.ok()) {
                  return JsonError(503, "unavailable", "the store cannot commit: " + s.message());
                }
                return JsonResponse(200, json{{"status", "ok"}});
              });
  PublicRoute("GET", "/api/v1/openapi.json", "this document",
              [this](const Request&) { return OpenApi(); });
  Route("GET", "/metrics", A::kRead, "Prometheus metrics (text format 0.0.4)",
        [this](const Request&, const Caller&) { return Metrics(); });

  Route("GET", "/api/v1/whoami", A::kRead, "the caller's token name and role",
        [this](const Request&, const Caller& c) { return WhoAmI(c); });
  Route("GET", "/api/v1/plugins", A::kRead, "list plugins with status, weight and config",
        [this](const Request&, const Caller&) { return ListPlugins(); });
  Route("PUT", "/api/v1/plugins/{name}", A::kWriteConfig,
        "partial update of a plugin: enabled, weight, mode, config",
        [this](const Request& r, const Caller& c) { return PutPlugin(r, c); }, "PluginPatch");
  Route("POST", "/api/v1/plugins/{name}/reload", A::kWriteConfig,
        "re-read a plugin's files (topology)",
        [this](const Request& r, const Caller& c) { return ReloadPlugin(r, c); });
  Route("GET", "/api/v1/scheduler/config", A::kRead, "thresholds and score weights",
        [this](const Request&, const Caller&) { return GetSchedulerConfig(); });
  Route("PUT", "/api/v1/scheduler/config", A::kWriteConfig,
        "partial update of thresholds and score weights",
        [this](const Request& r, const Caller& c) { return PutSchedulerConfig(r, c); },
        "SchedulerConfigPatch");
  Route("POST", "/api/v1/scheduler/preview", A::kPreview,
        "placements under the current and a candidate policy, with per-node breakdowns",
        [this](const Request& r, const Caller&) { return Preview(r); }, "PreviewRequest");
  Route("GET", "/api/v1/audit", A::kRead, "config changes, newest first",
        [this](const Request& r, const Caller&) { return ListAudit(r); });

  Route("GET", "/api/v1/nodes", A::kRead, "list nodes with allocations",
        [this](const Request&, const Caller&) { return ListNodes(); });
  Route("POST", "/api/v1/nodes", A::kWriteConfig, "register or replace a node",
        [this](const Request& r, const Caller& c) { return PutNode(r, c); }, "NodeInventory");
  Route("GET", "/api/v1/nodes/{name}", A::kRead, "one node",
        [this](const Request& r, const Caller&) { return GetNode(r); });
  Route("DELETE", "/api/v1/nodes/{name}", A::kWriteConfig, "delete a node without tasks",
        [this](const Request& r, const Caller& c) { return DeleteNode(r, c); });
  Route("POST", "/api/v1/nodes/{name}/cordon", A::kCordonNodes, "stop new placements on a node",
        [this](const Request& r, const Caller& c) {
          return SetNodeCondition(r, c, NodeCondition::kDraining);
        });
  Route("POST", "/api/v1/nodes/{name}/drain", A::kCordonNodes,
        "stop new placements, evict preemptible tasks (queued again), let the others finish",
        [this](const Request& r, const Caller& c) { return DrainNode(r, c); });
  Route("POST", "/api/v1/nodes/{name}/uncordon", A::kCordonNodes, "make a node schedulable",
        [this](const Request& r, const Caller& c) {
          return SetNodeCondition(r, c, NodeCondition::kReady);
        });

  Route("POST", "/api/v1/tasks", A::kWriteTasks, "submit a task",
        [this](const Request& r, const Caller& c) { return SubmitTask(r, c); }, "TaskSubmission");
  Route("POST", "/api/v1/tasks/batch", A::kWriteTasks, "submit 1-1000 tasks, all or none",
        [this](const Request& r, const Caller& c) { return SubmitBatch(r, c); }, "TaskBatch");
  Route("GET", "/api/v1/tasks", A::kRead,
        "list tasks; filters state, node, group, priority; pages with limit and after",
        [this](const Request& r, const Caller&) { return ListTasks(r); });
  Route("GET", "/api/v1/tasks/{id}", A::kRead, "one task with its allocation and events",
        [this](const Request& r, const Caller&) { return GetTask(r); });
  Route("POST", "/api/v1/tasks/{id}/cancel", A::kWriteTasks, "cancel a task",
        [this](const Request& r, const Caller& c) { return CancelTask(r, c); });
  Route("DELETE", "/api/v1/tasks/{id}", A::kWriteTasks, "cancel a task",
        [this](const Request& r, const Caller& c) { return CancelTask(r, c); });

  Route("POST", "/api/v1/tokens", A::kManageTokens, "create a token (the secret is shown once)",
        [this](const Request& r, const Caller& c) { return CreateToken(r, c); }, "TokenRequest");
  Route("GET", "/api/v1/tokens", A::kManageTokens, "list tokens (no secrets)",
        [this](const Request&, const Caller&) { return ListTokens(); });
  Route("DELETE", "/api/v1/tokens/{id}", A::kManageTokens, "revoke a token",
        [this](const Request& r, const Caller& c) { return RevokeToken(r, c); });

  Route("POST", "/api/v1/agent/register", A::kAgentReport, "an agent registers its node",
        [this](const Request& r, const Caller& c) { return AgentRegister(r, c); }, "AgentRegister");
  Route("POST", "/api/v1/agent/heartbeat", A::kAgentReport, "an agent reports measured usage",
        [this](const Request& r, const Caller& c) { return AgentHeartbeat(r, c); }, "AgentHeartbeat");
  Route("GET", "/api/v1/agent/assignments", A::kAgentReport,
        "long poll: the tasks a node should run",
        [this](const Request& r, const Caller& c) { return AgentAssignments(r, c); });
  Route("POST", "/api/v1/agent/status", A::kAgentReport, "an agent reports a task's process state",
        [this](const Request& r, const Caller& c) { return AgentStatus(r, c); }, "AgentStatus");

  Route("POST", "/api/v1/agent/logs", A::kAgentReport, "an agent appends a task's output",
        [this](const Request& r, const Caller& c) { return AgentLogs(r, c); }, "AgentLogs");
  Route("GET", "/api/v1/tasks/{id}/logs", A::kRead, "a task's output from `offset` (text)",
        [this](const Request& r, const Caller&) { return TaskLogs(r); });

  Route("GET", "/api/v1/events", A::kRead, "server-sent events: task, node, plugin, config",
        [this](const Request&, const Caller&) { return Events(); });
  Route("GET", "/api/v1/events/recent", A::kRead,
        "the last events (limit 1..200, default 50), oldest first",
        [this](const Request& r, const Caller&) {
          int64_t limit = 50;
          for (const auto& [key, value] : r.query) {
            if (key != "limit") {
              return StatusError(InvalidArgument("unknown query parameter '" + key + "'"));
            }
            Result<int64_t> v = ParseIntParam("limit", value, 1, int64_t{EventHub::kRecentEvents});
            if (!v.ok()) return StatusError(v.status());
            limit = *v;
          }
          return JsonResponse(200, json{{"events", events_.Recent(static_cast<size_t>(limit))}});
        });
  Route("GET", "/api/v1/inference/panel", A::kRead, "models, endpoints and GPU memory per GPU",
        [this](const Request&, const Caller&) { return InferencePanel(); });
  AddInferenceRoutes();
}

void ControlPlane::RefreshViews(const framework::Framework& fw) {
  json list = json::array();
  for (const framework::PluginInfo& p : fw.Plugins()) list.push_back(PluginInfoToJson(p));
  auto plugins = std::make_shared<const json>(json{{"plugins", std::move(list)}});
  auto config = std::make_shared<const json>(
      SchedulerConfigToJson(fw.scheduler_config(), ScoreWeights(fw)));
  MutexLock lock(view_mu_);
  plugins_view_ = std::move(plugins);
  config_view_ = std::move(config);
}

Response ControlPlane::ListPlugins() const {
  std::shared_ptr<const json> view;
  {
    MutexLock lock(view_mu_);
    view = plugins_view_;
  }
  return JsonResponse(200, *view);
}

Status ControlPlane::CheckPluginPaths(const framework::Framework& fw, const std::string& name,
                                      const json& config) const {
  if (options_.file_root.empty() || !config.is_object()) return Status::Ok();
  std::error_code ec;
  const std::filesystem::path root = std::filesystem::weakly_canonical(options_.file_root, ec);
  for (const std::string& key : fw.PathConfigKeys(name)) {
    auto it = config.find(key);
    if (it == config.end() || !it->is_string() || it->get<std::string>().empty()) continue;
    // Resolved (links followed) before it is compared, so ../ and links
    // cannot leave the root.
    const std::filesystem::path file = std::filesystem::weakly_canonical(it->get<std::string>(), ec);
    const auto [r, f] = std::mismatch(root.begin(), root.end(), file.begin(), file.end());
    if (ec || r != root.end() || f == file.end()) {
      return InvalidArgument("plugins." + name + "." + key + " must name a file under " +
                             options_.file_root + " (the server's --file-root)");
    }
  }
  return Status::Ok();
}

Response ControlPlane::PutPlugin(const Request& req, const Caller& caller) {
  Result<json> body = ParseJsonBody(req.body);
  if (!body.ok()) return StatusError(body.status());
  Result<framework::PluginPatch> patch = ParsePluginPatch(*body);
  if (!patch.ok()) return StatusError(patch.status());
  const std::string name(req.Param("name"));
  bool stored = false;  // the change was made, and failed only in the store
  json old_value, out;
  Status s = scheduler_->ChangePolicy(
      [&](framework::Framework& fw) -> Status {
        HF_ASSIGN_OR_RETURN(framework::PluginInfo before, fw.GetPlugin(name));
        if (patch->config) HF_RETURN_IF_ERROR(CheckPluginPaths(fw, name, *patch->config));
        old_value = StoredPluginSettings(fw, name);
        HF_RETURN_IF_ERROR(fw.UpdatePlugin(name, *patch));
        // A file the caller named that cannot be used is the caller's
        // mistake: 400, and nothing changes (a file that breaks later puts
        // the plugin in error).
        HF_ASSIGN_OR_RETURN(framework::PluginInfo now, fw.GetPlugin(name));
        if (patch->config && now.status == framework::PluginStatus::kError &&
            before.status != framework::PluginStatus::kError) {
          return InvalidArgument("plugins." + name + ": " + now.message);
        }
        return Status::Ok();
      },
      [&](const framework::Framework& fw) -> Status {
        stored = true;
        const json new_value = StoredPluginSettings(fw, name);
        HF_ASSIGN_OR_RETURN(framework::PluginInfo after, fw.GetPlugin(name));
        out = PluginInfoToJson(after);
        return store_->Write([&](store::Tx& tx) -> Status {
          HF_RETURN_IF_ERROR(tx.PutPluginConfig(name, new_value));
          return tx.AppendAudit(caller.name, "plugins." + name, old_value, new_value);
        });
      });
  if (!s.ok()) return stored ? PersistError(s) : StatusError(s);
  events_.Publish("plugin", json{{"action", "updated"}, {"name", name}, {"by", caller.name},
                                 {"plugin", out}}, clock_.NowMs());
  return JsonResponse(200, out);
}

Response ControlPlane::GetSchedulerConfig() const {
  std::shared_ptr<const json> view;
  {
    MutexLock lock(view_mu_);
    view = config_view_;
  }
  return JsonResponse(200, *view);
}

Response ControlPlane::PutSchedulerConfig(const Request& req, const Caller& caller) {
  Result<json> body = ParseJsonBody(req.body);
  if (!body.ok()) return StatusError(body.status());
  Result<SchedulerConfigPatch> patch = ParseSchedulerConfigPatch(*body);
  if (!patch.ok()) return StatusError(patch.status());
  std::map<std::string, double> weights;
  if (patch->score_weights) weights = *patch->score_weights;
  bool stored = false;  // the change was made, and failed only in the store
  json old_value, new_value;
  Status s = scheduler_->ChangePolicy(
      [&](framework::Framework& fw) -> Status {
        const framework::SchedulerConfig old_config = fw.scheduler_config();
        old_value = SchedulerConfigToJson(old_config, ScoreWeights(fw));
        HF_RETURN_IF_ERROR(fw.SetScoreWeights(weights));
        return fw.SetSchedulerConfig(patch->ApplyTo(old_config));
      },
      [&](const framework::Framework& fw) -> Status {
        stored = true;
        new_value = SchedulerConfigToJson(fw.scheduler_config(), ScoreWeights(fw));
        const framework::Policy current = fw.CurrentPolicy();
        return store_->Write([&](store::Tx& tx) -> Status {
          HF_RETURN_IF_ERROR(tx.PutSchedulerConfig(current.scheduler.ToJson()));
          for (const auto& [name, w] : weights) {
            HF_RETURN_IF_ERROR(tx.PutPluginConfig(name, current.plugins.at(name)));
          }
          return tx.AppendAudit(caller.name, "scheduler", old_value, new_value);
        });
      });
  if (!s.ok()) return stored ? PersistError(s) : StatusError(s);
  events_.Publish("config", json{{"action", "updated"}, {"by", caller.name}, {"config", new_value}},
                  clock_.NowMs());
  return JsonResponse(200, new_value);
}

Status ControlPlane::Start() {
  HttpServerOptions o;
  o.address = options_.address;
  o.port = options_.port;
  // Three sets of threads, so that one kind of traffic never waits behind
  // another: I/O for every connection; the API's handlers, which block on
  // the store's fsync (enough of them that reads and health checks are not
  // stuck behind a burst of writes); and the gateway's, which never block
  // (they pick a replica and hand the call to the upstream client).
  o.worker_threads = 4;
  o.handler_threads = 16;
  o.handler_pools.push_back(
      {{std::begin(InferenceService::kGatewayPrefixes), std::end(InferenceService::kGatewayPrefixes)}, 4});
  // Answers kept in memory stay on the I/O threads (not /readyz: it probes
  // the store).
  o.runs_inline = [](const Request& req) {
    static const std::set<std::string, std::less<>> kFromMemory = {
        "/livez", "/api/v1/plugins", "/api/v1/scheduler/config", "/api/v1/whoami"};
    if (req.method != "GET" || InferenceService::IsGatewayPath(req.path)) return false;
    return kFromMemory.count(req.path) != 0 || IsUiPath(req);
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
  http_ = std::make_unique<HttpServer>(o, [this](const Request& req) {
    const auto t0 = std::chrono::steady_clock::now();
    Response r = InferenceService::IsGatewayPath(req.path) ? inference_->Gateway(req)
                 : IsUiPath(req)                               ? ServeUi(req)
                                                               : router_.Dispatch(req);
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
  });
  HF_RETURN_IF_ERROR(http_->Start());
  scheduler_->Start();
  inference_->Start();
  pinger_ = Periodic(std::chrono::seconds(15), [this] { events_.Ping(); });
  // (The scheduler watches the plugins' outside sources itself.)
  ready_ = true;
  return Status::Ok();
}

void ControlPlane::Stop() {
  ready_ = false;
  // Inference first (it answers the requests it holds and ends forwarded
  // ones), then the scheduler: that ends agents' long polls, so the
  // transport's graceful stop does not wait for them.
  if (inference_) inference_->Stop();
  if (scheduler_) scheduler_->Stop();
  if (http_) http_->Stop();
  for (std::jthread* t : {&pinger_}) {
    if (!t->joinable()) continue;
    t->request_stop();
    t->join();
  }
  if (scheduler_) scheduler_->Stop();
}

uint16_t ControlPlane::bound_port() const { return http_ ? http_->bound_port() : 0; }

}  // namespace hf::server
