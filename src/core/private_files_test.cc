#include "core/private_files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace hf {
namespace {

std::string TempDir(const std::string& tag) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("hf-private-" + tag + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  return dir.string();
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST(PrivateFilesTest, SecretFilesAreWrittenAndReadOwnerOnly) {
  const std::string dir = TempDir("secret");
  ASSERT_TRUE(MakePrivateDir(dir).ok());
  const std::string path = dir + "/agent.token";
  ASSERT_TRUE(WriteSecretFile(path, "hf_abc\n").ok());
  EXPECT_EQ(ModeOf(path), 0600u);
  Result<std::string> got = ReadSecretFile(path);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "hf_abc");
  // Readable by others: refused, saying how to fix it.
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  got = ReadSecretFile(path);
  EXPECT_EQ(got.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(got.status().message().find("chmod 600 " + path), std::string::npos);
  // Rewriting makes it private again.
  ASSERT_TRUE(WriteSecretFile(path, "hf_def").ok());
  EXPECT_EQ(ModeOf(path), 0600u);
  // Not a regular file, missing, empty.
  EXPECT_EQ(ReadSecretFile(dir).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadSecretFile(dir + "/nope").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(WriteSecretFile(path, "\n").ok());
  EXPECT_EQ(ReadSecretFile(path).status().code(), StatusCode::kInvalidArgument);
  std::filesystem::remove_all(dir);
}

TEST(PrivateFilesTest, PrivateDirsAreOwnerOnly) {
  const std::string dir = TempDir("dir");
  ASSERT_TRUE(MakePrivateDir(dir + "/a/b").ok());
  EXPECT_EQ(ModeOf(dir + "/a/b"), 0700u);
  // Readable by others (the old default): tightened.
  ASSERT_EQ(::chmod((dir + "/a/b").c_str(), 0755), 0);
  ASSERT_TRUE(MakePrivateDir(dir + "/a/b").ok());
  EXPECT_EQ(ModeOf(dir + "/a/b"), 0700u);
  // Writable by others: refused, anyone could have replaced what it holds.
  ASSERT_EQ(::chmod((dir + "/a/b").c_str(), 0777), 0);
  Status s = MakePrivateDir(dir + "/a/b");
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("0777"), std::string::npos) << s.message();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hf
