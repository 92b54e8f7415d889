#include "store/postgres.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "store/migrations.h"
#include "store/store.h"
#include "store/testing/postgres.h"

namespace hf::store {
namespace {

TEST(PostgresParametersTest, NumbersEachSqliteParameterInOrderOfFirstUse) {
  std::vector<int> order;
  EXPECT_EQ(PostgresParameters("SELECT 1 FROM t WHERE a = ? AND b = ?", order),
            "SELECT 1 FROM t WHERE a = $1 AND b = $2");
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  // Numbered ones, repeated, and a bare ? after ?7 is ?8 (SQLite's rule).
  EXPECT_EQ(PostgresParameters("VALUES (?, ?, ?7, ?7, ?)", order), "VALUES ($1, $2, $3, $3, $4)");
  EXPECT_EQ(order, (std::vector<int>{1, 2, 7, 8}));
  // Numbers left out get no $k: ?1 and ?6 only.
  EXPECT_EQ(PostgresParameters("WHERE id > ?1 ORDER BY id LIMIT ?6", order), "WHERE id > $1 ORDER BY id LIMIT $2");
  EXPECT_EQ(order, (std::vector<int>{1, 6}));
  // Question marks in quoted text and identifiers are not parameters.
  EXPECT_EQ(PostgresParameters("SELECT '?', \"a?\" FROM t WHERE x = ? AND y = 'it''s ?'", order),
            "SELECT '?', \"a?\" FROM t WHERE x = $1 AND y = 'it''s ?'");
  EXPECT_EQ(order, (std::vector<int>{1}));
}

TEST(PostgresUriTest, PasswordsNeverShow) {
  EXPECT_TRUE(IsPostgresUri("postgresql://h/db"));
  EXPECT_TRUE(IsPostgresUri("postgres://h/db"));
  EXPECT_FALSE(IsPostgresUri("/var/lib/heteroflow/heteroflow.db"));
  EXPECT_EQ(RedactedUri("postgresql://hf:s3cret@db1:5432,db2:5433/hf?target_session_attrs=read-write"),
            "postgresql://hf@db1:5432,db2:5433/hf?password=xxx&target_session_attrs=read-write");
  EXPECT_EQ(RedactedUri("postgresql:///hf?host=/run/postgresql&port=5432"),
            "postgresql:///hf?host=/run/postgresql&port=5432");
  // However the password is written: a parameter, percent-encoded with '@'
  // and '/' in it, sslpassword; and a URI libpq cannot read is not echoed.
  for (const char* uri : {"postgresql://hf@db1/hf?password=s3cret&sslmode=require",
                          "postgresql://hf:s3%40c%2Fret@db1/hf", "postgresql://hf@db1/hf?sslpassword=s3cret",
                          "postgresql://hf:s3cret%zz@db1/hf", "postgresql://hf:s3 cret@db1/hf"}) {
    const std::string shown = RedactedUri(uri);
    EXPECT_EQ(shown.find("s3"), std::string::npos) << uri << " -> " << shown;
  }
}

TEST(PostgresStoreTest, NoServerIsUnavailableAndTheMessageKeepsThePasswordOut) {
  for (const char* uri : {"postgresql://hf:s3cret@/hf?host=/nonexistent/dir&port=1",
                          "postgresql://hf:s3cret%zz@/hf?host=/nonexistent/dir&port=1",
                          "postgresql://hf:s3 cret@/hf?host=/nonexistent/dir&port=1"}) {
    Result<std::unique_ptr<Store>> s = Store::Open(uri);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), StatusCode::kUnavailable) << s.status().ToString();
    EXPECT_EQ(s.status().message().find("s3"), std::string::npos) << s.status().message();
  }
}

class PostgresStoreFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(pg_.error(), "");
    Result<std::string> uri = pg_.NewDatabase();
    ASSERT_TRUE(uri.ok()) << uri.status().ToString();
    uri_ = *uri;
  }
  void TearDown() override {
    if (!uri_.empty()) pg_.DropDatabase(uri_);
  }
  testing::TestPostgres& pg_ = testing::TestPostgres::Get();
  std::string uri_;
};

