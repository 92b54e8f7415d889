#include "cli/client_config.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

namespace hf::cli {
namespace {

std::string Get(const std::map<std::string, std::string>& env, const std::string& key) {
  auto it = env.find(key);
  return it == env.end() ? "" : it->second;
}

}  // namespace

std::optional<std::string> ConfigFilePath(const std::map<std::string, std::string>& env) {
  const std::string xdg = Get(env, "XDG_CONFIG_HOME");
  if (!xdg.empty() && xdg[0] == '/') return xdg + "/heteroflow/config.yaml";
  const std::string home = Get(env, "HOME");
  if (!home.empty()) return home + "/.config/heteroflow/config.yaml";
  return std::nullopt;
}

Result<ConfigFile> ReadConfigFile(const std::string& path) {
  ConfigFile out;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return out;
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument(path + ": cannot read the client config file");
  std::stringstream text;
  text << in.rdbuf();
  YAML::Node root;
  try {
    root = YAML::Load(text.str());
  } catch (const YAML::Exception& e) {
    return InvalidArgument(path + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (root.IsNull()) return out;  // an empty file
  if (!root.IsMap()) return InvalidArgument(path + ": must be a mapping with server: and token:");
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    std::string* field = key == "server" ? &out.server : key == "token" ? &out.token : nullptr;
    if (field == nullptr) {
      return InvalidArgument(path + ": unknown key \"" + key + "\" (expected server, token)");
    }
    if (kv.second.IsNull()) continue;
    if (!kv.second.IsScalar()) return InvalidArgument(path + ": " + key + " must be a string");
    *field = kv.second.Scalar();
  }
  return out;
}

Result<ClientSettings> ResolveSettings(const ConfigInputs& in) {
  ClientSettings s;
  if (!in.flag_server.empty()) {
    s.server = in.flag_server;
    s.server_source = "--server";
  } else if (std::string v = Get(in.env, "HETEROFLOW_SERVER"); !v.empty()) {
    s.server = v;
    s.server_source = "HETEROFLOW_SERVER";
  }
  if (!in.flag_token.empty()) {
    s.token = in.flag_token;
    s.token_source = "--token";
  } else if (std::string v = Get(in.env, "HETEROFLOW_TOKEN"); !v.empty()) {
    s.token = v;
    s.token_source = "HETEROFLOW_TOKEN";
  }
  if (s.server.empty() || s.token.empty()) {
    if (std::optional<std::string> path = ConfigFilePath(in.env)) {
      Result<ConfigFile> file = ReadConfigFile(*path);
      if (!file.ok()) return file.status();
      if (s.server.empty() && !file->server.empty()) {
        s.server = file->server;
        s.server_source = *path;
      }
      if (s.token.empty() && !file->token.empty()) {
        s.token = file->token;
        s.token_source = *path;
      }
    }
  }
  if (s.server.empty()) {
    s.server = kDefaultServer;
    s.server_source = "default";
  }
  if (s.token.empty()) s.token_source = "none";
  return s;
}

std::map<std::string, std::string> ProcessEnv() {
  std::map<std::string, std::string> env;
  for (const char* key : {"HETEROFLOW_SERVER", "HETEROFLOW_TOKEN", "XDG_CONFIG_HOME", "HOME"}) {
    if (const char* v = std::getenv(key)) env[key] = v;
  }
  return env;
}

}  // namespace hf::cli
