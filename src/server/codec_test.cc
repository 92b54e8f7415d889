#include "server/codec.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "framework/framework.h"
#include "framework/registry.h"

namespace hf::server {
namespace {

using nlohmann::json;

enum class Parser { kTask, kBatch, kNode, kPluginPatch, kConfigPatch };

// One malformed request: the body as it arrives, the parser the route would
// use, and the text the error message must contain (the field it names).
struct BadRow {
  std::string label;
  Parser parser;
  std::string body;
  std::string want;
};

std::ostream& operator<<(std::ostream& os, const BadRow& r) { return os << r.label; }

// Runs a body through ParseJsonBody and then the route's parser, as the
// router does, returning the first error.
Status Decode(Parser p, const std::string& body) {
  Result<json> doc = ParseJsonBody(body);
  if (!doc.ok()) return doc.status();
  switch (p) {
    case Parser::kTask:
      return ParseTaskSubmission(*doc).status();
    case Parser::kBatch:
      return ParseTaskBatch(*doc).status();
    case Parser::kNode:
      return ParseNodeSpec(*doc).status();
    case Parser::kPluginPatch:
      return ParsePluginPatch(*doc).status();
    case Parser::kConfigPatch:
      return ParseSchedulerConfigPatch(*doc).status();
  }
  return Internal("unreachable");
}

std::string Nested(int levels) { return std::string(levels, '[') + std::string(levels, ']'); }

// A body whose top-level object holds arrays nested so the whole document is
// `levels` deep.
std::string DeepObject(int levels) { return "{\"name\":" + Nested(levels - 1) + "}"; }

// {"a":{"a":...{}...}}, `levels` objects deep.
std::string NestedObjects(int levels) {
  std::string s;
  for (int i = 1; i < levels; ++i) s += "{\"a\":";
  return s + "{}" + std::string(levels - 1, '}');
}

std::string TasksJson(int n) {
  std::string s = "{\"tasks\":[";
  for (int i = 0; i < n; ++i)
    s += (i ? ",{\"name\":\"t" : "{\"name\":\"t") + std::to_string(i) + "\"}";
  return s + "]}";
}

std::vector<BadRow> BadRows() {
  const std::string t = R"({"name":"a",)";
  return {
      // Bodies that are not a single JSON object.
      {"empty body", Parser::kTask, "", "request body is empty"},
      {"blank body", Parser::kTask, " \r\n\t", "request body is empty"},
      {"top-level array", Parser::kTask, "[]", "must be a JSON object, got array"},
      {"top-level number", Parser::kTask, "42", "must be a JSON object, got number"},
      {"top-level string", Parser::kTask, R"("x")", "must be a JSON object, got string"},
      {"top-level null", Parser::kTask, "null", "must be a JSON object, got null"},
      {"unterminated object", Parser::kTask, "{", "malformed JSON at byte 2"},
      {"trailing garbage", Parser::kTask, R"({"name":"a"} x)", "malformed JSON at byte 14"},
      {"two documents", Parser::kTask, R"({"name":"a"}{})", "malformed JSON at byte 13"},
      // Vendors.
      {"gpu_vendors not a list", Parser::kTask, t + R"("requests":{"gpu":1,"gpu_vendors":"amd"}})",
       "requests.gpu_vendors"},
      {"gpu_vendors upper case", Parser::kTask, t + R"("requests":{"gpu":1,"gpu_vendors":["AMD"]}})",
       "requests.gpu_vendors[0]"},
      {"gpu_vendors empty name", Parser::kTask, t + R"("requests":{"gpu":1,"gpu_vendors":["amd",""]}})",
       "requests.gpu_vendors[1]"},
      {"device vendor with a space", Parser::kNode,
       R"({"name":"n","gpus":[{"index":0,"model":"X","vendor":"big corp"}]})", "vendor"},
      {"exclusive vendors not a list", Parser::kConfigPatch, R"({"exclusive_gpu_vendors":"huawei"})",
       "exclusive_gpu_vendors"},
      {"exclusive vendor bad name", Parser::kConfigPatch, R"({"exclusive_gpu_vendors":["huawei","Ha"]})",
       "exclusive_gpu_vendors[1]"},
      {"trailing comma", Parser::kTask, R"({"name":"a",})", "malformed JSON at byte"},
      {"NaN literal", Parser::kTask, R"({"name":"a","priority":NaN})", "malformed JSON at byte"},
      {"Infinity literal", Parser::kTask, R"({"name":"a","priority":Infinity})",
       "malformed JSON at byte"},
      {"number beyond double", Parser::kTask, R"({"name":"a","priority":1e400})", "malformed JSON"},
      {"single quotes", Parser::kTask, "{'name':'a'}", "malformed JSON at byte 2"},
      {"comment", Parser::kTask, R"({"name":"a" /* c */})", "malformed JSON at byte"},
      {"bad UTF-8", Parser::kTask, "{\"name\":\"\xff\"}", "malformed JSON at byte"},
      {"raw control char", Parser::kTask, "{\"name\":\"a\x01\"}", "malformed JSON at byte"},
      {"duplicate key", Parser::kTask, R"({"name":"a","name":"b"})", "duplicate key \"name\""},
      {"duplicate nested key", Parser::kTask, t + R"("requests":{"gpu":1,"gpu":2}})",
       "duplicate key \"gpu\""},
      {"33 levels", Parser::kTask, DeepObject(33), "JSON nested deeper than 32 levels"},
      {"33 nested objects", Parser::kTask, NestedObjects(33), "nested deeper than 32 levels"},
      {"100000 levels", Parser::kTask, DeepObject(100000), "nested deeper than 32 levels"},

      // Task submission.
      {"task without name", Parser::kTask, "{}", "name is required"},
      {"empty name", Parser::kTask, R"({"name":""})", "name must be 1 to 253 characters"},
      {"upper-case name", Parser::kTask, R"({"name":"Train"})", "name must be 1 to 253"},
      {"name starts with dash", Parser::kTask, R"({"name":"-a"})", "name must be 1 to 253"},
      {"name with space", Parser::kTask, R"({"name":"a b"})", "name must be 1 to 253"},
      {"name of 254 chars", Parser::kTask, R"({"name":")" + std::string(254, 'a') + "\"}",
       "name must be 1 to 253"},
      {"name not a string", Parser::kTask, R"({"name":5})", "name must be a string, got number"},
      {"unknown top-level field", Parser::kTask, t + R"("nme":1})", "unknown field \"nme\""},
      {"unknown requests field", Parser::kTask, t + R"("requests":{"gpus":1}})",
       "unknown field \"requests.gpus\""},
      {"requests not an object", Parser::kTask, t + R"("requests":[]})",
       "requests must be an object, got array"},
      {"gpu as string", Parser::kTask, t + R"("requests":{"gpu":"1"}})",
       "requests.gpu must be an integer, got string"},
      {"gpu fractional", Parser::kTask, t + R"("requests":{"gpu":1.5}})",
       "requests.gpu must be an integer"},
      {"gpu negative", Parser::kTask, t + R"("requests":{"gpu":-1}})", "requests.gpu must be >= 0"},
      {"gpu above int32", Parser::kTask, t + R"("requests":{"gpu":2147483648}})",
       "requests.gpu must be <= 2147483647"},
      {"cpu_milli 1e30", Parser::kTask, t + R"("requests":{"cpu_milli":1e30}})",
       "requests.cpu_milli must be <= 9223372036854775807"},
      {"cpu_milli uint64 max", Parser::kTask,
       t + R"("requests":{"cpu_milli":18446744073709551615}})",
       "requests.cpu_milli must be <= 9223372036854775807"},
      {"memory_mib beyond uint64", Parser::kTask,
       t + R"("requests":{"memory_mib":99999999999999999999999}})",
       "requests.memory_mib must be <="},
      {"memory_mib negative", Parser::kTask, t + R"("requests":{"memory_mib":-5}})",
       "requests.memory_mib must be >= 0"},
      {"gpu_milli zero", Parser::kTask, t + R"("requests":{"gpu":1,"gpu_milli":0}})",
       "requests.gpu_milli must be in 1..1000"},
      {"gpu_milli above 1000", Parser::kTask, t + R"("requests":{"gpu":1,"gpu_milli":1001}})",
       "requests.gpu_milli must be in 1..1000"},
      {"gpu_memory_mib bool", Parser::kTask, t + R"("requests":{"gpu_memory_mib":true}})",
       "requests.gpu_memory_mib must be an integer, got boolean"},
      {"gpu_models a string", Parser::kTask, t + R"("requests":{"gpu_models":"A100"}})",
       "requests.gpu_models must be an array of strings"},
      {"gpu_models of numbers", Parser::kTask, t + R"("requests":{"gpu_models":[1]}})",
       "requests.gpu_models[0] must be a string"},
      {"gpu_models empty entry", Parser::kTask, t + R"("requests":{"gpu_models":["H100",""]}})",
       "requests.gpu_models[1] must not be empty"},
      {"priority above int32", Parser::kTask, t + R"("priority":2147483648})",
       "priority must be <= 2147483647"},
      {"priority below int32", Parser::kTask, t + R"("priority":-2147483649})",
       "priority must be >= -2147483648"},
      {"priority string", Parser::kTask, t + R"("priority":"high"})",
       "priority must be an integer, got string"},
      {"priority fractional", Parser::kTask, t + R"("priority":1.5})",
       "priority must be an integer"},
      {"unknown kind", Parser::kTask, t + R"("kind":"service"})",
       "kind must be \"batch\" or \"inference\""},
      {"kind number", Parser::kTask, t + R"("kind":1})", "kind must be a string"},
      {"rdma_required string", Parser::kTask, t + R"("rdma_required":"true"})",
       "rdma_required must be a boolean, got string"},
      {"preemptible number", Parser::kTask, t + R"("preemptible":1})",
       "preemptible must be a boolean, got number"},
      {"requeue_on_node_loss string", Parser::kTask, t + R"("requeue_on_node_loss":"no"})",
       "requeue_on_node_loss must be a boolean, got string"},
      {"depends_on string", Parser::kTask, t + R"("depends_on":"db"})",
       "depends_on must be an array of strings"},
      {"depends_on bad name", Parser::kTask, t + R"("depends_on":["ok","Bad Name"]})",
       "depends_on[1] must be 1 to 253"},
      {"command string", Parser::kTask, t + R"("command":"python train.py"})",
       "command must be an array of strings"},
      {"command number", Parser::kTask, t + R"("command":[1]})", "command[0] must be a string"},
      {"env value number", Parser::kTask, t + R"("env":{"A":1}})",
       "env.A must be a string, got number"},
      {"env array", Parser::kTask, t + R"("env":[]})", "env must be an object of strings"},
      {"env empty key", Parser::kTask, t + R"("env":{"":"x"}})", "env must not have an empty key"},
      {"group bad name", Parser::kTask, t + R"("group":"Bad"})", "group must be 1 to 253"},
      {"group number", Parser::kTask, t + R"("group":3})", "group must be a string"},

      // Batch submission.
      {"batch tasks object", Parser::kBatch, R"({"tasks":{}})",
       "tasks must be an array, got object"},
      {"batch without tasks", Parser::kBatch, "{}", "tasks is required"},
      {"batch empty", Parser::kBatch, R"({"tasks":[]})", "tasks must not be empty"},
      {"batch unknown field", Parser::kBatch, R"({"tasks":[{"name":"a"}],"extra":1})",
       "unknown field \"extra\""},
      {"batch element 3 bad gpu", Parser::kBatch,
       R"({"tasks":[{"name":"a"},{"name":"b"},{"name":"c"},{"name":"d","requests":{"gpu":"x"}}]})",
       "tasks[3].requests.gpu must be an integer"},
      {"batch element not object", Parser::kBatch, R"({"tasks":[{"name":"a"},5]})",
       "tasks[1] must be an object, got number"},
      {"batch unknown nested", Parser::kBatch, R"({"tasks":[{"name":"a","requests":{"gpus":1}}]})",
       "unknown field \"tasks[0].requests.gpus\""},
      {"batch validate prefixed", Parser::kBatch,
       R"({"tasks":[{"name":"a","requests":{"gpu":1,"gpu_milli":0}}]})",
       "tasks[0].requests.gpu_milli must be in 1..1000"},
      {"batch element without name", Parser::kBatch, R"({"tasks":[{"name":"a"},{}]})",
       "tasks[1].name is required"},
      {"batch of 1001", Parser::kBatch, TasksJson(1001), "at most 1000 per batch"},

      // Node inventory.
      {"node without name", Parser::kNode, "{}", "name is required"},
      {"node bad name", Parser::kNode, R"({"name":"GPU_A1"})", "name must be 1 to 253"},
      {"node unknown gpu field", Parser::kNode, R"({"name":"n","gpus":[{"index":0,"memory":1}]})",
       "unknown field \"gpus[0].memory\""},
      {"gpu without index", Parser::kNode, R"({"name":"n","gpus":[{"model":"T4"}]})",
       "gpus[0].index is required"},
      {"gpu index negative", Parser::kNode, R"({"name":"n","gpus":[{"index":-1}]})",
       "gpus[0].index must be >= 0"},
      {"gpu numa below -1", Parser::kNode, R"({"name":"n","gpus":[{"index":0,"numa":-2}]})",
       "gpus[0].numa must be >= -1"},
      {"gpu memory string", Parser::kNode,
       R"({"name":"n","gpus":[{"index":0},{"index":1,"memory_mib":"80G"}]})",
       "gpus[1].memory_mib must be an integer, got string"},
      {"duplicate gpu index", Parser::kNode, R"({"name":"n","gpus":[{"index":0},{"index":0}]})",
       "duplicate GPU index 0"},
      {"gpus object", Parser::kNode, R"({"name":"n","gpus":{}})", "gpus must be an array"},
      {"rdma empty name", Parser::kNode, R"({"name":"n","rdma":[{"name":""}]})",
       "rdma[0].name must not be empty"},
      {"rdma unknown field", Parser::kNode, R"({"name":"n","rdma":[{"name":"mlx5_0","port":1}]})",
       "unknown field \"rdma[0].port\""},
      {"topology unknown field", Parser::kNode, R"({"name":"n","topology":{"zone":"z","row":"1"}})",
       "unknown field \"topology.row\""},
      {"topology switch number", Parser::kNode, R"({"name":"n","topology":{"switch":1}})",
       "topology.switch must be a string"},
      {"label value number", Parser::kNode, R"({"name":"n","labels":{"pool":1}})",
       "labels.pool must be a string"},
      {"cpu_milli string", Parser::kNode, R"({"name":"n","cpu_milli":"96000"})",
       "cpu_milli must be an integer, got string"},
      {"usage_file over the API", Parser::kNode, R"({"name":"n","usage_file":"/tmp/u.yaml"})",
       "usage_file is only allowed for nodes declared in a file"},
      {"node unknown field", Parser::kNode, R"({"name":"n","state":"Ready"})",
       "unknown field \"state\""},

      // PUT /plugins/{name}.
      {"enabled string", Parser::kPluginPatch, R"({"enabled":"true"})",
       "enabled must be a boolean, got string"},
      {"weight negative", Parser::kPluginPatch, R"({"weight":-1})",
       "weight must be a finite number >= 0"},
      {"weight string", Parser::kPluginPatch, R"({"weight":"2"})",
       "weight must be a number, got string"},
      {"weight null", Parser::kPluginPatch, R"({"weight":null})",
       "weight must be a number, got null"},
      {"mode number", Parser::kPluginPatch, R"({"mode":1})", "mode must be a string, got number"},
      {"config array", Parser::kPluginPatch, R"({"config":[]})",
       "config must be an object, got array"},
      {"plugin unknown field", Parser::kPluginPatch, R"({"enabled":true,"enable":true})",
       "unknown field \"enable\""},
      {"plugin patch array", Parser::kPluginPatch, R"([{"enabled":true}])",
       "must be a JSON object, got array"},

      // PUT /scheduler/config.
      {"load_threshold zero", Parser::kConfigPatch, R"({"load_threshold":0})",
       "load_threshold must be a number in (0, 1]"},
      {"load_threshold above 1", Parser::kConfigPatch, R"({"load_threshold":1.5})",
       "load_threshold must be a number in (0, 1]"},
      {"gpu_load_threshold negative", Parser::kConfigPatch, R"({"gpu_load_threshold":-0.1})",
       "gpu_load_threshold must be a number in (0, 1]"},
      {"memory_threshold string", Parser::kConfigPatch, R"({"memory_threshold":"0.5"})",
       "memory_threshold must be a number, got string"},
      {"load_threshold null", Parser::kConfigPatch, R"({"load_threshold":null})",
       "load_threshold must be a number, got null"},
      {"score weight negative", Parser::kConfigPatch, R"({"score_weights":{"binpack":-1}})",
       "score_weights.binpack must be a finite number >= 0"},
      {"score weight string", Parser::kConfigPatch, R"({"score_weights":{"binpack":"x"}})",
       "score_weights.binpack must be a number, got string"},
      {"score_weights array", Parser::kConfigPatch, R"({"score_weights":[1]})",
       "score_weights must be an object, got array"},
      {"config unknown key", Parser::kConfigPatch, R"({"load_thresh":0.5})",
       "unknown field \"load_thresh\""},
  };
}

class CodecMalformedTest : public testing::TestWithParam<BadRow> {};

TEST_P(CodecMalformedTest, RefusedWithMessageNamingTheField) {
  const BadRow& row = GetParam();
  Status s = Decode(row.parser, row.body);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find(row.want), std::string::npos)
      << "message: " << s.message() << "\nwanted: " << row.want;
  EXPECT_LT(s.message().size(), 400u) << "messages must stay short even for hostile input";
}

