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

TEST(JsonFieldsTest, ReadIntTakesJsonIntegersOnly) {
  // A number written with a fraction or an exponent is not an integer field's
  // value, even when its value is integral (2.0), zero (-0.0) or underflows
  // to zero (1e-400): the message names the field.
  for (const char* text : {"2.0", "-0.0", "1e-400", "1e2", "0.5"}) {
    int v = -1;
    Status s = ReadInt(json::parse(text), "requests.gpu", 0, 1000, v);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(s.message().find("requests.gpu must be an integer"), std::string::npos)
        << text << ": " << s.message();
    EXPECT_EQ(v, -1) << text;
  }
  int v = -1;
  ASSERT_TRUE(ReadInt(json::parse("-0"), "priority", -5, 5, v).ok());
  EXPECT_EQ(v, 0);
}

}  // namespace
}  // namespace hf::json_fields
