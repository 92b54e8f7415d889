// ReadTx and Tx: the typed operations of store.h, one SQL statement or a few
// each. Statements are prepared per call; at the request rates of a control
// plane that costs far less than the fsync every commit pays.
#include <limits>
#include <set>
#include <string>
#include <utility>

#include "core/model_json.h"
#include "store/store.h"

namespace hf::store {
namespace {

using nlohmann::json;

#define HF_ASSIGN_STMT(var, expr)               \
  Result<Stmt> var##_or = (expr);               \
  if (!var##_or.ok()) return var##_or.status(); \
  Stmt& var = *var##_or

// LIMIT for "all of them", as both dialects read it.
constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();

// Runs an INSERT ... RETURNING id and gives the id.
Result<int64_t> NewId(Stmt& stmt) {
  HF_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return Internal("INSERT ... RETURNING id gave no row");
  const int64_t id = stmt.Int(0);
  HF_ASSIGN_OR_RETURN(bool more, stmt.Step());
  if (more) return Internal("INSERT ... RETURNING id gave more than one row");
  return id;
}

Result<json> ParseStored(const std::string& text, const std::string& what) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Internal("corrupt row in the store: " + what + " is not JSON");
  return j;
}

// A null JSON value is stored as SQL NULL ("absent"), anything else as text.
void BindJsonOrNull(Stmt& stmt, int pos, const json& j) {
  if (j.is_null()) {
    stmt.BindNull(pos);
  } else {
    stmt.Bind(pos, j.dump());
  }
}

std::optional<NodeCondition> ParseCondition(const std::string& s) {
  for (NodeCondition c :
       {NodeCondition::kReady, NodeCondition::kNotReady, NodeCondition::kDraining}) {
    if (s == NodeConditionName(c)) return c;
  }
  return std::nullopt;
}

bool IsLowerHex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// Columns: name, spec, condition, created_at, updated_at, address.
constexpr char kNodeColumns[] =
    "SELECT name, spec, condition, created_at, updated_at, address FROM nodes";

Result<NodeRecord> ReadNode(const Stmt& s) {
  std::string name = s.Text(0);
  Result<json> j = ParseStored(s.Text(1), "spec of node " + name);
  if (!j.ok()) return j.status();
  Result<NodeSpec> spec = NodeSpecFromJson(*j);
  if (!spec.ok()) return Internal("corrupt spec of node " + name + ": " + spec.status().message());
  std::optional<NodeCondition> cond = ParseCondition(s.Text(2));
  if (!cond) return Internal("corrupt condition of node " + name + ": " + s.Text(2));
  NodeRecord r;
  r.spec = std::move(*spec);
  r.spec.name = name;
  r.condition = *cond;
  r.address = s.Text(5);
  r.created_at_ms = s.Int(3);
  r.updated_at_ms = s.Int(4);
  return r;
}

// Columns: id, spec, state, pending_reason, created_at, updated_at, node.
constexpr char kTaskColumns[] =
    "SELECT t.id, t.spec, t.state, t.pending_reason, t.created_at, t.updated_at,"
    " COALESCE(a.node, '') FROM tasks t LEFT JOIN allocations a ON a.task_id = t.id";

Result<TaskRecord> ReadTask(const Stmt& s) {
  TaskKey id = static_cast<TaskKey>(s.Int(0));
  std::string what = "task " + std::to_string(id);
  Result<json> j = ParseStored(s.Text(1), "spec of " + what);
  if (!j.ok()) return j.status();
  Result<Task> task = TaskFromJson(*j);
  if (!task.ok()) return Internal("corrupt spec of " + what + ": " + task.status().message());
  std::optional<TaskState> state = ParseTaskState(s.Text(2));
  if (!state) return Internal("corrupt state of " + what + ": " + s.Text(2));
  TaskRecord r;
  r.task = std::move(*task);
  r.task.key = id;
  r.state = *state;
  r.pending_reason = s.Text(3);
  r.created_at_ms = s.Int(4);
  r.updated_at_ms = s.Int(5);
  r.node = s.Text(6);
  return r;
}

// Columns: id, name, role, hash, created_at, expires_at, revoked_at, node.
constexpr char kTokenColumns[] =
    "SELECT id, name, role, hash, created_at, expires_at, revoked_at, COALESCE(node, '') "
    "FROM tokens";

TokenRecord ReadToken(const Stmt& s) {
  TokenRecord t;
  t.id = s.Int(0);
  t.name = s.Text(1);
  t.role = s.Text(2);
  t.hash = s.Text(3);
  t.created_at_ms = s.Int(4);
  t.expires_at_ms = s.OptInt(5);
  t.revoked_at_ms = s.OptInt(6);
  t.node = s.Text(7);
  return t;
}

Result<bool> Exists(Db* db, const char* sql, int64_t id) {
  HF_ASSIGN_STMT(stmt, db->Prepare(sql));
  stmt.Bind(1, id);
  return stmt.Step();
}

}  // namespace

// ---- Nodes ----------------------------------------------------------------

Result<NodeRecord> ReadTx::GetNode(const std::string& name) const {
  HF_ASSIGN_STMT(stmt, db_->Prepare(std::string(kNodeColumns) + " WHERE name = ?"));
  stmt.Bind(1, name);
  Result<bool> row = stmt.Step();
  if (!row.ok()) return row.status();
  if (!*row) return NotFound("node " + name + " not found");
  return ReadNode(stmt);
}

Result<std::vector<NodeRecord>> ReadTx::ListNodes() const {
  HF_ASSIGN_STMT(stmt, db_->Prepare(std::string(kNodeColumns) + " ORDER BY name"));
  std::vector<NodeRecord> out;
  for (;;) {
    Result<bool> row = stmt.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    Result<NodeRecord> r = ReadNode(stmt);
    if (!r.ok()) return r.status();
    out.push_back(std::move(*r));
  }
  return out;
}

Status Tx::PutNode(const NodeSpec& spec) {
  HF_RETURN_IF_ERROR(spec.Validate());
  {
    HF_ASSIGN_STMT(stmt,
                   db_->Prepare("INSERT INTO nodes (name, spec, condition, created_at, updated_at)"
                                " VALUES (?1, ?2, 'Ready', ?3, ?3)"
                                " ON CONFLICT(name) DO UPDATE SET spec = excluded.spec, updated_at "
                                "= excluded.updated_at"));
    HF_RETURN_IF_ERROR(
        stmt.Bind(1, spec.name).Bind(2, NodeSpecToJson(spec).dump()).Bind(3, now_ms_).Run());
  }
  // GPUs that left the spec lose their capacity rows; the foreign key from
  // gpu_grants refuses this while a task still holds one of them.
  {
    HF_ASSIGN_STMT(stmt, db_->Prepare("SELECT gpu_index FROM gpus WHERE node = ?"));
    stmt.Bind(1, spec.name);
    std::set<int64_t> keep;
    for (const GpuDevice& g : spec.gpus) keep.insert(g.index);
    std::vector<int64_t> gone;
    for (;;) {
      Result<bool> row = stmt.Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      if (!keep.contains(stmt.Int(0))) gone.push_back(stmt.Int(0));
    }
    for (int64_t index : gone) {
      HF_ASSIGN_STMT(del, db_->Prepare("DELETE FROM gpus WHERE node = ? AND gpu_index = ?"));
      Status s = del.Bind(1, spec.name).Bind(2, index).Run();
      if (!s.ok()) {
        return Status(s.code(), "node " + spec.name + ": GPU " + std::to_string(index) +
                                    " cannot be removed while it is allocated (" + s.message() +
                                    ")");
      }
    }
  }
  for (const GpuDevice& g : spec.gpus) {
    HF_RETURN_IF_ERROR(PutGpuCapacity(spec.name, g.index, g.memory_mib));
  }
  return Status::Ok();
}

Status Tx::DeleteNode(const std::string& name) {
  {
    HF_ASSIGN_STMT(stmt, db_->Prepare("SELECT COUNT(*) FROM allocations WHERE node = ?"));
    stmt.Bind(1, name);
    Result<bool> row = stmt.Step();
    if (!row.ok()) return row.status();
    if (stmt.Int(0) > 0) {
      return FailedPrecondition("node " + name + " still has " + std::to_string(stmt.Int(0)) +
                                " allocated task(s); drain it and wait for them to finish first");
    }
  }
  HF_ASSIGN_STMT(stmt, db_->Prepare("DELETE FROM nodes WHERE name = ?"));
  HF_RETURN_IF_ERROR(stmt.Bind(1, name).Run());
  if (db_->Changes() == 0) return NotFound("node " + name + " not found");
  return Status::Ok();
}

Status Tx::SetNodeCondition(const std::string& name, NodeCondition condition) {
  HF_ASSIGN_STMT(stmt,
                 db_->Prepare("UPDATE nodes SET condition = ?, updated_at = ? WHERE name = ?"));
  HF_RETURN_IF_ERROR(
      stmt.Bind(1, NodeConditionName(condition)).Bind(2, now_ms_).Bind(3, name).Run());
  if (db_->Changes() == 0) return NotFound("node " + name + " not found");
  return Status::Ok();
}

Status Tx::SetNodeAddress(const std::string& name, const std::string& address) {
  HF_ASSIGN_STMT(stmt, db_->Prepare("UPDATE nodes SET address = ? WHERE name = ?"));
  HF_RETURN_IF_ERROR(stmt.Bind(1, address).Bind(2, name).Run());
  if (db_->Changes() == 0) return NotFound("node " + name + " not found");
  return Status::Ok();
}

Status Tx::PutGpuCapacity(const std::string& node, int32_t gpu_index, int64_t memory_mib) {
  HF_ASSIGN_STMT(
      stmt,
      db_->Prepare("INSERT INTO gpus (node, gpu_index, memory_mib) VALUES (?, ?, ?)"
                   " ON CONFLICT(node, gpu_index) DO UPDATE SET memory_mib = excluded.memory_mib"));
  Status s = stmt.Bind(1, node).Bind(2, int64_t{gpu_index}).Bind(3, memory_mib).Run();
  if (s.code() == StatusCode::kFailedPrecondition) {
    return FailedPrecondition("node " + node + " not found (set GPU capacity after PutNode)");
  }
  return s;
}

// ---- Tasks ----------------------------------------------------------------

Result<TaskRecord> ReadTx::GetTask(TaskKey id) const {
  HF_ASSIGN_STMT(stmt, db_->Prepare(std::string(kTaskColumns) + " WHERE t.id = ?"));
  stmt.Bind(1, static_cast<int64_t>(id));
  Result<bool> row = stmt.Step();
  if (!row.ok()) return row.status();
  if (!*row) return NotFound("task " + std::to_string(id) + " not found");
  return ReadTask(stmt);
}

Result<TaskPlacementRecord> ReadTx::GetTaskPlacement(TaskKey id) const {
  HF_ASSIGN_STMT(stmt, db_->Prepare("SELECT t.state, COALESCE(a.node, '') FROM tasks t LEFT JOIN "
                                    "allocations a ON a.task_id = t.id WHERE t.id = ?"));
  stmt.Bind(1, static_cast<int64_t>(id));
  Result<bool> row = stmt.Step();
  if (!row.ok()) return row.status();
  if (!*row) return NotFound("task " + std::to_string(id) + " not found");
  std::optional<TaskState> state = ParseTaskState(stmt.Text(0));
  if (!state) return Internal("corrupt state of task " + std::to_string(id) + ": " + stmt.Text(0));
  return TaskPlacementRecord{.state = *state, .node = stmt.Text(1)};
}

Result<std::vector<TaskRecord>> ReadTx::ListTasks(const TaskFilter& f) const {
  std::string sql = std::string(kTaskColumns) + " WHERE t.id > ?1";
  if (f.state) sql += " AND t.state = ?2";
  if (f.node) sql += " AND a.node = ?3";
  if (f.group) sql += " AND t.grp = ?4";
  if (f.priority) sql += " AND t.priority = ?5";
  if (f.job) sql += " AND t.job_id = ?7";
  sql += " ORDER BY t.id LIMIT ?6";
  HF_ASSIGN_STMT(stmt, db_->Prepare(sql));
  stmt.Bind(1, static_cast<int64_t>(f.after));
  if (f.state) stmt.Bind(2, TaskStateName(*f.state));
  if (f.node) stmt.Bind(3, *f.node);
  if (f.group) stmt.Bind(4, *f.group);
  if (f.priority) stmt.Bind(5, int64_t{*f.priority});
  if (f.job) stmt.Bind(7, static_cast<int64_t>(*f.job));
  stmt.Bind(6, int64_t{f.limit > 0 ? f.limit : kNoLimit});
  std::vector<TaskRecord> out;
  for (;;) {
    Result<bool> row = stmt.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    Result<TaskRecord> r = ReadTask(stmt);
    if (!r.ok()) return r.status();
    out.push_back(std::move(*r));
  }
  return out;
}

Result<TaskKey> Tx::InsertTask(const Task& task) {
  HF_ASSIGN_OR_RETURN(TaskRecord r, InsertTaskRecord(task));
  return r.task.key;
}

Result<TaskRecord> Tx::SubmitTask(const Task& task, const std::string& message) {
  HF_ASSIGN_OR_RETURN(std::vector<TaskRecord> r, SubmitTasks({task}, message));
  return std::move(r.front());
}

namespace {

Status CheckNewTask(const Task& task) {
  if (task.name.empty()) return InvalidArgument("task name must not be empty");
  return task.requests.Validate();
}

}  // namespace

Result<std::vector<TaskRecord>> Tx::SubmitTasks(const std::vector<Task>& tasks,
                                                 const std::string& message) {
  std::vector<TaskRecord> out;
  out.reserve(tasks.size());
  if (db_->dialect() != Dialect::kPostgres) {
    for (const Task& t : tasks) {
      HF_ASSIGN_OR_RETURN(TaskRecord r, InsertTaskRecord(t));
      HF_RETURN_IF_ERROR(AppendTaskEvent(r.task.key, "submitted", message));
      out.push_back(std::move(r));
    }
    return out;
  }
  // PostgreSQL: every task and its event in one statement, the rows passed
  // as one JSON array. Ids are drawn in the rows' order (ORDER BY ord), so
  // the new rows sorted by id are the tasks in order; each is checked
  // against its task's name all the same.
  json rows = json::array();
  for (size_t i = 0; i < tasks.size(); ++i) {
    const Task& t = tasks[i];
    HF_RETURN_IF_ERROR(CheckNewTask(t));
    rows.push_back(json{{"ord", i},
                        {"name", t.name},
                        {"grp", t.group},
                        {"priority", t.priority},
                        {"kind", TaskKindName(t.kind)},
                        {"spec", TaskToJson(t).dump()},
                        {"job_id", t.job.id != 0 ? json(t.job.id) : json(nullptr)}});
  }
  HF_ASSIGN_STMT(
      stmt,
      db_->Prepare(
          "WITH x AS (SELECT * FROM jsonb_to_recordset(CAST(?1 AS jsonb)) AS x(ord bigint, name text,"
          " grp text, priority bigint, kind text, spec text, job_id bigint)),"
          " t AS (INSERT INTO tasks (name, grp, priority, kind, state, spec, created_at, updated_at,"
          " job_id) SELECT name, grp, priority, kind, 'pending', spec, ?2, ?2, job_id FROM x ORDER BY ord"
          " RETURNING id, name, spec, state, pending_reason, created_at, updated_at),"
          " e AS (INSERT INTO task_events (task_id, time, kind, message)"
          " SELECT id, ?2, 'submitted', ?3 FROM t ORDER BY id)"
          " SELECT id, spec, state, pending_reason, created_at, updated_at, '', name FROM t ORDER BY id"));
  stmt.Bind(1, rows.dump()).Bind(2, now_ms_).Bind(3, message);
  for (;;) {
    HF_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    if (out.size() >= tasks.size() || stmt.Text(7) != tasks[out.size()].name) {
      return Internal("the tasks inserted together came back out of order");
    }
    HF_ASSIGN_OR_RETURN(TaskRecord r, ReadTask(stmt));
    out.push_back(std::move(r));
  }
  if (out.size() != tasks.size()) return Internal("the tasks inserted together did not all come back");
  return out;
}

Result<TaskRecord> Tx::InsertTaskRecord(const Task& task) {
  HF_RETURN_IF_ERROR(CheckNewTask(task));
  // The new row as GetTask reads it (kTaskColumns; no allocation yet), in
  // the same round trip.
  HF_ASSIGN_STMT(
      stmt, db_->Prepare(
                "INSERT INTO tasks (name, grp, priority, kind, state, spec, created_at, updated_at,"
                " job_id) VALUES (?, ?, ?, ?, 'pending', ?, ?7, ?7, ?8)"
                " RETURNING id, spec, state, pending_reason, created_at, updated_at, ''"));
  if (task.job.id != 0) {
    stmt.Bind(8, static_cast<int64_t>(task.job.id));
  } else {
    stmt.BindNull(8);
  }
  stmt.Bind(1, task.name)
      .Bind(2, task.group)
      .Bind(3, int64_t{task.priority})
      .Bind(4, TaskKindName(task.kind))
      .Bind(5, TaskToJson(task).dump())
      .Bind(7, now_ms_);
  HF_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return Internal("INSERT INTO tasks ... RETURNING gave no row");
  Result<TaskRecord> r = ReadTask(stmt);
  HF_ASSIGN_OR_RETURN(bool more, stmt.Step());
  if (more) return Internal("INSERT INTO tasks ... RETURNING gave more than one row");
  return r;
}

Status Tx::UpdateTaskState(TaskKey id, TaskState state, const std::string& reason) {
  HF_ASSIGN_STMT(
      stmt,
      db_->Prepare("UPDATE tasks SET state = ?, pending_reason = ?, updated_at = ? WHERE id = ?"));
  HF_RETURN_IF_ERROR(stmt.Bind(1, TaskStateName(state))
                         .Bind(2, reason)
                         .Bind(3, now_ms_)
                         .Bind(4, static_cast<int64_t>(id))
                         .Run());
  if (db_->Changes() == 0) return NotFound("task " + std::to_string(id) + " not found");
  return Status::Ok();
}

Status Tx::DeleteTask(TaskKey id) {
  HF_ASSIGN_STMT(stmt, db_->Prepare("DELETE FROM tasks WHERE id = ?"));
  HF_RETURN_IF_ERROR(stmt.Bind(1, static_cast<int64_t>(id)).Run());
  if (db_->Changes() == 0) return NotFound("task " + std::to_string(id) + " not found");
  return Status::Ok();
}

Status Tx::AppendTaskEvent(TaskKey id, const std::string& kind, const std::string& message) {
  HF_ASSIGN_STMT(
      stmt,
      db_->Prepare("INSERT INTO task_events (task_id, time, kind, message) VALUES (?, ?, ?, ?)"));
  Status s =
      stmt.Bind(1, static_cast<int64_t>(id)).Bind(2, now_ms_).Bind(3, kind).Bind(4, message).Run();
  if (s.code() == StatusCode::kFailedPrecondition) {
    return NotFound("task " + std::to_string(id) + " not found");
  }
  return s;
}

Result<std::vector<TaskEvent>> ReadTx::ListTaskEvents(TaskKey id) const {
  Result<bool> exists = Exists(db_, "SELECT 1 FROM tasks WHERE id = ?", static_cast<int64_t>(id));
  if (!exists.ok()) return exists.status();
  if (!*exists) return NotFound("task " + std::to_string(id) + " not found");
  HF_ASSIGN_STMT(
      stmt, db_->Prepare(
                "SELECT id, time, kind, message FROM task_events WHERE task_id = ? ORDER BY id"));
  stmt.Bind(1, static_cast<int64_t>(id));
  std::vector<TaskEvent> out;
  for (;;) {
    Result<bool> row = stmt.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    out.push_back({.id = stmt.Int(0),
                   .task = id,
                   .time_ms = stmt.Int(1),
                   .kind = stmt.Text(2),
                   .message = stmt.Text(3)});
  }
  return out;
}

// ---- Jobs ------------------------------------------------------------------

namespace {

// Columns: id, spec, state, reason, restarts, created_at, updated_at.
constexpr char kJobColumns[] =
    "SELECT id, spec, state, reason, restarts, created_at, updated_at FROM jobs";

Result<JobRecord> ReadJob(const Stmt& s) {
  JobRecord r;
  r.id = static_cast<uint64_t>(s.Int(0));
  const std::string what = "job " + std::to_string(r.id);
  HF_ASSIGN_OR_RETURN(json j, ParseStored(s.Text(1), "spec of " + what));
  Result<JobSpec> spec = JobSpecFromJson(j);
  if (!spec.ok()) return Internal("corrupt spec of " + what + ": " + spec.status().message());
  std::optional<JobState> state = ParseJobState(s.Text(2));
  if (!state) return Internal("corrupt state of " + what + ": " + s.Text(2));
  r.spec = std::move(spec).value();
  r.state = *state;
  r.reason = s.Text(3);
  r.restarts = static_cast<int32_t>(s.Int(4));
  r.created_at_ms = s.Int(5);
  r.updated_at_ms = s.Int(6);
  return r;
}

}  // namespace

Result<JobRecord> ReadTx::GetJob(uint64_t id) const {
  HF_ASSIGN_STMT(stmt, db_->Prepare(std::string(kJobColumns) + " WHERE id = ?"));
  stmt.Bind(1, static_cast<int64_t>(id));
  HF_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return NotFound("job " + std::to_string(id) + " not found");
  return ReadJob(stmt);
}

Result<std::vector<JobRecord>> ReadTx::ListJobs(uint64_t after, int limit) const {
  HF_ASSIGN_STMT(stmt, db_->Prepare(std::string(kJobColumns) + " WHERE id > ? ORDER BY id LIMIT ?"));
  stmt.Bind(1, static_cast<int64_t>(after)).Bind(2, int64_t{limit > 0 ? limit : kNoLimit});
  std::vector<JobRecord> out;
  for (;;) {
    HF_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    HF_ASSIGN_OR_RETURN(JobRecord r, ReadJob(stmt));
    out.push_back(std::move(r));
  }
  return out;
}

Result<std::vector<JobEvent>> ReadTx::ListJobEvents(uint64_t id) const {
  HF_ASSIGN_OR_RETURN(bool exists,
                      Exists(db_, "SELECT 1 FROM jobs WHERE id = ?", static_cast<int64_t>(id)));
  if (!exists) return NotFound("job " + std::to_string(id) + " not found");
  HF_ASSIGN_STMT(stmt, db_->Prepare("SELECT time, kind, message FROM job_events WHERE job_id = ?"
                                    " ORDER BY id"));
  stmt.Bind(1, static_cast<int64_t>(id));
  std::vector<JobEvent> out;
  for (;;) {
    HF_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    out.push_back({stmt.Int(0), stmt.Text(1), stmt.Text(2)});
  }
  return out;
}

Result<uint64_t> Tx::InsertJob(const JobSpec& spec) {
  HF_ASSIGN_STMT(stmt, db_->Prepare("INSERT INTO jobs (name, spec, state, created_at, updated_at)"
                                    " VALUES (?, ?, 'pending', ?3, ?3) RETURNING id"));
  stmt.Bind(1, spec.name).Bind(2, JobSpecToJson(spec).dump()).Bind(3, now_ms_);
  HF_ASSIGN_OR_RETURN(int64_t id, NewId(stmt));
  return static_cast<uint64_t>(id);
}

Status Tx::UpdateJob(uint64_t id, JobState state, const std::string& reason, int32_t restarts) {
  HF_ASSIGN_STMT(stmt, db_->Prepare("UPDATE jobs SET state = ?, reason = ?, restarts = ?,"
                                    " updated_at = ? WHERE id = ?"));
  HF_RETURN_IF_ERROR(stmt.Bind(1, JobStateName(state))
                         .Bind(2, reason)
                         .Bind(3, int64_t{restarts})
                         .Bind(4, now_ms_)
                         .Bind(5, static_cast<int64_t>(id))
                         .Run());
  if (db_->Changes() == 0) return NotFound("job " + std::to_string(id) + " not found");
  return Status::Ok();
}

Status Tx::AppendJobEvent(uint64_t id, const std::string& kind, const std::string& message) {
  HF_ASSIGN_STMT(stmt, db_->Prepare(
                           "INSERT INTO job_events (job_id, time, kind, message) VALUES (?, ?, ?, ?)"));
  return stmt.Bind(1, static_cast<int64_t>(id)).Bind(2, now_ms_).Bind(3, kind).Bind(4, message).Run();
}

// ---- Allocations ----------------------------------------------------------

Status Tx::PutAllocation(TaskKey id, const std::string& node, const Allocation& a) {
  int64_t key = static_cast<int64_t>(id);
  Result<bool> exists = Exists(db_, "SELECT 1 FROM tasks WHERE id = ?", key);
  if (!exists.ok()) return exists.status();
  if (!*exists) return NotFound("task " + std::to_string(id) + " not found");
  // Replacing drops the old grants first, so the capacity triggers count
  // only what the task holds after this call.
  HF_RETURN_IF_ERROR(DeleteAllocation(id));
  {
    HF_ASSIGN_STMT(
        stmt,
        db_->Prepare("INSERT INTO allocations (task_id, node, cpu_milli, memory_mib, rdma_device)"
                     " VALUES (?, ?, ?, ?, ?)"));
    Status s = stmt.Bind(1, key)
                   .Bind(2, node)
                   .Bind(3, a.cpu_milli)
                   .Bind(4, a.memory_mib)
                   .Bind(5, a.rdma_device)
                   .Run();
    if (s.code() == StatusCode::kFailedPrecondition) {
      return FailedPrecondition("cannot allocate task " + std::to_string(id) + " on node " + node +
                                ": no such node");
    }
    HF_RETURN_IF_ERROR(s);
  }
  for (const GpuGrant& g : a.gpus) {
    HF_ASSIGN_STMT(
        stmt, db_->Prepare("INSERT INTO gpu_grants (task_id, node, gpu_index, milli, memory_mib)"
                           " VALUES (?, ?, ?, ?, ?)"));
    Status s = stmt.Bind(1, key)
                   .Bind(2, node)
                   .Bind(3, int64_t{g.index})
                   .Bind(4, int64_t{g.milli})
                   .Bind(5, g.memory_mib)
                   .Run();
    if (!s.ok()) {
      return Status(s.code(), "cannot grant GPU " + std::to_string(g.index) + " of node " + node +
                                  " to task " + std::to_string(id) + " (" + s.message() + ")");
    }
  }
  return Status::Ok();
}

Status Tx::PlaceTasks(const std::vector<Placement>& placements) {
  if (db_->dialect() != Dialect::kPostgres) {
    for (const Placement& p : placements) {
      HF_RETURN_IF_ERROR(PutAllocation(p.task, p.node, p.allocation));
      HF_RETURN_IF_ERROR(UpdateTaskState(p.task, TaskState::kScheduled, ""));
      HF_RETURN_IF_ERROR(AppendTaskEvent(p.task, "scheduled", p.message));
    }
    return Status::Ok();
  }
  if (placements.empty()) return Status::Ok();
  // PostgreSQL: two statements for all of them, the rows as JSON arrays.
  json rows = json::array();
  json grants = json::array();
  for (size_t i = 0; i < placements.size(); ++i) {
    const Placement& p = placements[i];
    rows.push_back(json{{"ord", i},
                        {"task_id", p.task},
                        {"node", p.node},
                        {"cpu_milli", p.allocation.cpu_milli},
                        {"memory_mib", p.allocation.memory_mib},
                        {"rdma_device", p.allocation.rdma_device},
                        {"message", p.message}});
    for (const GpuGrant& g : p.allocation.gpus) {
      grants.push_back(json{{"task_id", p.task},
                            {"node", p.node},
                            {"gpu_index", g.index},
                            {"milli", g.milli},
                            {"memory_mib", g.memory_mib}});
    }
  }
  const std::string rows_text = rows.dump();
  {
    // Drops what the tasks held (as PutAllocation does), and names a task
    // or node that does not exist.
    HF_ASSIGN_STMT(
        stmt, db_->Prepare("WITH p AS (SELECT * FROM jsonb_to_recordset(CAST(?1 AS jsonb))"
                           " AS p(task_id bigint, node text)),"
                           " g AS (DELETE FROM gpu_grants WHERE task_id IN (SELECT task_id FROM p)),"
                           " a AS (DELETE FROM allocations WHERE task_id IN (SELECT task_id FROM p))"
                           " SELECT (SELECT MIN(p.task_id) FROM p WHERE NOT EXISTS"
                           " (SELECT 1 FROM tasks WHERE id = p.task_id)),"
                           " (SELECT MIN(p.node) FROM p WHERE NOT EXISTS"
                           " (SELECT 1 FROM nodes WHERE name = p.node))"));
    stmt.Bind(1, rows_text);
    HF_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) return Internal("placing tasks: no answer to the existence check");
    if (!stmt.IsNull(0)) return NotFound("task " + stmt.Text(0) + " not found");
    if (!stmt.IsNull(1)) return FailedPrecondition("cannot allocate a task on node " + stmt.Text(1) + ": no such node");
  }
  HF_ASSIGN_STMT(
      stmt,
      db_->Prepare(
          "WITH p AS (SELECT * FROM jsonb_to_recordset(CAST(?1 AS jsonb)) AS p(ord bigint, task_id bigint,"
          " node text, cpu_milli bigint, memory_mib bigint, rdma_device text, message text)),"
          " q AS (SELECT * FROM jsonb_to_recordset(CAST(?2 AS jsonb)) AS q(task_id bigint, node text,"
          " gpu_index integer, milli integer, memory_mib bigint)),"
          " a AS (INSERT INTO allocations (task_id, node, cpu_milli, memory_mib, rdma_device)"
          " SELECT task_id, node, cpu_milli, memory_mib, rdma_device FROM p ORDER BY ord RETURNING task_id),"
          " g AS (INSERT INTO gpu_grants (task_id, node, gpu_index, milli, memory_mib)"
          " SELECT q.task_id, q.node, q.gpu_index, q.milli, q.memory_mib FROM q JOIN a ON a.task_id = q.task_id"
          " ORDER BY q.task_id, q.gpu_index),"
          " u AS (UPDATE tasks SET state = 'scheduled', pending_reason = '', updated_at = ?3 FROM p"
          " WHERE tasks.id = p.task_id RETURNING tasks.id)"
          " INSERT INTO task_events (task_id, time, kind, message)"
          " SELECT p.task_id, ?3, 'scheduled', p.message FROM p JOIN u ON u.id = p.task_id ORDER BY p.ord"));
  Status s = stmt.Bind(1, rows_text).Bind(2, grants.dump()).Bind(3, now_ms_).Run();
  if (!s.ok()) return Status(s.code(), "cannot place " + std::to_string(placements.size()) + " tasks (" + s.message() + ")");
  return Status::Ok();
}

