// Where the client finds its server and token (docs/CLIENT.md).
//
// Each of the two settings is resolved on its own, first match wins:
//   1. the flag (--server, --token);
//   2. the environment (HETEROFLOW_SERVER, HETEROFLOW_TOKEN);
//   3. the config file, $XDG_CONFIG_HOME/heteroflow/config.yaml, or
//      $HOME/.config/heteroflow/config.yaml when XDG_CONFIG_HOME is unset,
//      empty or relative (as the XDG spec says), with keys `server:` and
//      `token:`;
//   4. the default: server http://127.0.0.1:3333, no token.
// An empty flag or variable counts as unset. A missing config file is not an
// error; an unreadable or malformed one, or one with other keys, is
// InvalidArgument naming the file.
//
// The resolved token is never printed; `token_source` says where it came from
// so that messages can point at it instead.
#ifndef HF_CLI_CLIENT_CONFIG_H_
#define HF_CLI_CLIENT_CONFIG_H_

#include <map>
#include <optional>
#include <string>

#include "core/status.h"

namespace hf::cli {

inline constexpr char kDefaultServer[] = "http://127.0.0.1:3333";

// The inputs, gathered by the caller so that resolution is a pure function of
// them (and of the config file's contents).
struct ConfigInputs {
  std::string flag_server;
  std::string flag_token;
  // The variables that matter: HETEROFLOW_SERVER, HETEROFLOW_TOKEN,
  // XDG_CONFIG_HOME, HOME. Absent and empty mean the same.
  std::map<std::string, std::string> env;
};

struct ClientSettings {
  std::string server;
  std::string token;
  // "--server", "HETEROFLOW_SERVER", the config file's path, or "default";
  // likewise for the token ("none" when there is no token).
  std::string server_source;
  std::string token_source;
};

// The config file's path, or nullopt when neither XDG_CONFIG_HOME (absolute)
// nor HOME is set.
std::optional<std::string> ConfigFilePath(const std::map<std::string, std::string>& env);

// The file's `server` and `token` (either may be missing). A file that does
// not exist gives two empty strings.
struct ConfigFile {
  std::string server;
  std::string token;
};
Result<ConfigFile> ReadConfigFile(const std::string& path);

// Resolves both settings. The config file is read only when a setting is not
// given by a flag or the environment.
Result<ClientSettings> ResolveSettings(const ConfigInputs& in);

// The process's environment, for ConfigInputs::env.
std::map<std::string, std::string> ProcessEnv();

}  // namespace hf::cli

#endif  // HF_CLI_CLIENT_CONFIG_H_
