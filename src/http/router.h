// Router: picks a Handler by HTTP method and path pattern.
//
// Patterns are absolute paths whose segments are literals or "{name}"
// parameters, e.g. "/api/v1/tasks/{id}". A parameter matches exactly one
// non-empty segment; there are no wildcards, optional segments or regexes,
// and a trailing slash is significant ("/a/" does not match "/a").
//
// When several patterns match a path, the most specific wins: comparing
// segments left to right, the first place where one pattern has a literal and
// the other a parameter decides. So "/tasks/batch" beats "/tasks/{id}" for
// "/tasks/batch", whatever the order of registration.
//
// Answers (JSON error bodies, see server.h):
//   404 not_found           no pattern matches the path
//   405 method_not_allowed  the best pattern exists but not for this method;
//                           the Allow header lists the methods it has
//
// The router sees paths already percent-decoded and cleaned by HttpServer, so
// it never has to handle "..", "%2F" or query strings itself.
//
// Threading: register every route before serving; after that Dispatch is
// const and safe to call from many threads at once.
#ifndef HF_HTTP_ROUTER_H_
#define HF_HTTP_ROUTER_H_

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "http/server.h"

namespace hf::http {

class Router {
 public:
  // Registers `handler` for `method` (e.g. "GET") and `pattern`.
  // Errors: InvalidArgument for an empty method, a pattern that does not start
  // with '/', an empty segment, a malformed or repeated "{name}";
  // AlreadyExists when the same method is already registered for a pattern of
  // the same shape ("/a/{x}" and "/a/{y}" have the same shape).
  Status Add(std::string method, std::string_view pattern, Handler handler);

  // Routes `req`, passing the handler a copy with path_params filled in (or
  // `req` itself when the route has no parameters and `req` carries none).
  // Exceptions from the handler propagate (HttpServer turns them into 500).
  Response Dispatch(const Request& req) const;

  // A Handler for HttpServer that calls Dispatch. The router must outlive it.
  Handler AsHandler() const;

 private:
  struct Segment {
    bool is_param = false;
    std::string text;  // the literal, or the parameter's name
  };
  struct Route {
    std::string method;
    std::string shape;  // pattern with parameter names erased, e.g. "/a/{}"
    std::vector<Segment> segments;
    Handler handler;
  };

  std::vector<Route> routes_;
};

}  // namespace hf::http

#endif  // HF_HTTP_ROUTER_H_