INSTANTIATE_TEST_SUITE_P(Codec, CodecMalformedTest, testing::ValuesIn(BadRows()));

TEST(CodecMalformedCorpusTest, HoldsAtLeastSixtyRows) { EXPECT_GE(BadRows().size(), 60u); }

TEST(CodecJsonBodyTest, ThirtyTwoLevelsAreAccepted) {
  Result<json> doc = ParseJsonBody(DeepObject(32));
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  EXPECT_TRUE(ParseJsonBody(NestedObjects(32)).ok());
  EXPECT_TRUE(ParseJsonBody(DeepObject(2), 2).ok());
  EXPECT_FALSE(ParseJsonBody(DeepObject(3), 2).ok());
}

TEST(CodecJsonBodyTest, SameKeyInSiblingObjectsIsNotADuplicate) {
  EXPECT_TRUE(ParseJsonBody(R"({"a":{"k":1},"b":{"k":2},"c":[{"k":1},{"k":2}]})").ok());
}

TEST(CodecJsonBodyTest, LongGarbageIsNotEchoedInFull) {
  std::string body = "{\"name\":\"" + std::string(100000, 'a') + "\" x}";
  Result<json> doc = ParseJsonBody(body);
  ASSERT_FALSE(doc.ok());
  EXPECT_LT(doc.status().message().size(), 400u);
}

