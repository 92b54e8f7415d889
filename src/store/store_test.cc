#include "store/store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <functional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "store/migrations.h"
#include "store/postgres.h"
#include "store/sqlite.h"
#include "store/testing/postgres.h"
#include "core/model_json.h"

namespace hf::store {
namespace {

using nlohmann::json;

// A fresh directory per test, so tests never see each other's files; the
// SQLite file in it.
class StoreFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string("hf_store_") + info->test_suite_name() + "_" + info->name() + "_" +
                       std::to_string(getpid());
    std::replace(name.begin(), name.end(), '/', '_');  // parameterised names
    dir_ = std::filesystem::path(::testing::TempDir()) / name;
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "heteroflow.db").string();
    target_ = path_;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<Store> OpenStore() {
    Result<std::unique_ptr<Store>> s = Store::Open(target_, {.clock = &clock_});
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }

  // A separate raw connection to the database with the backend's defaults
  // (SQLite: foreign keys off): what a bug elsewhere, another tool or a hand
  // fix would use.
  std::unique_ptr<Db> RawDb() {
    if (dialect_ == Dialect::kPostgres) {
      Result<std::unique_ptr<PgDb>> db = PgDb::Connect(target_);
      EXPECT_TRUE(db.ok()) << db.status().ToString();
      return db.ok() ? std::unique_ptr<Db>(std::move(*db)) : nullptr;
    }
    Result<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(path_);
    EXPECT_TRUE(db.ok()) << db.status().ToString();
    if (!db.ok()) return nullptr;
    EXPECT_TRUE((*db)->SetLockTimeout(5000).ok());
    return std::unique_ptr<Db>(std::move(*db));
  }

  // Runs SQL through RawDb; the database's answer as a Status (db.h's
  // mapping: a capacity trigger's refusal is ResourceExhausted, a CHECK's
  // InvalidArgument).
  Status RawExec(const std::string& sql) {
    std::unique_ptr<Db> db = RawDb();
    if (db == nullptr) return Internal("no raw connection");
    return db->Exec(sql);
  }

  int64_t RawCount(const std::string& sql) {
    std::unique_ptr<Db> db = RawDb();
    if (db == nullptr) return -1;
    Result<Stmt> stmt = db->Prepare(sql);
    EXPECT_TRUE(stmt.ok()) << sql << ": " << stmt.status().ToString();
    if (!stmt.ok()) return -1;
    Result<bool> row = stmt->Step();
    EXPECT_TRUE(row.ok()) << sql << ": " << row.status().ToString();
    return row.ok() && *row ? stmt->Int(0) : -1;
  }

  std::string RawText(const std::string& sql) {
    std::unique_ptr<Db> db = RawDb();
    if (db == nullptr) return "";
    Result<Stmt> stmt = db->Prepare(sql);
    EXPECT_TRUE(stmt.ok()) << sql << ": " << stmt.status().ToString();
    if (!stmt.ok()) return "";
    Result<bool> row = stmt->Step();
    EXPECT_TRUE(row.ok()) << sql << ": " << row.status().ToString();
    return row.ok() && *row ? stmt->Text(0) : "";
  }

  std::filesystem::path dir_;
  std::string path_;    // the SQLite file
  std::string target_;  // what Store::Open is given: path_, or a PostgreSQL URI
  Dialect dialect_ = Dialect::kSqlite;
  ManualClock clock_{1'700'000'000'000};
};

// The same tests on each backend: SQLite in a fresh file, PostgreSQL in a
// fresh database on a real server (testing/postgres.h).
class BackendFixture : public StoreFixture, public ::testing::WithParamInterface<Dialect> {
 protected:
  void SetUp() override {
    StoreFixture::SetUp();
    dialect_ = GetParam();
    if (dialect_ != Dialect::kPostgres) return;
    testing::TestPostgres& pg = testing::TestPostgres::Get();
    ASSERT_EQ(pg.error(), "");
    Result<std::string> uri = pg.NewDatabase();
    ASSERT_TRUE(uri.ok()) << uri.status().ToString();
    target_ = *uri;
  }
  void TearDown() override {
    if (dialect_ == Dialect::kPostgres && target_ != path_) testing::TestPostgres::Get().DropDatabase(target_);
    StoreFixture::TearDown();
  }
};

std::string BackendName(const ::testing::TestParamInfo<Dialect>& info) {
  return info.param == Dialect::kPostgres ? "postgres" : "sqlite";
}

#define HF_BACKEND_SUITE(suite)                                                                     \
  INSTANTIATE_TEST_SUITE_P(Backends, suite, ::testing::Values(Dialect::kSqlite, Dialect::kPostgres), \
                           BackendName)

NodeSpec GpuNode(const std::string& name, int gpus, int64_t gpu_memory_mib) {
  NodeSpec n;
  n.name = name;
  n.labels = {{"pool", "training"}};
  n.cpu_milli = 96000;
  n.memory_mib = 786432;
  for (int i = 0; i < gpus; ++i) {
    n.gpus.push_back({.index = i,
                      .uuid = "GPU-" + std::to_string(i),
                      .model = "A100-80G",
                      .vendor = "nvidia",
                      .memory_mib = gpu_memory_mib,
                      .numa = i / 4,
                      .pcie_switch = i / 2,
                      .fabric_domain = 0});
  }
  n.rdma.push_back({.name = "mlx5_0", .numa = 0, .pcie_switch = 0});
  n.topology = {.zone = "z1", .switch_name = "s1", .rack = "r1"};
  return n;
}

Task MakeTask(const std::string& name, const std::string& group, int32_t priority) {
  Task t;
  t.name = name;
  t.group = group;
  t.priority = priority;
  t.requests = {.cpu_milli = 1000, .memory_mib = 2048, .gpu = 1, .gpu_milli = 500};
  return t;
}

Allocation OneGrant(int32_t gpu, int32_t milli, int64_t memory_mib) {
  Allocation a;
  a.cpu_milli = 1000;
  a.memory_mib = 1024;
  a.gpus.push_back({.index = gpu, .milli = milli, .memory_mib = memory_mib});
  return a;
}

