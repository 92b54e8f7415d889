#include "plugins/topology/topology.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/cluster_state.h"
#include "framework/framework.h"
#include "framework/reasons.h"
#include "plugins/topology/topology_file.h"

namespace hf::plugins {
namespace {

// A fresh path under the test's temp dir; `name` keeps tests apart.
std::string TempPath(const std::string& name) {
  return testing::TempDir() + "hf_topology_" + name + ".yaml";
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

// ---------------------------------------------------------------- the file

constexpr const char* kAppendixExample = R"(zones:
  - name: z1
    switches:
      - name: s1
        racks:
          - {name: r1, nodes: [gpu-a1, gpu-a2]}
          - {name: r2, nodes: [gpu-b1]}
)";

TEST(TopologyFileTest, ParsesTheAppendixFormat) {
  const Result<TopologyMap> m = ParseTopology(kAppendixExample, "topo.yaml");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->size(), 3u);
  const auto pos = [&](const std::string& node) {
    const TopologyPosition& p = m->at(node);
    return p.zone + "/" + p.switch_name + "/" + p.rack;
  };
  EXPECT_EQ(pos("gpu-a1"), "z1/s1/r1");
  EXPECT_EQ(pos("gpu-a2"), "z1/s1/r1");
  EXPECT_EQ(pos("gpu-b1"), "z1/s1/r2");
}

TEST(TopologyFileTest, AcceptsEmptyLists) {
  struct Row {
    const char* name;
    const char* text;
    size_t expected_nodes;
  };
  const std::vector<Row> rows = {
      {"no zones", "zones: []\n", 0},
      {"zone without switches", "zones:\n  - name: z1\n", 0},
      {"rack without nodes",
       "zones:\n  - name: z1\n    switches:\n      - name: s1\n        racks:\n"
       "          - {name: r1}\n",
       0},
      {"several zones",
       "zones:\n  - {name: z1, switches: [{name: s1, racks: [{name: r1, nodes: [a]}]}]}\n"
       "  - {name: z2, switches: [{name: s1, racks: [{name: r1, nodes: [b]}]}]}\n",
       2},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    const Result<TopologyMap> m = ParseTopology(row.text, "topo.yaml");
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(m->size(), row.expected_nodes);
  }
}

TEST(TopologyFileTest, ErrorsNameFileAndLine) {
  struct Row {
    const char* name;
    const char* text;
    const char* expected;  // the whole message
  };
  const std::vector<Row> rows = {
      {"empty file", "", "topo.yaml:1:1: empty topology file; expected a zones: list"},
      {"top level is a list", "- z1\n- z2\n",
       "topo.yaml:1:1: expected a mapping with a zones: list"},
      {"no zones key", "racks: []\n",
       "topo.yaml:1:1: unknown key in the top level (expected: zones)"},
      {"zones is a mapping", "zones:\n  z1: {}\n", "topo.yaml:2:3: zones must be a list"},
      {"unterminated flow list", "zones:\n  - name: z1\n    switches: [\n",
       "topo.yaml:4:1: not valid YAML"},
      {"zone without a name", "zones:\n  - switches: []\n", "topo.yaml:2:5: zones[0] has no name"},
      {"empty zone name", "zones:\n  - name: \"\"\n",
       "topo.yaml:2:11: zones[0].name must not be empty"},
      {"zone name is a list", "zones:\n  - name: [a, b]\n",
       "topo.yaml:2:11: zones[0].name must be a string"},
      {"zone name is null", "zones:\n  - name:\n", "topo.yaml:2:5: zones[0].name must be a string"},
      {"zone listed twice", "zones:\n  - name: z1\n  - name: z1\n",
       "topo.yaml:3:11: zones[1].name repeats the name at topo.yaml:2:11"},
      {"typo in a key", "zones:\n  - name: z1\n    switches:\n      - name: s1\n        rack: []\n",
       "topo.yaml:5:9: unknown key in zones[0].switches[0] (expected: name, racks)"},
      {"switches is a string", "zones:\n  - name: z1\n    switches: s1\n",
       "topo.yaml:3:15: zones[0].switches must be a list"},
      {"nodes is a mapping",
       "zones:\n  - name: z1\n    switches:\n      - name: s1\n        racks:\n"
       "          - name: r1\n            nodes: {a: 1}\n",
       "topo.yaml:7:20: zones[0].switches[0].racks[0].nodes must be a list of node names"},
      {"empty node name",
       "zones:\n  - name: z1\n    switches:\n      - name: s1\n        racks:\n"
       "          - {name: r1, nodes: [a, \"\"]}\n",
       "topo.yaml:6:35: zones[0].switches[0].racks[0].nodes[1] is empty"},
      {"node listed twice",
       "zones:\n  - name: z1\n    switches:\n      - name: s1\n        racks:\n"
       "          - {name: r1, nodes: [gpu-a1]}\n"
       "          - {name: r2, nodes: [gpu-b1, gpu-a1]}\n",
       "topo.yaml:7:40: zones[0].switches[0].racks[1].nodes[1] repeats the node listed at "
       "topo.yaml:6:32"},
      {"rack entry is a string",
       "zones:\n  - name: z1\n    switches:\n      - name: s1\n        racks:\n          - r1\n",
       "topo.yaml:6:13: zones[0].switches[0].racks[0] must be a mapping with a name"},
      // Nothing of the file's text is quoted, whatever the file is.
      {"a password file", "root:$6$secret$hash:19000:0:99999:7:::\n",
       "topo.yaml:1:1: unknown key in the top level (expected: zones)"},
      {"unknown key text", "zones: []\nsecret-value: 1\n",
       "topo.yaml:2:1: unknown key in the top level (expected: zones)"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    const Result<TopologyMap> m = ParseTopology(row.text, "topo.yaml");
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(m.status().message(), row.expected);
  }
}

TEST(TopologyFileTest, LoadSaysWhetherTheFileIsMissingOrMalformed) {
  const std::string good = TempPath("load_good");
  const std::string bad = TempPath("load_bad");
  const std::string missing = TempPath("load_missing");
  WriteFile(good, kAppendixExample);
  WriteFile(bad, "zones:\n  - name: z1\n    switches: s1\n");
  std::remove(missing.c_str());
  // A FIFO nobody writes (it must not hang the reader) and a huge file.
  const std::string fifo = TempPath("load_fifo");
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string huge = TempPath("load_huge");
  WriteFile(huge, "zones: []\n# " + std::string(2 << 20, 'x') + "\n");
  struct Row {
    const char* name;
    std::string path;
    StatusCode expected_code;
    std::string expected_prefix;
  };
  const std::vector<Row> rows = {
      {"readable and valid", good, StatusCode::kOk, ""},
      {"malformed", bad, StatusCode::kInvalidArgument, bad + ":3:15: "},
      {"missing", missing, StatusCode::kUnavailable, missing + ": cannot read topology file"},
      {"a directory", testing::TempDir(), StatusCode::kUnavailable,
       testing::TempDir() + ": cannot read topology file: not a regular file"},
      {"a character device", "/dev/zero", StatusCode::kUnavailable,
       "/dev/zero: cannot read topology file: not a regular file"},
      {"a FIFO", fifo, StatusCode::kUnavailable, fifo + ": cannot read topology file: not a regular file"},
      {"over 1 MiB", huge, StatusCode::kUnavailable, huge + ": cannot read topology file: larger than 1 MiB"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    const Result<TopologyMap> m = LoadTopologyFile(row.path);
    EXPECT_EQ(m.status().code(), row.expected_code) << m.status().ToString();
    EXPECT_EQ(m.status().message().rfind(row.expected_prefix, 0), 0u) << m.status().message();
  }
}

// ---------------------------------------------------------------- scoring

NodeSpec Node(const std::string& name, TopologyPosition pos, int32_t gpus = 8) {
  NodeSpec s;
  s.name = name;
  s.cpu_milli = 64000;
  s.memory_mib = 512 * 1024;
  s.topology = std::move(pos);
  for (int32_t i = 0; i < gpus; ++i) {
    GpuDevice g;
    g.index = i;
    g.model = "A100-80G";
    g.memory_mib = 81920;
    g.numa = i / 4;
    g.pcie_switch = i / 2;
    g.fabric_domain = i / 4;
    s.gpus.push_back(g);
  }
  return s;
}

Task MakeTask(TaskKey key, const std::string& name, const std::string& group,
              std::vector<std::string> depends_on = {}, int32_t gpus = 0) {
  Task t;
  t.key = key;
  t.name = name;
  t.group = group;
  t.depends_on = std::move(depends_on);
  t.requests.cpu_milli = 1000;
  t.requests.memory_mib = 1024;
  t.requests.gpu = gpus;
  return t;
}

void Place(ClusterState& cluster, const Task& task, NodeId node) {
  Allocation a;
  a.node = node;
  a.cpu_milli = task.requests.cpu_milli;
  a.memory_mib = task.requests.memory_mib;
  ASSERT_TRUE(cluster.Bind(task, a).ok());
}

struct Harness {
  framework::ReasonTable reasons;
  ManualClock clock;
  Topology topology{framework::PluginDeps{&reasons, &clock}};
  framework::CycleState state;
};

// Seven nodes: n0, n1 share rack z1/s1/r1; n2 is in rack r2 of the same
// switch; n3 on switch s2 of zone z1; n4 in zone z2; n5 has no position; n6 is
// in a rack also called r1 but under switch s2, so it is not n0's rack.
ClusterState ScoringCluster() {
  ClusterState c;
  const std::vector<NodeSpec> nodes = {
      Node("n0", {"z1", "s1", "r1"}), Node("n1", {"z1", "s1", "r1"}),
      Node("n2", {"z1", "s1", "r2"}), Node("n3", {"z1", "s2", "r3"}),
      Node("n4", {"z2", "s3", "r4"}), Node("n5", {}),
      Node("n6", {"z1", "s2", "r1"}),
  };
  for (const NodeSpec& s : nodes) HF_CHECK(c.AddNode(s).ok());
  return c;
}

struct Running {
  const char* name;
  const char* group;
  NodeId node;
};

struct ScoreRow {
  const char* name;
  std::vector<Running> running;
  const char* group;
  std::vector<std::string> depends_on;
  bool expected_applies;
  std::vector<double> expected;  // n0..n6
  GroupPlacement placement = GroupPlacement::kPack;
};

void RunScoreRows(const std::vector<ScoreRow>& rows, Harness* shared = nullptr) {
  for (const ScoreRow& row : rows) {
    SCOPED_TRACE(row.name);
    ClusterState cluster = ScoringCluster();
    TaskKey key = 100;
    for (const Running& r : row.running) Place(cluster, MakeTask(key++, r.name, r.group), r.node);
    Harness own;
    Topology& topology = shared ? shared->topology : own.topology;
    Task task = MakeTask(1, "me", row.group, row.depends_on);
    task.group_placement = row.placement;
    std::vector<NodeId> nodes(cluster.node_count());
    for (NodeId n = 0; n < nodes.size(); ++n) nodes[n] = n;
    framework::CycleState state;
    ASSERT_EQ(topology.PreScore(task, cluster, nodes, state), row.expected_applies);
    if (!row.expected_applies) continue;
    std::vector<double> scores(nodes.size(), -1);
    topology.Score(task, cluster, nodes, scores, state);
    topology.NormalizeScores(scores);
    EXPECT_EQ(scores, row.expected);
  }
}

TEST(TopologyScoreTest, DistanceLevels) {
  RunScoreRows({
      {"no depends_on and no group", {{"feature-store", "", 0}}, "", {}, false, {}},
      {"dependency not running", {{"other", "", 0}}, "", {"feature-store"}, false, {}},
      {"group with no other instance", {{"other", "other", 0}}, "job", {}, false, {}},
      // n0 itself; n1 its rack; n2 its switch; n3 and n6 its zone; n4 elsewhere;
      // n5 has no position.
      {"distance to a dependency by task name",
       {{"feature-store", "", 0}},
       "",
       {"feature-store"},
       true,
       {100, 75, 50, 25, 0, 0, 25}},
      // The dependency is a group "feature-store" whose instance runs on n3.
      {"dependency named by its group",
       {{"fs-0", "feature-store", 3}},
       "",
       {"feature-store"},
       true,
       {25, 25, 25, 100, 0, 0, 50}},
      {"instances of the own group pull to their rack",
       {{"job-0", "job", 1}},
       "job",
       {},
       true,
       {75, 100, 50, 25, 0, 0, 25}},
      // Each node takes the best level over the dependencies' nodes (n2 and n4).
      {"best of several dependencies",
       {{"feature-store", "", 2}, {"redis", "", 4}},
       "",
       {"feature-store", "redis", "not-running"},
       true,
       {50, 50, 100, 25, 100, 0, 25}},
      // Dependency part {100, 75, 50, 25, 0, 0, 25}, group part {0, 0, 0, 0, 100, 0, 0}.
      {"mean of the dependency and the group part",
       {{"feature-store", "", 0}, {"job-0", "job", 4}},
       "job",
       {"feature-store"},
       true,
       {50, 37.5, 25, 12.5, 50, 0, 12.5}},
      {"a node without position is near only itself",
       {{"feature-store", "", 5}},
       "",
       {"feature-store"},
       true,
       {0, 0, 0, 0, 0, 100, 0}},
      // A group that spreads scores distance from its members (n1): its own
      // node 0, its rack 25, its switch 50, its zone 75, elsewhere 100.
      {"a spreading group moves away from its members",
       {{"svc-0", "svc", 1}},
       "svc",
       {},
       true,
       {25, 0, 50, 75, 100, 100, 75},
       GroupPlacement::kSpread},
      // Members on n1 and n4: each node takes its distance to the nearest.
      {"a spreading group keeps away from every member",
       {{"svc-0", "svc", 1}, {"svc-1", "svc", 4}},
       "svc",
       {},
       true,
       {25, 0, 50, 75, 0, 100, 75},
       GroupPlacement::kSpread},
      // Spreading is the group's part only: dependencies still pull (n0's
      // dependency part {100, 75, 50, 25, 0, 0, 25}, mean with the above).
      {"dependencies still pull a spreading task",
       {{"feature-store", "", 0}, {"svc-0", "svc", 1}},
       "svc",
       {"feature-store"},
       true,
       {62.5, 37.5, 50, 50, 50, 50, 50},
       GroupPlacement::kSpread},
  });
}

TEST(TopologyScoreTest, ReplicasSpreadOverNodesTrainingPacks) {
  // Three one-GPU nodes, binpack on: half-GPU tasks of one group. A group
  // that spreads puts its second and third task on the other nodes; one that
  // packs puts the second beside the first, on its GPU.
  for (const GroupPlacement placement : {GroupPlacement::kSpread, GroupPlacement::kPack}) {
    SCOPED_TRACE(GroupPlacementName(placement));
    ClusterState cluster;
    for (const char* n : {"a", "b", "c"}) {
      NodeSpec s = Node(n, {});
      s.gpus = {{0, "", "L4", "nvidia", 24576, 0, 0, 0}};
      ASSERT_TRUE(cluster.AddNode(s).ok());
    }
    ManualClock clock;
    auto fw = framework::Framework::Create(InTreeRegistry(), {}, &clock);
    ASSERT_TRUE(fw.ok()) << fw.status().ToString();
    std::vector<NodeId> nodes;
    for (TaskKey k = 1; k <= 3; ++k) {
      Task t = MakeTask(k, "replica-" + std::to_string(k), "inference.m", {}, 1);
      t.requests.gpu_milli = 500;
      t.group_placement = placement;
      const framework::Decision d = (*fw)->Schedule(t, cluster);
      ASSERT_TRUE(d.scheduled) << d.reason;
      nodes.push_back(d.alloc.node);
    }
    if (placement == GroupPlacement::kSpread) {
      EXPECT_EQ(nodes, (std::vector<NodeId>{0, 1, 2}));
    } else {
      EXPECT_EQ(nodes[0], nodes[1]);
    }
  }
}

TEST(TopologyScoreTest, OneInstanceAcrossClusters) {
  // Two clusters alive at once, alike in size and history but with n4 in n0's
  // rack in the second: one plugin instance scoring them in turn must not use
  // the positions it cached for the other.
  ClusterState plain = ScoringCluster();
  ClusterState moved;
  for (NodeId n = 0; n < plain.node_count(); ++n) {
    NodeSpec s = plain.spec(n);
    if (s.name == "n4") s.topology = {"z1", "s1", "r1"};
    ASSERT_TRUE(moved.AddNode(s).ok());
  }
  // Alike in every way but the node set's identity.
  ASSERT_NE(plain.nodes_version(), moved.nodes_version());
  struct Row {
    const char* name;
    ClusterState* cluster;
    std::vector<double> expected;  // n0..n6, with the dependency on n0
  };
  const std::vector<Row> rows = {
      {"plain", &plain, {100, 75, 50, 25, 0, 0, 25}},
      {"n4 moved into n0's rack", &moved, {100, 75, 50, 25, 75, 0, 25}},
      {"plain again", &plain, {100, 75, 50, 25, 0, 0, 25}},
  };
  Harness h;
  TaskKey key = 100;
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    Place(*row.cluster, MakeTask(key++, "feature-store", ""), 0);
    const Task task = MakeTask(1, "me", "", {"feature-store"});
    const std::vector<NodeId> nodes = {0, 1, 2, 3, 4, 5, 6};
    framework::CycleState state;
    ASSERT_TRUE(h.topology.PreScore(task, *row.cluster, nodes, state));
    std::vector<double> scores(nodes.size(), -1);
    h.topology.Score(task, *row.cluster, nodes, scores, state);
    EXPECT_EQ(scores, row.expected);
  }
}

TEST(TopologyScoreTest, FilePositionsOverrideNodeFields) {
  // The file moves n0 and n5 into n4's rack and splits n1 off into its own
  // rack; nodes it does not name keep their own fields.
  const std::string path = TempPath("override");
  WriteFile(path, R"(zones:
  - name: z2
    switches:
      - name: s3
        racks:
          - {name: r4, nodes: [n0, n5, n4]}
  - name: z1
    switches:
      - name: s1
        racks:
          - {name: r9, nodes: [n1]}
)");
  Harness h;
  ASSERT_TRUE(h.topology.Configure({"", {{"topology_config", path}}}).ok());
  RunScoreRows({{"dependency on n4",
                 {{"feature-store", "", 4}},
                 "",
                 {"feature-store"},
                 true,
                 {75, 0, 0, 0, 100, 75, 0}},
                {"dependency on n1",
                 {{"feature-store", "", 1}},
                 "",
                 {"feature-store"},
                 true,
                 {0, 100, 50, 25, 0, 0, 25}}},
               &h);

  // Back to the nodes' own fields.
  ASSERT_TRUE(h.topology.Configure({"", {{"topology_config", ""}}}).ok());
  RunScoreRows({{"dependency on n4 again",
                 {{"feature-store", "", 4}},
                 "",
                 {"feature-store"},
                 true,
                 {0, 0, 0, 0, 100, 0, 0}}},
               &h);
}

TEST(TopologyScoreTest, GroupLandsInTheFirstInstancesRack) {
  // 8-GPU tasks fill a node each. The first instance takes n0 (all nodes tie);
  // the second cannot share it and should go to n2, in n0's rack, rather than
  // n1 (same zone only), which the plain tie-break would pick.
  struct Row {
    const char* name;
    bool topology_enabled;
    NodeId expected_second;
  };
  const std::vector<Row> rows = {
      {"topology on: n0's rack", true, 2},
      {"topology off: first feasible node", false, 1},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    ClusterState cluster;
    for (const NodeSpec& s : {Node("n0", {"z1", "s1", "r1"}), Node("n1", {"z1", "s2", "r3"}),
                              Node("n2", {"z1", "s1", "r1"})}) {
      ASSERT_TRUE(cluster.AddNode(s).ok());
    }
    ManualClock clock;
    framework::Policy policy;
    policy.plugins["topology"] = {{"enabled", row.topology_enabled}};
    auto fw = framework::Framework::Create(InTreeRegistry(), policy, &clock);
    ASSERT_TRUE(fw.ok()) << fw.status().ToString();
    const framework::Decision first = (*fw)->Schedule(MakeTask(1, "job-0", "job", {}, 8), cluster);
    ASSERT_TRUE(first.scheduled) << first.reason;
    EXPECT_EQ(first.alloc.node, 0u);
    const framework::Decision second = (*fw)->Schedule(MakeTask(2, "job-1", "job", {}, 8), cluster);
    ASSERT_TRUE(second.scheduled) << second.reason;
    EXPECT_EQ(second.alloc.node, row.expected_second);
  }
}

// ---------------------------------------------------------------- GPU choice

enum class Layout {
  kNvlink,  // GPU i: NVLink domain i/4, PCIe switch i/2, NUMA i/4
  kPcie,    // no NVLink; PCIe switch i/4, NUMA i/4
  kNuma,    // NUMA node i/4 only
  kNone,    // no locality at all
  kMixed,   // kNvlink, with GPUs 4-7 of another model
  kVendors,  // GPUs 0-3 NVIDIA, 4-7 AMD, each vendor's fabric numbered 0
};

NodeSpec GpuNode(Layout layout) {
  NodeSpec s = Node("gpu-0", {"z1", "s1", "r1"});
  for (GpuDevice& g : s.gpus) {
    const int32_t i = g.index;
    switch (layout) {
      case Layout::kNvlink:
        break;
      case Layout::kPcie:
        g.fabric_domain = -1;
        g.pcie_switch = i / 4;
        break;
      case Layout::kNuma:
        g.fabric_domain = g.pcie_switch = -1;
        break;
      case Layout::kNone:
        g.fabric_domain = g.pcie_switch = g.numa = -1;
        break;
      case Layout::kMixed:
        if (i >= 4) g.model = "H100";
        break;
      case Layout::kVendors:
        g.fabric_domain = 0;
        g.pcie_switch = g.numa = -1;
        if (i >= 4) {
          g.vendor = "amd";
          g.model = "MI300X";
        }
        break;
    }
  }
  return s;
}

TEST(TopologyBindTest, ChoosesGpusInOneDomain) {
  struct Row {
    const char* name;
    Layout layout;
    std::vector<int32_t> used;
    int32_t gpu;
    int32_t gpu_milli;
    std::vector<std::string> models;
    std::vector<int32_t> expected;  // GPU indices; empty = left to others
  };
  const std::vector<Row> rows = {
      {"4 GPUs, domain 0 partly used: all in domain 1",
       Layout::kNvlink,
       {1},
       4,
       1000,
       {},
       {4, 5, 6, 7}},
      {"4 GPUs, both domains free: the lower", Layout::kNvlink, {}, 4, 1000, {}, {0, 1, 2, 3}},
      {"2 GPUs: the fuller domain that fits, keeping domain 1 whole",
       Layout::kNvlink,
       {0, 1},
       2,
       1000,
       {},
       {2, 3}},
      {"3 GPUs, 3 left in each domain: the lower", Layout::kNvlink, {0, 7}, 3, 1000, {}, {1, 2, 3}},
      // Neither NVLink domain (3 free each), nor any switch (2 GPUs each), nor
      // NUMA (same as the domains) holds 4: the lowest free GPUs.
      {"4 GPUs, no domain holds them: lowest free",
       Layout::kNvlink,
       {0, 7},
       4,
       1000,
       {},
       {1, 2, 3, 4}},
      {"no NVLink: one PCIe switch", Layout::kPcie, {1}, 4, 1000, {}, {4, 5, 6, 7}},
      {"no NVLink, no switch: one NUMA node", Layout::kNuma, {2}, 4, 1000, {}, {4, 5, 6, 7}},
      {"no locality: lowest free", Layout::kNone, {1}, 4, 1000, {}, {0, 2, 3, 4}},
      {"only allowed models count", Layout::kMixed, {}, 2, 1000, {"H100"}, {4, 5}},
      {"two vendors' fabrics numbered alike are two domains", Layout::kVendors, {0}, 4, 1000, {},
       {4, 5, 6, 7}},
      {"two vendors, 3 free each: the lower, one vendor", Layout::kVendors, {0, 4}, 3, 1000, {},
       {1, 2, 3}},
      {"no vendor holds them all: lowest free", Layout::kVendors, {}, 5, 1000, {}, {0, 1, 2, 3, 4}},
      {"one GPU: left to the default choice", Layout::kNvlink, {0}, 1, 1000, {}, {}},
      {"shared GPUs: left to binpack/spread", Layout::kNvlink, {}, 2, 500, {}, {}},
      {"too few free GPUs: left empty", Layout::kNvlink, {0, 1, 2, 3, 4, 5}, 4, 1000, {}, {}},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    ClusterState cluster;
    ASSERT_TRUE(cluster.AddNode(GpuNode(row.layout)).ok());
    if (!row.used.empty()) {
      Allocation taken;
      taken.node = 0;
      for (int32_t g : row.used) taken.gpus.push_back({g, 1000, 0});
      ASSERT_TRUE(cluster.Bind(MakeTask(100, "filler", ""), taken).ok());
    }
    Harness h;
    Task task = MakeTask(1, "me", "", {}, row.gpu);
    task.requests.gpu_milli = row.gpu_milli;
    task.requests.gpu_models = row.models;
    Allocation alloc;
    alloc.node = 0;
    ASSERT_TRUE(h.topology.Bind(task, cluster, alloc, h.state).ok());
    std::vector<int32_t> got;
    for (const GpuGrant& g : alloc.gpus) {
      got.push_back(g.index);
      EXPECT_EQ(g.milli, 1000);
    }
    EXPECT_EQ(got, row.expected);
  }
}

TEST(TopologyBindTest, KeepsGpusAlreadyChosen) {
  ClusterState cluster;
  ASSERT_TRUE(cluster.AddNode(GpuNode(Layout::kNvlink)).ok());
  Harness h;
  Allocation alloc;
  alloc.node = 0;
  alloc.gpus = {{0, 1000, 0}, {7, 1000, 0}};
  ASSERT_TRUE(h.topology.Bind(MakeTask(1, "me", "", {}, 2), cluster, alloc, h.state).ok());
  EXPECT_EQ(alloc.gpus, (std::vector<GpuGrant>{{0, 1000, 0}, {7, 1000, 0}}));
}

TEST(TopologyBindTest, GrantsCarryTheGpuMemoryRequest) {
  ClusterState cluster;
  ASSERT_TRUE(cluster.AddNode(GpuNode(Layout::kNvlink)).ok());
  Harness h;
  Task task = MakeTask(1, "me", "", {}, 2);
  task.requests.gpu_memory_mib = 40000;
  Allocation alloc;
  alloc.node = 0;
  ASSERT_TRUE(h.topology.Bind(task, cluster, alloc, h.state).ok());
  EXPECT_EQ(alloc.gpus, (std::vector<GpuGrant>{{0, 1000, 40000}, {1, 1000, 40000}}));
}

TEST(TopologyBindTest, FrameworkPlacesA4GpuTaskInOneNvlinkDomain) {
  ClusterState cluster;
  ASSERT_TRUE(cluster.AddNode(GpuNode(Layout::kNvlink)).ok());
  Allocation taken;
  taken.node = 0;
  taken.gpus = {{1, 1000, 0}};
  ASSERT_TRUE(cluster.Bind(MakeTask(100, "filler", ""), taken).ok());
  ManualClock clock;
  auto fw = framework::Framework::Create(InTreeRegistry(), {}, &clock);
  ASSERT_TRUE(fw.ok()) << fw.status().ToString();

  const framework::Decision d = (*fw)->Schedule(MakeTask(1, "train", "", {}, 4), cluster);
  ASSERT_TRUE(d.scheduled) << d.reason;
  EXPECT_EQ(d.alloc.gpus,
            (std::vector<GpuGrant>{{4, 1000, 0}, {5, 1000, 0}, {6, 1000, 0}, {7, 1000, 0}}));
}

// ---------------------------------------------------------------- config and status

framework::PluginStatus StatusOf(const framework::Framework& fw, std::string* message = nullptr) {
  const Result<framework::PluginInfo> info = fw.GetPlugin("topology");
  HF_CHECK(info.ok());
  if (message) *message = info->message;
  return info->status;
}

TEST(TopologyConfigTest, BrokenFileErrorsUntilFixed) {
  struct Row {
    const char* name;
    std::string path;
    std::optional<std::string> content;  // nullopt: the file does not exist
    std::string expected_message;        // a prefix of the plugin's message
  };
  const std::string missing = TempPath("status_missing");
  const std::string malformed = TempPath("status_malformed");
  const std::string invalid = TempPath("status_invalid");
  const std::vector<Row> rows = {
      {"missing file", missing, std::nullopt,
       "topology_config " + missing + ": cannot read topology file"},
      {"malformed YAML", malformed, "zones:\n  - name: z1\n    switches: [\n",
       "topology_config " + malformed + ":4:1: not valid YAML"},
      {"node listed twice", invalid,
       "zones:\n  - {name: z1, switches: [{name: s1, racks: [{name: r1, nodes: [n0, n0]}]}]}\n",
       "topology_config " + invalid + ":2:"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    std::remove(row.path.c_str());
    if (row.content) WriteFile(row.path, *row.content);
    ClusterState cluster;
    ASSERT_TRUE(cluster.AddNode(GpuNode(Layout::kNvlink)).ok());
    ManualClock clock;
    framework::Policy policy;
    policy.plugins["topology"] = {{"topology_config", row.path}};
    auto fw = framework::Framework::Create(InTreeRegistry(), policy, &clock);
    ASSERT_TRUE(fw.ok()) << fw.status().ToString();

    std::string message;
    EXPECT_EQ(StatusOf(**fw, &message), framework::PluginStatus::kError);
    EXPECT_EQ(message.rfind(row.expected_message, 0), 0u) << message;
    // The scheduler goes on without the plugin.
    const framework::Decision d = (*fw)->Schedule(MakeTask(1, "t", "", {}, 4), cluster);
    EXPECT_TRUE(d.scheduled) << d.reason;

    WriteFile(row.path, kAppendixExample);
    EXPECT_TRUE((*fw)->ReloadPlugin("topology").ok());
    EXPECT_EQ(StatusOf(**fw, &message), framework::PluginStatus::kActive);
    EXPECT_EQ(message, "");
  }
}

TEST(TopologyConfigTest, ChangedFileIsReloadedAtMostOncePerSecond) {
  const std::string path = TempPath("reload_due");
  WriteFile(path, kAppendixExample);
  ClusterState cluster;
  ASSERT_TRUE(cluster.AddNode(GpuNode(Layout::kNvlink)).ok());
  ManualClock clock(1'000'000);
  framework::Policy policy;
  policy.plugins["topology"] = {{"topology_config", path}};
  auto fw = framework::Framework::Create(InTreeRegistry(), policy, &clock);
  ASSERT_TRUE(fw.ok()) << fw.status().ToString();
  ASSERT_EQ(StatusOf(**fw), framework::PluginStatus::kActive);

  struct Step {
    const char* name;
    const char* write;  // new file content, or null
    int64_t advance_ms;
    framework::PluginStatus expected;
  };
  const std::vector<Step> steps = {
      {"broken, but checked less than a second ago", "zones: {", 999,
       framework::PluginStatus::kActive},
      {"a second after the last check", nullptr, 1, framework::PluginStatus::kError},
      {"fixed, within the second", kAppendixExample, 500, framework::PluginStatus::kError},
      {"fixed, after the second", nullptr, 500, framework::PluginStatus::kActive},
      {"unchanged: stays active", nullptr, 5000, framework::PluginStatus::kActive},
  };
  TaskKey key = 1;
  for (const Step& step : steps) {
    SCOPED_TRACE(step.name);
    if (step.write) WriteFile(path, step.write);
    clock.Advance(step.advance_ms);
    // What the server's watcher does every half second.
    for (const auto& r : (*fw)->StartDueReloads()) {
      r.job.load();
      (void)(*fw)->FinishReload(r);
    }
    const framework::Decision d = (*fw)->Schedule(MakeTask(key++, "t", "", {}, 1), cluster);
    EXPECT_TRUE(d.scheduled) << d.reason;
    EXPECT_EQ(StatusOf(**fw), step.expected);
  }
}

TEST(TopologyConfigTest, ReloadReadsWithoutTheLockAndShowsConfiguring) {
  const std::string path = TempPath("two_steps");
  WriteFile(path, kAppendixExample);
  ManualClock clock(1'000'000);
  framework::Policy policy;
  policy.plugins["topology"] = {{"topology_config", path}};
  auto fw = framework::Framework::Create(InTreeRegistry(), policy, &clock);
  ASSERT_TRUE(fw.ok()) << fw.status().ToString();
  WriteFile(path, "zones: {");
  clock.Advance(1000);
  std::vector<framework::Framework::PendingReload> due = (*fw)->StartDueReloads();
  ASSERT_EQ(due.size(), 1u);
  // Started: configuring, and the plugin still takes part with what it had.
  EXPECT_EQ(StatusOf(**fw), framework::PluginStatus::kConfiguring);
  ClusterState cluster;
  ASSERT_TRUE(cluster.AddNode(GpuNode(Layout::kNvlink)).ok());
  const framework::Decision d =
      (*fw)->Schedule(MakeTask(1, "t", "", {}, 2), cluster, {.explain = true});
  ASSERT_TRUE(d.scheduled);
  const auto& names = d.explanation->score_plugins;
  EXPECT_NE(std::find(names.begin(), names.end(), "topology"), names.end());
  // Read (here, as the watcher does without the lock), then installed.
  due[0].job.load();
  EXPECT_EQ(StatusOf(**fw), framework::PluginStatus::kConfiguring);
  EXPECT_EQ((*fw)->FinishReload(due[0]).code(), StatusCode::kUnavailable);
  EXPECT_EQ(StatusOf(**fw), framework::PluginStatus::kError);
  // Settings applied while a reload runs win: the late reload is dropped.
  WriteFile(path, kAppendixExample);
  clock.Advance(1000);
  due = (*fw)->StartDueReloads();
  ASSERT_EQ(due.size(), 1u);
  WriteFile(path, "zones: {");
  due[0].job.load();
  framework::PluginPatch patch;
  patch.config = nlohmann::json{{"topology_config", ""}};
  ASSERT_TRUE((*fw)->UpdatePlugin("topology", patch).ok());
  EXPECT_TRUE((*fw)->FinishReload(due[0]).ok());
  EXPECT_EQ(StatusOf(**fw), framework::PluginStatus::kActive);
}

TEST(TopologyConfigTest, NoClockNeverReloads) {
  const std::string path = TempPath("no_clock");
  WriteFile(path, kAppendixExample);
  framework::ReasonTable reasons;
  Topology topology(framework::PluginDeps{&reasons, nullptr});
  ASSERT_TRUE(topology.Configure({"", {{"topology_config", path}}}).ok());
  WriteFile(path, "zones: {");
  EXPECT_FALSE(topology.ReloadDue());
  EXPECT_EQ(topology.Reload().code(), StatusCode::kUnavailable);
}

TEST(TopologyConfigTest, ConfigValues) {
  const std::string good = TempPath("config_good");
  WriteFile(good, kAppendixExample);
  struct Row {
    const char* name;
    nlohmann::json config;
    StatusCode expected;
  };
  const std::vector<Row> rows = {
      {"absent: the nodes' own positions", nlohmann::json::object(), StatusCode::kOk},
      {"empty string", {{"topology_config", ""}}, StatusCode::kOk},
      {"null", {{"topology_config", nullptr}}, StatusCode::kOk},
      {"a readable file", {{"topology_config", good}}, StatusCode::kOk},
      {"a number", {{"topology_config", 5}}, StatusCode::kInvalidArgument},
      {"a list",
       {{"topology_config", nlohmann::json::array({"a", "b"})}},
       StatusCode::kInvalidArgument},
      {"a missing file",
       {{"topology_config", TempPath("config_missing")}},
       StatusCode::kUnavailable},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    Harness h;
    const Status st = h.topology.Configure({"", row.config});
    EXPECT_EQ(st.code(), row.expected) << st.ToString();
    if (row.expected == StatusCode::kInvalidArgument) {
      EXPECT_NE(st.message().find("plugins.topology.topology_config"), std::string::npos)
          << st.message();
    }
  }
}

TEST(TopologyConfigTest, WrongTypeThroughTheFrameworkKeepsTheOldSettings) {
  ManualClock clock;
  auto fw = framework::Framework::Create(InTreeRegistry(), {}, &clock);
  ASSERT_TRUE(fw.ok()) << fw.status().ToString();
  framework::PluginPatch patch;
  patch.config = nlohmann::json{{"topology_config", 42}};
  const Status st = (*fw)->UpdatePlugin("topology", patch);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("plugins.topology.topology_config"), std::string::npos);
  EXPECT_EQ(StatusOf(**fw), framework::PluginStatus::kActive);
  EXPECT_FALSE((*fw)->GetPlugin("topology")->settings.config.contains("topology_config"));
}

}  // namespace
}  // namespace hf::plugins
