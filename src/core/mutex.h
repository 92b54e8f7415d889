// A mutex that says what it guards, checked by the compiler: clang's
// thread-safety analysis (-Wthread-safety; scripts/thread-safety.sh builds
// every library with it and -Werror). g++ ignores the annotations.
//
//   mutable Mutex mu_;
//   int count_ HF_GUARDED_BY(mu_);          // read or written only with mu_ held
//   void BumpLocked() HF_REQUIRES(mu_);      // callers hold mu_
//   void Bump() HF_EXCLUDES(mu_) { MutexLock lock(mu_); BumpLocked(); }
//
// Waiting on a condition: `while (!ready_) lock.Wait(cv_);` keeps the
// guarded read in the function the analysis checks (a predicate lambda would
// hide it).
#ifndef HF_CORE_MUTEX_H_
#define HF_CORE_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#if defined(__clang__)
#define HF_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define HF_THREAD_ANNOTATION(x)
#endif

#define HF_CAPABILITY(x) HF_THREAD_ANNOTATION(capability(x))
#define HF_SCOPED_CAPABILITY HF_THREAD_ANNOTATION(scoped_lockable)
#define HF_GUARDED_BY(x) HF_THREAD_ANNOTATION(guarded_by(x))
#define HF_PT_GUARDED_BY(x) HF_THREAD_ANNOTATION(pt_guarded_by(x))
#define HF_REQUIRES(...) HF_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define HF_EXCLUDES(...) HF_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define HF_ACQUIRE(...) HF_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define HF_ACQUIRE_SHARED(...) HF_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define HF_RELEASE_SHARED(...) HF_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define HF_REQUIRES_SHARED(...) HF_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define HF_RELEASE(...) HF_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define HF_TRY_ACQUIRE(...) HF_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define HF_RETURN_CAPABILITY(x) HF_THREAD_ANNOTATION(lock_returned(x))
#define HF_NO_THREAD_SAFETY_ANALYSIS HF_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace hf {

// Neither mutex can be copied or moved (as the std mutexes inside).
class HF_CAPABILITY("mutex") Mutex {
 public:
  void lock() HF_ACQUIRE() { mu_.lock(); }
  void unlock() HF_RELEASE() { mu_.unlock(); }
  bool try_lock() HF_TRY_ACQUIRE(true) { return mu_.try_lock(); }

 private:
  friend class MutexLock;
  std::mutex mu_;
};

// Holds a Mutex for its scope; Unlock and Lock let go of it and take it
// again in between, and Wait waits on a condition variable.
class HF_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) HF_ACQUIRE(mu) : lock_(mu.mu_) {}
  // Takes over a mutex the caller holds already (after Mutex::try_lock).
  MutexLock(Mutex& mu, std::adopt_lock_t) HF_REQUIRES(mu) : lock_(mu.mu_, std::adopt_lock) {}
  ~MutexLock() HF_RELEASE() {}
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() HF_RELEASE() { lock_.unlock(); }
  void Lock() HF_ACQUIRE() { lock_.lock(); }

  // Releases the mutex while waiting; holds it again on return (wake-ups may
  // be spurious: callers re-check their condition in a loop).
  void Wait(std::condition_variable& cv) { cv.wait(lock_); }
  template <typename Rep, typename Period>
  std::cv_status WaitFor(std::condition_variable& cv, std::chrono::duration<Rep, Period> d) {
    return cv.wait_for(lock_, d);
  }
  template <typename C, typename D>
  std::cv_status WaitUntil(std::condition_variable& cv, std::chrono::time_point<C, D> t) {
    return cv.wait_until(lock_, t);
  }

 private:
  std::unique_lock<std::mutex> lock_;
};

// A readers-writer mutex, held by a SharedLock alone (kExclusive) or with
// other readers (kShared); members GUARDED_BY it are read under either and
// written under the first.
class HF_CAPABILITY("mutex") SharedMutex {
 public:
  void lock() HF_ACQUIRE() { mu_.lock(); }
  void unlock() HF_RELEASE() { mu_.unlock(); }
  void lock_shared() HF_ACQUIRE_SHARED() { mu_.lock_shared(); }
  void unlock_shared() HF_RELEASE_SHARED() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// How a SharedLock holds its mutex.
struct ExclusiveTag {};
struct SharedTag {};
inline constexpr ExclusiveTag kExclusive;  // alone: writers
inline constexpr SharedTag kShared;        // with other readers

// Holds a SharedMutex for its scope: SharedLock lock(mu_, kShared).
class HF_SCOPED_CAPABILITY SharedLock {
 public:
  SharedLock(SharedMutex& mu, ExclusiveTag) HF_ACQUIRE(mu) : mu_(mu), exclusive_(true) {
    mu_.lock();
  }
  SharedLock(SharedMutex& mu, SharedTag) HF_ACQUIRE_SHARED(mu) : mu_(mu), exclusive_(false) {
    mu_.lock_shared();
  }
  ~SharedLock() HF_RELEASE() { exclusive_ ? mu_.unlock() : mu_.unlock_shared(); }
  SharedLock(const SharedLock&) = delete;
  SharedLock& operator=(const SharedLock&) = delete;

 private:
  SharedMutex& mu_;
  const bool exclusive_;
};

}  // namespace hf

#endif  // HF_CORE_MUTEX_H_
