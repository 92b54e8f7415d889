// Tasks (docs/API.md, "Tasks").
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/model_json.h"
#include "core/time.h"
#include "server/api/api.h"
#include "server/api/views.h"
#include "server/codec.h"

namespace hf::server::api {

namespace {

Result<TaskKey> TaskId(const Request& req) {
  Result<int64_t> id = ParseIntParam("task id", req.Param("id"), 1, INT64_MAX);
  if (!id.ok()) return id.status();
  return static_cast<TaskKey>(*id);
}

}  // namespace

Response TasksApi::Submit(const Request& req, const Caller& caller) {
  Result<json> body = ParseJsonBody(req.body);
  if (!body.ok()) return StatusError(body.status());
  Result<Task> task = ParseTaskSubmission(*body);
  if (!task.ok()) return StatusError(task.status());
  if (Status s = CheckSubmit(scheduler_, task->queue, caller); !s.ok()) return StatusError(s);
  Result<std::vector<store::TaskRecord>> recs = scheduler_.Submit({*task}, caller.name);
  if (!recs.ok()) return StatusError(recs.status());
  return JsonResponse(201, TaskJson(recs->front()));
}

Response TasksApi::SubmitBatch(const Request& req, const Caller& caller) {
  Result<json> body = ParseJsonBody(req.body);
  if (!body.ok()) return StatusError(body.status());
  Result<std::vector<Task>> tasks = ParseTaskBatch(*body);
  if (!tasks.ok()) return StatusError(tasks.status());
  for (const Task& t : *tasks) {
    if (Status s = CheckSubmit(scheduler_, t.queue, caller); !s.ok()) return StatusError(s);
  }
  Result<std::vector<store::TaskRecord>> recs = scheduler_.Submit(*tasks, caller.name);
  if (!recs.ok()) return StatusError(recs.status());
  json out = json::array();
  for (const auto& r : *recs) out.push_back(TaskJson(r));
  return JsonResponse(201, json{{"tasks", std::move(out)}});
}

Response TasksApi::List(const Request& req, const Caller&) const {
  store::TaskFilter f;
  for (const auto& [key, value] : req.query) {
    if (key == "state") {
      f.state = ParseTaskState(value);
      if (!f.state) {
        return StatusError(
            InvalidArgument("state must be one of pending, scheduled, running, "
                            "succeeded, failed, cancelled; got '" +
                            value + "'"));
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
  Status s = store_.Read([&](const store::ReadTx& tx) -> Status {
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

Response TasksApi::Get(const Request& req, const Caller&) const {
  Result<TaskKey> id = TaskId(req);
  if (!id.ok()) return StatusError(id.status());
  json out;
  uint64_t job = 0;
  Status s = store_.Read([&](const store::ReadTx& tx) -> Status {
    HF_ASSIGN_OR_RETURN(store::TaskRecord rec, tx.GetTask(*id));
    job = rec.task.job.id;
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
  // Backfill's reservation, when it holds room for this task or its job.
  const std::optional<scheduler::Scheduler::ReservationView> r = scheduler_.CurrentReservation();
  out["reservation"] = r && r->Holds(*id, job) ? ReservationJson(*r) : json(nullptr);
  return JsonResponse(200, out);
}

Response TasksApi::Cancel(const Request& req, const Caller& caller) {
  Result<TaskKey> id = TaskId(req);
  if (!id.ok()) return StatusError(id.status());
  Result<store::TaskRecord> rec = scheduler_.Cancel(*id, caller.name);
  if (!rec.ok()) return StatusError(rec.status());
  return JsonResponse(200, TaskJson(*rec));
}

}  // namespace hf::server::api
