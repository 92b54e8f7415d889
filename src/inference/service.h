// Inference services (SPEC §7, docs/INFERENCE.md): model deployments whose
// replicas are tasks placed by the scheduler, the gateway that forwards
// endpoint requests to ready replicas, and the autoscaler.
//
// A replica is a task of kind "inference" in group "inference.<model>",
// carrying HETEROFLOW_MODEL_REVISION in its env, so the deployments can be
// rebuilt from the task table after a restart; where it listens (reported by
// its agent) is stored beside it. The controller loop, every `tick`:
//   - reads the state of every replica task (pending, running, ended);
//   - health-checks running replicas (GET health_path); a replica is ready
//     only while its checks pass, and leaves the rotation at its first
//     failed check or refused connection;
//   - runs the autoscaler of each model and records every decision as an
//     event with its inputs;
//   - reconciles: starts replicas up to the desired count (one at a time
//     during a rolling update, never dropping below the ready count), drains
//     and then cancels surplus ones (fewest in-flight requests first).
//
// Threading: every public method may be called from any thread.
#ifndef HF_INFERENCE_SERVICE_H_
#define HF_INFERENCE_SERVICE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/event_sink.h"
#include "core/model.h"
#include "core/mutex.h"
#include "core/status.h"
#include "http/server.h"
#include "inference/autoscaler.h"
#include "inference/spec.h"
#include "scheduler/scheduler.h"
#include "store/store.h"

namespace hf::http {
class UpstreamClient;
}  // namespace hf::http

namespace hf::inference {

struct InferenceOptions {
  std::chrono::milliseconds tick{250};
  std::chrono::milliseconds health_interval{1000};
  std::chrono::milliseconds health_timeout{2000};
  // A ready replica failing this many checks in a row is replaced.
  int unhealthy_replace_after = 10;
  // A draining replica is stopped when its last request ends, or after this.
  std::chrono::milliseconds drain_timeout{std::chrono::seconds(60)};
  // Replicas ending before ever being ready, in a row, that mark the model
  // failed; further replicas then start with a growing back-off.
  int crash_loop_threshold = 3;
  // A forwarded request's limits.
  std::chrono::milliseconds connect_timeout{2000};
  std::chrono::milliseconds response_timeout{std::chrono::minutes(10)};
  int upstream_threads = 2;
};

class InferenceService {
 public:
  InferenceService(store::Store* store, scheduler::Scheduler* scheduler, EventSink* events, const Clock* clock,
                   InferenceOptions options = {});
  ~InferenceService();
  InferenceService(const InferenceService&) = delete;
  InferenceService& operator=(const InferenceService&) = delete;

  // Loads models, endpoints and replicas from the store. Once, before Start.
  Status Recover() HF_EXCLUDES(mu_);
  void Start() HF_EXCLUDES(mu_);
  void Stop() HF_EXCLUDES(mu_);

  // Model deployments. Create: AlreadyExists for a taken name. Update:
  // NotFound; a changed replica template starts a rolling update. Delete:
  // FailedPrecondition while an endpoint routes to it; stops its replicas.
  Result<nlohmann::json> CreateModel(const ModelSpec& spec, const std::string& actor)
      HF_EXCLUDES(api_mu_, mu_);
  Result<nlohmann::json> UpdateModel(const ModelSpec& spec, const std::string& actor)
      HF_EXCLUDES(api_mu_, mu_);
  Status DeleteModel(const std::string& name, const std::string& actor) HF_EXCLUDES(api_mu_, mu_);
  Result<nlohmann::json> GetModel(const std::string& name) const HF_EXCLUDES(mu_);
  nlohmann::json ListModels() const HF_EXCLUDES(mu_);

  // Endpoints. Create returns the endpoint with its first API key's secret
  // (shown once) unless it is public. NotFound for an unknown model.
  Result<nlohmann::json> CreateEndpoint(EndpointSpec spec, const std::string& actor)
      HF_EXCLUDES(api_mu_, mu_);
  Status DeleteEndpoint(const std::string& name, const std::string& actor) HF_EXCLUDES(api_mu_, mu_);
  Result<nlohmann::json> GetEndpoint(const std::string& name) const HF_EXCLUDES(mu_);
  nlohmann::json ListEndpoints() const HF_EXCLUDES(mu_);
  // A new key for the endpoint; the secret is in the answer only.
  Result<nlohmann::json> AddKey(const std::string& endpoint, const std::string& key_name)
      HF_EXCLUDES(api_mu_, mu_);
  Status RevokeKey(const std::string& endpoint, int64_t key_id) HF_EXCLUDES(api_mu_, mu_);

