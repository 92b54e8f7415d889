#include "scheduler/scheduler.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/job.h"
#include "core/testing/nodes.h"
#include "framework/registry.h"
#include "queues/queue_tree.h"

namespace hf::scheduler {
namespace {

using hf::testing::MakeTask;
using hf::testing::Node;
using nlohmann::json;
using std::chrono::milliseconds;

constexpr milliseconds kWait{5000};

// A policy "change" that changes nothing: every waiting task is retried.
Status Unchanged(const framework::Framework&) { return Status::Ok(); }

// A node with `gpus` A100s and room for many small tasks.
NodeSpec GpuNode(const std::string& name, int gpus) { return Node(name, 64000, 512 * 1024, gpus); }

// A task asking for `gpus` whole GPUs; the key is the store's business.
Task GpuTask(const std::string& name, int gpus, int32_t priority = 0) {
  Task t = MakeTask(0, 1000, 1024, gpus);
  t.name = name;
  t.priority = priority;
  return t;
}

// A real store in a fresh directory per test, a real framework with the
// in-tree plugins, and a Scheduler over both. Open/Close can be repeated to
// simulate a restart of the server over the same file.
class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(::testing::TempDir()) /
           (std::string("hf_sched_") + info->test_suite_name() + "_" + info->name() + "_" +
            std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "heteroflow.db").string();
  }
  void TearDown() override {
    Close();
    std::filesystem::remove_all(dir_);
  }

  // Opens store, framework and scheduler (not started) and recovers.
  void Open(const framework::Policy& policy = {}) {
    auto store = store::Store::Open(path_, {.clock = &clock_});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    auto fw = framework::Framework::Create(hf::plugins::InTreeRegistry(), policy, &clock_);
    ASSERT_TRUE(fw.ok()) << fw.status().ToString();
    SchedulerOptions o;
    o.on_attempt = [this](std::string_view, double) { ++attempts_; };
    o.on_commit_failure = [this](size_t n) { commit_failures_ += n; };
    o.on_policy_change = [this](const framework::Framework&) { ++policy_changes_; };
    o.on_preemption = [this](size_t victims) {
      preemptions_ += victims;
      if (on_preemption_) on_preemption_();
    };
    sched_ = std::make_unique<Scheduler>(store_.get(), std::move(fw).value(), &clock_, nullptr, o);
    Status s = sched_->Recover();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  void Close() {
    sched_.reset();
    store_.reset();
  }

  // Waits until the loop has made more than `after` attempts in all, then
  // until it is idle: for changes (release, policy, uncordon) that requeue
  // waiting tasks only when the loop next wakes.
  void SettleAfter(uint64_t after) {
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    while (attempts_.load() <= after && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(1));
    }
    ASSERT_GT(attempts_.load(), after) << "the loop never retried";
    ASSERT_TRUE(sched_->WaitIdle(kWait));
  }

