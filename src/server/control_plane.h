// The control plane, the composition root of `heteroflow server`
// (server_command.cc runs it): opens the store, bootstraps the admin token,
// loads the scheduling policy, wires the scheduler (scheduler/), the
// inference service (inference/) and the HTTP transport (http/) together,
// and serves the REST API (docs/API.md): the api/ classes, through the
// route table of routes.cc.
//
// Startup contract:
//   - the data dir is created if missing; the store lives at DIR/heteroflow.db;
//   - on the first start (no token in the store) an admin token named "admin"
//     is created from $HETEROFLOW_ADMIN_TOKEN, or generated; only its hash is
//     stored. A generated token is printed once to stdout ("admin token: ...")
//     and written to DIR/admin.token with mode 0600; tokens are never logged
//     otherwise;
//   - the policy stored in the database wins; a fresh database is seeded from
//     --config (its plugins:/scheduler: blocks) or the defaults, and persisted;
//   - "listening on http://HOST:PORT" is printed with the bound port;
//   - SIGINT or SIGTERM stops gracefully and the command returns 0.
#ifndef HF_SERVER_CONTROL_PLANE_H_
#define HF_SERVER_CONTROL_PLANE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "core/clock.h"
#include "core/mutex.h"
#include "core/dir_lock.h"
#include "core/status.h"
#include "framework/framework.h"
#include "http/server.h"
#include "http/upstream.h"
#include "inference/service.h"
#include "leader/elector.h"
#include "scheduler/scheduler.h"
#include "server/api/api.h"
#include "server/authenticator.h"
#include "server/events.h"
#include "server/metrics.h"
#include "server/route_table.h"
#include "store/store.h"

namespace hf::server {

struct ServerOptions {
  std::string config_path;  // empty: built-in defaults
  std::string address = "0.0.0.0";
  uint16_t port = 3333;
  std::string data_dir = "./data";
  // The PostgreSQL database (a postgresql:// URI) to keep the cluster in;
  // empty: SQLite in data_dir.
  std::string store;
  // A node whose agent sent no heartbeat for this long becomes NotReady.
  double node_grace_period_s = 40;
  // Fencing (docs/AGENT.md): a task's supervisor stops it when its agent has
  // not renewed the node's lease (after a heartbeat the server answered) for
  // fence_after_s, SIGKILL fence_grace_s after SIGTERM; a silent node's
  // tasks are queued again only after fence_after_s + fence_grace_s + 2 s,
  // so a task never runs in two places at once. At least two heartbeat
  // intervals.
  double fence_after_s = 30;
  double fence_grace_s = 10;
  // More than this fraction of the nodes (and at least three) silent at
  // once: requeues are held (Scheduler::set_node_loss_storm); 1: never.
  double node_loss_storm_fraction = 0.55;
  // Failed authentications an address may make at once before its
  // requests are answered 429; it regains one a second (FailureLimiter).
  double auth_failure_burst = 20;
  // Files the API may name (a plugin's topology_config) must lie under this
  // folder; empty: anywhere the server may read.
  std::string file_root;

  // Agents send a heartbeat every 5 s, or a third of the grace period when
  // that is shorter, so a live node never looks silent.
  int heartbeat_interval_s() const;
  // Open connections the server accepts (each agent holds two: a long poll
  // and one for heartbeats and reports). The process's open-file limit is
  // raised to fit, up to its hard limit.
  int max_connections = 4096;
  // Open connections from one client address (0: no limit). Past either
  // limit a new connection takes the place of a quiet one (HttpServerOptions).
  int max_connections_per_address = 1024;
  // Largest body of a request to the inference gateway (/inference/v1/...,
  // /serve/...): chat requests carry images. The REST API keeps 1 MiB.
  size_t gateway_max_body_bytes = size_t{32} << 20;
  // The built web UI (docs/UI.md); empty: the `ui` folder beside the binary.
  std::string ui_dir;

  // Replicas on one PostgreSQL store (docs/HA.md). This replica's name,
  // unique among them, and the URL the others forward requests to (an IP
  // literal: http://IP:PORT); empty: HOST:PORT of --listen (127.0.0.1 for
  // a wildcard address), set by RunServerCommand.
  std::string replica;
  std::string advertise_url;
  // The leader's lease, how long it may go without renewing before it steps
  // down, and how often every replica makes a round (docs/HA.md, "Timings").
  double leader_lease_s = 3;
  double leader_renew_deadline_s = 2;
  double leader_retry_s = 0.5;
  // Init waits for an unreachable PostgreSQL store instead of failing: set
  // when a replica starts again after stepping down (kSteppedDownEnv).
  bool wait_for_store = false;
};

// Set in the environment of a replica that starts again after stepping
// down (RunServerCommand): it then waits for the database.
inline constexpr char kSteppedDownEnv[] = "HETEROFLOW_STEPPED_DOWN";

// The server's parts: store, scheduler (which owns the framework),
// inference service, the REST API's resources and their route table, and
// the HTTP transport. Thread-safe once Init returned OK.
class ControlPlane {
 public:
  explicit ControlPlane(ServerOptions options);
  ~ControlPlane();

