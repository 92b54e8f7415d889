#include "leader/elector.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "store/store.h"
#include "store/testing/postgres.h"

namespace hf::leader {
namespace {

using std::chrono::milliseconds;

class ElectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(pg_.error(), "");
    Result<std::string> uri = pg_.NewDatabase();
    ASSERT_TRUE(uri.ok()) << uri.status().ToString();
    uri_ = *uri;
    // The schema (leader_lease and the fencing functions) comes with the store.
    Result<std::unique_ptr<store::Store>> st = store::Store::Open(uri_);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    store_ = std::move(*st);
  }
  void TearDown() override {
    store_.reset();
    pg_.DropDatabase(uri_);
  }

  // Short timings, so the lease runs out within a test.
  std::unique_ptr<Elector> Make(const std::string& name, std::atomic<int>* deposed = nullptr,
                                std::string* why = nullptr) {
    ElectorOptions o;
    o.uri = uri_;
    o.replica = name;
    o.url = "http://127.0.0.1:1" + std::to_string(name.size());
    o.lease = milliseconds(600);
    o.renew_deadline = milliseconds(400);
    o.retry = milliseconds(100);
    o.on_deposed = [deposed, why](const std::string& w) {
      if (deposed != nullptr) deposed->fetch_add(1);
      if (why != nullptr) *why = w;
    };
    Result<std::unique_ptr<Elector>> e = Elector::Create(std::move(o));
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? std::move(*e) : nullptr;
  }

  Status WritePlugin(store::Store& s, const std::string& name) {
    return s.Write([&](store::Tx& tx) { return tx.PutPluginConfig(name, nlohmann::json{{"weight", 1}}); });
  }
  bool HasPlugin(const std::string& name) {
    bool found = false;
    EXPECT_TRUE(store_->Read([&](const store::ReadTx& tx) {
      found = tx.GetPluginConfig(name).ok();
      return Status::Ok();
    }).ok());
    return found;
  }

  store::testing::TestPostgres& pg_ = store::testing::TestPostgres::Get();
  std::string uri_;
  std::unique_ptr<store::Store> store_;
};

TEST_F(ElectorTest, FirstReplicaLeadsAndTheOthersFollowIt) {
  auto a = Make("a");
  auto b = Make("bb");
  a->Round();
  ASSERT_TRUE(a->leading());
  EXPECT_EQ(a->epoch(), 1);
  b->Round();
  EXPECT_FALSE(b->leading());
  EXPECT_EQ(b->epoch(), 0);
  EXPECT_EQ(b->lease().holder, "a");
  EXPECT_EQ(b->lease().epoch, 1);
  EXPECT_EQ(b->lease().url, "http://127.0.0.1:11");
  // Renewals keep it: the follower never takes over from a live leader.
  for (int i = 0; i < 8; ++i) {
    std::this_thread::sleep_for(milliseconds(100));
    a->Round();
    b->Round();
  }
  EXPECT_TRUE(a->leading());
  EXPECT_FALSE(b->leading());
  EXPECT_EQ(b->lease().epoch, 1);
}

TEST_F(ElectorTest, AFollowerTakesOverAtOnceWhenTheLeadersSessionEnds) {
  auto a = Make("a");
  auto b = Make("bb");
  a->Round();
  ASSERT_TRUE(a->leading());
  b->Round();
  ASSERT_FALSE(b->leading());
  // The process dies: its connection closes and the lease is still fresh.
  a->Stop();
  const auto t0 = std::chrono::steady_clock::now();
  b->Round();
  EXPECT_TRUE(b->leading());
  EXPECT_EQ(b->epoch(), 2);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(300)) << "no wait for the lease";
}