Status Tx::DeleteAllocation(TaskKey id) {
  // Explicit rather than relying on the cascade, so the grants go even on a
  // connection opened without foreign_keys (e.g. by hand).
  for (const char* sql :
       {"DELETE FROM gpu_grants WHERE task_id = ?", "DELETE FROM allocations WHERE task_id = ?"}) {
    HF_ASSIGN_STMT(stmt, db_->Prepare(sql));
    HF_RETURN_IF_ERROR(stmt.Bind(1, static_cast<int64_t>(id)).Run());
  }
  return Status::Ok();
}

Result<std::vector<StoredAllocation>> ReadTx::ListAllocations(const std::string& node) const {
  std::vector<StoredAllocation> out;
  std::map<int64_t, size_t> by_task;
  {
    HF_ASSIGN_STMT(
        stmt,
        db_->Prepare("SELECT task_id, node, cpu_milli, memory_mib, rdma_device FROM allocations"
                     " WHERE ?1 = '' OR node = ?1 ORDER BY task_id"));
    stmt.Bind(1, node);
    for (;;) {
      Result<bool> row = stmt.Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      by_task[stmt.Int(0)] = out.size();
      out.push_back({.task = static_cast<TaskKey>(stmt.Int(0)),
                     .node = stmt.Text(1),
                     .cpu_milli = stmt.Int(2),
                     .memory_mib = stmt.Int(3),
                     .rdma_device = stmt.Text(4)});
    }
  }
  HF_ASSIGN_STMT(stmt, db_->Prepare("SELECT task_id, gpu_index, milli, memory_mib FROM gpu_grants"
                                    " WHERE ?1 = '' OR node = ?1 ORDER BY task_id, gpu_index"));
  stmt.Bind(1, node);
  for (;;) {
    Result<bool> row = stmt.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    auto it = by_task.find(stmt.Int(0));
    if (it == by_task.end()) continue;  // only reachable on a hand-edited file
    out[it->second].gpus.push_back({.index = static_cast<int32_t>(stmt.Int(1)),
                                    .milli = static_cast<int32_t>(stmt.Int(2)),
                                    .memory_mib = stmt.Int(3)});
  }
  return out;
}

