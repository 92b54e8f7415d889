#include <gtest/gtest.h>

#include <bit>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/cluster_state.h"
#include "core/testing/nodes.h"
#include "queues/backfill.h"
#include "queues/ledger.h"
#include "queues/queue_tree.h"

namespace hf::queues {
namespace {

using hf::testing::MakeTask;
using hf::testing::Node;
using nlohmann::json;

QueueSpec Spec(const std::string& j) {
  Result<QueueSpec> s = QueueSpecFromJson(json::parse(j));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? *s : QueueSpec{};
}

std::string BuildError(std::vector<QueueSpec> specs) {
  Result<QueueTree> t = QueueTree::Build(std::move(specs));
  return t.ok() ? "" : t.status().message();
}

TEST(QueueSpecTest, ReadsEveryFieldAndWritesItBack) {
  const json j = json::parse(R"({"name": "team-a", "parent": "research", "weight": 2.5,
    "guaranteed": {"gpu": {"A100-80G": 32, "*": 8}, "cpu_milli": 64000, "memory_mib": 4096},
    "max": {"gpu": {"A100-80G": 48}},
    "submitters": {"roles": ["operator"], "tokens": ["team-a-ci"]}})");
  Result<QueueSpec> s = QueueSpecFromJson(j);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->parent, "research");
  EXPECT_EQ(s->weight, 2.5);
  EXPECT_EQ(s->guaranteed.Gpu("A100-80G"), 32000);
  EXPECT_EQ(s->guaranteed.Gpu("T4"), 8000);   // "*": every model not named
  EXPECT_EQ(s->max.Gpu("T4"), std::nullopt);  // no limit
  EXPECT_EQ(s->guaranteed.cpu_milli, 64000);
  EXPECT_EQ(s->roles, std::vector<std::string>{"operator"});
  Result<QueueSpec> back = QueueSpecFromJson(QueueSpecToJson(*s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, *s);
  EXPECT_EQ(GpuModelsNamed(*s), std::vector<std::string>{"A100-80G"});
}

TEST(QueueSpecTest, BadFieldsAreNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"parent": "root"})", "queue.name is required"},
      {R"({"name": "Team A"})", "queue.name"},
      {R"({"name": "a", "weight": 0})", "queues.a.weight must be > 0"},
      {R"({"name": "a", "weight": "2"})", "queues.a.weight must be a number"},
      {R"({"name": "a", "guaranteed": {"gpu": {"A100": -1}}})",
       "queues.a.guaranteed.gpu.A100 must be >= 0"},
      {R"({"name": "a", "max": {"gpu": {"A100": 1.5}}})",
       "queues.a.max.gpu.A100 must be an integer"},
      {R"({"name": "a", "max": {"cpu_milli": -5}})", "queues.a.max.cpu_milli must be >= 0"},
      {R"({"name": "a", "max": {"gpus": {}}})", "queues.a.max.gpus"},
      {R"({"name": "a", "max": []})", "queues.a.max must be an object"},
      {R"({"name": "a", "submitters": {"roles": "operator"}})", "queues.a.submitters.roles"},
      {R"({"name": "a", "colour": "red"})", "queues.a.colour"},
  };
  for (const auto& [body, want] : cases) {
    Result<QueueSpec> s = QueueSpecFromJson(json::parse(body));
    ASSERT_FALSE(s.ok()) << body;
    EXPECT_NE(s.status().message().find(want), std::string::npos)
        << body << " -> " << s.status().message();
  }
}

TEST(QueueTreeTest, RootAndDefaultAreAlwaysThere) {
  QueueTree t;
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t.spec(0).name, "root");
  EXPECT_NE(t.Find("default"), QueueTree::kNone);
  EXPECT_TRUE(t.trivial());
  Result<QueueTree> two = QueueTree::Build({Spec(R"({"name": "a"})")});
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->size(), 3u);
  EXPECT_FALSE(two->trivial());  // two leaves: fair share decides
  EXPECT_EQ(two->parent(two->Find("a")), 0u);
}