// Inserts a task and returns its key (0 on failure, which the caller's
// expectations then catch).
TaskKey Insert(Store& store, const Task& t) {
  TaskKey key = 0;
  Status s = store.Write([&](Tx& tx) -> Status {
    Result<TaskKey> k = tx.InsertTask(t);
    if (!k.ok()) return k.status();
    key = *k;
    return Status::Ok();
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  return key;
}

Status Grant(Store& store, TaskKey task, const std::string& node, const Allocation& a) {
  return store.Write([&](Tx& tx) { return tx.PutAllocation(task, node, a); });
}

// Appends instead of operator+: g++ 12 raises a false -Wrestrict on
// "literal" + std::to_string(i).
std::string Numbered(std::string prefix, int i) {
  prefix += std::to_string(i);
  return prefix;
}

std::string Hash(char c) { return std::string(64, c); }

// ---- Open, reopen, migrations ----------------------------------------------

using StoreOpenTest = StoreFixture;
using StoreReopenTest = BackendFixture;
HF_BACKEND_SUITE(StoreReopenTest);

TEST_F(StoreOpenTest, UsesWalAndRecordsEveryMigration) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schema_version(), LatestSchemaVersion());
  EXPECT_EQ(RawText("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(RawCount("SELECT COUNT(*) FROM schema_version"),
            static_cast<int64_t>(AllMigrations().size()));
  EXPECT_EQ(RawCount("SELECT MAX(version) FROM schema_version"), LatestSchemaVersion());
}

TEST_P(StoreReopenTest, ReopenKeepsTasksConfigsAndTokens) {
  TaskKey key = 0;
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    key = Insert(*store, MakeTask("llama-ft-0", "llama-ft", 100));
    ASSERT_TRUE(
        store
            ->Write([&](Tx& tx) -> Status {
              HF_RETURN_IF_ERROR(tx.PutPluginConfig("binpack", {{"enabled", true}, {"weight", 2}}));
              HF_RETURN_IF_ERROR(tx.PutSchedulerConfig({{"load_threshold", 0.75}}));
              return tx.InsertToken("admin", "admin", Hash('a'), std::nullopt).status();
            })
            .ok());
  }
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(RawCount("SELECT COUNT(*) FROM schema_version"),
            static_cast<int64_t>(AllMigrations(dialect_).size()));
  EXPECT_EQ(store->schema_version(), LatestSchemaVersion());
  Status s = store->Read([&](const ReadTx& tx) -> Status {
    Result<TaskRecord> t = tx.GetTask(key);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    if (t.ok()) {
      EXPECT_EQ(t->task.name, "llama-ft-0");
      EXPECT_EQ(t->task.priority, 100);
      EXPECT_EQ(t->task.requests.gpu_milli, 500);
      EXPECT_EQ(t->state, TaskState::kPending);
    }
    Result<json> plugin = tx.GetPluginConfig("binpack");
    EXPECT_TRUE(plugin.ok());
    if (plugin.ok()) {
      EXPECT_EQ((*plugin)["weight"], 2);
    }
    Result<json> sched = tx.GetSchedulerConfig();
    EXPECT_TRUE(sched.ok());
    if (sched.ok()) {
      EXPECT_DOUBLE_EQ((*sched)["load_threshold"].get<double>(), 0.75);
    }
    Result<TokenRecord> tok = tx.FindTokenByHash(Hash('a'));
    EXPECT_TRUE(tok.ok());
    if (tok.ok()) {
      EXPECT_EQ(tok->role, "admin");
    }
    return Status::Ok();
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  // AUTOINCREMENT: a new task never reuses a key, even after a reopen.
  EXPECT_GT(Insert(*store, MakeTask("next", "", 0)), key);
}

TEST_F(StoreOpenTest, MissingDirectoryIsUnavailable) {
  Result<std::unique_ptr<Store>> s = Store::Open((dir_ / "no" / "such" / "x.db").string());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable) << s.status().ToString();
}

using StoreMigrationTest = StoreFixture;

TEST_F(StoreMigrationTest, ReopeningAppliesOnlyNewMigrations) {
  std::span<const Migration> all = AllMigrations();
  ASSERT_GE(all.size(), 2u);
  {
    Result<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(path_);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(ApplyMigrations(**db, all.first(1), 1).ok());
    Result<int64_t> v = CurrentSchemaVersion(**db);
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(*v, 1);
  }
  EXPECT_EQ(RawCount("SELECT COUNT(*) FROM sqlite_master WHERE name = 'tokens'"), 0);
  // Migration 1 uses plain CREATE TABLE, so re-running it would fail: opening
  // succeeds only if it is skipped.
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schema_version(), LatestSchemaVersion());
  EXPECT_EQ(RawCount("SELECT COUNT(*) FROM sqlite_master WHERE name = 'tokens'"), 1);
  EXPECT_EQ(RawCount("SELECT applied_at FROM schema_version WHERE version = 1"), 1);
  EXPECT_EQ(RawCount("SELECT applied_at FROM schema_version WHERE version = 2"), clock_.NowMs());
  store.reset();
  store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(RawCount("SELECT COUNT(*) FROM schema_version"), static_cast<int64_t>(all.size()));
}

TEST_F(StoreMigrationTest, StoredFilterWeightsAreDropped) {
  // A file written before filters lost their weight: fit and load_threshold
  // carry one; other plugins keep theirs.
  {
    Result<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(path_);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(ApplyMigrations(**db, AllMigrations().first(4), 1).ok());
    ASSERT_TRUE((*db)->Exec("INSERT INTO plugin_config VALUES"
                         " ('fit', '{\"enabled\":true,\"weight\":1}', 1),"
                         " ('load_threshold', '{\"enabled\":true,\"weight\":1.0}', 1),"
                         " ('binpack', '{\"enabled\":true,\"weight\":3}', 1)")
                    .ok());
  }
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  std::map<std::string, nlohmann::json> configs;
  ASSERT_TRUE(store->Read([&](const ReadTx& tx) -> Status {
    HF_ASSIGN_OR_RETURN(configs, tx.ListPluginConfigs());
    return Status::Ok();
  }).ok());
  EXPECT_EQ(configs["fit"], nlohmann::json::parse(R"({"enabled":true})"));
  EXPECT_EQ(configs["load_threshold"], nlohmann::json::parse(R"({"enabled":true})"));
  EXPECT_EQ(configs["binpack"]["weight"], 3);
}

TEST_F(StoreMigrationTest, FailingMigrationAppliesNothingOfItself) {
  const Migration migrations[] = {
      {1, "one", "CREATE TABLE a (x INTEGER);"},
      {2, "two", "CREATE TABLE b (x INTEGER); THIS IS NOT SQL;"},
  };
  Result<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(path_);
  ASSERT_TRUE(db.ok());
  Status s = ApplyMigrations(**db, migrations, 1);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("schema migration 2"), std::string::npos) << s.message();
  Result<int64_t> v = CurrentSchemaVersion(**db);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 1);
  EXPECT_EQ(RawCount("SELECT COUNT(*) FROM sqlite_master WHERE name = 'a'"), 1);
  EXPECT_EQ(RawCount("SELECT COUNT(*) FROM sqlite_master WHERE name = 'b'"), 0);
}

TEST_F(StoreMigrationTest, NewerDatabaseIsRefused) {
  { ASSERT_NE(OpenStore(), nullptr); }
  int64_t future = LatestSchemaVersion() + 1;
  ASSERT_TRUE(RawExec("INSERT INTO schema_version VALUES (" + std::to_string(future) +
                      ", 'from the future', 0)")
                  .ok());
  Result<std::unique_ptr<Store>> s = Store::Open(path_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find("newer than this binary"), std::string::npos)
      << s.status().message();
}

// ---- Transactions -------------------------------------------------------------

using StoreSqliteLockTest = StoreFixture;
using StoreWriteTest = BackendFixture;
HF_BACKEND_SUITE(StoreWriteTest);

TEST_P(StoreWriteTest, FailingWriteRollsBackEverything) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  Status s = store->Write([&](Tx& tx) -> Status {
    HF_RETURN_IF_ERROR(tx.PutNode(GpuNode("n1", 1, 1000)));
    Result<TaskKey> k = tx.InsertTask(MakeTask("t", "", 0));
    if (!k.ok()) return k.status();
    HF_RETURN_IF_ERROR(tx.PutAllocation(*k, "n1", OneGrant(0, 1000, 0)));
    HF_RETURN_IF_ERROR(tx.PutSchedulerConfig({{"load_threshold", 0.5}}));
    HF_RETURN_IF_ERROR(tx.AppendAudit("alice", "scheduler.load_threshold", 0.8, 0.5));
    return Conflict("changed my mind");
  });
  EXPECT_EQ(s.code(), StatusCode::kConflict);
  EXPECT_EQ(s.message(), "changed my mind");
  for (const char* table :
       {"nodes", "gpus", "tasks", "allocations", "gpu_grants", "scheduler_config", "audit_log"}) {
    EXPECT_EQ(RawCount(std::string("SELECT COUNT(*) FROM ") + table), 0) << table;
  }
}

TEST_P(StoreWriteTest, ThrowingWriteRollsBackAndReportsInternal) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  Status s = store->Write([&](Tx& tx) -> Status {
    HF_RETURN_IF_ERROR(tx.PutPluginConfig("spread", {{"enabled", true}}));
    throw std::runtime_error("boom");
  });
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("boom"), std::string::npos);
  EXPECT_EQ(RawCount("SELECT COUNT(*) FROM plugin_config"), 0);
  // The connection is usable again: no transaction was left open.
  EXPECT_TRUE(
      store->Write([](Tx& tx) { return tx.PutPluginConfig("spread", json::object()); }).ok());
  EXPECT_EQ(RawCount("SELECT COUNT(*) FROM plugin_config"), 1);
}

TEST_P(StoreWriteTest, FailedStatementInsideWriteRollsBackEarlierStatements) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  Status s = store->Write([&](Tx& tx) -> Status {
    HF_RETURN_IF_ERROR(tx.InsertToken("a", "admin", Hash('a'), std::nullopt).status());
    return tx.InsertToken("a", "viewer", Hash('b'), std::nullopt).status();
  });
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists) << s.ToString();
  EXPECT_EQ(RawCount("SELECT COUNT(*) FROM tokens"), 0);
}

