// An exclusive lock on a folder, held by one process at a time: the data dir
// of a server on the embedded SQLite store, whose scheduler plans from its
// own in-memory copy of the cluster. A second server on the same store would
// plan from another copy and could grant the same GPUs again, so it is
// refused at start (docs/OPERATIONS.md).
//
// The lock is flock(2) on DIR/lock, which holds the holder's pid for the
// message. The kernel drops it when the holder exits, however it exits
// (kill -9 included), so a crash never leaves a stale lock to clear by hand.
//
// Threading: a DirLock is owned by one thread; it guards nothing in memory.
#ifndef HF_CORE_DIR_LOCK_H_
#define HF_CORE_DIR_LOCK_H_

#include <string>

#include "core/status.h"

namespace hf {

class DirLock {
 public:
  // Takes the lock on `dir` (which must exist). FailedPrecondition, naming
  // the folder and the pid that holds it, when another holder has it
  // (another process, or another DirLock of this one); Unavailable when the
  // lock file cannot be opened.
  static Result<DirLock> Acquire(const std::string& dir);

  DirLock(DirLock&& other) noexcept;
  DirLock& operator=(DirLock&& other) noexcept;
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  ~DirLock();  // releases the lock

 private:
  explicit DirLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace hf

#endif  // HF_CORE_DIR_LOCK_H_
