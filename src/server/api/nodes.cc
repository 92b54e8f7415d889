// Nodes (docs/API.md, "Nodes").
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/api/api.h"
#include "server/api/views.h"
#include "server/codec.h"

namespace hf::server::api {

namespace {

// Node actions take no body, or an empty object.
Status NoFields(const Request& req) {
  if (req.body.empty()) return Status::Ok();
  HF_ASSIGN_OR_RETURN(json body, ParseJsonBody(req.body));
  if (!body.empty()) return InvalidArgument("this request takes no fields");
  return Status::Ok();
}

}  // namespace

Response NodesApi::List(const Request&, const Caller&) const {
  json out = json::array();
  const std::map<std::string, NodeUsage> usage = scheduler_.MeasuredUsage();
  Status s = store_.Read([&](const store::ReadTx& tx) -> Status {
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

Response NodesApi::Show(const std::string& name) const {
  json out;
  const std::map<std::string, NodeUsage> usage = scheduler_.MeasuredUsage();
  Status s = store_.Read([&](const store::ReadTx& tx) -> Status {
    HF_ASSIGN_OR_RETURN(store::NodeRecord n, tx.GetNode(name));
    HF_ASSIGN_OR_RETURN(std::vector<store::StoredAllocation> allocs, tx.ListAllocations(name));
    out = NodeJson(n, allocs, UsageOf(usage, name));
    return Status::Ok();
  });
  if (!s.ok()) return StatusError(s);
  return JsonResponse(200, out);
}

Response NodesApi::Put(const Request& req, const Caller& caller) {
  Result<json> body = ParseJsonBody(req.body);
  if (!body.ok()) return StatusError(body.status());
  Result<NodeSpec> spec = ParseNodeSpec(*body);
  if (!spec.ok()) return StatusError(spec.status());
  Result<bool> created = scheduler_.PutNode(*spec, caller.name);
  if (!created.ok()) return StatusError(created.status());
  Response r = Show(spec->name);
  if (r.status == 200 && *created) r.status = 201;
  return r;
}

Response NodesApi::Delete(const Request& req, const Caller& caller) {
  const std::string name(req.Param("name"));
  Status s = scheduler_.DeleteNode(name, caller.name);
  if (!s.ok()) return StatusError(s);
  return JsonResponse(200, json{{"deleted", name}});
}

Response NodesApi::Get(const Request& req, const Caller&) const {
  return Show(std::string(req.Param("name")));
}

Response NodesApi::Cordon(const Request& req, const Caller& caller) {
  return SetCondition(req, caller, NodeCondition::kDraining);
}

Response NodesApi::Uncordon(const Request& req, const Caller& caller) {
  return SetCondition(req, caller, NodeCondition::kReady);
}

Response NodesApi::SetCondition(const Request& req, const Caller& caller, NodeCondition condition) {
  if (Status s = NoFields(req); !s.ok()) return StatusError(s);
  Status s = scheduler_.SetNodeCondition(std::string(req.Param("name")), condition, caller.name);
  if (!s.ok()) return StatusError(s);
  return Show(std::string(req.Param("name")));
}

Response NodesApi::Drain(const Request& req, const Caller& caller) {
  if (Status s = NoFields(req); !s.ok()) return StatusError(s);
  Result<scheduler::Scheduler::DrainOutcome> out =
      scheduler_.Drain(std::string(req.Param("name")), caller.name);
  if (!out.ok()) return StatusError(out.status());
  Response node = Show(std::string(req.Param("name")));
  if (node.status != 200) return node;
  json answer = json::parse(node.body);
  answer["evicted"] = out->evicted;
  answer["waiting_for"] = out->waiting;
  return JsonResponse(200, answer);
}

}  // namespace hf::server::api
