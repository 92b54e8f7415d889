// The REST API's route table: who may call each route (its Action, checked
// against the caller's bearer token), how the OpenAPI document describes it,
// and whether it is answered on the I/O thread (from memory) or on the
// handler pool (it may wait for the store).
//
// The api/ classes register their routes here; ControlPlane dispatches
// every request that is not the gateway's or the UI's through it.
//
// Threading: register every route before serving; afterwards Dispatch,
// RunsInline and OpenApi are const and safe from many threads at once.
#ifndef HF_SERVER_ROUTE_TABLE_H_
#define HF_SERVER_ROUTE_TABLE_H_

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "http/router.h"
#include "http/server.h"
#include "server/authenticator.h"

namespace hf::server {

class RouteTable {
 public:
  // A route's handler, given the authenticated caller.
  using Handler = std::function<http::Response(const http::Request&, const Caller&)>;

  // Where a route is answered: kInline routes answer from memory on the
  // transport's I/O thread (they must never wait for the store); the others
  // run on the API's handler pool.
  enum class Runs { kOnPool, kInline };

  explicit RouteTable(const Authenticator& auth) : auth_(auth) {}

  // A route that needs a token whose role may do `action`. `body`: the
  // request body's schema name for the OpenAPI document, "" when none.
  // An inline route has a path without parameters.
  void Add(const char* method, const char* path, Action action, const char* summary, Handler fn,
           const char* body = "", Runs runs = Runs::kOnPool);
  // A route anyone may call (health, the OpenAPI document).
  void AddPublic(const char* method, const char* path, const char* summary, http::Handler fn,
                 Runs runs = Runs::kOnPool);
  // A route of the inference gateway, answered before this table's router
  // (InferenceService::IsGatewayPath): described in the OpenAPI document
  // only. Its callers present an endpoint's key, not a token (none for a
  // public endpoint).
  void DescribeGateway(const char* method, const char* path, const char* summary,
                       const char* body = "");

  http::Response Dispatch(const http::Request& req) const { return router_.Dispatch(req); }
  // Whether `req` is for a route registered kInline.
  bool RunsInline(const http::Request& req) const;
  // The OpenAPI 3.0 document of every route registered.
  http::Response OpenApi() const;

 private:
  // How a route's caller proves who it is, as the OpenAPI document says it.
  enum class Credential { kToken, kNone, kEndpointKey };
  // One route as the OpenAPI document describes it.
  struct Doc {
    std::string method;
    std::string path;
    std::string summary;
    Credential credential = Credential::kToken;
    std::string body;
  };
  void Note(Doc doc, Runs runs);

  const Authenticator& auth_;
  http::Router router_;
  std::vector<Doc> docs_;
  // Paths of inline routes, each with its methods.
  std::map<std::string, std::set<std::string>, std::less<>> inline_;
};

}  // namespace hf::server

#endif  // HF_SERVER_ROUTE_TABLE_H_
