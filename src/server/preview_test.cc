#include "server/preview.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/testing/nodes.h"
#include "framework/registry.h"

namespace hf::server {

using scheduler::ClusterSnapshot;

namespace {

using hf::testing::AllocFor;
using hf::testing::MakeTask;
using hf::testing::Node;
using nlohmann::json;

const framework::Registry& Registry() { return hf::plugins::InTreeRegistry(); }

json GpuTaskJson(const std::string& name, int gpus) {
  return {{"name", name}, {"requests", {{"cpu_milli", 1000}, {"memory_mib", 1024}, {"gpu", gpus}}}};
}

json SmallTaskJson(const std::string& name) {
  return {{"name", name}, {"requests", {{"cpu_milli", 10}, {"memory_mib", 10}}}};
}

// Three 4-GPU nodes; n1 holds 2 GPUs, n2 one, n3 none. The default policy
// (binpack on, spread off).
ClusterSnapshot ThreeNodes() {
  ClusterSnapshot snap;
  for (const char* name : {"n1", "n2", "n3"}) {
    EXPECT_TRUE(snap.cluster.AddNode(Node(name, 64000, 512 * 1024, 4)).ok());
  }
  const Task a = MakeTask(1, 1000, 1024, 2);
  const Task b = MakeTask(2, 1000, 1024, 1);
  EXPECT_TRUE(snap.cluster.Bind(a, AllocFor(a, 0, {{0, 1000, 0}, {1, 1000, 0}})).ok());
  EXPECT_TRUE(snap.cluster.Bind(b, AllocFor(b, 1, {{0, 1000, 0}})).ok());
  return snap;
}

Result<json> Preview(const json& body, const ClusterSnapshot& snap) {
  HF_ASSIGN_OR_RETURN(PreviewRequest req, ParsePreviewRequest(body));
  ManualClock clock(1'700'000'000'000);
  return RunPreview(req, snap, Registry(), &clock);
}

const json kSwitchToSpread = {{"binpack", {{"enabled", false}}}, {"spread", {{"enabled", true}}}};

TEST(PreviewParseTest, AcceptsAFullRequest) {
  auto r = ParsePreviewRequest({{"plugins", kSwitchToSpread},
                                {"scheduler", {{"load_threshold", 0.5}}},
                                {"tasks", {GpuTaskJson("a", 1), GpuTaskJson("b", 2)}},
                                {"explain", false}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->plugins.size(), 2u);
  EXPECT_EQ(r->plugins.at("binpack").enabled, false);
  EXPECT_EQ(r->plugins.at("spread").enabled, true);
  ASSERT_TRUE(r->scheduler.has_value());
  EXPECT_EQ(r->scheduler->load_threshold, 0.5);
  ASSERT_TRUE(r->tasks.has_value());
  ASSERT_EQ(r->tasks->size(), 2u);
  EXPECT_EQ((*r->tasks)[1].name, "b");
  EXPECT_EQ((*r->tasks)[1].requests.gpu, 2);
  // Request tasks get keys of their own, distinct and far above row ids.
  EXPECT_NE((*r->tasks)[0].key, (*r->tasks)[1].key);
  EXPECT_GT((*r->tasks)[0].key, TaskKey{1} << 40);
  EXPECT_FALSE(r->explain);

  auto empty = ParsePreviewRequest(json::object());
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->plugins.empty());
  EXPECT_FALSE(empty->tasks.has_value());
  EXPECT_TRUE(empty->explain);
}

TEST(PreviewParseTest, ErrorsNameTheField) {
  json too_many = json::array();
  for (size_t i = 0; i <= kMaxPreviewTasks; ++i) too_many.push_back(SmallTaskJson("t"));
  struct Row {
    const char* name;
    json body;
    std::vector<std::string> want;  // every one must be in the message
  } rows[] = {
      {"not an object", json::array(), {"object"}},
      {"unknown key", {{"plugin", json::object()}}, {"unknown field \"plugin\""}},
      {"plugins not an object", {{"plugins", json::array()}}, {"plugins must be an object"}},
      {"weight wrong type", {{"plugins", {{"binpack", {{"weight", "heavy"}}}}}},
       {"plugins.binpack", "weight", "must be a number"}},
      {"unknown plugin key", {{"plugins", {{"spread", {{"enabeld", true}}}}}},
       {"plugins.spread", "enabeld"}},
      {"gpu wrong type",
       {{"tasks", {GpuTaskJson("a", 1), {{"name", "b"}, {"requests", {{"gpu", "two"}}}}}}},
       {"tasks[1].requests.gpu"}},
      {"task without name", {{"tasks", {GpuTaskJson("a", 1), json::object()}}}, {"tasks[1].name"}},
      {"tasks not an array", {{"tasks", json::object()}}, {"tasks must be an array"}},
      {"too many tasks", {{"tasks", too_many}}, {"tasks", "at most 1000"}},
      {"explain wrong type", {{"explain", "yes"}}, {"explain must be a boolean"}},
      {"unknown workload", {{"workload", "all"}}, {"workload must be \"pending\" or \"cluster\""}},
      {"workload not a string", {{"workload", 1}}, {"workload must be"}},
      {"tasks and workload", {{"tasks", {GpuTaskJson("a", 1)}}, {"workload", "cluster"}},
       {"either tasks or workload"}},
      {"threshold out of range", {{"scheduler", {{"load_threshold", 2}}}},
       {"scheduler", "load_threshold"}},
  };
  for (const Row& r : rows) {
    auto p = ParsePreviewRequest(r.body);
    ASSERT_FALSE(p.ok()) << r.name;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument) << r.name;
    for (const std::string& w : r.want) {
      EXPECT_NE(p.status().message().find(w), std::string::npos)
          << r.name << ": \"" << w << "\" not in: " << p.status().message();
    }
  }
  // Exactly kMaxPreviewTasks is fine.
  too_many.erase(too_many.begin());
  EXPECT_TRUE(ParsePreviewRequest({{"tasks", too_many}}).ok());
}

// BUG (reported, not fixed here): preview.h promises errors that name the
// field by its path, "plugins.binpack.weight", as every other parser of the
// API does (json_fields::Prefixed joins with '.'); preview.cc's own Prefixed
// joins with ": ", giving "plugins.binpack: weight must be a number, got
// string" (and "scheduler: load_threshold must be ...").
TEST(PreviewParseTest, PluginErrorsNameTheFieldByItsPath) {
  auto p = ParsePreviewRequest({{"plugins", {{"binpack", {{"weight", "heavy"}}}}}});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("plugins.binpack.weight"), std::string::npos)
      << p.status().message();
  auto s = ParsePreviewRequest({{"scheduler", {{"load_threshold", 2}}}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("scheduler.load_threshold"), std::string::npos)
      << s.status().message();
}

TEST(PreviewTest, SpreadCandidateMovesTasksOffTheFullestNode) {
  const ClusterSnapshot snap = ThreeNodes();
  std::vector<int64_t> used_before;
  for (NodeId n = 0; n < snap.cluster.node_count(); ++n) {
    used_before.push_back(snap.cluster.used_gpu_milli(n));
  }
  const size_t placed_before = snap.cluster.placed_count();

  auto out = Preview({{"plugins", kSwitchToSpread},
                      {"tasks", {GpuTaskJson("p0", 1), GpuTaskJson("p1", 1)}}},
                     snap);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const json& j = *out;

  // Binpack fills n1 (2 of 4 GPUs used); spread keeps away from it.
  ASSERT_EQ(j["tasks"].size(), 2u);
  for (const json& row : j["tasks"]) {
    EXPECT_FALSE(row.contains("id")) << "request tasks have no id";
    EXPECT_EQ(row["current"]["node"], "n1") << row.dump();
    ASSERT_TRUE(row["candidate"]["node"].is_string()) << row.dump();
    EXPECT_NE(row["candidate"]["node"], "n1") << row.dump();
    EXPECT_EQ(row["moved"], true);
    EXPECT_EQ(row["current"]["gpus"].size(), 1u);
    EXPECT_EQ(row["candidate"]["gpus"].size(), 1u);
    EXPECT_TRUE(row["current"]["score"].is_number());
  }
  // Spread puts the first task on the empty n3.
  EXPECT_EQ(j["tasks"][0]["candidate"]["node"], "n3");
  // Binpack's second task lands on the GPUs the first left free.
  EXPECT_NE(j["tasks"][0]["current"]["gpus"][0]["index"], j["tasks"][1]["current"]["gpus"][0]["index"]);
  EXPECT_EQ(j["moved"], 2);
  EXPECT_EQ(j["truncated"], false);
  EXPECT_EQ(j["current"]["scheduled"], 2);
  EXPECT_EQ(j["candidate"]["scheduled"], 2);
  EXPECT_EQ(j["current"]["unschedulable"], 0);
  EXPECT_EQ(j["current"]["policy"]["plugins"]["binpack"]["enabled"], true);
  EXPECT_EQ(j["candidate"]["policy"]["plugins"]["binpack"]["enabled"], false);
  EXPECT_EQ(j["candidate"]["policy"]["plugins"]["spread"]["enabled"], true);
  // 3 + 2 of 12 GPUs after either policy.
  EXPECT_DOUBLE_EQ(j["current"]["gpu_allocation"].get<double>(), 5.0 / 12.0);
  EXPECT_DOUBLE_EQ(j["candidate"]["gpu_allocation"].get<double>(), 5.0 / 12.0);

  // Per node, both sides, each scored by its own policy's plugins.
  for (const json& row : j["tasks"]) {
    ASSERT_TRUE(row.contains("nodes"));
    ASSERT_EQ(row["nodes"].size(), 3u) << row["nodes"].dump();
    std::set<std::string> names;
    for (const json& n : row["nodes"]) {
      names.insert(n["node"].get<std::string>());
      ASSERT_TRUE(n.contains("current") && n.contains("candidate")) << n.dump();
      EXPECT_EQ(n["current"]["feasible"], true) << n.dump();
      EXPECT_EQ(n["candidate"]["feasible"], true) << n.dump();
      const json& cur = n["current"]["scores"];
      const json& cand = n["candidate"]["scores"];
      ASSERT_TRUE(cur.contains("binpack")) << cur.dump();
      EXPECT_FALSE(cur.contains("spread")) << cur.dump();
      ASSERT_TRUE(cand.contains("spread")) << cand.dump();
      EXPECT_FALSE(cand.contains("binpack")) << cand.dump();
      EXPECT_TRUE(cur["binpack"]["raw"].is_number());
      EXPECT_TRUE(cand["spread"]["weighted"].is_number());
      EXPECT_TRUE(n["current"]["total"].is_number());
    }
    EXPECT_EQ(names, (std::set<std::string>{"n1", "n2", "n3"}));
  }
  // On the first task, binpack rates n1 above n3 and spread the other way.
  for (const json& n : j["tasks"][0]["nodes"]) {
    if (n["node"] == "n1") {
      for (const json& m : j["tasks"][0]["nodes"]) {
        if (m["node"] != "n3") continue;
        EXPECT_GT(n["current"]["scores"]["binpack"]["raw"].get<double>(),
                  m["current"]["scores"]["binpack"]["raw"].get<double>());
        EXPECT_LT(n["candidate"]["scores"]["spread"]["raw"].get<double>(),
                  m["candidate"]["scores"]["spread"]["raw"].get<double>());
      }
    }
  }

  // The snapshot's cluster is untouched.
  for (NodeId n = 0; n < snap.cluster.node_count(); ++n) {
    EXPECT_EQ(snap.cluster.used_gpu_milli(n), used_before[n]) << n;
  }
  EXPECT_EQ(snap.cluster.placed_count(), placed_before);
}

TEST(PreviewTest, SameCandidateMovesNothing) {
  const ClusterSnapshot snap = ThreeNodes();
  auto out = Preview({{"plugins", {{"binpack", {{"weight", 2}}}}},
                      {"tasks", {GpuTaskJson("p0", 1), GpuTaskJson("p1", 2)}}},
                     snap);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)["moved"], 0);
  for (const json& row : (*out)["tasks"]) {
    EXPECT_EQ(row["moved"], false);
    EXPECT_EQ(row["current"]["node"], row["candidate"]["node"]);
  }
  EXPECT_EQ((*out)["candidate"]["policy"]["plugins"]["binpack"]["weight"], 2.0);
}