TEST_F(StoreSqliteLockTest, ReadsDoNotWaitForAWriterBlockedByAnotherProcess) {
  Result<std::unique_ptr<Store>> opened =
      Store::Open(path_, {.clock = &clock_, .busy_timeout_ms = 3000});
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Store& store = **opened;
  ASSERT_TRUE(store.Write([](Tx& tx) { return tx.PutPluginConfig("spread", json::object()); }).ok());
  EXPECT_TRUE(store.CanCommit().ok());

  sqlite3* other = nullptr;  // an operator's shell holding the write lock
  ASSERT_EQ(sqlite3_open(path_.c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
  std::atomic<bool> written{false};
  Status write_status;
  std::thread writer([&] {
    write_status = store.Write([](Tx& tx) { return tx.PutPluginConfig("binpack", json::object()); });
    written = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (int i = 0; i < 10; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    int64_t n = -1;
    ASSERT_TRUE(store.Read([&](const ReadTx& tx) -> Status {
      Result<std::map<std::string, json>> all = tx.ListPluginConfigs();
      if (!all.ok()) return all.status();
      n = static_cast<int64_t>(all->size());
      return Status::Ok();
    }).ok());
    EXPECT_EQ(n, 1);  // the last commit, not the waiting one
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(50));
  }
  EXPECT_FALSE(written.load());
  std::this_thread::sleep_for(std::chrono::milliseconds(Store::kStuckWriteMs));
  Status ready = store.CanCommit();
  EXPECT_EQ(ready.code(), StatusCode::kUnavailable) << ready.ToString();
  EXPECT_NE(ready.message().find("waited"), std::string::npos) << ready.message();
  sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(other);
  writer.join();
  EXPECT_TRUE(write_status.ok()) << write_status.ToString();
  EXPECT_TRUE(store.CanCommit().ok());
}

// ---- Group commit ---------------------------------------------------------------

using StoreGroupCommitTest = BackendFixture;
HF_BACKEND_SUITE(StoreGroupCommitTest);

TEST_P(StoreGroupCommitTest, ConcurrentWritersAllLandEachWithItsOwnAnswer) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  constexpr int kThreads = 16;
  constexpr int kEach = 50;
  std::vector<std::vector<std::pair<TaskKey, std::string>>> written(kThreads);
  std::vector<int> failed(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const std::string name = Numbered(Numbered("t", t) + "-", i);
        TaskKey key = 0;
        Status s = store->Write([&](Tx& tx) -> Status {
          HF_ASSIGN_OR_RETURN(key, tx.InsertTask(MakeTask(name, "", t)));
          return tx.AppendTaskEvent(key, "submitted", name);
        });
        if (s.ok() && key != 0) {
          written[t].emplace_back(key, name);
        } else {
          ++failed[t];
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::set<TaskKey> keys;
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(failed[t], 0) << "thread " << t;
    for (const auto& [key, name] : written[t]) {
      keys.insert(key);
      // Each writer's answer (its key) names its own row.
      EXPECT_EQ(RawText("SELECT name FROM tasks WHERE id = " + std::to_string(key)), name);
    }
  }
  EXPECT_EQ(keys.size(), size_t{kThreads * kEach});
  EXPECT_EQ(RawCount("SELECT COUNT(*) FROM tasks"), kThreads * kEach);
  EXPECT_EQ(RawCount("SELECT COUNT(*) FROM task_events"), kThreads * kEach);
  EXPECT_EQ(store->writes(), uint64_t{kThreads * kEach});
  // Writers that came while a commit was in flight shared the next one.
  EXPECT_LT(store->commits(), store->writes());
}

// Starts a writer whose function holds the write connection until `expect`
// other threads have said they are about to write (Arrive), and 200 ms more,
// so that those queue behind it and commit as one group after it.
class HeldWriter {
 public:
  HeldWriter(Store& store, int expect) : expect_(expect) {
    thread_ = std::thread([this, &store] {
      status_ = store.Write([this](Tx& tx) -> Status {
        holding_ = true;
        while (arrived_.load() < expect_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        return tx.PutPluginConfig("held", json::object());
      });
    });
    while (!holding_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~HeldWriter() {
    if (thread_.joinable()) thread_.join();
  }
  void Arrive() { ++arrived_; }
  Status Join() {
    if (thread_.joinable()) thread_.join();
    return status_;
  }

 private:
  const int expect_;
  std::atomic<int> arrived_{0};
  std::atomic<bool> holding_{false};
  Status status_;
  std::thread thread_;
};

TEST_P(StoreGroupCommitTest, FailingWritesInAGroupKeepTheOthersAndGetTheirOwnErrors) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  const uint64_t commits_before = store->commits();
  // Each function of the group: its name, and what it does.
  const std::vector<std::pair<std::string, std::function<Status(Tx&)>>> fns = {
      {"a", [](Tx& tx) { return tx.InsertToken("a", "admin", Hash('a'), std::nullopt).status(); }},
      {"b",
       [](Tx& tx) -> Status {
         HF_RETURN_IF_ERROR(tx.InsertToken("b", "admin", Hash('b'), std::nullopt).status());
         return Conflict("b changed its mind");
       }},
      {"c",
       [](Tx& tx) -> Status {
         HF_RETURN_IF_ERROR(tx.InsertToken("c", "admin", Hash('c'), std::nullopt).status());
         throw std::runtime_error("c threw");
       }},
      {"d",  // a failed statement after a good one
       [](Tx& tx) -> Status {
         HF_RETURN_IF_ERROR(tx.InsertToken("d", "admin", Hash('d'), std::nullopt).status());
         return tx.InsertToken("d", "viewer", Hash('e'), std::nullopt).status();
       }},
      {"f", [](Tx& tx) { return tx.InsertToken("f", "viewer", Hash('f'), std::nullopt).status(); }},
  };
  std::vector<Status> got(fns.size());
  {
    HeldWriter held(*store, static_cast<int>(fns.size()));
    std::vector<std::thread> threads;
    for (size_t i = 0; i < fns.size(); ++i) {
      threads.emplace_back([&, i] {
        held.Arrive();
        got[i] = store->Write(fns[i].second);
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_TRUE(held.Join().ok());
  }
  EXPECT_TRUE(got[0].ok()) << got[0].ToString();
  EXPECT_EQ(got[1].code(), StatusCode::kConflict);
  EXPECT_EQ(got[1].message(), "b changed its mind");
  EXPECT_EQ(got[2].code(), StatusCode::kInternal);
  EXPECT_NE(got[2].message().find("c threw"), std::string::npos) << got[2].message();
  EXPECT_EQ(got[3].code(), StatusCode::kAlreadyExists) << got[3].ToString();
  EXPECT_TRUE(got[4].ok()) << got[4].ToString();
  // The good writes landed; nothing of the failed ones did.
  EXPECT_EQ(RawText(dialect_ == Dialect::kPostgres
                        ? "SELECT string_agg(name, ',' ORDER BY name) FROM tokens"
                        : "SELECT group_concat(name, ',') FROM (SELECT name FROM tokens ORDER BY name)"),
            "a,f");
  EXPECT_EQ(RawCount("SELECT COUNT(*) FROM plugin_config WHERE name = 'held'"), 1);
  // Two commits: the held writer's, then one for the whole group behind it.
  EXPECT_EQ(store->commits() - commits_before, 2u);
  EXPECT_EQ(store->writes(), 3u);
  // The connection is usable again: no transaction or savepoint was left open.
  EXPECT_TRUE(store->Write([](Tx& tx) { return tx.PutPluginConfig("spread", json::object()); }).ok());
  EXPECT_EQ(RawCount("SELECT COUNT(*) FROM plugin_config WHERE name = 'spread'"), 1);
}

TEST_F(StoreSqliteLockTest, AGroupThatCannotCommitFailsEveryWriterAndKeepsNothing) {
  Result<std::unique_ptr<Store>> opened =
      Store::Open(path_, {.clock = &clock_, .busy_timeout_ms = 300});
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Store& store = **opened;
  sqlite3* other = nullptr;  // another process holding the write lock
  ASSERT_EQ(sqlite3_open(path_.c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
  std::vector<Status> got(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] {
      got[i] = store.Write([i](Tx& tx) {
        return tx.PutPluginConfig(Numbered("p", static_cast<int>(i)), json::object());
      });
    });
  }
  for (std::thread& t : threads) t.join();
  sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(other);
  for (const Status& s : got) EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_EQ(RawCount("SELECT COUNT(*) FROM plugin_config"), 0);
  EXPECT_EQ(store.writes(), 0u);
  EXPECT_TRUE(store.Write([](Tx& tx) { return tx.PutPluginConfig("p", json::object()); }).ok());
  EXPECT_EQ(RawCount("SELECT COUNT(*) FROM plugin_config"), 1);
}

// ---- GPU capacity guarded by the database ----------------------------------

using StoreGpuTest = BackendFixture;
HF_BACKEND_SUITE(StoreGpuTest);

TEST_P(StoreGpuTest, ExactFillIsAcceptedAndOneMoreMilliRefused) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Write([](Tx& tx) { return tx.PutNode(GpuNode("n1", 2, 16000)); }).ok());
  TaskKey a = Insert(*store, MakeTask("a", "", 0));
  TaskKey b = Insert(*store, MakeTask("b", "", 0));
  TaskKey c = Insert(*store, MakeTask("c", "", 0));
  EXPECT_TRUE(Grant(*store, a, "n1", OneGrant(0, 600, 10000)).ok());
  EXPECT_TRUE(Grant(*store, b, "n1", OneGrant(0, 400, 6000)).ok());
  Status over = Grant(*store, c, "n1", OneGrant(0, 1, 0));
  EXPECT_EQ(over.code(), StatusCode::kResourceExhausted) << over.ToString();
  EXPECT_NE(over.message().find("milli over capacity"), std::string::npos) << over.message();
  // GPU 1 is untouched, and c's failed attempt left no allocation behind.
  EXPECT_TRUE(Grant(*store, c, "n1", OneGrant(1, 1000, 16000)).ok());
  EXPECT_EQ(RawCount("SELECT SUM(milli) FROM gpu_grants WHERE gpu_index = 0"), 1000);
  EXPECT_EQ(RawCount("SELECT SUM(memory_mib) FROM gpu_grants WHERE gpu_index = 0"), 16000);
}

TEST_P(StoreGpuTest, MemoryOverCapacityRefused) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Write([](Tx& tx) { return tx.PutNode(GpuNode("n1", 1, 16000)); }).ok());
  TaskKey a = Insert(*store, MakeTask("a", "", 0));
  TaskKey b = Insert(*store, MakeTask("b", "", 0));
  EXPECT_TRUE(Grant(*store, a, "n1", OneGrant(0, 100, 10000)).ok());
  Status s = Grant(*store, b, "n1", OneGrant(0, 100, 6001));
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.message().find("memory over capacity"), std::string::npos) << s.message();
  EXPECT_TRUE(Grant(*store, b, "n1", OneGrant(0, 100, 6000)).ok());
  // Shrinking the GPU below what is granted breaks the same invariant.
  Status shrink = store->Write([](Tx& tx) { return tx.PutNode(GpuNode("n1", 1, 15999)); });
  EXPECT_EQ(shrink.code(), StatusCode::kResourceExhausted) << shrink.ToString();
}

TEST_P(StoreGpuTest, GrantOnUnknownGpuRefused) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Write([](Tx& tx) { return tx.PutNode(GpuNode("n1", 1, 16000)); }).ok());
  TaskKey a = Insert(*store, MakeTask("a", "", 0));
  Status s = Grant(*store, a, "n1", OneGrant(7, 100, 0));
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.message().find("no such GPU"), std::string::npos) << s.message();
  Status no_node = Grant(*store, a, "ghost", OneGrant(0, 100, 0));
  EXPECT_EQ(no_node.code(), StatusCode::kFailedPrecondition) << no_node.ToString();
}

