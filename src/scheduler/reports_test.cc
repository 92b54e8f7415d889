// Agents' status reports (reports.cc): a plain task's start and end commit
// without the scheduler's mutex, join the store's group commits, and are
// still refused when the store no longer places the task there.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/testing/nodes.h"
#include "framework/registry.h"
#include "scheduler/scheduler.h"

namespace hf::scheduler {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kWait{5000};

// Holds the store's write connection (a Write whose function waits) until
// Release, so that writes queued meanwhile commit together afterwards.
class StoreHold {
 public:
  explicit StoreHold(store::Store& store) {
    thread_ = std::thread([this, &store] {
      (void)store.Write([this](store::Tx&) {
        held_ = true;
        while (!release_.load()) std::this_thread::sleep_for(milliseconds(1));
        return Status::Ok();
      });
    });
    while (!held_.load()) std::this_thread::sleep_for(milliseconds(1));
  }
  ~StoreHold() { Release(); }
  void Release() {
    release_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::atomic<bool> held_{false};
  std::atomic<bool> release_{false};
  std::thread thread_;
};

class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(::testing::TempDir()) /
           (std::string("hf_reports_") + info->name() + "_" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    auto store = store::Store::Open((dir_ / "heteroflow.db").string(), {.clock = &clock_});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    auto fw = framework::Framework::Create(hf::plugins::InTreeRegistry(), {}, &clock_);
    ASSERT_TRUE(fw.ok()) << fw.status().ToString();
    sched_ = std::make_unique<Scheduler>(store_.get(), std::move(fw).value(), &clock_, nullptr);
    ASSERT_TRUE(sched_->Recover().ok());
    ASSERT_TRUE(sched_->PutNode(hf::testing::Node("n1", 64000, 512 * 1024, 8), "admin").ok());
    sched_->Start();
  }
  void TearDown() override {
    sched_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Submits `n` one-GPU tasks and waits until they are placed.
  std::vector<TaskKey> Place(int n) {
    std::vector<Task> tasks;
    for (int i = 0; i < n; ++i) {
      Task t = hf::testing::MakeTask(0, 1000, 1024, 1);
      t.name = "t" + std::to_string(i);
      tasks.push_back(t);
    }
    auto recs = sched_->Submit(tasks, "alice");
    EXPECT_TRUE(recs.ok()) << recs.status().ToString();
    EXPECT_TRUE(sched_->WaitIdle(kWait));
    std::vector<TaskKey> keys;
    if (recs.ok()) {
      for (const store::TaskRecord& r : *recs) keys.push_back(r.task.key);
    }
    for (TaskKey k : keys) EXPECT_EQ(Get(k).state, TaskState::kScheduled);
    return keys;
  }

  store::TaskRecord Get(TaskKey id) {
    store::TaskRecord rec;
    Status s = store_->Read([&](const store::ReadTx& tx) -> Status {
      HF_ASSIGN_OR_RETURN(rec, tx.GetTask(id));
      return Status::Ok();
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return rec;
  }

  std::vector<std::string> Kinds(TaskKey id) {
    std::vector<store::TaskEvent> events;
    EXPECT_TRUE(store_
                    ->Read([&](const store::ReadTx& tx) -> Status {
                      HF_ASSIGN_OR_RETURN(events, tx.ListTaskEvents(id));
                      return Status::Ok();
                    })
                    .ok());
    std::vector<std::string> out;
    for (const store::TaskEvent& e : events) out.push_back(e.kind);
    return out;
  }

  // The task's state as the scheduler's memory has it; kPending when it is
  // not placed.
  TaskState Placed(TaskKey id) {
    const ClusterSnapshot snap = sched_->Snapshot();
    const PlacedTask* p = snap.cluster.FindPlaced(id);
    return p == nullptr ? TaskState::kPending : p->state;
  }

  static TaskExit Exit(TaskState state) {
    TaskExit e;
    e.state = state;
    if (state != TaskState::kRunning) e.exit_code = 0;
    return e;
  }

  ManualClock clock_{1'700'000'000'000};
  std::filesystem::path dir_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<Scheduler> sched_;
};

TEST_F(ReportTest, AReportWaitingForItsCommitDoesNotHoldTheMutex) {
  const TaskKey t = Place(1).at(0);
  StoreHold hold(*store_);
  auto report = std::async(std::launch::async, [&] {
    return sched_->ReportTask("n1", t, Exit(TaskState::kRunning));
  });
  std::this_thread::sleep_for(milliseconds(100));  // it waits for the store now
  // Anything that takes the scheduler's mutex goes on meanwhile.
  auto count = std::async(std::launch::async, [&] { return sched_->active_count(); });
  EXPECT_EQ(count.wait_for(std::chrono::seconds(2)), std::future_status::ready)
      << "the report held the scheduler's mutex through its commit";
  EXPECT_EQ(report.wait_for(milliseconds(0)), std::future_status::timeout)
      << "answered before its commit";
  hold.Release();
  Result<TaskState> rec = report.get();
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_EQ(*rec, TaskState::kRunning);
  EXPECT_EQ(Get(t).state, TaskState::kRunning);
  EXPECT_EQ(Placed(t), TaskState::kRunning);
  EXPECT_EQ(count.get(), 0u);
}

TEST_F(ReportTest, ConcurrentReportsShareCommits) {
  const std::vector<TaskKey> keys = Place(8);
  const uint64_t commits_before = store_->commits();
  std::vector<std::future<Result<TaskState>>> reports;
  {
    StoreHold hold(*store_);
    for (TaskKey k : keys) {
      reports.push_back(std::async(std::launch::async, [&, k] {
        return sched_->ReportTask("n1", k, Exit(TaskState::kRunning));
      }));
    }
    std::this_thread::sleep_for(milliseconds(200));  // every one queued behind the hold
  }
  for (auto& r : reports) EXPECT_TRUE(r.get().ok());
  for (TaskKey k : keys) {
    EXPECT_EQ(Get(k).state, TaskState::kRunning);
    EXPECT_EQ(Placed(k), TaskState::kRunning);
  }
  // The hold's commit, then one (or very few) for the eight reports.
  EXPECT_LE(store_->commits() - commits_before, 3u);
}

TEST_F(ReportTest, ACancelRacingAnEndReportFindsTheTaskEnded) {
  const TaskKey t = Place(1).at(0);
  StoreHold hold(*store_);
  auto report = std::async(std::launch::async, [&] {
    return sched_->ReportTask("n1", t, Exit(TaskState::kSucceeded));
  });
  std::this_thread::sleep_for(milliseconds(100));  // in flight, waiting for the store
  auto cancel = std::async(std::launch::async, [&] { return sched_->Cancel(t, "bob"); });
  std::this_thread::sleep_for(milliseconds(100));
  hold.Release();
  Result<TaskState> ended = report.get();
  ASSERT_TRUE(ended.ok()) << ended.status().ToString();
  EXPECT_EQ(*ended, TaskState::kSucceeded);
  // The cancel waited for the report: it sees the task ended, and refuses.
  Result<store::TaskRecord> cancelled = cancel.get();
  ASSERT_FALSE(cancelled.ok());
  EXPECT_EQ(cancelled.status().code(), StatusCode::kFailedPrecondition)
      << cancelled.status().ToString();
  EXPECT_EQ(Get(t).state, TaskState::kSucceeded);
  EXPECT_EQ(Kinds(t), (std::vector<std::string>{"submitted", "scheduled", "succeeded"}));
  EXPECT_EQ(Placed(t), TaskState::kPending);  // released
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  for (const auto& [node, used, total] : sched_->GpuAllocation()) EXPECT_EQ(used, 0) << node;
}

TEST_F(ReportTest, AReportForAPlacementTheStoreNoLongerHoldsIsRefused) {
  const TaskKey t = Place(1).at(0);
  // The store moves on without the memory (as another writer would between
  // the report's look at the memory and its commit): the store decides.
  ASSERT_TRUE(store_->Write([&](store::Tx& tx) { return tx.DeleteAllocation(t); }).ok());
  Result<TaskState> r = sched_->ReportTask("n1", t, Exit(TaskState::kRunning));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kConflict) << r.status().ToString();
  EXPECT_EQ(Get(t).state, TaskState::kScheduled);
  EXPECT_EQ(Kinds(t), (std::vector<std::string>{"submitted", "scheduled"}));
  EXPECT_EQ(Placed(t), TaskState::kScheduled);  // memory took nothing either
}

TEST_F(ReportTest, AReportFromAnotherNodeIsRefusedAndEndReportsFreeTheGpu) {
  const std::vector<TaskKey> keys = Place(2);
  Result<TaskState> stale = sched_->ReportTask("n2", keys[0], Exit(TaskState::kRunning));
  EXPECT_EQ(stale.status().code(), StatusCode::kConflict);
  ASSERT_TRUE(sched_->ReportTask("n1", keys[0], Exit(TaskState::kRunning)).ok());
  TaskExit failed = Exit(TaskState::kFailed);
  failed.exit_code = 3;
  ASSERT_TRUE(sched_->ReportTask("n1", keys[0], failed).ok());
  ASSERT_TRUE(sched_->ReportTask("n1", keys[1], Exit(TaskState::kSucceeded)).ok());
  EXPECT_EQ(Get(keys[0]).state, TaskState::kFailed);
  EXPECT_EQ(Get(keys[1]).state, TaskState::kSucceeded);
  // A second end report of an ended task: not assigned any more.
  EXPECT_EQ(sched_->ReportTask("n1", keys[1], Exit(TaskState::kSucceeded)).status().code(),
            StatusCode::kConflict);
  for (const auto& [node, used, total] : sched_->GpuAllocation()) EXPECT_EQ(used, 0) << node;
}

TEST_F(ReportTest, AFencedStopOfAnEarlierPlacementLeavesTheNewOneAlone) {
  // The task's copy on n1 was stopped by its supervisor (fenced) while the
  // server queued it again and placed it on n1 anew; the fenced report
  // arrives after that new placement, before anything of the new copy. A
  // task's reports come in order, so a copy that was stopped had its
  // "running" reported first: a placement not reported running has no copy
  // that could have been fenced, and the report is about an earlier one.
  // Today's placement must stay: one "lost" event, not two.
  const TaskKey t = Place(1).at(0);
  TaskExit fenced = Exit(TaskState::kFailed);
  fenced.signal = 15;
  fenced.fenced = true;
  // Taken (the agent then starts the new placement), and nothing changes.
  Result<TaskState> stale = sched_->ReportTask("n1", t, fenced);
  ASSERT_TRUE(stale.ok()) << stale.status().ToString();
  EXPECT_EQ(*stale, TaskState::kScheduled);
  EXPECT_EQ(Get(t).state, TaskState::kScheduled);
  EXPECT_EQ(Kinds(t), (std::vector<std::string>{"submitted", "scheduled"}));
  EXPECT_EQ(Placed(t), TaskState::kScheduled);

  // The placement's own copy, started and then fenced: lost, queued again
  // (and placed again on the only node).
  ASSERT_TRUE(sched_->ReportTask("n1", t, Exit(TaskState::kRunning)).ok());
  ASSERT_TRUE(sched_->ReportTask("n1", t, fenced).ok());
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  const std::vector<std::string> kinds = Kinds(t);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), "lost"), 1);
  EXPECT_EQ(Placed(t), TaskState::kScheduled);
}

}  // namespace
}  // namespace hf::scheduler
