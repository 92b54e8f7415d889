#include "store/migrations.h"

#include <string>

namespace hf::store {
namespace {

// Capacity guards on gpu_grants live in the database so that no code path (a
// bug, a second process, a hand-written SQL fix) can grant a GPU's milli or
// memory twice. The UPDATE variant leaves the row being replaced out of the
// sum. A grant on a GPU without a gpus row is refused: without a capacity
// there is nothing to check against.
constexpr char kV1Core[] = R"sql(
CREATE TABLE nodes (
  name TEXT PRIMARY KEY NOT NULL,
  spec TEXT NOT NULL,
  condition TEXT NOT NULL DEFAULT 'Ready'
    CHECK (condition IN ('Ready', 'NotReady', 'Draining')),
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);

CREATE TABLE gpus (
  node TEXT NOT NULL REFERENCES nodes(name) ON DELETE CASCADE,
  gpu_index INTEGER NOT NULL CHECK (gpu_index >= 0),
  memory_mib INTEGER NOT NULL CHECK (memory_mib >= 0),
  PRIMARY KEY (node, gpu_index)
);

CREATE TABLE tasks (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL,
  grp TEXT NOT NULL DEFAULT '',
  priority INTEGER NOT NULL DEFAULT 0,
  kind TEXT NOT NULL CHECK (kind IN ('batch', 'inference')),
  state TEXT NOT NULL CHECK (state IN
    ('pending', 'scheduled', 'running', 'succeeded', 'failed', 'cancelled')),
  spec TEXT NOT NULL,
  pending_reason TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX tasks_by_state ON tasks(state, priority DESC, id);
CREATE INDEX tasks_by_priority ON tasks(priority DESC, id);
CREATE INDEX tasks_by_group ON tasks(grp, id);

CREATE TABLE task_events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  task_id INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
  time INTEGER NOT NULL,
  kind TEXT NOT NULL,
  message TEXT NOT NULL
);
CREATE INDEX task_events_by_task ON task_events(task_id, id);

CREATE TABLE allocations (
  task_id INTEGER PRIMARY KEY REFERENCES tasks(id) ON DELETE CASCADE,
  node TEXT NOT NULL REFERENCES nodes(name),
  cpu_milli INTEGER NOT NULL CHECK (cpu_milli >= 0),
  memory_mib INTEGER NOT NULL CHECK (memory_mib >= 0),
  rdma_device TEXT NOT NULL DEFAULT ''
);
CREATE INDEX allocations_by_node ON allocations(node);

CREATE TABLE gpu_grants (
  task_id INTEGER NOT NULL REFERENCES allocations(task_id) ON DELETE CASCADE,
  node TEXT NOT NULL,
  gpu_index INTEGER NOT NULL,
  milli INTEGER NOT NULL CHECK (milli BETWEEN 1 AND 1000),
  memory_mib INTEGER NOT NULL CHECK (memory_mib >= 0),
  PRIMARY KEY (task_id, node, gpu_index),
  FOREIGN KEY (node, gpu_index) REFERENCES gpus(node, gpu_index)
);
CREATE INDEX gpu_grants_by_gpu ON gpu_grants(node, gpu_index);

CREATE TRIGGER gpu_grants_capacity_insert BEFORE INSERT ON gpu_grants
BEGIN
  SELECT RAISE(ABORT, 'gpu_grants: no such GPU (no gpus row for this node and gpu_index)')
  WHERE NOT EXISTS (SELECT 1 FROM gpus WHERE node = NEW.node AND gpu_index = NEW.gpu_index);
  SELECT RAISE(ABORT, 'gpu_grants: GPU milli over capacity (sum would exceed 1000)')
  WHERE (SELECT COALESCE(SUM(milli), 0) FROM gpu_grants
         WHERE node = NEW.node AND gpu_index = NEW.gpu_index) + NEW.milli > 1000;
  SELECT RAISE(ABORT, 'gpu_grants: GPU memory over capacity')
  WHERE (SELECT COALESCE(SUM(memory_mib), 0) FROM gpu_grants
         WHERE node = NEW.node AND gpu_index = NEW.gpu_index) + NEW.memory_mib >
        (SELECT memory_mib FROM gpus WHERE node = NEW.node AND gpu_index = NEW.gpu_index);
END;

CREATE TRIGGER gpu_grants_capacity_update BEFORE UPDATE ON gpu_grants
BEGIN
  SELECT RAISE(ABORT, 'gpu_grants: no such GPU (no gpus row for this node and gpu_index)')
  WHERE NOT EXISTS (SELECT 1 FROM gpus WHERE node = NEW.node AND gpu_index = NEW.gpu_index);
  SELECT RAISE(ABORT, 'gpu_grants: GPU milli over capacity (sum would exceed 1000)')
  WHERE (SELECT COALESCE(SUM(milli), 0) FROM gpu_grants
         WHERE node = NEW.node AND gpu_index = NEW.gpu_index
           AND NOT (task_id = OLD.task_id AND node = OLD.node AND gpu_index = OLD.gpu_index))
        + NEW.milli > 1000;
  SELECT RAISE(ABORT, 'gpu_grants: GPU memory over capacity')
  WHERE (SELECT COALESCE(SUM(memory_mib), 0) FROM gpu_grants
         WHERE node = NEW.node AND gpu_index = NEW.gpu_index
           AND NOT (task_id = OLD.task_id AND node = OLD.node AND gpu_index = OLD.gpu_index))
        + NEW.memory_mib >
        (SELECT memory_mib FROM gpus WHERE node = NEW.node AND gpu_index = NEW.gpu_index);
END;

-- Shrinking a GPU's memory below what is granted on it would break the same
-- invariant from the other side.
CREATE TRIGGER gpus_capacity_update BEFORE UPDATE OF memory_mib ON gpus
BEGIN
  SELECT RAISE(ABORT, 'gpus: memory_mib below what is granted on this GPU')
  WHERE (SELECT COALESCE(SUM(memory_mib), 0) FROM gpu_grants
         WHERE node = OLD.node AND gpu_index = OLD.gpu_index) > NEW.memory_mib;
END;
)sql";

constexpr char kV2Config[] = R"sql(
CREATE TABLE plugin_config (
  name TEXT PRIMARY KEY NOT NULL,
  config TEXT NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE TABLE scheduler_config (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  config TEXT NOT NULL,
  updated_at INTEGER NOT NULL
);
)sql";

constexpr char kV3Auth[] = R"sql(
CREATE TABLE tokens (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL UNIQUE,
  role TEXT NOT NULL CHECK (role IN ('admin', 'operator', 'viewer', 'agent')),
  hash TEXT NOT NULL UNIQUE CHECK (length(hash) = 64 AND hash NOT GLOB '*[^0-9a-f]*'),
  created_at INTEGER NOT NULL,
  expires_at INTEGER,
  revoked_at INTEGER
);
CREATE TABLE audit_log (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  time INTEGER NOT NULL,
  actor TEXT NOT NULL,
  key TEXT NOT NULL,
  old TEXT,
  new TEXT
);
CREATE INDEX audit_log_by_key ON audit_log(key, id);
)sql";

