// `heteroflow server`: flags, log set-up, the open-file limit and the stop
// signals around one ControlPlane (control_plane.h).
#ifndef HF_SERVER_SERVER_COMMAND_H_
#define HF_SERVER_SERVER_COMMAND_H_

namespace hf::server {

// The `server` subcommand; argv[0] is "server". Returns the exit code: 0
// after SIGINT or SIGTERM, 2 for a bad flag, 1 when the server cannot start.
int RunServerCommand(int argc, char** argv);

}  // namespace hf::server

#endif  // HF_SERVER_SERVER_COMMAND_H_
