// The JSON forms of inference objects (docs/INFERENCE.md): model deployments
// and endpoints, read strictly like every other API body (unknown fields,
// wrong types and out-of-range values are InvalidArgument naming the field).
#ifndef HF_INFERENCE_SPEC_H_
#define HF_INFERENCE_SPEC_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/status.h"

namespace hf::inference {

// How a model's replica count follows its load. Absent (`enabled` false):
// the model runs min_replicas replicas.
struct AutoscalingSpec {
  bool enabled = false;
  // Desired replicas = ceil(mean in-flight requests over `window_s` / this).
  double target_inflight_per_replica = 4;
  // How long the computed count must stay above (below) the current one
  // before the autoscaler scales up (down). Scaling up from zero for a
  // waiting request does not wait.
  double upscale_delay_s = 5;
  double downscale_delay_s = 60;
  double window_s = 10;
  // Requests held while no replica is ready (cold start), and how long each
  // may wait before it is answered 503.
  int32_t queue_size = 100;
  double cold_start_timeout_s = 120;
};

struct ModelSpec {
  std::string name;   // the deployment's name (a valid name, at most 200 characters)
  std::string model;  // the model id the replicas serve, e.g. "Qwen/Qwen2-7B"
  // argv of a replica; at least one element holds "{port}".
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  std::string health_path = "/health";
  Requests requests;  // per replica
  int32_t priority = 0;
  bool preemptible = true;
  int32_t min_replicas = 1;
  int32_t max_replicas = 1;
  AutoscalingSpec autoscaling;
  // A replica not ready this long after its process started is replaced.
  double startup_timeout_s = 600;
  // Where replicas go relative to each other: spread over nodes (and racks)
  // by default, so that one node's loss takes one replica; pack to keep them
  // together. Affects placements from now on: no rolling update.
  GroupPlacement placement = GroupPlacement::kSpread;
};

// `path_name`: the name from the URL of a PUT (the body's name, if any, must
// match it); empty for a POST, where the body's name is required.
Result<ModelSpec> ModelSpecFromJson(const nlohmann::json& j, const std::string& path_name = "");
nlohmann::json ModelSpecToJson(const ModelSpec& m);
// Whether two specs start different replicas (a change needs a rolling update).
bool ReplicaTemplateDiffers(const ModelSpec& a, const ModelSpec& b);

// One API key of an endpoint; only its SHA-256 is kept.
struct EndpointKey {
  int64_t id = 0;
  std::string name;
  std::string hash;
  int64_t created_at_ms = 0;
};

struct EndpointSpec {
  std::string name;   // what clients put in "model", and /serve/<name>/
  std::string model;  // the deployment it forwards to
  // Without keys: anyone who can reach the server may call it.
  bool public_access = false;
  std::vector<EndpointKey> keys;
};

// A POST body: name, model, public (optional).
Result<EndpointSpec> EndpointSpecFromJson(const nlohmann::json& j);
// The stored form (with key hashes) and the API form (without).
nlohmann::json EndpointToStored(const EndpointSpec& e);
Result<EndpointSpec> EndpointFromStored(const nlohmann::json& j);

}  // namespace hf::inference

#endif  // HF_INFERENCE_SPEC_H_
