#include "inference/spec.h"

#include <cmath>

#include "core/json_fields.h"
#include "core/model_json.h"

namespace hf::inference {

using nlohmann::json;
using namespace json_fields;  // NOLINT: the field readers are this file's vocabulary

namespace {

constexpr size_t kMaxModelName = 200;
constexpr int32_t kMaxReplicas = 1000;

Status ReadNumber(const json& v, const std::string& path, double lo, double hi, bool open_lo,
                  double& out) {
  if (!v.is_number()) return InvalidArgument(path + " must be a number, got " + TypeName(v));
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || (open_lo && d == lo) || d > hi) {
    return InvalidArgument(path + " must be " + (open_lo ? "> " : ">= ") + std::to_string(lo) +
                           " and <= " + std::to_string(hi) + ", got " + v.dump());
  }
  out = d;
  return Status::Ok();
}

Status ParseAutoscaling(const json& j, AutoscalingSpec& a) {
  HF_RETURN_IF_ERROR(RequireObject(j, "autoscaling"));
  HF_RETURN_IF_ERROR(CheckKeys(j, "autoscaling",
                               {"target_inflight_per_replica", "upscale_delay_s",
                                "downscale_delay_s", "window_s", "queue_size",
                                "cold_start_timeout_s"}));
  a.enabled = true;
  for (const auto& [key, v] : j.items()) {
    const std::string f = Field("autoscaling", key);
    if (key == "target_inflight_per_replica") {
      HF_RETURN_IF_ERROR(ReadNumber(v, f, 0, 1e6, true, a.target_inflight_per_replica));
    } else if (key == "upscale_delay_s") {
      HF_RETURN_IF_ERROR(ReadNumber(v, f, 0, 86400, false, a.upscale_delay_s));
    } else if (key == "downscale_delay_s") {
      HF_RETURN_IF_ERROR(ReadNumber(v, f, 0, 86400, false, a.downscale_delay_s));
    } else if (key == "window_s") {
      HF_RETURN_IF_ERROR(ReadNumber(v, f, 0.5, 3600, false, a.window_s));
    } else if (key == "queue_size") {
      HF_RETURN_IF_ERROR(ReadInt<int32_t>(v, f, 0, 100000, a.queue_size));
    } else if (key == "cold_start_timeout_s") {
      HF_RETURN_IF_ERROR(ReadNumber(v, f, 0, 3600, true, a.cold_start_timeout_s));
    }
  }
  return Status::Ok();
}

Status CheckHealthPath(const std::string& p) {
  if (p.empty() || p[0] != '/') return InvalidArgument("health_path must start with '/'");
  if (p.size() > 1024) return InvalidArgument("health_path must be at most 1024 characters");
  for (unsigned char c : p) {
    if (c <= 0x20 || c >= 0x7f) {
      return InvalidArgument("health_path must be printable ASCII without spaces");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<ModelSpec> ModelSpecFromJson(const json& j, const std::string& path_name) {
  if (!j.is_object()) return InvalidArgument(std::string("model must be an object, got ") + TypeName(j));
  HF_RETURN_IF_ERROR(CheckKeys(j, "",
                               {"name", "model", "command", "env", "health_path", "requests",
                                "priority", "preemptible", "min_replicas", "max_replicas",
                                "autoscaling", "startup_timeout_s", "placement"}));
  ModelSpec m;
  if (j.contains("name")) {
    HF_RETURN_IF_ERROR(ReadName(j["name"], "name", m.name));
    if (!path_name.empty() && m.name != path_name) {
      return InvalidArgument("name \"" + m.name + "\" does not match the URL's \"" + path_name + "\"");
    }
  } else if (path_name.empty()) {
    return InvalidArgument("name is required");
  } else {
    m.name = path_name;
  }
  if (m.name.size() > kMaxModelName) {
    return InvalidArgument("name must be at most " + std::to_string(kMaxModelName) + " characters");
  }
  if (!j.contains("command")) return InvalidArgument("command is required");
  bool has_min = false, has_max = false;
  for (const auto& [key, v] : j.items()) {
    if (key == "model") {
      HF_RETURN_IF_ERROR(ReadNonEmptyString(v, key, m.model));
      if (m.model.size() > 512) return InvalidArgument("model must be at most 512 characters");
    } else if (key == "command") {
      HF_RETURN_IF_ERROR(ReadStringList(v, key, false, kMaxCommandArgs, m.command));
    } else if (key == "env") {
      HF_RETURN_IF_ERROR(ReadStringMap(v, key, kMaxEnv, m.env));
    } else if (key == "health_path") {
      HF_RETURN_IF_ERROR(ReadString(v, key, m.health_path));
      HF_RETURN_IF_ERROR(CheckHealthPath(m.health_path));
    } else if (key == "requests") {
      HF_RETURN_IF_ERROR(RequireObject(v, key));
      // A replica that names GPU memory without a GPU count shares one GPU.
      if (v.contains("gpu_memory_mib") && !v.contains("gpu")) m.requests.gpu = 1;
      HF_RETURN_IF_ERROR(ParseRequests(v, key, m.requests));
      // Shared by memory: without an explicit compute share a replica
      // reserves memory only, so replicas pack by memory (SPEC §7).
      if (m.requests.gpu_memory_mib > 0 && !v.contains("gpu_milli")) m.requests.gpu_milli = 1;
      HF_RETURN_IF_ERROR(Prefixed(m.requests.Validate(), key));
    } else if (key == "priority") {
      HF_RETURN_IF_ERROR(ReadInt<int32_t>(v, key, -1000000, 1000000, m.priority));
    } else if (key == "preemptible") {
      HF_RETURN_IF_ERROR(ReadBool(v, key, m.preemptible));
    } else if (key == "min_replicas") {
      HF_RETURN_IF_ERROR(ReadInt<int32_t>(v, key, 0, kMaxReplicas, m.min_replicas));
      has_min = true;
    } else if (key == "max_replicas") {
      HF_RETURN_IF_ERROR(ReadInt<int32_t>(v, key, 0, kMaxReplicas, m.max_replicas));
      has_max = true;
    } else if (key == "autoscaling") {
      HF_RETURN_IF_ERROR(ParseAutoscaling(v, m.autoscaling));
    } else if (key == "startup_timeout_s") {
      HF_RETURN_IF_ERROR(ReadNumber(v, key, 0, 86400, true, m.startup_timeout_s));
    } else if (key == "placement") {
      std::string placement;
      HF_RETURN_IF_ERROR(ReadString(v, key, placement));
      std::optional<GroupPlacement> p = ParseGroupPlacement(placement);
      if (!p) return InvalidArgument("placement must be \"spread\" or \"pack\"");
      m.placement = *p;
    }
  }
  if (m.model.empty()) m.model = m.name;
  if (m.command.empty()) return InvalidArgument("command must not be empty");
  bool placeholder = false;
  for (const std::string& arg : m.command) placeholder |= arg.find("{port}") != std::string::npos;
  if (!placeholder) {
    return InvalidArgument(
        "command must contain the {port} placeholder: the agent picks each replica's port");
  }
  // One bound given alone sets both, so {"min_replicas": 2} means two.
  if (has_min && !has_max) m.max_replicas = std::max(m.min_replicas, m.max_replicas);
  if (has_max && !has_min) m.min_replicas = std::min(m.min_replicas, m.max_replicas);
  if (m.autoscaling.enabled && m.min_replicas == 0 && m.autoscaling.queue_size == 0) {
    return InvalidArgument(
        "autoscaling.queue_size must be >= 1 when min_replicas is 0: the first request waits "
        "while a replica starts");
  }
  if (m.min_replicas > m.max_replicas) {
    return InvalidArgument("min_replicas (" + std::to_string(m.min_replicas) +
                           ") must be <= max_replicas (" + std::to_string(m.max_replicas) + ")");
  }
  return m;
}

json ModelSpecToJson(const ModelSpec& m) {
  json j = {{"name", m.name},
            {"model", m.model},
            {"command", m.command},
            {"env", m.env},
            {"health_path", m.health_path},
            {"requests", RequestsToJson(m.requests)},
            {"priority", m.priority},
            {"preemptible", m.preemptible},
            {"min_replicas", m.min_replicas},
            {"max_replicas", m.max_replicas},
            {"startup_timeout_s", m.startup_timeout_s},
            {"placement", GroupPlacementName(m.placement)}};
  if (m.autoscaling.enabled) {
    const AutoscalingSpec& a = m.autoscaling;
    j["autoscaling"] = {{"target_inflight_per_replica", a.target_inflight_per_replica},
                        {"upscale_delay_s", a.upscale_delay_s},
                        {"downscale_delay_s", a.downscale_delay_s},
                        {"window_s", a.window_s},
                        {"queue_size", a.queue_size},
                        {"cold_start_timeout_s", a.cold_start_timeout_s}};
  }
  return j;
}

bool ReplicaTemplateDiffers(const ModelSpec& a, const ModelSpec& b) {
  return a.model != b.model || a.command != b.command || a.env != b.env ||
         a.health_path != b.health_path || RequestsToJson(a.requests) != RequestsToJson(b.requests) ||
         a.priority != b.priority || a.preemptible != b.preemptible;
}

Result<EndpointSpec> EndpointSpecFromJson(const json& j) {
  if (!j.is_object()) {
    return InvalidArgument(std::string("endpoint must be an object, got ") + TypeName(j));
  }
  HF_RETURN_IF_ERROR(CheckKeys(j, "", {"name", "model", "public"}));
  EndpointSpec e;
  if (!j.contains("name")) return InvalidArgument("name is required");
  if (!j.contains("model")) return InvalidArgument("model is required");
  HF_RETURN_IF_ERROR(ReadName(j["name"], "name", e.name));
  HF_RETURN_IF_ERROR(ReadName(j["model"], "model", e.model));
  if (j.contains("public")) HF_RETURN_IF_ERROR(ReadBool(j["public"], "public", e.public_access));
  return e;
}

json EndpointToStored(const EndpointSpec& e) {
  json keys = json::array();
  for (const EndpointKey& k : e.keys) {
    keys.push_back({{"id", k.id}, {"name", k.name}, {"hash", k.hash}, {"created_at_ms", k.created_at_ms}});
  }
  return {{"name", e.name}, {"model", e.model}, {"public", e.public_access}, {"keys", keys}};
}

Result<EndpointSpec> EndpointFromStored(const json& j) {
  try {
    EndpointSpec e;
    e.name = j.at("name").get<std::string>();
    e.model = j.at("model").get<std::string>();
    e.public_access = j.at("public").get<bool>();
    for (const json& k : j.at("keys")) {
      e.keys.push_back({k.at("id").get<int64_t>(), k.at("name").get<std::string>(),
                        k.at("hash").get<std::string>(), k.at("created_at_ms").get<int64_t>()});
    }
    return e;
  } catch (const json::exception& ex) {
    return Internal(std::string("stored endpoint does not parse: ") + ex.what());
  }
}

}  // namespace hf::inference