TEST(QueueTreeTest, BadTreesAreRefusedNamingTheQueue) {
  EXPECT_EQ(BuildError({Spec(R"({"name": "a", "parent": "nowhere"})")}),
            "queues.a.parent: no queue named \"nowhere\"");
  EXPECT_NE(
      BuildError({Spec(R"({"name": "a", "parent": "b"})"), Spec(R"({"name": "b", "parent": "a"})")})
          .find("queues.a.parent makes a cycle"),
      std::string::npos);
  EXPECT_EQ(BuildError({Spec(R"({"name": "a", "guaranteed": {"gpu": {"A100": 8}},
                                  "max": {"gpu": {"A100": 4}}})")}),
            "queues.a.max.gpu.A100: 4 is below guaranteed 8");
  // "*" in the guarantee against a named model's max.
  EXPECT_EQ(BuildError({Spec(R"({"name": "a", "guaranteed": {"gpu": {"*": 8}},
                                  "max": {"gpu": {"T4": 2}}})")}),
            "queues.a.max.gpu.T4: 2 is below guaranteed 8");
  EXPECT_EQ(
      BuildError({Spec(R"({"name": "p", "guaranteed": {"gpu": {"A100": 8}}})"),
                  Spec(R"({"name": "c1", "parent": "p", "guaranteed": {"gpu": {"A100": 6}}})"),
                  Spec(R"({"name": "c2", "parent": "p", "guaranteed": {"gpu": {"A100": 4}}})")}),
      "queues.p.guaranteed.gpu.A100: its children are guaranteed 10 GPUs, more than its 8");
  EXPECT_EQ(BuildError({Spec(R"({"name": "a"})"), Spec(R"({"name": "a"})")}),
            "queues.a is given twice");
  EXPECT_NE(BuildError({Spec(R"({"name": "root", "max": {"cpu_milli": 1}})")}).find("no quota"),
            std::string::npos);
  EXPECT_EQ(
      BuildError({Spec(R"({"name": "p", "guaranteed": {"gpu": {"A100": 8}}})"),
                  Spec(R"({"name": "c1", "parent": "p", "guaranteed": {"gpu": {"A100": 6}}})")}),
      "");
}

// Two 8-GPU A100 nodes and one 4-GPU T4 node, and placed tasks per queue.
class LedgerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cluster_.AddNode(Node("a1", 64000, 512 * 1024, 8, "A100")).ok());
    ASSERT_TRUE(cluster_.AddNode(Node("a2", 64000, 512 * 1024, 8, "A100")).ok());
    ASSERT_TRUE(cluster_.AddNode(Node("t1", 64000, 512 * 1024, 4, "T4")).ok());
  }
  // Places `gpus` whole GPUs of node `node` for a task of `queue`.
  void Place(const std::string& queue, const std::string& node, int gpus) {
    Task t = MakeTask(++key_, 1000, 1024, gpus);
    t.queue = queue;
    const NodeId n = cluster_.FindNode(node);
    Allocation a;
    a.node = n;
    a.cpu_milli = 1000;
    a.memory_mib = 1024;
    const auto free = cluster_.gpu_free_milli(n);
    for (size_t i = 0; i < free.size() && int(a.gpus.size()) < gpus; ++i) {
      if (free[i] == kWholeGpuMilli) a.gpus.push_back({cluster_.spec(n).gpus[i].index, 1000, 0});
    }
    ASSERT_TRUE(cluster_.Bind(t, a).ok());
  }
  ClusterState::ModelMask Bit(const std::string& model) const { return cluster_.MaskOf({model}); }

  ClusterState cluster_;
  TaskKey key_ = 0;
};

