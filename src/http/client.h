// A small synchronous HTTP/1.1 client, used by the command-line client and
// the node agent to call the REST API (docs/API.md), on Boost.Beast over
// plain TCP. One connection per request: the client runs one
// or a few calls per process, so keep-alive would buy nothing.
//
// Errors (Status, never exceptions):
//   - InvalidArgument: a server URL that is not http://HOST[:PORT][/PREFIX];
//   - Unavailable: the name does not resolve, the connection is refused or
//     reset, or the whole exchange took longer than the timeout. The message
//     names the server URL and the cause ("connection refused") and never
//     contains the token.
// An HTTP error status (4xx, 5xx) is not an error here: the caller reads the
// API's error body.
//
// Threading: a HttpClient is used from one thread; separate clients are
// independent.
#ifndef HF_HTTP_CLIENT_H_
#define HF_HTTP_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace hf::http {

// http://HOST[:PORT][/PREFIX]. HOST may be a name, an IPv4 address or an
// IPv6 address in brackets; PORT defaults to 80; PREFIX (no trailing slash,
// possibly empty) is put before every request path, for a server behind a
// reverse proxy. A URL without a scheme is taken as http://.
struct ServerUrl {
  std::string host;  // without brackets
  uint16_t port = 80;
  std::string prefix;  // "" or "/something", never ending in '/'

  // The value of the Host header: "host:port", IPv6 hosts in brackets.
  std::string HostHeader() const;
  // "http://host:port/prefix", for messages.
  std::string ToString() const;
};

// Refuses https:// (this client speaks plain TCP only), user info
// ("user:pass@", so credentials never sit in a URL), queries, fragments,
// empty hosts and ports outside 1..65535.
Result<ServerUrl> ParseServerUrl(std::string_view url);

struct HttpResponse {
  int status = 0;
  std::string body;
};

class HttpClient {
 public:
  HttpClient(ServerUrl server, std::string token, std::chrono::milliseconds timeout);

  // Sends METHOD prefix+target with "Authorization: Bearer <token>" (when the
  // token is not empty) and, when `body` is not empty, the body as
  // application/json. `target` starts with '/' and may carry a query.
  Result<HttpResponse> Send(std::string_view method, std::string_view target,
                            std::string_view body = {}) const;

 private:
  ServerUrl server_;
  std::string token_;
  std::chrono::milliseconds timeout_;
};

}  // namespace hf::http

#endif  // HF_HTTP_CLIENT_H_
