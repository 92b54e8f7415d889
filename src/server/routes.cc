// The route table of the REST API (docs/API.md): every route's method,
// path, the action a caller's role must allow (auth.h), its line in the
// OpenAPI document, and the api/ handler that answers it.
#include <memory>

#include "server/api/api.h"
#include "server/control_plane.h"

namespace hf::server {

using http::Request;

void ControlPlane::AddRoutes() {
  using A = Action;
  using R = RouteTable::Runs;
  system_api_ = std::make_unique<api::SystemApi>(*store_, ready_, metrics_, events_, clock_,
                                                [this] { return RoleJson(); });
  policy_api_ = std::make_unique<api::PolicyApi>(*scheduler_, *store_, views_, events_, clock_,
                                                 options_.file_root);
  nodes_api_ = std::make_unique<api::NodesApi>(*scheduler_, *store_);
  tasks_api_ = std::make_unique<api::TasksApi>(*scheduler_, *store_);
  jobs_api_ = std::make_unique<api::JobsApi>(*scheduler_, *store_);
  queues_api_ = std::make_unique<api::QueuesApi>(*scheduler_);
  tokens_api_ = std::make_unique<api::TokensApi>(*store_, *auth_, clock_);
  agents_api_ = std::make_unique<api::AgentsApi>(
      *scheduler_, *inference_,
      api::AgentTimings{options_.heartbeat_interval_s(), options_.fence_after_s,
                        options_.fence_grace_s});
  logs_api_ = std::make_unique<api::LogsApi>(*store_, options_.data_dir);
  inference_api_ = std::make_unique<api::InferenceApi>(*inference_, *scheduler_, *store_);
  api::SystemApi* system = system_api_.get();
  api::PolicyApi* policy = policy_api_.get();
  api::NodesApi* nodes = nodes_api_.get();
  api::TasksApi* tasks = tasks_api_.get();
  api::JobsApi* jobs = jobs_api_.get();
  api::QueuesApi* queues = queues_api_.get();
  api::TokensApi* tokens = tokens_api_.get();
  api::AgentsApi* agents = agents_api_.get();
  api::LogsApi* logs = logs_api_.get();
  api::InferenceApi* inference = inference_api_.get();

  routes_ = std::make_unique<RouteTable>(*auth_);
  RouteTable& t = *routes_;
  // `api`'s member `fn` as a route's handler.
  const auto on = [](auto* api, auto fn) -> RouteTable::Handler {
    return [api, fn](const Request& req, const Caller& caller) { return (api->*fn)(req, caller); };
  };

  t.AddPublic("GET", "/livez", "liveness: the process serves", &api::SystemApi::Live, R::kInline);
  // Not inline: it probes the store.
  t.AddPublic("GET", "/readyz", "readiness: cluster state recovered and the store takes commits",
              [system](const Request& req) { return system->Ready(req); });
  t.AddPublic("GET", "/api/v1/openapi.json", "this document",
              [table = routes_.get()](const Request&) { return table->OpenApi(); });
  t.Add("GET", "/metrics", A::kRead, "Prometheus metrics (text format 0.0.4)",
        on(system, &api::SystemApi::Metrics));
  t.Add("GET", "/api/v1/whoami", A::kRead, "the caller's token name and role",
        &api::SystemApi::WhoAmI, "", R::kInline);
  t.Add("GET", "/api/v1/events", A::kRead, "server-sent events: task, node, plugin, config",
        on(system, &api::SystemApi::Events));
  t.Add("GET", "/api/v1/events/recent", A::kRead,
        "the last events (limit 1..200, default 50), oldest first",
        on(system, &api::SystemApi::RecentEvents));

  t.Add("GET", "/api/v1/plugins", A::kRead, "list plugins with status, weight and config",
        on(policy, &api::PolicyApi::ListPlugins), "", R::kInline);
  t.Add("PUT", "/api/v1/plugins/{name}", A::kWriteConfig,
        "partial update of a plugin: enabled, weight, mode, config",
        on(policy, &api::PolicyApi::PutPlugin), "PluginPatch");
  t.Add("POST", "/api/v1/plugins/{name}/reload", A::kWriteConfig,
        "re-read a plugin's files (topology)", on(policy, &api::PolicyApi::ReloadPlugin));
  t.Add("GET", "/api/v1/scheduler/config", A::kRead, "thresholds and score weights",
        on(policy, &api::PolicyApi::GetSchedulerConfig), "", R::kInline);
  t.Add("PUT", "/api/v1/scheduler/config", A::kWriteConfig,
        "partial update of thresholds and score weights",
        on(policy, &api::PolicyApi::PutSchedulerConfig), "SchedulerConfigPatch");
  t.Add("POST", "/api/v1/scheduler/preview", A::kPreview,
        "placements under the current and a candidate policy, with per-node breakdowns",
        on(policy, &api::PolicyApi::Preview), "PreviewRequest");
  t.Add("GET", "/api/v1/audit", A::kRead, "config changes, newest first",
        on(policy, &api::PolicyApi::ListAudit));

  t.Add("GET", "/api/v1/nodes", A::kRead, "list nodes with allocations",
        on(nodes, &api::NodesApi::List));
  t.Add("POST", "/api/v1/nodes", A::kWriteConfig, "register or replace a node",
        on(nodes, &api::NodesApi::Put), "NodeInventory");
  t.Add("GET", "/api/v1/nodes/{name}", A::kRead, "one node", on(nodes, &api::NodesApi::Get));
  t.Add("DELETE", "/api/v1/nodes/{name}", A::kWriteConfig, "delete a node without tasks",
        on(nodes, &api::NodesApi::Delete));
  t.Add("POST", "/api/v1/nodes/{name}/cordon", A::kCordonNodes, "stop new placements on a node",
        on(nodes, &api::NodesApi::Cordon));
  t.Add("POST", "/api/v1/nodes/{name}/drain", A::kCordonNodes,
        "stop new placements, evict preemptible tasks (queued again), let the others finish",
        on(nodes, &api::NodesApi::Drain));
  t.Add("POST", "/api/v1/nodes/{name}/uncordon", A::kCordonNodes, "make a node schedulable",
        on(nodes, &api::NodesApi::Uncordon));

  t.Add("POST", "/api/v1/tasks", A::kWriteTasks, "submit a task", on(tasks, &api::TasksApi::Submit),
        "TaskSubmission");
  t.Add("POST", "/api/v1/tasks/batch", A::kWriteTasks, "submit 1-1000 tasks, all or none",
        on(tasks, &api::TasksApi::SubmitBatch), "TaskBatch");
  t.Add("GET", "/api/v1/tasks", A::kRead,
        "list tasks; filters state, node, group, priority; pages with limit and after",
        on(tasks, &api::TasksApi::List));
  t.Add("GET", "/api/v1/tasks/{id}", A::kRead, "one task with its allocation and events",
        on(tasks, &api::TasksApi::Get));
  t.Add("POST", "/api/v1/tasks/{id}/cancel", A::kWriteTasks, "cancel a task",
        on(tasks, &api::TasksApi::Cancel));
  t.Add("DELETE", "/api/v1/tasks/{id}", A::kWriteTasks, "cancel a task",
        on(tasks, &api::TasksApi::Cancel));
  t.Add("GET", "/api/v1/tasks/{id}/logs", A::kRead, "a task's output from `offset` (text)",
        on(logs, &api::LogsApi::Read));

  t.Add("GET", "/api/v1/queues", A::kRead,
        "the queue tree: quotas, usage, borrowed, shares, counts and recent events",
        on(queues, &api::QueuesApi::List));
  t.Add("POST", "/api/v1/queues", A::kWriteConfig, "create a queue",
        on(queues, &api::QueuesApi::Create), "Queue");
  t.Add("GET", "/api/v1/queues/{name}", A::kRead, "one queue with usage and events",
        on(queues, &api::QueuesApi::Get));
  t.Add("PUT", "/api/v1/queues/{name}", A::kWriteConfig, "replace a queue's spec",
        on(queues, &api::QueuesApi::Put), "Queue");
  t.Add("DELETE", "/api/v1/queues/{name}", A::kWriteConfig,
        "delete a leaf queue that holds no work", on(queues, &api::QueuesApi::Delete));

  t.Add("POST", "/api/v1/jobs", A::kWriteTasks,
        "submit a job: its members are placed as a gang, all or none", on(jobs, &api::JobsApi::Submit),
        "Job");
  t.Add("GET", "/api/v1/jobs", A::kRead, "list jobs with their members; filter state, pages",
        on(jobs, &api::JobsApi::List));
  t.Add("GET", "/api/v1/jobs/{id}", A::kRead, "one job with its members and events",
        on(jobs, &api::JobsApi::Get));
  t.Add("POST", "/api/v1/jobs/{id}/cancel", A::kWriteTasks, "cancel a job and every member",
        on(jobs, &api::JobsApi::Cancel));
  t.Add("DELETE", "/api/v1/jobs/{id}", A::kWriteTasks, "cancel a job and every member",
        on(jobs, &api::JobsApi::Cancel));

  t.Add("POST", "/api/v1/tokens", A::kManageTokens, "create a token (the secret is shown once)",
        on(tokens, &api::TokensApi::Create), "TokenRequest");
  t.Add("GET", "/api/v1/tokens", A::kManageTokens, "list tokens (no secrets)",
        on(tokens, &api::TokensApi::List));
  t.Add("DELETE", "/api/v1/tokens/{id}", A::kManageTokens, "revoke a token",
        on(tokens, &api::TokensApi::Revoke));

  t.Add("POST", "/api/v1/agent/register", A::kAgentReport, "an agent registers its node",
        on(agents, &api::AgentsApi::Register), "AgentRegister");
  t.Add("POST", "/api/v1/agent/heartbeat", A::kAgentReport, "an agent reports measured usage",
        on(agents, &api::AgentsApi::Heartbeat), "AgentHeartbeat");
  t.Add("GET", "/api/v1/agent/assignments", A::kAgentReport,
        "long poll: the tasks a node should run", on(agents, &api::AgentsApi::Assignments));
  t.Add("POST", "/api/v1/agent/status", A::kAgentReport, "an agent reports a task's process state",
        on(agents, &api::AgentsApi::Report), "AgentStatus");
  t.Add("POST", "/api/v1/agent/logs", A::kAgentReport, "an agent appends a task's output",
        on(logs, &api::LogsApi::Append), "AgentLogs");

  t.Add("GET", "/api/v1/inference/panel", A::kRead, "models, endpoints and GPU memory per GPU",
        on(inference, &api::InferenceApi::Panel));
  t.Add("GET", "/api/v1/inference/models", A::kRead, "model deployments with status and replicas",
        on(inference, &api::InferenceApi::ListModels));
  t.Add("POST", "/api/v1/inference/models", A::kWriteTasks, "deploy a model",
        on(inference, &api::InferenceApi::CreateModel), "ModelDeployment");
  t.Add("GET", "/api/v1/inference/models/{name}", A::kRead, "one model deployment",
        on(inference, &api::InferenceApi::GetModel));
  t.Add("PUT", "/api/v1/inference/models/{name}", A::kWriteTasks,
        "replace a model deployment (a new replica template rolls replicas one at a time)",
        on(inference, &api::InferenceApi::UpdateModel), "ModelDeployment");
  t.Add("DELETE", "/api/v1/inference/models/{name}", A::kWriteTasks,
        "delete a model deployment and stop its replicas",
        on(inference, &api::InferenceApi::DeleteModel));
  t.Add("GET", "/api/v1/inference/endpoints", A::kRead, "endpoints with request counts and latency",
        on(inference, &api::InferenceApi::ListEndpoints));
  t.Add("POST", "/api/v1/inference/endpoints", A::kWriteTasks,
        "create an endpoint (its first API key's secret is in the answer, once)",
        on(inference, &api::InferenceApi::CreateEndpoint), "Endpoint");
  t.Add("GET", "/api/v1/inference/endpoints/{name}", A::kRead, "one endpoint",
        on(inference, &api::InferenceApi::GetEndpoint));
  t.Add("DELETE", "/api/v1/inference/endpoints/{name}", A::kWriteTasks, "delete an endpoint",
        on(inference, &api::InferenceApi::DeleteEndpoint));
  t.Add("POST", "/api/v1/inference/endpoints/{name}/keys", A::kWriteTasks,
        "add an API key to an endpoint (the secret is in the answer, once)",
        on(inference, &api::InferenceApi::AddKey), "EndpointKey");
  t.Add("DELETE", "/api/v1/inference/endpoints/{name}/keys/{id}", A::kWriteTasks,
        "revoke an endpoint's API key", on(inference, &api::InferenceApi::RevokeKey));

  // The inference gateway (docs/INFERENCE.md): answered by the inference
  // service before this table's router; described here for the document.
  t.DescribeGateway("GET", "/inference/v1/models", "OpenAI models.list: the endpoints the caller's key may use");
  t.DescribeGateway("GET", "/inference/v1/models/{model}", "OpenAI models.retrieve: one endpoint, by name");
  t.DescribeGateway("POST", "/inference/v1/chat/completions",
                    "OpenAI chat completion on the endpoint named in model (stream: server-sent events)",
                    "ChatCompletionRequest");
  t.DescribeGateway("POST", "/inference/v1/completions",
                    "OpenAI completion on the endpoint named in model (stream: server-sent events)",
                    "CompletionRequest");
  t.DescribeGateway("POST", "/inference/v1/embeddings", "OpenAI embeddings on the endpoint named in model",
                    "EmbeddingRequest");
  for (const char* method : {"GET", "POST", "PUT", "PATCH", "DELETE"}) {
    t.DescribeGateway(method, "/serve/{endpoint}/{path}",
                      "pass-through: the request, body and query as sent, to {path} (any depth) on a replica");
  }
}

}  // namespace hf::server