  TaskKey SubmitOne(const Task& t) {
    auto r = sched_->Submit({t}, "alice");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->at(0).task.key : 0;
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

  std::vector<store::TaskEvent> Events(TaskKey id) {
    std::vector<store::TaskEvent> out;
    Status s = store_->Read([&](const store::ReadTx& tx) -> Status {
      HF_ASSIGN_OR_RETURN(out, tx.ListTaskEvents(id));
      return Status::Ok();
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  }

  std::vector<std::string> Kinds(TaskKey id) {
    std::vector<std::string> out;
    for (const store::TaskEvent& e : Events(id)) out.push_back(e.kind);
    return out;
  }

  std::vector<store::StoredAllocation> Allocations(const std::string& node = "") {
    std::vector<store::StoredAllocation> out;
    Status s = store_->Read([&](const store::ReadTx& tx) -> Status {
      HF_ASSIGN_OR_RETURN(out, tx.ListAllocations(node));
      return Status::Ok();
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  }

  // NotFound when the task has no allocation row.
  Result<store::StoredAllocation> AllocOf(TaskKey id) {
    store::StoredAllocation a;
    Status s = store_->Read([&](const store::ReadTx& tx) -> Status {
      HF_ASSIGN_OR_RETURN(a, tx.GetAllocation(id));
      return Status::Ok();
    });
    if (!s.ok()) return s;
    return a;
  }

  std::vector<store::TaskRecord> AllTasks() {
    std::vector<store::TaskRecord> out;
    Status s = store_->Read([&](const store::ReadTx& tx) -> Status {
      store::TaskFilter f;
      f.limit = 0;
      HF_ASSIGN_OR_RETURN(out, tx.ListTasks(f));
      return Status::Ok();
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  }

  // GPU milli granted per node, summed from the stored allocations.
  std::map<std::string, int64_t> StoredGpuMilli() {
    std::map<std::string, int64_t> out;
    for (const store::StoredAllocation& a : Allocations()) {
      for (const GpuGrant& g : a.gpus) out[a.node] += g.milli;
    }
    return out;
  }

  // GPU milli allocated per node, as the scheduler's memory has it.
  std::map<std::string, int64_t> MemoryGpuMilli() {
    std::map<std::string, int64_t> out;
    for (const auto& [name, used, total] : sched_->GpuAllocation()) {
      if (used > 0) out[name] = used;
    }
    return out;
  }

  ManualClock clock_{1'700'000'000'000};
  std::filesystem::path dir_;
  std::string path_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<Scheduler> sched_;
  std::atomic<uint64_t> attempts_{0};
  std::atomic<size_t> commit_failures_{0};
  std::atomic<size_t> preemptions_{0};
  std::atomic<size_t> policy_changes_{0};
  // Runs on the loop thread right after a preemption was committed.
  std::function<void()> on_preemption_;
};

framework::Policy PreemptMode(const std::string& mode) {
  framework::Policy p;
  if (mode == "off") {
    p.plugins["preempt"] = {{"enabled", false}};
  } else {
    p.plugins["preempt"] = {{"enabled", true}, {"mode", mode}};
  }
  return p;
}

TEST_F(SchedulerTest, SubmitStoresPendingThenTheLoopSchedulesAndStoresAllocations) {
  Open();
  ASSERT_TRUE(sched_->PutNode(GpuNode("n1", 4), "admin").ok());
  ASSERT_TRUE(sched_->PutNode(GpuNode("n2", 4), "admin").ok());

  // Before the loop runs, the tasks are stored pending with a "submitted" event.
  auto recs = sched_->Submit({GpuTask("a", 2), GpuTask("b", 1), GpuTask("c", 3)}, "alice");
  ASSERT_TRUE(recs.ok()) << recs.status().ToString();
  ASSERT_EQ(recs->size(), 3u);
  std::vector<TaskKey> ids;
  for (const store::TaskRecord& r : *recs) {
    EXPECT_EQ(r.state, TaskState::kPending);
    EXPECT_TRUE(r.node.empty());
    ids.push_back(r.task.key);
    const auto ev = Events(r.task.key);
    ASSERT_EQ(ev.size(), 1u);
    EXPECT_EQ(ev[0].kind, "submitted");
    EXPECT_EQ(ev[0].message, "by alice");
  }
  EXPECT_LT(ids[0], ids[1]);
  EXPECT_LT(ids[1], ids[2]);
  EXPECT_EQ(sched_->active_count(), 3u);
  EXPECT_EQ(Get(ids[0]).state, TaskState::kPending);

  sched_->Start();
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  EXPECT_EQ(sched_->active_count(), 0u);
  EXPECT_EQ(sched_->unschedulable_count(), 0u);

  // 6 GPUs asked of 8: all placed; the store and the memory agree per node.
  int64_t total_gpus = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const store::TaskRecord r = Get(ids[i]);
    EXPECT_EQ(r.state, TaskState::kScheduled) << r.task.name;
    EXPECT_EQ(r.pending_reason, "");
    ASSERT_FALSE(r.node.empty());
    auto a = AllocOf(ids[i]);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ(a->node, r.node);
    EXPECT_EQ(a->gpus.size(), size_t(r.task.requests.gpu));
    for (const GpuGrant& g : a->gpus) EXPECT_EQ(g.milli, kWholeGpuMilli);
    total_gpus += int64_t(a->gpus.size());
    // The event says where.
    const auto ev = Events(ids[i]);
    ASSERT_EQ(ev.size(), 2u);
    EXPECT_EQ(ev[1].kind, "scheduled");
    EXPECT_EQ(ev[1].message.rfind("scheduled to node " + r.node + ", GPU ", 0), 0u)
        << ev[1].message;
  }
  EXPECT_EQ(total_gpus, 6);
  EXPECT_EQ(StoredGpuMilli(), MemoryGpuMilli());
  // Totals are reported for every node, used or not.
  auto gpu = sched_->GpuAllocation();
  ASSERT_EQ(gpu.size(), 2u);
  EXPECT_EQ(std::get<2>(gpu[0]), 4000);
  EXPECT_EQ(std::get<2>(gpu[1]), 4000);
  EXPECT_EQ(std::get<1>(gpu[0]) + std::get<1>(gpu[1]), 6000);

  // The snapshot mirrors the same placements.
  ClusterSnapshot snap = sched_->Snapshot();
  EXPECT_TRUE(snap.pending.empty());
  for (TaskKey id : ids) {
    const PlacedTask* p = snap.cluster.FindPlaced(id);
    ASSERT_NE(p, nullptr);
    auto a = AllocOf(id);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(snap.cluster.spec(p->alloc.node).name, a->node);
    EXPECT_EQ(p->alloc.gpus, a->gpus);
  }
  EXPECT_EQ(commit_failures_.load(), 0u);
}

TEST_F(SchedulerTest, HigherPriorityFirstThenLowerIdFirst) {
  // Preemption off: a wrong order would leave the wrong task placed.
  Open(PreemptMode("off"));
  ASSERT_TRUE(sched_->PutNode(GpuNode("n1", 1), "admin").ok());
  // Submitted earlier but lower priority.
  const TaskKey low = SubmitOne(GpuTask("low", 1, 0));
  const TaskKey high = SubmitOne(GpuTask("high", 1, 10));
  ASSERT_LT(low, high);
  sched_->Start();
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  EXPECT_EQ(Get(high).state, TaskState::kScheduled);
  EXPECT_EQ(Get(low).state, TaskState::kPending);
  EXPECT_EQ(Kinds(low), (std::vector<std::string>{"submitted", "unschedulable"}));
  EXPECT_EQ(Kinds(high), (std::vector<std::string>{"submitted", "scheduled"}));
}

TEST_F(SchedulerTest, EqualPriorityGoesByLowerIdFirst) {
  Open(PreemptMode("off"));
  ASSERT_TRUE(sched_->PutNode(GpuNode("n1", 1), "admin").ok());
  // One batch and three singles, all priority 5, before the loop starts.
  auto batch = sched_->Submit({GpuTask("first", 1, 5), GpuTask("second", 1, 5)}, "alice");
  ASSERT_TRUE(batch.ok());
  const TaskKey third = SubmitOne(GpuTask("third", 1, 5));
  const TaskKey below = SubmitOne(GpuTask("below", 1, 4));
  const TaskKey first = batch->at(0).task.key;
  const TaskKey second = batch->at(1).task.key;

  // The snapshot lists the queue in the order it will be tried.
  std::vector<TaskKey> order;
  for (const Task& t : sched_->Snapshot().pending) order.push_back(t.key);
  EXPECT_EQ(order, (std::vector<TaskKey>{first, second, third, below}));

  sched_->Start();
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  EXPECT_EQ(Get(first).state, TaskState::kScheduled);
  for (TaskKey k : {second, third, below}) {
    EXPECT_EQ(Get(k).state, TaskState::kPending) << k;
    EXPECT_EQ(Kinds(k), (std::vector<std::string>{"submitted", "unschedulable"})) << k;
  }
  EXPECT_EQ(sched_->unschedulable_count(), 3u);
}

TEST_F(SchedulerTest, UnschedulableReasonIsStoredWithOneEventPerDistinctReason) {
  Open();
  ASSERT_TRUE(sched_->PutNode(GpuNode("n1", 1), "admin").ok());
  const TaskKey big = SubmitOne(GpuTask("big", 2));
  sched_->Start();
  ASSERT_TRUE(sched_->WaitIdle(kWait));

  const store::TaskRecord r = Get(big);
  EXPECT_EQ(r.state, TaskState::kPending);
  EXPECT_EQ(r.pending_reason.rfind("0/1 nodes available: 1 ", 0), 0u) << r.pending_reason;
  EXPECT_EQ(sched_->unschedulable_count(), 1u);
  EXPECT_EQ(sched_->active_count(), 0u);
  auto ev = Events(big);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[1].kind, "unschedulable");
  EXPECT_EQ(ev[1].message, r.pending_reason);

  // Retried under a "new" policy three times: same reason, no new event,
  // no rewrite of the row.
  const int64_t updated = r.updated_at_ms;
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(1000);
    const uint64_t before = attempts_.load();
    ASSERT_TRUE(sched_->ChangePolicy(Unchanged, Unchanged).ok());
    SettleAfter(before);
  }
  EXPECT_EQ(Kinds(big), (std::vector<std::string>{"submitted", "unschedulable"}));
  EXPECT_EQ(Get(big).pending_reason, r.pending_reason);
  EXPECT_EQ(Get(big).updated_at_ms, updated);
  EXPECT_EQ(sched_->unschedulable_count(), 1u);

  // A second node changes the reason: it is stored with a second event.
  const uint64_t before = attempts_.load();
  ASSERT_TRUE(sched_->PutNode(Node("cpu-only", 64000, 65536), "admin").ok());
  SettleAfter(before);
  const store::TaskRecord r2 = Get(big);
  EXPECT_EQ(r2.pending_reason.rfind("0/2 nodes available: ", 0), 0u) << r2.pending_reason;
  ev = Events(big);
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[2].kind, "unschedulable");
  EXPECT_EQ(ev[2].message, r2.pending_reason);
}

TEST_F(SchedulerTest, CancellingAPlacedTaskLetsAWaitingOneIn) {
  Open();
  ASSERT_TRUE(sched_->PutNode(GpuNode("n1", 1), "admin").ok());
  const TaskKey holder = SubmitOne(GpuTask("holder", 1));
  const TaskKey waiter = SubmitOne(GpuTask("waiter", 1));
  sched_->Start();
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  ASSERT_EQ(Get(holder).state, TaskState::kScheduled);
  ASSERT_EQ(Get(waiter).state, TaskState::kPending);
  ASSERT_EQ(sched_->unschedulable_count(), 1u);

  const uint64_t before = attempts_.load();
  auto c = sched_->Cancel(holder, "bob");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->state, TaskState::kCancelled);
  EXPECT_EQ(AllocOf(holder).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Kinds(holder).back(), "cancelled");
  EXPECT_EQ(Events(holder).back().message, "by bob");
  SettleAfter(before);

  const store::TaskRecord w = Get(waiter);
  EXPECT_EQ(w.state, TaskState::kScheduled);
  EXPECT_EQ(w.node, "n1");
  EXPECT_EQ(w.pending_reason, "");
  EXPECT_EQ(Kinds(waiter), (std::vector<std::string>{"submitted", "unschedulable", "scheduled"}));
  EXPECT_EQ(sched_->unschedulable_count(), 0u);
  EXPECT_EQ(StoredGpuMilli(), MemoryGpuMilli());
  EXPECT_EQ(MemoryGpuMilli().at("n1"), 1000);
}

// Agents' long polls: many watches wait without a thread each, a change to a
// node's list answers that node's watches only, and the rest time out.
TEST_F(SchedulerTest, AssignmentWatchesAnswerOnChangeTimeoutAndStop) {
  Open();
  ASSERT_TRUE(sched_->PutNode(GpuNode("n1", 1), "admin").ok());
  ASSERT_TRUE(sched_->PutNode(GpuNode("n2", 0), "admin").ok());  // the GPU task goes to n1
  sched_->Start();
  auto now = sched_->WaitAssignments("n1", 12345, kWait);  // a stale version answers at once
  ASSERT_TRUE(now.ok()) << now.status().ToString();
  const uint64_t v1 = now->first;
  EXPECT_TRUE(now->second.empty());
  EXPECT_EQ(sched_->WaitAssignments("ghost", 0, kWait).status().code(), StatusCode::kNotFound);

  std::mutex mu;
  std::map<std::string, std::vector<Scheduler::AssignmentList>> answers;
  auto record = [&](const std::string& node) {
    return [&, node](Result<Scheduler::AssignmentList> r) {
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      std::lock_guard lock(mu);
      answers[node].push_back(*r);
    };
  };
  const uint64_t v2 = sched_->WaitAssignments("n2", 12345, kWait)->first;
  constexpr int kWatches = 200;  // far more than any thread pool
  for (int i = 0; i < kWatches; ++i) sched_->WatchAssignments("n1", v1, kWait, record("n1"));
  sched_->WatchAssignments("n2", v2, milliseconds(300), record("n2"));
  EXPECT_EQ(sched_->watch_count(), static_cast<size_t>(kWatches + 1));

  const TaskKey t = SubmitOne(GpuTask("t", 1));
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  auto count = [&](const std::string& node) {
    std::lock_guard lock(mu);
    return answers[node].size();
  };
  while ((count("n1") < kWatches || count("n2") < 1) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(2));
  }
  std::lock_guard lock(mu);
  ASSERT_EQ(answers["n1"].size(), static_cast<size_t>(kWatches));
  for (const auto& list : answers["n1"]) {
    EXPECT_NE(list.first, v1);
    ASSERT_EQ(list.second.size(), 1u);
    EXPECT_EQ(list.second[0].task.key, t);
  }
  // n2's list did not change: its watch ran out with the same version.
  ASSERT_EQ(answers["n2"].size(), 1u);
  EXPECT_EQ(answers["n2"][0].first, v2);
  EXPECT_TRUE(answers["n2"][0].second.empty());
  EXPECT_EQ(sched_->watch_count(), 0u);
}

TEST_F(SchedulerTest, StoppingTheSchedulerAnswersEveryWatch) {
  Open();
  ASSERT_TRUE(sched_->PutNode(GpuNode("n1", 1), "admin").ok());
  sched_->Start();
  const uint64_t v = sched_->WaitAssignments("n1", 12345, kWait)->first;
  std::atomic<int> answered{0};
  for (int i = 0; i < 50; ++i) {
    sched_->WatchAssignments("n1", v, std::chrono::minutes(10),
                             [&](Result<Scheduler::AssignmentList> r) {
                               if (r.ok()) ++answered;
                             });
  }
  const auto t0 = std::chrono::steady_clock::now();
  sched_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  EXPECT_EQ(answered.load(), 50);
  // After the stop a watch is answered at once.
  sched_->WatchAssignments("n1", v, std::chrono::minutes(10),
                           [&](Result<Scheduler::AssignmentList>) { ++answered; });
  EXPECT_EQ(answered.load(), 51);
}

TEST_F(SchedulerTest, PreemptionEvictsAScheduledLowerPriorityTask) {
  Open(PreemptMode("scheduled"));
  ASSERT_TRUE(sched_->PutNode(GpuNode("n1", 2), "admin").ok());
  const TaskKey low = SubmitOne(GpuTask("low", 2, 0));
  sched_->Start();
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  ASSERT_EQ(Get(low).state, TaskState::kScheduled);

  // What the store holds the moment the preemption has been committed,
  // before the victim is tried again.
  struct Seen {
    bool called = false;
    store::TaskRecord victim;
    Status victim_alloc;
    std::vector<store::StoredAllocation> allocs;
  } seen;
  on_preemption_ = [&] {
    seen.called = true;
    seen.victim = Get(low);
    seen.victim_alloc = AllocOf(low).status();
    seen.allocs = Allocations();
  };
  const TaskKey high = SubmitOne(GpuTask("high", 1, 10));
  ASSERT_TRUE(sched_->WaitIdle(kWait));

  ASSERT_TRUE(seen.called);
  EXPECT_EQ(preemptions_.load(), 1u);
  const std::string by = "preempted by task " + std::to_string(high) + " (high, priority 10)";
  EXPECT_EQ(seen.victim.state, TaskState::kPending);
  EXPECT_EQ(seen.victim.pending_reason, by);
  EXPECT_TRUE(seen.victim.node.empty());
  EXPECT_EQ(seen.victim_alloc.code(), StatusCode::kNotFound);
  ASSERT_EQ(seen.allocs.size(), 1u);
  EXPECT_EQ(seen.allocs[0].task, high);
  EXPECT_EQ(seen.allocs[0].node, "n1");
  ASSERT_EQ(seen.allocs[0].gpus.size(), 1u);
  EXPECT_EQ(seen.allocs[0].gpus[0].milli, kWholeGpuMilli);
  // The capacity triggers never refused a commit (victims are deleted
  // before the preemptor's grants are inserted).
  EXPECT_EQ(commit_failures_.load(), 0u);

  // Afterwards the victim was tried again and waits for 2 GPUs.
  const store::TaskRecord v = Get(low);
  EXPECT_EQ(v.state, TaskState::kPending);
  EXPECT_EQ(v.pending_reason.rfind("0/1 nodes available", 0), 0u) << v.pending_reason;
  const auto vev = Events(low);
  ASSERT_EQ(vev.size(), 4u);
  EXPECT_EQ(vev[2].kind, "preempted");
  EXPECT_EQ(vev[2].message, by);
  EXPECT_EQ(vev[3].kind, "unschedulable");
  const auto hev = Events(high);
  ASSERT_EQ(hev.size(), 2u);
  EXPECT_EQ(hev[1].kind, "scheduled");
  EXPECT_NE(hev[1].message.find("preempting 1 task(s)"), std::string::npos) << hev[1].message;
  EXPECT_EQ(Get(high).state, TaskState::kScheduled);
  EXPECT_EQ(StoredGpuMilli(), MemoryGpuMilli());
  EXPECT_EQ(MemoryGpuMilli().at("n1"), 1000);
  EXPECT_EQ(sched_->unschedulable_count(), 1u);
}

TEST_F(SchedulerTest, PreemptionDisabledLeavesTheLowerPriorityTaskInPlace) {
  Open(PreemptMode("disabled"));
  ASSERT_TRUE(sched_->PutNode(GpuNode("n1", 1), "admin").ok());
  const TaskKey low = SubmitOne(GpuTask("low", 1, 0));
  sched_->Start();
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  const TaskKey high = SubmitOne(GpuTask("high", 1, 10));
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  EXPECT_EQ(Get(low).state, TaskState::kScheduled);
  EXPECT_EQ(Get(high).state, TaskState::kPending);
  EXPECT_EQ(preemptions_.load(), 0u);
}

TEST_F(SchedulerTest, RecoverRebuildsAllocationsAndQueueFromTheStore) {
  Open();
  ASSERT_TRUE(sched_->PutNode(GpuNode("n1", 2), "admin").ok());
  ASSERT_TRUE(sched_->PutNode(GpuNode("n2", 1), "admin").ok());
  auto recs =
      sched_->Submit({GpuTask("a", 1), GpuTask("b", 1), GpuTask("c", 1), GpuTask("d", 2)}, "alice");
  ASSERT_TRUE(recs.ok());
  sched_->Start();
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  const auto gpu_before = sched_->GpuAllocation();
  const auto allocs_before = Allocations();
  ASSERT_EQ(allocs_before.size(), 3u);  // a, b, c fill the 3 GPUs
  const TaskKey waiting = recs->at(3).task.key;
  ASSERT_EQ(Get(waiting).state, TaskState::kPending);
  // n2 is cordoned (it keeps its task); the condition must survive too. The
  // waiting task's reason now names the cordon.
  ASSERT_TRUE(sched_->SetNodeCondition("n2", NodeCondition::kDraining, "admin").ok());
  const uint64_t tried = attempts_.load();
  ASSERT_TRUE(sched_->ChangePolicy(Unchanged, Unchanged).ok());
  SettleAfter(tried);
  const std::string reason = Get(waiting).pending_reason;
  ASSERT_EQ(reason.rfind("0/2 nodes available: ", 0), 0u) << reason;
  const std::vector<std::string> kinds = Kinds(waiting);
  ASSERT_EQ(kinds.back(), "unschedulable");

  // A restart: everything in memory is gone; the file stays.
  Close();
  attempts_ = 0;
  Open();
  EXPECT_EQ(sched_->GpuAllocation(), gpu_before);
  EXPECT_EQ(sched_->active_count(), 1u);  // the pending task is queued again
  ClusterSnapshot snap = sched_->Snapshot();
  ASSERT_EQ(snap.pending.size(), 1u);
  EXPECT_EQ(snap.pending[0].key, waiting);
  EXPECT_EQ(snap.pending[0].name, "d");
  EXPECT_EQ(snap.pending[0].requests.gpu, 2);
  EXPECT_EQ(snap.cluster.placed_count(), 3u);
  EXPECT_EQ(snap.cluster.condition(snap.cluster.FindNode("n1")), NodeCondition::kReady);
  EXPECT_EQ(snap.cluster.condition(snap.cluster.FindNode("n2")), NodeCondition::kDraining);
  for (const store::StoredAllocation& a : allocs_before) {
    const PlacedTask* p = snap.cluster.FindPlaced(a.task);
    ASSERT_NE(p, nullptr) << a.task;
    EXPECT_EQ(snap.cluster.spec(p->alloc.node).name, a.node);
    EXPECT_EQ(p->alloc.gpus, a.gpus);
    EXPECT_EQ(p->alloc.cpu_milli, a.cpu_milli);
  }

  // Tried again after the restart: the same reason, so no second event.
  sched_->Start();
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  EXPECT_GE(attempts_.load(), 1u);
  EXPECT_EQ(Kinds(waiting), kinds);
  EXPECT_EQ(Get(waiting).pending_reason, reason);
  EXPECT_EQ(sched_->unschedulable_count(), 1u);

  // Freeing the two GPUs of n1 lets it in.
  TaskKey on_n1[2];
  size_t k = 0;
  for (const store::StoredAllocation& a : allocs_before) {
    if (a.node == "n1") on_n1[k++] = a.task;
  }
  ASSERT_EQ(k, 2u);
  // One GPU free is not enough: retried, still waiting.
  uint64_t before = attempts_.load();
  ASSERT_TRUE(sched_->Cancel(on_n1[0], "bob").ok());
  SettleAfter(before);
  EXPECT_EQ(Get(waiting).state, TaskState::kPending);
  before = attempts_.load();
  ASSERT_TRUE(sched_->Cancel(on_n1[1], "bob").ok());
  SettleAfter(before);
  const store::TaskRecord w = Get(waiting);
  EXPECT_EQ(w.state, TaskState::kScheduled);
  EXPECT_EQ(w.node, "n1");
  EXPECT_EQ(StoredGpuMilli(), MemoryGpuMilli());
  EXPECT_EQ(commit_failures_.load(), 0u);
}

TEST_F(SchedulerTest, NodesRegisterReplaceCordonAndDelete) {
  Open(PreemptMode("off"));
  auto created = sched_->PutNode(GpuNode("n1", 1), "admin");
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_TRUE(*created);
  auto replaced = sched_->PutNode(GpuNode("n1", 2), "admin");
  ASSERT_TRUE(replaced.ok()) << replaced.status().ToString();
  EXPECT_FALSE(*replaced);
  ASSERT_TRUE(sched_->PutNode(GpuNode("n2", 1), "admin").ok());
  EXPECT_EQ(sched_->GpuAllocation(), (std::vector<std::tuple<std::string, int64_t, int64_t>>{
                                         {"n1", 0, 2000}, {"n2", 0, 1000}}));

  // Cordon n1; a replacement keeps the condition, in memory and in the store.
  ASSERT_TRUE(sched_->SetNodeCondition("n1", NodeCondition::kDraining, "admin").ok());
  ASSERT_TRUE(sched_->PutNode(GpuNode("n1", 2), "admin").ok());
  Status s = store_->Read([&](const store::ReadTx& tx) -> Status {
    HF_ASSIGN_OR_RETURN(store::NodeRecord n, tx.GetNode("n1"));
    EXPECT_EQ(n.condition, NodeCondition::kDraining);
    EXPECT_EQ(n.spec.gpus.size(), 2u);
    return Status::Ok();
  });
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(sched_->SetNodeCondition("nope", NodeCondition::kDraining, "admin").code(),
            StatusCode::kNotFound);

  auto recs = sched_->Submit({GpuTask("a", 1), GpuTask("b", 1), GpuTask("c", 1)}, "alice");
  ASSERT_TRUE(recs.ok());
  sched_->Start();
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  EXPECT_TRUE(Allocations("n1").empty());
  ASSERT_EQ(Allocations("n2").size(), 1u);
  EXPECT_EQ(Allocations("n2")[0].task, recs->at(0).task.key);
  for (int i : {1, 2}) {
    const store::TaskRecord r = Get(recs->at(i).task.key);
    EXPECT_EQ(r.state, TaskState::kPending);
    EXPECT_EQ(r.pending_reason.rfind("0/2 nodes available: ", 0), 0u) << r.pending_reason;
  }

  // Uncordoned, n1 takes the two waiting tasks.
  uint64_t before = attempts_.load();
  ASSERT_TRUE(sched_->SetNodeCondition("n1", NodeCondition::kReady, "admin").ok());
  SettleAfter(before);
  EXPECT_EQ(Allocations("n1").size(), 2u);
  EXPECT_EQ(Get(recs->at(1).task.key).node, "n1");
  EXPECT_EQ(Get(recs->at(2).task.key).node, "n1");
  EXPECT_EQ(StoredGpuMilli(), MemoryGpuMilli());

  // A node with tasks cannot be deleted; nothing changes.
  Status del = sched_->DeleteNode("n2", "admin");
  EXPECT_EQ(del.code(), StatusCode::kFailedPrecondition) << del.ToString();
  EXPECT_EQ(sched_->GpuAllocation().size(), 2u);
  EXPECT_EQ(Allocations("n2").size(), 1u);

  // Once its task is cancelled, it can.
  ASSERT_TRUE(sched_->Cancel(recs->at(0).task.key, "bob").ok());
  ASSERT_TRUE(sched_->DeleteNode("n2", "admin").ok());
  EXPECT_EQ(sched_->GpuAllocation(),
            (std::vector<std::tuple<std::string, int64_t, int64_t>>{{"n1", 2000, 2000}}));
  EXPECT_EQ(sched_->DeleteNode("n2", "admin").code(), StatusCode::kNotFound);
  // The tasks on n1 survived the rebuild that deletion does.
  EXPECT_EQ(StoredGpuMilli(), MemoryGpuMilli());
}

TEST_F(SchedulerTest, DrainEvictsPreemptibleTasksToOtherNodesAndWaitsForTheRest) {
  Open(PreemptMode("off"));
  ASSERT_TRUE(sched_->PutNode(GpuNode("n1", 2), "admin").ok());
  Task keeper = GpuTask("keeper", 1);
  keeper.preemptible = false;
  const TaskKey k = SubmitOne(keeper);
  const TaskKey m = SubmitOne(GpuTask("mover", 1));
  sched_->Start();
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  ASSERT_EQ(Get(m).node, "n1");
  ASSERT_TRUE(sched_->PutNode(GpuNode("n2", 1), "admin").ok());
  const uint64_t version = sched_->NodeVersion("n1");

  auto out = sched_->Drain("n1", "admin");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->evicted, std::vector<TaskKey>{m});
  EXPECT_EQ(out->waiting, std::vector<TaskKey>{k});
  EXPECT_GT(sched_->NodeVersion("n1"), version) << "n1's agent learns its list changed";
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  // The evicted task runs elsewhere; the other stays; the store agrees.
  EXPECT_EQ(Get(m).node, "n2");
  EXPECT_EQ(Get(m).state, TaskState::kScheduled);
  EXPECT_EQ(Get(k).node, "n1");
  EXPECT_EQ(Kinds(m), (std::vector<std::string>{"submitted", "scheduled", "evicted", "scheduled"}));
  EXPECT_EQ(Events(m)[2].message, "evicted: node n1 drained by admin");
  EXPECT_EQ(StoredGpuMilli(), MemoryGpuMilli());
  EXPECT_EQ(MemoryGpuMilli(), (std::map<std::string, int64_t>{{"n1", 1000}, {"n2", 1000}}));
  Status s = store_->Read([&](const store::ReadTx& tx) -> Status {
    HF_ASSIGN_OR_RETURN(store::NodeRecord n, tx.GetNode("n1"));
    EXPECT_EQ(n.condition, NodeCondition::kDraining);
    return Status::Ok();
  });
  ASSERT_TRUE(s.ok()) << s.ToString();
  // Again: nothing left to evict.
  out = sched_->Drain("n1", "admin");
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->evicted.empty());
  EXPECT_EQ(sched_->Drain("nope", "admin").status().code(), StatusCode::kNotFound);

  // A NotReady node's agent could not stop what was evicted: refused, and
  // its tasks stay where they are.
  ASSERT_TRUE(sched_->SetNodeCondition("n2", NodeCondition::kNotReady, "test").ok());
  out = sched_->Drain("n2", "admin");
  EXPECT_EQ(out.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(out.status().message().find("NotReady"), std::string::npos) << out.status().message();
  EXPECT_EQ(Get(m).node, "n2");
  EXPECT_EQ(Get(m).state, TaskState::kScheduled);
}

