#include "inference/spec.h"

#include <gtest/gtest.h>

namespace hf::inference {
namespace {

using nlohmann::json;

json Good() {
  return {{"name", "qwen"},
          {"model", "Qwen/Qwen2-7B"},
          {"command", {"vllm", "serve", "--port", "{port}"}},
          {"requests", {{"gpu_memory_mib", 20480}}}};
}

std::string Error(const json& j, const std::string& path_name = "") {
  Result<ModelSpec> m = ModelSpecFromJson(j, path_name);
  EXPECT_FALSE(m.ok()) << j.dump();
  return m.ok() ? "" : m.status().message();
}

TEST(InferenceSpecTest, MemorySharedReplicaDefaults) {
  Result<ModelSpec> m = ModelSpecFromJson(Good());
  ASSERT_TRUE(m.ok()) << m.status().message();
  // Memory without a GPU count: one shared GPU, reserving memory only.
  EXPECT_EQ(m->requests.gpu, 1);
  EXPECT_EQ(m->requests.gpu_milli, 1);
  EXPECT_EQ(m->requests.gpu_memory_mib, 20480);
  EXPECT_EQ(m->min_replicas, 1);
  EXPECT_EQ(m->max_replicas, 1);
  EXPECT_EQ(m->health_path, "/health");
  EXPECT_FALSE(m->autoscaling.enabled);
  // A round trip keeps everything.
  Result<ModelSpec> again = ModelSpecFromJson(ModelSpecToJson(*m));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(ModelSpecToJson(*again), ModelSpecToJson(*m));
  EXPECT_FALSE(ReplicaTemplateDiffers(*m, *again));
}

TEST(InferenceSpecTest, OneBoundSetsTheOther) {
  json j = Good();
  j["min_replicas"] = 3;
  EXPECT_EQ(ModelSpecFromJson(j)->max_replicas, 3);
  j.erase("min_replicas");
  j["max_replicas"] = 0;
  EXPECT_EQ(ModelSpecFromJson(j)->min_replicas, 0);
}

TEST(InferenceSpecTest, BadFieldsAreNamed) {
  json j = Good();
  j["min_replicas"] = 3;
  j["max_replicas"] = 2;
  EXPECT_NE(Error(j).find("min_replicas (3) must be <= max_replicas (2)"), std::string::npos);
  j = Good();
  j["requests"]["gpu_memory_mib"] = -1;
  EXPECT_NE(Error(j).find("requests.gpu_memory_mib"), std::string::npos);
  j = Good();
  j["command"] = {"vllm", "serve"};
  EXPECT_NE(Error(j).find("{port}"), std::string::npos);
  j = Good();
  j["autoscaling"] = {{"target_inflight_per_replica", 0}};
  EXPECT_NE(Error(j).find("autoscaling.target_inflight_per_replica"), std::string::npos);
  j = Good();
  j["autoscaling"] = {{"window", 3}};
  EXPECT_NE(Error(j).find("autoscaling.window"), std::string::npos);
  j = Good();
  j["health_path"] = "health";
  EXPECT_NE(Error(j).find("health_path"), std::string::npos);
  EXPECT_NE(Error(Good(), "other").find("does not match"), std::string::npos);
  j = Good();
  j.erase("command");
  EXPECT_EQ(Error(j), "command is required");
}

TEST(InferenceSpecTest, TemplateChangesRollButLimitsDoNot) {
  ModelSpec a = *ModelSpecFromJson(Good());
  ModelSpec b = a;
  b.max_replicas = 5;
  b.autoscaling.enabled = true;
  EXPECT_FALSE(ReplicaTemplateDiffers(a, b));
  b.env["X"] = "1";
  EXPECT_TRUE(ReplicaTemplateDiffers(a, b));
  b = a;
  b.requests.gpu_memory_mib = 1;
  EXPECT_TRUE(ReplicaTemplateDiffers(a, b));
}

TEST(InferenceSpecTest, EndpointsStoreKeysButParseNone) {
  EXPECT_FALSE(EndpointSpecFromJson(json{{"name", "chat"}, {"model", "qwen"}, {"keys", json::array()}}).ok());
  Result<EndpointSpec> e = EndpointSpecFromJson(json{{"name", "chat"}, {"model", "qwen"}});
  ASSERT_TRUE(e.ok());
  e->keys.push_back({3, "ci", std::string(64, 'a'), 1000});
  Result<EndpointSpec> back = EndpointFromStored(EndpointToStored(*e));
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->keys.size(), 1u);
  EXPECT_EQ(back->keys[0].id, 3);
  EXPECT_EQ(back->keys[0].hash, std::string(64, 'a'));
  EXPECT_FALSE(EndpointFromStored(json{{"name", "x"}}).ok());
}

}  // namespace
}  // namespace hf::inference
