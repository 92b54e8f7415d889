// `heteroflow describe task|node`: one object of the API (docs/API.md) as
// human-readable text, in the manner of `kubectl describe`. A task shows its
// state, node, requests, allocation, pending reason and events; a node its
// condition, capacity and allocation, GPUs, RDMA devices and tasks.
//
// Like the tables (client/output.h), these tolerate missing fields. Ages are
// relative to `now_s` (seconds since the epoch). Pure functions.
#ifndef HF_CLI_DESCRIBE_H_
#define HF_CLI_DESCRIBE_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace hf::cli {

// GET /api/v1/tasks/{id}'s answer (a task with "events").
std::string DescribeTask(const nlohmann::json& task, int64_t now_s);
// GET /api/v1/nodes/{name}'s answer.
std::string DescribeNode(const nlohmann::json& node);

}  // namespace hf::cli

#endif  // HF_CLI_DESCRIBE_H_
