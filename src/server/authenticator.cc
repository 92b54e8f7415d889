#include "server/authenticator.h"

#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "http/server.h"

namespace hf::server {

using http::JsonError;
using http::Request;
using http::Response;

Status ActsFor(const Caller& caller, const std::string& node) {
  if (caller.role != Role::kAgent) return Status::Ok();  // admin: any node
  if (caller.node.empty()) {
    return PermissionDenied("token " + caller.name +
                            " is not bound to a node; an agent token is made for one node: "
                            "POST /api/v1/tokens {\"role\": \"agent\", \"node\": NAME}");
  }
  if (caller.node != node) {
    return PermissionDenied("token " + caller.name + " acts for node " + caller.node + ", not " +
                            node);
  }
  return Status::Ok();
}

Authenticator::Authenticator(const store::Store& store, const Clock& clock, double failure_burst,
                             Family<Counter>& failures)
    : store_(store), clock_(clock), failures_(failures), limiter_(failure_burst, 1) {}

Status Authenticator::Reload() {
  // Read and swap under one lock, so the last swap always holds the newest read.
  SharedLock lock(mu_, kExclusive);
  std::unordered_map<std::string, store::TokenRecord> tokens;
  HF_RETURN_IF_ERROR(store_.Read([&](const store::ReadTx& tx) -> Status {
    HF_ASSIGN_OR_RETURN(std::vector<store::TokenRecord> all, tx.ListTokens());
    for (auto& t : all) tokens.emplace(t.hash, std::move(t));
    return Status::Ok();
  }));
  tokens_ = std::move(tokens);
  return Status::Ok();
}

bool Authenticator::Authorize(const Request& req, Action action, Caller& caller,
                              Response& denied) const {
  const int64_t now = clock_.NowMs();
  // An address that failed too often is not told whether its token is good.
  if (const double wait = limiter_.RetryAfter(req.remote_address, now); wait > 0) {
    const int retry = static_cast<int>(std::ceil(wait));
    denied = JsonError(429, "too_many_requests",
                       "too many failed authentications from this address; retry in " +
                           std::to_string(retry) + " s");
    denied.SetHeader("Retry-After", std::to_string(retry));
    failures_.With({"throttled"}).Inc();
    return false;
  }
  const auto unauthenticated = [&](const char* why) {
    limiter_.Failed(req.remote_address, now);
    failures_.With({"unauthenticated"}).Inc();
    denied = JsonError(401, "unauthenticated", why);
    return false;
  };
  std::optional<std::string_view> header = req.Header("Authorization");
  std::optional<std::string> token = header ? BearerToken(*header) : std::nullopt;
  if (!token) return unauthenticated("missing or malformed bearer token");
  // The record is read in place, under the lock, rather than copied out
  // (its strings cost allocations on every request); only a caller that
  // passes takes its name and node.
  const std::string hash = HashToken(*token);
  std::optional<Role> role;
  {
    SharedLock lock(mu_, kShared);
    auto it = tokens_.find(hash);
    if (it != tokens_.end() && it->second.ActiveAt(now)) role = ParseRole(it->second.role);
    if (role && Allows(*role, action)) {
      caller = {it->second.name, *role, it->second.node};
      return true;
    }
  }
  if (!role) return unauthenticated("invalid, expired or revoked token");
  denied = JsonError(403, "forbidden",
                     std::string("role ") + RoleName(*role) + " may not " + ActionName(action));
  return false;
}

}  // namespace hf::server
