#include "cli/manifest.h"

#include <gtest/gtest.h>

namespace hf::cli {
namespace {

using nlohmann::json;

Manifest Parse(const std::string& text) {
  Result<Manifest> m = ParseManifest(text, "f.yaml");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? *m : Manifest{};
}

std::string Error(const std::string& text) {
  Result<Manifest> m = ParseManifest(text, "f.yaml");
  EXPECT_FALSE(m.ok()) << text;
  return m.ok() ? "" : m.status().message();
}

TEST(ManifestTest, ShapesOfAFile) {
  struct Row {
    const char* what;
    const char* text;
    size_t nodes, tasks;
  };
  const Row rows[] = {
      {"one task", "name: a\nrequests: {gpu: 1}\n", 0, 1},
      {"a list", "- name: a\n- name: b\n", 0, 2},
      {"tasks:", "tasks:\n  - name: a\n  - name: b\n  - name: c\n", 0, 3},
      {"tasks: and nodes:", "nodes: [{name: n1, cpu_milli: 1000}]\ntasks: [{name: a}]\n", 1, 1},
      {"documents", "name: a\n---\nkind: node\nname: n1\n---\n- name: b\n---\n", 1, 2},
      {"kind task", "kind: Task\nname: a\n", 0, 1},
      {"a task's own kind", "kind: inference\nname: a\n", 0, 1},
      {"JSON object", R"({"name": "a", "priority": 2})", 0, 1},
      {"JSON batch", R"({"tasks": [{"name": "a"}, {"name": "b"}]})", 0, 2},
      {"JSON list", R"([{"name": "a"}, {"kind": "node", "name": "n1"}])", 1, 1},
  };
  for (const Row& r : rows) {
    Manifest m = Parse(r.text);
    EXPECT_EQ(m.nodes.size(), r.nodes) << r.what;
    EXPECT_EQ(m.tasks.size(), r.tasks) << r.what;
  }
}

TEST(ManifestTest, KindIsDroppedOnlyWhenItIsTheDocumentKind) {
  Manifest m =
      Parse("- kind: task\n  name: a\n- kind: batch\n  name: b\n- kind: NODE\n  name: n\n");
  ASSERT_EQ(m.tasks.size(), 2u);
  EXPECT_FALSE(m.tasks[0].contains("kind"));
  EXPECT_EQ(m.tasks[1]["kind"], "batch");
  ASSERT_EQ(m.nodes.size(), 1u);
  EXPECT_EQ(m.nodes[0], json::parse(R"({"name":"n"})"));
}

TEST(ManifestTest, ModelsAndEndpoints) {
  Manifest m = Parse(
      "kind: Model\n"
      "name: qwen\n"
      "model: 7\n"
      "command: [python3, serve.py, --port, '{port}']\n"
      "requests: {gpu_memory_mib: 1024}\n"
      "---\n"
      "kind: endpoint\n"
      "name: chat\n"
      "model: qwen\n"
      "public: true\n"
      "---\n"
      "name: a\n");
  ASSERT_EQ(m.models.size(), 1u);
  EXPECT_EQ(m.models[0], json::parse(R"({"name":"qwen","model":"7",
      "command":["python3","serve.py","--port","{port}"],"requests":{"gpu_memory_mib":1024}})"));
  ASSERT_EQ(m.endpoints.size(), 1u);
  EXPECT_EQ(m.endpoints[0], json::parse(R"({"name":"chat","model":"qwen","public":true})"));
  EXPECT_EQ(m.tasks.size(), 1u);
  EXPECT_NE(Error("kind: endpoint\nname: chat\n").find("model is required"), std::string::npos);
  EXPECT_NE(Error("kind: model\ncommand: [x]\n").find("name is required"), std::string::npos);
  EXPECT_NE(Error("tasks: [{kind: model, name: m}]\n").find("kind model inside a tasks: list"),
            std::string::npos);
}

TEST(ManifestTest, YamlBecomesTheApiJson) {
  Manifest m = Parse(
      "name: train-a\n"
      "priority: 5\n"
      "preemptible: false\n"
      "requests: {cpu_milli: 4000, gpu: 2, gpu_models: [A100-80G]}\n"
      "command: [python, train.py, --epochs, 10]\n");
  ASSERT_EQ(m.tasks.size(), 1u);
  EXPECT_EQ(m.tasks[0], json::parse(R"({"name":"train-a","priority":5,"preemptible":false,
      "requests":{"cpu_milli":4000,"gpu":2,"gpu_models":["A100-80G"]},
      "command":["python","train.py","--epochs","10"]})"));
}

TEST(ManifestTest, ErrorsNameTheFileLineAndField) {
  struct Row {
    const char* text;
    std::vector<std::string> says;
  };
  const Row rows[] = {
      {"", {"f.yaml", "empty"}},
      {"---\n", {"no tasks, jobs, nodes, models or endpoints"}},
      {"tasks:\n  - name: a\n  - name: b\n    requests: {gpu: x}\n",
       {"f.yaml:3", "tasks[1].requests.gpu"}},
      {"name: a\nrequests: {gpus: 1}\n", {"f.yaml:1", "requests.gpus"}},
      {"priority: 1\n", {"name is required"}},
      {"tasks:\n  - kind: node\n    name: n\n", {"kind node inside a tasks: list"}},
      {"nodes: [{kind: task, name: a}]\n", {"kind task inside a nodes: list"}},
      {"nodes: [{name: n, gpus: 2}]\n", {"nodes[0].gpus"}},
      {"tasks: 3\n", {"tasks must be a list"}},
      {"- 1\n", {"[0] must be a task or node object"}},
      {"just text\n", {"expected a task"}},
      {"name: a\nname: b\n", {"line 2", "given twice"}},
      {"name: [\n", {"f.yaml:"}},
      {"{\"name\": }", {"invalid JSON"}},
      // Lines count through the whole file, whichever document errs.
      {"name: a\n---\n# c\nname: b\nrequests: {gpus: 1}\n", {"f.yaml:4", "requests.gpus"}},
      {"name: a\n...\n---\nname: b\nname: c\n", {"line 5", "given twice"}},
      {"name: a\n--- \nname: [\n", {"f.yaml:"}},
      // Found by fuzzing (fuzz/regressions/manifest): yaml-cpp's LoadAll
      // looped for ever, taking memory, on these.
      {"\"\",", {"f.yaml"}},
      // Also found by fuzzing: a number beyond double's range ended the
      // client (nlohmann throws out_of_range, not parse_error, for it).
      {"{\"tasks\": [500e999999]}", {"f.yaml", "invalid JSON"}},
      {"name: a\n---\n\"\",\n", {"f.yaml"}},
  };
  for (const Row& r : rows) {
    const std::string msg = Error(r.text);
    for (const std::string& s : r.says) {
      EXPECT_NE(msg.find(s), std::string::npos) << r.text << " -> " << msg;
    }
  }
}

}  // namespace
}  // namespace hf::cli
