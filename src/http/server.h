// HttpServer: the HTTP/1.1 transport that every REST route and the event
// stream sit on. It owns sockets, limits and timeouts; it knows nothing about
// routes, auth or JSON schemas (see router.h, auth.h, codec.h).
//
// Handlers see only the thin Request/Response types below, never Boost types,
// so this header stays cheap to include; Beast and Asio live in the .cc.
//
// Error policy: every answer the transport makes by itself is a JSON body
// {"error":{"code":"...","message":"..."}}:
//   400 bad_request        malformed start line, header, chunked encoding,
//                          Content-Length, or a path with ".." / "%2F"
//   408 timeout            the request header (or body) did not arrive in time
//   413 payload_too_large  Content-Length or a chunked body over max_body_bytes
//   431 header_too_large   the header block over max_header_bytes
//   500 internal           a handler threw
//   503 unavailable        max_connections reached and no quiet connection
//                          to make room (see HttpServerOptions::max_connections)
// After a 4xx/5xx produced by the transport the connection is closed, because
// the rest of the byte stream can no longer be trusted; other connections are
// unaffected.
#ifndef HF_HTTP_SERVER_H_
#define HF_HTTP_SERVER_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace hf::http {

// Header names compare case-insensitively (RFC 9110); values are as sent.
using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct Request {
  std::string method;  // as sent, e.g. "GET"; HTTP methods are case-sensitive
  // The path, percent-decoded, without the query. Always starts with '/'; the
  // server has already rejected ".." segments and encoded slashes.
  std::string path;
  // Query parameters, URL-decoded ('+' is a space). Repeated keys keep all
  // values in order of appearance.
  std::multimap<std::string, std::string> query;
  HeaderList headers;
  std::string body;
  std::string remote_address;  // peer IP, e.g. "127.0.0.1"
  // {name} segments captured by the Router; empty before routing.
  std::map<std::string, std::string> path_params;

  // First header with this name (case-insensitive), if any.
  std::optional<std::string_view> Header(std::string_view name) const;
  // First value of a query parameter, if present.
  std::optional<std::string_view> Query(std::string_view name) const;
  // A captured path parameter; empty string when the route has no such name.
  std::string_view Param(std::string_view name) const;
};

class SseStream;
class BodyStream;
struct Response;

// Completes a deferred response (see Response::defer). May be called from any
// thread; the first call wins, and calls after the connection closed do
// nothing.
using Reply = std::function<void(Response)>;

// What a handler answers. Either a plain body, or (when `stream` is set) a
// server-sent-event stream: the server writes the status line and headers with
// Content-Type text/event-stream and no Content-Length, then calls `stream`
// once with the open stream. `body` and `content_type` are ignored then.
struct Response {
  int status = 200;
  std::string content_type = "application/json";
  HeaderList headers;  // extra headers; Content-Length is computed
  std::string body;
  // Called on a server thread right after the headers went out. It must not
  // block for long: keep the stream (e.g. in a subscriber list) and send from
  // elsewhere, or start a thread of your own.
  std::function<void(std::shared_ptr<SseStream>)> stream;
  // When set (and `stream` is not), the body is sent as it is produced, with
  // chunked transfer encoding (close-delimited for an HTTP/1.0 client). The
  // server writes the status line, `content_type` (when not empty; otherwise a
  // Content-Type in `headers` is used) and `headers`, without Content-Length,
  // Transfer-Encoding or Connection from `headers` (hop-by-hop: the server
  // frames the body itself), then calls `body_stream` once, on a server
  // thread, with the open stream. It must not block: keep the stream and
  // write from elsewhere. After BodyStream::Finish the connection serves the
  // client's next request (keep-alive); after Abort it is closed. There are
  // no read or write timeouts while the body streams; a client that stops
  // reading is cut off by max_stream_backlog_bytes.
  std::function<void(std::shared_ptr<BodyStream>)> body_stream;
  // When set (and neither `stream` nor `body_stream` is), the answer comes
  // later: the server calls `defer` once, on a server thread, with a Reply,
  // and sends the Response the Reply is given. That Response may itself carry
  // `stream` or `body_stream` (its `defer` is ignored), which is how a proxy
  // relays an upstream's status and headers once they are known and then
  // its body as it arrives. The handler thread is free meanwhile, which is what
  // long polls want. Whoever holds the Reply should call it within
  // HttpServerOptions::deferred_timeout; after that the connection is closed
  // without an answer. Until then the connection reads nothing more (a
  // client that vanishes is noticed when the answer is written).
  std::function<void(Reply)> defer;

