#include "cli/api_session.h"

#include <gtest/gtest.h>

namespace hf::cli {
namespace {

TEST(ApiErrorTextTest, TheServersCodeAndMessage) {
  EXPECT_EQ(
      ApiErrorText(409, R"({"error":{"code":"conflict","message":"spread: binpack is enabled"}})"),
      "error: 409 conflict: spread: binpack is enabled");
  EXPECT_EQ(ApiErrorText(401, R"({"error":{"code":"unauthenticated"}})"),
            "error: 401 unauthenticated");
  EXPECT_EQ(ApiErrorText(502, "<html>\nbad gateway</html>"),
            "error: HTTP 502: <html> bad gateway</html>");
  EXPECT_EQ(ApiErrorText(500, ""), "error: HTTP 500");
  EXPECT_EQ(ApiErrorText(500, std::string(1000, 'x')).size(),
            std::string("error: HTTP 500: ").size() + 200);
}

}  // namespace
}  // namespace hf::cli
