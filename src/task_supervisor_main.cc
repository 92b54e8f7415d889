// heteroflow-task-supervisor: the task supervisor (agent/task_supervisor.h)
// as an executable of its own, installed beside `heteroflow`, where the agent
// looks for it. The agent starts one per task; linked statically from this
// file, the supervisor and lease.cc alone, it starts in a fraction of a
// millisecond, where the whole `heteroflow` binary took ~2 ms of dynamic
// linking per task (docs/BENCHMARKS.md, "Agents: task start path").
#include "agent/task_supervisor.h"

int main(int argc, char** argv) { return hf::agent::RunTaskSupervisor(argc, argv); }
