#include "core/json_fields.h"

#include <gtest/gtest.h>

namespace hf::json_fields {
namespace {

TEST(JsonFieldsTest, ReadIntChecksTheLowerBoundOfUnsignedLiterals) {
  // nlohmann reads 0 and 7 as unsigned numbers: the lower bound applies to them too.
  int v = -1;
  Status s = ReadInt(json::parse("0"), "port", 1, 65535, v);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "port must be >= 1");
  EXPECT_EQ(v, -1);
  EXPECT_EQ(ReadInt(json::parse("7"), "n", 8, 9, v).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(ReadInt(json::parse("1"), "port", 1, 65535, v).ok());
  EXPECT_EQ(v, 1);
  ASSERT_TRUE(ReadInt(json::parse("0"), "n", -5, 5, v).ok());
  EXPECT_EQ(v, 0);
  EXPECT_EQ(ReadInt(json::parse("-6"), "n", -5, 5, v).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadInt(json::parse("65536"), "port", 1, 65535, v).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hf::json_fields
