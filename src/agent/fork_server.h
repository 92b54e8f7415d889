// A fork server for task supervisors: `heteroflow-task-supervisor
// --fork-server`, started once by the agent, makes each task's supervisor
// by forking itself, instead of the agent exec'ing the supervisor per task.
// A process that execs pays the C library's start-up every time (on a
// virtual machine its CPU probing traps to the hypervisor: ~0.5 ms of CPU),
// where a fork of this small, already started process costs a tenth of that
// (docs/BENCHMARKS.md, "Agents: task start path").
//
// The supervisor it forks is a child of the AGENT, not of the fork server
// (clone with CLONE_PARENT): the agent waits for it, holds its pidfd and
// reads its exit status exactly as for a process it spawned itself. It
// starts in its own process group (made before the agent learns the pid, so
// a stop right after the start reaches it), in the task's folder, with the
// task's environment, stdin from /dev/null and stdout and stderr appended to
// the log, default signal dispositions, nothing blocked, no other open
// descriptor: as Supervisor::Launch's posix_spawn would start it. It then
// runs RunTaskSupervisor with the request's argv, as exec'ing the program
// would.
//
// Protocol, on a stream socket (the fork server's fd 3): a request is a
// 4-byte length (host order) and that many bytes, NUL-terminated strings:
// the folder, the log's path, the argument count, the arguments, then the
// environment. The answer is three int32: the pid (0 when none was made),
// the step that failed (kForkOk, kForkLog, kForkDir, kForkOther) and its
// errno. A child that failed a step has exited (127): the agent reaps it.
// The fork server exits when the socket closes (the agent ended).
//
// Threading: ForkServer's methods are safe from several threads (one request
// at a time).
#ifndef HF_AGENT_FORK_SERVER_H_
#define HF_AGENT_FORK_SERVER_H_

#include <signal.h>
#include <spawn.h>
#include <sys/types.h>

#include <optional>
#include <string>

#include "agent/supervisor.h"
#include "core/mutex.h"
#include "core/status.h"

namespace hf::agent {

inline constexpr char kForkServerFlag[] = "--fork-server";
inline constexpr int kForkServerFd = 3;

// The agent's side.
class ForkServer {
 public:
  // `program`: the heteroflow-task-supervisor executable. Nothing starts
  // until the first Spawn.
  explicit ForkServer(std::string program);
  ~ForkServer();  // closes the socket and reaps the fork server
  ForkServer(const ForkServer&) = delete;
  ForkServer& operator=(const ForkServer&) = delete;

  const std::string& program() const { return program_; }

  // Starts `spec` (spec.argv[0] is program()) as described above and
  // returns its pid; errors as Supervisor::Launch's (the log cannot be
  // opened, the folder entered). nullopt when the fork server cannot be
  // started or reached (it is started again next time): the caller starts
  // the process itself.
  std::optional<Result<pid_t>> Spawn(const LaunchSpec& spec) HF_EXCLUDES(mu_);

 private:
  bool StartLocked() HF_REQUIRES(mu_);
  void StopLocked() HF_REQUIRES(mu_);

  const std::string program_;
  Mutex mu_;  // guards pid_ and fd_
  pid_t pid_ HF_GUARDED_BY(mu_) = 0;
  int fd_ HF_GUARDED_BY(mu_) = -1;
};

// The fork server's side: serves requests on `fd` until it closes; returns
// the process's exit code.
int RunForkServer(int fd);

// The signals every process the agent starts (a supervisor, the fork server)
// begins with at their default disposition.
inline constexpr int kDefaultSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGCHLD, SIGQUIT};

// posix_spawn attributes for such a process: its own process group,
// kDefaultSignals at their defaults, no signal blocked. Destroyed with the
// object.
class ChildSpawnAttr {
 public:
  ChildSpawnAttr();
  ~ChildSpawnAttr();
  ChildSpawnAttr(const ChildSpawnAttr&) = delete;
  ChildSpawnAttr& operator=(const ChildSpawnAttr&) = delete;
  const posix_spawnattr_t* get() const { return &attr_; }

 private:
  posix_spawnattr_t attr_;
};

}  // namespace hf::agent

#endif  // HF_AGENT_FORK_SERVER_H_
