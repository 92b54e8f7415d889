// `heteroflow describe task|node|model|endpoint`: one object of the API (docs/API.md) as
// human-readable text, in the manner of `kubectl describe`. A task shows its
// state, node, requests, allocation, pending reason and events; a node its
// condition, capacity and allocation, GPUs, RDMA devices and tasks; a model
// deployment and an endpoint (docs/INFERENCE.md) their spec and live state.
//
// Like the tables (client/output.h), these tolerate missing fields. Ages are
// relative to `now_s` (seconds since the epoch). Pure functions.
#ifndef HF_CLI_DESCRIBE_H_
#define HF_CLI_DESCRIBE_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace hf::cli {

// GET /api/v1/tasks/{id}'s answer (a task with "events").
std::string DescribeTask(const nlohmann::json& task, int64_t now_s);

// One argument as POSIX sh reads it back: bare when it holds only characters
// sh and bash take literally (letters, digits, @%+=:,./_- and braces that
// bash does not expand, as in `{port}`), else in single quotes (a ' inside
// as '\''). Commands print as their arguments so quoted, so
// that a `Command:` line can be pasted back into a shell.
std::string ShellQuote(std::string_view arg);
// GET /api/v1/nodes/{name}'s answer.
std::string DescribeNode(const nlohmann::json& node);
// A job: state, reason, gang, failure policy, its members (rank, role, task,
// state, node, reason) and its events.
std::string DescribeJob(const nlohmann::json& job, int64_t now_s);

// GET /api/v1/inference/models/{name}'s answer: spec, status and reason,
// autoscaling and its last decision, then one row per replica (task, node,
// state, ready, in flight, address, and the health error or pending reason).
std::string DescribeModel(const nlohmann::json& model, int64_t now_s);
// GET /api/v1/inference/endpoints/{name}'s answer: model, access, routes,
// counts and latency, then its API keys (ids and names; never a secret).
std::string DescribeEndpoint(const nlohmann::json& endpoint, int64_t now_s);

}  // namespace hf::cli

#endif  // HF_CLI_DESCRIBE_H_