// Inference deployments, endpoints and where replicas listen: JSON bodies
// keyed by kind and name (docs/INFERENCE.md).
constexpr char kV4Inference[] = R"sql(
CREATE TABLE inference_objects (
  kind TEXT NOT NULL CHECK (kind IN ('model', 'endpoint', 'replica')),
  name TEXT NOT NULL,
  body TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (kind, name)
);
)sql";

// A plugin that only filters has no weight; earlier versions stored one for
// the always-on filters, which Framework::Create now refuses.
constexpr char kV5FilterWeights[] = R"sql(
UPDATE plugin_config SET config = json_remove(config, '$.weight')
 WHERE name IN ('fit', 'load_threshold') AND json_valid(config);
)sql";

// An agent token acts for exactly one node (docs/SECURITY.md). Tokens made
// before have none, and agent routes refuse them.
constexpr char kV6TokenNode[] = R"sql(
ALTER TABLE tokens ADD COLUMN node TEXT;
)sql";

// One row that readiness checks rewrite: whether a commit goes through.
constexpr char kV7Health[] = R"sql(
CREATE TABLE health (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  checked_at INTEGER NOT NULL
);
)sql";

// Jobs (docs/JOBS.md): a job's spec and state, its events, and which tasks
// are its members.
constexpr char kV8Jobs[] = R"sql(
CREATE TABLE jobs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL,
  spec TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('pending', 'starting', 'running', 'restarting',
                                       'succeeded', 'failed', 'cancelled', 'timed_out')),
  reason TEXT NOT NULL DEFAULT '',
  restarts INTEGER NOT NULL DEFAULT 0 CHECK (restarts >= 0),
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE TABLE job_events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  time INTEGER NOT NULL,
  kind TEXT NOT NULL,
  message TEXT NOT NULL
);
CREATE INDEX job_events_by_job ON job_events(job_id, id);
ALTER TABLE tasks ADD COLUMN job_id INTEGER REFERENCES jobs(id);
CREATE INDEX tasks_by_job ON tasks(job_id, id);
)sql";

