// The task supervisor: the small process that runs one task for the agent
// and stops it when the node's lease runs out (docs/AGENT.md, "Fencing"), as
// containerd's shim or conmon sit between a runtime and a container.
//
//   heteroflow-task-supervisor --lease FILE --fence-after-ms N --grace-ms N -- ARGV...
//
// It is an executable of its own (src/task_supervisor_main.cc, linked
// statically, installed beside `heteroflow`), because it starts once per task
// and the whole `heteroflow` binary costs ~2 ms of dynamic linking to start.
// `heteroflow task-supervisor ...` runs the same code, for an agent whose
// binary has no supervisor beside it (TaskSupervisorCommand).
//
// The agent starts it, in the task's folder with the task's environment and
// output, as the leader of the task's process group. It starts ARGV as its
// child in the same group (so the agent's stop, SIGTERM then SIGKILL to the
// group, reaches the task as before) and exits as the task exits: with its
// exit code, or by the same signal. A signal the agent sends the group does
// not end the supervisor before the task (it has a handler that only notes
// it; handlers do not survive exec, so the task keeps default ones). One
// that came before the task was running is sent to the group again once it
// is, so a stop right after the start is not lost.
//
// Fencing: every 200 ms it reads the lease (lease.h). Once the agent has not
// renewed it for --fence-after-ms (the agent is frozen, dead, or cut off from
// the server), it writes `fenced` in the task's folder and a line in the
// output, sends SIGTERM to the group, and SIGKILL to the group (itself
// included) --grace-ms later or as soon as the task has exited. A lease
// older than the supervisor counts from the supervisor's start.
//
// The task dies with the supervisor (PR_SET_PDEATHSIG): a task is never left
// running unsupervised. A task whose program cannot be executed ends with
// exit code 127 and the reason in its output.
#ifndef HF_AGENT_TASK_SUPERVISOR_H_
#define HF_AGENT_TASK_SUPERVISOR_H_

#include <string>
#include <vector>

namespace hf::agent {

// The supervisor's executable, as built and installed beside `heteroflow`.
inline constexpr char kTaskSupervisorName[] = "heteroflow-task-supervisor";

// argv[0] is the supervisor's name ("heteroflow-task-supervisor" or
// "task-supervisor"). Returns only on bad arguments (exit code 2); otherwise
// exits as the task did.
int RunTaskSupervisor(int argc, char** argv);

// The start of the command line that runs a task under its supervisor, for
// this process (the agent): {"DIR/heteroflow-task-supervisor"} when that
// file is an executable in the folder of this process's own executable,
// else {"/proc/self/exe", "task-supervisor"}, the same code in the running
// binary. The options and "--" follow.
std::vector<std::string> TaskSupervisorCommand();

}  // namespace hf::agent

#endif  // HF_AGENT_TASK_SUPERVISOR_H_