Result<StoredAllocation> ReadTx::GetAllocation(TaskKey id) const {
  HF_ASSIGN_STMT(
      stmt,
      db_->Prepare(
          "SELECT node, cpu_milli, memory_mib, rdma_device FROM allocations WHERE task_id = ?"));
  stmt.Bind(1, static_cast<int64_t>(id));
  Result<bool> row = stmt.Step();
  if (!row.ok()) return row.status();
  if (!*row) return NotFound("task " + std::to_string(id) + " has no allocation");
  StoredAllocation a{.task = id,
                     .node = stmt.Text(0),
                     .cpu_milli = stmt.Int(1),
                     .memory_mib = stmt.Int(2),
                     .rdma_device = stmt.Text(3)};
  HF_ASSIGN_STMT(grants, db_->Prepare("SELECT gpu_index, milli, memory_mib FROM gpu_grants WHERE "
                                      "task_id = ? ORDER BY gpu_index"));
  grants.Bind(1, static_cast<int64_t>(id));
  for (;;) {
    Result<bool> g = grants.Step();
    if (!g.ok()) return g.status();
    if (!*g) break;
    a.gpus.push_back({.index = static_cast<int32_t>(grants.Int(0)),
                      .milli = static_cast<int32_t>(grants.Int(1)),
                      .memory_mib = grants.Int(2)});
  }
  return a;
}