// Where a node's agent is reached (what it registered from, or advertises):
// a job's MASTER_ADDR and HETEROFLOW_HOSTS, kept across server restarts.
constexpr char kV9NodeAddress[] = R"sql(
ALTER TABLE nodes ADD COLUMN address TEXT NOT NULL DEFAULT '';
)sql";

// The queue tree (docs/QUEUES.md): one row per queue, its spec as JSON, in
// the order queues were created (rowid).
constexpr char kV10Queues[] = R"sql(
CREATE TABLE queues (
  name TEXT PRIMARY KEY NOT NULL,
  spec TEXT NOT NULL,
  updated_at INTEGER NOT NULL
);
)sql";

// Leader election among servers on one PostgreSQL database (docs/HA.md):
// one row, the lease. `epoch` grows by one with every new leader; times are
// the database's clock, in ms. A SQLite file has one server, which never
// takes the lease, but keeps the same schema.
constexpr char kV11LeaderLease[] = R"sql(
CREATE TABLE leader_lease (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  epoch INTEGER NOT NULL CHECK (epoch >= 0),
  holder TEXT NOT NULL,
  url TEXT NOT NULL,
  acquired_at INTEGER NOT NULL,
  renewed_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
);
INSERT INTO leader_lease (id, epoch, holder, url, acquired_at, renewed_at, expires_at)
  VALUES (1, 0, '', '', 0, 0, 0);
)sql";

constexpr Migration kMigrations[] = {
    {1, "nodes, gpus, tasks, events, allocations, gpu grants with capacity triggers", kV1Core},
    {2, "plugin and scheduler config", kV2Config},
    {3, "tokens and audit log", kV3Auth},
    {4, "inference models, endpoints and replica addresses", kV4Inference},
    {5, "filter plugins carry no weight", kV5FilterWeights},
    {6, "agent tokens are bound to a node", kV6TokenNode},
    {7, "a row for readiness checks", kV7Health},
    {8, "jobs, their events and members", kV8Jobs},
    {9, "the address a node's agent is reached at", kV9NodeAddress},
    {10, "queues", kV10Queues},
    {11, "the leader lease", kV11LeaderLease},
};

// PostgreSQL: the schema of SQLite's version 10, in PostgreSQL's types (ids
// and times are 64-bit), with the same tables, columns, keys, checks and
// indexes. The capacity guards are the same rules as SQLite's triggers, and
// lock the GPU's gpus row first, so that grants on one GPU from concurrent
// transactions are checked one after another. Queues keep the order they
// were created in with a column of their own (SQLite's rowid). Names sort
// by bytes (COLLATE "C"), as SQLite sorts them, whatever the database's
// locale.
constexpr char kPgV10[] = R"sql(
CREATE TABLE nodes (
  name TEXT COLLATE "C" PRIMARY KEY NOT NULL,
  spec TEXT NOT NULL,
  condition TEXT NOT NULL DEFAULT 'Ready'
    CHECK (condition IN ('Ready', 'NotReady', 'Draining')),
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  address TEXT NOT NULL DEFAULT ''
);

CREATE TABLE gpus (
  node TEXT COLLATE "C" NOT NULL REFERENCES nodes(name) ON DELETE CASCADE,
  gpu_index INTEGER NOT NULL CHECK (gpu_index >= 0),
  memory_mib BIGINT NOT NULL CHECK (memory_mib >= 0),
  PRIMARY KEY (node, gpu_index)
);