  // The agent reported a replica's process running at host:port.
  void ReplicaStarted(TaskKey id, const std::string& host, uint16_t port) HF_EXCLUDES(mu_);

  // Per replica task id, its model's name (the panel's per-GPU view).
  std::map<TaskKey, std::string> ReplicaModels() const HF_EXCLUDES(mu_);

  // For /metrics.
  struct ModelCounts {
    std::string model;
    int ready = 0, desired = 0, inflight = 0, queued = 0;
  };
  struct EndpointCounts {
    std::string endpoint;
    uint64_t requests = 0, errors = 0;
  };
  std::vector<ModelCounts> ModelMetrics() const HF_EXCLUDES(mu_);
  std::vector<EndpointCounts> EndpointMetrics() const HF_EXCLUDES(mu_);

  // The gateway: /inference/v1/... (OpenAI style, the endpoint named by the
  // body's "model") and /serve/<endpoint>/... (pass-through).
  static bool IsGatewayPath(const std::string& path);
  static constexpr const char* kGatewayPrefixes[] = {"/inference/v1/", "/serve/"};
  http::Response Gateway(const http::Request& req) HF_EXCLUDES(mu_);

 private:
  struct ReplicaLive {
    std::atomic<int> inflight{0};
  };
  struct Replica {
    TaskKey id = 0;
    std::string name;
    int64_t revision = 0;
    TaskState state = TaskState::kPending;
    std::string node;
    std::string pending_reason;
    std::string host;
    uint16_t port = 0;
    bool ready = false;
    bool ever_ready = false;
    bool draining = false;
    int64_t drain_since_ms = 0;
    int health_failures = 0;
    std::string health_error;
    int64_t running_since_ms = 0;
    int64_t last_check_ms = 0;
    bool checking = false;
    std::shared_ptr<ReplicaLive> live = std::make_shared<ReplicaLive>();
  };
  struct Call;  // one gateway request
  struct Model {
    ModelSpec spec;
    int64_t revision = 1;
    int32_t desired = 0;
    int64_t next_replica = 1;
    int64_t created_at_ms = 0;
    std::map<TaskKey, Replica> replicas;
    Autoscaler autoscaler;
    nlohmann::json last_decision;
    // Status.
    bool lost = false;  // a ready replica went away; cleared once all are ready
    std::string lost_reason;
    bool scaling = false;  // the autoscaler changed `desired`; cleared once reached
    int consecutive_failures = 0;
    std::string last_failure;
    int64_t backoff_until_ms = 0;
    bool deleted = false;
    std::deque<std::shared_ptr<Call>> queue;  // waiting for a ready replica
  };
  struct EndpointStats {
    std::atomic<uint64_t> requests{0};
    std::atomic<uint64_t> errors{0};
    std::atomic<int> inflight{0};
    Mutex mu;  // guards the latencies and completion times below
    std::vector<double> latencies_ms HF_GUARDED_BY(mu);  // ring of the last kLatencyWindow
    size_t latency_next HF_GUARDED_BY(mu) = 0;
    std::deque<int64_t> recent_ms HF_GUARDED_BY(mu);  // completion times within the rate window
  };
  struct Endpoint {
    EndpointSpec spec;
    std::shared_ptr<EndpointStats> stats = std::make_shared<EndpointStats>();
  };
  // What the loop does outside the mutex.
  struct Actions {
    std::vector<std::pair<std::string, Task>> submit;  // (model, task)
    std::vector<std::pair<std::string, TaskKey>> cancel;
    std::set<std::string> persist;  // models whose stored object changed
    std::vector<std::shared_ptr<Call>> dispatch;
    std::vector<std::pair<std::shared_ptr<Call>, http::Response>> answer;
  };

