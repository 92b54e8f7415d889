// The admin half of the REST API: tokens, the config audit log, plugin
// reload and the OpenAPI document (docs/API.md).
#include <charconv>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "core/time.h"
#include "server/codec.h"
#include "server/control_plane.h"

namespace hf::server {

using http::JsonResponse;
using http::Request;
using http::Response;

namespace {

using nlohmann::json;

json OptTime(const std::optional<int64_t>& ms) { return ms ? json(FormatTimeMs(*ms)) : json(nullptr); }

json TokenJson(const store::TokenRecord& t, int64_t now_ms) {
  return {{"id", t.id},
          {"name", t.name},
          {"role", t.role},
          {"node", t.node.empty() ? json(nullptr) : json(t.node)},
          {"created_at", FormatTimeMs(t.created_at_ms)},
          {"expires_at", OptTime(t.expires_at_ms)},
          {"revoked_at", OptTime(t.revoked_at_ms)},
          {"active", t.ActiveAt(now_ms)}};
}

// Longest a token may live: ten years.
constexpr int64_t kMaxTokenLifetimeS = 10LL * 365 * 24 * 3600;

}  // namespace

Response ControlPlane::CreateToken(const Request& req, const Caller& caller) {
  Result<json> body = ParseJsonBody(req.body);
  if (!body.ok()) return StatusError(body.status());
  std::string name, role, node;
  std::optional<int64_t> expires_in;
  for (const auto& [key, v] : body->items()) {
    if (key == "name") {
      if (!v.is_string()) return StatusError(InvalidArgument("name must be a string"));
      name = v.get<std::string>();
    } else if (key == "role") {
      if (!v.is_string()) return StatusError(InvalidArgument("role must be a string"));
      role = v.get<std::string>();
    } else if (key == "node") {
      if (!v.is_string() || !IsValidName(v.get<std::string>())) {
        return StatusError(InvalidArgument("node must be a node name"));
      }
      node = v.get<std::string>();
    } else if (key == "expires_in_s") {
      if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > kMaxTokenLifetimeS) {
        return StatusError(InvalidArgument("expires_in_s must be an integer in [1, " +
                                           std::to_string(kMaxTokenLifetimeS) + "]"));
      }
      expires_in = v.get<int64_t>();
    } else {
      return StatusError(InvalidArgument("unknown field \"" + key + "\""));
    }
  }
  if (!IsValidName(name)) {
    return StatusError(InvalidArgument("name is required: 1-253 characters of [a-z0-9._-], "
                                       "starting and ending with a letter or digit"));
  }
  if (!ParseRole(role)) {
    return StatusError(InvalidArgument("role must be one of admin, operator, viewer, agent; got '" +
                                       role + "'"));
  }
  // An agent token acts for exactly one node (the Kubernetes Node
  // authorizer's rule): it is made for it.
  if (role == RoleName(Role::kAgent) && node.empty()) {
    return StatusError(InvalidArgument(
        "node is required for an agent token: the one node its agent acts for"));
  }
  if (role != RoleName(Role::kAgent) && !node.empty()) {
    return StatusError(InvalidArgument("node applies to agent tokens only"));
  }
  const std::string secret = GenerateToken();
  const int64_t now = clock_.NowMs();
  std::optional<int64_t> expires_at;
  if (expires_in) expires_at = now + *expires_in * 1000;
  store::TokenRecord rec;
  Status s = store_->Write([&](store::Tx& tx) -> Status {
    HF_ASSIGN_OR_RETURN(int64_t id,
                        tx.InsertToken(name, role, HashToken(secret), expires_at, node));
    json audited = {{"id", id}, {"role", role}};
    if (!node.empty()) audited["node"] = node;
    HF_RETURN_IF_ERROR(tx.AppendAudit(caller.name, "tokens." + name, nullptr, audited));
    HF_ASSIGN_OR_RETURN(std::vector<store::TokenRecord> all, tx.ListTokens());
    for (auto& t : all) {
      if (t.id == id) rec = std::move(t);
    }
    return Status::Ok();
  });
  if (!s.ok()) return StatusError(s);
  s = ReloadTokens();
  if (!s.ok()) return StatusError(s);
  json out = TokenJson(rec, now);
  out["token"] = secret;
  return JsonResponse(201, out);
}

Response ControlPlane::ListTokens() const {
  json out = json::array();
  const int64_t now = clock_.NowMs();
  Status s = store_->Read([&](const store::ReadTx& tx) -> Status {
    HF_ASSIGN_OR_RETURN(std::vector<store::TokenRecord> all, tx.ListTokens());
    for (const auto& t : all) out.push_back(TokenJson(t, now));
    return Status::Ok();
  });
  if (!s.ok()) return StatusError(s);
  return JsonResponse(200, json{{"tokens", std::move(out)}});
}