CREATE TABLE jobs (
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  name TEXT COLLATE "C" NOT NULL,
  spec TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('pending', 'starting', 'running', 'restarting',
                                       'succeeded', 'failed', 'cancelled', 'timed_out')),
  reason TEXT NOT NULL DEFAULT '',
  restarts INTEGER NOT NULL DEFAULT 0 CHECK (restarts >= 0),
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);
CREATE TABLE job_events (
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  job_id BIGINT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  time BIGINT NOT NULL,
  kind TEXT COLLATE "C" NOT NULL,
  message TEXT NOT NULL
);
CREATE INDEX job_events_by_job ON job_events(job_id, id);

CREATE TABLE tasks (
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  name TEXT COLLATE "C" NOT NULL,
  grp TEXT NOT NULL DEFAULT '',
  priority INTEGER NOT NULL DEFAULT 0,
  kind TEXT COLLATE "C" NOT NULL CHECK (kind IN ('batch', 'inference')),
  state TEXT NOT NULL CHECK (state IN
    ('pending', 'scheduled', 'running', 'succeeded', 'failed', 'cancelled')),
  spec TEXT NOT NULL,
  pending_reason TEXT NOT NULL DEFAULT '',
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  job_id BIGINT REFERENCES jobs(id)
);
CREATE INDEX tasks_by_state ON tasks(state, priority DESC, id);
CREATE INDEX tasks_by_priority ON tasks(priority DESC, id);
CREATE INDEX tasks_by_group ON tasks(grp, id);
CREATE INDEX tasks_by_job ON tasks(job_id, id);

CREATE TABLE task_events (
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  task_id BIGINT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
  time BIGINT NOT NULL,
  kind TEXT COLLATE "C" NOT NULL,
  message TEXT NOT NULL
);
CREATE INDEX task_events_by_task ON task_events(task_id, id);

CREATE TABLE allocations (
  task_id BIGINT PRIMARY KEY REFERENCES tasks(id) ON DELETE CASCADE,
  node TEXT COLLATE "C" NOT NULL REFERENCES nodes(name),
  cpu_milli BIGINT NOT NULL CHECK (cpu_milli >= 0),
  memory_mib BIGINT NOT NULL CHECK (memory_mib >= 0),
  rdma_device TEXT NOT NULL DEFAULT ''
);
CREATE INDEX allocations_by_node ON allocations(node);

CREATE TABLE gpu_grants (
  task_id BIGINT NOT NULL REFERENCES allocations(task_id) ON DELETE CASCADE,
  node TEXT COLLATE "C" NOT NULL,
  gpu_index INTEGER NOT NULL,
  milli INTEGER NOT NULL CHECK (milli BETWEEN 1 AND 1000),
  memory_mib BIGINT NOT NULL CHECK (memory_mib >= 0),
  PRIMARY KEY (task_id, node, gpu_index),
  FOREIGN KEY (node, gpu_index) REFERENCES gpus(node, gpu_index)
);
CREATE INDEX gpu_grants_by_gpu ON gpu_grants(node, gpu_index);

CREATE FUNCTION gpu_grants_capacity() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  capacity BIGINT;
  milli BIGINT;
  memory BIGINT;
BEGIN
  SELECT g.memory_mib INTO capacity FROM gpus g
   WHERE g.node = NEW.node AND g.gpu_index = NEW.gpu_index FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'gpu_grants: no such GPU (no gpus row for this node and gpu_index)';
  END IF;
  IF TG_OP = 'INSERT' THEN
    SELECT COALESCE(SUM(x.milli), 0), COALESCE(SUM(x.memory_mib), 0) INTO milli, memory
      FROM gpu_grants x WHERE x.node = NEW.node AND x.gpu_index = NEW.gpu_index;
  ELSE
    SELECT COALESCE(SUM(x.milli), 0), COALESCE(SUM(x.memory_mib), 0) INTO milli, memory
      FROM gpu_grants x WHERE x.node = NEW.node AND x.gpu_index = NEW.gpu_index
       AND NOT (x.task_id = OLD.task_id AND x.node = OLD.node AND x.gpu_index = OLD.gpu_index);
  END IF;
  IF milli + NEW.milli > 1000 THEN
    RAISE EXCEPTION 'gpu_grants: GPU milli over capacity (sum would exceed 1000)';
  END IF;
  IF memory + NEW.memory_mib > capacity THEN
    RAISE EXCEPTION 'gpu_grants: GPU memory over capacity';
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER gpu_grants_capacity BEFORE INSERT OR UPDATE ON gpu_grants
  FOR EACH ROW EXECUTE FUNCTION gpu_grants_capacity();

