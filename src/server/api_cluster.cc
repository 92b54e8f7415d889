// The cluster half of the REST API: nodes, tasks, preview, the event stream
// and the inference panel (docs/API.md). Handlers parse strictly, call the
// Scheduler (which commits before it answers) or read the store.
#include <algorithm>
#include <charconv>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/model_json.h"
#include "core/time.h"
#include "framework/registry.h"
#include "server/codec.h"
#include "server/preview.h"
#include "server/control_plane.h"

namespace hf::server {

using http::JsonResponse;
using http::Request;
using http::Response;
using http::SseStream;
using scheduler::ClusterSnapshot;

namespace {

using nlohmann::json;

json TimeOrNull(int64_t ms) { return ms ? json(FormatTimeMs(ms)) : json(nullptr); }

// GPU memory held on one GPU: what its grants asked for, or all of it when
// a task holds the GPU whole (a whole GPU comes with all its memory, asked
// for or not).
int64_t AllocatedMemory(int64_t milli, int64_t granted_mib, int64_t total_mib) {
  return milli >= kWholeGpuMilli ? total_mib : granted_mib;
}

// What an agent measured on a GPU: {"utilization", "memory_used_mib"}, null
// members when nothing was measured.
json GpuMeasured(const NodeUsage* usage, int32_t index) {
  if (usage) {
    for (const GpuUsage& g : usage->gpus) {
      if (g.index == index) return {{"utilization", g.utilization}, {"memory_used_mib", g.memory_used_mib}};
    }
  }
  return {{"utilization", nullptr}, {"memory_used_mib", nullptr}};
}

// The node's entry in Scheduler::MeasuredUsage(), or null.
const NodeUsage* UsageOf(const std::map<std::string, NodeUsage>& usage, const std::string& node) {
  auto it = usage.find(node);
  return it == usage.end() ? nullptr : &it->second;
}

// A node: its inventory plus condition, what is allocated on it (per GPU),
// and what its agent last measured (`usage`: null without an agent).
json NodeJson(const store::NodeRecord& rec, const std::vector<store::StoredAllocation>& allocs,
              const NodeUsage* usage) {
  json j = NodeSpecToJson(rec.spec);
  j["condition"] = NodeConditionName(rec.condition);
  int64_t cpu = 0, mem = 0, gpu_milli = 0;
  std::map<int32_t, std::pair<int64_t, int64_t>> per_gpu;  // index -> milli, memory
  json tasks = json::array();
  for (const store::StoredAllocation& a : allocs) {
    cpu += a.cpu_milli;
    mem += a.memory_mib;
    for (const GpuGrant& g : a.gpus) {
      gpu_milli += g.milli;
      per_gpu[g.index].first += g.milli;
      per_gpu[g.index].second += g.memory_mib;
    }
    tasks.push_back(a.task);
  }
  for (json& g : j["gpus"]) {
    const auto it = per_gpu.find(g["index"].get<int32_t>());
    const int64_t milli = it == per_gpu.end() ? 0 : it->second.first;
    g["allocated_milli"] = milli;
    g["allocated_memory_mib"] = AllocatedMemory(milli, it == per_gpu.end() ? 0 : it->second.second,
                                                g["memory_mib"].get<int64_t>());
    g.update(GpuMeasured(usage, g["index"].get<int32_t>()));
  }
  j["usage"] = usage ? json{{"cpu_load", usage->cpu_load},
                            {"memory_used", usage->memory_used},
                            {"reported_at", TimeOrNull(usage->reported_at_ms)}}
                     : json(nullptr);
  j["allocated"] = {{"cpu_milli", cpu}, {"memory_mib", mem}, {"gpu_milli", gpu_milli}};
  j["tasks"] = std::move(tasks);
  j["created_at"] = TimeOrNull(rec.created_at_ms);
  j["updated_at"] = TimeOrNull(rec.updated_at_ms);
  return j;
}

json StoredAllocationJson(const store::StoredAllocation& a);

// `alloc`: its allocation, or null when it holds none.
json TaskJson(const store::TaskRecord& r, const store::StoredAllocation* alloc = nullptr) {
  json j = TaskViewJson(r.task);
  j["id"] = r.task.key;
  j["state"] = TaskStateName(r.state);
  j["node"] = r.node.empty() ? json(nullptr) : json(r.node);
  j["pending_reason"] = r.pending_reason;
  j["allocation"] = alloc ? StoredAllocationJson(*alloc) : json(nullptr);
  j["created_at"] = TimeOrNull(r.created_at_ms);
  j["updated_at"] = TimeOrNull(r.updated_at_ms);
  return j;
}

json StoredAllocationJson(const store::StoredAllocation& a) {
  json gpus = json::array();
  for (const GpuGrant& g : a.gpus) {
    gpus.push_back({{"index", g.index}, {"milli", g.milli}, {"memory_mib", g.memory_mib}});
  }
  return {{"node", a.node}, {"cpu_milli", a.cpu_milli}, {"memory_mib", a.memory_mib},
          {"gpus", std::move(gpus)},
          {"rdma_device", a.rdma_device.empty() ? json(nullptr) : json(a.rdma_device)}};
}

Result<TaskKey> TaskId(const Request& req) {
  Result<int64_t> id = ParseIntParam("task id", req.Param("id"), 1, INT64_MAX);
  if (!id.ok()) return id.status();
  return static_cast<TaskKey>(*id);
}

}  // namespace

// ---- nodes ----

Response ControlPlane::ListNodes() const {
  json out = json::array();
  const std::map<std::string, NodeUsage> usage = scheduler_->MeasuredUsage();
  Status s = store_->Read([&](const store::ReadTx& tx) -> Status {
    HF_ASSIGN_OR_RETURN(std::vector<store::NodeRecord> nodes, tx.ListNodes());
    HF_ASSIGN_OR_RETURN(std::vector<store::StoredAllocation> allocs, tx.ListAllocations());
    std::map<std::string, std::vector<store::StoredAllocation>> by_node;
    for (auto& a : allocs) by_node[a.node].push_back(std::move(a));
    for (const auto& n : nodes) {
      out.push_back(NodeJson(n, by_node[n.spec.name], UsageOf(usage, n.spec.name)));
    }
    return Status::Ok();
  });
  if (!s.ok()) return StatusError(s);
  return JsonResponse(200, json{{"nodes", std::move(out)}});
}

Response ControlPlane::GetNode(const Request& req) const {
  const std::string name(req.Param("name"));
  json out;
  const std::map<std::string, NodeUsage> usage = scheduler_->MeasuredUsage();
  Status s = store_->Read([&](const store::ReadTx& tx) -> Status {
    HF_ASSIGN_OR_RETURN(store::NodeRecord n, tx.GetNode(name));
    HF_ASSIGN_OR_RETURN(std::vector<store::StoredAllocation> allocs, tx.ListAllocations(name));
    out = NodeJson(n, allocs, UsageOf(usage, name));
    return Status::Ok();
  });
  if (!s.ok()) return StatusError(s);
  return JsonResponse(200, out);
}

Response ControlPlane::PutNode(const Request& req, const Caller& caller) {
  Result<json> body = ParseJsonBody(req.body);
  if (!body.ok()) return StatusError(body.status());
  Result<NodeSpec> spec = ParseNodeSpec(*body);
  if (!spec.ok()) return StatusError(spec.status());
  Result<bool> created = scheduler_->PutNode(*spec, caller.name);
  if (!created.ok()) return StatusError(created.status());
  Request get = req;
  get.path_params["name"] = spec->name;
  Response r = GetNode(get);
  if (r.status == 200 && *created) r.status = 201;
  return r;
}

Response ControlPlane::DeleteNode(const Request& req, const Caller& caller) {
  const std::string name(req.Param("name"));
  Status s = scheduler_->DeleteNode(name, caller.name);
  if (!s.ok()) return StatusError(s);
  return JsonResponse(200, json{{"deleted", name}});
}

namespace {

// Node actions take no body, or an empty object.
Status NoFields(const Request& req) {
  if (req.body.empty()) return Status::Ok();
  HF_ASSIGN_OR_RETURN(json body, ParseJsonBody(req.body));
  if (!body.empty()) return InvalidArgument("this request takes no fields");
  return Status::Ok();
}

}  // namespace

Response ControlPlane::SetNodeCondition(const Request& req, const Caller& caller,
                                        NodeCondition condition) {
  if (Status s = NoFields(req); !s.ok()) return StatusError(s);
  Status s = scheduler_->SetNodeCondition(std::string(req.Param("name")), condition, caller.name);
  if (!s.ok()) return StatusError(s);
  return GetNode(req);
}

Response ControlPlane::DrainNode(const Request& req, const Caller& caller) {
  if (Status s = NoFields(req); !s.ok()) return StatusError(s);
  Result<scheduler::Scheduler::DrainOutcome> out = scheduler_->Drain(std::string(req.Param("name")), caller.name);
  if (!out.ok()) return StatusError(out.status());
  Response node = GetNode(req);
  if (node.status != 200) return node;
  json answer = json::parse(node.body);
  answer["evicted"] = out->evicted;
  answer["waiting_for"] = out->waiting;
  return JsonResponse(200, answer);
}

// ---- tasks ----

Response ControlPlane::SubmitTask(const Request& req, const Caller& caller) {
  Result<json> body = ParseJsonBody(req.body);
  if (!body.ok()) return StatusError(body.status());
  Result<Task> task = ParseTaskSubmission(*body);
  if (!task.ok()) return StatusError(task.status());
  Result<std::vector<store::TaskRecord>> recs = scheduler_->Submit({*task}, caller.name);
  if (!recs.ok()) return StatusError(recs.status());
  return JsonResponse(201, TaskJson(recs->front()));
}

Response ControlPlane::SubmitBatch(const Request& req, const Caller& caller) {
  Result<json> body = ParseJsonBody(req.body);
  if (!body.ok()) return StatusError(body.status());
  Result<std::vector<Task>> tasks = ParseTaskBatch(*body);
  if (!tasks.ok()) return StatusError(tasks.status());
  Result<std::vector<store::TaskRecord>> recs = scheduler_->Submit(*tasks, caller.name);
  if (!recs.ok()) return StatusError(recs.status());
  json out = json::array();
  for (const auto& r : *recs) out.push_back(TaskJson(r));
  return JsonResponse(201, json{{"tasks", std::move(out)}});
}

Response ControlPlane::ListTasks(const Request& req) const {
  store::TaskFilter f;
  for (const auto& [key, value] : req.query) {
    if (key == "state") {
      f.state = ParseTaskState(value);
      if (!f.state) {
        return StatusError(InvalidArgument("state must be one of pending, scheduled, running, "
                                           "succeeded, failed, cancelled; got '" + value + "'"));
      }
    } else if (key == "node") {
      f.node = value;
    } else if (key == "group") {
      f.group = value;
    } else if (key == "priority") {
      Result<int64_t> p = ParseIntParam("priority", value, INT32_MIN, INT32_MAX);
      if (!p.ok()) return StatusError(p.status());
      f.priority = static_cast<int32_t>(*p);
    } else if (key == "limit") {
      Result<int64_t> l = ParseIntParam("limit", value, 1, 1000);
      if (!l.ok()) return StatusError(l.status());
      f.limit = static_cast<int>(*l);
    } else if (key == "after") {
      Result<int64_t> a = ParseIntParam("after", value, 0, INT64_MAX);
      if (!a.ok()) return StatusError(a.status());
      f.after = static_cast<TaskKey>(*a);
    } else {
      return StatusError(InvalidArgument("unknown query parameter '" + key + "'"));
    }
  }
  // One more than asked tells whether another page follows.
  const int limit = f.limit;
  f.limit = limit + 1;
  json out = json::array();
  json next = nullptr;
  Status s = store_->Read([&](const store::ReadTx& tx) -> Status {
    HF_ASSIGN_OR_RETURN(std::vector<store::TaskRecord> recs, tx.ListTasks(f));
    if (recs.size() > static_cast<size_t>(limit)) {
      recs.resize(limit);
      next = recs.back().task.key;
    }
    for (const auto& r : recs) {
      if (r.node.empty()) {
        out.push_back(TaskJson(r));
        continue;
      }
      HF_ASSIGN_OR_RETURN(store::StoredAllocation a, tx.GetAllocation(r.task.key));
      out.push_back(TaskJson(r, &a));
    }
    return Status::Ok();
  });
  if (!s.ok()) return StatusError(s);
  return JsonResponse(200, json{{"tasks", std::move(out)}, {"next", next}});
}

Response ControlPlane::GetTask(const Request& req) const {
  Result<TaskKey> id = TaskId(req);
  if (!id.ok()) return StatusError(id.status());
  json out;
  Status s = store_->Read([&](const store::ReadTx& tx) -> Status {
    HF_ASSIGN_OR_RETURN(store::TaskRecord rec, tx.GetTask(*id));
    Result<store::StoredAllocation> a = tx.GetAllocation(*id);
    if (!a.ok() && a.status().code() != StatusCode::kNotFound) return a.status();
    out = TaskJson(rec, a.ok() ? &*a : nullptr);
    HF_ASSIGN_OR_RETURN(std::vector<store::TaskEvent> events, tx.ListTaskEvents(*id));
    json ev = json::array();
    for (const auto& e : events) {
      ev.push_back({{"time", FormatTimeMs(e.time_ms)}, {"kind", e.kind}, {"message", e.message}});
    }
    out["events"] = std::move(ev);
    return Status::Ok();
  });
  if (!s.ok()) return StatusError(s);
  return JsonResponse(200, out);
}

Response ControlPlane::CancelTask(const Request& req, const Caller& caller) {
  Result<TaskKey> id = TaskId(req);
  if (!id.ok()) return StatusError(id.status());
  Result<store::TaskRecord> rec = scheduler_->Cancel(*id, caller.name);
  if (!rec.ok()) return StatusError(rec.status());
  return JsonResponse(200, TaskJson(*rec));
}

// ---- preview, events, inference panel ----

Response ControlPlane::Preview(const Request& req) const {
  Result<json> body = ParseJsonBody(req.body.empty() ? std::string_view("{}") : req.body);
  if (!body.ok()) return StatusError(body.status());
  Result<PreviewRequest> preq = ParsePreviewRequest(*body);
  if (!preq.ok()) return StatusError(preq.status());
  // A candidate's files are confined as a PUT's are.
  const Status paths = scheduler_->ReadPolicy([&](const framework::Framework& fw) {
    for (const auto& [name, patch] : preq->plugins) {
      if (!patch.config) continue;
      HF_RETURN_IF_ERROR(CheckPluginPaths(fw, name, *patch.config));
    }
    return Status::Ok();
  });
  if (!paths.ok()) return StatusError(paths);
  // Only the whole-cluster workload needs the placed tasks' specs.
  ClusterSnapshot snap = scheduler_->Snapshot(!preq->tasks && preq->workload == "cluster");
  Result<json> out = RunPreview(*preq, snap, plugins::InTreeRegistry(), &clock_);
  if (!out.ok()) return StatusError(out.status());
  return JsonResponse(200, *out);
}

Response ControlPlane::Events() {
  Response r;
  r.status = 200;
  r.SetHeader("Cache-Control", "no-cache");
  r.stream = [this](std::shared_ptr<SseStream> s) {
    s->Send("hello", json{{"time", FormatTimeMs(clock_.NowMs())}}.dump());
    events_.Subscribe(std::move(s));
  };
  return r;
}

Response ControlPlane::InferencePanel() const {
  json gpus = json::array();
  const std::map<std::string, NodeUsage> usage = scheduler_->MeasuredUsage();
  const std::map<TaskKey, std::string> replica_models = inference_->ReplicaModels();
  Status s = store_->Read([&](const store::ReadTx& tx) -> Status {
    HF_ASSIGN_OR_RETURN(std::vector<store::NodeRecord> nodes, tx.ListNodes());
    HF_ASSIGN_OR_RETURN(std::vector<store::StoredAllocation> allocs, tx.ListAllocations());
    struct Granted {
      int64_t milli = 0, memory_mib = 0;
      json tasks = json::array();
      json replicas = json::array();
    };
    std::map<std::pair<std::string, int32_t>, Granted> granted;
    for (const auto& a : allocs) {
      auto model = replica_models.find(a.task);
      for (const GpuGrant& g : a.gpus) {
        Granted& gr = granted[{a.node, g.index}];
        gr.milli += g.milli;
        gr.memory_mib += g.memory_mib;
        gr.tasks.push_back(a.task);
        if (model != replica_models.end()) {
          gr.replicas.push_back({{"task", a.task},
                                 {"model", model->second},
                                 {"memory_mib", g.memory_mib}});
        }
      }
    }
    for (const auto& n : nodes) {
      const NodeUsage* u = UsageOf(usage, n.spec.name);
      for (const GpuDevice& g : n.spec.gpus) {
        auto it = granted.find({n.spec.name, g.index});
        const Granted none;
        const Granted& gr = it == granted.end() ? none : it->second;
        const json measured = GpuMeasured(u, g.index);
        const int64_t allocated = AllocatedMemory(gr.milli, gr.memory_mib, g.memory_mib);
        // Memory in use beyond what HeteroFlow granted: other processes.
        json outside = nullptr;
        if (measured["memory_used_mib"].is_number()) {
          outside = std::max<int64_t>(0, measured["memory_used_mib"].get<int64_t>() - allocated);
        }
        gpus.push_back({{"node", n.spec.name},
                        {"index", g.index},
                        {"model", g.model},
                        {"memory_total_mib", g.memory_mib},
                        {"memory_allocated_mib", allocated},
                        {"memory_used_mib", measured["memory_used_mib"]},
                        {"memory_outside_mib", outside},
                        {"utilization", measured["utilization"]},
                        {"tasks", gr.tasks},
                        {"replicas", gr.replicas}});
      }
    }
    return Status::Ok();
  });
  if (!s.ok()) return StatusError(s);
  return JsonResponse(200, json{{"models", inference_->ListModels()},
                                {"endpoints", inference_->ListEndpoints()},
                                {"gpus", std::move(gpus)}});
}

}  // namespace hf::server
