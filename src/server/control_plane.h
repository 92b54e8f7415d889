// The control plane, the composition root of `heteroflow server`
// (server_command.h runs it): opens the store, bootstraps the admin token,
// loads the scheduling policy, wires the scheduler (scheduler/), the
// inference service (inference/) and the HTTP transport (http/) together,
// and serves the REST API (docs/API.md).
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
#include <cstdint>
#include <functional>
#include <vector>
#include <memory>
#include <optional>
#include <unordered_map>
#include <string>
#include <thread>

#include "core/clock.h"
#include "core/mutex.h"
#include "core/status.h"
#include "framework/framework.h"
#include "http/router.h"
#include "http/server.h"
#include "http/static_files.h"
#include "inference/service.h"
#include "scheduler/scheduler.h"
#include "server/auth.h"
#include "server/events.h"
#include "server/metrics.h"
#include "store/store.h"

namespace hf::server {

struct ServerOptions {
  std::string config_path;  // empty: built-in defaults
  std::string address = "0.0.0.0";
  uint16_t port = 3333;
  std::string data_dir = "./data";
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
};

// The API's state: store, scheduler (which owns the framework), inference
// service and routes. Thread-safe once Init returned OK.
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

 private:
  struct Caller {
    std::string name;
    Role role = Role::kViewer;
    std::string node;  // the one node an agent token acts for
  };

  // One route as the OpenAPI document describes it.
  struct RouteDoc {
    std::string method;
    std::string path;
    std::string summary;
    bool authenticated = true;
    std::string body;  // the request body's schema name, "" when none
  };

  Status BootstrapAdminToken();
  // The framework of the policy stored, or seeded from --config.
  Result<std::unique_ptr<framework::Framework>> LoadPolicy();
  // Re-reads every token into tokens_ (after each token change): requests
  // are authorised from memory, never waiting behind a write's fsync.
  Status ReloadTokens();
  // Logs each policy key where --config and the store differ (the store wins).
  Status ReportConfigDrift(const framework::Framework& stored) const;
  Status RegisterDeclaredNodes();
  // Rebuilds the answers of GET /plugins and GET /scheduler/config; the
  // scheduler calls it (its mutex held) after every change of the framework,
  // so those reads never wait for that mutex (which a commit may hold
  // through its fsync).
  void RefreshViews(const framework::Framework& fw);
  void RegisterMetrics();
  void AddRoutes();
  // The web UI (static_files.h): loaded once at Init; a missing folder is
  // logged, not fatal (the API works without it).
  void LoadUi();
  static bool IsUiPath(const http::Request& req);
  http::Response ServeUi(const http::Request& req) const;
  http::Response WhoAmI(const Caller& caller) const;
  // Registers a route that needs a token allowed to do `action`.
  void Route(const char* method, const char* path, Action action, const char* summary,
             std::function<http::Response(const http::Request&, const Caller&)> fn, const char* body = "");
  void PublicRoute(const char* method, const char* path, const char* summary, http::Handler fn);
  // The caller behind the request's bearer token, or the 401/403 answer.
  bool Authorize(const http::Request& req, Action action, Caller& caller, http::Response& denied) const;

  http::Response ListPlugins() const;
  http::Response PutPlugin(const http::Request& req, const Caller& caller);
  http::Response GetSchedulerConfig() const;
  http::Response PutSchedulerConfig(const http::Request& req, const Caller& caller);
  http::Response ReloadPlugin(const http::Request& req, const Caller& caller);
  http::Response ListAudit(const http::Request& req) const;
  http::Response Preview(const http::Request& req) const;

  http::Response ListNodes() const;
  http::Response GetNode(const http::Request& req) const;
  http::Response PutNode(const http::Request& req, const Caller& caller);
  http::Response DeleteNode(const http::Request& req, const Caller& caller);
  http::Response SetNodeCondition(const http::Request& req, const Caller& caller, NodeCondition condition);
  http::Response DrainNode(const http::Request& req, const Caller& caller);

  http::Response SubmitTask(const http::Request& req, const Caller& caller);
  http::Response SubmitBatch(const http::Request& req, const Caller& caller);
  http::Response ListTasks(const http::Request& req) const;
  http::Response GetTask(const http::Request& req) const;
  http::Response CancelTask(const http::Request& req, const Caller& caller);

  http::Response CreateToken(const http::Request& req, const Caller& caller);
  http::Response ListTokens() const;
  http::Response RevokeToken(const http::Request& req, const Caller& caller);

  // Node identity (docs/SECURITY.md): an agent token acts for its own node
  // only; anything else is 403 (PermissionDenied) and changes nothing.
  // Admin tokens may act for any node.
  static Status ActsFor(const Caller& caller, const std::string& node);
  http::Response AgentRegister(const http::Request& req, const Caller& caller);
  http::Response AgentHeartbeat(const http::Request& req, const Caller& caller);
  http::Response AgentAssignments(const http::Request& req, const Caller& caller);
  http::Response AgentStatus(const http::Request& req, const Caller& caller);
  http::Response AgentLogs(const http::Request& req, const Caller& caller);
  http::Response TaskLogs(const http::Request& req) const;

  http::Response Events();
  http::Response InferencePanel() const;
  // InvalidArgument unless every file `config` names for plugin `name` lies
  // under options_.file_root (when set).
  Status CheckPluginPaths(const framework::Framework& fw, const std::string& name,
                          const nlohmann::json& config) const;
  void AddInferenceRoutes();
  http::Response OpenApi() const;
  http::Response Metrics() const;

  ServerOptions options_;
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
  mutable FailureLimiter auth_failures_{options_.auth_failure_burst, 1};
  std::unique_ptr<scheduler::Scheduler> scheduler_;
  std::unique_ptr<inference::InferenceService> inference_;
  std::atomic<bool> ready_{false};
  Mutex logs_mu_;  // one append at a time to DATA_DIR/logs/<task>.log (no member)
  mutable Mutex view_mu_;
  std::shared_ptr<const nlohmann::json> plugins_view_ HF_GUARDED_BY(view_mu_);
  std::shared_ptr<const nlohmann::json> config_view_ HF_GUARDED_BY(view_mu_);
  mutable SharedMutex tokens_mu_;
  // By SHA-256.
  std::unordered_map<std::string, store::TokenRecord> tokens_ HF_GUARDED_BY(tokens_mu_);
  std::vector<RouteDoc> route_docs_;
  http::Router router_;
  std::optional<http::StaticFiles> ui_;  // the built web UI, when found
  std::string ui_missing_;          // why not, for GET /
  std::unique_ptr<http::HttpServer> http_;
  std::jthread pinger_;  // keeps event streams alive
};

// `heteroflow server` (server_command.cc): flags, logging, the open-file
// limit and the stop signals around one ControlPlane; argv[0] is "server".
// Returns the exit code: 0 after SIGINT or SIGTERM, 2 for a bad flag, 1 when
// the server cannot start.
int RunServerCommand(int argc, char** argv);

}  // namespace hf::server

#endif  // HF_SERVER_CONTROL_PLANE_H_