TEST_F(PostgresStoreFixture, ServersStartingTogetherMigrateOnce) {
  constexpr int kServers = 4;
  std::vector<Status> opened(kServers);
  std::vector<std::unique_ptr<Store>> stores(kServers);
  std::vector<std::thread> threads;
  for (int i = 0; i < kServers; ++i) {
    threads.emplace_back([&, i] {
      Result<std::unique_ptr<Store>> s = Store::Open(uri_);
      opened[size_t(i)] = s.status();
      if (s.ok()) stores[size_t(i)] = std::move(*s);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kServers; ++i) {
    ASSERT_TRUE(opened[size_t(i)].ok()) << opened[size_t(i)].ToString();
    EXPECT_EQ(stores[size_t(i)]->schema_version(), LatestSchemaVersion());
    EXPECT_EQ(stores[size_t(i)]->dialect(), Dialect::kPostgres);
  }
  Result<std::unique_ptr<PgDb>> db = PgDb::Connect(uri_);
  ASSERT_TRUE(db.ok());
  Result<Stmt> n = (*db)->Prepare("SELECT COUNT(*) FROM schema_version");
  ASSERT_TRUE(n.ok());
  ASSERT_TRUE(*n->Step());
  EXPECT_EQ(n->Int(0), static_cast<int64_t>(AllMigrations(Dialect::kPostgres).size()));
  // Both dialects reach the same version.
  EXPECT_EQ(AllMigrations(Dialect::kPostgres).back().version, AllMigrations(Dialect::kSqlite).back().version);
}

TEST_F(PostgresStoreFixture, ALostConnectionIsMadeAgain) {
  Result<std::unique_ptr<Store>> opened = Store::Open(uri_);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Store& store = **opened;
  ASSERT_TRUE(store.Write([](Tx& tx) { return tx.PutPluginConfig("spread", nlohmann::json::object()); }).ok());
  // The server ends every session of the database (a restart, a failover).
  Result<std::unique_ptr<PgDb>> admin = PgDb::Connect(pg_.Uri("postgres"));
  ASSERT_TRUE(admin.ok());
  const std::string name = uri_.substr(uri_.rfind("dbname=") + 7);
  ASSERT_TRUE((*admin)->Exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '" + name +
                             "'")
                  .ok());
  // The write that finds the connection gone fails as Unavailable (the
  // caller retries, as for a busy SQLite file); the next one reconnects.
  Status first = store.Write([](Tx& tx) { return tx.PutPluginConfig("binpack", nlohmann::json::object()); });
  if (!first.ok()) {
    EXPECT_EQ(first.code(), StatusCode::kUnavailable) << first.ToString();
  }
  Status again = store.Write([](Tx& tx) { return tx.PutPluginConfig("binpack", nlohmann::json::object()); });
  EXPECT_TRUE(again.ok()) << again.ToString();
  size_t configs = 0;
  for (int i = 0; i < 2; ++i) {  // a reader's connection went too
    Status read = store.Read([&](const ReadTx& tx) -> Status {
      HF_ASSIGN_OR_RETURN(auto all, tx.ListPluginConfigs());
      configs = all.size();
      return Status::Ok();
    });
    if (read.ok()) break;
    EXPECT_EQ(read.code(), StatusCode::kUnavailable) << read.ToString();
  }
  EXPECT_EQ(configs, 2u);
  EXPECT_TRUE(store.CanCommit().ok());
}

TEST_F(PostgresStoreFixture, OneServerPerDatabase) {
  Result<std::unique_ptr<Store>> a = Store::Open(uri_);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE((*a)->ClaimExclusive().ok());
  Result<std::unique_ptr<Store>> b = Store::Open(uri_);
  ASSERT_TRUE(b.ok()) << b.status().ToString();  // reading and migrating are shared
  Status second = (*b)->ClaimExclusive();
  EXPECT_EQ(second.code(), StatusCode::kFailedPrecondition) << second.ToString();
  EXPECT_NE(second.message().find("another heteroflow server"), std::string::npos) << second.message();
  // The first one gone (its session ended), the second may have it.
  a->reset();
  Status later;
  for (int i = 0; i < 250; ++i) {  // the server notices the closed session at once, or soon
    later = (*b)->ClaimExclusive();
    if (later.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(later.ok()) << later.ToString();
}

}  // namespace
}  // namespace hf::store