constexpr char kAppendixTask[] =
    R"({"name": "llama-ft-0", "group": "llama-ft", "priority": 100, "kind": "batch",
 "requests": {"cpu_milli": 8000, "memory_mib": 65536, "gpu": 4, "gpu_milli": 1000,
              "gpu_memory_mib": 0, "gpu_models": ["A100-80G", "H100"]},
 "rdma_required": true, "depends_on": ["feature-store"], "preemptible": true,
 "requeue_on_node_loss": false, "command": ["python3", "train.py"], "env": {"EPOCHS": "3"}})";

TEST(CodecTaskTest, AppendixExampleParses) {
  Result<json> doc = ParseJsonBody(kAppendixTask);
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  Result<Task> t = ParseTaskSubmission(*doc);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->name, "llama-ft-0");
  EXPECT_EQ(t->group, "llama-ft");
  EXPECT_EQ(t->priority, 100);
  EXPECT_EQ(t->kind, TaskKind::kBatch);
  EXPECT_EQ(t->requests.cpu_milli, 8000);
  EXPECT_EQ(t->requests.memory_mib, 65536);
  EXPECT_EQ(t->requests.gpu, 4);
  EXPECT_EQ(t->requests.gpu_milli, 1000);
  EXPECT_EQ(t->requests.gpu_memory_mib, 0);
  EXPECT_EQ(t->requests.gpu_models, (std::vector<std::string>{"A100-80G", "H100"}));
  EXPECT_TRUE(t->rdma_required);
  EXPECT_EQ(t->depends_on, std::vector<std::string>{"feature-store"});
  EXPECT_TRUE(t->preemptible);
  EXPECT_FALSE(t->requeue_on_node_loss);
  EXPECT_EQ(t->command, (std::vector<std::string>{"python3", "train.py"}));
  EXPECT_EQ(t->env, (std::map<std::string, std::string>{{"EPOCHS", "3"}}));
  // Writing it back gives the same document, with the fields the appendix
  // leaves to their defaults.
  json back = *doc;
  back["group_placement"] = "pack";
  back["secret_env"] = json::object();
  back["queue"] = "default";
  back["requests"]["gpu_vendors"] = json::array();
  EXPECT_EQ(TaskToJson(*t), back);
}

