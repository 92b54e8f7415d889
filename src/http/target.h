// The request target of an HTTP request (RFC 9112 origin-form), split and
// decoded into Request::path and Request::query, refusing what no handler
// should have to defend against.
//
// Threading: a pure function.
#ifndef HF_HTTP_TARGET_H_
#define HF_HTTP_TARGET_H_

#include <optional>
#include <string>
#include <string_view>

#include "http/server.h"

namespace hf::http {

// Fills req.path (percent-decoded, always starting with '/') and req.query
// ('+' is a space) from `target`. Returns an error message, leaving `req`'s
// path unset, for: a target that is not an absolute path; an invalid or
// truncated percent-encoding; an encoded '/' or '\\' or NUL in the path (they
// would let "a%2Fb" reach a handler as segments the router never saw); '.'
// or '..' segments (refused rather than resolved: resolving them is how path
// traversal slips past prefix checks); a NUL in the query.
std::optional<std::string> ParseRequestTarget(std::string_view target, Request& req);

}  // namespace hf::http

#endif  // HF_HTTP_TARGET_H_
