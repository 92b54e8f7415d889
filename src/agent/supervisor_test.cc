#include "agent/supervisor.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace hf::agent {
namespace {

using std::chrono::milliseconds;

class SupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("hf-supervisor-test-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  LaunchSpec Spec(uint64_t id, std::vector<std::string> argv, std::vector<std::string> env) {
    return LaunchSpec{.id = id,
                      .argv = std::move(argv),
                      .env = std::move(env),
                      .cwd = dir_.string(),
                      .log_path = (dir_ / "output.log").string()};
  }

  // Reaps until `id` ends or `timeout` passes.
  std::optional<ExitInfo> WaitExit(Supervisor& s, uint64_t id, milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      for (const ExitInfo& e : s.Reap()) {
        if (e.id == id) return e;
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
    return std::nullopt;
  }

  std::string Log() {
    std::ifstream in(dir_ / "output.log");
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::filesystem::path dir_;
};

TEST_F(SupervisorTest, CapturesOutputAndReapsTheExitCode) {
  Supervisor s;
  Result<pid_t> pid =
      s.Launch(Spec(1, {"sh", "-c", "echo $CUDA_VISIBLE_DEVICES; pwd; echo oops >&2; exit 3"},
                    {"PATH=/usr/bin:/bin", "CUDA_VISIBLE_DEVICES=2,0"}));
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  EXPECT_TRUE(s.Has(1));
  EXPECT_EQ(s.Pid(1), *pid);
  std::optional<ExitInfo> e = WaitExit(s, 1, milliseconds(5000));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->exit_code, 3);
  EXPECT_EQ(e->signal, 0);
  EXPECT_FALSE(e->stopped);
  EXPECT_FALSE(s.Has(1));
  EXPECT_EQ(Log(), "2,0\n" + std::filesystem::canonical(dir_).string() + "\noops\n");

  // The log is appended to, not replaced.
  ASSERT_TRUE(s.Launch(Spec(1, {"sh", "-c", "echo again"}, {"PATH=/usr/bin:/bin"})).ok());
  ASSERT_TRUE(WaitExit(s, 1, milliseconds(5000)).has_value());
  EXPECT_NE(Log().find("oops\nagain\n"), std::string::npos);
}

TEST_F(SupervisorTest, StopKillsTheProcessGroupWithinTheGracePeriod) {
  Supervisor s;
  // The shell ignores SIGTERM, so only the SIGKILL after the grace period
  // ends it; its child `sleep` is in the same group and must go too.
  Result<pid_t> pid =
      s.Launch(Spec(2, {"sh", "-c", "trap '' TERM; sleep 60 & echo $! > child.pid; wait; sleep 60"},
                    {"PATH=/usr/bin:/bin"}));
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  pid_t child = 0;
  for (int i = 0; i < 200 && child == 0; ++i) {
    std::ifstream in(dir_ / "child.pid");
    if (!(in >> child)) child = 0;
    std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_GT(child, 0);
  const auto t0 = std::chrono::steady_clock::now();
  s.Stop(2, milliseconds(500));
  std::optional<ExitInfo> e = WaitExit(s, 2, milliseconds(3000));
  ASSERT_TRUE(e.has_value());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(2500));
  EXPECT_TRUE(e->stopped);
  EXPECT_EQ(e->signal, SIGKILL);
  EXPECT_EQ(kill(*pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
  // The grandchild is not ours to reap: init does, soon after the kill.
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = kill(child, 0) == -1 && errno == ESRCH;
    std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
    std::string s1, s2, state;
    if (!gone && stat >> s1 >> s2 >> state && state == "Z") gone = true;  // dead, not reaped yet
    if (!gone) std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_TRUE(gone) << "the task's child " << child << " survived the stop";
}

TEST_F(SupervisorTest, StopEndsASleepWithSigterm) {
  Supervisor s;
  Result<pid_t> pid = s.Launch(Spec(3, {"sleep", "60"}, {"PATH=/usr/bin:/bin"}));
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  s.Stop(3, milliseconds(5000));
  std::optional<ExitInfo> e = WaitExit(s, 3, milliseconds(4000));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->signal, SIGTERM);
  EXPECT_EQ(kill(*pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST_F(SupervisorTest, LaunchErrors) {
  Supervisor s;
  Result<pid_t> missing = s.Launch(Spec(4, {"/no/such/program"}, {}));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/no/such/program"), std::string::npos);
  EXPECT_NE(missing.status().message().find("No such file"), std::string::npos);
  EXPECT_FALSE(s.Has(4));
  EXPECT_FALSE(s.Launch(Spec(5, {}, {})).ok());
  ASSERT_TRUE(s.Launch(Spec(6, {"sleep", "60"}, {"PATH=/usr/bin:/bin"})).ok());
  EXPECT_EQ(s.Launch(Spec(6, {"sleep", "60"}, {"PATH=/usr/bin:/bin"})).status().code(),
            StatusCode::kAlreadyExists);
  s.Stop(6, milliseconds(0));
  EXPECT_TRUE(WaitExit(s, 6, milliseconds(3000)).has_value());
}

TEST_F(SupervisorTest, AdoptedProcessIsStoppedAndItsEndNoticed) {
  EXPECT_NE(ProcStartTime(getpid()), 0u);
  EXPECT_EQ(ProcStartTime(0), 0u);
  Supervisor owner;  // stands for the agent that started it
  Result<pid_t> pid = owner.Launch(Spec(1, {"sleep", "30"}, {"PATH=/usr/bin:/bin"}));
  ASSERT_TRUE(pid.ok()) << pid.status().message();
  const uint64_t start = ProcStartTime(*pid);
  ASSERT_NE(start, 0u);
  Supervisor s;
  ASSERT_TRUE(s.Adopt(7, *pid, start).ok());
  EXPECT_FALSE(s.Adopt(7, *pid, start).ok());
  EXPECT_TRUE(s.Has(7));
  EXPECT_TRUE(s.Reap().empty());
  s.Stop(7, milliseconds(2000));
  // The owner reaps its child; the adopter notices the pid is gone.
  std::optional<ExitInfo> own = WaitExit(owner, 1, milliseconds(5000));
  ASSERT_TRUE(own.has_value());
  EXPECT_EQ(own->signal, SIGTERM);
  std::optional<ExitInfo> e = WaitExit(s, 7, milliseconds(5000));
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(e->unknown);
  EXPECT_TRUE(e->stopped);
  EXPECT_FALSE(s.Has(7));
}

TEST_F(SupervisorTest, AnEndIsAnnouncedAtOnce) {
  Supervisor s;
  // Nothing ends: the wait lasts its timeout; Interrupt ends it early.
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(s.WaitForExit(milliseconds(50)));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(45));
  s.Interrupt();
  t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(s.WaitForExit(milliseconds(5000)));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(1000));

  ASSERT_TRUE(s.Launch(Spec(1, {"sleep", "0.2"}, {"PATH=/usr/bin:/bin"})).ok());
  ASSERT_TRUE(s.WaitForExit(milliseconds(5000)));
  std::vector<ExitInfo> ended = s.Reap();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].id, 1u);
  EXPECT_EQ(ended[0].exit_code, 0);

  // An adopted process (not our child) is found at once, not on its
  // once-a-second check.
  Supervisor owner;
  Result<pid_t> pid = owner.Launch(Spec(2, {"sleep", "30"}, {"PATH=/usr/bin:/bin"}));
  ASSERT_TRUE(pid.ok()) << pid.status().message();
  ASSERT_TRUE(s.Adopt(3, *pid, ProcStartTime(*pid)).ok());
  EXPECT_TRUE(s.Reap().empty());
  kill(*pid, SIGKILL);
  ASSERT_TRUE(WaitExit(owner, 2, milliseconds(5000)).has_value());
  ASSERT_TRUE(s.WaitForExit(milliseconds(5000)));
  ended = s.Reap();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].id, 3u);
  EXPECT_TRUE(ended[0].unknown);
}