// ---- Config ---------------------------------------------------------------

Result<json> ReadTx::GetPluginConfig(const std::string& name) const {
  HF_ASSIGN_STMT(stmt, db_->Prepare("SELECT config FROM plugin_config WHERE name = ?"));
  stmt.Bind(1, name);
  Result<bool> row = stmt.Step();
  if (!row.ok()) return row.status();
  if (!*row) return NotFound("no stored config for plugin " + name);
  return ParseStored(stmt.Text(0), "config of plugin " + name);
}

Result<std::map<std::string, json>> ReadTx::ListPluginConfigs() const {
  HF_ASSIGN_STMT(stmt, db_->Prepare("SELECT name, config FROM plugin_config ORDER BY name"));
  std::map<std::string, json> out;
  for (;;) {
    Result<bool> row = stmt.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    Result<json> j = ParseStored(stmt.Text(1), "config of plugin " + stmt.Text(0));
    if (!j.ok()) return j.status();
    out[stmt.Text(0)] = std::move(*j);
  }
  return out;
}

Status Tx::PutPluginConfig(const std::string& name, const json& config) {
  if (name.empty()) return InvalidArgument("plugin name must not be empty");
  HF_ASSIGN_STMT(
      stmt, db_->Prepare("INSERT INTO plugin_config (name, config, updated_at) VALUES (?, ?, ?)"
                         " ON CONFLICT(name) DO UPDATE SET config = excluded.config, updated_at = "
                         "excluded.updated_at"));
  return stmt.Bind(1, name).Bind(2, config.dump()).Bind(3, now_ms_).Run();
}