  // Replaces any header of the same name (case-insensitive).
  void SetHeader(std::string name, std::string value);
  std::optional<std::string_view> Header(std::string_view name) const;
};

// One client's event stream. Thread-safe: Send and Close may be called from
// any thread, concurrently.
class SseStream {
 public:
  virtual ~SseStream() = default;
  // Queues one event ("event: <event>\ndata: <line>\n...\n\n"; an empty
  // `event` leaves the event line out, multi-line `data` becomes several data
  // lines). Returns false, and drops the event, once the stream is closed: the
  // client went away, the server is stopping, Close() was called, or the
  // client reads so slowly that more than HttpServerOptions::
  // max_stream_backlog_bytes are waiting (it is then cut off, so one slow
  // client cannot make the server buffer without bound).
  virtual bool Send(std::string_view event, std::string_view data) = 0;
  // Ends the stream and closes the connection. Idempotent.
  virtual void Close() = 0;
  virtual bool closed() const = 0;
};

// A response body sent as it is produced (chunked transfer encoding), e.g. a
// proxied model server's token stream. Thread-safe like SseStream: Write,
// Finish and Abort may be called from any thread, concurrently.
class BodyStream {
 public:
  virtual ~BodyStream() = default;
  // Queues bytes to be written as one chunk, sent promptly (no waiting for
  // more). Returns false, and drops them, once the stream is closed (client
  // gone, server stopping, Abort/Finish called, or more than
  // max_stream_backlog_bytes waiting: the client is then cut off). An empty
  // write is ignored and returns !closed().
  virtual bool Write(std::string_view bytes) = 0;
  // Ends the body properly (terminating chunk); the connection may then be
  // kept alive for the client's next request. Idempotent.
  virtual void Finish() = 0;
  // Ends the response abnormally: closes the connection without the
  // terminating chunk, so the client sees a truncated body. Idempotent; does
  // nothing after Finish.
  virtual void Abort() = 0;
  virtual bool closed() const = 0;
};

// A handler may throw; the server answers 500 internal and keeps serving.
using Handler = std::function<Response(const Request&)>;

// {"error":{"code":code,"message":message}} with the given status.
Response JsonError(int status, std::string code, std::string message);
// `body` serialised compactly, Content-Type application/json.
Response JsonResponse(int status, const nlohmann::json& body);

// Handlers whose request targets start with one of `prefixes` run on
// `threads` threads of their own (HttpServerOptions::handler_pools).
struct HandlerPool {
  std::vector<std::string> prefixes;
  int threads = 1;
};