#ifdef HF_TASK_SUPERVISOR_BIN
// The task supervisor, started through its fork server: the same process as
// a spawned one (this process's child, its own group, folder, environment,
// output), and the same errors.
TEST_F(SupervisorTest, StartsTheTaskSupervisorThroughItsForkServer) {
  const std::string bin = HF_TASK_SUPERVISOR_BIN;
  const std::string lease = (dir_ / "lease").string();
  auto supervised = [&](uint64_t id, std::vector<std::string> command) {
    std::vector<std::string> argv = {bin,     "--lease",    lease, "--fence-after-ms",
                                     "60000", "--grace-ms", "1000", "--"};
    argv.insert(argv.end(), command.begin(), command.end());
    return Spec(id, std::move(argv), {"PATH=/usr/bin:/bin", "FOO=bar"});
  };
  Supervisor s(bin);
  Result<pid_t> pid = s.Launch(supervised(1, {"sh", "-c", "echo $FOO; pwd; exit 3"}));
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  EXPECT_EQ(getpgid(*pid), *pid);
  std::optional<ExitInfo> e = WaitExit(s, 1, milliseconds(5000));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->exit_code, 3);
  EXPECT_EQ(Log(), "bar\n" + std::filesystem::canonical(dir_).string() + "\n");

  // Ended by a signal: the supervisor ends by the same one.
  ASSERT_TRUE(s.Launch(supervised(2, {"sh", "-c", "kill -TERM $$"})).ok());
  e = WaitExit(s, 2, milliseconds(5000));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->signal, SIGTERM);

  // A stop reaches the group at once, the task included.
  ASSERT_TRUE(s.Launch(supervised(3, {"sleep", "60"})).ok());
  s.Stop(3, milliseconds(5000));
  e = WaitExit(s, 3, milliseconds(4000));
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(e->stopped);

  // A command that cannot be executed: the supervisor says why in the log
  // and ends with 127, as a shell does.
  std::filesystem::remove(dir_ / "output.log");
  ASSERT_TRUE(s.Launch(supervised(6, {"no-such-program-hf"})).ok());
  e = WaitExit(s, 6, milliseconds(5000));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->exit_code, 127);
  EXPECT_EQ(Log(), "heteroflow: cannot execute no-such-program-hf: No such file or directory\n");

  LaunchSpec no_dir = supervised(4, {"true"});
  no_dir.cwd = (dir_ / "missing").string();
  Result<pid_t> r = s.Launch(no_dir);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("No such file"), std::string::npos) << r.status().message();
  LaunchSpec no_log = supervised(5, {"true"});
  no_log.log_path = (dir_ / "missing" / "output.log").string();
  r = s.Launch(no_log);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("cannot open the log"), std::string::npos)
      << r.status().message();
  EXPECT_FALSE(s.Has(4));
  EXPECT_FALSE(s.Has(5));
  // The children that failed a step were reaped: no ended child is left
  // (the fork server itself lives on).
  siginfo_t info{};
  EXPECT_EQ(waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT), 0);
  EXPECT_EQ(info.si_pid, 0);
}
#endif

}  // namespace
}  // namespace hf::agent
