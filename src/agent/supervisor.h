// Runs task processes: launch, stop, reap (docs/AGENT.md, "Running a task").
//
// Each task runs as a child of the agent in its own process group (so that a
// stop reaches everything it started, and a Ctrl-C at the agent's terminal
// does not reach it), in its own working folder, with stdout and stderr
// appended to a log file and stdin from /dev/null.
//
// Stop sends SIGTERM to the group at once and SIGKILL once the grace period
// is over (on a later Tick). When the group leader has exited, whatever is
// left in its group is killed before the leader is reaped, while the group
// id cannot yet be reused.
//
// Only the supervisor's own children are waited for (waitpid on each pid,
// never on -1), so popen() elsewhere in the process keeps working.
//
// Ends are announced, not only polled: the supervisor holds a pidfd for each
// process (Linux 5.3+), and WaitForExit sleeps until one becomes readable, so
// a caller can reap an ended task at once instead of on its next poll.
//
// Threading: all methods are safe to call from several threads.
#ifndef HF_AGENT_SUPERVISOR_H_
#define HF_AGENT_SUPERVISOR_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/mutex.h"
#include "core/status.h"

namespace hf::agent {

struct LaunchSpec {
  uint64_t id = 0;                // the task id; one live process per id
  std::vector<std::string> argv;  // argv[0] is looked up on the agent's PATH
  std::vector<std::string> env;   // "KEY=VALUE", the child's whole environment
  std::string cwd;                // must exist
  std::string log_path;           // opened for append, created if missing
};

// How a process ended.
struct ExitInfo {
  uint64_t id = 0;
  int exit_code = -1;    // -1 when killed by a signal
  int signal = 0;        // 0 when it exited
  bool stopped = false;  // Stop() was called for it
  bool unknown = false;  // an adopted process: how it ended is not known
};

// Field 22 of /proc/<pid>/stat (start time in clock ticks since boot); 0 when
// the process does not exist or is a zombie.
uint64_t ProcStartTime(pid_t pid);

class ForkServer;

class Supervisor {
 public:
  using Clock = std::chrono::steady_clock;

  // `fork_server_program`, when not empty, is the heteroflow-task-supervisor
  // executable: a LaunchSpec whose argv[0] is that path is started through
  // its fork server (fork_server.h), the same process made for a fraction of
  // the CPU; should the fork server fail, Launch spawns it as any other.
  explicit Supervisor(std::string fork_server_program = {});
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Starts the process; returns its pid. Errors: AlreadyExists when `id`
  // runs already; InvalidArgument for an empty argv; Unavailable when the log
  // cannot be opened, the folder entered or the program executed (the
  // message names the program and the cause, e.g. "No such file or
  // directory") — in those cases no process is left behind.
  Result<pid_t> Launch(const LaunchSpec& spec) HF_EXCLUDES(mu_);

  // SIGTERM to the process group now, SIGKILL after `grace`. No-op for an
  // unknown id; a second call keeps the earlier deadline.
  void Stop(uint64_t id, std::chrono::milliseconds grace) HF_EXCLUDES(mu_);

  // Tracks a process this supervisor did not start (left running by an
  // earlier agent; its own group leader). Its end is noticed by polling
  // ProcStartTime in Reap (it is not our child) and reported with
  // unknown = true. AlreadyExists when `id` is tracked already.
  Status Adopt(uint64_t id, pid_t pid, uint64_t start_time) HF_EXCLUDES(mu_);

  // Sends due SIGKILLs and reaps ended processes, without blocking.
  std::vector<ExitInfo> Reap() HF_EXCLUDES(mu_);

  // Blocks up to `timeout` until a tracked process ends or Interrupt() is
  // called; true when a process ended (Reap then finds it, an adopted one
  // included, without waiting for its once-a-second check). Each end is
  // announced once. Without pidfds (a kernel before 5.3) it only sleeps, and
  // ends are found by calling Reap. Meant for one thread at a time.
  bool WaitForExit(std::chrono::milliseconds timeout) HF_EXCLUDES(mu_);
  // Ends the WaitForExit in progress, or the next one, at once.
  void Interrupt();

  bool Has(uint64_t id) const HF_EXCLUDES(mu_);
  std::vector<uint64_t> Ids() const HF_EXCLUDES(mu_);
  pid_t Pid(uint64_t id) const HF_EXCLUDES(mu_);  // 0 when unknown

 private:
  struct Child {
    pid_t pid = 0;
    bool stopping = false;
    Clock::time_point kill_at;
    bool adopted = false;
    uint64_t start_time = 0;  // adopted only
    Clock::time_point next_check;  // adopted only: polled every second
    int pidfd = -1;         // -1 when the kernel gave none
    bool ended = false;     // adopted only: its pidfd said it ended
  };
  // Opens a pidfd for `pid` and watches it (announces its end once); -1 when
  // the kernel has none to give.
  int Watch(uint64_t id, pid_t pid);

  const std::unique_ptr<ForkServer> fork_server_;  // null without
  // An epoll set of every child's pidfd (one-shot) and wake_fd_; -1 without.
  const int epoll_fd_;
  const int wake_fd_;  // an eventfd: Interrupt()
  mutable Mutex mu_;   // guards children_
  std::map<uint64_t, Child> children_ HF_GUARDED_BY(mu_);
};

}  // namespace hf::agent

#endif  // HF_AGENT_SUPERVISOR_H_
