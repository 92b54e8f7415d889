#include "core/yaml_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace hf {
namespace {

// An app with the shapes of option the agent has, reading --config as YAML.
struct Cli {
  CLI::App app{"test"};
  std::string server, token_file;
  int grace = 10;
  std::vector<std::string> tags;
  Cli() {
    app.set_config("--config");
    app.config_formatter(std::make_shared<YamlConfig>());
    app.allow_config_extras(CLI::config_extras_mode::error);
    app.add_option("--server", server)->required();
    app.add_option("--token-file", token_file);
    app.add_option("--grace-period-s", grace);
    app.add_option("--tag", tags);
  }
  // Parses `args` after writing `yaml` to a file that --config names; the
  // parse error's text, "" when it parsed.
  std::string Parse(const std::string& yaml, std::vector<std::string> args = {}) {
    char path[] = "/tmp/hf-yaml-config-XXXXXX";
    const int fd = mkstemp(path);
    EXPECT_GE(fd, 0);
    close(fd);
    std::ofstream(path) << yaml;
    std::vector<std::string> argv = {"test", "--config", path};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<const char*> c;
    for (const std::string& a : argv) c.push_back(a.c_str());
    std::string error;
    try {
      app.parse(int(c.size()), c.data());
    } catch (const CLI::ParseError& e) {
      error = e.what();
      if (error.empty()) error = e.get_name();
    }
    std::remove(path);
    return error;
  }
};

TEST(YamlConfigTest, SetsOptionsByLongNameWithDashesOrUnderscores) {
  Cli cli;
  ASSERT_EQ(cli.Parse("server: http://cp:3333\ntoken_file: /etc/heteroflow/agent.token\n"
                      "grace-period-s: 4\ntag: [a, b]\n"),
            "");
  EXPECT_EQ(cli.server, "http://cp:3333");
  EXPECT_EQ(cli.token_file, "/etc/heteroflow/agent.token");
  EXPECT_EQ(cli.grace, 4);
  EXPECT_EQ(cli.tags, (std::vector<std::string>{"a", "b"}));
}

TEST(YamlConfigTest, TheCommandLineWinsAndFillsWhatTheFileLacks) {
  Cli cli;
  ASSERT_EQ(cli.Parse("server: http://from-file\ngrace_period_s: 4\n", {"--server", "http://flag"}), "");
  EXPECT_EQ(cli.server, "http://flag");
  EXPECT_EQ(cli.grace, 4);
  Cli empty;
  ASSERT_EQ(empty.Parse("", {"--server", "http://flag"}), "");  // an empty file sets nothing
  EXPECT_EQ(empty.grace, 10);
}

TEST(YamlConfigTest, BadFilesAreRefused) {
  struct Case {
    const char* yaml;
    const char* says;  // part of the error
  };
  for (const Case& c : std::vector<Case>{
           {"server: http://x\nbogus_key: 1\n", "bogus-key"},
           {"server: {url: http://x}\n", "server"},
           {"server: [[a]]\n", "server"},
           {"- server\n", "mapping"},
           {"server: [unclosed\n", "not YAML"},
           {"grace_period_s: soon\nserver: http://x\n", "grace-period-s"},
       }) {
    Cli cli;
    const std::string error = cli.Parse(c.yaml);
    EXPECT_NE(error.find(c.says), std::string::npos) << c.yaml << " -> " << error;
  }
  Cli missing;  // the required option in neither place
  EXPECT_NE(missing.Parse("token_file: /x\n").find("server"), std::string::npos);
}

}  // namespace
}  // namespace hf