Result<std::map<std::string, json>> ReadTx::ListInferenceObjects(const std::string& kind) const {
  HF_ASSIGN_STMT(stmt,
                 db_->Prepare("SELECT name, body FROM inference_objects WHERE kind = ? ORDER BY name"));
  stmt.Bind(1, kind);
  std::map<std::string, json> out;
  for (;;) {
    Result<bool> row = stmt.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    Result<json> j = ParseStored(stmt.Text(1), kind + " " + stmt.Text(0));
    if (!j.ok()) return j.status();
    out[stmt.Text(0)] = std::move(*j);
  }
  return out;
}

Status Tx::PutInferenceObject(const std::string& kind, const std::string& name, const json& body) {
  if (kind != "model" && kind != "endpoint" && kind != "replica") {
    return InvalidArgument("unknown inference object kind '" + kind + "'");
  }
  if (name.empty()) return InvalidArgument("inference object name must not be empty");
  HF_ASSIGN_STMT(stmt, db_->Prepare("INSERT INTO inference_objects (kind, name, body, updated_at)"
                                    " VALUES (?, ?, ?, ?) ON CONFLICT(kind, name) DO UPDATE SET"
                                    " body = excluded.body, updated_at = excluded.updated_at"));
  return stmt.Bind(1, kind).Bind(2, name).Bind(3, body.dump()).Bind(4, now_ms_).Run();
}