TEST_F(SchedulerTest, APolicyChangeThatCannotBeStoredIsUndoneAndTheViewsHearOfIt) {
  Open();
  const size_t before = policy_changes_.load();
  const double weight = sched_->ReadPolicy(
      [](const framework::Framework& fw) { return fw.GetPlugin("binpack")->settings.weight; });
  Status s = sched_->ChangePolicy(
      [](framework::Framework& fw) {
        framework::PluginPatch p;
        p.weight = 7;
        return fw.UpdatePlugin("binpack", p);
      },
      [](const framework::Framework& fw) {
        EXPECT_EQ(fw.GetPlugin("binpack")->settings.weight, 7);
        return Unavailable("disk full");
      });
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(sched_->ReadPolicy([](const framework::Framework& fw) {
    return fw.GetPlugin("binpack")->settings.weight;
  }),
            weight);
  // Undoing configures plugins again, which may change what they show.
  EXPECT_EQ(policy_changes_.load(), before + 1);
  ASSERT_TRUE(sched_->ChangePolicy(Unchanged, Unchanged).ok());
  EXPECT_EQ(policy_changes_.load(), before + 2);
}

TEST_F(SchedulerTest, CancelIsIdempotentAndRefusesUnknownIds) {
  Open();
  ASSERT_TRUE(sched_->PutNode(GpuNode("n1", 1), "admin").ok());
  const TaskKey t = SubmitOne(GpuTask("t", 4));  // never fits
  sched_->Start();
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  ASSERT_EQ(sched_->unschedulable_count(), 1u);

  auto first = sched_->Cancel(t, "bob");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->state, TaskState::kCancelled);
  EXPECT_EQ(sched_->unschedulable_count(), 0u);
  EXPECT_EQ(sched_->active_count(), 0u);
  const size_t events = Events(t).size();

  clock_.Advance(5000);
  auto again = sched_->Cancel(t, "carol");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->state, TaskState::kCancelled);
  EXPECT_EQ(again->updated_at_ms, first->updated_at_ms);
  EXPECT_EQ(again->task.name, "t");
  EXPECT_EQ(Events(t).size(), events);
  EXPECT_EQ(Events(t).back().message, "by bob");

  auto missing = sched_->Cancel(t + 1000, "bob");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST_F(SchedulerTest, BatchSubmitIsAllOrNothing) {
  Open();
  ASSERT_TRUE(sched_->PutNode(GpuNode("n1", 4), "admin").ok());
  Task bad = GpuTask("bad", 1);
  bad.requests.cpu_milli = -5;
  Task unnamed = GpuTask("", 1);
  for (const Task& invalid : {bad, unnamed}) {
    auto r = sched_->Submit({GpuTask("ok-1", 1), invalid, GpuTask("ok-2", 1)}, "alice");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  }
  EXPECT_TRUE(AllTasks().empty());
  EXPECT_EQ(sched_->active_count(), 0u);
  EXPECT_TRUE(sched_->Snapshot().pending.empty());

  // The store was rolled back, not poisoned: the next batch goes through and
  // is scheduled.
  auto good = sched_->Submit({GpuTask("ok-1", 1), GpuTask("ok-2", 1)}, "alice");
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  sched_->Start();
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  ASSERT_EQ(AllTasks().size(), 2u);
  for (const store::TaskRecord& r : AllTasks()) EXPECT_EQ(r.state, TaskState::kScheduled);
}

