// REST routes of inference services (docs/API.md, "Inference"): model
// deployments and endpoints with their API keys. The gateway itself
// (/inference/v1/..., /serve/...) is InferenceService::Gateway.
#include <nlohmann/json.hpp>

#include "core/json_fields.h"
#include "inference/spec.h"
#include "server/codec.h"
#include "server/control_plane.h"

namespace hf::server {

using http::JsonResponse;
using http::Request;
using inference::EndpointSpec;
using inference::EndpointSpecFromJson;
using inference::ModelSpec;
using inference::ModelSpecFromJson;

using nlohmann::json;

void ControlPlane::AddInferenceRoutes() {
  using A = Action;
  auto model_body = [](const Request& req, const std::string& path_name) -> Result<ModelSpec> {
    HF_ASSIGN_OR_RETURN(json body, ParseJsonBody(req.body));
    return ModelSpecFromJson(body, path_name);
  };
  Route("GET", "/api/v1/inference/models", A::kRead, "model deployments with status and replicas",
        [this](const Request&, const Caller&) {
          return JsonResponse(200, json{{"models", inference_->ListModels()}});
        });
  Route(
      "POST", "/api/v1/inference/models", A::kWriteTasks, "deploy a model",
      [this, model_body](const Request& req, const Caller& c) {
        Result<ModelSpec> spec = model_body(req, "");
        if (!spec.ok()) return StatusError(spec.status());
        Result<json> view = inference_->CreateModel(*spec, c.name);
        return view.ok() ? JsonResponse(201, *view) : StatusError(view.status());
      },
      "ModelDeployment");
  Route("GET", "/api/v1/inference/models/{name}", A::kRead, "one model deployment",
        [this](const Request& req, const Caller&) {
          Result<json> view = inference_->GetModel(std::string(req.Param("name")));
          return view.ok() ? JsonResponse(200, *view) : StatusError(view.status());
        });
  Route(
      "PUT", "/api/v1/inference/models/{name}", A::kWriteTasks,
      "replace a model deployment (a new replica template rolls replicas one at a time)",
      [this, model_body](const Request& req, const Caller& c) {
        Result<ModelSpec> spec = model_body(req, std::string(req.Param("name")));
        if (!spec.ok()) return StatusError(spec.status());
        Result<json> view = inference_->UpdateModel(*spec, c.name);
        return view.ok() ? JsonResponse(200, *view) : StatusError(view.status());
      },
      "ModelDeployment");
  Route("DELETE", "/api/v1/inference/models/{name}", A::kWriteTasks,
        "delete a model deployment and stop its replicas",
        [this](const Request& req, const Caller& c) {
          const std::string name(req.Param("name"));
          Status s = inference_->DeleteModel(name, c.name);
          return s.ok() ? JsonResponse(200, json{{"deleted", name}}) : StatusError(s);
        });

  Route("GET", "/api/v1/inference/endpoints", A::kRead, "endpoints with request counts and latency",
        [this](const Request&, const Caller&) {
          return JsonResponse(200, json{{"endpoints", inference_->ListEndpoints()}});
        });
  Route(
      "POST", "/api/v1/inference/endpoints", A::kWriteTasks,
      "create an endpoint (its first API key's secret is in the answer, once)",
      [this](const Request& req, const Caller& c) {
        Result<json> body = ParseJsonBody(req.body);
        if (!body.ok()) return StatusError(body.status());
        Result<EndpointSpec> spec = EndpointSpecFromJson(*body);
        if (!spec.ok()) return StatusError(spec.status());
        Result<json> view = inference_->CreateEndpoint(std::move(*spec), c.name);
        return view.ok() ? JsonResponse(201, *view) : StatusError(view.status());
      },
      "Endpoint");
  Route("GET", "/api/v1/inference/endpoints/{name}", A::kRead, "one endpoint",
        [this](const Request& req, const Caller&) {
          Result<json> view = inference_->GetEndpoint(std::string(req.Param("name")));
          return view.ok() ? JsonResponse(200, *view) : StatusError(view.status());
        });
  Route("DELETE", "/api/v1/inference/endpoints/{name}", A::kWriteTasks, "delete an endpoint",
        [this](const Request& req, const Caller& c) {
          const std::string name(req.Param("name"));
          Status s = inference_->DeleteEndpoint(name, c.name);
          return s.ok() ? JsonResponse(200, json{{"deleted", name}}) : StatusError(s);
        });
  Route(
      "POST", "/api/v1/inference/endpoints/{name}/keys", A::kWriteTasks,
      "add an API key to an endpoint (the secret is in the answer, once)",
      [this](const Request& req, const Caller&) {
        Result<json> body = ParseJsonBody(req.body);
        if (!body.ok()) return StatusError(body.status());
        Status s = json_fields::RequireObject(*body, "body");
        if (s.ok()) s = json_fields::CheckKeys(*body, "", {"name"});
        std::string name;
        if (s.ok() && !body->contains("name")) s = InvalidArgument("name is required");
        if (s.ok()) s = json_fields::ReadName((*body)["name"], "name", name);
        if (!s.ok()) return StatusError(s);
        Result<json> key = inference_->AddKey(std::string(req.Param("name")), name);
        return key.ok() ? JsonResponse(201, *key) : StatusError(key.status());
      },
      "EndpointKey");
  Route("DELETE", "/api/v1/inference/endpoints/{name}/keys/{id}", A::kWriteTasks,
        "revoke an endpoint's API key", [this](const Request& req, const Caller&) {
          Result<int64_t> id = ParseIntParam("key id", req.Param("id"), 1, INT64_MAX);
          if (!id.ok()) return StatusError(id.status());
          Status s = inference_->RevokeKey(std::string(req.Param("name")), *id);
          return s.ok() ? JsonResponse(200, json{{"revoked", *id}}) : StatusError(s);
        });
}

}  // namespace hf::server
