#include "core/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace hf {

Result<DirLock> DirLock::Acquire(const std::string& dir) {
  const std::string path = dir + "/lock";
  // O_CLOEXEC: a process the holder starts must not inherit the lock.
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Unavailable("cannot open " + path + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char buf[32] = {};
    const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    ::close(fd);
    if (err != EWOULDBLOCK) return Unavailable("cannot lock " + path + ": " + std::strerror(err));
    std::string holder = n > 0 ? std::string(buf, size_t(n)) : std::string();
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    return FailedPrecondition(dir + " is in use by another heteroflow server" +
                              (holder.empty() ? std::string() : " (pid " + holder + ")") +
                              ": stop it first, or give this one another --data-dir");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != ssize_t(pid.size())) {
    const int err = errno;
    ::close(fd);
    return Unavailable("cannot write " + path + ": " + std::strerror(err));
  }
  return DirLock(fd);
}

DirLock::DirLock(DirLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

DirLock& DirLock::operator=(DirLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

DirLock::~DirLock() {
  // Closing the last descriptor of the open file drops the flock; the file
  // stays, so that the next holder locks the same inode.
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace hf
