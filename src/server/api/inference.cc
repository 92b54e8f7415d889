// Inference services' REST side (docs/API.md, "Inference").
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "core/json_fields.h"
#include "inference/spec.h"
#include "server/api/api.h"
#include "server/api/views.h"
#include "server/codec.h"

namespace hf::server::api {

using inference::EndpointSpec;
using inference::EndpointSpecFromJson;
using inference::ModelSpec;
using inference::ModelSpecFromJson;

namespace {

Result<ModelSpec> ParseModel(const Request& req, const std::string& path_name) {
  HF_ASSIGN_OR_RETURN(json body, ParseJsonBody(req.body));
  return ModelSpecFromJson(body, path_name);
}

// A view the service answered with, or its error.
Response ViewOrError(int status, const Result<json>& view) {
  return view.ok() ? JsonResponse(status, *view) : StatusError(view.status());
}

}  // namespace

Response InferenceApi::ListModels(const Request&, const Caller&) const {
  return JsonResponse(200, json{{"models", inference_.ListModels()}});
}

Response InferenceApi::CreateModel(const Request& req, const Caller& caller) {
  Result<ModelSpec> spec = ParseModel(req, "");
  if (!spec.ok()) return StatusError(spec.status());
  return ViewOrError(201, inference_.CreateModel(*spec, caller.name));
}

Response InferenceApi::GetModel(const Request& req, const Caller&) const {
  return ViewOrError(200, inference_.GetModel(std::string(req.Param("name"))));
}

Response InferenceApi::UpdateModel(const Request& req, const Caller& caller) {
  Result<ModelSpec> spec = ParseModel(req, std::string(req.Param("name")));
  if (!spec.ok()) return StatusError(spec.status());
  return ViewOrError(200, inference_.UpdateModel(*spec, caller.name));
}

Response InferenceApi::DeleteModel(const Request& req, const Caller& caller) {
  const std::string name(req.Param("name"));
  Status s = inference_.DeleteModel(name, caller.name);
  return s.ok() ? JsonResponse(200, json{{"deleted", name}}) : StatusError(s);
}

Response InferenceApi::ListEndpoints(const Request&, const Caller&) const {
  return JsonResponse(200, json{{"endpoints", inference_.ListEndpoints()}});
}

Response InferenceApi::CreateEndpoint(const Request& req, const Caller& caller) {
  Result<json> body = ParseJsonBody(req.body);
  if (!body.ok()) return StatusError(body.status());
  Result<EndpointSpec> spec = EndpointSpecFromJson(*body);
  if (!spec.ok()) return StatusError(spec.status());
  return ViewOrError(201, inference_.CreateEndpoint(std::move(*spec), caller.name));
}

Response InferenceApi::GetEndpoint(const Request& req, const Caller&) const {
  return ViewOrError(200, inference_.GetEndpoint(std::string(req.Param("name"))));
}

Response InferenceApi::DeleteEndpoint(const Request& req, const Caller& caller) {
  const std::string name(req.Param("name"));
  Status s = inference_.DeleteEndpoint(name, caller.name);
  return s.ok() ? JsonResponse(200, json{{"deleted", name}}) : StatusError(s);
}

Response InferenceApi::AddKey(const Request& req, const Caller&) {
  Result<json> body = ParseJsonBody(req.body);
  if (!body.ok()) return StatusError(body.status());
  Status s = json_fields::RequireObject(*body, "body");
  if (s.ok()) s = json_fields::CheckKeys(*body, "", {"name"});
  std::string name;
  if (s.ok() && !body->contains("name")) s = InvalidArgument("name is required");
  if (s.ok()) s = json_fields::ReadName((*body)["name"], "name", name);
  if (!s.ok()) return StatusError(s);
  return ViewOrError(201, inference_.AddKey(std::string(req.Param("name")), name));
}

Response InferenceApi::RevokeKey(const Request& req, const Caller&) {
  Result<int64_t> id = ParseIntParam("key id", req.Param("id"), 1, INT64_MAX);
  if (!id.ok()) return StatusError(id.status());
  Status s = inference_.RevokeKey(std::string(req.Param("name")), *id);
  return s.ok() ? JsonResponse(200, json{{"revoked", *id}}) : StatusError(s);
}

Response InferenceApi::Panel(const Request&, const Caller&) const {
  json gpus = json::array();
  const std::map<std::string, NodeUsage> usage = scheduler_.MeasuredUsage();
  const std::map<TaskKey, std::string> replica_models = inference_.ReplicaModels();
  Status s = store_.Read([&](const store::ReadTx& tx) -> Status {
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
          gr.replicas.push_back(
              {{"task", a.task}, {"model", model->second}, {"memory_mib", g.memory_mib}});
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
  return JsonResponse(200, json{{"models", inference_.ListModels()},
                                {"endpoints", inference_.ListEndpoints()},
                                {"gpus", std::move(gpus)}});
}

}  // namespace hf::server::api
