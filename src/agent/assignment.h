// What the server asks this node to run (docs/AGENT.md, "Assignments"), and
// the environment a task's process gets from it.
//
// Threading: pure functions.
#ifndef HF_AGENT_ASSIGNMENT_H_
#define HF_AGENT_ASSIGNMENT_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/status.h"

namespace hf::agent {

struct Assignment {
  uint64_t id = 0;
  std::string state;  // "scheduled" or "running", as the server has it
  Task task;
  Allocation allocation;  // allocation.node is not used (kNoNode)
  // A job member's launch environment (docs/JOBS.md): RANK, WORLD_SIZE,
  // MASTER_ADDR, ...; empty for other tasks.
  std::map<std::string, std::string> launch_env;
  // A job member that must not start yet (launch.hold): its gang starts
  // together. The agent keeps it, reports it "ready" once nothing on this
  // node is in its way, and starts it when a later list clears the hold.
  bool hold = false;
};

struct AssignmentList {
  int64_t version = 0;
  std::vector<Assignment> tasks;
  // Entries that could not be read: id -> why (an id of 0 when even the id
  // is missing). The agent reports these as failed rather than guessing.
  std::map<uint64_t, std::string> bad;
};

// An allocation's JSON, as the assignments carry it (and as the agent keeps
// it in a task's folder): {cpu_milli, memory_mib, gpus: [{index, milli,
// memory_mib}], rdma_device}.
Result<Allocation> ParseAllocation(const nlohmann::json& j);

// The body of GET /api/v1/agent/assignments. Fields of the task JSON that are
// not part of a submission (id, state, node, timestamps, ...) are ignored,
// so the server may add fields. InvalidArgument when the body has no
// version or no task list.
Result<AssignmentList> ParseAssignments(const nlohmann::json& body);

// What the agent knows of its node's devices, for binding tasks to them.
struct NodeDevices {
  std::vector<GpuDevice> gpus;  // the node's, as registered
  // Node index -> the id its vendor's binding variable takes (discovered
  // devices; accel::Discovered::bind_ids). Declared devices have none and
  // bind by their rank among their vendor's (accel::BindingEnv).
  std::map<int32_t, std::string> bind_ids;
  // Node index -> (vendor, the vendor's own number) of discovered devices.
  std::map<int32_t, std::pair<std::string, int32_t>> vendor_index;
  std::string advertise_address;  // the agent's --advertise-address, "" when unset
};

// The child's environment: `base` (the agent's own), then the task's env and
// secret_env, then what the agent sets, which wins over both:
//   <vendor binding variables>  accel::BindingEnv: for each vendor with
//                         devices on the node (CUDA_VISIBLE_DEVICES,
//                         ROCR_VISIBLE_DEVICES, ASCEND_RT_VISIBLE_DEVICES,
//                         HABANA_VISIBLE_MODULES), the task's devices of that
//                         vendor in allocation order, comma separated ("" when
//                         it got none: hides them all). A node with no device
//                         of a known vendor gets CUDA_VISIBLE_DEVICES="",
//                         hiding GPUs its inventory does not declare. Every
//                         other known vendor variable is removed (inherited
//                         from the agent, it would misdirect the task);
//   HETEROFLOW_TASK_ID    the id;
//   HETEROFLOW_GPU_MILLI  the share, only when a grant is below 1000 (the
//                         smallest, should grants ever differ);
//   NCCL_IB_HCA           the RDMA device, when one was allocated, for NCCL
//                         and RCCL (accel::CollectiveEnvFor; also for a task
//                         with no device of a known vendor); HCCL_IF_IP the
//                         advertised address, for a job member on Ascend.
//                         Without them, the task's own values stay (the
//                         agent's own environment's never reach a task);
//   PORT, HETEROFLOW_PORT the port the agent gave the task, only when
//                         `port` is set (a service task, see NeedsPort).
//                         Without it HETEROFLOW_PORT is removed and PORT is
//                         left as `base` and the task's env have it.
// A job member's `launch` environment (Assignment::launch_env) comes after
// the task's env and before what the agent sets.
std::map<std::string, std::string> BuildTaskEnv(const std::map<std::string, std::string>& base,
                                                uint64_t id, const Task& task,
                                                const Allocation& allocation,
                                                const NodeDevices& node,
                                                std::optional<uint16_t> port = std::nullopt,
                                                const std::map<std::string, std::string>& launch = {});

// `argv` with a job member's placeholders replaced from its launch
// environment: {rank}, {world_size}, {node_rank}, {master_addr} and
// {master_port}, so that `torchrun --nnodes {world_size} --node_rank {rank}
// --master_addr {master_addr} --master_port {master_port} ...` works as
// written. Unchanged when `launch` is empty.
std::vector<std::string> SubstituteLaunch(const std::vector<std::string>& argv,
                                          const std::map<std::string, std::string>& launch);

// The placeholder a service task (an inference replica) puts in its command
// where its listening port goes, e.g. ["python3", "server.py", "--port",
// "{port}"]. The agent gives such a task a free port and reports it.
inline constexpr const char kPortPlaceholder[] = "{port}";

// True when some element of `argv` contains kPortPlaceholder.
bool NeedsPort(const std::vector<std::string>& argv);

// `argv` with every kPortPlaceholder in every element replaced by `port`.
std::vector<std::string> SubstitutePort(const std::vector<std::string>& argv, uint16_t port);

// A TCP port that is free on this host now: binds an IPv4 socket to port 0
// on every address, reads the port the kernel chose and closes the socket.
// The port may be taken by someone else before the task binds it; the
// kernel rarely hands the same one out again soon. Unavailable when no
// socket can be bound.
Result<uint16_t> PickFreePort();

// The process's environment (environ) as a map.
std::map<std::string, std::string> ProcessEnv();
// {"K=V", ...} for exec.
std::vector<std::string> EnvStrings(const std::map<std::string, std::string>& env);

}  // namespace hf::agent

#endif  // HF_AGENT_ASSIGNMENT_H_
