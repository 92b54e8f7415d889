#include "agent/task_supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "agent/lease.h"

namespace hf::agent {
namespace {

constexpr int64_t kCheckMs = 200;

// The last stop signal that reached the group before the task was running.
volatile sig_atomic_t g_early_signal = 0;

void Note(int sig) { g_early_signal = sig; }

bool ParseMs(std::string_view s, int64_t& out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size() && out >= 0;
}

// Waits up to `ms` for SIGCHLD (blocked, so it is queued, not lost).
void WaitChild(int64_t ms) {
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  const timespec t{static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1'000'000};
  sigtimedwait(&chld, nullptr, &t);
}

// Ends this process as the task ended.
[[noreturn]] void ExitAs(int status) {
  if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
  const int sig = WIFSIGNALED(status) ? WTERMSIG(status) : SIGKILL;
  signal(sig, SIG_DFL);
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_UNBLOCK, &all, nullptr);
  kill(getpid(), sig);  // (one thread; forked by raw clone, see fork_server.cc)
  _exit(128 + sig);
}

}  // namespace

std::vector<std::string> TaskSupervisorCommand() {
  // The folder of the running executable, even when it has been replaced or
  // deleted since (readlink then ends with " (deleted)", which dirname drops).
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    std::string path(self, static_cast<size_t>(n));
    const size_t slash = path.rfind('/');
    if (slash != std::string::npos) {
      path = path.substr(0, slash + 1) + kTaskSupervisorName;
      if (access(path.c_str(), X_OK) == 0) return {path};
    }
  }
  return {"/proc/self/exe", "task-supervisor"};
}

int RunTaskSupervisor(int argc, char** argv) {
  std::string lease;
  int64_t fence_after_ms = -1, grace_ms = -1;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (i + 1 >= argc) break;
    if (a == "--lease") {
      lease = argv[++i];
    } else if (a == "--fence-after-ms") {
      if (!ParseMs(argv[++i], fence_after_ms)) fence_after_ms = -1;
    } else if (a == "--grace-ms") {
      if (!ParseMs(argv[++i], grace_ms)) grace_ms = -1;
    } else {
      break;
    }
  }
  if (lease.empty() || fence_after_ms <= 0 || grace_ms < 0 || i >= argc) {
    std::fprintf(stderr,
                 "usage: %s --lease FILE --fence-after-ms N --grace-ms N -- ARGV...\n",
                 kTaskSupervisorName);
    return 2;
  }

  // The group's stop signals reach the task; this process outlives them to
  // report how the task ended. SIGCHLD is taken with sigtimedwait.
  struct sigaction note {};
  note.sa_handler = Note;
  sigemptyset(&note.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &note, nullptr);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, nullptr);

  const int64_t started = MonotonicMs();
  const pid_t self = getpid();
  // vfork: this process waits until the task has exec'd (or given up), and
  // the child runs in its memory, so nothing of it is copied for a process
  // that is about to replace itself. What the child writes lands here: exec's
  // error, and the stop signal our handler notes before the task's exec.
  volatile int exec_errno = 0;
  const pid_t child = vfork();
  if (child == 0) {
    // Dies with the supervisor, whatever ends it.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != self) _exit(137);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execvp(argv[i], argv + i);
    exec_errno = errno;
    _exit(127);
  }
  if (child < 0) {
    std::fprintf(stderr, "heteroflow: cannot fork the task: %s\n", std::strerror(errno));
    return 127;
  }
  if (exec_errno != 0) {
    std::fprintf(stderr, "heteroflow: cannot execute %s: %s\n", argv[i], std::strerror(exec_errno));
    int status = 0;
    waitpid(child, &status, 0);
    return 127;
  }
  // A stop that reached the group before the task ran (between our handler
  // and its exec, the task had ours): the task gets it now.
  if (g_early_signal != 0) kill(0, g_early_signal);

  int64_t fenced_at = -1;
  for (;;) {
    int status = 0;
    const pid_t done = waitpid(child, &status, WNOHANG);
    if (done == child) {
      if (fenced_at >= 0) kill(0, SIGKILL);  // what the task left in the group, and us
      ExitAs(status);
    }
    const int64_t now = MonotonicMs();
    if (fenced_at < 0) {
      const int64_t renewed = std::max(ReadLease(lease).value_or(0), started);
      if (now - renewed > fence_after_ms) {
        fenced_at = now;
        std::fprintf(stderr,
                     "heteroflow: fenced: the agent has not renewed its lease for %.1f s; "
                     "stopping the task (SIGTERM, then SIGKILL after %.1f s)\n",
                     double(now - renewed) / 1000, double(grace_ms) / 1000);
        std::fflush(stderr);
        const int fd = open("fenced", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd >= 0) close(fd);
        kill(0, SIGTERM);
      }
    } else if (now - fenced_at >= grace_ms) {
      kill(0, SIGKILL);
    }
    WaitChild(kCheckMs);
  }
}

}  // namespace hf::agent