TEST_P(StoreGpuTest, RawSqlCannotOverAllocate) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Write([](Tx& tx) { return tx.PutNode(GpuNode("n1", 1, 16000)); }).ok());
  TaskKey a = Insert(*store, MakeTask("a", "", 0));
  TaskKey b = Insert(*store, MakeTask("b", "", 0));
  TaskKey c = Insert(*store, MakeTask("c", "", 0));
  for (TaskKey k : {a, b, c}) {
    ASSERT_TRUE(RawExec("INSERT INTO allocations (task_id, node, cpu_milli, memory_mib) VALUES (" +
                        std::to_string(k) + ", 'n1', 0, 0)")
                    .ok());
  }
  auto grant = [&](TaskKey k, int milli, int64_t mem) {
    return RawExec("INSERT INTO gpu_grants (task_id, node, gpu_index, milli, memory_mib) VALUES (" +
                   std::to_string(k) + ", 'n1', 0, " + std::to_string(milli) + ", " + std::to_string(mem) +
                   ")");
  };
  // The capacity triggers' refusals are ResourceExhausted (db.h).
  constexpr StatusCode kRefused = StatusCode::kResourceExhausted;
  Status s = grant(a, 600, 8000);
  EXPECT_TRUE(s.ok()) << s.ToString();
  s = grant(b, 401, 0);
  EXPECT_EQ(s.code(), kRefused) << s.ToString();
  EXPECT_NE(s.message().find("milli over capacity"), std::string::npos) << s.message();
  s = grant(b, 400, 8001);
  EXPECT_EQ(s.code(), kRefused) << s.ToString();
  EXPECT_NE(s.message().find("memory over capacity"), std::string::npos) << s.message();
  s = grant(b, 400, 8000);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(grant(c, 1, 0).code(), kRefused);
  // Raising an existing grant is checked too (its own old value is not
  // counted twice, so rewriting it unchanged passes).
  EXPECT_EQ(RawExec("UPDATE gpu_grants SET milli = 601 WHERE task_id = " + std::to_string(a)).code(), kRefused);
  s = RawExec("UPDATE gpu_grants SET milli = 600 WHERE task_id = " + std::to_string(a));
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(RawExec("UPDATE gpu_grants SET milli = 1001 WHERE task_id = " + std::to_string(a)).code(), kRefused);
  // Out-of-range milli and grants on GPUs with no capacity row.
  EXPECT_TRUE(RawExec("DELETE FROM gpu_grants").ok());
  s = grant(c, 0, 0);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  s = RawExec("INSERT INTO gpu_grants VALUES (" + std::to_string(c) + ", 'n1', 5, 10, 0)");
  EXPECT_EQ(s.code(), kRefused) << s.ToString();
  EXPECT_NE(s.message().find("no such GPU"), std::string::npos) << s.message();
  EXPECT_EQ(RawCount("SELECT COUNT(*) FROM gpu_grants"), 0);
}

TEST_P(StoreGpuTest, ConcurrentWritersNeverShareAWholeGpu) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Write([](Tx& tx) { return tx.PutNode(GpuNode("n1", 1, 16000)); }).ok());
  constexpr int kThreads = 8;
  std::vector<TaskKey> keys;
  for (int i = 0; i < kThreads; ++i)
    keys.push_back(Insert(*store, MakeTask(Numbered("t", i), "", 0)));
  std::atomic<int> ok{0};
  std::atomic<int> exhausted{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      Status s = Grant(*store, keys[i], "n1", OneGrant(0, 1000, 0));
      if (s.ok()) ++ok;
      if (s.code() == StatusCode::kResourceExhausted) ++exhausted;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), 1);
  EXPECT_EQ(exhausted.load(), kThreads - 1);
}

TEST_P(StoreGpuTest, DeletingTaskCascadesItsAllocationAndGrants) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Write([](Tx& tx) { return tx.PutNode(GpuNode("n1", 1, 16000)); }).ok());
  TaskKey a = Insert(*store, MakeTask("a", "", 0));
  TaskKey b = Insert(*store, MakeTask("b", "", 0));
  ASSERT_TRUE(Grant(*store, a, "n1", OneGrant(0, 1000, 16000)).ok());
  ASSERT_TRUE(
      store->Write([&](Tx& tx) { return tx.AppendTaskEvent(a, "scheduled", "to n1"); }).ok());
  ASSERT_TRUE(store->Write([&](Tx& tx) { return tx.DeleteTask(a); }).ok());
  EXPECT_EQ(RawCount("SELECT COUNT(*) FROM gpu_grants"), 0);
  EXPECT_EQ(RawCount("SELECT COUNT(*) FROM allocations"), 0);
  EXPECT_EQ(RawCount("SELECT COUNT(*) FROM task_events"), 0);
  EXPECT_TRUE(Grant(*store, b, "n1", OneGrant(0, 1000, 16000)).ok());
  Status again = store->Write([&](Tx& tx) { return tx.DeleteTask(a); });
  EXPECT_EQ(again.code(), StatusCode::kNotFound);
}

