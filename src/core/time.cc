#include "core/time.h"

#include <cstdio>
#include <ctime>

namespace hf {
namespace {

std::string Format(int64_t ms, bool millis) {
  // Floor division, so that -1 ms is 23:59:59.999 the day before.
  int64_t secs = ms / 1000;
  int64_t rest = ms % 1000;
  if (rest < 0) {
    rest += 1000;
    --secs;
  }
  const std::time_t t = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[48];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  if (millis) {
    std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(rest));
  } else {
    std::snprintf(buf + n, sizeof buf - n, "Z");
  }
  return buf;
}

}  // namespace

std::string FormatTimeMs(int64_t ms) { return Format(ms, true); }

std::string FormatTimeSeconds(int64_t ms) { return Format(ms, false); }

}  // namespace hf
