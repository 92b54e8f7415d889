// Jobs (docs/JOBS.md; docs/API.md, "Jobs").
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/job.h"
#include "core/time.h"
#include "server/api/api.h"
#include "server/api/views.h"
#include "server/codec.h"

namespace hf::server::api {

namespace {

Result<uint64_t> JobId(const Request& req) {
  HF_ASSIGN_OR_RETURN(int64_t id, ParseIntParam("job id", req.Param("id"), 1, INT64_MAX));
  return static_cast<uint64_t>(id);
}

// A job with its members (each: id, name, role, rank, state, node, reason)
// and how many are in each state.
Status JobJson(const store::ReadTx& tx, const store::JobRecord& j, bool with_events, json& out) {
  store::TaskFilter f;
  f.job = j.id;
  f.limit = 0;
  HF_ASSIGN_OR_RETURN(std::vector<store::TaskRecord> members, tx.ListTasks(f));
  json list = json::array();
  json counts = json::object();
  for (const store::TaskRecord& m : members) {
    list.push_back({{"id", m.task.key},
                    {"name", m.task.name},
                    {"role", m.task.job.role},
                    {"rank", m.task.job.rank},
                    {"state", TaskStateName(m.state)},
                    {"node", m.node.empty() ? json(nullptr) : json(m.node)},
                    {"pending_reason", m.pending_reason}});
    counts[TaskStateName(m.state)] = counts.value(TaskStateName(m.state), 0) + 1;
  }
  out = {{"id", j.id},
         {"name", j.spec.name},
         {"queue", j.spec.queue},
         {"priority", j.spec.priority},
         {"state", JobStateName(j.state)},
         {"reason", j.reason},
         {"restarts", j.restarts},
         {"replicas", j.spec.replicas()},
         {"min_available", j.spec.gang_size()},
         {"members_by_state", std::move(counts)},
         {"members", std::move(list)},
         {"spec", JobSpecViewJson(j.spec)},
         {"created_at", TimeOrNull(j.created_at_ms)},
         {"updated_at", TimeOrNull(j.updated_at_ms)}};
  if (with_events) {
    HF_ASSIGN_OR_RETURN(std::vector<store::JobEvent> events, tx.ListJobEvents(j.id));
    json ev = json::array();
    for (const store::JobEvent& e : events) {
      ev.push_back({{"time", FormatTimeMs(e.time_ms)}, {"kind", e.kind}, {"message", e.message}});
    }
    out["events"] = std::move(ev);
  }
  return Status::Ok();
}

}  // namespace

Response JobsApi::Submit(const Request& req, const Caller& caller) {
  Result<json> body = ParseJsonBody(req.body);
  if (!body.ok()) return StatusError(body.status());
  Result<JobSpec> spec = JobSpecFromJson(*body);
  if (!spec.ok()) return StatusError(spec.status());
  if (Status s = CheckSubmit(scheduler_, spec->queue, caller); !s.ok()) return StatusError(s);
  Result<store::JobRecord> job = scheduler_.SubmitJob(*spec, caller.name);
  if (!job.ok()) return StatusError(job.status());
  return Show(job->id, 201);
}

Response JobsApi::List(const Request& req, const Caller&) const {
  uint64_t after = 0;
  int limit = 100;
  std::optional<JobState> state;
  for (const auto& [key, value] : req.query) {
    if (key == "state") {
      state = ParseJobState(value);
      if (!state) {
        return StatusError(
            InvalidArgument("state must be one of pending, starting, running, "
                            "restarting, succeeded, failed, cancelled, timed_out; "
                            "got '" +
                            value + "'"));
      }
    } else if (key == "limit") {
      Result<int64_t> l = ParseIntParam("limit", value, 1, 1000);
      if (!l.ok()) return StatusError(l.status());
      limit = static_cast<int>(*l);
    } else if (key == "after") {
      Result<int64_t> a = ParseIntParam("after", value, 0, INT64_MAX);
      if (!a.ok()) return StatusError(a.status());
      after = static_cast<uint64_t>(*a);
    } else {
      return StatusError(InvalidArgument("unknown query parameter '" + key + "'"));
    }
  }
  json out = json::array();
  json next = nullptr;
  Status s = store_.Read([&](const store::ReadTx& tx) -> Status {
    HF_ASSIGN_OR_RETURN(std::vector<store::JobRecord> jobs, tx.ListJobs(after, 0));
    for (const store::JobRecord& j : jobs) {
      if (state && j.state != *state) continue;
      if (out.size() == static_cast<size_t>(limit)) {
        next = out.back()["id"];
        break;
      }
      json one;
      HF_RETURN_IF_ERROR(JobJson(tx, j, false, one));
      out.push_back(std::move(one));
    }
    return Status::Ok();
  });
  if (!s.ok()) return StatusError(s);
  return JsonResponse(200, json{{"jobs", std::move(out)}, {"next", next}});
}

Response JobsApi::Get(const Request& req, const Caller&) const {
  Result<uint64_t> id = JobId(req);
  if (!id.ok()) return StatusError(id.status());
  return Show(*id, 200);
}

Response JobsApi::Cancel(const Request& req, const Caller& caller) {
  Result<uint64_t> id = JobId(req);
  if (!id.ok()) return StatusError(id.status());
  Result<store::JobRecord> job = scheduler_.CancelJob(*id, caller.name);
  if (!job.ok()) return StatusError(job.status());
  return Show(*id, 200);
}

Response JobsApi::Show(uint64_t id, int status) const {
  json out;
  Status s = store_.Read([&](const store::ReadTx& tx) -> Status {
    HF_ASSIGN_OR_RETURN(store::JobRecord j, tx.GetJob(id));
    return JobJson(tx, j, true, out);
  });
  if (!s.ok()) return StatusError(s);
  // Backfill's reservation, when it holds room for this job's gang.
  const std::optional<scheduler::Scheduler::ReservationView> r = scheduler_.CurrentReservation();
  out["reservation"] = r && r->job == id ? ReservationJson(*r) : json(nullptr);
  return JsonResponse(status, out);
}

}  // namespace hf::server::api