Status Tx::DeleteInferenceObject(const std::string& kind, const std::string& name) {
  HF_ASSIGN_STMT(stmt, db_->Prepare("DELETE FROM inference_objects WHERE kind = ? AND name = ?"));
  return stmt.Bind(1, kind).Bind(2, name).Run();
}

Result<std::vector<json>> ReadTx::ListQueues() const {
  // In the order they were created: SQLite's rowid, PostgreSQL's seq.
  HF_ASSIGN_STMT(stmt, db_->Prepare(db_->dialect() == Dialect::kPostgres
                                        ? "SELECT name, spec FROM queues ORDER BY seq"
                                        : "SELECT name, spec FROM queues ORDER BY rowid"));
  std::vector<json> out;
  for (;;) {
    Result<bool> row = stmt.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    Result<json> j = ParseStored(stmt.Text(1), "queue " + stmt.Text(0));
    if (!j.ok()) return j.status();
    out.push_back(std::move(*j));
  }
  return out;
}

Status Tx::PutQueue(const std::string& name, const json& spec) {
  if (name.empty()) return InvalidArgument("queue name must not be empty");
  HF_ASSIGN_STMT(stmt, db_->Prepare("INSERT INTO queues (name, spec, updated_at) VALUES (?, ?, ?)"
                                    " ON CONFLICT(name) DO UPDATE SET spec = excluded.spec,"
                                    " updated_at = excluded.updated_at"));
  return stmt.Bind(1, name).Bind(2, spec.dump()).Bind(3, now_ms_).Run();
}