TEST_F(LedgerTest, AdmissionHoldsEveryAncestorsMaxPerModelAndKnowsTheGuarantee) {
  Result<QueueTree> t = QueueTree::Build(
      {Spec(R"({"name": "org", "guaranteed": {"gpu": {"A100": 8}}, "max": {"gpu": {"A100": 10}}})"),
       Spec(R"({"name": "a", "parent": "org", "guaranteed": {"gpu": {"A100": 4}}})"),
       Spec(R"({"name": "b", "parent": "org", "guaranteed": {"gpu": {"A100": 4}}})")});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  Place("a", "a1", 4);
  Place("b", "a1", 4);
  Ledger l;
  l.Compute(*t, cluster_);
  EXPECT_EQ(l.used(t->Find("org")).gpu_milli[0], 8000);
  EXPECT_EQ(l.used(0).gpu_milli[0], 8000);  // root sums everything
  Demand two;
  two.gpu_milli = 2000;
  // a is at its guarantee: 2 more A100s borrow; org's max of 10 still holds.
  Admission adm = l.Admit(t->Find("a"), two, ClusterState::kAnyModel);
  EXPECT_EQ(adm.admitted, Bit("A100") | Bit("T4"));
  EXPECT_EQ(adm.guaranteed, 0u);
  // 3 more would take org to 11 A100s: only T4 is admitted.
  Demand three;
  three.gpu_milli = 3000;
  adm = l.Admit(t->Find("a"), three, ClusterState::kAnyModel);
  EXPECT_EQ(adm.admitted, Bit("T4"));
  adm = l.Admit(t->Find("a"), three, Bit("A100"));
  EXPECT_EQ(adm.admitted, 0u);
  EXPECT_EQ(adm.reason, "queue org: over its max gpu A100 (holds 8 of 10, asks 3)");
  // The default queue is guaranteed nothing: a CPU-only task borrows.
  Demand cpu;
  cpu.cpu_milli = 500;
  adm = l.Admit(t->Find("default"), cpu, ClusterState::kAnyModel);
  EXPECT_EQ(adm.admitted, ClusterState::kAnyModel);
  EXPECT_EQ(adm.guaranteed, 0u);
}

TEST_F(LedgerTest, BorrowedIsWhatAQueueHoldsAboveItsGuarantee) {
  Result<QueueTree> t =
      QueueTree::Build({Spec(R"({"name": "a", "guaranteed": {"gpu": {"A100": 8}}})"),
                        Spec(R"({"name": "b", "guaranteed": {"gpu": {"A100": 8}}})")});
  ASSERT_TRUE(t.ok());
  Place("a", "a1", 8);
  Place("a", "a2", 4);
  Ledger l;
  l.Compute(*t, cluster_);
  EXPECT_EQ(l.Borrowed(t->Find("a")).gpu_milli[0], 4000);
  EXPECT_EQ(l.Borrowed(t->Find("b")).gpu_milli[0], 0);
  Demand one;
  one.gpu_milli = 1000;
  // b is within its guarantee on A100 (it may reclaim there), not on T4.
  const Admission adm = l.Admit(t->Find("b"), one, ClusterState::kAnyModel);
  EXPECT_EQ(adm.guaranteed, Bit("A100"));
  // a holds 12 of 20 GPUs: its dominant share is 0.6, 0.2 beyond its guarantee.
  EXPECT_DOUBLE_EQ(l.Share(t->Find("a")), 12.0 / 16.0);
  EXPECT_DOUBLE_EQ(l.BeyondShare(t->Find("a")), 4.0 / 16.0);
}

TEST_F(LedgerTest, FairShareGoesToTheLowestShareOverWeightLevelByLevel) {
  Result<QueueTree> t = QueueTree::Build(
      {Spec(R"({"name": "x", "weight": 1})"), Spec(R"({"name": "y", "weight": 3})"),
       Spec(R"({"name": "y1", "parent": "y"})"), Spec(R"({"name": "y2", "parent": "y"})")});
  ASSERT_TRUE(t.ok());
  const size_t x = t->Find("x"), y1 = t->Find("y1"), y2 = t->Find("y2");
  Ledger l;
  l.Compute(*t, cluster_);
  // Nothing placed: ties go by name.
  EXPECT_EQ(l.PickFair({x, y1, y2}), x);
  Place("x", "a1", 2);  // x: 2/16 A100s over weight 1
  l.Compute(*t, cluster_);
  EXPECT_EQ(l.PickFair({x, y1, y2}), y1);
  Place("y1", "a1", 4);  // y: 4/16 over 3 = 1/12, below x's 1/8
  l.Compute(*t, cluster_);
  EXPECT_EQ(l.PickFair({x, y1, y2}), y2);  // within y, y2 holds nothing
  Place("y2", "a2", 4);                    // y: 8/16 over 3 = 1/6, above x's 1/8
  l.Compute(*t, cluster_);
  EXPECT_EQ(l.PickFair({x, y1, y2}), x);
  EXPECT_EQ(l.PickFair({y1, y2}), y1);  // 4 each: by name
  EXPECT_EQ(l.PickFair({}), QueueTree::kNone);
}