TEST(CodecTaskTest, RoundTripsThroughJson) {
  Task t;
  t.name = "svc.a_1";
  t.priority = -7;
  t.kind = TaskKind::kInference;
  t.requests = {.cpu_milli = 500,
                .memory_mib = 1024,
                .gpu = 1,
                .gpu_milli = 250,
                .gpu_memory_mib = 8192,
                .gpu_models = {"T4"}};
  t.preemptible = false;
  t.env = {{"MODE", "serve"}};
  Result<Task> back = ParseTaskSubmission(json::parse(TaskToJson(t).dump()));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(TaskToJson(*back), TaskToJson(t));
  EXPECT_EQ(back->kind, TaskKind::kInference);
  EXPECT_EQ(back->requests.gpu_milli, 250);
  EXPECT_FALSE(back->preemptible);
}

TEST(CodecTaskTest, DefaultsApplyWhenFieldsAreAbsent) {
  Result<Task> t = ParseTaskSubmission(json{{"name", "a"}});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->requests.gpu_milli, 1000);
  EXPECT_TRUE(t->preemptible);
  EXPECT_TRUE(t->requeue_on_node_loss);
  EXPECT_EQ(t->kind, TaskKind::kBatch);
  EXPECT_EQ(t->priority, 0);
}

TEST(CodecTaskTest, IntegerFieldsTakeJsonIntegersOnly) {
  struct Row {
    const char* body;
    const char* field;
  };
  for (const Row& row : {Row{R"({"name":"a","requests":{"gpu":2.0}})", "requests.gpu"},
                         Row{R"({"name":"a","priority":-0.0})", "priority"},
                         Row{R"({"name":"a","requests":{"cpu_milli":1e-400}})", "requests.cpu_milli"},
                         Row{R"({"name":"a","requests":{"gpu_milli":5e2}})", "requests.gpu_milli"}}) {
    Result<Task> t = ParseTaskSubmission(json::parse(row.body));
    ASSERT_FALSE(t.ok()) << row.body;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find(std::string(row.field) + " must be an integer"),
              std::string::npos)
        << t.status().message();
  }
}

