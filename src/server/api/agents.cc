// The agents' side of the API (docs/AGENT.md): registration, heartbeats
// with measured usage, the long poll of a node's tasks, and task status.
#include <boost/asio/ip/address.hpp>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/json_fields.h"
#include "core/model_json.h"
#include "server/api/api.h"
#include "server/codec.h"

namespace hf::server::api {

using http::Reply;
using scheduler::NodeAssignment;
using scheduler::Scheduler;
using scheduler::TaskExit;

namespace {

json TimingsJson(const AgentTimings& t) {
  return {{"heartbeat_interval_s", t.heartbeat_interval_s},
          {"fence_after_s", t.fence_after_s},
          {"fence_grace_s", t.fence_grace_s}};
}

constexpr int kMaxWaitS = 60;
// More task processes than one node runs at once.
constexpr size_t kMaxRunningTasks = 100000;

Result<double> Ratio(const json& j, const std::string& field) {
  if (!j.is_number() || !std::isfinite(j.get<double>()) || j.get<double>() < 0 ||
      j.get<double>() > 1) {
    return InvalidArgument(field + " must be a number in [0, 1]");
  }
  return j.get<double>();
}

Result<NodeUsage> ParseUsage(const json& j) {
  NodeUsage u;
  if (!j.is_object()) return InvalidArgument("usage must be an object");
  HF_RETURN_IF_ERROR(
      json_fields::CheckKeys(j, "usage", {"cpu_load", "memory_used", "gpus", "running_tasks"}));
  if (j.contains("running_tasks")) {
    const json& ids = j["running_tasks"];
    if (!ids.is_array()) return InvalidArgument("usage.running_tasks must be an array of task ids");
    if (ids.size() > kMaxRunningTasks) {
      return InvalidArgument("usage.running_tasks has more than " +
                             std::to_string(kMaxRunningTasks) + " entries");
    }
    std::vector<uint64_t> running;
    for (size_t i = 0; i < ids.size(); ++i) {
      int64_t id = 0;
      HF_RETURN_IF_ERROR(json_fields::ReadInt(
          ids[i], "usage.running_tasks[" + std::to_string(i) + "]", int64_t{1}, INT64_MAX, id));
      running.push_back(static_cast<uint64_t>(id));
    }
    u.running_tasks = std::move(running);
  }
  if (j.contains("cpu_load")) {
    HF_ASSIGN_OR_RETURN(u.cpu_load, Ratio(j["cpu_load"], "usage.cpu_load"));
  }
  if (j.contains("memory_used")) {
    HF_ASSIGN_OR_RETURN(u.memory_used, Ratio(j["memory_used"], "usage.memory_used"));
  }
  if (j.contains("gpus")) {
    if (!j["gpus"].is_array()) return InvalidArgument("usage.gpus must be an array");
    for (size_t i = 0; i < j["gpus"].size(); ++i) {
      const json& g = j["gpus"][i];
      const std::string path = "usage.gpus[" + std::to_string(i) + "]";
      if (!g.is_object()) return InvalidArgument(path + " must be an object");
      HF_RETURN_IF_ERROR(
          json_fields::CheckKeys(g, path, {"index", "utilization", "memory_used_mib"}));
      GpuUsage gu;
      HF_RETURN_IF_ERROR(json_fields::ReadInt(g.value("index", json(nullptr)), path + ".index",
                                              int32_t{0}, int32_t{1023}, gu.index));
      if (g.contains("utilization")) {
        HF_ASSIGN_OR_RETURN(gu.utilization, Ratio(g["utilization"], path + ".utilization"));
      }
      if (g.contains("memory_used_mib")) {
        HF_RETURN_IF_ERROR(json_fields::ReadInt(g["memory_used_mib"], path + ".memory_used_mib",
                                                int64_t{0}, int64_t{1} << 40, gu.memory_used_mib));
      }
      u.gpus.push_back(gu);
    }
  }
  return u;
}

// `with_secrets`: the task's secret_env values, for the agent of its own
// node; anyone else (an admin replaying the call) gets their names.
json AssignmentJson(const NodeAssignment& a, const std::string& node, bool with_secrets) {
  json gpus = json::array();
  for (const GpuGrant& g : a.alloc.gpus) {
    gpus.push_back({{"index", g.index}, {"milli", g.milli}, {"memory_mib", g.memory_mib}});
  }
  return {{"id", a.task.key},
          {"state", TaskStateName(a.state)},
          {"task", with_secrets ? TaskToJson(a.task) : TaskViewJson(a.task)},
          {"allocation",
           {{"node", node},
            {"cpu_milli", a.alloc.cpu_milli},
            {"memory_mib", a.alloc.memory_mib},
            {"gpus", std::move(gpus)},
            {"rdma_device", a.alloc.rdma_device}}},
          {"launch", a.launch_env.empty()
                         ? json(nullptr)
                         : json{{"env", a.launch_env}, {"hold", a.hold}}}};
}

// An IPv4 or IPv6 address, for `field`.
Result<std::string> ParseAddress(const json& h, const std::string& field) {
  boost::system::error_code ec;
  if (h.is_string()) boost::asio::ip::make_address(h.get<std::string>(), ec);
  if (!h.is_string() || ec) return InvalidArgument(field + " must be an IPv4 or IPv6 address");
  return h.get<std::string>();
}

}  // namespace

Response AgentsApi::Register(const Request& req, const Caller& caller) {
  Result<json> body = ParseJsonBody(req.body);
  if (!body.ok()) return StatusError(body.status());
  Status s = json_fields::CheckKeys(*body, "", {"node", "address"});
  if (!s.ok()) return StatusError(s);
  if (!body->contains("node"))
    return StatusError(InvalidArgument("node (the inventory) is required"));
  // Where the node's tasks are reached (a job's MASTER_ADDR): the address
  // the agent advertises, or the one it called from.
  std::string address = req.remote_address;
  if (body->contains("address")) {
    Result<std::string> a = ParseAddress((*body)["address"], "address");
    if (!a.ok()) return StatusError(a.status());
    address = *a;
  }
  Result<NodeSpec> spec = ParseNodeSpec((*body)["node"]);
  if (!spec.ok()) return StatusError(json_fields::Prefixed(spec.status(), "node"));
  s = ActsFor(caller, spec->name);
  if (!s.ok()) return StatusError(s);
  Result<bool> created = scheduler_.PutNode(*spec, caller.name);
  if (!created.ok()) return StatusError(created.status());
  s = scheduler_.SetNodeAddress(spec->name, address);
  if (!s.ok()) return StatusError(s);
  // A registration is a sign of life: a NotReady node comes back.
  s = scheduler_.Heartbeat(spec->name, std::nullopt);
  if (!s.ok()) return StatusError(s);
  json out = TimingsJson(timings_);
  out["node"] = spec->name;
  return JsonResponse(200, out);
}

Response AgentsApi::Heartbeat(const Request& req, const Caller& caller) {
  Result<json> body = ParseJsonBody(req.body);
  if (!body.ok()) return StatusError(body.status());
  Status s = json_fields::CheckKeys(*body, "", {"node", "usage"});
  if (!s.ok()) return StatusError(s);
  Result<std::string> node = ParseNodeField(*body);
  if (!node.ok()) return StatusError(node.status());
  s = ActsFor(caller, *node);
  if (!s.ok()) return StatusError(s);
  std::optional<NodeUsage> usage;
  if (body->contains("usage")) {
    Result<NodeUsage> u = ParseUsage((*body)["usage"]);
    if (!u.ok()) return StatusError(u.status());
    usage = *u;
  }
  s = scheduler_.Heartbeat(*node, usage);
  if (!s.ok()) return StatusError(s);
  return JsonResponse(200, TimingsJson(timings_));
}

Response AgentsApi::Assignments(const Request& req, const Caller& caller) {
  std::string node;
  uint64_t version = 0;
  int wait_s = 30;
  for (const auto& [key, value] : req.query) {
    if (key == "node") {
      node = value;
    } else if (key == "version") {
      Result<int64_t> v = ParseIntParam(key, value, 0, INT64_MAX);
      if (!v.ok()) return StatusError(v.status());
      version = static_cast<uint64_t>(*v);
    } else if (key == "wait_s") {
      Result<int64_t> v = ParseIntParam(key, value, 1, kMaxWaitS);
      if (!v.ok()) return StatusError(v.status());
      wait_s = static_cast<int>(*v);
    } else {
      return StatusError(InvalidArgument("unknown query parameter '" + key + "'"));
    }
  }
  if (!IsValidName(node)) return StatusError(InvalidArgument("node must be a node name"));
  if (Status s = ActsFor(caller, node); !s.ok()) return StatusError(s);
  // The answer waits in the scheduler's watch table, not on a handler thread.
  const bool own_agent = caller.role == Role::kAgent;  // ActsFor held: its own node
  Response res;
  res.defer = [this, node, version, wait_s, own_agent](Reply reply) {
    scheduler_.WatchAssignments(
        node, version, std::chrono::seconds(wait_s),
        [node, own_agent, reply = std::move(reply)](Result<Scheduler::AssignmentList> r) {
          if (!r.ok()) return reply(StatusError(r.status()));
          json tasks = json::array();
          for (const NodeAssignment& a : r->second) {
            tasks.push_back(AssignmentJson(a, node, own_agent));
          }
          reply(JsonResponse(200, json{{"version", r->first}, {"tasks", std::move(tasks)}}));
        });
  };
  return res;
}

Response AgentsApi::Report(const Request& req, const Caller& caller) {
  Result<json> body = ParseJsonBody(req.body);
  if (!body.ok()) return StatusError(body.status());
  Status s = json_fields::CheckKeys(
      *body, "",
      {"node", "id", "state", "exit_code", "signal", "message", "port", "host", "fenced",
       "timed_out"});
  if (!s.ok()) return StatusError(s);
  Result<std::string> node = ParseNodeField(*body);
  if (!node.ok()) return StatusError(node.status());
  s = ActsFor(caller, *node);
  if (!s.ok()) return StatusError(s);
  int64_t id = 0;
  s = json_fields::ReadInt(body->value("id", json(nullptr)), "id", int64_t{1}, INT64_MAX, id);
  if (!s.ok()) return StatusError(s);
  TaskExit exit;
  const json state = body->value("state", json(nullptr));
  if (state == "running") {
    exit.state = TaskState::kRunning;
  } else if (state == "succeeded") {
    exit.state = TaskState::kSucceeded;
  } else if (state == "failed") {
    exit.state = TaskState::kFailed;
  } else if (state == "waiting") {
    // Not started yet: the agent waits for stopping processes to exit.
    exit.state = TaskState::kScheduled;
  } else if (state == "ready") {
    // Not started yet: a job's member held for its gang's start barrier.
    exit.state = TaskState::kScheduled;
    exit.ready = true;
  } else {
    return StatusError(
        InvalidArgument("state must be waiting, ready, running, succeeded or failed"));
  }
  if (body->contains("exit_code")) {
    int v = 0;
    s = json_fields::ReadInt((*body)["exit_code"], "exit_code", 0, 255, v);
    if (!s.ok()) return StatusError(s);
    exit.exit_code = v;
  }
  if (body->contains("signal")) {
    int v = 0;
    s = json_fields::ReadInt((*body)["signal"], "signal", 1, 128, v);
    if (!s.ok()) return StatusError(s);
    exit.signal = v;
  }
  if (body->contains("fenced")) {
    if (!(*body)["fenced"].is_boolean())
      return StatusError(InvalidArgument("fenced must be a boolean"));
    exit.fenced = (*body)["fenced"].get<bool>();
    if (exit.fenced && exit.state != TaskState::kFailed) {
      return StatusError(InvalidArgument("only a failed task can have been fenced"));
    }
  }
  if (body->contains("timed_out")) {
    if (!(*body)["timed_out"].is_boolean()) {
      return StatusError(InvalidArgument("timed_out must be a boolean"));
    }
    exit.timed_out = (*body)["timed_out"].get<bool>();
    if (exit.timed_out && exit.state != TaskState::kFailed) {
      return StatusError(InvalidArgument("only a failed task can have timed out"));
    }
  }
  if (body->contains("message")) {
    if (!(*body)["message"].is_string() || (*body)["message"].get<std::string>().size() > 4096) {
      return StatusError(InvalidArgument("message must be a string of at most 4096 bytes"));
    }
    exit.message = (*body)["message"].get<std::string>();
  }
  if (exit.state == TaskState::kScheduled && exit.message.empty()) {
    return StatusError(InvalidArgument("message must say what a waiting task waits for"));
  }
  // Where a service task listens: checked always, used only while running.
  if (body->contains("port")) {
    int v = 0;
    s = json_fields::ReadInt((*body)["port"], "port", 1, 65535, v);
    if (!s.ok()) return StatusError(s);
    // ReadInt checks only the upper bound of a JSON unsigned value, and
    // nlohmann reads a literal 0 as unsigned.
    if (v < 1) return StatusError(InvalidArgument("port must be >= 1"));
    if (exit.state == TaskState::kRunning) exit.port = static_cast<uint16_t>(v);
  }
  std::string host = req.remote_address;
  if (body->contains("host")) {
    Result<std::string> h = ParseAddress((*body)["host"], "host");
    if (!h.ok()) return StatusError(h.status());
    host = *h;
  }
  if (exit.state == TaskState::kRunning) exit.host = host;
  if (exit.state == TaskState::kSucceeded && exit.exit_code.value_or(0) != 0) {
    return StatusError(InvalidArgument("a succeeded task has exit code 0"));
  }
  Result<TaskState> now = scheduler_.ReportTask(*node, static_cast<TaskKey>(id), exit);
  if (!now.ok()) return StatusError(now.status());
  if (exit.port) inference_.ReplicaStarted(static_cast<TaskKey>(id), exit.host, *exit.port);
  // The node's assignments version once the report is in: a list at this
  // version or later reflects it (docs/AGENT.md, "Reports").
  return JsonResponse(
      200,
      json{{"id", id}, {"state", TaskStateName(*now)}, {"version", scheduler_.NodeVersion(*node)}});
}

}  // namespace hf::server::api