  // The helpers named ...Locked, and those that take a Model or an
  // Endpoint of models_ or endpoints_, expect mu_ held.
  void Loop() HF_EXCLUDES(mu_);
  void TickLocked(int64_t now, Actions& actions) HF_REQUIRES(mu_);
  void Autoscale(Model& m, int64_t now, Actions& actions) HF_REQUIRES(mu_);
  void Reconcile(Model& m, int64_t now, Actions& actions) HF_REQUIRES(mu_);
  void StartHealthChecks(int64_t now) HF_EXCLUDES(mu_);
  void HealthResult(const std::string& model, TaskKey id, bool ok, const std::string& error)
      HF_EXCLUDES(mu_);
  void RefreshReplicaStates(int64_t now) HF_EXCLUDES(mu_);
  void Execute(Actions& actions) HF_EXCLUDES(api_mu_, mu_);
  Task ReplicaTask(Model& m) HF_REQUIRES(mu_);
  // Of any Model, also one not (yet) in models_: needs no lock of its own.
  nlohmann::json StoredModel(const Model& m) const;
  nlohmann::json ModelViewLocked(const Model& m) const HF_REQUIRES(mu_);
  std::pair<std::string, std::string> StatusLocked(const Model& m) const HF_REQUIRES(mu_);
  nlohmann::json EndpointViewLocked(const Endpoint& e) const HF_REQUIRES(mu_);
  void Publish(nlohmann::json data);
  void MarkUnreadyLocked(Model& m, Replica& r, const std::string& why) HF_REQUIRES(mu_);
  // A replica ended or was given up before it was ever ready; enough in a
  // row mark the model failed and delay the next replica.
  void CountFailureLocked(Model& m, const std::string& why, int64_t now) HF_REQUIRES(mu_);

  // Gateway.
  void Dispatch(std::shared_ptr<Call> call) HF_EXCLUDES(mu_);
  void Forward(std::shared_ptr<Call> call, const std::string& host, uint16_t port,
               TaskKey replica, std::shared_ptr<ReplicaLive> live) HF_EXCLUDES(mu_);
  void Finish(const std::shared_ptr<Call>& call, int status);
  // GET /inference/v1/models: the endpoints the caller's key may use.
  http::Response ListOpenAiModels(const http::Request& req) const HF_EXCLUDES(mu_);
  // GET /inference/v1/models/{name}: one endpoint; 404 unknown, 401 as a call
  // to it would be.
  http::Response RetrieveOpenAiModel(const http::Request& req, const std::string& name) const
      HF_EXCLUDES(mu_);

  store::Store* store_;
  scheduler::Scheduler* scheduler_;
  EventSink* events_;
  const Clock* clock_;
  InferenceOptions options_;
  std::unique_ptr<http::UpstreamClient> upstream_;

  // Orders API changes and model writes to the store: held across a change's
  // store write, it guards no member itself. Taken before mu_.
  Mutex api_mu_;
  mutable Mutex mu_;  // guards everything below up to cv_
  std::map<std::string, Model> models_ HF_GUARDED_BY(mu_);
  std::map<std::string, Endpoint> endpoints_ HF_GUARDED_BY(mu_);
  std::map<TaskKey, std::string> replica_model_ HF_GUARDED_BY(mu_);  // every tracked replica
  // Replicas of erased models whose cancel failed: (model, task), retried.
  std::vector<std::pair<std::string, TaskKey>> orphans_ HF_GUARDED_BY(mu_);
  // Ports reported for tasks not (yet) known as replicas: (host, port).
  std::map<TaskKey, std::pair<std::string, uint16_t>> unclaimed_ HF_GUARDED_BY(mu_);
  int64_t next_key_id_ HF_GUARDED_BY(mu_) = 1;
  bool stop_ HF_GUARDED_BY(mu_) = false;
  bool started_ HF_GUARDED_BY(mu_) = false;
  std::condition_variable cv_;
  // Set by Start (under mu_), joined by Stop (without it: the loop takes
  // mu_); Start and Stop are not called at the same time.
  std::thread thread_;
};

}  // namespace hf::inference

#endif  // HF_INFERENCE_SERVICE_H_
