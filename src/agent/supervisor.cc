#include "agent/supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace hf::agent {
namespace {

std::string Errno(int e) { return std::strerror(e); }

}  // namespace

uint64_t ProcStartTime(pid_t pid) {
  if (pid <= 0) return 0;
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!f || !std::getline(f, line)) return 0;
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(line.substr(close + 1));
  std::string field;
  // After "pid (comm)" come field 3 (state) .. field 22 (starttime).
  for (int n = 3; n <= 22; ++n) {
    if (!(rest >> field)) return 0;
    if (n == 3 && (field == "Z" || field == "X")) return 0;
  }
  try {
    return std::stoull(field);
  } catch (...) {
    return 0;
  }
}

Status Supervisor::Adopt(uint64_t id, pid_t pid, uint64_t start_time) {
  MutexLock lock(mu_);
  if (children_.count(id) != 0) {
    return AlreadyExists("task " + std::to_string(id) + " is already running");
  }
  children_[id] = Child{.pid = pid, .adopted = true, .start_time = start_time,
                        .next_check = Clock::now() + std::chrono::seconds(1)};
  return Status::Ok();
}

Result<pid_t> Supervisor::Launch(const LaunchSpec& spec) {
  if (spec.argv.empty()) return InvalidArgument("task has no command");
  {
    MutexLock lock(mu_);
    if (children_.count(spec.id) != 0) {
      return AlreadyExists("task " + std::to_string(spec.id) + " is already running");
    }
  }
  // The vectors posix_spawn takes, pointing into `spec`.
  std::vector<char*> argv;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  const int log_fd = open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return Unavailable("cannot open the log " + spec.log_path + ": " + Errno(errno));
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) {
    const int e = errno;
    close(log_fd);
    return Unavailable("cannot prepare the task's process: " + Errno(e));
  }
  // posix_spawn, not fork: glibc's clone(CLONE_VM | CLONE_VFORK) copies none
  // of the agent's page tables, and reports a failed chdir or exec as its
  // result. The child is in its own group before exec, so a Stop() right
  // after Launch reaches it. The agent blocks or handles SIGINT/SIGTERM for
  // its own shutdown; a task starts with default dispositions and nothing
  // blocked. Sockets and files other threads opened without O_CLOEXEC (a
  // long poll in flight) are closed: only 0, 1 and 2 pass.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addchdir_np(&actions, spec.cwd.c_str());
  posix_spawn_file_actions_adddup2(&actions, null_fd, 0);
  posix_spawn_file_actions_adddup2(&actions, log_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, log_fd, 2);
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF |
                                      POSIX_SPAWN_SETSIGMASK);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t defaults, none;
  sigemptyset(&defaults);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGCHLD, SIGQUIT}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  pid_t pid = 0;
  const int spawn_errno =
      posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  close(log_fd);
  close(null_fd);
  if (spawn_errno != 0) {
    return Unavailable("cannot run '" + spec.argv[0] + "': " + Errno(spawn_errno));
  }
  MutexLock lock(mu_);
  children_[spec.id] = Child{.pid = pid};
  return pid;
}

void Supervisor::Stop(uint64_t id, std::chrono::milliseconds grace) {
  MutexLock lock(mu_);
  auto it = children_.find(id);
  if (it == children_.end() || it->second.stopping) return;
  it->second.stopping = true;
  it->second.kill_at = Clock::now() + grace;
  // An adopted pid is signalled only while it is still the same process.
  if (!it->second.adopted || ProcStartTime(it->second.pid) == it->second.start_time) {
    kill(-it->second.pid, SIGTERM);
  }
}

std::vector<ExitInfo> Supervisor::Reap() {
  std::vector<ExitInfo> out;
  MutexLock lock(mu_);
  const auto now = Clock::now();
  for (auto it = children_.begin(); it != children_.end();) {
    Child& c = it->second;
    if (c.stopping && now >= c.kill_at &&
        (!c.adopted || ProcStartTime(c.pid) == c.start_time)) {
      kill(-c.pid, SIGKILL);
    }
    if (c.adopted) {
      // Not our child: poll, every second (every Reap while stopping).
      if (!c.stopping && now < c.next_check) {
        ++it;
        continue;
      }
      c.next_check = now + std::chrono::seconds(1);
      if (kill(c.pid, 0) == 0 && ProcStartTime(c.pid) == c.start_time) {
        ++it;
        continue;
      }
      out.push_back(ExitInfo{.id = it->first, .stopped = c.stopping, .unknown = true});
      it = children_.erase(it);
      continue;
    }
    // Peek first (WNOWAIT): while the leader is an unreaped zombie its group
    // id cannot be reused, so killing what is left of the group is safe.
    siginfo_t info{};
    if (waitid(P_PID, static_cast<id_t>(c.pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
        info.si_pid == 0) {
      ++it;
      continue;
    }
    kill(-c.pid, SIGKILL);
    int status = 0;
    while (waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
    }
    ExitInfo e{.id = it->first, .stopped = c.stopping};
    if (WIFEXITED(status)) {
      e.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      e.signal = WTERMSIG(status);
    }
    out.push_back(e);
    it = children_.erase(it);
  }
  return out;
}

bool Supervisor::Has(uint64_t id) const {
  MutexLock lock(mu_);
  return children_.count(id) != 0;
}

std::vector<uint64_t> Supervisor::Ids() const {
  MutexLock lock(mu_);
  std::vector<uint64_t> ids;
  for (const auto& [id, c] : children_) ids.push_back(id);
  return ids;
}

pid_t Supervisor::Pid(uint64_t id) const {
  MutexLock lock(mu_);
  auto it = children_.find(id);
  return it == children_.end() ? 0 : it->second.pid;
}

}  // namespace hf::agent
