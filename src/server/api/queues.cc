// Queues (docs/API.md, "Queues"; docs/QUEUES.md).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "queues/queue_tree.h"
#include "server/api/api.h"
#include "server/api/views.h"
#include "server/auth.h"
#include "server/codec.h"

namespace hf::server::api {
namespace {

// Waiting tasks GET /queues/NAME lists, first in line first.
constexpr size_t kWaitingShown = 100;

json Amounts(const QueueUsage& u, const std::vector<std::string>& models) {
  json gpu = json::object();
  for (size_t m = 0; m < models.size(); ++m) {
    if (u.gpu_milli[m] != 0) gpu[models[m]] = double(u.gpu_milli[m]) / kWholeGpuMilli;
  }
  return {{"gpu", std::move(gpu)}, {"cpu_milli", u.cpu_milli}, {"memory_mib", u.memory_mib}};
}

// What `q` guarantees and does not use, per resource of the cluster.
json Lendable(const scheduler::Scheduler::QueueStatus& q, const std::vector<std::string>& models) {
  QueueUsage l;
  l.cpu_milli = std::max<int64_t>(0, q.spec.guaranteed.cpu_milli.value_or(0) - q.used.cpu_milli);
  l.memory_mib = std::max<int64_t>(0, q.spec.guaranteed.memory_mib.value_or(0) - q.used.memory_mib);
  for (size_t m = 0; m < models.size(); ++m) {
    l.gpu_milli[m] =
        std::max<int64_t>(0, q.spec.guaranteed.Gpu(models[m]).value_or(0) - q.used.gpu_milli[m]);
  }
  return Amounts(l, models);
}

json QueueJson(const scheduler::Scheduler::QueueStatus& q,
               const scheduler::Scheduler::QueuesView& v) {
  json j = queues::QueueSpecToJson(q.spec);
  j["leaf"] = q.leaf;
  j["usage"] = Amounts(q.used, v.models);
  j["borrowed"] = Amounts(q.borrowed, v.models);
  j["lendable"] = Lendable(q, v.models);
  j["dominant_share"] = q.share;
  j["dominant_share_beyond_guarantee"] = q.beyond_share;
  j["pending"] = q.pending;
  j["admitted"] = q.admitted;
  j["running"] = q.running;
  json events = json::array();
  for (const json& e : v.events) {
    if (e.value("queue", "") == q.spec.name || e.value("by_queue", "") == q.spec.name) {
      events.push_back(e);
    }
  }
  j["events"] = std::move(events);
  return j;
}

}  // namespace

Status CheckSubmit(const scheduler::Scheduler& scheduler, const std::string& queue,
                   const Caller& caller) {
  return scheduler.CheckSubmit(queue, caller.name, RoleName(caller.role));
}

Response QueuesApi::List(const Request&, const Caller&) const {
  const scheduler::Scheduler::QueuesView v = scheduler_.Queues();
  json out = json::array();
  for (const auto& q : v.queues) out.push_back(QueueJson(q, v));
  return JsonResponse(
      200, json{{"queues", std::move(out)}, {"capacity", Amounts(v.capacity, v.models)}});
}

Response QueuesApi::Get(const Request& req, const Caller&) const {
  const std::string name(req.Param("name"));
  const scheduler::Scheduler::QueuesView v = scheduler_.Queues();
  for (const auto& q : v.queues) {
    if (q.spec.name != name) continue;
    json j = QueueJson(q, v);
    json waiting = json::array();
    const std::optional<scheduler::Scheduler::ReservationView> r = scheduler_.CurrentReservation();
    for (const auto& w : scheduler_.QueueWaiting(name, kWaitingShown)) {
      const bool reserved = r && r->Holds(w.id, w.job);
      waiting.push_back({{"id", w.id},
                         {"name", w.name},
                         {"job", w.job == 0 ? json(nullptr) : json(w.job)},
                         {"priority", w.priority},
                         {"position", w.position},
                         {"reason", w.reason},
                         {"reservation", reserved ? ReservationJson(*r) : json(nullptr)}});
    }
    j["waiting"] = std::move(waiting);
    return JsonResponse(200, j);
  }
  return StatusError(NotFound("no queue named " + name));
}

Response QueuesApi::Write(const Request& req, const Caller& caller, bool create) {
  Result<json> body = ParseJsonBody(req.body);
  if (!body.ok()) return StatusError(body.status());
  if (!create) {
    // PUT /queues/NAME: the name is the path's; a body naming another is refused.
    const std::string name(req.Param("name"));
    if (body->is_object() && !body->contains("name")) (*body)["name"] = name;
    if (body->is_object() && (*body)["name"] != name) {
      return StatusError(InvalidArgument("name must be the path's queue name, \"" + name + "\""));
    }
  }
  Result<queues::QueueSpec> spec = queues::QueueSpecFromJson(*body);
  if (!spec.ok()) return StatusError(spec.status());
  for (size_t i = 0; i < spec->roles.size(); ++i) {
    if (!ParseRole(spec->roles[i])) {
      return StatusError(InvalidArgument("queues." + spec->name + ".submitters.roles[" +
                                         std::to_string(i) + "]: no role named \"" +
                                         spec->roles[i] + "\" (admin, operator, viewer, agent)"));
    }
  }
  Result<queues::QueueSpec> stored = scheduler_.PutQueue(*spec, create, caller.name);
  if (!stored.ok()) return StatusError(stored.status());
  const scheduler::Scheduler::QueuesView v = scheduler_.Queues();
  for (const auto& q : v.queues) {
    if (q.spec.name == stored->name) return JsonResponse(create ? 201 : 200, QueueJson(q, v));
  }
  return JsonResponse(create ? 201 : 200, queues::QueueSpecToJson(*stored));
}

Response QueuesApi::Create(const Request& req, const Caller& caller) {
  return Write(req, caller, true);
}

Response QueuesApi::Put(const Request& req, const Caller& caller) {
  return Write(req, caller, false);
}

Response QueuesApi::Delete(const Request& req, const Caller& caller) {
  const std::string name(req.Param("name"));
  Status s = scheduler_.DeleteQueue(name, caller.name);
  if (!s.ok()) return StatusError(s);
  return JsonResponse(200, json{{"deleted", name}});
}

}  // namespace hf::server::api
