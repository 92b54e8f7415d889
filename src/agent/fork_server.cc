#include "agent/fork_server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <vector>

#include "agent/task_supervisor.h"

namespace hf::agent {
namespace {

// The step a child failed, in the answer.
enum ForkStep : int32_t { kForkOk = 0, kForkLog = 1, kForkDir = 2, kForkOther = 3 };

// A request past this (a huge environment) is refused by closing.
constexpr uint32_t kMaxRequest = 64u << 20;

bool ReadFull(int fd, void* data, size_t n) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t got = read(fd, p, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

bool WriteFull(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t put = send(fd, p, n, MSG_NOSIGNAL);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    p += put;
    n -= static_cast<size_t>(put);
  }
  return true;
}

// The forked supervisor, before it becomes one: sets up what exec'ing it
// from posix_spawn would have, reports the outcome on `report_fd`, and runs
// the supervisor. Single-threaded, a copy of the fork server.
[[noreturn]] void RunChild(int report_fd, const char* cwd, const char* log,
                           std::vector<char*>& argv, std::vector<char*>& env) {
  auto fail = [&](int32_t step) {
    const int32_t status[2] = {step, errno};
    ssize_t ignored = write(report_fd, status, sizeof status);
    (void)ignored;
    _exit(127);
  };
  if (setpgid(0, 0) != 0) fail(kForkOther);
  const int log_fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) fail(kForkLog);
  if (chdir(cwd) != 0) fail(kForkDir);
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(log_fd, 1) < 0 || dup2(log_fd, 2) < 0) {
    fail(kForkOther);
  }
  for (int sig : kDefaultSignals) signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  const int32_t ok[2] = {kForkOk, 0};
  ssize_t ignored = write(report_fd, ok, sizeof ok);
  (void)ignored;
  // The report pipe, the log's and /dev/null's first descriptors, and
  // anything else the fork server held.
  close_range(3, ~0U, 0);
  environ = env.data();
  _exit(RunTaskSupervisor(static_cast<int>(argv.size()) - 1, argv.data()));
}

}  // namespace

ChildSpawnAttr::ChildSpawnAttr() {
  posix_spawnattr_init(&attr_);
  posix_spawnattr_setflags(&attr_, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF |
                                       POSIX_SPAWN_SETSIGMASK);
  posix_spawnattr_setpgroup(&attr_, 0);
  sigset_t defaults, none;
  sigemptyset(&defaults);
  for (int sig : kDefaultSignals) sigaddset(&defaults, sig);
  posix_spawnattr_setsigdefault(&attr_, &defaults);
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr_, &none);
}

ChildSpawnAttr::~ChildSpawnAttr() { posix_spawnattr_destroy(&attr_); }

int RunForkServer(int fd) {
  for (;;) {
    uint32_t len = 0;
    if (!ReadFull(fd, &len, sizeof len)) return 0;  // the agent is gone
    if (len == 0 || len > kMaxRequest) return 1;
    std::string buf(len, '\0');
    if (!ReadFull(fd, buf.data(), len)) return 0;
    int32_t answer[3] = {0, kForkOther, EINVAL};
    // NUL-terminated strings: folder, log, argc, argv..., env...
    std::vector<char*> fields;
    if (buf.back() == '\0') {
      for (size_t at = 0; at < buf.size(); at += std::strlen(buf.data() + at) + 1) {
        fields.push_back(buf.data() + at);
      }
    }
    size_t argc = 0;
    if (fields.size() >= 3) {
      const char* n = fields[2];
      const auto [end, ec] = std::from_chars(n, n + std::strlen(n), argc);
      if (ec != std::errc() || *end != '\0') argc = 0;
    }
    if (argc == 0 || fields.size() < 3 + argc) {
      if (!WriteFull(fd, answer, sizeof answer)) return 0;
      continue;
    }
    std::vector<char*> argv(fields.begin() + 3, fields.begin() + 3 + static_cast<long>(argc));
    argv.push_back(nullptr);
    std::vector<char*> env(fields.begin() + 3 + static_cast<long>(argc), fields.end());
    env.push_back(nullptr);
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) {
      answer[2] = errno;
      if (!WriteFull(fd, answer, sizeof answer)) return 0;
      continue;
    }
    // A fork whose child's parent is the agent (CLONE_PARENT): it is the
    // agent's to wait for. The raw clone leaves the C library's cached
    // thread id stale in the child, which nothing there reads (raise() asks
    // the kernel for it; fork() sets the grandchild's).
    const long pid = syscall(SYS_clone, CLONE_PARENT | SIGCHLD, nullptr, nullptr, nullptr, 0);
    if (pid == 0) {
      close(fd);
      close(report[0]);
      RunChild(report[1], fields[0], fields[1], argv, env);
    }
    const int clone_errno = errno;
    close(report[1]);
    if (pid < 0) {
      answer[2] = clone_errno;
    } else {
      int32_t status[2] = {kForkOther, EIO};
      if (!ReadFull(report[0], status, sizeof status)) {
        status[0] = kForkOther;
        status[1] = EIO;
      }
      answer[0] = static_cast<int32_t>(pid);
      answer[1] = status[0];
      answer[2] = status[1];
    }
    close(report[0]);
    if (!WriteFull(fd, answer, sizeof answer)) return 0;
  }
}

