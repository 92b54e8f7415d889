// heteroflow-task-supervisor: the task supervisor (agent/task_supervisor.h)
// as an executable of its own, installed beside `heteroflow`, where the agent
// looks for it. The agent starts one per task, or one fork server that forks
// them; linked statically from this file, the supervisor, the fork server and
// lease.cc alone, it starts in a fraction of a millisecond, where the whole
// `heteroflow` binary took ~2 ms of dynamic linking per task
// (docs/BENCHMARKS.md, "Agents: task start path").
#include <cstring>

#include "agent/fork_server.h"
#include "agent/task_supervisor.h"

int main(int argc, char** argv) {
  // Started once by the agent, forks the supervisors (agent/fork_server.h).
  if (argc == 2 && std::strcmp(argv[1], hf::agent::kForkServerFlag) == 0) {
    return hf::agent::RunForkServer(hf::agent::kForkServerFd);
  }
  return hf::agent::RunTaskSupervisor(argc, argv);
}
