// The one reader of JSON documents that come from outside (request bodies):
// strict, bounded and with errors a client can act on.
//
// Threading: pure functions.
#ifndef HF_CORE_JSON_BODY_H_
#define HF_CORE_JSON_BODY_H_

#include <nlohmann/json.hpp>
#include <string_view>

#include "core/status.h"

namespace hf {

inline constexpr int kMaxJsonDepth = 32;

// Parses a request body. The top level must be an object. Errors (all
// InvalidArgument): an empty body; nesting deeper than `max_depth` levels
// (the top-level object is level 1), detected while parsing so a hostile
// body of 10^6 brackets costs no more than 33 levels; a key repeated in one
// object (the last would win silently otherwise); malformed JSON or trailing
// garbage, with the byte position nlohmann reports.
Result<nlohmann::json> ParseJsonBody(std::string_view body, int max_depth = kMaxJsonDepth);

}  // namespace hf

#endif  // HF_CORE_JSON_BODY_H_