CREATE FUNCTION gpus_capacity_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF (SELECT COALESCE(SUM(x.memory_mib), 0) FROM gpu_grants x
       WHERE x.node = OLD.node AND x.gpu_index = OLD.gpu_index) > NEW.memory_mib THEN
    RAISE EXCEPTION 'gpus: memory_mib below what is granted on this GPU';
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER gpus_capacity_update BEFORE UPDATE OF memory_mib ON gpus
  FOR EACH ROW EXECUTE FUNCTION gpus_capacity_update();

CREATE TABLE plugin_config (
  name TEXT COLLATE "C" PRIMARY KEY NOT NULL,
  config TEXT NOT NULL,
  updated_at BIGINT NOT NULL
);
CREATE TABLE scheduler_config (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  config TEXT NOT NULL,
  updated_at BIGINT NOT NULL
);

CREATE TABLE tokens (
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  name TEXT COLLATE "C" NOT NULL UNIQUE,
  role TEXT NOT NULL CHECK (role IN ('admin', 'operator', 'viewer', 'agent')),
  hash TEXT NOT NULL UNIQUE CHECK (hash ~ '^[0-9a-f]{64}$'),
  created_at BIGINT NOT NULL,
  expires_at BIGINT,
  revoked_at BIGINT,
  node TEXT COLLATE "C"
);
CREATE TABLE audit_log (
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  time BIGINT NOT NULL,
  actor TEXT COLLATE "C" NOT NULL,
  key TEXT COLLATE "C" NOT NULL,
  old TEXT,
  new TEXT
);
CREATE INDEX audit_log_by_key ON audit_log(key, id);

CREATE TABLE inference_objects (
  kind TEXT COLLATE "C" NOT NULL CHECK (kind IN ('model', 'endpoint', 'replica')),
  name TEXT COLLATE "C" NOT NULL,
  body TEXT NOT NULL,
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (kind, name)
);

CREATE TABLE health (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  checked_at BIGINT NOT NULL
);

CREATE TABLE queues (
  name TEXT COLLATE "C" PRIMARY KEY NOT NULL,
  spec TEXT NOT NULL,
  updated_at BIGINT NOT NULL,
  seq BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE
);
)sql";

// PostgreSQL's version 11: the lease (as SQLite's) and the two functions
// that make the database itself refuse a deposed leader (docs/HA.md,
// "Fencing"). heteroflow_fence(e) is the last statement of every
// transaction a leader commits: it locks the lease row (FOR SHARE, so a
// takeover waits for the commit, or the commit sees the new epoch) and
// raises SQLSTATE HF001 unless e is still the lease's epoch.
// heteroflow_renew(e, holder, ms) extends the lease of epoch e by ms from
// the database's clock, and raises HF001 when e was deposed.
constexpr char kPgV11[] = R"sql(
CREATE TABLE leader_lease (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  epoch BIGINT NOT NULL CHECK (epoch >= 0),
  holder TEXT NOT NULL,
  url TEXT NOT NULL,
  acquired_at BIGINT NOT NULL,
  renewed_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL
);
INSERT INTO leader_lease (id, epoch, holder, url, acquired_at, renewed_at, expires_at)
  VALUES (1, 0, '', '', 0, 0, 0);

CREATE FUNCTION heteroflow_now_ms() RETURNS BIGINT LANGUAGE sql VOLATILE AS $$
  SELECT (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT
$$;

CREATE FUNCTION heteroflow_fence(e BIGINT) RETURNS VOID LANGUAGE plpgsql AS $$
DECLARE
  current_epoch BIGINT;
BEGIN
  SELECT epoch INTO current_epoch FROM leader_lease WHERE id = 1 FOR SHARE;
  IF current_epoch IS DISTINCT FROM e THEN
    RAISE EXCEPTION 'fenced: epoch % is no longer the leader''s (the lease is at epoch %)',
      e, current_epoch USING ERRCODE = 'HF001';
  END IF;
END
$$;

CREATE FUNCTION heteroflow_renew(e BIGINT, who TEXT, lease_ms BIGINT) RETURNS BIGINT
LANGUAGE plpgsql AS $$
DECLARE
  now_ms BIGINT := heteroflow_now_ms();
  current_epoch BIGINT;
BEGIN
  UPDATE leader_lease SET renewed_at = now_ms, expires_at = now_ms + lease_ms
   WHERE id = 1 AND epoch = e AND holder = who;
  IF NOT FOUND THEN
    SELECT epoch INTO current_epoch FROM leader_lease WHERE id = 1;
    RAISE EXCEPTION 'fenced: epoch % is no longer the leader''s (the lease is at epoch %)',
      e, current_epoch USING ERRCODE = 'HF001';
  END IF;
  RETURN now_ms + lease_ms;
END
$$;
)sql";

