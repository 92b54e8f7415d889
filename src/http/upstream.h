// UpstreamClient: the asynchronous HTTP/1.1 client the inference gateway uses
// to forward requests to model-server replicas and relay their answers
// unbuffered. It owns connections, keep-alive pooling and timeouts; it knows
// nothing about models, routing or retries across replicas (the caller
// decides those, helped by UpstreamResult::not_sent).
//
// Like server.h, this header shows no Boost types; Asio and Beast live
// in the .cc.
#ifndef HF_HTTP_UPSTREAM_H_
#define HF_HTTP_UPSTREAM_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "http/server.h"  // HeaderList

namespace hf::http {

struct UpstreamRequest {
  std::string host;  // IPv4/IPv6 literal (no DNS), e.g. "127.0.0.1"
  uint16_t port = 0;
  std::string method = "GET";
  std::string target = "/";  // path and query, sent as is
  // Sent as given, in order (Host and Content-Length are set by the client;
  // hop-by-hop headers from the caller are dropped: Connection, Keep-Alive,
  // Transfer-Encoding, TE, Upgrade, Proxy-*). A header whose name or value
  // holds CR or LF is dropped too, so nobody can smuggle extra lines.
  HeaderList headers;
  std::string body;
  std::chrono::milliseconds connect_timeout{2000};
  // From the request being sent to the response header being complete.
  std::chrono::milliseconds header_timeout{300000};
  // Longest gap between body bytes.
  std::chrono::milliseconds idle_timeout{300000};
};

struct UpstreamResult {
  // Ok when the whole response arrived. Otherwise Unavailable (connect,
  // network, timeout, stopping, cancelled by on_body), InvalidArgument (a
  // host that is not an IP literal, port 0) or Internal (a malformed
  // response), with a message naming host:port and what happened, e.g.
  // "connect to 127.0.0.1:9 failed: Connection refused" or "no response
  // header from 127.0.0.1:8000 within 5000 ms".
  Status status;
  // True when the request certainly never reached the upstream's handler
  // (connect refused/timed out/reset before any byte was written), so the
  // caller may retry it elsewhere.
  bool not_sent = false;
  bool header_received = false;
  // Addition: true when the exchange ended because on_body returned false.
  bool cancelled = false;
  // True when the exchange ended because a timeout ran out (connect, header
  // or idle); false for refused, reset or closed connections.
  bool timed_out = false;
};

struct UpstreamHandlers {
  // Once, when the response header is complete: status and headers
  // (hop-by-hop ones removed, and those the upstream's Connection header
  // names; Content-Length and Transfer-Encoding removed too since the body is
  // re-framed by whoever relays it). Interim 1xx responses are skipped. May be
  // left empty.
  std::function<void(int status, HeaderList headers)> on_header;
  // Each piece of the (de-chunked) body as soon as it arrives, after
  // on_header. Return false to abort the exchange (on_done then reports
  // Unavailable with cancelled = true). May be left empty.
  std::function<bool(std::string_view data)> on_body;
  // Exactly once, last. Required.
  std::function<void(const UpstreamResult&)> on_done;
};

struct UpstreamOptions {
  int threads = 2;                // I/O threads
  size_t max_idle_per_host = 32;  // kept-alive connections per host:port
  // An idle pooled connection older than this is closed rather than reused.
  std::chrono::milliseconds idle_keepalive{30000};
  size_t max_header_bytes = 64 << 10;  // a larger response header fails
};

// Thread-safe: Send may be called from any thread, concurrently. Callbacks run
// on the client's I/O threads and must not block; the callbacks of one
// exchange never run concurrently with each other (they run in order:
// on_header, on_body..., on_done). A Send after Stop calls on_done at once,
// on the calling thread.
//
// Keep-alive: a connection whose response was read completely, and that the
// upstream did not mark Connection: close or end by EOF, goes back to a pool
// per host:port and is reused by the next Send there. When a reused
// connection fails before any response byte arrives (the upstream closed it
// while it sat idle), the request is retried once, transparently, on a fresh
// connection.
class UpstreamClient {
 public:
  explicit UpstreamClient(UpstreamOptions options = {});
  ~UpstreamClient();  // Stop()
  UpstreamClient(const UpstreamClient&) = delete;
  UpstreamClient& operator=(const UpstreamClient&) = delete;

  void Send(UpstreamRequest request, UpstreamHandlers handlers);

  // Closes every connection; pending exchanges end with on_done(Unavailable
  // "client stopping"); waits for their on_done and joins the I/O threads.
  // Idempotent. Must not be called from a callback.
  void Stop();

  size_t idle_connections() const;  // for tests

  // Opaque; public only so that the .cc's types can name it.
  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace hf::http

#endif  // HF_HTTP_UPSTREAM_H_
