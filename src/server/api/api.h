// The REST API (docs/API.md), one small class per resource. Each names what
// it depends on in its constructor and holds no state beyond what it says:
// the scheduler and the store hold the cluster's truth. Its public members
// are handlers, all of one shape (the request and its authenticated
// caller), which the route table (server/routes.cc) maps to methods, paths
// and the actions a caller's role must allow.
//
// Handlers parse strictly (unknown fields and parameters are 400 naming
// them), call the Scheduler or the InferenceService (which commit before
// they answer) or read the store, and answer with codec.h's JSON.
//
// ControlPlane (control_plane.h) builds them once, at Init, and keeps them
// for the server's life. Threading: every handler may run on many threads
// at once.
#ifndef HF_SERVER_API_API_H_
#define HF_SERVER_API_API_H_

#include <atomic>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/clock.h"
#include "core/mutex.h"
#include "core/status.h"
#include "framework/framework.h"
#include "http/server.h"
#include "http/static_files.h"
#include "inference/service.h"
#include "scheduler/scheduler.h"
#include "server/authenticator.h"
#include "server/events.h"
#include "server/metrics.h"
#include "store/store.h"

namespace hf::server::api {

// What every handler speaks.
using http::JsonError;
using http::JsonResponse;
using http::Request;
using http::Response;
using nlohmann::json;

// Health, metrics, the caller's identity and the event stream.
class SystemApi {
 public:
  // `ready`: false until the cluster's state is recovered and while the
  // server stops.
  // `role`: this replica's role among the control plane's replicas
  // (docs/HA.md), shown by /readyz.
  SystemApi(store::Store& store, const std::atomic<bool>& ready, const MetricsRegistry& metrics,
            EventHub& events, const Clock& clock, std::function<nlohmann::json()> role)
      : store_(store), ready_(ready), metrics_(metrics), events_(events), clock_(clock),
        role_(std::move(role)) {}

  // Public: no caller.
  static Response Live(const Request& req);
  Response Ready(const Request& req) const;

  Response Metrics(const Request& req, const Caller& caller) const;
  static Response WhoAmI(const Request& req, const Caller& caller);
  Response Events(const Request& req, const Caller& caller);
  Response RecentEvents(const Request& req, const Caller& caller) const;

 private:
  store::Store& store_;
  const std::atomic<bool>& ready_;
  const MetricsRegistry& metrics_;
  EventHub& events_;
  const Clock& clock_;
  const std::function<nlohmann::json()> role_;
};

// The answers of GET /plugins and GET /scheduler/config, rebuilt after every
// change of the framework (Refresh; the scheduler calls it with its mutex
// held), so those reads never wait for that mutex, which a commit may hold
// through its fsync. They are kept serialised: a read copies the bytes
// instead of writing the JSON out again (the dump was most of the handler's
// cost under load), and the bytes only change when the framework does.
class PolicyViews {
 public:
  void Refresh(const framework::Framework& fw) HF_EXCLUDES(mu_);
  // The JSON bodies, compact, as JsonResponse writes them; null before the
  // first Refresh.
  std::shared_ptr<const std::string> plugins() const HF_EXCLUDES(mu_);
  std::shared_ptr<const std::string> config() const HF_EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  std::shared_ptr<const std::string> plugins_ HF_GUARDED_BY(mu_);
  std::shared_ptr<const std::string> config_ HF_GUARDED_BY(mu_);
};

// The scheduling policy: plugins, the scheduler's thresholds and weights,
// plugin reloads, the preview of a candidate policy, and the audit log of
// changes (config and tokens).
class PolicyApi {
 public:
  // `file_root`: files a plugin's config names must lie under it (empty:
  // anywhere the server may read).
  PolicyApi(scheduler::Scheduler& scheduler, store::Store& store, const PolicyViews& views,
            EventHub& events, const Clock& clock, std::string file_root)
      : scheduler_(scheduler),
        store_(store),
        views_(views),
        events_(events),
        clock_(clock),
        file_root_(std::move(file_root)) {}

  // From memory (views): never waits for the scheduler or the store.
  Response ListPlugins(const Request& req, const Caller& caller) const;
  Response GetSchedulerConfig(const Request& req, const Caller& caller) const;