TEST_F(SchedulerTest, SubmitDoesNotWaitForTheMutexAndItsTaskIsQueuedAtOnce) {
  Open();
  ASSERT_TRUE(sched_->PutNode(GpuNode("n1", 4), "admin").ok());
  sched_->Start();
  // A policy change holds the scheduler's mutex (as a cycle does through
  // its commit) until told to let go.
  std::atomic<bool> holding{false};
  std::atomic<bool> release{false};
  std::thread holder([&] {
    Status s = sched_->ChangePolicy(
        [&](framework::Framework&) {
          holding = true;
          while (!release.load()) std::this_thread::sleep_for(milliseconds(1));
          return Status::Ok();
        },
        Unchanged);
    EXPECT_TRUE(s.ok()) << s.ToString();
  });
  while (!holding.load()) std::this_thread::sleep_for(milliseconds(1));
  auto submitted = std::async(std::launch::async, [&] { return SubmitOne(GpuTask("a", 1)); });
  EXPECT_EQ(submitted.wait_for(std::chrono::seconds(3)), std::future_status::ready)
      << "Submit waited for the scheduler's mutex";
  release = true;
  holder.join();
  const TaskKey a = submitted.get();
  // Once the mutex is free the loop takes the task and places it.
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  EXPECT_EQ(Get(a).state, TaskState::kScheduled);
}

