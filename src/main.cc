// heteroflow: one binary, one subcommand per role (as nomad and k3s do).
#include <cstdio>
#include <string>

#include "agent/agent_command.h"
#include "agent/task_supervisor.h"
#include "cli/client_command.h"
#include "core/log.h"
#include "server/control_plane.h"
#include "sim/simulate_command.h"

namespace {

void Usage() {
  std::fprintf(stderr,
               "usage: heteroflow <command> [options]\n\n"
               "commands:\n"
               "  server     run the control-plane server (REST API)\n"
               "  agent      run a node agent: register, heartbeat, run assigned tasks (docs/AGENT.md)\n"
               "  simulate   replay a cluster and workload (openb CSV or YAML) offline\n"
               "  version    print the version\n\n"
               "client commands (--server URL, --token T, -o table|json|yaml; see docs/CLIENT.md):\n"
               "%s\n"
               "Run 'heteroflow <command> --help' for a command's options.\n",
               hf::cli::ClientUsage());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    Usage();
    return 2;
  }
  const std::string cmd = argv[1];
  // Log lines of any command go to stderr, never into its output; `server`
  // and `agent` set their own level and format from their flags.
  (void)hf::log::Init("heteroflow", "info", "text");
  if (cmd == "server") return hf::server::RunServerCommand(argc - 1, argv + 1);
  if (cmd == "agent") return hf::agent::RunAgentCommand(argc - 1, argv + 1);
  // Started by the agent around each task (docs/AGENT.md, "Fencing") when
  // no heteroflow-task-supervisor sits beside this binary.
  if (cmd == "task-supervisor") return hf::agent::RunTaskSupervisor(argc - 1, argv + 1);
  if (cmd == "simulate") return hf::sim::RunSimulateCommand(argc - 1, argv + 1);
  if (hf::cli::IsClientVerb(cmd)) return hf::cli::RunClientCommand(argc - 1, argv + 1);
  if (cmd == "version" || cmd == "--version") {
    std::printf("heteroflow 0.1.0\n");
    return 0;
  }
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    Usage();
    return 0;
  }
  std::fprintf(stderr, "heteroflow: unknown command '%s'\n", cmd.c_str());
  Usage();
  return 2;
}
