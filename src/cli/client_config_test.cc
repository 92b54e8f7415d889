#include "cli/client_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace hf::cli {
namespace {

namespace fs = std::filesystem;

class ClientConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hf_client_config_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes DIR/<sub>/heteroflow/config.yaml.
  std::string Write(const std::string& sub, const std::string& text) {
    const fs::path p = dir_ / sub / "heteroflow" / "config.yaml";
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }

  fs::path dir_;
};

TEST_F(ClientConfigTest, FilePathHonoursXdgThenHome) {
  EXPECT_EQ(ConfigFilePath({{"XDG_CONFIG_HOME", "/x"}, {"HOME", "/h"}}),
            "/x/heteroflow/config.yaml");
  EXPECT_EQ(ConfigFilePath({{"XDG_CONFIG_HOME", ""}, {"HOME", "/h"}}),
            "/h/.config/heteroflow/config.yaml");
  // A relative XDG_CONFIG_HOME is invalid by the spec and ignored.
  EXPECT_EQ(ConfigFilePath({{"XDG_CONFIG_HOME", "rel"}, {"HOME", "/h"}}),
            "/h/.config/heteroflow/config.yaml");
  EXPECT_EQ(ConfigFilePath({}), std::nullopt);
}

TEST_F(ClientConfigTest, ResolutionOrderFlagsEnvFileDefault) {
  const std::string file = Write("xdg", "server: http://file:1\ntoken: hf_file\n");
  const std::string xdg = (dir_ / "xdg").string();
  struct Row {
    const char* what;
    ConfigInputs in;
    const char* server;
    const char* server_source;
    const char* token;
    const char* token_source;
  };
  const Row rows[] = {
      {"flags win",
       {"http://flag:1",
        "hf_flag",
        {{"HETEROFLOW_SERVER", "http://env:1"},
         {"HETEROFLOW_TOKEN", "hf_env"},
         {"XDG_CONFIG_HOME", xdg}}},
       "http://flag:1",
       "--server",
       "hf_flag",
       "--token"},
      {"env over file",
       {"",
        "",
        {{"HETEROFLOW_SERVER", "http://env:1"},
         {"HETEROFLOW_TOKEN", "hf_env"},
         {"XDG_CONFIG_HOME", xdg}}},
       "http://env:1",
       "HETEROFLOW_SERVER",
       "hf_env",
       "HETEROFLOW_TOKEN"},
      {"each setting on its own",
       {"", "hf_flag", {{"XDG_CONFIG_HOME", xdg}}},
       "http://file:1",
       file.c_str(),
       "hf_flag",
       "--token"},
      {"empty env counts as unset",
       {"", "", {{"HETEROFLOW_SERVER", ""}, {"HETEROFLOW_TOKEN", ""}, {"XDG_CONFIG_HOME", xdg}}},
       "http://file:1",
       file.c_str(),
       "hf_file",
       file.c_str()},
      {"default without a file",
       {"", "", {{"HOME", (dir_ / "nohome").string()}}},
       kDefaultServer,
       "default",
       "",
       "none"},
  };
  for (const Row& r : rows) {
    Result<ClientSettings> s = ResolveSettings(r.in);
    ASSERT_TRUE(s.ok()) << r.what << ": " << s.status().ToString();
    EXPECT_EQ(s->server, r.server) << r.what;
    EXPECT_EQ(s->server_source, r.server_source) << r.what;
    EXPECT_EQ(s->token, r.token) << r.what;
    EXPECT_EQ(s->token_source, r.token_source) << r.what;
  }
}

TEST_F(ClientConfigTest, HomeFileWhenNoXdg) {
  const std::string file = Write("home/.config", "server: http://home:2\n");
  Result<ClientSettings> s = ResolveSettings({"", "", {{"HOME", (dir_ / "home").string()}}});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->server, "http://home:2");
  EXPECT_EQ(s->server_source, file);
  EXPECT_EQ(s->token, "");
}

TEST_F(ClientConfigTest, BadFilesAreErrorsNamingTheFile) {
  const std::string xdg = (dir_ / "xdg").string();
  for (const char* text : {"server: [1, 2]\n", "servr: http://x\n", "- a\n- b\n", "server: {\n"}) {
    const std::string file = Write("xdg", text);
    Result<ClientSettings> s = ResolveSettings({"", "", {{"XDG_CONFIG_HOME", xdg}}});
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(file), std::string::npos) << s.status().message();
  }
  // Not read at all when flags give both settings.
  Result<ClientSettings> s = ResolveSettings({"http://f:1", "hf_f", {{"XDG_CONFIG_HOME", xdg}}});
  EXPECT_TRUE(s.ok());
}

TEST_F(ClientConfigTest, EmptyFileIsFine) {
  Write("xdg", "");
  Result<ClientSettings> s =
      ResolveSettings({"", "", {{"XDG_CONFIG_HOME", (dir_ / "xdg").string()}}});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->server, kDefaultServer);
}

}  // namespace
}  // namespace hf::cli