// Placing one task: the allocation with its grants, state and event; the
// same guards as PutAllocation.
TEST_P(StoreGpuTest, PlacingATaskWritesAllocationStateAndEventUnderTheSameGuards) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Write([](Tx& tx) { return tx.PutNode(GpuNode("n1", 2, 16000)); }).ok());
  TaskKey a = Insert(*store, MakeTask("a", "", 0));
  TaskKey b = Insert(*store, MakeTask("b", "", 0));
  auto place = [&](TaskKey k, const std::string& node, const Allocation& al) {
    return store->Write([&](Tx& tx) {
      return tx.PlaceTasks({{k, node, al, "scheduled to " + node}});
    });
  };
  Allocation two = OneGrant(0, 600, 10000);
  two.gpus.push_back({.index = 1, .milli = 1000, .memory_mib = 16000});
  two.cpu_milli = 1500;
  two.rdma_device = "mlx5_1";
  ASSERT_TRUE(place(a, "n1", two).ok());
  ASSERT_TRUE(store->Read([&](const ReadTx& tx) -> Status {
    HF_ASSIGN_OR_RETURN(StoredAllocation al, tx.GetAllocation(a));
    EXPECT_EQ(al.node, "n1");
    EXPECT_EQ(al.gpus, two.gpus);
    EXPECT_EQ(al.cpu_milli, 1500);
    EXPECT_EQ(al.rdma_device, "mlx5_1");
    HF_ASSIGN_OR_RETURN(TaskRecord t, tx.GetTask(a));
    EXPECT_EQ(t.state, TaskState::kScheduled);
    EXPECT_EQ(t.node, "n1");
    HF_ASSIGN_OR_RETURN(TaskPlacementRecord p, tx.GetTaskPlacement(a));
    EXPECT_EQ(p.state, TaskState::kScheduled);
    EXPECT_EQ(p.node, "n1");
    HF_ASSIGN_OR_RETURN(std::vector<TaskEvent> ev, tx.ListTaskEvents(a));
    EXPECT_TRUE(!ev.empty() && ev.back().kind == "scheduled" && ev.back().message == "scheduled to n1");
    return Status::Ok();
  }).ok());
  // Over capacity: refused by the database, nothing of it kept.
  Status over = place(b, "n1", OneGrant(0, 401, 0));
  EXPECT_EQ(over.code(), StatusCode::kResourceExhausted) << over.ToString();
  EXPECT_NE(over.message().find("milli over capacity"), std::string::npos) << over.message();
  Status no_gpu = place(b, "n1", OneGrant(7, 100, 0));
  EXPECT_EQ(no_gpu.code(), StatusCode::kResourceExhausted) << no_gpu.ToString();
  EXPECT_EQ(place(b, "ghost", OneGrant(0, 100, 0)).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(place(9999, "n1", OneGrant(0, 100, 0)).code(), StatusCode::kNotFound);
  ASSERT_TRUE(store->Read([&](const ReadTx& tx) -> Status {
    EXPECT_EQ(tx.GetAllocation(b).status().code(), StatusCode::kNotFound);
    HF_ASSIGN_OR_RETURN(TaskRecord t, tx.GetTask(b));
    EXPECT_EQ(t.state, TaskState::kPending);
    HF_ASSIGN_OR_RETURN(TaskPlacementRecord p, tx.GetTaskPlacement(b));
    EXPECT_EQ(p.state, TaskState::kPending);
    EXPECT_EQ(p.node, "");
    EXPECT_EQ(tx.GetTaskPlacement(9999).status().code(), StatusCode::kNotFound);
    return Status::Ok();
  }).ok());
  // Placing again replaces the task's own grants instead of adding to them.
  ASSERT_TRUE(place(a, "n1", OneGrant(0, 1000, 16000)).ok());
  EXPECT_EQ(RawCount("SELECT SUM(milli) FROM gpu_grants"), 1000);
  EXPECT_TRUE(place(b, "n1", OneGrant(1, 1000, 16000)).ok());
}

TEST_P(StoreGpuTest, PlacingTasksTogetherIsPlacingThemOneByOne) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Write([](Tx& tx) {
    HF_RETURN_IF_ERROR(tx.PutNode(GpuNode("n1", 2, 16000)));
    return tx.PutNode(GpuNode("n2", 1, 16000));
  }).ok());
  std::vector<TaskKey> k;
  for (int i = 0; i < 4; ++i) k.push_back(Insert(*store, MakeTask(Numbered("t", i), "", 0)));
  std::vector<Tx::Placement> ps;
  ps.push_back({k[0], "n1", OneGrant(0, 500, 8000), "first"});
  ps.push_back({k[1], "n1", OneGrant(0, 500, 8000), "second"});
  Allocation cpu_only;
  cpu_only.cpu_milli = 250;
  ps.push_back({k[2], "n2", cpu_only, "third"});
  Allocation both = OneGrant(1, 1000, 16000);
  ps.push_back({k[3], "n1", both, "fourth"});
  ASSERT_TRUE(store->Write([&](Tx& tx) { return tx.PlaceTasks(ps); }).ok());
  ASSERT_TRUE(store->Read([&](const ReadTx& tx) -> Status {
    for (const Tx::Placement& p : ps) {
      HF_ASSIGN_OR_RETURN(StoredAllocation al, tx.GetAllocation(p.task));
      EXPECT_EQ(al.node, p.node);
      EXPECT_EQ(al.gpus, p.allocation.gpus);
      EXPECT_EQ(al.cpu_milli, p.allocation.cpu_milli);
      HF_ASSIGN_OR_RETURN(TaskRecord t, tx.GetTask(p.task));
      EXPECT_EQ(t.state, TaskState::kScheduled);
      HF_ASSIGN_OR_RETURN(std::vector<TaskEvent> ev, tx.ListTaskEvents(p.task));
      EXPECT_TRUE(!ev.empty() && ev.back().kind == "scheduled" && ev.back().message == p.message);
    }
    return Status::Ok();
  }).ok());
  EXPECT_EQ(RawCount("SELECT SUM(milli) FROM gpu_grants"), 2000);
  // One grant too many among several: the whole write is refused, nothing kept.
  TaskKey extra = Insert(*store, MakeTask("extra", "", 0));
  TaskKey extra2 = Insert(*store, MakeTask("extra2", "", 0));
  std::vector<Tx::Placement> over = {{extra2, "n2", OneGrant(0, 1000, 0), "ok alone"},
                                     {extra, "n1", OneGrant(0, 1, 0), "one milli too many"}};
  Status s = store->Write([&](Tx& tx) { return tx.PlaceTasks(over); });
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_EQ(RawCount("SELECT SUM(milli) FROM gpu_grants"), 2000);
  std::vector<Tx::Placement> ghost = {{extra, "n2", cpu_only, "x"}, {extra2, "ghost", cpu_only, "y"}};
  EXPECT_EQ(store->Write([&](Tx& tx) { return tx.PlaceTasks(ghost); }).code(),
            StatusCode::kFailedPrecondition);
  std::vector<Tx::Placement> missing = {{extra, "n2", cpu_only, "x"}, {99999, "n2", cpu_only, "y"}};
  EXPECT_EQ(store->Write([&](Tx& tx) { return tx.PlaceTasks(missing); }).code(), StatusCode::kNotFound);
  // Placed again together: their own old grants are replaced, not added to.
  std::vector<Tx::Placement> again = {{k[0], "n1", OneGrant(0, 500, 8000), "again"},
                                      {k[1], "n1", OneGrant(0, 500, 8000), "again"}};
  EXPECT_TRUE(store->Write([&](Tx& tx) { return tx.PlaceTasks(again); }).ok());
  EXPECT_EQ(RawCount("SELECT SUM(milli) FROM gpu_grants"), 2000);
}

