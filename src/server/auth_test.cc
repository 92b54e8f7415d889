#include "server/auth.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace hf::server {
namespace {

TEST(AuthHashTest, KnownSha256Vectors) {
  // FIPS 180-2 test vectors.
  EXPECT_EQ(HashToken("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(HashToken(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(AuthTokenTest, UniqueHexWithPrefix) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    std::string t = GenerateToken();
    ASSERT_EQ(t.size(), kTokenLength);
    ASSERT_EQ(t.size(), 67u);
    ASSERT_EQ(t.substr(0, 3), "hf_");
    ASSERT_EQ(t.find_first_not_of("0123456789abcdef", 3), std::string::npos) << t;
    ASSERT_TRUE(BearerToken("Bearer " + t).has_value());
    seen.insert(t);
  }
  EXPECT_EQ(seen.size(), 1000u);
}

TEST(AuthCompareTest, Table) {
  struct Row {
    std::string a, b;
    bool equal;
  };
  for (const Row& r : std::vector<Row>{{"", "", true},
                                       {"abc", "abc", true},
                                       {"abc", "abd", false},
                                       {"abc", "ab", false},
                                       {"", "a", false},
                                       {std::string("a\0b", 3), std::string("a\0c", 3), false}}) {
    EXPECT_EQ(ConstantTimeEquals(r.a, r.b), r.equal) << r.a << " vs " << r.b;
  }
}

TEST(AuthBearerTest, Table) {
  struct Row {
    std::string header;
    std::optional<std::string> token;
  };
  const std::string long_token(kMaxBearerTokenLength, 'a');
  for (const Row& r : std::vector<Row>{
           {"Bearer abc", "abc"},
           {"bearer abc", "abc"},
           {"BEARER abc", "abc"},
           {"bEaReR hf_0123", "hf_0123"},
           {"Bearer a-b.c_d~e+f/g==", "a-b.c_d~e+f/g=="},
           {"Bearer " + long_token, long_token},
           {"Bearer " + long_token + "a", std::nullopt},
           {"", std::nullopt},
           {"Bearer", std::nullopt},
           {"Bearer ", std::nullopt},
           {"Bearer  abc", std::nullopt},
           {"Bearer\tabc", std::nullopt},
           {"Bearer abc ", std::nullopt},
           {" Bearer abc", std::nullopt},
           {"Bearer abc def", std::nullopt},
           {"Bearerabc", std::nullopt},
           {"Basic YWxhZGRpbjpvcGVuc2VzYW1l", std::nullopt},
           {"Token abc", std::nullopt},
           {"Bearer ==", std::nullopt},
           {"Bearer a=b", std::nullopt},
           {"Bearer abc\r\n", std::nullopt},
           {std::string("Bearer ab\0c", 11), std::nullopt},
           {"Bearer \xc3\xa9", std::nullopt},
       }) {
    EXPECT_EQ(BearerToken(r.header), r.token) << "header: [" << r.header << "]";
  }
}

TEST(AuthRoleTest, NamesRoundTrip) {
  for (Role r : {Role::kAdmin, Role::kOperator, Role::kViewer, Role::kAgent}) {
    EXPECT_EQ(ParseRole(RoleName(r)), r);
  }
  EXPECT_EQ(ParseRole("operator"), Role::kOperator);
  EXPECT_EQ(ParseRole("Admin"), std::nullopt);
  EXPECT_EQ(ParseRole("root"), std::nullopt);
  EXPECT_EQ(ParseRole(""), std::nullopt);
}

TEST(AuthRoleTest, Matrix) {
  struct Row {
    Role role;
    Action action;
    bool allowed;
  };
  using enum Role;
  using enum Action;
  for (const Row& r : std::vector<Row>{
           {kAdmin, kRead, true},
           {kAdmin, kWriteTasks, true},
           {kAdmin, kCordonNodes, true},
           {kAdmin, kWriteConfig, true},
           {kAdmin, kManageTokens, true},
           {kAdmin, kAgentReport, true},
           {kAdmin, kPreview, true},
           {kOperator, kPreview, true},
           {kViewer, kPreview, false},
           {kAgent, kPreview, false},
           {kOperator, kRead, true},
           {kOperator, kWriteTasks, true},
           {kOperator, kCordonNodes, true},
           {kOperator, kWriteConfig, false},
           {kOperator, kManageTokens, false},
           {kOperator, kAgentReport, false},
           {kViewer, kRead, true},
           {kViewer, kWriteTasks, false},
           {kViewer, kCordonNodes, false},
           {kViewer, kWriteConfig, false},
           {kViewer, kManageTokens, false},
           {kViewer, kAgentReport, false},
           {kAgent, kRead, false},
           {kAgent, kWriteTasks, false},
           {kAgent, kCordonNodes, false},
           {kAgent, kWriteConfig, false},
           {kAgent, kManageTokens, false},
           {kAgent, kAgentReport, true},
       }) {
    EXPECT_EQ(Allows(r.role, r.action), r.allowed)
        << RoleName(r.role) << " " << ActionName(r.action);
  }
}

}  // namespace
}  // namespace hf::server
