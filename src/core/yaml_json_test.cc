#include "core/yaml_json.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

namespace hf {
namespace {

using nlohmann::json;

json FromYaml(const std::string& text) {
  Result<json> j = YamlToJson(YAML::Load(text));
  EXPECT_TRUE(j.ok()) << j.status().ToString();
  return j.ok() ? *j : json();
}

TEST(YamlToJsonTest, ScalarsAreTypedByTheCoreSchema) {
  struct Row {
    const char* yaml;  // the value of key v
    const char* want;  // JSON
  };
  const Row rows[] = {
      {"2", "2"},           {"-3", "-3"},
      {"+4", "4"},          {"0.5", "0.5"},
      {"1e3", "1000.0"},    {".5", "0.5"},
      {"true", "true"},     {"False", "false"},
      {"~", "null"},        {"null", "null"},
      {"", "null"},         {"abc", "\"abc\""},
      {"'2'", "\"2\""},     {"\"true\"", "\"true\""},
      {"yes", "\"yes\""},   {"1.2.3", "\"1.2.3\""},
      {"0x1F", "\"0x1F\""}, {"[1, a]", "[1, \"a\"]"},
      {"{}", "{}"},
  };
  for (const Row& r : rows) {
    json got = FromYaml(std::string("v: ") + r.yaml);
    EXPECT_EQ(got["v"], json::parse(r.want)) << r.yaml;
  }
  EXPECT_TRUE(FromYaml("v: 2")["v"].is_number_integer());
  EXPECT_TRUE(FromYaml("v: 99999999999999999999")["v"].is_number_float());
}

TEST(YamlToJsonTest, StringFieldsStayStrings) {
  json t = FromYaml(
      "name: 007\n"
      "priority: 5\n"
      "command: [python, train.py, --lr, 0.1]\n"
      "env: {DEBUG: 1, ON: true}\n"
      "depends_on: [1]\n"
      "requests: {gpu: 2, gpu_models: [910]}\n");
  EXPECT_EQ(t, json::parse(R"({"name":"007","priority":5,
      "command":["python","train.py","--lr","0.1"],"env":{"DEBUG":"1","ON":"true"},
      "depends_on":["1"],"requests":{"gpu":2,"gpu_models":["910"]}})"));
  json n = FromYaml(
      "labels: {example.com/v: 2}\n"
      "gpus: [{index: 0, model: 4090, memory_mib: 24576}]\n"
      "topology: {rack: 12}\n");
  EXPECT_EQ(n, json::parse(R"({"labels":{"example.com/v":"2"},
      "gpus":[{"index":0,"model":"4090","memory_mib":24576}],"topology":{"rack":"12"}})"));
  // Null stays null even in a string field: the server names it.
  EXPECT_TRUE(FromYaml("group: ~")["group"].is_null());
  EXPECT_TRUE(IsStringField("env.A.B"));
  EXPECT_FALSE(IsStringField("requests.gpu"));
}

TEST(YamlToJsonTest, RefusesDuplicateAndComplexKeys) {
  Result<json> dup = YamlToJson(YAML::Load("a: 1\nb: 2\na: 3\n"));
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("line 3"), std::string::npos) << dup.status().message();
  EXPECT_NE(dup.status().message().find("\"a\" given twice"), std::string::npos);
  EXPECT_FALSE(YamlToJson(YAML::Load("? [a]\n: 1\n")).ok());
}

TEST(JsonToYamlTest, RoundTripsAndQuotesLookalikes) {
  const json v = json::parse(R"({"load_threshold":0.85,"n":3,"ok":true,"none":null,
      "s":["true","1","","null","yes","plain"],"empty":{},"list":[],
      "nested":{"a":[{"b":1}]}})");
  const std::string text = JsonToYaml(v);
  EXPECT_NE(text.find("load_threshold: 0.85\n"), std::string::npos) << text;
  EXPECT_NE(text.find("- \"true\"\n"), std::string::npos) << text;
  EXPECT_NE(text.find("- \"yes\"\n"), std::string::npos) << text;
  EXPECT_NE(text.find("- plain\n"), std::string::npos) << text;
  EXPECT_NE(text.find("empty: {}\n"), std::string::npos) << text;
  EXPECT_NE(text.find("list: []\n"), std::string::npos) << text;
  EXPECT_EQ(text.back(), '\n');
  EXPECT_EQ(FromYaml(text), v) << text;
}

}  // namespace
}  // namespace hf