TEST_P(StoreGpuTest, ReplacingAnAllocationFreesTheOldGrants) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Write([](Tx& tx) { return tx.PutNode(GpuNode("n1", 2, 16000)); }).ok());
  TaskKey a = Insert(*store, MakeTask("a", "", 0));
  ASSERT_TRUE(Grant(*store, a, "n1", OneGrant(0, 1000, 0)).ok());
  // The same task moving its whole-GPU grant within GPU 0 must not collide
  // with itself.
  Allocation moved = OneGrant(0, 1000, 100);
  moved.gpus.push_back({.index = 1, .milli = 250, .memory_mib = 0});
  moved.rdma_device = "mlx5_0";
  ASSERT_TRUE(Grant(*store, a, "n1", moved).ok());
  Status s = store->Read([&](const ReadTx& tx) -> Status {
    Result<std::vector<StoredAllocation>> all = tx.ListAllocations();
    if (!all.ok()) return all.status();
    EXPECT_EQ(all->size(), 1u);
    Result<StoredAllocation> one = tx.GetAllocation(a);
    if (!one.ok()) return one.status();
    EXPECT_EQ(one->node, "n1");
    EXPECT_EQ(one->rdma_device, "mlx5_0");
    EXPECT_EQ(one->gpus, moved.gpus);
    Result<TaskRecord> t = tx.GetTask(a);
    if (!t.ok()) return t.status();
    EXPECT_EQ(t->node, "n1");
    return Status::Ok();
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(store->Write([&](Tx& tx) { return tx.DeleteAllocation(a); }).ok());
  EXPECT_EQ(RawCount("SELECT COUNT(*) FROM gpu_grants"), 0);
}

// ---- Nodes --------------------------------------------------------------------

using StoreNodeTest = BackendFixture;
HF_BACKEND_SUITE(StoreNodeTest);

TEST_P(StoreNodeTest, PutGetConditionAndDelete) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  NodeSpec spec = GpuNode("gpu-a1", 2, 81920);
  ASSERT_TRUE(store->Write([&](Tx& tx) { return tx.PutNode(spec); }).ok());
  clock_.Advance(5);
  ASSERT_TRUE(
      store->Write([&](Tx& tx) { return tx.SetNodeCondition("gpu-a1", NodeCondition::kDraining); })
          .ok());
  // Re-putting the spec keeps the condition an operator set.
  ASSERT_TRUE(store->Write([&](Tx& tx) { return tx.PutNode(spec); }).ok());
  Status s = store->Read([&](const ReadTx& tx) -> Status {
    Result<NodeRecord> n = tx.GetNode("gpu-a1");
    if (!n.ok()) return n.status();
    EXPECT_EQ(n->condition, NodeCondition::kDraining);
    EXPECT_EQ(NodeSpecToJson(n->spec), NodeSpecToJson(spec));
    EXPECT_EQ(n->created_at_ms + 5, n->updated_at_ms);
    EXPECT_EQ(tx.GetNode("nope").status().code(), StatusCode::kNotFound);
    return Status::Ok();
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(RawCount("SELECT COUNT(*) FROM gpus WHERE node = 'gpu-a1'"), 2);

  TaskKey t = Insert(*store, MakeTask("t", "", 0));
  ASSERT_TRUE(Grant(*store, t, "gpu-a1", OneGrant(1, 500, 0)).ok());
  // GPU 1 is granted, so a spec without it is refused; so is deleting the node.
  Status shrink = store->Write([&](Tx& tx) { return tx.PutNode(GpuNode("gpu-a1", 1, 81920)); });
  EXPECT_EQ(shrink.code(), StatusCode::kFailedPrecondition) << shrink.ToString();
  Status busy = store->Write([](Tx& tx) { return tx.DeleteNode("gpu-a1"); });
  EXPECT_EQ(busy.code(), StatusCode::kFailedPrecondition) << busy.ToString();

  ASSERT_TRUE(store->Write([&](Tx& tx) { return tx.DeleteAllocation(t); }).ok());
  ASSERT_TRUE(store->Write([](Tx& tx) { return tx.DeleteNode("gpu-a1"); }).ok());
  EXPECT_EQ(RawCount("SELECT COUNT(*) FROM gpus"), 0);
  EXPECT_EQ(store->Write([](Tx& tx) { return tx.DeleteNode("gpu-a1"); }).code(),
            StatusCode::kNotFound);
}

TEST_P(StoreNodeTest, InvalidSpecRefused) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  NodeSpec bad = GpuNode("n", 2, 100);
  bad.gpus[1].index = 0;
  Status s = store->Write([&](Tx& tx) { return tx.PutNode(bad); });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RawCount("SELECT COUNT(*) FROM nodes"), 0);
}

// ---- Tasks --------------------------------------------------------------------

using StoreTaskTest = BackendFixture;
HF_BACKEND_SUITE(StoreTaskTest);