constexpr Migration kPgMigrations[] = {
    {10, "the schema as of version 10: nodes, GPUs, jobs, tasks, allocations with capacity triggers, "
         "config, tokens, audit, inference, health, queues",
     kPgV10},
    {11, "the leader lease, with fencing", kPgV11},
};

Status EnsureVersionTable(Db& db) {
  return db.Exec(std::string("CREATE TABLE IF NOT EXISTS schema_version (version ") +
                 (db.dialect() == Dialect::kPostgres ? "BIGINT" : "INTEGER") +
                 " PRIMARY KEY, description TEXT NOT NULL, applied_at " +
                 (db.dialect() == Dialect::kPostgres ? "BIGINT" : "INTEGER") + " NOT NULL)");
}

// Any number: the advisory lock migrations take on PostgreSQL.
constexpr int64_t kMigrationLock = 0x6866'7363'6865'6d61;  // "hfschema"

}  // namespace

std::span<const Migration> AllMigrations(Dialect dialect) {
  if (dialect == Dialect::kPostgres) return kPgMigrations;
  return kMigrations;
}

int64_t LatestSchemaVersion() { return kMigrations[std::size(kMigrations) - 1].version; }

Result<int64_t> CurrentSchemaVersion(Db& db) {
  HF_RETURN_IF_ERROR(EnsureVersionTable(db));
  Result<Stmt> stmt = db.Prepare("SELECT COALESCE(MAX(version), 0) FROM schema_version");
  if (!stmt.ok()) return stmt.status();
  Result<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  return stmt->Int(0);
}

namespace {

Status ApplyLocked(Db& db, std::span<const Migration> migrations, int64_t now_ms) {
  Result<int64_t> current = CurrentSchemaVersion(db);
  if (!current.ok()) return current.status();
  int64_t known = migrations.empty() ? 0 : migrations.back().version;
  if (*current > known) {
    return FailedPrecondition("database schema version " + std::to_string(*current) +
                              " is newer than this binary supports (" + std::to_string(known) +
                              "); run a newer heteroflow, or point it at another data directory");
  }
  for (const Migration& m : migrations) {
    if (m.version <= *current) continue;
    HF_RETURN_IF_ERROR(db.BeginWrite());
    Status s = db.Exec(m.sql);
    if (s.ok()) {
      Result<Stmt> ins = db.Prepare(
          "INSERT INTO schema_version (version, description, applied_at) VALUES (?, ?, ?)");
      s = ins.ok() ? ins->Bind(1, m.version).Bind(2, m.description).Bind(3, now_ms).Run()
                   : ins.status();
    }
    if (s.ok()) s = db.Exec("COMMIT");
    if (!s.ok()) {
      (void)db.Exec("ROLLBACK");
      return Status(s.code(), "schema migration " + std::to_string(m.version) + " (" +
                                  m.description + ") failed: " + s.message());
    }
  }
  return Status::Ok();
}

}  // namespace

Status ApplyMigrations(Db& db, std::span<const Migration> migrations, int64_t now_ms) {
  if (db.dialect() != Dialect::kPostgres) return ApplyLocked(db, migrations, now_ms);
  // Servers starting together on one database: one migrates (creating
  // schema_version too), the others wait and then find it done.
  const std::string key = std::to_string(kMigrationLock);
  HF_RETURN_IF_ERROR(db.Exec("SELECT pg_advisory_lock(" + key + ")"));
  Status s = ApplyLocked(db, migrations, now_ms);
  Status unlock = db.Exec("SELECT pg_advisory_unlock(" + key + ")");
  return s.ok() ? unlock : s;
}

}  // namespace hf::store
