// The REST API's JSON codec (SPEC §5, §6, Appendix A): request bodies in,
// domain values out, and the one mapping from Status codes to HTTP.
//
// Every parser is strict, because bad input must get a clear 4xx and change
// nothing (SPEC §9):
//   - unknown fields, at any level, are InvalidArgument naming the field by
//     its path: `unknown field "requests.gpus"`;
//   - a wrong type is InvalidArgument naming the field and the type it must
//     have: "requests.gpu must be an integer";
//   - integer fields take JSON integers, or numbers with an integral value
//     (2.0) inside the field's range; 2.5 or 1e30 is refused;
//   - quantities (CPU, memory, GPUs, GPU memory) must be >= 0.
// Batch parsers prefix each path with the element: "tasks[3].requests.gpu".
//
// Names. Task, group, depends_on and node names follow one rule, close to a
// Kubernetes DNS subdomain so names can become hostnames or labels later:
// 1 to 253 characters from [a-z0-9._-], starting and ending with [a-z0-9].
//
// Threading: every function is pure and may be called from any thread.
#ifndef HF_SERVER_CODEC_H_
#define HF_SERVER_CODEC_H_

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json_body.h"
#include "core/json_fields.h"
#include "core/model.h"
#include "core/model_json.h"
#include "core/status.h"
#include "framework/framework.h"
#include "framework/policy.h"
#include "http/server.h"

namespace hf::server {

// The most tasks one batch submission may carry. Each becomes a row and an
// event in one transaction; 1000 keeps a batch's commit well under a second.
inline constexpr size_t kMaxTaskBatch = 1000;


// Names follow json_fields::IsValidName; the domain documents' JSON forms
// (TaskToJson, NodeSpecToJson, AllocationToJson) are in core/model_json.h.
using json_fields::IsValidName;
using json_fields::kMaxNameLength;

// The Appendix A task submission:
//   {"name", "group", "priority", "kind": "batch"|"inference",
//    "requests": {"cpu_milli", "memory_mib", "gpu", "gpu_milli" (default 1000),
//                 "gpu_memory_mib", "gpu_models": [string]},
//    "rdma_required", "depends_on": [name], "preemptible" (default true),
//    "requeue_on_node_loss" (default true), "command": [string],
//    "env": {string: string}}
// Only `name` is required. priority is an int32 (may be negative); gpu and
// gpu_milli are int32, the other quantities int64. Ends with
// Requests::Validate() (gpu_milli in 1..1000 when gpu > 0). The returned
// Task has key 0; the store assigns it.
Result<Task> ParseTaskSubmission(const nlohmann::json& j);

// {"tasks": [task, ...]}: 1 to kMaxTaskBatch tasks. Errors name the element,
// e.g. "tasks[3].requests.gpu must be an integer".
Result<std::vector<Task>> ParseTaskBatch(const nlohmann::json& j);

// The Appendix A node inventory:
//   {"name", "labels": {string: string}, "cpu_milli", "memory_mib",
//    "gpus": [{"index", "uuid", "model", "vendor", "memory_mib", "numa",
//              "pcie_switch", "fabric_domain"}],
//    "rdma": [{"name", "numa", "pcie_switch"}],
//    "topology": {"zone", "switch", "rack"}}
// `name` is required; locality ids are int32 >= -1 (-1 = unknown). `usage_file`
// is refused: it is for nodes declared in a file, never for the API. Ends
// with NodeSpec::Validate().
Result<NodeSpec> ParseNodeSpec(const nlohmann::json& j);

// The "node" field of an agent's report: a node name.
Result<std::string> ParseNodeField(const nlohmann::json& j);

// The vision's plugin shape {"name","type","enabled","weight","status","config"}
// plus "extension_points" (all points, "Score,Bind"), "required", "mode" and
// "modes" (only for plugins with modes) and "message" (only when not empty).
// `type` is the plugin's primary point: "Score" for any plugin that scores,
// because the weight only means something there and the vision shows "Score"
// for binpack and spread (which also bind); otherwise its first point in
// cycle order ("Filter", "PostFilter"). Weights that are whole numbers are
// written as JSON integers (the vision's `"weight": 1`).
nlohmann::json PluginInfoToJson(const framework::PluginInfo& p);

// The body of PUT /plugins/{name}: any of "enabled" (bool), "weight" (finite
// number >= 0), "mode" (string), "config" (object). Anything else is named.
// Whether the mode or config keys suit the plugin is the framework's call.
Result<framework::PluginPatch> ParsePluginPatch(const nlohmann::json& j);

// A partial update of the scheduler config (PUT /scheduler/config).
struct SchedulerConfigPatch {
  std::optional<double> load_threshold;
  std::optional<double> gpu_load_threshold;
  std::optional<double> memory_threshold;
  std::optional<int> percentage_of_nodes_to_score;
  std::optional<std::vector<std::string>> exclusive_gpu_vendors;
  // Plugin name -> weight. Whether each plugin exists is the caller's check
  // (404), since the codec does not know the registry.
  std::optional<std::map<std::string, double>> score_weights;

  // `base` with the present thresholds and percentage replaced.
  framework::SchedulerConfig ApplyTo(framework::SchedulerConfig base) const;
};

// {"load_threshold","gpu_load_threshold","memory_threshold",
//  "score_weights": {plugin: weight}}. score_weights comes from the plugins'
// weights: SPEC §5 keeps one source of truth.
nlohmann::json SchedulerConfigToJson(const framework::SchedulerConfig& c,
                                     const std::map<std::string, double>& score_weights);

// Every key optional; thresholds numbers in (0, 1]; score_weights an object
// of finite numbers >= 0. Errors name the field ("load_threshold",
// "score_weights.binpack") or the unknown key.
Result<SchedulerConfigPatch> ParseSchedulerConfigPatch(const nlohmann::json& j);

// The API's error code for a Status code: its StatusCodeName in lower case
// ("invalid_argument", "not_found", ...), the same style as the transport's
// own codes ("payload_too_large", "unauthenticated"), so every error body of
// the API looks alike.
std::string StatusCodeToApiCode(StatusCode code);

// The one place Status codes become HTTP statuses:
//   Ok 200, InvalidArgument 400, NotFound 404, AlreadyExists 409,
//   Conflict 409, FailedPrecondition 422 (valid request, wrong state),
//   ResourceExhausted 429 (a queue or rate limit is full: the client should
//   back off and retry; cluster capacity never fails a request, the task
//   just stays pending), Unavailable 503, Internal 500.
// 401, 403 and 413 come from the HTTP layer before any Status exists.
int HttpStatusFor(StatusCode code);

// {"error": {"code": StatusCodeToApiCode(s.code()), "message": s.message()}}.
nlohmann::json ErrorBody(const Status& s);

// The answer for a failed Status: HttpStatusFor(code) with ErrorBody.
http::Response StatusError(const Status& s);

// A decimal integer (a query parameter or path segment) in [lo, hi];
// InvalidArgument naming `name` otherwise.
Result<int64_t> ParseIntParam(std::string_view name, std::string_view text, int64_t lo, int64_t hi);

}  // namespace hf::server

#endif  // HF_SERVER_CODEC_H_
