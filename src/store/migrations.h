// Versioned schema migrations for the store.
//
// The schema_version table records every applied migration (version, when,
// what). Migrations are applied in order, each in its own write
// transaction together with its schema_version row, so a crash leaves the
// database at a whole version. On PostgreSQL the whole of it runs under an
// advisory lock, so that servers starting together migrate one at a time.
// Reopening applies only versions above the recorded maximum. A database whose recorded version is above every version
// this binary knows is refused (FailedPrecondition): an older binary must not
// write to a schema it does not understand.
//
// Threading: call with exclusive use of the connection.
#ifndef HF_STORE_MIGRATIONS_H_
#define HF_STORE_MIGRATIONS_H_

#include <cstdint>
#include <span>

#include "core/status.h"
#include "store/db.h"

namespace hf::store {

struct Migration {
  int64_t version;          // 1, 2, 3, ... with no gaps
  const char* description;  // recorded in schema_version, for operators
  const char* sql;          // one or more statements
};

// Every migration this binary knows for `dialect`, oldest first. A
// PostgreSQL database starts at the schema SQLite reached in version 10, in
// one migration: there is no older PostgreSQL database to bring forward.
// Every later version has both dialects' SQL.
std::span<const Migration> AllMigrations(Dialect dialect = Dialect::kSqlite);

// The version a database has after AllMigrations() is applied.
int64_t LatestSchemaVersion();

// The highest version recorded in `db` (0 for a fresh database).
Result<int64_t> CurrentSchemaVersion(Db& db);

// Applies the members of `migrations` above the recorded version. `now_ms`
// stamps schema_version rows. Errors: FailedPrecondition when the database is
// newer than the last of `migrations`; the failing migration's Status (with
// nothing of it applied) otherwise.
Status ApplyMigrations(Db& db, std::span<const Migration> migrations, int64_t now_ms);

}  // namespace hf::store

#endif  // HF_STORE_MIGRATIONS_H_