  // Creates the data dir, opens the store, bootstraps the admin token and
  // loads (or seeds) the policy. Errors name the file or value at fault.
  Status Init();
  // Starts serving; bound_port() is valid afterwards.
  Status Start();
  void Stop();
  uint16_t bound_port() const;

  // With replicas (a PostgreSQL store): why this replica stopped leading,
  // once it has; it must then stop and start again as a follower
  // (RunServerCommand does). Waits up to `timeout` for it.
  std::optional<std::string> WaitForStepDown(std::chrono::milliseconds timeout) HF_EXCLUDES(step_mu_);

 private:
  // Several replicas may share the store: a PostgreSQL one.
  bool ha() const { return !options_.store.empty(); }
  // Whether this replica runs the scheduler and serves the API itself
  // (always, on SQLite); otherwise it forwards to the leader.
  bool leading() const { return leading_.load(std::memory_order_acquire); }
  // What only the leader has: the admin token's bootstrap, the policy, the
  // scheduler and the inference service with their recovered state, and the
  // API's routes; then started.
  Status BuildLeader();
  void StartLeader();
  // The elector's callbacks.
  void OnElected(int64_t epoch);
  void StepDown(const std::string& why) HF_EXCLUDES(step_mu_);
  // A follower's answer: /readyz and /metrics its own, the rest relayed to
  // the leader.
  http::Response HandleFollower(const http::Request& req);
  // This replica's role, for /readyz and the UI.
  nlohmann::json RoleJson() const;
  Status BootstrapAdminToken();
  // The framework of the policy stored, or seeded from --config.
  Result<std::unique_ptr<framework::Framework>> LoadPolicy();
  // Logs each policy key where --config and the store differ (the store wins).
  Status ReportConfigDrift(const framework::Framework& stored) const;
  Status RegisterDeclaredNodes();
  // A fresh store's queue tree from the config file's queues: block.
  Status SeedDeclaredQueues();
  void RegisterMetrics();
  // Builds the api/ classes and the route table (routes.cc).
  void AddRoutes();
  // Every request: the gateway's, the UI's, or a route's; counted.
  http::Response Handle(const http::Request& req);

  ServerOptions options_;
  std::optional<DirLock> data_dir_lock_;  // this server's alone while it runs (core/dir_lock.h)
  SystemClock clock_;
  std::unique_ptr<store::Store> store_;
  EventHub events_;
  MetricsRegistry metrics_;
  struct {
    Family<Counter>* attempts = nullptr;
    Family<Histogram>* attempt_duration = nullptr;
    Counter* victims = nullptr;
    Family<Histogram>* plugin_duration = nullptr;
    Family<Counter>* http_requests = nullptr;
    Family<Histogram>* http_duration = nullptr;
    Family<Counter>* auth_failures = nullptr;
  } m_;
  std::unique_ptr<Authenticator> auth_;
  api::PolicyViews views_;
  std::unique_ptr<scheduler::Scheduler> scheduler_;
  std::unique_ptr<inference::InferenceService> inference_;
  std::atomic<bool> ready_{false};
  std::unique_ptr<RouteTable> routes_;
  std::unique_ptr<api::UiApi> ui_;
  // The REST API's resources (api/api.h); they serve through routes_.
  std::unique_ptr<api::SystemApi> system_api_;
  std::unique_ptr<api::PolicyApi> policy_api_;
  std::unique_ptr<api::NodesApi> nodes_api_;
  std::unique_ptr<api::TasksApi> tasks_api_;
  std::unique_ptr<api::JobsApi> jobs_api_;
  std::unique_ptr<api::QueuesApi> queues_api_;
  std::unique_ptr<api::TokensApi> tokens_api_;
  std::unique_ptr<api::AgentsApi> agents_api_;
  std::unique_ptr<api::LogsApi> logs_api_;
  std::unique_ptr<api::InferenceApi> inference_api_;
  std::unique_ptr<http::HttpServer> http_;
  std::jthread pinger_;  // keeps event streams alive
  // Replicas (docs/HA.md): the election, the follower's link to the leader,
  // and the thread that recovers the state when this replica is elected.
  std::unique_ptr<leader::Elector> elector_;
  std::unique_ptr<http::UpstreamClient> forward_;
  std::atomic<bool> leading_{false};  // set once the leader's parts run
  std::atomic<bool> elector_ready_{false};  // set once elector_ is (Start)
  std::jthread promote_;
  Mutex step_mu_;  // guards step_down_
  std::condition_variable step_cv_;
  std::optional<std::string> step_down_ HF_GUARDED_BY(step_mu_);
  Mutex metrics_auth_mu_;  // guards tokens_read_at_
  std::chrono::steady_clock::time_point tokens_read_at_ HF_GUARDED_BY(metrics_auth_mu_);
};

// `heteroflow server` (server_command.cc): flags, logging, the open-file
// limit and the stop signals around one ControlPlane; argv[0] is "server".
// Returns the exit code: 0 after SIGINT or SIGTERM, 2 for a bad flag, 1 when
// the server cannot start.
int RunServerCommand(int argc, char** argv);

}  // namespace hf::server

#endif  // HF_SERVER_CONTROL_PLANE_H_
