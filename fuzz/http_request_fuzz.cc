// An HTTP request as it arrives on a socket: Beast's parser under the
// server's header and body limits, then what the server makes of it: the
// request target (path and query), the header list, the bearer token, and
// the router's match of the path.
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <cstdint>
#include <string>

#include "http/router.h"
#include "http/server.h"
#include "http/target.h"
#include "server/auth.h"

namespace {

const hf::http::Router& TheRouter() {
  static const hf::http::Router* router = [] {
    auto* r = new hf::http::Router();
    for (const char* pattern : {"/api/v1/tasks/{id}", "/api/v1/nodes/{name}/cordon",
                                "/api/v1/plugins/{name}", "/api/v1/tasks"}) {
      (void)r->Add("GET", pattern, [](const hf::http::Request& req) {
        return hf::http::JsonResponse(200, {{"id", req.Param("id")}});
      });
    }
    return r;
  }();
  return *router;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace http = boost::beast::http;
  http::request_parser<http::string_body> parser;
  parser.header_limit(16 << 10);
  parser.body_limit(1 << 20);
  boost::beast::error_code ec;
  parser.eager(true);
  parser.put(boost::asio::buffer(data, size), ec);
  if (ec || !parser.is_header_done()) return 0;
  const auto& msg = parser.get();
  hf::http::Request req;
  req.method = std::string(msg.method_string());
  const auto target = msg.target();
  if (hf::http::ParseRequestTarget(std::string_view(target.data(), target.size()), req)) return 0;
  for (const auto& field : msg) {
    req.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  if (auto auth = req.Header("authorization")) (void)hf::server::BearerToken(*auth);
  (void)req.Query("limit");
  (void)TheRouter().Dispatch(req);
  return 0;
}
