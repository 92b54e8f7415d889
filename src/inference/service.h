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
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/event_sink.h"
#include "core/model.h"
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
  Status Recover();
  void Start();
  void Stop();

  // Model deployments. Create: AlreadyExists for a taken name. Update:
  // NotFound; a changed replica template starts a rolling update. Delete:
  // FailedPrecondition while an endpoint routes to it; stops its replicas.
  Result<nlohmann::json> CreateModel(const ModelSpec& spec, const std::string& actor);
  Result<nlohmann::json> UpdateModel(const ModelSpec& spec, const std::string& actor);
  Status DeleteModel(const std::string& name, const std::string& actor);
  Result<nlohmann::json> GetModel(const std::string& name) const;
  nlohmann::json ListModels() const;

  // Endpoints. Create returns the endpoint with its first API key's secret
  // (shown once) unless it is public. NotFound for an unknown model.
  Result<nlohmann::json> CreateEndpoint(EndpointSpec spec, const std::string& actor);
  Status DeleteEndpoint(const std::string& name, const std::string& actor);
  Result<nlohmann::json> GetEndpoint(const std::string& name) const;
  nlohmann::json ListEndpoints() const;
  // A new key for the endpoint; the secret is in the answer only.
  Result<nlohmann::json> AddKey(const std::string& endpoint, const std::string& key_name);
  Status RevokeKey(const std::string& endpoint, int64_t key_id);

  // The agent reported a replica's process running at host:port.
  void ReplicaStarted(TaskKey id, const std::string& host, uint16_t port);

  // Per replica task id, its model's name (the panel's per-GPU view).
  std::map<TaskKey, std::string> ReplicaModels() const;

  // For /metrics.
  struct ModelCounts {
    std::string model;
    int ready = 0, desired = 0, inflight = 0, queued = 0;
  };
  struct EndpointCounts {
    std::string endpoint;
    uint64_t requests = 0, errors = 0;
  };
  std::vector<ModelCounts> ModelMetrics() const;
  std::vector<EndpointCounts> EndpointMetrics() const;

  // The gateway: /inference/v1/... (OpenAI style, the endpoint named by the
  // body's "model") and /serve/<endpoint>/... (pass-through).
  static bool IsGatewayPath(const std::string& path);
  static constexpr const char* kGatewayPrefixes[] = {"/inference/v1/", "/serve/"};
  http::Response Gateway(const http::Request& req);

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
    std::mutex mu;
    std::vector<double> latencies_ms;  // ring of the last kLatencyWindow
    size_t latency_next = 0;
    std::deque<int64_t> recent_ms;  // completion times within the rate window
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

  void Loop();
  void TickLocked(int64_t now, Actions& actions);
  void Autoscale(Model& m, int64_t now, Actions& actions);
  void Reconcile(Model& m, int64_t now, Actions& actions);
  void StartHealthChecks(int64_t now);
  void HealthResult(const std::string& model, TaskKey id, bool ok, const std::string& error);
  void RefreshReplicaStates(int64_t now);
  void Execute(Actions& actions);
  Task ReplicaTask(Model& m);
  nlohmann::json StoredModel(const Model& m) const;
  nlohmann::json ModelViewLocked(const Model& m) const;
  std::pair<std::string, std::string> StatusLocked(const Model& m) const;
  nlohmann::json EndpointViewLocked(const Endpoint& e) const;
  void Publish(nlohmann::json data);
  void MarkUnreadyLocked(Model& m, Replica& r, const std::string& why);
  // A replica ended or was given up before it was ever ready; enough in a
  // row mark the model failed and delay the next replica.
  void CountFailureLocked(Model& m, const std::string& why, int64_t now);

  // Gateway.
  void Dispatch(std::shared_ptr<Call> call);
  void Forward(std::shared_ptr<Call> call, const std::string& host, uint16_t port,
               TaskKey replica, std::shared_ptr<ReplicaLive> live);
  void Finish(const std::shared_ptr<Call>& call, int status);
  http::Response ListOpenAiModels(const http::Request& req) const;

  store::Store* store_;
  scheduler::Scheduler* scheduler_;
  EventSink* events_;
  const Clock* clock_;
  InferenceOptions options_;
  std::unique_ptr<http::UpstreamClient> upstream_;

  std::mutex api_mu_;  // orders API changes and model writes to the store
  mutable std::mutex mu_;
  std::map<std::string, Model> models_;
  std::map<std::string, Endpoint> endpoints_;
  std::map<TaskKey, std::string> replica_model_;  // every tracked replica
  // Replicas of erased models whose cancel failed: (model, task), retried.
  std::vector<std::pair<std::string, TaskKey>> orphans_;
  // Ports reported for tasks not (yet) known as replicas: (host, port).
  std::map<TaskKey, std::pair<std::string, uint16_t>> unclaimed_;
  int64_t next_key_id_ = 1;
  bool stop_ = false;
  bool started_ = false;
  std::condition_variable cv_;
  std::thread thread_;
};

}  // namespace hf::inference

#endif  // HF_INFERENCE_SERVICE_H_
