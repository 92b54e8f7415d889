#include "agent/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "agent/fork_server.h"

namespace hf::agent {
namespace {

std::string Errno(int e) { return std::strerror(e); }

// The epoll key of the wake-up eventfd; every other key is a task id.
constexpr uint64_t kWakeKey = ~uint64_t{0};

}  // namespace

Supervisor::Supervisor(std::string fork_server_program)
    : fork_server_(fork_server_program.empty()
                       ? nullptr
                       : std::make_unique<ForkServer>(std::move(fork_server_program))),
      epoll_fd_(epoll_create1(EPOLL_CLOEXEC)),
      wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (epoll_fd_ >= 0 && wake_fd_ >= 0) {
    epoll_event ev{.events = EPOLLIN, .data = {.u64 = kWakeKey}};
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  }
}

Supervisor::~Supervisor() {
  MutexLock lock(mu_);
  for (const auto& [id, c] : children_) {
    if (c.pidfd >= 0) close(c.pidfd);
  }
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

int Supervisor::Watch(uint64_t id, pid_t pid) {
  if (epoll_fd_ < 0) return -1;
  // pidfd_open's descriptor is close-on-exec. Closing it (Reap) takes it out
  // of the epoll set.
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return -1;
  epoll_event ev{.events = EPOLLIN | EPOLLONESHOT, .data = {.u64 = id}};
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool Supervisor::WaitForExit(std::chrono::milliseconds timeout) {
  const int ms = static_cast<int>(std::clamp<int64_t>(timeout.count(), 0, 1 << 30));
  if (epoll_fd_ < 0) {
    poll(nullptr, 0, ms);
    return false;
  }
  epoll_event events[32];
  const int n = epoll_wait(epoll_fd_, events, 32, ms);
  bool ended = false;
  for (int i = 0; i < n; ++i) {
    const uint64_t key = events[i].data.u64;
    if (key == kWakeKey) {
      uint64_t count = 0;
      ssize_t ignored = read(wake_fd_, &count, sizeof count);
      (void)ignored;
      continue;
    }
    ended = true;
    // A hint for Reap: an adopted process is checked at once. (Should the
    // id have ended and started again meanwhile, the check finds it alive.)
    MutexLock lock(mu_);
    if (auto it = children_.find(key); it != children_.end()) it->second.ended = true;
  }
  return ended;
}

void Supervisor::Interrupt() {
  if (wake_fd_ < 0) return;
  const uint64_t one = 1;
  ssize_t ignored = write(wake_fd_, &one, sizeof one);
  (void)ignored;
}

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
  Child c{.pid = pid, .adopted = true, .start_time = start_time,
          .next_check = Clock::now() + std::chrono::seconds(1)};
  c.pidfd = Watch(id, pid);
  // The pid may have been reused between the caller's check and the
  // pidfd's opening: then the process it names is not ours, and ours ended.
  if (c.pidfd >= 0 && ProcStartTime(pid) != start_time) {
    close(c.pidfd);
    c.pidfd = -1;
    c.ended = true;
  }
  children_[id] = c;
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
  if (fork_server_ && spec.argv[0] == fork_server_->program()) {
    if (std::optional<Result<pid_t>> forked = fork_server_->Spawn(spec)) {
      if (!forked->ok()) return forked->status();
      const pid_t pid = **forked;
      MutexLock lock(mu_);
      children_[spec.id] = Child{.pid = pid, .pidfd = Watch(spec.id, pid)};
      return pid;
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
  const ChildSpawnAttr attr;
  pid_t pid = 0;
  const int spawn_errno =
      posix_spawnp(&pid, argv[0], &actions, attr.get(), argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(log_fd);
  close(null_fd);
  if (spawn_errno != 0) {
    return Unavailable("cannot run '" + spec.argv[0] + "': " + Errno(spawn_errno));
  }
  MutexLock lock(mu_);
  children_[spec.id] = Child{.pid = pid, .pidfd = Watch(spec.id, pid)};
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
      // Not our child: checked when its pidfd says it ended, else every
      // second (every Reap while stopping).
      if (!c.ended && !c.stopping && now < c.next_check) {
        ++it;
        continue;
      }
      c.next_check = now + std::chrono::seconds(1);
      if (kill(c.pid, 0) == 0 && ProcStartTime(c.pid) == c.start_time) {
        c.ended = false;  // a stale hint; from now on, polled
        ++it;
        continue;
      }
      out.push_back(ExitInfo{.id = it->first, .stopped = c.stopping, .unknown = true});
      if (c.pidfd >= 0) close(c.pidfd);
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
    if (c.pidfd >= 0) close(c.pidfd);
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