Status Tx::DeleteQueue(const std::string& name) {
  HF_ASSIGN_STMT(stmt, db_->Prepare("DELETE FROM queues WHERE name = ?"));
  HF_RETURN_IF_ERROR(stmt.Bind(1, name).Run());
  if (db_->Changes() == 0) return NotFound("no queue named " + name);
  return Status::Ok();
}

Result<json> ReadTx::GetSchedulerConfig() const {
  HF_ASSIGN_STMT(stmt, db_->Prepare("SELECT config FROM scheduler_config WHERE id = 1"));
  Result<bool> row = stmt.Step();
  if (!row.ok()) return row.status();
  if (!*row) return NotFound("no scheduler config stored yet");
  return ParseStored(stmt.Text(0), "scheduler config");
}

Status Tx::PutSchedulerConfig(const json& config) {
  HF_ASSIGN_STMT(
      stmt, db_->Prepare("INSERT INTO scheduler_config (id, config, updated_at) VALUES (1, ?, ?)"
                         " ON CONFLICT(id) DO UPDATE SET config = excluded.config, updated_at = "
                         "excluded.updated_at"));
  return stmt.Bind(1, config.dump()).Bind(2, now_ms_).Run();
}

// ---- Tokens ---------------------------------------------------------------

Result<int64_t> Tx::InsertToken(const std::string& name, const std::string& role,
                                const std::string& sha256_hex,
                                std::optional<int64_t> expires_at_ms, const std::string& node) {
  if (name.empty()) return InvalidArgument("token name must not be empty");
  if (role != "admin" && role != "operator" && role != "viewer" && role != "agent") {
    return InvalidArgument("token role must be admin, operator, viewer or agent, not \"" + role +
                           "\"");
  }
  if (!IsLowerHex64(sha256_hex)) {
    return InvalidArgument("token hash must be a SHA-256 digest in 64 lowercase hex digits");
  }
  HF_ASSIGN_STMT(
      stmt,
      db_->Prepare(
          "INSERT INTO tokens (name, role, hash, created_at, expires_at, node)"
          " VALUES (?, ?, ?, ?, ?, NULLIF(?, '')) RETURNING id"));
  stmt.Bind(1, name).Bind(2, role).Bind(3, sha256_hex).Bind(4, now_ms_).Bind(5, expires_at_ms).Bind(6, node);
  Result<int64_t> id = NewId(stmt);
  if (id.status().code() == StatusCode::kAlreadyExists) {
    // The message must not echo the hash: tokens are never logged. The
    // constraint is named as SQLite (tokens.name) or PostgreSQL
    // (tokens_name_key) names it.
    const std::string& m = id.status().message();
    return AlreadyExists(m.find("tokens.name") != std::string::npos || m.find("tokens_name_key") != std::string::npos
                             ? "a token named " + name + " already exists"
                             : "a token with the same secret already exists");
  }
  return id;
}