TEST(CodecTaskTest, EmptyGpuModelsMeansAnyModel) {
  // `gpu_models: []` is the same request as no gpu_models: any model.
  Result<Task> empty = ParseTaskSubmission(json::parse(R"({"name":"a","requests":{"gpu":1,"gpu_models":[]}})"));
  Result<Task> absent = ParseTaskSubmission(json::parse(R"({"name":"a","requests":{"gpu":1}})"));
  ASSERT_TRUE(empty.ok() && absent.ok());
  EXPECT_EQ(TaskToJson(*empty), TaskToJson(*absent));
}

TEST(CodecTaskTest, BatchParsesEveryTask) {
  Result<std::vector<Task>> b = ParseTaskBatch(json::parse(TasksJson(1000)));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ(b->size(), 1000u);
  EXPECT_EQ((*b)[999].name, "t999");
}

TEST(CodecNameTest, Rule) {
  struct Row {
    std::string name;
    bool valid;
  };
  for (const Row& r : std::vector<Row>{{"a", true},
                                       {"llama-ft-0", true},
                                       {"a.b_c-d", true},
                                       {std::string(253, 'x'), true},
                                       {std::string(254, 'x'), false},
                                       {"", false},
                                       {"A", false},
                                       {".a", false},
                                       {"a_", false},
                                       {"a/b", false}}) {
    EXPECT_EQ(IsValidName(r.name), r.valid) << r.name;
  }
}

