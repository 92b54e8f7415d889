// Time comes in through this interface so tests can use a fake clock and the
// simulator can run months of trace in seconds.
#ifndef HF_CORE_CLOCK_H_
#define HF_CORE_CLOCK_H_

#include <chrono>
#include <cstdint>

namespace hf {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since the Unix epoch (or since the start of a simulation).
  virtual int64_t NowMs() const = 0;
};

class SystemClock final : public Clock {
 public:
  int64_t NowMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

// A clock that moves only when told to.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t now_ms = 0) : now_ms_(now_ms) {}
  int64_t NowMs() const override { return now_ms_; }
  void Set(int64_t now_ms) { now_ms_ = now_ms; }
  void Advance(int64_t delta_ms) { now_ms_ += delta_ms; }

 private:
  int64_t now_ms_;
};

}  // namespace hf

#endif  // HF_CORE_CLOCK_H_
