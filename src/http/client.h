// A small synchronous HTTP/1.1 client, used by the command-line client and
// the node agent to call the REST API (docs/API.md), on Boost.Beast over
// plain TCP. By default one connection per request: the command-line client
// runs one or a few calls per process. With keep_alive (the agent, which
// sends a report or two per task) the connection stays open between
// requests, which saves both sides a TCP connection, a session and a
// teardown per request.
//
// Keep-alive and retries: a connection the server has closed while idle
// (HttpServerOptions::idle_timeout, or to make room for others) is noticed
// before it is used, and a request that fails on a reused connection
// before any byte of an answer arrived is sent once more on a new one. The
// server may then see it twice (it may have been handled before the
// connection broke), so keep_alive is for callers whose requests may be
// repeated: the agent's are, since it re-sends whatever got no answer.
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
#include <memory>
#include <string>
#include <string_view>
#include <vector>

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
// Several URLs, comma-separated (the replicas of a control plane,
// docs/HA.md); at least one. InvalidArgument names the one at fault.
Result<std::vector<ServerUrl>> ParseServerUrls(std::string_view urls);

struct HttpResponse {
  int status = 0;
  std::string body;
};

class HttpClient {
 public:
  // `timeout` bounds each Send, a retry on a new connection included.
  HttpClient(ServerUrl server, std::string token, std::chrono::milliseconds timeout,
             bool keep_alive = false);
  // Several servers (a control plane's replicas, docs/HA.md): requests go
  // to one of them; when it cannot be connected to, the next one is tried
  // (each at most once per Send) and kept for the Sends that follow.
  HttpClient(std::vector<ServerUrl> servers, std::string token, std::chrono::milliseconds timeout,
             bool keep_alive = false);
  ~HttpClient();
  HttpClient(HttpClient&&) noexcept;
  HttpClient& operator=(HttpClient&&) noexcept;

  // Sends METHOD prefix+target with "Authorization: Bearer <token>" (when the
  // token is not empty) and, when `body` is not empty, the body as
  // application/json. `target` starts with '/' and may carry a query.
  Result<HttpResponse> Send(std::string_view method, std::string_view target,
                            std::string_view body = {}) const;

  // Closes the kept connection, if any (a caller going idle gives it back to
  // the server); the next Send opens a new one.
  void Close() const;

 private:
  struct Connection;  // an open keep-alive connection

  const ServerUrl& server() const { return servers_[current_]; }

  std::vector<ServerUrl> servers_;  // never empty
  mutable size_t current_ = 0;      // the one in use
  std::string token_;
  std::chrono::milliseconds timeout_;
  bool keep_alive_ = false;
  // The connection kept between Sends (keep_alive only); null when none is.
  mutable std::unique_ptr<Connection> conn_;
};

}  // namespace hf::http

#endif  // HF_HTTP_CLIENT_H_