TEST_F(ElectorTest, AFrozenLeaderLosesTheLeaseAndTheDatabaseRefusesItsRenewal) {
  std::atomic<int> deposed{0};
  std::string why;
  auto a = Make("a", &deposed, &why);
  auto b = Make("bb");
  a->Round();
  ASSERT_TRUE(a->leading());
  // `a` makes no more rounds (frozen) but its session lives: b waits for
  // the lease to run out by the database's clock.
  b->Round();
  EXPECT_FALSE(b->leading());
  std::this_thread::sleep_for(milliseconds(700));
  b->Round();
  ASSERT_TRUE(b->leading());
  EXPECT_EQ(b->epoch(), 2);
  // `a` wakes up: its renewal is refused and it steps down.
  a->Round();
  EXPECT_FALSE(a->leading());
  EXPECT_EQ(deposed.load(), 1);
  EXPECT_NE(why.find("fenced: epoch 1 is no longer the leader's (the lease is at epoch 2)"), std::string::npos)
      << why;
}

TEST_F(ElectorTest, ALeaderWhoseRenewalsFailPastTheDeadlineStepsDown) {
  std::atomic<int> deposed{0};
  std::string why;
  auto a = Make("a", &deposed, &why);
  a->Round();
  ASSERT_TRUE(a->leading());
  // Another session holds the lease row: every renewal times out.
  auto blocker = store::PgDb::Connect(uri_);
  ASSERT_TRUE(blocker.ok());
  ASSERT_TRUE((*blocker)->Exec("BEGIN").ok());
  ASSERT_TRUE((*blocker)->Exec("SELECT * FROM leader_lease FOR UPDATE").ok());
  a->Round();
  EXPECT_TRUE(a->leading()) << "one failed renewal is within the deadline";
  std::this_thread::sleep_for(milliseconds(450));  // past the 400 ms renew deadline
  a->Round();
  EXPECT_FALSE(a->leading());
  EXPECT_EQ(deposed.load(), 1);
  EXPECT_NE(why.find("no renewal went through"), std::string::npos) << why;
  (void)(*blocker)->Exec("ROLLBACK");
}

TEST_F(ElectorTest, ALeaderSurvivesALostConnectionAndStepsDownWhenTheRowMovesOn) {
  std::atomic<int> deposed{0};
  std::string why;
  auto a = Make("a", &deposed, &why);
  a->Round();
  ASSERT_TRUE(a->leading());
  // The database goes away for a's session (terminated by the server).
  ASSERT_TRUE(store_->Write([](store::Tx&) { return Status::Ok(); }).ok());
  auto admin = store::PgDb::Connect(uri_);
  ASSERT_TRUE(admin.ok());
  ASSERT_TRUE((*admin)->Exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                             "datname = current_database() AND pid <> pg_backend_pid() AND "
                             "query LIKE '%heteroflow_renew%'").ok());
  // The connection is made again by the next round; the renewal still goes
  // through (epoch 1 still holds the row), so nothing is lost yet.
  a->Round();
  a->Round();
  EXPECT_TRUE(a->leading()) << why;
  // The row is taken from under it: the refusal deposes at once.
  ASSERT_TRUE((*admin)->Exec("UPDATE leader_lease SET epoch = 7, holder = 'other'").ok());
  a->Round();
  EXPECT_FALSE(a->leading());
  EXPECT_EQ(deposed.load(), 1);
}