TEST_P(StoreTaskTest, ListFiltersAndPaginates) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store
                  ->Write([](Tx& tx) -> Status {
                    HF_RETURN_IF_ERROR(tx.PutNode(GpuNode("n1", 1, 1000)));
                    return tx.PutNode(GpuNode("n2", 1, 1000));
                  })
                  .ok());
  std::vector<TaskKey> keys;
  for (int i = 0; i < 10; ++i) {
    keys.push_back(Insert(*store, MakeTask(Numbered("t", i), i % 2 ? "odd" : "even", i % 3)));
  }
  ASSERT_TRUE(store
                  ->Write([&](Tx& tx) -> Status {
                    HF_RETURN_IF_ERROR(tx.UpdateTaskState(keys[1], TaskState::kRunning, ""));
                    HF_RETURN_IF_ERROR(tx.UpdateTaskState(keys[4], TaskState::kRunning, ""));
                    HF_RETURN_IF_ERROR(tx.PutAllocation(keys[1], "n1", OneGrant(0, 100, 0)));
                    HF_RETURN_IF_ERROR(tx.PutAllocation(keys[4], "n2", OneGrant(0, 100, 0)));
                    return tx.PutAllocation(keys[7], "n1", OneGrant(0, 100, 0));
                  })
                  .ok());
  auto names = [&](const TaskFilter& f) {
    std::vector<std::string> out;
    Status s = store->Read([&](const ReadTx& tx) -> Status {
      Result<std::vector<TaskRecord>> r = tx.ListTasks(f);
      if (!r.ok()) return r.status();
      for (const TaskRecord& t : *r) out.push_back(t.task.name);
      return Status::Ok();
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(names({.state = TaskState::kRunning}), (V{"t1", "t4"}));
  EXPECT_EQ(names({.node = "n1"}), (V{"t1", "t7"}));
  EXPECT_EQ(names({.state = TaskState::kPending, .node = "n1"}), (V{"t7"}));
  EXPECT_EQ(names({.group = "odd", .priority = 1}), (V{"t1", "t7"}));
  EXPECT_EQ(names({.priority = 2}), (V{"t2", "t5", "t8"}));
  EXPECT_EQ(names({.group = "none"}), V{});
  // Pages of 4 by cursor cover all ten exactly once, in order.
  V all;
  TaskFilter page{.limit = 4};
  for (int pages = 0; pages < 5; ++pages) {
    V got = names(page);
    if (got.empty()) break;
    EXPECT_LE(got.size(), 4u);
    all.insert(all.end(), got.begin(), got.end());
    page.after = keys[std::stoi(got.back().substr(1))];
  }
  EXPECT_EQ(all, (V{"t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9"}));
  EXPECT_EQ(names({.limit = 0}).size(), 10u);
}

TEST_P(StoreTaskTest, SubmittedTogetherTheTasksKeepTheirOrderRowsAndEvents) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  std::vector<Task> tasks;
  for (int i = 0; i < 5; ++i) {
    Task t = MakeTask("batch-" + std::to_string(i), i % 2 ? "odd" : "even", 10 * i);
    t.env = {{"I", std::to_string(i)}, {"QUOTE", "a\"b'c\\d"}};
    tasks.push_back(t);
  }
  std::vector<TaskRecord> made;
  ASSERT_TRUE(store->Write([&](Tx& tx) -> Status {
    HF_ASSIGN_OR_RETURN(made, tx.SubmitTasks(tasks, "by bob"));
    return Status::Ok();
  }).ok());
  ASSERT_EQ(made.size(), tasks.size());
  for (size_t i = 0; i < made.size(); ++i) {
    if (i > 0) {
      EXPECT_GT(made[i].task.key, made[i - 1].task.key);
    }
    Task expected = tasks[i];
    expected.key = made[i].task.key;
    EXPECT_EQ(TaskToJson(made[i].task), TaskToJson(expected));
    EXPECT_EQ(made[i].state, TaskState::kPending);
    EXPECT_EQ(made[i].node, "");
  }
  ASSERT_TRUE(store->Read([&](const ReadTx& tx) -> Status {
    for (const TaskRecord& m : made) {
      HF_ASSIGN_OR_RETURN(TaskRecord r, tx.GetTask(m.task.key));
      EXPECT_EQ(TaskToJson(r.task), TaskToJson(m.task));
      EXPECT_EQ(r.created_at_ms, m.created_at_ms);
      HF_ASSIGN_OR_RETURN(std::vector<TaskEvent> ev, tx.ListTaskEvents(m.task.key));
      EXPECT_EQ(ev.size(), 1u);
      if (!ev.empty()) {
        EXPECT_EQ(ev[0].kind, "submitted");
        EXPECT_EQ(ev[0].message, "by bob");
      }
    }
    return Status::Ok();
  }).ok());
  // A bad task refuses the whole batch, and nothing of it is kept.
  std::vector<Task> bad = tasks;
  bad[3].name = "";
  Status s = store->Write([&](Tx& tx) -> Status { return tx.SubmitTasks(bad, "by bob").status(); });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(store->Read([&](const ReadTx& tx) -> Status {
    HF_ASSIGN_OR_RETURN(std::vector<TaskRecord> all, tx.ListTasks(TaskFilter{}));
    EXPECT_EQ(all.size(), tasks.size());
    return Status::Ok();
  }).ok());
}

TEST_P(StoreTaskTest, StateEventsAndRoundTrip) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  Task t = MakeTask("llama-ft-0", "llama-ft", 100);
  t.kind = TaskKind::kInference;
  t.requests.gpu_models = {"A100-80G", "H100"};
  t.rdma_required = true;
  t.depends_on = {"feature-store"};
  t.preemptible = false;
  t.command = {"python3", "train.py"};
  t.env = {{"EPOCHS", "3"}};
  TaskKey key = Insert(*store, t);
  clock_.Advance(10);
  ASSERT_TRUE(store
                  ->Write([&](Tx& tx) -> Status {
                    HF_RETURN_IF_ERROR(tx.AppendTaskEvent(key, "submitted", "by alice"));
                    HF_RETURN_IF_ERROR(
                        tx.UpdateTaskState(key, TaskState::kPending, "0/3 nodes available"));
                    return tx.AppendTaskEvent(key, "unschedulable", "0/3 nodes available");
                  })
                  .ok());
  Status s = store->Read([&](const ReadTx& tx) -> Status {
    Result<TaskRecord> r = tx.GetTask(key);
    if (!r.ok()) return r.status();
    Task expected = t;
    expected.key = key;
    EXPECT_EQ(TaskToJson(r->task), TaskToJson(expected));
    EXPECT_EQ(r->task.key, key);
    EXPECT_EQ(r->pending_reason, "0/3 nodes available");
    EXPECT_EQ(r->updated_at_ms, r->created_at_ms + 10);
    Result<std::vector<TaskEvent>> ev = tx.ListTaskEvents(key);
    if (!ev.ok()) return ev.status();
    EXPECT_EQ(ev->size(), 2u);
    if (ev->size() == 2) {
      EXPECT_EQ((*ev)[0].kind, "submitted");
      EXPECT_EQ((*ev)[1].message, "0/3 nodes available");
    }
    EXPECT_EQ(tx.ListTaskEvents(key + 100).status().code(), StatusCode::kNotFound);
    return Status::Ok();
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(
      store->Write([&](Tx& tx) { return tx.UpdateTaskState(key + 100, TaskState::kFailed, ""); })
          .code(),
      StatusCode::kNotFound);
  EXPECT_EQ(store->Write([&](Tx& tx) { return tx.AppendTaskEvent(key + 100, "x", "y"); }).code(),
            StatusCode::kNotFound);
  Task bad = t;
  bad.requests.gpu_milli = 1001;
  EXPECT_EQ(store->Write([&](Tx& tx) { return tx.InsertTask(bad).status(); }).code(),
            StatusCode::kInvalidArgument);
}

// ---- Tokens and audit ---------------------------------------------------------

using StoreTokenTest = BackendFixture;
HF_BACKEND_SUITE(StoreTokenTest);

TEST_P(StoreTokenTest, LookupByHashExpiryAndRevoke) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  int64_t now = clock_.NowMs();
  int64_t id = 0;
  ASSERT_TRUE(store
                  ->Write([&](Tx& tx) -> Status {
                    Result<int64_t> r = tx.InsertToken("ci", "operator", Hash('c'), now + 1000);
                    if (!r.ok()) return r.status();
                    id = *r;
                    return tx.InsertToken("ui", "viewer", Hash('d'), std::nullopt).status();
                  })
                  .ok());
  ASSERT_TRUE(store
                  ->Read([&](const ReadTx& tx) -> Status {
                    Result<TokenRecord> t = tx.FindTokenByHash(Hash('c'));
                    if (!t.ok()) return t.status();
                    EXPECT_EQ(t->id, id);
                    EXPECT_EQ(t->name, "ci");
                    EXPECT_EQ(t->role, "operator");
                    EXPECT_TRUE(t->ActiveAt(now + 999));
                    EXPECT_FALSE(t->ActiveAt(now + 1000));
                    EXPECT_EQ(tx.FindTokenByHash(Hash('e')).status().code(), StatusCode::kNotFound);
                    return Status::Ok();
                  })
                  .ok());
  clock_.Advance(7);
  ASSERT_TRUE(store->Write([&](Tx& tx) { return tx.RevokeToken(id); }).ok());
  clock_.Advance(7);
  ASSERT_TRUE(store->Write([&](Tx& tx) { return tx.RevokeToken(id); }).ok());
  EXPECT_EQ(store->Write([&](Tx& tx) { return tx.RevokeToken(id + 100); }).code(),
            StatusCode::kNotFound);
  ASSERT_TRUE(store
                  ->Read([&](const ReadTx& tx) -> Status {
                    Result<std::vector<TokenRecord>> all = tx.ListTokens();
                    if (!all.ok()) return all.status();
                    EXPECT_EQ(all->size(), 2u);
                    Result<TokenRecord> t = tx.FindTokenByHash(Hash('c'));
                    if (!t.ok()) return t.status();
                    EXPECT_EQ(t->revoked_at_ms, now + 7);  // the first revocation stays
                    EXPECT_FALSE(t->ActiveAt(now));
                    return Status::Ok();
                  })
                  .ok());
}

TEST_P(StoreTokenTest, BadRoleHashAndDuplicatesRefusedWithoutEchoingTheHash) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  auto insert = [&](const std::string& name, const std::string& role, const std::string& hash) {
    return store->Write(
        [&](Tx& tx) { return tx.InsertToken(name, role, hash, std::nullopt).status(); });
  };
  EXPECT_EQ(insert("x", "root", Hash('a')).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(insert("x", "admin", "ABC").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(insert("x", "admin", Hash('A')).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(insert("x", "admin", Hash('a')).ok());
  Status dup_name = insert("x", "agent", Hash('b'));
  EXPECT_EQ(dup_name.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(dup_name.message().find("named x"), std::string::npos) << dup_name.message();
  Status dup_hash = insert("y", "agent", Hash('a'));
  EXPECT_EQ(dup_hash.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(dup_hash.message().find(Hash('a')), std::string::npos);
  // The database refuses a bad role or a non-hex hash even from raw SQL.
  EXPECT_EQ(RawExec("INSERT INTO tokens (name, role, hash, created_at) VALUES ('z', 'root', '" +
                    Hash('f') + "', 0)")
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(RawExec("INSERT INTO tokens (name, role, hash, created_at) VALUES ('z', 'admin', "
                    "'plaintext-secret', 0)")
                .code(),
            StatusCode::kInvalidArgument);
}

using StoreAuditTest = BackendFixture;
HF_BACKEND_SUITE(StoreAuditTest);

TEST_P(StoreAuditTest, AppendsAndListsNewestFirst) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store
                  ->Write([](Tx& tx) -> Status {
                    HF_RETURN_IF_ERROR(
                        tx.AppendAudit("alice", "plugins.spread", nullptr, {{"enabled", true}}));
                    return tx.AppendAudit("bob", "scheduler.load_threshold", 0.8, 0.85);
                  })
                  .ok());
  clock_.Advance(3);
  ASSERT_TRUE(store
                  ->Write([](Tx& tx) {
                    return tx.AppendAudit("carol", "plugins.spread", {{"enabled", true}}, nullptr);
                  })
                  .ok());
  ASSERT_TRUE(store
                  ->Read([&](const ReadTx& tx) -> Status {
                    Result<std::vector<AuditEntry>> all = tx.ListAudit(0);
                    if (!all.ok()) return all.status();
                    EXPECT_EQ(all->size(), 3u);
                    if (all->size() != 3) return Status::Ok();
                    EXPECT_EQ((*all)[0].actor, "carol");
                    EXPECT_TRUE((*all)[0].new_value.is_null());
                    EXPECT_EQ((*all)[0].time_ms, clock_.NowMs());
                    EXPECT_EQ((*all)[1].key, "scheduler.load_threshold");
                    EXPECT_DOUBLE_EQ((*all)[1].old_value.get<double>(), 0.8);
                    EXPECT_DOUBLE_EQ((*all)[1].new_value.get<double>(), 0.85);
                    EXPECT_TRUE((*all)[2].old_value.is_null());
                    EXPECT_EQ((*all)[2].new_value["enabled"], true);
                    Result<std::vector<AuditEntry>> one = tx.ListAudit(1);
                    if (!one.ok()) return one.status();
                    EXPECT_EQ(one->size(), 1u);
                    return Status::Ok();
                  })
                  .ok());
  EXPECT_EQ(RawCount("SELECT COUNT(*) FROM audit_log WHERE old IS NULL"), 1);
}

// ---- JSON forms -----------------------------------------------------------------

TEST(StoreSpecJsonTest, UsesAppendixAFieldNames) {
  json n = NodeSpecToJson(GpuNode("gpu-a1", 1, 81920));
  for (const char* k : {"name", "labels", "cpu_milli", "memory_mib", "gpus", "rdma", "topology"}) {
    EXPECT_TRUE(n.contains(k)) << k;
  }
  EXPECT_EQ(n["topology"]["switch"], "s1");
  EXPECT_EQ(n["gpus"][0]["fabric_domain"], 0);
  EXPECT_EQ(n["rdma"][0]["name"], "mlx5_0");

  json submitted = json::parse(R"({"name": "llama-ft-0", "group": "llama-ft", "priority": 100,
    "kind": "batch", "requests": {"cpu_milli": 8000, "memory_mib": 65536, "gpu": 4,
    "gpu_milli": 1000, "gpu_memory_mib": 0, "gpu_models": ["A100-80G", "H100"]},
    "rdma_required": true, "depends_on": ["feature-store"], "preemptible": true,
    "requeue_on_node_loss": false, "command": ["python3", "train.py"], "env": {"EPOCHS": "3"}})");
  Result<Task> t = TaskFromJson(submitted);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->requests.gpu, 4);
  EXPECT_EQ(t->requests.gpu_models.size(), 2u);
  // Every field of Appendix A comes back as it went in, beside the defaults
  // of the fields the appendix does not name.
  submitted["group_placement"] = "pack";
  submitted["secret_env"] = json::object();
  submitted["queue"] = "default";
  submitted["requests"]["gpu_vendors"] = json::array();
  EXPECT_EQ(TaskToJson(*t), submitted);
}

TEST(StoreSpecJsonTest, WrongTypesNameTheField) {
  Result<Task> t = TaskFromJson(json::parse(R"({"name": "x", "requests": {"gpu": "four"}})"));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("requests.gpu"), std::string::npos) << t.status().message();
  Result<Task> kind = TaskFromJson(json::parse(R"({"name": "x", "kind": "daemon"})"));
  EXPECT_EQ(kind.status().code(), StatusCode::kInvalidArgument);
  Result<NodeSpec> n = NodeSpecFromJson(json::parse(R"({"name": "n", "gpus": [{"index": "0"}]})"));
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("gpus[0].index"), std::string::npos) << n.status().message();
}

}  // namespace
}  // namespace hf::store

