// How the client prints the API's answers (docs/CLIENT.md): `-o table` (the
// default; aligned columns like kubectl), `-o json` (the server's JSON,
// pretty) and `-o yaml` (the same data through yaml-cpp's emitter).
//
// The table functions take the API's JSON and are forgiving: a field that is
// missing or of another type prints as "<none>" rather than failing, so an
// older or newer server still gives a readable table. Times are RFC 3339
// (UTC); ages are relative to `now_s` (seconds since the epoch), passed in so
// that tests can fix it.
//
// Threading: pure functions.
#ifndef HF_CLI_OUTPUT_H_
#define HF_CLI_OUTPUT_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace hf::cli {

enum class OutputFormat { kTable, kJson, kYaml };

// "table", "json" or "yaml"; anything else is InvalidArgument.
Result<OutputFormat> ParseOutputFormat(std::string_view name);

// JSON (indent 2) or YAML text of `value`, ending in a newline. For kTable
// the caller prints its own table; this gives the JSON.
std::string Serialize(const nlohmann::json& value, OutputFormat format);

// Rows padded to the widest cell of each column plus three spaces (the last
// column is not padded), one line per row, the first row being the header.
std::string FormatTable(const std::vector<std::vector<std::string>>& rows);

// ID NAME STATE PRIORITY NODE GPU AGE REASON, one row per task.
std::string TasksTable(const nlohmann::json& tasks, int64_t now_s);
// NAME CONDITION GPUS MODEL CPU MEM RACK; GPUS is allocated/total GPUs,
// CPU and MEM are allocated/total cores and GiB.
std::string NodesTable(const nlohmann::json& nodes);
// ID NAME STATE RUNNING (running/replicas) GANG PRIORITY RESTARTS AGE REASON.
std::string JobsTable(const nlohmann::json& jobs, int64_t now_s);
// GET /api/v1/queues' queues: GPUs used, guaranteed, max and borrowed (all
// models together, "-" for no limit), dominant share, task counts.
std::string QueuesTable(const nlohmann::json& queues);
// NAME TYPE ENABLED WEIGHT STATUS MODE.
std::string PluginsTable(const nlohmann::json& plugins);
// ID NAME ROLE ACTIVE AGE EXPIRES (never a secret: the list has none).
std::string TokensTable(const nlohmann::json& tokens, int64_t now_s);
// NAME MODEL STATUS READY INFLIGHT QUEUED MIN-MAX AUTOSCALE REVISION AGE, one
// row per model deployment (GET /api/v1/inference/models): READY is
// ready/desired replicas, AUTOSCALE the target in-flight requests per replica
// or "-" without autoscaling, AGE from created_at_ms.
std::string ModelsTable(const nlohmann::json& models, int64_t now_s);
// NAME MODEL PUBLIC KEYS REQ/S REQUESTS ERRORS P50 P99 INFLIGHT, one row per
// endpoint: KEYS is the number of API keys, P50/P99 the latency in ms ("-"
// before the first request).
std::string EndpointsTable(const nlohmann::json& endpoints);
// KEY VALUE, one row per leaf, nested keys joined by '.' in the form
// `config set` takes (score_weights.binpack).
std::string KeyValueTable(const nlohmann::json& object);

// Helpers shared with `describe`.
//
// The field as text: strings as they are, numbers as JSON writes them
// (except that an integral float, 4.0, prints as 4), null/missing as
// "<none>".
std::string Text(const nlohmann::json& object, std::string_view key);
// The field as an integer (a float is rounded); nullopt when missing or not
// a number.
std::optional<int64_t> IntField(const nlohmann::json& object, std::string_view key);
// An RFC 3339 time ("2026-12-02T14:00:00Z", fraction and offset optional) as
// seconds since the epoch; nullopt if it is not one.
std::optional<int64_t> ParseRfc3339(std::string_view text);
// kubectl's ages: "42s", "5m", "3h", "12d", "2y"; "<none>" for negative.
std::string FormatAge(int64_t seconds);
// "" if not a time, else FormatAge(now - t).
std::string AgeOf(const nlohmann::json& object, std::string_view key, int64_t now_s);
// The same for a field holding milliseconds since the epoch (created_at_ms).
std::string AgeOfMs(const nlohmann::json& object, std::string_view key, int64_t now_s);
// A latency in ms with at most one decimal: 12.25 -> "12.3ms", 3 -> "3ms".
std::string Millis(double ms);
// Millicores as cores: 4000 -> "4", 1500 -> "1.5", 250 -> "0.25".
std::string Cores(int64_t milli);
// MiB as Gi from 1 GiB up, with at most one decimal: 16384 -> "16Gi",
// 1536 -> "1.5Gi"; below 1 GiB as Mi: 500 -> "500Mi".
std::string Memory(int64_t mib);
// A GPU request {"gpu": 2, "gpu_milli": 1000} -> "2"; {"gpu": 1,
// "gpu_milli": 500} -> "500m"; {"gpu": 2, "gpu_milli": 250} -> "2x250m";
// none -> "0".
std::string GpuRequest(const nlohmann::json& requests);

// The tasks table's GPU cell: GpuRequest, with the GPU memory a share asks
// for: {"gpu": 1, "gpu_milli": 500, "gpu_memory_mib": 20480} -> "500m+20Gi";
// a memory-only request (a share of 1, SPEC §7) -> "20Gi".
std::string GpuCell(const nlohmann::json& requests);

// The nodes table's GPUS cell: GPUs in use (holding any grant) / GPUs, and
// how many of those in use are shared: "3/4", "4/4 (1 shared)".
std::string NodeGpus(const nlohmann::json& node);

}  // namespace hf::cli

#endif  // HF_CLI_OUTPUT_H_