TEST(PreviewTest, RefusedCandidatesKeepThePutRoutesErrors) {
  const ClusterSnapshot snap = ThreeNodes();
  struct Row {
    const char* name;
    json body;
    StatusCode code;
    std::string want;
  } rows[] = {
      {"spread with binpack", {{"plugins", {{"spread", {{"enabled", true}}}}}}, StatusCode::kConflict,
       "binpack"},
      {"unknown plugin", {{"plugins", {{"magic", {{"enabled", true}}}}}}, StatusCode::kNotFound,
       "magic"},
      {"bad mode", {{"plugins", {{"preempt", {{"mode", "sometimes"}}}}}},
       StatusCode::kInvalidArgument, "preempt"},
      {"weight of an unknown plugin", {{"scheduler", {{"score_weights", {{"magic", 1}}}}}},
       StatusCode::kInvalidArgument, "scheduler.score_weights.magic"},
      {"weight of a plugin that does not score", {{"scheduler", {{"score_weights", {{"fit", 1}}}}}},
       StatusCode::kInvalidArgument, "scheduler.score_weights.fit"},
  };
  for (const Row& r : rows) {
    auto out = Preview(r.body, snap);
    ASSERT_FALSE(out.ok()) << r.name;
    EXPECT_EQ(out.status().code(), r.code) << r.name << ": " << out.status().ToString();
    EXPECT_NE(out.status().message().find(r.want), std::string::npos)
        << r.name << ": " << out.status().message();
  }
  // The same switch written spread first is fine: disabling goes first.
  auto ok = Preview(json::parse(R"({"plugins":{"spread":{"enabled":true},"binpack":{"enabled":false}}})"),
                    snap);
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

TEST(PreviewTest, ExplainsOnlyTheFirstTasks) {
  const ClusterSnapshot snap = ThreeNodes();
  json tasks = json::array();
  const size_t n = kMaxExplainedTasks + 10;
  for (size_t i = 0; i < n; ++i) tasks.push_back(SmallTaskJson("t" + std::to_string(i)));
  auto out = Preview({{"plugins", kSwitchToSpread}, {"tasks", tasks}}, snap);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ((*out)["tasks"].size(), n);
  for (size_t i = 0; i < n; ++i) {
    const json& row = (*out)["tasks"][i];
    EXPECT_EQ(row["name"], "t" + std::to_string(i));
    EXPECT_EQ(row.contains("nodes"), i < kMaxExplainedTasks) << i;
    EXPECT_TRUE(row["candidate"]["node"].is_string()) << i;
  }
  EXPECT_EQ((*out)["current"]["scheduled"], int(n));

  auto quiet = Preview({{"tasks", tasks}, {"explain", false}}, snap);
  ASSERT_TRUE(quiet.ok());
  for (const json& row : (*quiet)["tasks"]) EXPECT_FALSE(row.contains("nodes"));
}

TEST(PreviewTest, DefaultsToThePendingTasksAndTruncates) {
  ClusterSnapshot snap = ThreeNodes();
  // More pending tasks than a preview runs, by priority then age.
  for (size_t i = 0; i <= kMaxPreviewTasks; ++i) {
    Task t = MakeTask(100 + i, 10, 10);
    snap.pending.push_back(t);
  }
  // One that cannot fit anywhere, first in line.
  Task huge = MakeTask(99, 10, 10, 5);
  huge.priority = 1;
  snap.pending.insert(snap.pending.begin(), huge);

  auto out = Preview({{"plugins", kSwitchToSpread}, {"explain", false}}, snap);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const json& j = *out;
  EXPECT_EQ(j["truncated"], true);
  ASSERT_EQ(j["tasks"].size(), kMaxPreviewTasks);
  EXPECT_EQ(j["tasks"][0]["id"], 99);
  EXPECT_EQ(j["tasks"][0]["priority"], 1);
  EXPECT_TRUE(j["tasks"][0]["current"]["node"].is_null());
  EXPECT_TRUE(j["tasks"][0]["candidate"]["node"].is_null());
  EXPECT_EQ(j["tasks"][0]["moved"], false);
  EXPECT_EQ(j["tasks"][0]["current"]["reason"].get<std::string>().rfind("0/3 nodes available", 0), 0u)
      << j["tasks"][0].dump();
  EXPECT_EQ(j["tasks"][1]["id"], 100);
  EXPECT_EQ(j["current"]["unschedulable"], 1);
  EXPECT_EQ(j["current"]["scheduled"], int(kMaxPreviewTasks) - 1);
  EXPECT_EQ(j["candidate"]["scheduled"], int(kMaxPreviewTasks) - 1);
}

// The "cluster" workload re-places every task, placed and waiting, on an
// empty copy: a whole-cluster what-if, where binpack and spread differ even
// when nothing waits. The live snapshot is untouched.
TEST(PreviewTest, ClusterWorkloadReplacesEveryTaskFromEmpty) {
  ClusterSnapshot snap = ThreeNodes();
  // The placed tasks as the scheduler lists them: by priority, then age.
  Task a = MakeTask(1, 1000, 1024, 2);
  a.name = "a";
  Task b = MakeTask(2, 1000, 1024, 1);
  b.name = "b";
  snap.placed = {a, b};
  Task waiting = MakeTask(3, 1000, 1024, 1);
  waiting.name = "waiting";
  waiting.priority = 5;
  snap.pending = {waiting};

  auto out = Preview({{"plugins", kSwitchToSpread}, {"workload", "cluster"}}, snap);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const json& j = *out;
  ASSERT_EQ(j["tasks"].size(), 3u);
  // By priority: the waiting task (5) first, then a and b (0) by age.
  EXPECT_EQ(j["tasks"][0]["name"], "waiting");
  EXPECT_EQ(j["tasks"][1]["name"], "a");
  EXPECT_EQ(j["tasks"][2]["name"], "b");
  EXPECT_EQ(j["tasks"][1]["id"], 1);
  // binpack stacks all three on one node; spread uses three nodes.
  std::set<std::string> cur_nodes, cand_nodes;
  for (const json& t : j["tasks"]) {
    cur_nodes.insert(t["current"]["node"].get<std::string>());
    cand_nodes.insert(t["candidate"]["node"].get<std::string>());
  }
  EXPECT_EQ(cur_nodes.size(), 1u) << j.dump();
  EXPECT_EQ(cand_nodes.size(), 3u) << j.dump();
  EXPECT_GE(j["moved"].get<int>(), 2);
  EXPECT_EQ(j["current"]["scheduled"], 3);
  // 4 of 12 GPUs either way.
  EXPECT_NEAR(j["current"]["gpu_allocation"].get<double>(), 4.0 / 12, 1e-9);
  EXPECT_NEAR(j["candidate"]["gpu_allocation"].get<double>(), 4.0 / 12, 1e-9);
  // The snapshot still holds its placements.
  EXPECT_EQ(snap.cluster.placed_count(), 2u);
  EXPECT_NE(snap.cluster.FindPlaced(1), nullptr);

  // The default workload places only the waiting task, on the live layout.
  auto pending = Preview({{"plugins", kSwitchToSpread}}, snap);
  ASSERT_TRUE(pending.ok());
  ASSERT_EQ((*pending)["tasks"].size(), 1u);
  EXPECT_EQ((*pending)["tasks"][0]["name"], "waiting");
}

}  // namespace
}  // namespace hf::server
