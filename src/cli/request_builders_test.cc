#include "cli/request_builders.h"

#include <gtest/gtest.h>

namespace hf::cli {
namespace {

using nlohmann::json;

TEST(ConfigAssignmentsTest, Parses) {
  struct Row {
    std::vector<std::string> args;
    const char* want;  // JSON
  };
  const Row rows[] = {
      {{"load_threshold=0.85"}, R"({"load_threshold":0.85})"},
      {{"score_weights.binpack=2"}, R"({"score_weights":{"binpack":2}})"},
      {{"score_weights.binpack=2", "score_weights.topology=0.5", "memory_threshold=1"},
       R"({"score_weights":{"binpack":2,"topology":0.5},"memory_threshold":1})"},
      {{"a=true", "b=false", "c=null"}, R"({"a":true,"b":false,"c":null})"},
      {{"mode=binpack"}, R"({"mode":"binpack"})"},
      {{"s=\"2\""}, R"({"s":"2"})"},
      {{"x={\"k\":1}"}, R"({"x":{"k":1}})"},
      {{"v=a=b"}, R"({"v":"a=b"})"},
      {{"n=-3"}, R"({"n":-3})"},
  };
  for (const Row& r : rows) {
    Result<json> got = ParseConfigAssignments(r.args);
    ASSERT_TRUE(got.ok()) << r.args[0] << ": " << got.status().ToString();
    EXPECT_EQ(*got, json::parse(r.want)) << r.args[0];
  }
  // Integers stay integers: the server writes whole weights as integers.
  EXPECT_TRUE((*ParseConfigAssignments({"w=2"}))["w"].is_number_integer());
}

TEST(ConfigAssignmentsTest, Refuses) {
  struct Row {
    std::vector<std::string> args;
    const char* says;
  };
  const Row rows[] = {
      {{}, "at least one"},
      {{"load_threshold"}, "not KEY=VALUE"},
      {{"=1"}, "empty key"},
      {{"a..b=1"}, "empty key"},
      {{"a.=1"}, "empty key"},
      {{"a="}, "empty value"},
      {{"a=1", "a=2"}, "given twice"},
      {{"a=1", "a.b=2"}, "overlap"},
      {{"a.b=2", "a=1"}, "overlap"},
  };
  for (const Row& r : rows) {
    Result<json> got = ParseConfigAssignments(r.args);
    ASSERT_FALSE(got.ok());
    EXPECT_NE(got.status().message().find(r.says), std::string::npos) << got.status().message();
  }
  // Different keys sharing a prefix are fine.
  EXPECT_TRUE(ParseConfigAssignments({"ab=1", "a.b=2"}).ok());
}

TEST(PluginPatchBodyTest, OnlyTheGivenFields) {
  EXPECT_EQ(*PluginPatchBody({.weight = 2}), json::parse(R"({"weight":2})"));
  EXPECT_TRUE((*PluginPatchBody({.weight = 2}))["weight"].is_number_integer());
  EXPECT_EQ(*PluginPatchBody({.weight = 0.5}), json::parse(R"({"weight":0.5})"));
  EXPECT_EQ(*PluginPatchBody({.enabled = "false"}), json::parse(R"({"enabled":false})"));
  EXPECT_EQ(*PluginPatchBody({.weight = 1, .enabled = "true", .mode = "gpu"}),
            json::parse(R"({"weight":1,"enabled":true,"mode":"gpu"})"));
  EXPECT_EQ(*PluginPatchBody({.config = R"({"file":"t.yaml"})"}),
            json::parse(R"({"config":{"file":"t.yaml"}})"));
  EXPECT_FALSE(PluginPatchBody({}).ok());
  EXPECT_FALSE(PluginPatchBody({.weight = -1}).ok());
  EXPECT_FALSE(PluginPatchBody({.enabled = "yes"}).ok());
  EXPECT_FALSE(PluginPatchBody({.config = "[1]"}).ok());
  EXPECT_FALSE(PluginPatchBody({.config = "{"}).ok());
}

TEST(TaskListTargetTest, OnlyTheGivenFiltersEncoded) {
  EXPECT_EQ(TaskListTarget({}), "/api/v1/tasks");
  EXPECT_EQ(TaskListTarget({.state = "pending", .limit = 10}),
            "/api/v1/tasks?state=pending&limit=10");
  EXPECT_EQ(TaskListTarget({.node = "gpu-a1", .group = "g 1&x", .priority = -2, .after = 17}),
            "/api/v1/tasks?node=gpu-a1&group=g%201%26x&priority=-2&after=17");
  EXPECT_EQ(UrlEncode("a/b.c_d~e-f"), "a%2Fb.c_d~e-f");
}

}  // namespace
}  // namespace hf::cli
