// Health, the OpenAPI document, metrics, the caller's identity and the event
// stream (docs/API.md, docs/OPERATIONS.md).
#include <nlohmann/json.hpp>
#include <string>

#include "core/time.h"
#include "server/api/api.h"
#include "server/codec.h"

namespace hf::server::api {

using http::SseStream;

Response SystemApi::Live(const Request&) { return JsonResponse(200, json{{"status", "ok"}}); }

Response SystemApi::Metrics(const Request&, const Caller&) const {
  Response r;
  r.status = 200;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = metrics_.Render();
  return r;
}

Response SystemApi::WhoAmI(const Request&, const Caller& caller) {
  return JsonResponse(200, json{{"name", caller.name}, {"role", RoleName(caller.role)}});
}

Response SystemApi::Ready(const Request&) const {
  if (!ready_) return JsonError(503, "unavailable", "recovering state");
  // Honest: a full disk or a lock held elsewhere means nothing can be
  // acknowledged, whatever else still answers.
  if (Status s = store_.CanCommit(); !s.ok()) {
    return JsonError(503, "unavailable", "the store cannot commit: " + s.message());
  }
  json j = role_();
  j["status"] = "ok";
  return JsonResponse(200, j);
}

Response SystemApi::Events(const Request&, const Caller&) {
  Response r;
  r.status = 200;
  r.SetHeader("Cache-Control", "no-cache");
  r.stream = [this](std::shared_ptr<SseStream> s) {
    s->Send("hello", json{{"time", FormatTimeMs(clock_.NowMs())}}.dump());
    events_.Subscribe(std::move(s));
  };
  return r;
}

Response SystemApi::RecentEvents(const Request& req, const Caller&) const {
  int64_t limit = 50;
  for (const auto& [key, value] : req.query) {
    if (key != "limit")
      return StatusError(InvalidArgument("unknown query parameter '" + key + "'"));
    Result<int64_t> v = ParseIntParam("limit", value, 1, int64_t{EventHub::kRecentEvents});
    if (!v.ok()) return StatusError(v.status());
    limit = *v;
  }
  return JsonResponse(200, json{{"events", events_.Recent(static_cast<size_t>(limit))}});
}

}  // namespace hf::server::api
