#include "core/log.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace hf::log {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

class LogTest : public ::testing::Test {
 protected:
  void TearDown() override { ASSERT_TRUE(Init("heteroflow", "info", "text").ok()); }
};

TEST_F(LogTest, TextLinesHaveUtcTimeAndLevel) {
  ASSERT_TRUE(Init("server", "info", "text").ok());
  ::testing::internal::CaptureStderr();
  spdlog::info("scheduler: hello {}", 42);
  spdlog::debug("not shown at info");
  spdlog::warn("careful");
  const std::vector<std::string> lines = Lines(::testing::internal::GetCapturedStderr());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(std::regex_match(
      lines[0], std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z info +scheduler: hello 42)")))
      << lines[0];
  EXPECT_TRUE(std::regex_search(lines[1], std::regex(R"(Z warning +careful$)"))) << lines[1];
}

TEST_F(LogTest, JsonLinesAreObjectsWithEscapedMessages) {
  ASSERT_TRUE(Init("agent", "debug", "json").ok());
  ::testing::internal::CaptureStderr();
  spdlog::debug("quote \" backslash \\ newline \n end");
  spdlog::trace("not shown at debug");
  const std::vector<std::string> lines = Lines(::testing::internal::GetCapturedStderr());
  ASSERT_EQ(lines.size(), 1u);
  const nlohmann::json j = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(j["level"], "debug");
  EXPECT_EQ(j["component"], "agent");
  EXPECT_EQ(j["msg"], "quote \" backslash \\ newline \n end");
  EXPECT_TRUE(std::regex_match(j["time"].get<std::string>(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")));
  EXPECT_EQ(lines[0].rfind("{\"time\":", 0), 0u) << "time comes first: " << lines[0];
}

TEST_F(LogTest, OffSilencesAndBadValuesAreRefused) {
  ASSERT_TRUE(Init("server", "off", "text").ok());
  ::testing::internal::CaptureStderr();
  spdlog::error("nothing");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  Status level = Init("server", "verbose", "text");
  EXPECT_EQ(level.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(level.message().find("verbose"), std::string::npos);
  EXPECT_EQ(Init("server", "info", "xml").code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hf::log
