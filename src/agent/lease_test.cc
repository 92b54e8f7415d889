#include "agent/lease.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace hf::agent {
namespace {

TEST(LeaseTest, WrittenAtomicallyAndReadBack) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("hf-lease-" + std::to_string(::getpid()))).string();
  EXPECT_FALSE(ReadLease(path).has_value());
  const int64_t now = MonotonicMs();
  ASSERT_TRUE(WriteLease(path, now).ok());
  EXPECT_EQ(ReadLease(path), now);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_FALSE(std::filesystem::exists(path + ".new"));
  ASSERT_TRUE(WriteLease(path, now + 5000).ok());
  EXPECT_EQ(ReadLease(path), now + 5000);
  { std::ofstream(path) << "garbage"; }
  EXPECT_FALSE(ReadLease(path).has_value());
  std::filesystem::remove(path);
  // The monotonic clock moves forward.
  EXPECT_GE(MonotonicMs(), now);
}

}  // namespace
}  // namespace hf::agent
