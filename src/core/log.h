// Logging for the long-running commands (server, agent, and the inference
// gateway inside the server), through spdlog: one line per message on stderr,
// with a UTC timestamp and a level.
//
//   text (default):  2026-12-03T14:05:12.123Z warning scheduler: requeues held: ...
//   json:            {"time":"2026-12-03T14:05:12.123Z","level":"warning",
//                     "component":"server","msg":"scheduler: requeues held: ..."}
//
// Call sites use spdlog directly (spdlog::info("...{}...", value)); a message
// starts with its subsystem ("scheduler: ", "http: "). No message may carry
// a token, an endpoint key or a secret environment value: log names and ids,
// never credentials (tests/api/hfapi.py checks every e2e test's logs).
//
// Threading: Init once at start, before other threads log; logging itself is
// thread-safe (spdlog's _mt sink).
#ifndef HF_CORE_LOG_H_
#define HF_CORE_LOG_H_

#include <string>
#include <string_view>

#include "core/status.h"

namespace hf::log {

inline constexpr const char* kLevels = "trace, debug, info, warn, error, off";
inline constexpr const char* kFormats = "text, json";

// Points spdlog's default logger at stderr with `level` (one of kLevels) and
// `format` (one of kFormats); `component` ("server", "agent") goes into
// every JSON line. InvalidArgument naming the bad value otherwise.
Status Init(std::string_view component, std::string_view level, std::string_view format);

}  // namespace hf::log

#endif  // HF_CORE_LOG_H_