TEST_F(LedgerTest, UsageFollowsReleaseAndModelOfEachGpu) {
  Result<QueueTree> t = QueueTree::Build({Spec(R"({"name": "a"})")});
  ASSERT_TRUE(t.ok());
  Place("a", "t1", 2);
  Place("a", "a1", 1);
  const uint32_t id = cluster_.QueueId("a");
  ASSERT_NE(id, ClusterState::kNoQueue);
  Ledger l;
  l.Compute(*t, cluster_);
  EXPECT_EQ(l.used(t->Find("a")).gpu_milli[std::countr_zero(Bit("T4"))], 2000);
  EXPECT_EQ(l.used(t->Find("a")).gpu_milli[std::countr_zero(Bit("A100"))], 1000);
  EXPECT_EQ(l.used(t->Find("a")).cpu_milli, 2000);
  ASSERT_TRUE(cluster_.Release(1).ok());
  l.Compute(*t, cluster_);
  EXPECT_EQ(l.used(t->Find("a")).gpu_milli[std::countr_zero(Bit("T4"))], 0);
  EXPECT_EQ(cluster_.queue_usage(id).cpu_milli, 1000);
}

}  // namespace
}  // namespace hf::queues

namespace hf::queues {
namespace {

// Backfill's plan on LedgerTest's cluster: each placed task ends at the
// time `ends` gives its key.
class BackfillTest : public LedgerTest {
 protected:
  std::optional<Reservation> Plan(int gpus, int32_t need) {
    Task t = MakeTask(1000, 1000, 1024, gpus);
    t.requests.gpu_models = {"A100"};
    return PlanReservation(cluster_, t, t.requests, need, 0, [&](const PlacedTask& p) {
      auto it = ends_.find(p.key);
      return it == ends_.end() ? INT64_MAX : it->second;
    });
  }
  std::map<TaskKey, int64_t> ends_;
};

TEST_F(BackfillTest, HoldsRoomFromWhenEnoughEndsAndOnlyForWhatCannotWait) {
  Place("a", "a1", 4);  // key 1
  Place("a", "a1", 4);  // key 2
  Place("a", "a2", 4);  // key 3
  Place("a", "a2", 4);  // key 4
  ends_ = {{1, 100}, {2, 200}, {3, 150}, {4, 400}};
  // 8 GPUs on one node: a1 is whole again at 200.
  std::optional<Reservation> r = Plan(8, 1);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->start_ms, 200);
  ASSERT_EQ(r->holds.size(), 1u);
  EXPECT_EQ(r->holds[0].node, cluster_.FindNode("a1"));
  // Two members of 8: both nodes, from 400.
  r = Plan(8, 2);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->start_ms, 400);
  EXPECT_EQ(r->holds.size(), 2u);
  // 4 GPUs: a placed task of 4 makes room by its own end, whatever takes
  // the room free by then: no reservation is due.
  EXPECT_FALSE(Plan(4, 1).has_value());
  // Without limits nothing is known to end: no reservation.
  ends_.clear();
  EXPECT_FALSE(Plan(8, 1).has_value());
}

TEST_F(BackfillTest, HeldRoomGoesOnlyToWhatEndsBeforeTheStartOrLeavesItsRoom) {
  Place("a", "a1", 4);  // key 1
  Place("a", "a1", 2);  // key 2: 2 free on a1
  Place("a", "a2", 8);  // key 3: no limit, never ends
  ends_ = {{1, 100}, {2, 100}};
  std::optional<Reservation> r = Plan(8, 1);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->start_ms, 100);
  ASSERT_EQ(r->holds.size(), 1u);
  Requests one;
  one.gpu = 1;
  one.gpu_milli = 1000;
  std::vector<NodeId> out;
  HeldAgainst(*r, one, 50, out);  // gone before the start
  EXPECT_TRUE(out.empty());
  HeldAgainst(*r, one, 150, out);  // still there at the start: a1 is held
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], cluster_.FindNode("a1"));
  // Once something ending later is placed there, the hold has less room.
  Allocation a;
  a.node = cluster_.FindNode("a1");
  a.gpus = {{0, 1000, 0}};
  Charge(*r, a, 1000);
  EXPECT_EQ(r->holds[0].gpu_slots, 7);
}

}  // namespace
}  // namespace hf::queues