constexpr char kAppendixNode[] = R"({"name": "gpu-a1", "labels": {"pool": "training"},
  "cpu_milli": 96000, "memory_mib": 786432,
  "gpus": [{"index": 0, "model": "A100-80G", "vendor": "nvidia", "memory_mib": 81920, "numa": 0, "pcie_switch": 0, "fabric_domain": 0},
           {"index": 1, "model": "A100-80G", "vendor": "nvidia", "memory_mib": 81920, "numa": 0, "pcie_switch": 0, "fabric_domain": 0}],
  "rdma": [{"name": "mlx5_0", "numa": 0, "pcie_switch": 0}],
  "topology": {"zone": "z1", "switch": "s1", "rack": "r1"}})";

TEST(CodecNodeTest, AppendixInventoryParsesAndRoundTrips) {
  Result<NodeSpec> n = ParseNodeSpec(json::parse(kAppendixNode));
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->name, "gpu-a1");
  EXPECT_EQ(n->labels.at("pool"), "training");
  EXPECT_EQ(n->cpu_milli, 96000);
  ASSERT_EQ(n->gpus.size(), 2u);
  EXPECT_EQ(n->gpus[1].index, 1);
  EXPECT_EQ(n->gpus[1].memory_mib, 81920);
  EXPECT_EQ(n->gpus[1].uuid, "");
  ASSERT_EQ(n->rdma.size(), 1u);
  EXPECT_EQ(n->rdma[0].name, "mlx5_0");
  EXPECT_EQ(n->topology.switch_name, "s1");
  Result<NodeSpec> back = ParseNodeSpec(NodeSpecToJson(*n));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(NodeSpecToJson(*back), NodeSpecToJson(*n));
}

TEST(CodecAllocationTest, Shape) {
  Allocation a{.node = 3,
               .cpu_milli = 8000,
               .memory_mib = 1024,
               .gpus = {{.index = 2, .milli = 500, .memory_mib = 4096}},
               .rdma_device = "mlx5_1"};
  EXPECT_EQ(AllocationToJson(a, "gpu-a1"), json::parse(R"({"node":"gpu-a1","cpu_milli":8000,
      "memory_mib":1024,"gpus":[{"index":2,"milli":500,"memory_mib":4096}],"rdma_device":"mlx5_1"})"));
}