struct HttpServerOptions {
  // IPv4 or IPv6 literal to bind. Not a host name: no resolver is involved.
  std::string address = "0.0.0.0";
  // 0 picks a free ephemeral port; read it back with bound_port().
  uint16_t port = 3333;
  // Threads that run I/O (reading requests, writing answers, timers), and
  // the handlers no pool takes. A handler occupies its thread while it runs.
  int worker_threads = 2;
  // Handlers that may block (a store write waiting for its fsync) run off
  // the I/O threads, so that they hold up neither other connections' reads
  // and writes nor the traffic of another pool: a request goes to the first
  // of handler_pools with a prefix its target starts with, else to a pool
  // of handler_threads threads, else (0) to the I/O threads themselves.
  // The answer is written from the I/O threads whichever ran the handler.
  std::vector<HandlerPool> handler_pools;
  int handler_threads = 0;
  // Requests whose handlers never block (answers kept in memory: health
  // checks, cached views) run on the I/O thread that read them, whichever
  // pool their path falls in: the hop to a pool and back would cost more
  // than they do. Empty: none.
  std::function<bool(const Request&)> runs_inline;
  // Largest request body accepted, whether announced by Content-Length (refused
  // before reading it) or arriving chunked (refused when it grows past).
  size_t max_body_bytes = 1 << 20;
  // Paths that take other bodies than max_body_bytes: a request whose target
  // starts with a prefix here may carry up to its bytes instead (the first
  // prefix that matches counts). The inference gateway's requests carry
  // prompts and images, far past what the REST API needs.
  std::vector<std::pair<std::string, size_t>> body_limits;
  // Largest header block (start line and fields) accepted.
  size_t max_header_bytes = 16 << 10;
  // Time from connection (or from the first byte of a keep-alive request) until
  // the whole header has arrived; defeats slowloris clients.
  std::chrono::milliseconds header_read_timeout = std::chrono::seconds(10);
  // Time allowed to read the body once the header is in.
  std::chrono::milliseconds body_read_timeout = std::chrono::seconds(30);
  // A keep-alive connection with no request in progress is closed after this.
  std::chrono::milliseconds idle_timeout = std::chrono::seconds(60);
  // Time allowed to write one response to the client.
  std::chrono::milliseconds write_timeout = std::chrono::seconds(30);
  // Open connections (event streams included), and open connections from one
  // client address (0: no per-address limit). A connection that would pass
  // either limit takes the place of a quiet one, closed to make room: one
  // waiting for its first request, or idle between requests, from the address
  // holding the most connections (the same address, for the per-address
  // limit), the one that never sent a request first, then the longest quiet.
  // A connection at work (a request being handled, a long poll, a stream) is
  // never closed for another. So idle sockets, however many, cannot keep
  // clients that send requests out. Only when nothing is quiet is the new
  // connection answered 503 unavailable with Connection: close, and closed,
  // so clients get a reason rather than a hanging SYN queue.
  int max_connections = 1024;
  int max_connections_per_address = 0;
  // Bytes (events, or body chunks) waiting to be written to one stream
  // before it is cut off.
  size_t max_stream_backlog_bytes = 1 << 20;
  // Longest wait for a deferred response (Response::defer).
  std::chrono::milliseconds deferred_timeout = std::chrono::minutes(5);
  // How long Stop() waits for in-flight requests before cutting them off.
  std::chrono::milliseconds shutdown_grace = std::chrono::seconds(5);
};

// Lifecycle: construct, Start() once, Stop() once (the destructor stops too).
// Not restartable. Start/Stop/bound_port may be called from any thread, but
// not from inside a handler (Stop would wait for itself).
class HttpServer {
 public:
  HttpServer(HttpServerOptions options, Handler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds, listens and starts the worker threads. Errors: InvalidArgument for
  // an address that is not an IP literal or bad options; Unavailable when the
  // port cannot be bound; FailedPrecondition when called twice.
  Status Start();

  // Graceful stop: closes the listener, closes idle and half-read connections,
  // ends event streams, lets requests whose handler already started finish and
  // write their response (up to shutdown_grace), then joins the threads.
  // Returns promptly when nothing is in flight. Idempotent.
  void Stop();

  // The port actually bound (useful with port 0); 0 before Start().
  uint16_t bound_port() const;

  struct Stats {
    int64_t open = 0;     // connections open now
    int64_t evicted = 0;  // quiet connections closed to make room, ever
    int64_t refused = 0;  // connections answered 503 for want of room, ever
  };
  Stats stats() const;

  // Opaque; public only so that the .cc's connection type can name it.
  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace hf::http

#endif  // HF_HTTP_SERVER_H_
