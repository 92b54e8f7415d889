#include "core/private_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace hf {
namespace {

constexpr size_t kMaxSecretBytes = 4096;

std::string Mode(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", unsigned(m & 07777));
  return buf;
}

}  // namespace

Result<std::string> ReadSecretFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return NotFound("cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument(path + " is not a regular file");
  }
  if ((st.st_mode & 077) != 0) {
    ::close(fd);
    return FailedPrecondition(path + " holds a secret but others may read it (mode " +
                              Mode(st.st_mode) + "): chmod 600 " + path);
  }
  if (st.st_size <= 0 || size_t(st.st_size) > kMaxSecretBytes) {
    ::close(fd);
    return InvalidArgument(path + " must hold one token (1 to 4096 bytes)");
  }
  std::string out(size_t(st.st_size), '\0');
  const ssize_t n = ::read(fd, out.data(), out.size());
  ::close(fd);
  if (n < 0) return Unavailable("cannot read " + path + ": " + std::strerror(errno));
  out.resize(size_t(n));
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  if (out.empty()) return InvalidArgument(path + " must hold one token");
  return out;
}

Status WriteSecretFile(const std::string& path, const std::string& contents) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Unavailable("cannot create " + path + ": " + std::strerror(errno));
  // An existing file keeps its mode through O_CREAT: made private here.
  const bool ok = ::fchmod(fd, 0600) == 0 &&
                  ::write(fd, contents.data(), contents.size()) == ssize_t(contents.size());
  const int err = errno;
  ::close(fd);
  if (!ok) return Unavailable("cannot write " + path + ": " + std::strerror(err));
  return Status::Ok();
}

Status MakePrivateDir(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    std::filesystem::create_directories(path, ec);
    if (ec) return Unavailable("cannot create " + path + ": " + ec.message());
    // Whatever the umask made of it: ours alone.
    if (::chmod(path.c_str(), 0700) != 0) {
      return Unavailable("cannot chmod " + path + ": " + std::strerror(errno));
    }
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return Unavailable("cannot read " + path + ": " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) return FailedPrecondition(path + " is not a folder");
  if (st.st_uid != ::geteuid()) {
    return FailedPrecondition(path + " belongs to another user (uid " + std::to_string(st.st_uid) +
                              "); it must be this user's own");
  }
  // Writable by others: anyone could have put or replaced files in it.
  if ((st.st_mode & 022) != 0) {
    return FailedPrecondition(path + " may be written by others (mode " + Mode(st.st_mode) +
                              "): its files cannot be trusted; check them, then chmod 700 " + path);
  }
  // Readable by others (an older default): tightened.
  if ((st.st_mode & 077) != 0 && ::chmod(path.c_str(), 0700) != 0) {
    return FailedPrecondition(path + " may be entered by others (mode " + Mode(st.st_mode) +
                              ") and cannot be made private: " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace hf
