#include "core/text.h"

#include <gtest/gtest.h>

namespace hf {
namespace {

TEST(TextTest, SplitKeepsEmptyPieces) {
  EXPECT_EQ(Split("a,b,c", ','), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(Split("a,,b,", ','), (std::vector<std::string>{"a", "", "b", ""}));
  EXPECT_EQ(Split("", ','), (std::vector<std::string>{""}));
  EXPECT_EQ(Split("32x8", 'x'), (std::vector<std::string>{"32", "8"}));
}

TEST(TextTest, FormatNumberIsShortest) {
  EXPECT_EQ(FormatNumber(5), "5");
  EXPECT_EQ(FormatNumber(0.25), "0.25");
}

TEST(TextTest, IEqualsIgnoresAsciiCase) {
  EXPECT_TRUE(IEquals("Content-Length", "content-length"));
  EXPECT_FALSE(IEquals("Content-Length", "content-lengths"));
}

}  // namespace
}  // namespace hf
