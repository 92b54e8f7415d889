// When an assigned task may start on this node (SPEC §10, "Preemption
// gating"): never while a process that is being stopped still holds what
// the task was given.
//
// The server hands a preemptor the GPUs (or CPU, or memory) of its victims
// in the same step that evicts them, but a victim's process lives on
// through its grace period (SIGTERM, then SIGKILL): started at once, both
// would run on one GPU and one of them would die of out-of-memory. So the
// agent counts every live process here, the stopping ones included, and
// starts a task only when it fits beside all of them; when it does not, the
// stopping processes that hold what it lacks are its blockers, and it
// starts as soon as they have exited.
//
// Overlap is judged by capacity, not by device alone: a shared GPU (milli,
// GPU memory) blocks only when the shares would pass the GPU's 1000 milli
// or its memory; CPU and memory block only when the node's would be
// overdrawn. A process whose allocation is not known (adopted from an
// earlier agent without its allocation file) overlaps everything. Only
// stopping processes block: a task that cannot fit beside processes the
// server still has here is the server's to sort out, and waiting for them
// would wait forever.
//
// Threading: pure functions.
#ifndef HF_AGENT_GATE_H_
#define HF_AGENT_GATE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/model.h"

namespace hf::agent {

// A process that lives on this node.
struct LiveProcess {
  uint64_t id = 0;
  std::optional<Allocation> alloc;  // nullopt: not known
  bool stopping = false;            // no longer assigned here: being stopped
};

struct Blockers {
  std::vector<uint64_t> tasks;     // stopping processes to wait for, ascending
  std::vector<std::string> holds;  // what they hold that the task needs: "GPU 0", "CPU", "memory"
  bool earlier_copy = false;       // an older copy of the task itself is among them
  bool empty() const { return tasks.empty(); }
};

// The stopping processes task `id` (granted `alloc` on `node`) must wait
// for. A live process with the same id (an older copy of the task, being
// stopped) always blocks.
Blockers StartBlockers(const NodeSpec& node, uint64_t id, const Allocation& alloc,
                       const std::vector<LiveProcess>& live);

// "waiting for task 12 to exit (it holds GPU 0)", for the task's status.
// Empty when nothing blocks.
std::string WaitingMessage(const Blockers& b);

}  // namespace hf::agent

#endif  // HF_AGENT_GATE_H_