std::unique_ptr<framework::Framework> DefaultFramework() {
  auto fw = framework::Framework::Create(plugins::InTreeRegistry(), {}, nullptr);
  HF_CHECK(fw.ok());
  return std::move(fw).value();
}

json PluginJson(const framework::Framework& fw, const std::string& name) {
  Result<framework::PluginInfo> info = fw.GetPlugin(name);
  HF_CHECK(info.ok());
  return PluginInfoToJson(*info);
}

// The vision's GET /plugins example, verbatim.
constexpr char kVisionPlugins[] = R"({
  "plugins": [
    {"name": "binpack", "type": "Score", "enabled": true, "weight": 1, "status": "active", "config": {}},
    {"name": "spread", "type": "Score", "enabled": false, "weight": 1, "status": "inactive", "config": {}}
  ]
})";

TEST(CodecPluginTest, BinpackAndSpreadMatchTheVision) {
  auto fw = DefaultFramework();
  const std::set<std::string> vision_keys = {"name",   "type",   "enabled",
                                             "weight", "status", "config"};
  const std::set<std::string> extra_keys = {"extension_points", "required", "mode", "modes",
                                            "message"};
  for (const json& want : json::parse(kVisionPlugins)["plugins"]) {
    json got = PluginJson(*fw, want["name"]);
    json vision_part = json::object();
    for (const auto& [k, v] : got.items()) {
      if (vision_keys.count(k)) {
        vision_part[k] = v;
      } else {
        EXPECT_TRUE(extra_keys.count(k)) << "unexpected key " << k;
      }
    }
    // dump() compares the text too: weight 1, not 1.0.
    EXPECT_EQ(vision_part.dump(), want.dump());
  }
}

TEST(CodecPluginTest, TypeIsThePrimaryPoint) {
  auto fw = DefaultFramework();
  struct Row {
    std::string plugin, type, points;
  };
  for (const Row& r : std::vector<Row>{{"binpack", "Score", "Score,Bind"},
                                       {"fit", "Filter", "Filter"},
                                       {"preempt", "PostFilter", "PostFilter"},
                                       {"rdma", "Score", "Filter,PreScore,Score,Bind"}}) {
    json j = PluginJson(*fw, r.plugin);
    EXPECT_EQ(j["type"], r.type) << r.plugin;
    EXPECT_EQ(j["extension_points"], r.points) << r.plugin;
  }
  json preempt = PluginJson(*fw, "preempt");
  EXPECT_EQ(preempt["mode"], "scheduled");
  EXPECT_FALSE(PluginJson(*fw, "binpack").contains("mode"));
  EXPECT_EQ(PluginJson(*fw, "fit")["required"], true);
}

TEST(CodecPluginTest, FractionalWeightStaysANumber) {
  framework::PluginInfo p;
  p.name = "x";
  p.settings.weight = 2.5;
  EXPECT_EQ(PluginInfoToJson(p)["weight"].dump(), "2.5");
}

TEST(CodecPluginTest, PatchKeepsAbsentFieldsEmpty) {
  Result<framework::PluginPatch> p =
      ParsePluginPatch(json::parse(R"({"enabled": true, "weight": 2})"));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->enabled, true);
  EXPECT_EQ(p->weight, 2.0);
  EXPECT_FALSE(p->mode.has_value());
  EXPECT_FALSE(p->config.has_value());
  Result<framework::PluginPatch> q =
      ParsePluginPatch(json::parse(R"({"mode":"running","config":{"topology_config":"/t.yaml"}})"));
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->mode, "running");
  EXPECT_EQ((*q->config)["topology_config"], "/t.yaml");
}

TEST(CodecSchedulerConfigTest, DefaultsShape) {
  json j = SchedulerConfigToJson(framework::SchedulerConfig{}, {{"binpack", 1.0}, {"rdma", 0.5}});
  EXPECT_EQ(j, json::parse(R"({"load_threshold":0.8,"gpu_load_threshold":0.9,
      "memory_threshold":0.85,"percentage_of_nodes_to_score":0,
      "exclusive_gpu_vendors":["huawei","habana"],"score_weights":{"binpack":1,"rdma":0.5}})"));
}