namespace hf::store {
namespace {

using StoreJobTest = BackendFixture;
HF_BACKEND_SUITE(StoreJobTest);

TEST_P(StoreJobTest, JobsKeepSpecStateEventsAndMembersAcrossReopen) {
  Result<JobSpec> spec = JobSpecFromJson(
      {{"name", "train"},
       {"roles", {{{"name", "w"}, {"replicas", 3}, {"requests", {{"gpu", 1}}}}}},
       {"restart", {{"on_member_failure", "restart_job"}, {"max_restarts", 2}}}});
  ASSERT_TRUE(spec.ok());
  uint64_t id = 0;
  std::vector<TaskKey> members;
  {
    auto s = OpenStore();
    ASSERT_TRUE(s->Write([&](Tx& tx) -> Status {
                   HF_ASSIGN_OR_RETURN(id, tx.InsertJob(*spec));
                   for (const Task& t : spec->Members(id)) {
                     HF_ASSIGN_OR_RETURN(TaskKey k, tx.InsertTask(t));
                     members.push_back(k);
                   }
                   // A task of no job, between them.
                   Task alone;
                   alone.name = "alone";
                   HF_RETURN_IF_ERROR(tx.InsertTask(alone).status());
                   HF_RETURN_IF_ERROR(tx.AppendJobEvent(id, "submitted", "by alice"));
                   HF_RETURN_IF_ERROR(tx.UpdateJob(id, JobState::kRestarting, "member x failed", 1));
                   return tx.AppendJobEvent(id, "restarting", "1 of 2");
                 }).ok());
    EXPECT_EQ(s->Write([](Tx& tx) { return tx.UpdateJob(99, JobState::kFailed, "", 0); }).code(),
              StatusCode::kNotFound);
  }
  auto s = OpenStore();
  ASSERT_TRUE(s->Read([&](const ReadTx& tx) -> Status {
                 HF_ASSIGN_OR_RETURN(JobRecord j, tx.GetJob(id));
                 EXPECT_EQ(j.spec.name, "train");
                 EXPECT_EQ(j.spec.replicas(), 3);
                 EXPECT_EQ(j.spec.max_restarts, 2);
                 EXPECT_EQ(j.state, JobState::kRestarting);
                 EXPECT_EQ(j.reason, "member x failed");
                 EXPECT_EQ(j.restarts, 1);
                 HF_ASSIGN_OR_RETURN(std::vector<JobEvent> ev, tx.ListJobEvents(id));
                 EXPECT_EQ(ev.size(), 2u);
                 EXPECT_EQ(ev[1].kind, "restarting");
                 TaskFilter f;
                 f.job = id;
                 f.limit = 0;
                 HF_ASSIGN_OR_RETURN(std::vector<TaskRecord> got, tx.ListTasks(f));
                 EXPECT_EQ(got.size(), 3u);
                 for (size_t i = 0; i < got.size(); ++i) {
                   EXPECT_EQ(got[i].task.key, members[i]);
                   EXPECT_EQ(got[i].task.job.rank, static_cast<int32_t>(i));
                   EXPECT_EQ(got[i].task.job.id, id);
                 }
                 HF_ASSIGN_OR_RETURN(std::vector<JobRecord> all, tx.ListJobs());
                 EXPECT_EQ(all.size(), 1u);
                 EXPECT_EQ(tx.GetJob(id + 1).status().code(), StatusCode::kNotFound);
                 EXPECT_EQ(tx.ListJobEvents(id + 1).status().code(), StatusCode::kNotFound);
                 return Status::Ok();
               }).ok());
  // The database refuses a state it does not know.
  EXPECT_EQ(RawExec("UPDATE jobs SET state = 'done'").code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hf::store
