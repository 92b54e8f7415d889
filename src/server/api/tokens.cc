// API tokens (docs/API.md, "Tokens"; docs/SECURITY.md).
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/time.h"
#include "server/api/api.h"
#include "server/codec.h"

namespace hf::server::api {

namespace {

json OptTime(const std::optional<int64_t>& ms) {
  return ms ? json(FormatTimeMs(*ms)) : json(nullptr);
}

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

Response TokensApi::Create(const Request& req, const Caller& caller) {
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
    return StatusError(
        InvalidArgument("name is required: 1-253 characters of [a-z0-9._-], "
                        "starting and ending with a letter or digit"));
  }
  if (!ParseRole(role)) {
    return StatusError(
        InvalidArgument("role must be one of admin, operator, viewer, agent; got '" + role + "'"));
  }
  // An agent token acts for exactly one node (the Kubernetes Node
  // authorizer's rule): it is made for it.
  if (role == RoleName(Role::kAgent) && node.empty()) {
    return StatusError(
        InvalidArgument("node is required for an agent token: the one node its agent acts for"));
  }
  if (role != RoleName(Role::kAgent) && !node.empty()) {
    return StatusError(InvalidArgument("node applies to agent tokens only"));
  }
  const std::string secret = GenerateToken();
  const int64_t now = clock_.NowMs();
  std::optional<int64_t> expires_at;
  if (expires_in) expires_at = now + *expires_in * 1000;
  store::TokenRecord rec;
  Status s = store_.Write([&](store::Tx& tx) -> Status {
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
  s = auth_.Reload();
  if (!s.ok()) return StatusError(s);
  json out = TokenJson(rec, now);
  out["token"] = secret;
  return JsonResponse(201, out);
}

Response TokensApi::List(const Request&, const Caller&) const {
  json out = json::array();
  const int64_t now = clock_.NowMs();
  Status s = store_.Read([&](const store::ReadTx& tx) -> Status {
    HF_ASSIGN_OR_RETURN(std::vector<store::TokenRecord> all, tx.ListTokens());
    for (const auto& t : all) out.push_back(TokenJson(t, now));
    return Status::Ok();
  });
  if (!s.ok()) return StatusError(s);
  return JsonResponse(200, json{{"tokens", std::move(out)}});
}

Response TokensApi::Revoke(const Request& req, const Caller& caller) {
  Result<int64_t> parsed = ParseIntParam("token id", req.Param("id"), 1, INT64_MAX);
  if (!parsed.ok()) return StatusError(parsed.status());
  const int64_t id = *parsed;
  json out;
  const int64_t now = clock_.NowMs();
  Status s = store_.Write([&](store::Tx& tx) -> Status {
    HF_RETURN_IF_ERROR(tx.RevokeToken(id));
    HF_ASSIGN_OR_RETURN(std::vector<store::TokenRecord> all, tx.ListTokens());
    for (const auto& t : all) {
      if (t.id == id) out = TokenJson(t, now);
    }
    return tx.AppendAudit(caller.name, "tokens." + out["name"].get<std::string>(), json{{"id", id}},
                          json{{"id", id}, {"revoked", true}});
  });
  if (!s.ok()) return StatusError(s);
  s = auth_.Reload();
  if (!s.ok()) return StatusError(s);
  return JsonResponse(200, out);
}

}  // namespace hf::server::api