Result<TokenRecord> ReadTx::FindTokenByHash(const std::string& sha256_hex) const {
  HF_ASSIGN_STMT(stmt, db_->Prepare(std::string(kTokenColumns) + " WHERE hash = ?"));
  stmt.Bind(1, sha256_hex);
  Result<bool> row = stmt.Step();
  if (!row.ok()) return row.status();
  if (!*row) return NotFound("no such token");
  return ReadToken(stmt);
}

Result<std::vector<TokenRecord>> ReadTx::ListTokens() const {
  HF_ASSIGN_STMT(stmt, db_->Prepare(std::string(kTokenColumns) + " ORDER BY id"));
  std::vector<TokenRecord> out;
  for (;;) {
    Result<bool> row = stmt.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    out.push_back(ReadToken(stmt));
  }
  return out;
}

Status Tx::RevokeToken(int64_t id) {
  HF_ASSIGN_STMT(
      stmt, db_->Prepare("UPDATE tokens SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?"));
  HF_RETURN_IF_ERROR(stmt.Bind(1, now_ms_).Bind(2, id).Run());
  if (db_->Changes() == 0) return NotFound("token " + std::to_string(id) + " not found");
  return Status::Ok();
}

// ---- Audit ----------------------------------------------------------------

Status Tx::AppendAudit(const std::string& actor, const std::string& key, const json& old_value,
                       const json& new_value) {
  HF_ASSIGN_STMT(
      stmt,
      db_->Prepare("INSERT INTO audit_log (time, actor, key, old, new) VALUES (?, ?, ?, ?, ?)"));
  stmt.Bind(1, now_ms_).Bind(2, actor).Bind(3, key);
  BindJsonOrNull(stmt, 4, old_value);
  BindJsonOrNull(stmt, 5, new_value);
  return stmt.Run();
}

Result<std::vector<AuditEntry>> ReadTx::ListAudit(int limit) const {
  HF_ASSIGN_STMT(
      stmt, db_->Prepare(
                "SELECT id, time, actor, key, old, new FROM audit_log ORDER BY id DESC LIMIT ?"));
  stmt.Bind(1, int64_t{limit > 0 ? limit : kNoLimit});
  std::vector<AuditEntry> out;
  for (;;) {
    Result<bool> row = stmt.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    AuditEntry e{
        .id = stmt.Int(0), .time_ms = stmt.Int(1), .actor = stmt.Text(2), .key = stmt.Text(3)};
    std::string what = "audit entry " + std::to_string(e.id);
    if (!stmt.IsNull(4)) {
      Result<json> j = ParseStored(stmt.Text(4), what);
      if (!j.ok()) return j.status();
      e.old_value = std::move(*j);
    }
    if (!stmt.IsNull(5)) {
      Result<json> j = ParseStored(stmt.Text(5), what);
      if (!j.ok()) return j.status();
      e.new_value = std::move(*j);
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace hf::store
