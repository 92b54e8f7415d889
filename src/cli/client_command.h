// The kubectl-style client inside the `heteroflow` binary (docs/CLIENT.md):
//
//   heteroflow get nodes|tasks|plugins|tokens [NAME|ID] [filters]
//   heteroflow describe task ID | describe node NAME
//   heteroflow apply -f FILE [--dry-run]
//   heteroflow delete task ID | node NAME | token ID
//   heteroflow cordon|uncordon|drain NODE
//   heteroflow plugins set NAME [--weight W] [--enabled true|false] [--mode M] [--config JSON]
//   heteroflow config get | config set KEY=VALUE ...
//
// Every command takes --server URL, --token T, -o table|json|yaml and
// --timeout SECONDS; the server and token are resolved as client_config.h
// says. Exit codes: 0 success; 1 an API error (the server's HTTP status, code
// and message on stderr: "error: 409 conflict: ...") or no connection; 2 a
// usage error (bad flags, unreadable or invalid input file, bad config file),
// reported before anything is sent. The token is never printed.
#ifndef HF_CLI_CLIENT_COMMAND_H_
#define HF_CLI_CLIENT_COMMAND_H_

#include <string_view>

namespace hf::cli {

// Whether `verb` is a client command (get, describe, apply, delete, cordon,
// uncordon, drain, plugins, config).
bool IsClientVerb(std::string_view verb);

// Runs one client command; argv[0] is the verb. Returns the exit code.
int RunClientCommand(int argc, char** argv);

// The client's lines for `heteroflow --help`.
const char* ClientUsage();

}  // namespace hf::cli

#endif  // HF_CLI_CLIENT_COMMAND_H_