ForkServer::ForkServer(std::string program) : program_(std::move(program)) {}

ForkServer::~ForkServer() {
  MutexLock lock(mu_);
  StopLocked();
}

bool ForkServer::StartLocked() {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return false;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, sv[1], kForkServerFd);
  posix_spawn_file_actions_addclosefrom_np(&actions, kForkServerFd + 1);
  // Its own group, so that a Ctrl-C at the agent's terminal does not reach
  // it; it ends when the agent does (the socket closes).
  const ChildSpawnAttr attr;
  std::string flag = kForkServerFlag;
  char* argv[] = {const_cast<char*>(program_.c_str()), flag.data(), nullptr};
  char* envp[] = {nullptr};
  pid_t pid = 0;
  const int e = posix_spawn(&pid, program_.c_str(), &actions, attr.get(), argv, envp);
  posix_spawn_file_actions_destroy(&actions);
  close(sv[1]);
  if (e != 0) {
    close(sv[0]);
    return false;
  }
  pid_ = pid;
  fd_ = sv[0];
  return true;
}

void ForkServer::StopLocked() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  if (pid_ > 0) {
    // Never mid-request (mu_ is held): what it forked belongs to the agent
    // and lives on.
    kill(pid_, SIGKILL);
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = 0;
}

std::optional<Result<pid_t>> ForkServer::Spawn(const LaunchSpec& spec) {
  std::string payload = spec.cwd;
  payload += '\0';
  payload += spec.log_path;
  payload += '\0';
  payload += std::to_string(spec.argv.size());
  payload += '\0';
  for (const std::string& a : spec.argv) {
    payload += a;
    payload += '\0';
  }
  for (const std::string& e : spec.env) {
    payload += e;
    payload += '\0';
  }
  if (payload.size() > kMaxRequest) return std::nullopt;
  const uint32_t len = static_cast<uint32_t>(payload.size());
  payload.insert(0, reinterpret_cast<const char*>(&len), sizeof len);

  MutexLock lock(mu_);
  // A fork server that ended (killed, or it refused a request) is noticed
  // before it is asked: its end of the socket is closed.
  if (fd_ >= 0) {
    pollfd p{.fd = fd_, .events = POLLIN};
    if (poll(&p, 1, 0) != 0) StopLocked();
  }
  if (fd_ < 0 && !StartLocked()) return std::nullopt;
  if (!WriteFull(fd_, payload.data(), payload.size())) {
    StopLocked();
    return std::nullopt;  // not taken: nothing was started
  }
  int32_t answer[3];
  if (!ReadFull(fd_, answer, sizeof answer)) {
    // It took the request and ended without an answer: whether it forked
    // is unknown, so the task is not started a second time.
    StopLocked();
    return Result<pid_t>(Unavailable("the task supervisors' fork server ended while starting " +
                                     spec.argv[0]));
  }
  const pid_t pid = answer[0];
  if (pid > 0 && answer[1] == kForkOk) return Result<pid_t>(pid);
  // The child exited at the step that failed; it is ours to reap.
  if (pid > 0) {
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  const std::string why = std::strerror(answer[2]);
  switch (answer[1]) {
    case kForkLog:
      return Result<pid_t>(Unavailable("cannot open the log " + spec.log_path + ": " + why));
    case kForkDir:
      return Result<pid_t>(Unavailable("cannot run '" + spec.argv[0] + "': " + why));
    default:
      return Result<pid_t>(Unavailable("cannot start " + spec.argv[0] + ": " + why));
  }
}

}  // namespace hf::agent