TEST_F(SchedulerTest, ASubmittedTaskIsInTheQueueAsSoonAsSubmitReturns) {
  Open();
  ASSERT_TRUE(sched_->PutNode(GpuNode("n1", 4), "admin").ok());
  const TaskKey a = SubmitOne(GpuTask("a", 1));
  // Every reader of the queue sees it, though no loop has run.
  ASSERT_EQ(sched_->Snapshot().pending.size(), 1u);
  EXPECT_EQ(sched_->Snapshot().pending[0].key, a);
  EXPECT_EQ(sched_->active_count(), 1u);
  EXPECT_EQ(sched_->QueueWaiting(std::string(kDefaultQueue), 10).size(), 1u);
  // A cancel right after its Submit: it is never queued again nor placed.
  ASSERT_TRUE(sched_->Cancel(a, "alice").ok());
  sched_->Start();
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  EXPECT_EQ(Get(a).state, TaskState::kCancelled);
  EXPECT_EQ(sched_->active_count(), 0u);
}

TEST_F(SchedulerTest, ReplacingANodeCannotDropAnAllocatedGpu) {
  Open();
  ASSERT_TRUE(sched_->PutNode(GpuNode("n1", 2), "admin").ok());
  const TaskKey id = SubmitOne(GpuTask("t", 2));
  sched_->Start();
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  ASSERT_EQ(Get(id).state, TaskState::kScheduled);

  auto r = sched_->PutNode(GpuNode("n1", 1), "admin");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
  // Neither the store nor the memory changed.
  EXPECT_EQ(sched_->GpuAllocation(),
            (std::vector<std::tuple<std::string, int64_t, int64_t>>{{"n1", 2000, 2000}}));
  Status s = store_->Read([&](const store::ReadTx& tx) -> Status {
    HF_ASSIGN_OR_RETURN(store::NodeRecord n, tx.GetNode("n1"));
    EXPECT_EQ(n.spec.gpus.size(), 2u);
    return Status::Ok();
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(AllocOf(id)->gpus.size(), 2u);
}

// BUG (reported, not fixed here): replacing a node's spec with less CPU than
// its tasks hold is accepted by the store (only GPU rows are checked there),
// and the scheduler's rebuild then fails on the stored allocation: PutNode
// returns Internal after committing the new spec, and every later Recover
// over the file fails, so the server cannot start again. Expected: the
// replacement is refused (FailedPrecondition) and nothing changes.
TEST_F(SchedulerTest, ReplacingANodeBelowItsAllocationsIsRefused) {
  Open();
  ASSERT_TRUE(sched_->PutNode(Node("n1", 8000, 65536, 1), "admin").ok());
  Task t = GpuTask("t", 1);
  t.requests.cpu_milli = 6000;
  const TaskKey id = SubmitOne(t);
  sched_->Start();
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  ASSERT_EQ(Get(id).state, TaskState::kScheduled);

  auto r = sched_->PutNode(Node("n1", 2000, 65536, 1), "admin");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
  // The stored spec is unchanged and a restart still recovers.
  Status s = store_->Read([&](const store::ReadTx& tx) -> Status {
    HF_ASSIGN_OR_RETURN(store::NodeRecord n, tx.GetNode("n1"));
    EXPECT_EQ(n.spec.cpu_milli, 8000);
    return Status::Ok();
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  Close();
  Open();
}

// ---- Queues (docs/QUEUES.md) ----

class QueuesTest : public SchedulerTest {
 protected:
  void PutQueue(const std::string& spec) {
    Result<queues::QueueSpec> s = queues::QueueSpecFromJson(json::parse(spec));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    Result<queues::QueueSpec> put = sched_->PutQueue(*s, true, "admin");
    ASSERT_TRUE(put.ok()) << put.status().ToString();
  }
  Task In(const std::string& queue, const std::string& name, int gpus = 1) {
    Task t = GpuTask(name, gpus);
    t.queue = queue;
    return t;
  }
  std::vector<TaskKey> SubmitMany(const std::string& queue, int n) {
    std::vector<Task> tasks;
    for (int i = 0; i < n; ++i) tasks.push_back(In(queue, queue + "-" + std::to_string(i)));
    auto r = sched_->Submit(tasks, "alice");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::vector<TaskKey> keys;
    if (r.ok()) {
      for (const auto& rec : *r) keys.push_back(rec.task.key);
    }
    return keys;
  }
  size_t CountIn(const std::vector<TaskKey>& keys, TaskState state) {
    size_t n = 0;
    for (TaskKey k : keys) n += Get(k).state == state;
    return n;
  }
};

TEST_F(QueuesTest, AGuaranteedQueueReclaimsWhatAnotherBorrowed) {
  Open(PreemptMode("scheduled"));
  ASSERT_TRUE(sched_->PutNode(GpuNode("n1", 8), "admin").ok());
  ASSERT_TRUE(sched_->PutNode(GpuNode("n2", 8), "admin").ok());
  PutQueue(R"({"name": "team-a", "guaranteed": {"gpu": {"A100": 8}}})");
  PutQueue(R"({"name": "team-b", "guaranteed": {"gpu": {"A100": 8}}})");
  sched_->Start();
  // B is idle: A takes all 16 GPUs, 8 of them borrowed.
  const std::vector<TaskKey> a = SubmitMany("team-a", 16);
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  ASSERT_EQ(CountIn(a, TaskState::kScheduled), 16u);
  // B asks for its guarantee back: 8 of A's tasks go, whatever the preempt
  // mode's own rule about priorities (all are 0 here).
  const std::vector<TaskKey> b = SubmitMany("team-b", 8);
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  EXPECT_EQ(CountIn(b, TaskState::kScheduled), 8u);
  EXPECT_EQ(CountIn(a, TaskState::kScheduled), 8u);
  EXPECT_EQ(CountIn(a, TaskState::kPending), 8u);
  EXPECT_EQ(preemptions_.load(), 8u);
  // The victims are A's most recently admitted tasks, and say why.
  for (size_t i = 0; i < a.size(); ++i) {
    const store::TaskRecord r = Get(a[i]);
    EXPECT_EQ(r.state, i < 8 ? TaskState::kScheduled : TaskState::kPending) << i;
    if (r.state != TaskState::kPending) continue;
    // Tried again since, it waits for room; its events keep the reclaim.
    const std::vector<store::TaskEvent> events = Events(a[i]);
    auto e = std::find_if(events.begin(), events.end(),
                          [](const store::TaskEvent& e) { return e.kind == "reclaimed"; });
    ASSERT_NE(e, events.end()) << i;
    EXPECT_NE(e->message.find("reclaimed by queue team-b for task "), std::string::npos)
        << e->message;
    EXPECT_NE(e->message.find("queue team-a borrowed it"), std::string::npos) << e->message;
  }
  // Both queues' views tell of the reclaims, and A now holds its guarantee.
  const Scheduler::QueuesView v = sched_->Queues();
  size_t reclaims = 0;
  for (const json& e : v.events)
    reclaims += e["action"] == "reclaimed" && e["queue"] == "team-a" && e["by_queue"] == "team-b";
  EXPECT_EQ(reclaims, 8u);
  for (const auto& q : v.queues) {
    if (q.spec.name == "team-a" || q.spec.name == "team-b") {
      EXPECT_EQ(q.used.gpu_milli[0], 8000) << q.spec.name;
      EXPECT_EQ(q.borrowed.gpu_milli[0], 0) << q.spec.name;
    }
  }
  // A's waiting tasks may not take B's guarantee back: nothing moves.
  const size_t before = preemptions_.load();
  ASSERT_TRUE(sched_->ChangePolicy(Unchanged, Unchanged).ok());
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  EXPECT_EQ(preemptions_.load(), before);
}

TEST_F(QueuesTest, PriorityPreemptsOnlyWithinItsOwnQueue) {
  Open(PreemptMode("scheduled"));
  ASSERT_TRUE(sched_->PutNode(GpuNode("n1", 2), "admin").ok());
  PutQueue(R"({"name": "team-a"})");
  PutQueue(R"({"name": "team-b"})");
  sched_->Start();
  const TaskKey low_a = SubmitOne(In("team-a", "low-a"));
  const TaskKey low_b = SubmitOne(In("team-b", "low-b"));
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  Task high = In("team-a", "high-a");
  high.priority = 10;
  const TaskKey h = SubmitOne(high);
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  EXPECT_EQ(Get(h).state, TaskState::kScheduled);
  EXPECT_EQ(Get(low_a).state, TaskState::kPending);    // its own queue's
  EXPECT_EQ(Get(low_b).state, TaskState::kScheduled);  // another queue's: untouched
}

TEST_F(QueuesTest, FairShareSplitsByWeight) {
  Open(PreemptMode("off"));
  ASSERT_TRUE(sched_->PutNode(GpuNode("n1", 4), "admin").ok());
  PutQueue(R"({"name": "x", "weight": 1})");
  PutQueue(R"({"name": "y", "weight": 3})");
  const std::vector<TaskKey> x = SubmitMany("x", 8);
  const std::vector<TaskKey> y = SubmitMany("y", 8);
  sched_->Start();
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  EXPECT_EQ(CountIn(x, TaskState::kScheduled), 1u);
  EXPECT_EQ(CountIn(y, TaskState::kScheduled), 3u);
}

TEST_F(QueuesTest, MaxHoldsAndAGangIsAdmittedWhole) {
  Open();
  ASSERT_TRUE(sched_->PutNode(GpuNode("n1", 8), "admin").ok());
  PutQueue(R"({"name": "capped", "max": {"gpu": {"A100": 3}}})");
  sched_->Start();
  const std::vector<TaskKey> t = SubmitMany("capped", 5);
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  EXPECT_EQ(CountIn(t, TaskState::kScheduled), 3u);
  const store::TaskRecord waiting = Get(t[4]);
  EXPECT_EQ(waiting.pending_reason, "queue capped: over its max gpu A100 (holds 3 of 3, asks 1)");
  // Every one, whatever its state: a cancel frees room a waiting one may
  // take before its own cancel.
  for (TaskKey k : t) ASSERT_TRUE(sched_->Cancel(k, "alice").ok());
  // A gang of 4 does not fit under a max of 3, though 3 of it would.
  Result<JobSpec> spec = JobSpecFromJson(json::parse(R"({"name": "g", "queue": "capped",
      "roles": [{"name": "w", "replicas": 4, "requests": {"gpu": 1}}]})"));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  Result<store::JobRecord> job = sched_->SubmitJob(*spec, "alice");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  size_t placed = 0;
  for (const store::TaskRecord& r : AllTasks()) {
    if (r.task.job.id != job->id) continue;
    placed += r.state == TaskState::kScheduled;
    EXPECT_EQ(r.pending_reason, "queue capped: over its max gpu A100 (holds 0 of 3, asks 4)");
  }
  EXPECT_EQ(placed, 0u);
}

TEST_F(QueuesTest, TreeChangesAreCheckedStoredAndRefusedWhileWorkRemains) {
  Open();
  ASSERT_TRUE(sched_->PutNode(GpuNode("n1", 2), "admin").ok());
  Result<queues::QueueSpec> s = queues::QueueSpecFromJson(
      json::parse(R"({"name": "a", "guaranteed": {"gpu": {"H100": 1}}})"));
  ASSERT_TRUE(s.ok());
  Result<queues::QueueSpec> put = sched_->PutQueue(*s, true, "admin");
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.status().message(),
            "queues.a.guaranteed.gpu.H100: no node has GPU model \"H100\" (the cluster has A100)");
  PutQueue(R"({"name": "a"})");
  EXPECT_EQ(
      sched_->PutQueue(*queues::QueueSpecFromJson(json::parse(R"({"name": "a"})")), true, "admin")
          .status()
          .code(),
      StatusCode::kAlreadyExists);
  // Submitting to a queue that does not exist, or is not a leaf.
  auto r = sched_->Submit({In("nowhere", "t")}, "alice");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "queue: no queue named \"nowhere\" (GET /api/v1/queues)");
  const TaskKey k = SubmitOne(In("a", "t"));
  // A queue with work can neither be deleted nor take children.
  EXPECT_EQ(sched_->DeleteQueue("a", "admin").code(), StatusCode::kConflict);
  EXPECT_EQ(
      sched_
          ->PutQueue(*queues::QueueSpecFromJson(json::parse(R"({"name": "c", "parent": "a"})")),
                     true, "admin")
          .status()
          .code(),
      StatusCode::kConflict);
  EXPECT_EQ(sched_->DeleteQueue("default", "admin").code(), StatusCode::kConflict);
  ASSERT_TRUE(sched_->Cancel(k, "alice").ok());
  // Cancelled work is gone from the queue; the tree survives a restart.
  PutQueue(R"({"name": "b", "weight": 4})");
  Close();
  Open();
  bool found = false;
  for (const auto& q : sched_->Queues().queues) {
    if (q.spec.name == "b") {
      found = true;
      EXPECT_EQ(q.spec.weight, 4);
    }
  }
  EXPECT_TRUE(found);
  EXPECT_TRUE(sched_->DeleteQueue("a", "admin").ok());
  EXPECT_EQ(sched_->DeleteQueue("a", "admin").code(), StatusCode::kNotFound);
}

TEST_F(QueuesTest, BackfillHoldsRoomForTheFirstWaitingTaskUntilItsStart) {
  Open(PreemptMode("off"));
  ASSERT_TRUE(sched_->PutNode(GpuNode("n1", 4), "admin").ok());
  sched_->Start();
  // Four 1-GPU tasks with a 600 s limit fill the node.
  for (int i = 0; i < 4; ++i) {
    Task t = GpuTask("small-" + std::to_string(i), 1);
    t.time_limit_s = 600;
    SubmitOne(t);
  }
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  // The 4-GPU task waits: its room is held from when the four reach their limit.
  const TaskKey big = SubmitOne(GpuTask("big", 4, 5));
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  const std::optional<Scheduler::ReservationView> r = sched_->CurrentReservation();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->task, big);
  EXPECT_EQ(r->start_ms, clock_.NowMs() + 600'000);
  ASSERT_EQ(r->nodes.size(), 1u);
  EXPECT_EQ(r->nodes[0].first, "n1");
  const auto kinds = Kinds(big);
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "reserved"), kinds.end());
  // A task without a limit, or one ending after the start, may not take the
  // held room when one frees; one that ends before the start may.
  Task endless = GpuTask("endless", 1);
  const TaskKey e = SubmitOne(endless);
  Task late = GpuTask("late", 1);
  late.time_limit_s = 900;
  const TaskKey l = SubmitOne(late);
  Task quick = GpuTask("quick", 1);
  quick.time_limit_s = 60;
  const TaskKey q = SubmitOne(quick);
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  const uint64_t before = attempts_.load();
  ASSERT_TRUE(sched_->Cancel(1, "alice").ok());  // one small task ends early
  SettleAfter(before);
  EXPECT_EQ(Get(q).state, TaskState::kScheduled);
  EXPECT_EQ(Get(e).state, TaskState::kPending);
  EXPECT_EQ(Get(l).state, TaskState::kPending);
  EXPECT_NE(Get(e).pending_reason.find("room held for a reservation"), std::string::npos)
      << Get(e).pending_reason;
  // Once every small task is gone, the big one starts and the hold ends.
  for (TaskKey k : {TaskKey{2}, TaskKey{3}, TaskKey{4}, q})
    ASSERT_TRUE(sched_->Cancel(k, "alice").ok());
  ASSERT_TRUE(sched_->WaitIdle(kWait));
  for (int i = 0; i < 100 && Get(big).state != TaskState::kScheduled; ++i) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(Get(big).state, TaskState::kScheduled);
  EXPECT_FALSE(sched_->CurrentReservation().has_value());
}

}  // namespace
}  // namespace hf::scheduler