Response ControlPlane::RevokeToken(const Request& req, const Caller& caller) {
  Result<int64_t> parsed = ParseIntParam("token id", req.Param("id"), 1, INT64_MAX);
  if (!parsed.ok()) return StatusError(parsed.status());
  const int64_t id = *parsed;
  json out;
  const int64_t now = clock_.NowMs();
  Status s = store_->Write([&](store::Tx& tx) -> Status {
    HF_RETURN_IF_ERROR(tx.RevokeToken(id));
    HF_ASSIGN_OR_RETURN(std::vector<store::TokenRecord> all, tx.ListTokens());
    for (const auto& t : all) {
      if (t.id == id) out = TokenJson(t, now);
    }
    return tx.AppendAudit(caller.name, "tokens." + out["name"].get<std::string>(),
                          json{{"id", id}}, json{{"id", id}, {"revoked", true}});
  });
  if (!s.ok()) return StatusError(s);
  s = ReloadTokens();
  if (!s.ok()) return StatusError(s);
  return JsonResponse(200, out);
}

Response ControlPlane::ListAudit(const Request& req) const {
  int limit = 100;
  for (const auto& [key, value] : req.query) {
    if (key != "limit") return StatusError(InvalidArgument("unknown query parameter '" + key + "'"));
    Result<int64_t> v = ParseIntParam("limit", value, 1, 1000);
    if (!v.ok()) return StatusError(v.status());
    limit = static_cast<int>(*v);
  }
  json out = json::array();
  Status s = store_->Read([&](const store::ReadTx& tx) -> Status {
    HF_ASSIGN_OR_RETURN(std::vector<store::AuditEntry> entries, tx.ListAudit(limit));
    for (const auto& e : entries) {
      out.push_back({{"id", e.id}, {"time", FormatTimeMs(e.time_ms)}, {"actor", e.actor},
                     {"key", e.key}, {"old", e.old_value}, {"new", e.new_value}});
    }
    return Status::Ok();
  });
  if (!s.ok()) return StatusError(s);
  return JsonResponse(200, json{{"entries", std::move(out)}});
}

Response ControlPlane::ReloadPlugin(const Request& req, const Caller& caller) {
  // The file is read without the scheduler's lock. A file that is broken
  // now is the server's trouble, not the caller's: 503, the plugin in error.
  Result<framework::PluginInfo> info = scheduler_->ReloadPlugin(std::string(req.Param("name")), caller.name);
  if (!info.ok()) return StatusError(info.status());
  return JsonResponse(200, PluginInfoToJson(*info));
}

Response ControlPlane::OpenApi() const {
  json paths = json::object();
  for (const RouteDoc& r : route_docs_) {
    // OpenAPI writes parameters as {name}, as the router does.
    json op = {{"summary", r.summary},
               {"responses",
                {{"200", {{"description", "success (201 for creations)"}}},
                 {"400", {{"description", "invalid input; the message names the field"}}},
                 {"401", {{"description", "missing, invalid, expired or revoked token"}}},
                 {"403", {{"description", "the token's role may not do this"}}},
                 {"404", {{"description", "no such object"}}}}}};
    if (!r.authenticated) op["security"] = json::array();
    json params = json::array();
    size_t pos = 0;
    while ((pos = r.path.find('{', pos)) != std::string::npos) {
      const size_t close = r.path.find('}', pos);
      params.push_back({{"name", r.path.substr(pos + 1, close - pos - 1)},
                        {"in", "path"},
                        {"required", true},
                        {"schema", {{"type", "string"}}}});
      pos = close;
    }
    if (!params.empty()) op["parameters"] = std::move(params);
    if (!r.body.empty()) {
      op["requestBody"] = {{"required", true},
                           {"description", r.body + " (see docs/API.md)"},
                           {"content", {{"application/json", {{"schema", {{"type", "object"}}}}}}}};
    }
    std::string method = r.method;
    for (char& c : method) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    paths[r.path][method] = std::move(op);
  }
  json doc = {{"openapi", "3.0.3"},
              {"info", {{"title", "HeteroFlow API"}, {"version", "0.1.0"}}},
              {"components",
               {{"securitySchemes", {{"bearer", {{"type", "http"}, {"scheme", "bearer"}}}}}}},
              {"security", json::array({{{"bearer", json::array()}}})},
              {"paths", std::move(paths)}};
  return JsonResponse(200, doc);
}

}  // namespace hf::server