  Response PutPlugin(const Request& req, const Caller& caller);
  Response ReloadPlugin(const Request& req, const Caller& caller);
  Response PutSchedulerConfig(const Request& req, const Caller& caller);
  Response Preview(const Request& req, const Caller& caller) const;
  Response ListAudit(const Request& req, const Caller& caller) const;

 private:
  // InvalidArgument unless every file `config` names for plugin `name` lies
  // under file_root_ (when set).
  Status CheckPluginPaths(const framework::Framework& fw, const std::string& name,
                          const json& config) const;

  scheduler::Scheduler& scheduler_;
  store::Store& store_;
  const PolicyViews& views_;
  EventHub& events_;
  const Clock& clock_;
  const std::string file_root_;
};

// Nodes: list and get (with allocations and measured usage), register or
// replace, delete, cordon, drain and uncordon.
class NodesApi {
 public:
  NodesApi(scheduler::Scheduler& scheduler, const store::Store& store)
      : scheduler_(scheduler), store_(store) {}

  Response List(const Request& req, const Caller& caller) const;
  Response Get(const Request& req, const Caller& caller) const;
  Response Put(const Request& req, const Caller& caller);
  Response Delete(const Request& req, const Caller& caller);
  Response Cordon(const Request& req, const Caller& caller);
  Response Drain(const Request& req, const Caller& caller);
  Response Uncordon(const Request& req, const Caller& caller);

 private:
  Response Show(const std::string& name) const;
  Response SetCondition(const Request& req, const Caller& caller, NodeCondition condition);

  scheduler::Scheduler& scheduler_;
  const store::Store& store_;
};

// Tasks: submit (one, or a batch all or none), list with filters and pages,
// get with events, cancel.
class TasksApi {
 public:
  TasksApi(scheduler::Scheduler& scheduler, const store::Store& store)
      : scheduler_(scheduler), store_(store) {}

  Response Submit(const Request& req, const Caller& caller);
  Response SubmitBatch(const Request& req, const Caller& caller);
  Response List(const Request& req, const Caller& caller) const;
  Response Get(const Request& req, const Caller& caller) const;
  Response Cancel(const Request& req, const Caller& caller);

 private:
  scheduler::Scheduler& scheduler_;
  const store::Store& store_;
};

// Jobs (docs/JOBS.md): submit (every member stored with it, all or none),
// list, get with members and events, cancel (every member stops).
class JobsApi {
 public:
  JobsApi(scheduler::Scheduler& scheduler, const store::Store& store)
      : scheduler_(scheduler), store_(store) {}

  Response Submit(const Request& req, const Caller& caller);
  Response List(const Request& req, const Caller& caller) const;
  Response Get(const Request& req, const Caller& caller) const;
  Response Cancel(const Request& req, const Caller& caller);

 private:
  // The job as GET answers it, with `status`.
  Response Show(uint64_t id, int status) const;

  scheduler::Scheduler& scheduler_;
  const store::Store& store_;
};

// Queues (docs/QUEUES.md): list with usage, get one, create, replace,
// delete. Submissions name a queue; CheckSubmit says whether the caller may.
class QueuesApi {
 public:
  explicit QueuesApi(scheduler::Scheduler& scheduler) : scheduler_(scheduler) {}

  Response List(const Request& req, const Caller& caller) const;
  Response Get(const Request& req, const Caller& caller) const;
  Response Create(const Request& req, const Caller& caller);
  Response Put(const Request& req, const Caller& caller);
  Response Delete(const Request& req, const Caller& caller);

 private:
  Response Write(const Request& req, const Caller& caller, bool create);

  scheduler::Scheduler& scheduler_;
};

// Whether `caller` may submit to `queue` (its submitters), as a Status
// for StatusError: 400 unknown or not a leaf, 403 not a submitter.
Status CheckSubmit(const scheduler::Scheduler& scheduler, const std::string& queue,
                   const Caller& caller);

// API tokens: create (the secret is shown once), list (no secrets), revoke.
// Every change re-reads the authenticator's tokens before it answers.
class TokensApi {
 public:
  TokensApi(store::Store& store, Authenticator& auth, const Clock& clock)
      : store_(store), auth_(auth), clock_(clock) {}

