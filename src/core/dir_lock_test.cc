#include "core/dir_lock.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>

namespace hf {
namespace {

std::string TempDir() {
  const auto dir =
      std::filesystem::temp_directory_path() / ("hf-dirlock-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

TEST(DirLockTest, OneHolderAtATimeNamedInTheRefusal) {
  const std::string dir = TempDir();
  std::optional<Result<DirLock>> first(DirLock::Acquire(dir));
  ASSERT_TRUE(first->ok()) << first->status().message();
  Result<DirLock> second = DirLock::Acquire(dir);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find(dir + " is in use"), std::string::npos)
      << second.status().message();
  EXPECT_NE(second.status().message().find("(pid " + std::to_string(::getpid()) + ")"),
            std::string::npos)
      << second.status().message();
  first.reset();  // released with its holder
  EXPECT_TRUE(DirLock::Acquire(dir).ok());
  std::filesystem::remove_all(dir);
}

TEST(DirLockTest, AnotherProcessIsRefusedUntilTheHolderDies) {
  const std::string dir = TempDir();
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Holds the lock, says so, and is then killed without any clean-up.
    Result<DirLock> held = DirLock::Acquire(dir);
    const char c = held.ok() ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    ::pause();
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  Result<DirLock> refused = DirLock::Acquire(dir);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("(pid " + std::to_string(child) + ")"),
            std::string::npos)
      << refused.status().message();
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_TRUE(DirLock::Acquire(dir).ok()) << "a killed holder left its lock behind";
  ::close(ready[0]);
  ::close(ready[1]);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hf
