// Request paths and bodies built from command-line arguments: the parts of
// the client that turn what the user typed into what the API takes
// (docs/API.md). Errors are InvalidArgument, which the command reports as a
// usage error (exit 2) before anything is sent.
//
// Threading: pure functions.
#ifndef HF_CLI_REQUEST_BUILDERS_H_
#define HF_CLI_REQUEST_BUILDERS_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/text.h"

namespace hf::cli {

// A name typed by the user stays one path segment or query value.
using hf::UrlEncode;

// `config set` arguments, KEY=VALUE each, as one JSON object for
// PUT /api/v1/scheduler/config. A dotted KEY nests (score_weights.binpack=2
// -> {"score_weights": {"binpack": 2}}). VALUE is read as JSON when it parses
// as JSON (0.85, 2, true, null, "quoted", {"a":1}), else taken as a string.
// The server checks the keys and ranges; this refuses only what cannot be
// sent: no '=', an empty key or key part, an empty value, the same key twice,
// and a key that is both a value and a parent (a=1 a.b=2).
Result<nlohmann::json> ParseConfigAssignments(const std::vector<std::string>& args);

// The body of PUT /api/v1/plugins/{name} with only the given fields.
// `enabled` is "true" or "false"; `config` is a JSON object's text. Errors:
// no field given, a weight that is negative or not finite, `enabled` not a
// boolean, `config` not a JSON object.
struct PluginSetArgs {
  std::optional<double> weight;
  std::optional<std::string> enabled;
  std::optional<std::string> mode;
  std::optional<std::string> config;
};
Result<nlohmann::json> PluginPatchBody(const PluginSetArgs& args);

// GET /api/v1/tasks's filters; empty or unset ones are left out.
struct TaskFilters {
  std::string state;
  std::string node;
  std::string group;
  std::optional<int> priority;
  std::optional<int> limit;
  std::optional<long long> after;
};
// "/api/v1/tasks" plus the query: "/api/v1/tasks?state=pending&limit=10".
std::string TaskListTarget(const TaskFilters& f);

}  // namespace hf::cli

#endif  // HF_CLI_REQUEST_BUILDERS_H_