  Response Create(const Request& req, const Caller& caller);
  Response List(const Request& req, const Caller& caller) const;
  Response Revoke(const Request& req, const Caller& caller);

 private:
  store::Store& store_;
  Authenticator& auth_;
  const Clock& clock_;
};

// What an agent's timers follow (docs/AGENT.md): sent in the answer to a
// registration and to every heartbeat.
struct AgentTimings {
  int heartbeat_interval_s = 5;
  double fence_after_s = 30;
  double fence_grace_s = 10;
};

// The agents' side (docs/AGENT.md): registration, heartbeats with measured
// usage, the long poll of a node's tasks, and task status reports (a
// running service replica's address goes to the inference service). An
// agent token acts for its own node only (ActsFor).
class AgentsApi {
 public:
  AgentsApi(scheduler::Scheduler& scheduler, inference::InferenceService& inference,
            AgentTimings timings)
      : scheduler_(scheduler), inference_(inference), timings_(timings) {}

  Response Register(const Request& req, const Caller& caller);
  Response Heartbeat(const Request& req, const Caller& caller);
  // Deferred: the answer waits in the scheduler's watch table.
  Response Assignments(const Request& req, const Caller& caller);
  Response Report(const Request& req, const Caller& caller);

 private:
  scheduler::Scheduler& scheduler_;
  inference::InferenceService& inference_;
  const AgentTimings timings_;
};

// Task output: agents append it (from the placed node only), users read it
// from an offset. It lives in DATA_DIR/logs/<task>.log, at most 16 MiB a
// task.
class LogsApi {
 public:
  LogsApi(const store::Store& store, std::string data_dir)
      : store_(store), data_dir_(std::move(data_dir)) {}

  Response Append(const Request& req, const Caller& caller) HF_EXCLUDES(append_mu_);
  Response Read(const Request& req, const Caller& caller) const;

 private:
  const store::Store& store_;
  const std::string data_dir_;
  Mutex append_mu_;  // one append at a time to the log files (no member)
};

// Inference services' REST side (docs/API.md, "Inference"): model
// deployments, endpoints and their API keys, and the panel of models,
// endpoints and GPU memory. The gateway itself (/inference/v1/...,
// /serve/...) is InferenceService::Gateway.
class InferenceApi {
 public:
  InferenceApi(inference::InferenceService& inference, const scheduler::Scheduler& scheduler,
               const store::Store& store)
      : inference_(inference), scheduler_(scheduler), store_(store) {}

  Response Panel(const Request& req, const Caller& caller) const;
  Response ListModels(const Request& req, const Caller& caller) const;
  Response CreateModel(const Request& req, const Caller& caller);
  Response GetModel(const Request& req, const Caller& caller) const;
  Response UpdateModel(const Request& req, const Caller& caller);
  Response DeleteModel(const Request& req, const Caller& caller);
  Response ListEndpoints(const Request& req, const Caller& caller) const;
  Response CreateEndpoint(const Request& req, const Caller& caller);
  Response GetEndpoint(const Request& req, const Caller& caller) const;
  Response DeleteEndpoint(const Request& req, const Caller& caller);
  Response AddKey(const Request& req, const Caller& caller);
  Response RevokeKey(const Request& req, const Caller& caller);

 private:
  inference::InferenceService& inference_;
  const scheduler::Scheduler& scheduler_;
  const store::Store& store_;
};

// The web UI (docs/UI.md): its built files, loaded once. Every GET outside
// the API, health and metrics is the UI's (its own routes, /tasks/17, are
// answered with index.html).
class UiApi {
 public:
  // `dir` empty: the `ui` folder beside the binary. A missing folder is
  // logged, not fatal: the API works without it.
  explicit UiApi(std::string dir);
  static bool IsUiPath(const Request& req);
  Response Serve(const Request& req) const;

 private:
  std::optional<http::StaticFiles> files_;
  std::string missing_;  // why there are none, for GET /
};

}  // namespace hf::server::api

#endif  // HF_SERVER_API_API_H_
