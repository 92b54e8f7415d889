// JSON forms of the domain model (SPEC Appendix A), read strictly: unknown
// fields, wrong types and out-of-range values are InvalidArgument naming the
// field by its path. The API, the store and the client all use these, so a
// field has one name and one meaning everywhere.
#ifndef HF_CORE_MODEL_JSON_H_
#define HF_CORE_MODEL_JSON_H_

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/model.h"
#include "core/status.h"

namespace hf {

// A task's "requests" object, strictly (unknown keys refused); `path` names
// the fields in errors. Ranges are checked by Requests::Validate.
Status ParseRequests(const nlohmann::json& j, const std::string& path, Requests& r);
nlohmann::json RequestsToJson(const Requests& r);

// A task submission: name required; group, priority, kind, requests,
// rdma_required, depends_on, preemptible, requeue_on_node_loss, command, env,
// secret_env, time_limit_s, queue optional; "job" (the stored form of a job's
// member, null otherwise) is read here too, and refused by the API
// (ParseTaskSubmission). `prefix`
// names the task in messages ("" for a single one, "tasks[3]" in a batch).
Result<Task> TaskFromJson(const nlohmann::json& j, const std::string& prefix = "");
// Every field, defaults included (but time_limit_s and job, which appear
// only when set), so TaskFromJson(TaskToJson(t)) gives `t` back (less its
// key). Callers add "id", "state", "node" and so on. It
// holds secret_env's values: for the store and the task's own agent only.
nlohmann::json TaskToJson(const Task& t);
// TaskToJson for everyone else: secret_env as the list of its names.
nlohmann::json TaskViewJson(const Task& t);
const char* TaskKindName(TaskKind kind);
// {"id", "name", "role", "rank", "world_size", "min_available"}.
nlohmann::json JobMemberToJson(const JobMember& m);

// Most members one job may have, and the longest time limit (31 days).
inline constexpr int32_t kMaxJobMembers = 1024;
inline constexpr int64_t kMaxTimeLimitS = 31LL * 24 * 3600;

// A node inventory: name required; labels, cpu_milli, memory_mib, gpus, rdma,
// topology optional. Checked with NodeSpec::Validate.
Result<NodeSpec> NodeSpecFromJson(const nlohmann::json& j);
nlohmann::json NodeSpecToJson(const NodeSpec& n);

// {"node": node_name, "cpu_milli", "memory_mib",
//  "gpus": [{"index", "milli", "memory_mib"}], "rdma_device"}. The caller
// passes the name because an Allocation holds only the dense NodeId.
nlohmann::json AllocationToJson(const Allocation& a, std::string_view node_name);

}  // namespace hf

#endif  // HF_CORE_MODEL_JSON_H_