TEST(CodecSchedulerConfigTest, PercentageOfNodesToScoreIsAnIntegerInRange) {
  Result<SchedulerConfigPatch> p =
      ParseSchedulerConfigPatch(json::parse(R"({"percentage_of_nodes_to_score": 20})"));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->ApplyTo({}).percentage_of_nodes_to_score, 20);
  EXPECT_EQ(p->ApplyTo({}).load_threshold, 0.8);
  for (const char* bad : {R"({"percentage_of_nodes_to_score": 101})", R"({"percentage_of_nodes_to_score": -1})",
                          R"({"percentage_of_nodes_to_score": 2.5})", R"({"percentage_of_nodes_to_score": "5"})"}) {
    Result<SchedulerConfigPatch> q = ParseSchedulerConfigPatch(json::parse(bad));
    ASSERT_FALSE(q.ok()) << bad;
    EXPECT_NE(q.status().message().find("percentage_of_nodes_to_score"), std::string::npos) << bad;
  }
}

TEST(CodecSchedulerConfigTest, ExclusiveVendorsPatch) {
  Result<SchedulerConfigPatch> p = ParseSchedulerConfigPatch(json::parse(R"({"exclusive_gpu_vendors": []})"));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->ApplyTo({}).exclusive_gpu_vendors.empty());
  EXPECT_EQ(framework::SchedulerConfig{}.exclusive_gpu_vendors, (std::vector<std::string>{"huawei", "habana"}));
  Result<SchedulerConfigPatch> none = ParseSchedulerConfigPatch(json::parse(R"({"load_threshold": 0.5})"));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->ApplyTo({}).exclusive_gpu_vendors.size(), 2u);  // absent: unchanged
}

TEST(CodecNodeTest, FabricDomainAndItsEarlierName) {
  Result<NodeSpec> a = ParseNodeSpec(json::parse(
      R"({"name":"n","gpus":[{"index":0,"model":"X","nvlink_domain":3},{"index":1,"model":"Y","vendor":"amd","fabric_domain":2,"nvlink_domain":9}]})"));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->gpus[0].fabric_domain, 3);
  EXPECT_EQ(a->gpus[0].vendor, "nvidia");  // the default
  EXPECT_EQ(a->gpus[1].fabric_domain, 2);  // fabric_domain wins
  EXPECT_EQ(a->gpus[1].vendor, "amd");
}

TEST(CodecSchedulerConfigTest, PartialPatchFromTheVision) {
  Result<SchedulerConfigPatch> p = ParseSchedulerConfigPatch(
      json::parse(R"({"load_threshold": 0.85, "gpu_load_threshold": 0.9})"));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_FALSE(p->memory_threshold.has_value());
  EXPECT_FALSE(p->score_weights.has_value());
  framework::SchedulerConfig c = p->ApplyTo({});
  EXPECT_DOUBLE_EQ(c.load_threshold, 0.85);
  EXPECT_DOUBLE_EQ(c.gpu_load_threshold, 0.9);
  EXPECT_DOUBLE_EQ(c.memory_threshold, 0.85);

  Result<SchedulerConfigPatch> w = ParseSchedulerConfigPatch(
      json::parse(R"({"memory_threshold": 1, "score_weights": {"binpack": 2, "rdma": 0}})"));
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->memory_threshold, 1.0);
  EXPECT_EQ(*w->score_weights, (std::map<std::string, double>{{"binpack", 2}, {"rdma", 0}}));
}

TEST(CodecErrorTest, HttpStatusTable) {
  struct Row {
    StatusCode code;
    int http;
    std::string api;
  };
  for (const Row& r :
       std::vector<Row>{{StatusCode::kOk, 200, "ok"},
                        {StatusCode::kInvalidArgument, 400, "invalid_argument"},
                        {StatusCode::kNotFound, 404, "not_found"},
                        {StatusCode::kAlreadyExists, 409, "already_exists"},
                        {StatusCode::kConflict, 409, "conflict"},
                        {StatusCode::kFailedPrecondition, 422, "failed_precondition"},
                        {StatusCode::kResourceExhausted, 429, "resource_exhausted"},
                        {StatusCode::kUnavailable, 503, "unavailable"},
                        {StatusCode::kInternal, 500, "internal"}}) {
    EXPECT_EQ(HttpStatusFor(r.code), r.http) << r.api;
    EXPECT_EQ(StatusCodeToApiCode(r.code), r.api);
  }
}

TEST(CodecErrorTest, BodyShape) {
  EXPECT_EQ(
      ErrorBody(Conflict("spread conflicts with binpack")),
      json::parse(R"({"error":{"code":"conflict","message":"spread conflicts with binpack"}})"));
}

}  // namespace
}  // namespace hf::server
