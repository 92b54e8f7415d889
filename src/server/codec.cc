#include "server/codec.h"

#include <charconv>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <set>
#include <utility>

#include "core/json_fields.h"
#include "core/model_json.h"

namespace hf::server {

using http::JsonResponse;
using http::Response;

namespace {

using nlohmann::json;
using namespace json_fields;  // NOLINT: the field readers are this file's vocabulary

json WeightJson(double w) {
  if (std::isfinite(w) && w == std::floor(w) && std::fabs(w) < 9.0e15) {
    return static_cast<int64_t>(w);
  }
  return w;
}

Status ReadWeight(const json& v, const std::string& path, double& out) {
  if (!v.is_number()) return InvalidArgument(path + " must be a number, got " + TypeName(v));
  out = v.get<double>();
  return framework::ValidateWeight(out, path);
}

Status ReadThreshold(const json& v, const std::string& path, std::optional<double>& out) {
  if (!v.is_number()) return InvalidArgument(path + " must be a number, got " + TypeName(v));
  double d = v.get<double>();
  if (!std::isfinite(d) || d <= 0 || d > 1) {
    return InvalidArgument(path + " must be a number in (0, 1]");
  }
  out = d;
  return Status::Ok();
}

std::string PrimaryPoint(uint32_t points) {
  if (points & framework::kScorePoint) return "Score";
  for (uint32_t bit : {framework::kFilterPoint, framework::kPostFilterPoint,
                       framework::kPreScorePoint, framework::kBindPoint}) {
    if (points & bit) return framework::ExtensionPointNames(bit);
  }
  return "";
}

}  // namespace

namespace {

// A task's "job" is the server's to set (POST /api/v1/jobs makes members).
Result<Task> SubmittedTask(const json& j, const std::string& prefix) {
  if (j.is_object() && j.contains("job")) {
    return InvalidArgument(json_fields::Field(prefix, "job") +
                           " is set by the server for a job's members: submit a job with POST "
                           "/api/v1/jobs");
  }
  return TaskFromJson(j, prefix);
}

}  // namespace

Result<Task> ParseTaskSubmission(const json& j) { return SubmittedTask(j, ""); }

Result<std::vector<Task>> ParseTaskBatch(const json& j) {
  if (!j.is_object()) {
    return InvalidArgument(std::string("batch must be an object, got ") + TypeName(j));
  }
  HF_RETURN_IF_ERROR(CheckKeys(j, "", {"tasks"}));
  auto it = j.find("tasks");
  if (it == j.end()) return InvalidArgument("tasks is required");
  if (!it->is_array()) {
    return InvalidArgument(std::string("tasks must be an array, got ") + TypeName(*it));
  }
  if (it->empty()) return InvalidArgument("tasks must not be empty");
  if (it->size() > kMaxTaskBatch) {
    return InvalidArgument("tasks holds " + std::to_string(it->size()) + " tasks; at most " +
                           std::to_string(kMaxTaskBatch) + " per batch");
  }
  std::vector<Task> out;
  out.reserve(it->size());
  for (size_t i = 0; i < it->size(); ++i) {
    Result<Task> t = SubmittedTask((*it)[i], Index("tasks", i));
    if (!t.ok()) return t.status();
    out.push_back(std::move(t).value());
  }
  return out;
}

Result<std::string> ParseNodeField(const json& j) {
  auto it = j.find("node");
  if (it == j.end() || !it->is_string() || !IsValidName(it->get<std::string>())) {
    return InvalidArgument("node must be a node name");
  }
  return it->get<std::string>();
}

Result<NodeSpec> ParseNodeSpec(const json& j) {
  if (j.is_object() && j.contains("usage_file")) {
    return InvalidArgument(
        "usage_file is only allowed for nodes declared in a file, not over the API");
  }
  return NodeSpecFromJson(j);
}

json PluginInfoToJson(const framework::PluginInfo& p) {
  json out = {{"name", p.name},
              {"type", PrimaryPoint(p.points)},
              {"enabled", p.settings.enabled},
              {"weight", framework::HasWeight(p.points) ? WeightJson(p.settings.weight) : json(nullptr)},
              {"status", framework::PluginStatusName(p.status)},
              {"config", p.settings.config.is_object() ? p.settings.config : json::object()},
              {"extension_points", framework::ExtensionPointNames(p.points)},
              {"required", p.required}};
  if (!p.modes.empty()) {
    out["mode"] = p.settings.mode;
    out["modes"] = p.modes;
  }
  if (!p.message.empty()) out["message"] = p.message;
  return out;
}

Result<framework::PluginPatch> ParsePluginPatch(const json& j) {
  HF_RETURN_IF_ERROR(RequireObject(j, "plugin update"));
  HF_RETURN_IF_ERROR(CheckKeys(j, "", {"enabled", "weight", "mode", "config"}));
  framework::PluginPatch patch;
  for (const auto& [key, v] : j.items()) {
    if (key == "enabled") {
      bool b = false;
      HF_RETURN_IF_ERROR(ReadBool(v, key, b));
      patch.enabled = b;
    } else if (key == "weight") {
      double w = 0;
      HF_RETURN_IF_ERROR(ReadWeight(v, key, w));
      patch.weight = w;
    } else if (key == "mode") {
      std::string m;
      HF_RETURN_IF_ERROR(ReadString(v, key, m));
      patch.mode = std::move(m);
    } else if (key == "config") {
      HF_RETURN_IF_ERROR(RequireObject(v, key));
      patch.config = v;
    }
  }
  return patch;
}

framework::SchedulerConfig SchedulerConfigPatch::ApplyTo(framework::SchedulerConfig base) const {
  if (load_threshold) base.load_threshold = *load_threshold;
  if (gpu_load_threshold) base.gpu_load_threshold = *gpu_load_threshold;
  if (memory_threshold) base.memory_threshold = *memory_threshold;
  if (percentage_of_nodes_to_score) base.percentage_of_nodes_to_score = *percentage_of_nodes_to_score;
  if (exclusive_gpu_vendors) base.exclusive_gpu_vendors = *exclusive_gpu_vendors;
  return base;
}

json SchedulerConfigToJson(const framework::SchedulerConfig& c,
                           const std::map<std::string, double>& score_weights) {
  json weights = json::object();
  for (const auto& [name, w] : score_weights) weights[name] = WeightJson(w);
  return {{"load_threshold", c.load_threshold},
          {"gpu_load_threshold", c.gpu_load_threshold},
          {"memory_threshold", c.memory_threshold},
          {"percentage_of_nodes_to_score", c.percentage_of_nodes_to_score},
          {"exclusive_gpu_vendors", c.exclusive_gpu_vendors},
          {"score_weights", std::move(weights)}};
}

Result<SchedulerConfigPatch> ParseSchedulerConfigPatch(const json& j) {
  HF_RETURN_IF_ERROR(RequireObject(j, "scheduler config update"));
  HF_RETURN_IF_ERROR(CheckKeys(
      j, "", {"load_threshold", "gpu_load_threshold", "memory_threshold",
              "percentage_of_nodes_to_score", "exclusive_gpu_vendors", "score_weights"}));
  SchedulerConfigPatch patch;
  for (const auto& [key, v] : j.items()) {
    if (key == "load_threshold") {
      HF_RETURN_IF_ERROR(ReadThreshold(v, key, patch.load_threshold));
    } else if (key == "gpu_load_threshold") {
      HF_RETURN_IF_ERROR(ReadThreshold(v, key, patch.gpu_load_threshold));
    } else if (key == "memory_threshold") {
      HF_RETURN_IF_ERROR(ReadThreshold(v, key, patch.memory_threshold));
    } else if (key == "percentage_of_nodes_to_score") {
      int pct = 0;
      HF_RETURN_IF_ERROR(ReadInt<int>(v, key, 0, 100, pct));
      patch.percentage_of_nodes_to_score = pct;
    } else if (key == "exclusive_gpu_vendors") {
      std::vector<std::string> vendors;
      HF_RETURN_IF_ERROR(ReadStringList(v, key, false, framework::SchedulerConfig::kMaxExclusiveVendors,
                                        vendors));
      HF_RETURN_IF_ERROR(framework::ValidateVendorList(vendors, key));
      patch.exclusive_gpu_vendors = std::move(vendors);
    } else if (key == "score_weights") {
      HF_RETURN_IF_ERROR(RequireObject(v, key));
      std::map<std::string, double> weights;
      for (const auto& [plugin, w] : v.items()) {
        double d = 0;
        HF_RETURN_IF_ERROR(ReadWeight(w, Field(key, Truncate(plugin)), d));
        weights[plugin] = d;
      }
      patch.score_weights = std::move(weights);
    }
  }
  return patch;
}

std::string StatusCodeToApiCode(StatusCode code) {
  std::string api = StatusCodeName(code);
  for (char& c : api) c = char(std::tolower(static_cast<unsigned char>(c)));
  return api;
}

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
      return 409;
    case StatusCode::kConflict:
      return 409;
    case StatusCode::kFailedPrecondition:
      return 422;
    case StatusCode::kResourceExhausted:
      return 429;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kInternal:
      return 500;
    case StatusCode::kPermissionDenied:
      return 403;
  }
  return 500;
}

json ErrorBody(const Status& s) {
  return {{"error", {{"code", StatusCodeToApiCode(s.code())}, {"message", s.message()}}}};
}

Response StatusError(const Status& s) { return JsonResponse(HttpStatusFor(s.code()), ErrorBody(s)); }

Result<int64_t> ParseIntParam(std::string_view name, std::string_view text, int64_t lo, int64_t hi) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
    return InvalidArgument(std::string(name) + " must be an integer, got '" + std::string(text) + "'");
  }
  if (v < lo || v > hi) {
    return InvalidArgument(std::string(name) + " must be in [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "], got " + std::to_string(v));
  }
  return v;
}

}  // namespace hf::server