TEST_F(ElectorTest, ADeposedLeadersCommitIsRefusedByTheDatabase) {
  auto a = Make("a");
  auto b = Make("bb");
  a->Round();
  ASSERT_EQ(a->epoch(), 1);
  Result<std::unique_ptr<store::Store>> old_leader = store::Store::Open(uri_);
  ASSERT_TRUE(old_leader.ok());
  std::atomic<int> fenced{0};
  std::string refusal;
  (*old_leader)->SetFence(1, [&](const Status& s) {
    fenced.fetch_add(1);
    refusal = s.message();
  });
  ASSERT_TRUE(WritePlugin(**old_leader, "before").ok());
  EXPECT_TRUE(HasPlugin("before"));
  // a freezes; b takes over after the lease.
  std::this_thread::sleep_for(milliseconds(700));
  b->Round();
  ASSERT_EQ(b->epoch(), 2);
  // Anything the old leader commits now is refused, and nothing of it kept.
  Status s = WritePlugin(**old_leader, "after");
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("no longer the leader"), std::string::npos) << s.message();
  EXPECT_EQ(fenced.load(), 1);
  EXPECT_NE(refusal.find("fenced: epoch 1"), std::string::npos) << refusal;
  EXPECT_FALSE(HasPlugin("after"));
  EXPECT_FALSE((*old_leader)->CanCommit().ok());
  // The new leader's writes, fenced at its own epoch, go through.
  Result<std::unique_ptr<store::Store>> new_leader = store::Store::Open(uri_);
  ASSERT_TRUE(new_leader.ok());
  (*new_leader)->SetFence(2, [](const Status&) { FAIL() << "the leader was fenced"; });
  EXPECT_TRUE(WritePlugin(**new_leader, "new").ok());
  EXPECT_TRUE(HasPlugin("new"));
}

TEST_F(ElectorTest, ATakeoverWaitsForTheOldLeadersCommitInFlightOrRefusesIt) {
  // A commit's fence holds the lease row FOR SHARE until COMMIT: a takeover
  // in between waits, so the new leader's recovery sees that commit.
  auto a = Make("a");
  a->Round();
  ASSERT_EQ(a->epoch(), 1);
  auto conn = store::PgDb::Connect(uri_);
  ASSERT_TRUE(conn.ok());
  store::PgDb& db = **conn;
  ASSERT_TRUE(db.Exec("BEGIN").ok());
  ASSERT_TRUE(db.Exec("INSERT INTO plugin_config (name, config, updated_at) VALUES ('inflight', '{}', 0)").ok());
  ASSERT_TRUE(db.Exec("SELECT heteroflow_fence(1)").ok());
  std::this_thread::sleep_for(milliseconds(700));  // a's lease runs out
  auto b = Make("bb");
  b->Round();  // its compare-and-set waits on the row lock (lock timeout: one retry)
  EXPECT_FALSE(b->leading());
  ASSERT_TRUE(db.Exec("COMMIT").ok());
  b->Round();
  ASSERT_TRUE(b->leading());
  EXPECT_TRUE(HasPlugin("inflight"));
  // From now on epoch 1 cannot commit at all.
  ASSERT_TRUE(db.Exec("BEGIN").ok());
  Status late = db.Exec("SELECT heteroflow_fence(1)");
  EXPECT_EQ(late.code(), StatusCode::kFailedPrecondition) << late.ToString();
  (void)db.Exec("ROLLBACK");
}

TEST_F(ElectorTest, OfManyReplicasStartingTogetherExactlyOneLeads) {
  std::vector<std::unique_ptr<Elector>> es;
  for (int i = 0; i < 6; ++i) es.push_back(Make("r" + std::string(i + 1, 'x')));
  std::vector<std::thread> ts;
  for (auto& e : es) ts.emplace_back([&e] { e->Round(); });
  for (auto& t : ts) t.join();
  int leaders = 0;
  for (auto& e : es) leaders += e->leading() ? 1 : 0;
  EXPECT_EQ(leaders, 1);
  for (auto& e : es) e->Round();
  leaders = 0;
  for (auto& e : es) leaders += e->leading() ? 1 : 0;
  EXPECT_EQ(leaders, 1);
}

TEST_F(ElectorTest, OptionsAreChecked) {
  ElectorOptions o;
  o.uri = uri_;
  EXPECT_EQ(Elector::Create(o).status().code(), StatusCode::kInvalidArgument);
  o.replica = "a";
  o.renew_deadline = milliseconds(5000);  // beyond the lease
  EXPECT_EQ(Elector::Create(o).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hf::leader
