// Times as text: RFC 3339 in UTC, the form every answer of the API, every
// event and the client use ("2026-12-02T14:00:00.123Z").
//
// Threading: pure functions.
#ifndef HF_CORE_TIME_H_
#define HF_CORE_TIME_H_

#include <cstdint>
#include <string>

namespace hf {

// Milliseconds since the epoch as "2026-12-02T14:00:00.123Z" (the API's
// form). Times before the epoch are written correctly too.
std::string FormatTimeMs(int64_t ms);

// The same to the second, "2026-12-02T14:00:00Z" (for people: the client).
std::string FormatTimeSeconds(int64_t ms);

}  // namespace hf

#endif  // HF_CORE_TIME_H_
