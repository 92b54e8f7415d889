#include "agent/assignment.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "agent/accelerators/accelerator.h"
#include "core/model_json.h"

extern char** environ;

namespace hf::agent {
namespace {

using nlohmann::json;

// The submission fields of a task (SPEC Appendix A); TaskFromJson refuses
// anything else, and the assignment's task JSON carries more (id, state...).
constexpr const char* kSubmissionFields[] = {
    "name",        "group",   "group_placement",    "priority",           "kind",
    "requests",    "rdma_required", "depends_on",  "preemptible",
    "requeue_on_node_loss", "command", "env", "secret_env", "time_limit_s", "queue", "job"};

int64_t IntOr(const json& j, const char* key, int64_t fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

}  // namespace

Result<Allocation> ParseAllocation(const json& j) {
  if (!j.is_object()) return InvalidArgument("allocation must be an object");
  Allocation a;
  a.cpu_milli = IntOr(j, "cpu_milli", 0);
  a.memory_mib = IntOr(j, "memory_mib", 0);
  if (auto it = j.find("gpus"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) return InvalidArgument("allocation.gpus must be a list");
    for (const json& g : *it) {
      if (!g.is_object() || !g.contains("index") || !g["index"].is_number_integer()) {
        return InvalidArgument("allocation.gpus entries need an integer index");
      }
      a.gpus.push_back(GpuGrant{.index = g["index"].get<int32_t>(),
                                .milli = static_cast<int32_t>(IntOr(g, "milli", kWholeGpuMilli)),
                                .memory_mib = IntOr(g, "memory_mib", 0)});
    }
  }
  if (auto it = j.find("rdma_device"); it != j.end() && it->is_string()) {
    a.rdma_device = it->get<std::string>();
  }
  return a;
}

namespace {

Result<Assignment> ParseOne(const json& e) {
  Assignment out;
  out.id = static_cast<uint64_t>(IntOr(e, "id", 0));
  if (auto it = e.find("state"); it != e.end() && it->is_string())
    out.state = it->get<std::string>();
  auto t = e.find("task");
  if (t == e.end() || !t->is_object()) return InvalidArgument("assignment has no task object");
  json submission = json::object();
  for (const char* f : kSubmissionFields) {
    if (auto it = t->find(f); it != t->end() && !it->is_null()) submission[f] = *it;
  }
  Result<Task> task = TaskFromJson(submission, "task");
  if (!task.ok()) return task.status();
  out.task = std::move(task).value();
  out.task.key = out.id;
  auto a = e.find("allocation");
  if (a == e.end() || a->is_null()) return InvalidArgument("assignment has no allocation");
  HF_ASSIGN_OR_RETURN(out.allocation, ParseAllocation(*a));
  if (auto l = e.find("launch"); l != e.end() && l->is_object()) {
    auto env = l->find("env");
    if (env == l->end() || !env->is_object()) return InvalidArgument("launch has no env object");
    for (const auto& [k, v] : env->items()) {
      if (!v.is_string()) return InvalidArgument("launch.env." + k + " must be a string");
      out.launch_env[k] = v.get<std::string>();
    }
    if (auto h = l->find("hold"); h != l->end() && !h->is_null()) {
      if (!h->is_boolean()) return InvalidArgument("launch.hold must be a boolean");
      out.hold = h->get<bool>();
    }
  }
  return out;
}

}  // namespace

Result<AssignmentList> ParseAssignments(const json& body) {
  if (!body.is_object() || !body.contains("version") || !body["version"].is_number_integer()) {
    return InvalidArgument("assignments answer has no integer version");
  }
  if (!body.contains("tasks") || !body["tasks"].is_array()) {
    return InvalidArgument("assignments answer has no task list");
  }
  AssignmentList out;
  out.version = body["version"].get<int64_t>();
  for (const json& e : body["tasks"]) {
    if (!e.is_object()) continue;
    const uint64_t id = static_cast<uint64_t>(IntOr(e, "id", 0));
    Result<Assignment> a = ParseOne(e);
    if (id == 0 || !a.ok()) {
      out.bad[id] = a.ok() ? "assignment has no id" : a.status().message();
      continue;
    }
    out.tasks.push_back(std::move(a).value());
  }
  return out;
}

std::map<std::string, std::string> BuildTaskEnv(const std::map<std::string, std::string>& base,
                                                uint64_t id, const Task& task,
                                                const Allocation& allocation,
                                                const NodeDevices& node,
                                                std::optional<uint16_t> port,
                                                const std::map<std::string, std::string>& launch) {
  std::map<std::string, std::string> env = base;
  // The agent's own collective settings are not the task's: only what the
  // task asks for, or the agent gives below, reaches it.
  env.erase("NCCL_IB_HCA");
  env.erase("HCCL_IF_IP");
  for (const auto& [k, v] : task.env) env[k] = v;
  for (const auto& [k, v] : task.secret_env) env[k] = v;
  for (const auto& [k, v] : launch) env[k] = v;
  std::vector<int32_t> grants;
  int32_t share = kWholeGpuMilli;
  for (const GpuGrant& g : allocation.gpus) {
    grants.push_back(g.index);
    if (g.milli > 0) share = std::min(share, g.milli);
  }
  std::map<std::string, std::string> binding = accel::BindingEnv(node.gpus, node.bind_ids, node.vendor_index, grants);
  if (binding.empty()) binding[std::string(accel::FindVendor(kVendorNvidia)->BindingVariable())] = "";
  for (const std::string& var : accel::VariablesToClear(binding)) env.erase(var);
  for (auto& [k, v] : binding) env[k] = std::move(v);
  // The vendors of the task's devices, for their collective libraries.
  std::vector<std::string> vendors;
  for (int32_t index : grants) {
    for (const GpuDevice& g : node.gpus) {
      if (g.index == index && std::find(vendors.begin(), vendors.end(), g.vendor) == vendors.end()) {
        vendors.push_back(g.vendor);
      }
    }
  }
  // What the collective libraries of the task's vendors read; the task's own
  // values where the agent has none to give.
  const std::string address = launch.empty() ? "" : node.advertise_address;
  for (auto& [k, v] : accel::CollectiveEnvFor(vendors, allocation.rdma_device, address)) env[k] = v;
  // A task given a NIC but no device of a known vendor: NCCL's variable,
  // as for any task with an RDMA NIC.
  const bool known = std::any_of(vendors.begin(), vendors.end(),
                                 [](const std::string& v) { return accel::FindVendor(v) != nullptr; });
  if (!known && !allocation.rdma_device.empty()) env["NCCL_IB_HCA"] = allocation.rdma_device;
  env["HETEROFLOW_TASK_ID"] = std::to_string(id);
  env.erase("HETEROFLOW_GPU_MILLI");
  if (!allocation.gpus.empty() && share < kWholeGpuMilli) {
    env["HETEROFLOW_GPU_MILLI"] = std::to_string(share);
  }
  env.erase("HETEROFLOW_PORT");
  if (port.has_value()) {
    env["PORT"] = std::to_string(*port);
    env["HETEROFLOW_PORT"] = std::to_string(*port);
  }
  return env;
}

bool NeedsPort(const std::vector<std::string>& argv) {
  return std::any_of(argv.begin(), argv.end(), [](const std::string& a) {
    return a.find(kPortPlaceholder) != std::string::npos;
  });
}

std::vector<std::string> SubstitutePort(const std::vector<std::string>& argv, uint16_t port) {
  const std::string placeholder = kPortPlaceholder;
  const std::string value = std::to_string(port);
  std::vector<std::string> out = argv;
  for (std::string& a : out) {
    for (size_t at = a.find(placeholder); at != std::string::npos;
         at = a.find(placeholder, at + value.size())) {
      a.replace(at, placeholder.size(), value);
    }
  }
  return out;
}

std::vector<std::string> SubstituteLaunch(const std::vector<std::string>& argv,
                                          const std::map<std::string, std::string>& launch) {
  static constexpr std::pair<const char*, const char*> kPlaceholders[] = {
      {"{rank}", "RANK"},
      {"{world_size}", "WORLD_SIZE"},
      {"{node_rank}", "NODE_RANK"},
      {"{master_addr}", "MASTER_ADDR"},
      {"{master_port}", "MASTER_PORT"}};
  std::vector<std::string> out = argv;
  if (launch.empty()) return out;
  for (std::string& a : out) {
    for (const auto& [placeholder, var] : kPlaceholders) {
      auto it = launch.find(var);
      if (it == launch.end()) continue;
      const std::string p = placeholder;
      for (size_t at = a.find(p); at != std::string::npos; at = a.find(p, at + it->second.size())) {
        a.replace(at, p.size(), it->second);
      }
    }
  }
  return out;
}

Result<uint16_t> PickFreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Unavailable(std::string("cannot open a socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int err = errno;
    close(fd);
    return Unavailable(std::string("cannot find a free port: ") + std::strerror(err));
  }
  close(fd);
  return static_cast<uint16_t>(ntohs(addr.sin_port));
}

std::map<std::string, std::string> ProcessEnv() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

std::vector<std::string> EnvStrings(const std::map<std::string, std::string>& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

}  // namespace hf::agent
