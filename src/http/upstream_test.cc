// Tests over real loopback sockets. Most upstreams are scripted raw-socket
// servers, so that timing (a chunk, a pause, a close) can be exact; the load
// test uses the project's own HttpServer.
#include "http/upstream.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "http/server.h"

namespace hf::http {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

// A blocking upstream on 127.0.0.1: each accepted connection runs `script`
// on a thread of its own, with the connection's index (0 for the first).
class ScriptedUpstream {
 public:
  using Script = std::function<void(tcp::socket&, int index)>;

  explicit ScriptedUpstream(Script script)
      : acceptor_(ioc_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
        script_(std::move(script)) {
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] { AcceptLoop(); });
  }

  ~ScriptedUpstream() {
    stop_ = true;
    // Wakes the blocking accept.
    {
      asio::io_context ioc;
      tcp::socket s(ioc);
      boost::system::error_code ec;
      s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port_), ec);
    }
    thread_.join();
    {
      std::lock_guard lock(mu_);
      for (auto& s : sockets_) ::shutdown(s->native_handle(), SHUT_RDWR);
    }
    for (auto& t : conn_threads_) t.join();
  }

  uint16_t port() const { return port_; }
  int accepts() const { return accepts_.load(); }

 private:
  void AcceptLoop() {
    while (true) {
      tcp::socket s(ioc_);
      boost::system::error_code ec;
      acceptor_.accept(s, ec);
      if (stop_ || ec) return;
      int index = accepts_++;
      auto sp = std::make_shared<tcp::socket>(std::move(s));
      std::lock_guard lock(mu_);
      sockets_.push_back(sp);
      conn_threads_.emplace_back([this, sp, index] { script_(*sp, index); });
    }
  }

  asio::io_context ioc_;
  tcp::acceptor acceptor_;
  Script script_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepts_{0};
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::shared_ptr<tcp::socket>> sockets_;
  std::vector<std::thread> conn_threads_;
};

// Reads one request (header and Content-Length body) from `s`, keeping
// extra bytes in `buf`. Empty when the connection ended first.
std::string ReadRequest(tcp::socket& s, std::string& buf) {
  size_t end;
  while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
    char tmp[4096];
    boost::system::error_code ec;
    size_t n = s.read_some(asio::buffer(tmp), ec);
    if (ec || n == 0) return "";
    buf.append(tmp, n);
  }
  size_t len = 0;
  if (size_t p = buf.find("Content-Length: "); p != std::string::npos && p < end) {
    len = std::stoul(buf.substr(p + 16));
  }
  while (buf.size() < end + 4 + len) {
    char tmp[4096];
    boost::system::error_code ec;
    size_t n = s.read_some(asio::buffer(tmp), ec);
    if (ec || n == 0) return "";
    buf.append(tmp, n);
  }
  std::string req = buf.substr(0, end + 4 + len);
  buf.erase(0, end + 4 + len);
  return req;
}

void Send(tcp::socket& s, std::string_view bytes) {
  boost::system::error_code ec;
  asio::write(s, asio::buffer(bytes.data(), bytes.size()), ec);
}

// Blocks until the peer closes (or the test server shuts the socket down).
void WaitForClose(tcp::socket& s) {
  char tmp[256];
  boost::system::error_code ec;
  while (!ec) s.read_some(asio::buffer(tmp), ec);
}

// Collects one exchange's callbacks for the test thread.
class Collector {
 public:
  UpstreamHandlers Handlers() {
    UpstreamHandlers h;
    h.on_header = [this](int status, HeaderList headers) {
      std::lock_guard lock(mu_);
      ++header_calls_;
      status_ = status;
      headers_ = std::move(headers);
      cv_.notify_all();
    };
    h.on_body = [this](std::string_view data) {
      std::function<bool(std::string_view)> hook;
      {
        std::lock_guard lock(mu_);
        pieces_.emplace_back(data);
        hook = body_hook_;
        cv_.notify_all();
      }
      return hook ? hook(data) : true;
    };
    h.on_done = [this](const UpstreamResult& r) {
      std::lock_guard lock(mu_);
      ++done_calls_;
      result_ = r;
      cv_.notify_all();
    };
    return h;
  }

  void SetBodyHook(std::function<bool(std::string_view)> hook) {
    std::lock_guard lock(mu_);
    body_hook_ = std::move(hook);
  }

  // The result, once on_done ran; nullopt on timeout.
  std::optional<UpstreamResult> Wait(std::chrono::milliseconds timeout = 5s) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return result_.has_value(); });
    return result_;
  }

  int status() {
    std::lock_guard lock(mu_);
    return status_;
  }
  std::optional<std::string> Header(std::string_view name) {
    std::lock_guard lock(mu_);
    for (const auto& [k, v] : headers_) {
      if (k.size() == name.size() &&
          std::equal(k.begin(), k.end(), name.begin(),
                     [](char a, char b) { return std::tolower(a) == std::tolower(b); })) {
        return v;
      }
    }
    return std::nullopt;
  }
  std::vector<std::string> pieces() {
    std::lock_guard lock(mu_);
    return pieces_;
  }
  std::string body() {
    std::string out;
    for (const auto& p : pieces()) out += p;
    return out;
  }
  int header_calls() {
    std::lock_guard lock(mu_);
    return header_calls_;
  }
  int done_calls() {
    std::lock_guard lock(mu_);
    return done_calls_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int status_ = 0;
  HeaderList headers_;
  std::vector<std::string> pieces_;
  std::optional<UpstreamResult> result_;
  std::function<bool(std::string_view)> body_hook_;
  int header_calls_ = 0;
  int done_calls_ = 0;
};

UpstreamRequest Req(uint16_t port, std::string target = "/") {
  UpstreamRequest r;
  r.host = "127.0.0.1";
  r.port = port;
  r.target = std::move(target);
  return r;
}

const char* const kHello =
    "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Model: m1\r\nConnection: keep-alive\r\n"
    "Keep-Alive: timeout=5\r\n\r\nhello";

TEST(UpstreamClientTest, PostWithContentLengthBody) {
  std::mutex mu;
  std::string seen;
  ScriptedUpstream up([&](tcp::socket& s, int) {
    std::string buf;
    std::string req = ReadRequest(s, buf);
    {
      std::lock_guard lock(mu);
      seen = req;
    }
    Send(s, kHello);
    WaitForClose(s);
  });
  UpstreamClient client;
  Collector c;
  UpstreamRequest r = Req(up.port(), "/v1/completions?x=1");
  r.method = "POST";
  r.body = R"({"prompt":"hi"})";
  r.headers = {
      {"Content-Type", "application/json"}, {"Authorization", "Bearer t"}, {"Connection", "close"},
      {"Transfer-Encoding", "chunked"},     {"Proxy-Authorization", "x"},  {"Host", "evil"},
      {"X-Bad", "a\r\nInjected: 1"}};
  client.Send(r, c.Handlers());
  auto res = c.Wait();
  ASSERT_TRUE(res);
  EXPECT_TRUE(res->status.ok()) << res->status.ToString();
  EXPECT_TRUE(res->header_received);
  EXPECT_FALSE(res->not_sent);
  EXPECT_EQ(c.status(), 200);
  EXPECT_EQ(c.body(), "hello");
  EXPECT_EQ(c.Header("X-Model"), "m1");
  EXPECT_FALSE(c.Header("Content-Length"));
  EXPECT_FALSE(c.Header("Connection"));
  EXPECT_FALSE(c.Header("Keep-Alive"));
  EXPECT_EQ(c.header_calls(), 1);
  EXPECT_EQ(c.done_calls(), 1);
  EXPECT_EQ(client.idle_connections(), 1u);
  std::lock_guard lock(mu);
  EXPECT_EQ(seen.rfind("POST /v1/completions?x=1 HTTP/1.1\r\n", 0), 0u) << seen;
  EXPECT_NE(seen.find("Host: 127.0.0.1:" + std::to_string(up.port()) + "\r\n"), std::string::npos)
      << seen;
  EXPECT_NE(seen.find("Content-Length: 15\r\n"), std::string::npos) << seen;
  EXPECT_NE(seen.find("Authorization: Bearer t\r\n"), std::string::npos) << seen;
  EXPECT_EQ(seen.find("Connection"), std::string::npos) << seen;
  EXPECT_EQ(seen.find("chunked"), std::string::npos) << seen;
  EXPECT_EQ(seen.find("Proxy-"), std::string::npos) << seen;
  EXPECT_EQ(seen.find("evil"), std::string::npos) << seen;
  EXPECT_EQ(seen.find("Injected"), std::string::npos) << seen;
  EXPECT_EQ(seen.substr(seen.size() - 15), R"({"prompt":"hi"})");
}

TEST(UpstreamClientTest, ChunkedBodyIsDeliveredAsItArrives) {
  std::promise<void> first_seen;
  auto first_seen_f = first_seen.get_future();
  std::atomic<bool> upstream_waited{false};
  ScriptedUpstream up([&](tcp::socket& s, int) {
    std::string buf;
    if (ReadRequest(s, buf).empty()) return;
    Send(s,
         "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
         "\r\n"
         "d\r\ndata: first\n\n\r\n");
    // The second chunk goes out only once the client has seen the first.
    upstream_waited = first_seen_f.wait_for(5s) == std::future_status::ready;
    Send(s, "e\r\ndata: second\n\n\r\n0\r\n\r\n");
    WaitForClose(s);
  });
  UpstreamClient client;
  Collector c;
  std::atomic<bool> signalled{false};
  c.SetBodyHook([&](std::string_view data) {
    if (data.find("first") != std::string_view::npos && !signalled.exchange(true)) {
      first_seen.set_value();
    }
    return true;
  });
  client.Send(Req(up.port(), "/v1/chat/completions"), c.Handlers());
  auto res = c.Wait();
  ASSERT_TRUE(res);
  EXPECT_TRUE(res->status.ok()) << res->status.ToString();
  EXPECT_TRUE(upstream_waited) << "the first chunk was not delivered before the second was sent";
  EXPECT_EQ(c.body(), "data: first\n\ndata: second\n\n");
  ASSERT_GE(c.pieces().size(), 2u);
  EXPECT_EQ(c.pieces().front(), "data: first\n\n");
  EXPECT_EQ(c.Header("Content-Type"), "text/event-stream");
  EXPECT_FALSE(c.Header("Transfer-Encoding"));
  EXPECT_EQ(client.idle_connections(), 1u);
}

TEST(UpstreamClientTest, BodyUntilEofIsNotPooled) {
  ScriptedUpstream up([&](tcp::socket& s, int) {
    std::string buf;
    if (ReadRequest(s, buf).empty()) return;
    Send(s, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nabc");
    std::this_thread::sleep_for(20ms);
    Send(s, "def");
    s.shutdown(tcp::socket::shutdown_both);
  });
  UpstreamClient client;
  Collector c;
  client.Send(Req(up.port()), c.Handlers());
  auto res = c.Wait();
  ASSERT_TRUE(res);
  EXPECT_TRUE(res->status.ok()) << res->status.ToString();
  EXPECT_EQ(c.body(), "abcdef");
  EXPECT_EQ(client.idle_connections(), 0u);
}

TEST(UpstreamClientTest, ConnectionRefusedIsNotSent) {
  uint16_t port;
  {
    asio::io_context ioc;
    tcp::acceptor a(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    port = a.local_endpoint().port();
  }
  UpstreamClient client;
  Collector c;
  client.Send(Req(port), c.Handlers());
  auto res = c.Wait();
  ASSERT_TRUE(res);
  EXPECT_FALSE(res->status.ok());
  EXPECT_EQ(res->status.code(), StatusCode::kUnavailable);
  EXPECT_TRUE(res->not_sent);
  EXPECT_FALSE(res->header_received);
  EXPECT_NE(res->status.message().find("connect to 127.0.0.1:" + std::to_string(port) + " failed"),
            std::string::npos)
      << res->status.message();
  EXPECT_EQ(c.header_calls(), 0);
}

TEST(UpstreamClientTest, BadAddressIsInvalidArgument) {
  UpstreamClient client;
  Collector c;
  UpstreamRequest r = Req(80);
  r.host = "model-server.local";
  client.Send(r, c.Handlers());
  auto res = c.Wait();
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(res->not_sent);
}

TEST(UpstreamClientTest, HeaderTimeout) {
  ScriptedUpstream up([&](tcp::socket& s, int) {
    std::string buf;
    ReadRequest(s, buf);
    WaitForClose(s);  // never answers
  });
  UpstreamClient client;
  Collector c;
  UpstreamRequest r = Req(up.port());
  r.header_timeout = 200ms;
  auto t0 = std::chrono::steady_clock::now();
  client.Send(r, c.Handlers());
  auto res = c.Wait();
  ASSERT_TRUE(res);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 190ms);
  EXPECT_EQ(res->status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(res->status.message(),
            "no response header from 127.0.0.1:" + std::to_string(up.port()) + " within 200 ms");
  EXPECT_FALSE(res->not_sent);
  EXPECT_FALSE(res->header_received);
  EXPECT_EQ(client.idle_connections(), 0u);
}

TEST(UpstreamClientTest, IdleTimeoutBetweenBodyBytes) {
  ScriptedUpstream up([&](tcp::socket& s, int) {
    std::string buf;
    if (ReadRequest(s, buf).empty()) return;
    Send(s, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n");
    WaitForClose(s);
  });
  UpstreamClient client;
  Collector c;
  UpstreamRequest r = Req(up.port());
  r.idle_timeout = 200ms;
  client.Send(r, c.Handlers());
  auto res = c.Wait();
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status.code(), StatusCode::kUnavailable);
  EXPECT_NE(res->status.message().find("no response body bytes from"), std::string::npos)
      << res->status.message();
  EXPECT_TRUE(res->header_received);
  EXPECT_EQ(c.body(), "a");
}

TEST(UpstreamClientTest, OnBodyReturningFalseAborts) {
  std::atomic<bool> upstream_saw_close{false};
  ScriptedUpstream up([&](tcp::socket& s, int) {
    std::string buf;
    if (ReadRequest(s, buf).empty()) return;
    Send(s, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n");
    WaitForClose(s);
    upstream_saw_close = true;
  });
  UpstreamClient client;
  Collector c;
  c.SetBodyHook([](std::string_view) { return false; });
  client.Send(Req(up.port()), c.Handlers());
  auto res = c.Wait(2s);
  ASSERT_TRUE(res);
  EXPECT_FALSE(res->status.ok());
  EXPECT_TRUE(res->cancelled);
  EXPECT_TRUE(res->header_received);
  EXPECT_EQ(c.pieces(), std::vector<std::string>{"abc"});
  EXPECT_EQ(client.idle_connections(), 0u);
  for (int i = 0; i < 200 && !upstream_saw_close; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_TRUE(upstream_saw_close);
}

// Answers every request on a connection with kHello until the client leaves.
void ServeHellos(tcp::socket& s, int) {
  std::string buf;
  while (!ReadRequest(s, buf).empty()) Send(s, kHello);
}

TEST(UpstreamClientTest, KeepAliveReusesOneConnection) {
  ScriptedUpstream up(ServeHellos);
  UpstreamClient client;
  for (int i = 0; i < 3; ++i) {
    Collector c;
    client.Send(Req(up.port()), c.Handlers());
    auto res = c.Wait();
    ASSERT_TRUE(res);
    EXPECT_TRUE(res->status.ok()) << i << " " << res->status.ToString();
    EXPECT_EQ(c.body(), "hello");
  }
  EXPECT_EQ(up.accepts(), 1);
  EXPECT_EQ(client.idle_connections(), 1u);
}

TEST(UpstreamClientTest, ConnectionCloseFromUpstreamIsNotPooled) {
  ScriptedUpstream up([](tcp::socket& s, int) {
    std::string buf;
    while (!ReadRequest(s, buf).empty()) {
      Send(s, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
    }
  });
  UpstreamClient client;
  for (int i = 0; i < 2; ++i) {
    Collector c;
    client.Send(Req(up.port()), c.Handlers());
    auto res = c.Wait();
    ASSERT_TRUE(res);
    EXPECT_TRUE(res->status.ok());
    EXPECT_EQ(c.body(), "ok");
    EXPECT_EQ(client.idle_connections(), 0u);
  }
  EXPECT_EQ(up.accepts(), 2);
}

// The upstream takes the second request on the pooled connection and closes
// it without a byte of answer (as a server does whose keep-alive timer fired
// at that moment): the client retries once, on a fresh connection.
TEST(UpstreamClientTest, StalePooledConnectionIsRetriedTransparently) {
  ScriptedUpstream up([](tcp::socket& s, int index) {
    std::string buf;
    if (index == 0) {
      if (ReadRequest(s, buf).empty()) return;
      Send(s, kHello);
      ReadRequest(s, buf);
      s.shutdown(tcp::socket::shutdown_both);
      return;
    }
    ServeHellos(s, index);
  });
  UpstreamClient client;
  for (int i = 0; i < 2; ++i) {
    Collector c;
    client.Send(Req(up.port()), c.Handlers());
    auto res = c.Wait();
    ASSERT_TRUE(res);
    EXPECT_TRUE(res->status.ok()) << i << " " << res->status.ToString();
    EXPECT_EQ(c.body(), "hello");
    EXPECT_EQ(c.header_calls(), 1);
  }
  EXPECT_EQ(up.accepts(), 2);
  EXPECT_EQ(client.idle_connections(), 1u);
}

// A pooled connection the upstream already closed is noticed before use.
TEST(UpstreamClientTest, PooledConnectionClosedWhileIdleIsNotUsed) {
  ScriptedUpstream up([](tcp::socket& s, int index) {
    std::string buf;
    if (index == 0) {
      if (ReadRequest(s, buf).empty()) return;
      Send(s, kHello);
      s.shutdown(tcp::socket::shutdown_both);
      return;
    }
    ServeHellos(s, index);
  });
  UpstreamClient client;
  Collector first;
  client.Send(Req(up.port()), first.Handlers());
  ASSERT_TRUE(first.Wait());
  std::this_thread::sleep_for(50ms);
  Collector second;
  client.Send(Req(up.port()), second.Handlers());
  auto res = second.Wait();
  ASSERT_TRUE(res);
  EXPECT_TRUE(res->status.ok()) << res->status.ToString();
  EXPECT_EQ(second.body(), "hello");
  EXPECT_EQ(up.accepts(), 2);
}

// A fresh connection that fails after the request went out is not retried:
// the upstream may have acted on it.
TEST(UpstreamClientTest, FreshConnectionClosedWithoutAnswerIsAnError) {
  ScriptedUpstream up([](tcp::socket& s, int) {
    std::string buf;
    ReadRequest(s, buf);
    s.shutdown(tcp::socket::shutdown_both);
  });
  UpstreamClient client;
  Collector c;
  client.Send(Req(up.port()), c.Handlers());
  auto res = c.Wait();
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status.code(), StatusCode::kUnavailable);
  EXPECT_FALSE(res->not_sent);
  EXPECT_NE(res->status.message().find("127.0.0.1:" + std::to_string(up.port())),
            std::string::npos);
  EXPECT_EQ(up.accepts(), 1);
}

TEST(UpstreamClientTest, StopEndsPendingExchanges) {
  std::atomic<bool> got_request{false};
  ScriptedUpstream up([&](tcp::socket& s, int) {
    std::string buf;
    ReadRequest(s, buf);
    got_request = true;
    WaitForClose(s);
  });
  UpstreamClient client;
  Collector c;
  client.Send(Req(up.port()), c.Handlers());
  for (int i = 0; i < 500 && !got_request; ++i) std::this_thread::sleep_for(2ms);
  ASSERT_TRUE(got_request);
  auto t0 = std::chrono::steady_clock::now();
  client.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  auto res = c.Wait(0ms);
  ASSERT_TRUE(res) << "Stop returned before on_done ran";
  EXPECT_EQ(res->status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(res->status.message(), "client stopping");
  client.Stop();  // idempotent
  Collector late;
  client.Send(Req(up.port()), late.Handlers());
  auto late_res = late.Wait(0ms);
  ASSERT_TRUE(late_res);
  EXPECT_EQ(late_res->status.message(), "client stopping");
  EXPECT_TRUE(late_res->not_sent);
}

TEST(UpstreamClientTest, TwoHundredConcurrentRequestsAllComplete) {
  HttpServerOptions o;
  o.address = "127.0.0.1";
  o.port = 0;
  o.worker_threads = 4;
  HttpServer server(o, [](const Request& req) {
    Response r;
    r.content_type = "text/plain";
    r.body = "echo " + req.path;
    return r;
  });
  ASSERT_TRUE(server.Start().ok());
  UpstreamClient client(UpstreamOptions{.threads = 4});
  constexpr int kRequests = 200;
  std::vector<std::unique_ptr<Collector>> collectors;
  for (int i = 0; i < kRequests; ++i) collectors.push_back(std::make_unique<Collector>());
  std::vector<std::thread> senders;
  for (int t = 0; t < 4; ++t) {
    senders.emplace_back([&, t] {
      for (int i = t; i < kRequests; i += 4) {
        client.Send(Req(server.bound_port(), "/r/" + std::to_string(i)), collectors[i]->Handlers());
      }
    });
  }
  for (auto& s : senders) s.join();
  for (int i = 0; i < kRequests; ++i) {
    auto res = collectors[i]->Wait(10s);
    ASSERT_TRUE(res) << i;
    EXPECT_TRUE(res->status.ok()) << i << " " << res->status.ToString();
    EXPECT_EQ(collectors[i]->body(), "echo /r/" + std::to_string(i));
  }
  EXPECT_LE(client.idle_connections(), 32u);
  EXPECT_GT(client.idle_connections(), 0u);
}

// How the gateway relays: a deferred Reply answered from on_header with a
// body_stream; body pieces that arrive before the server hands over the
// stream wait in the relay. The client sees each piece before the upstream
// sends the next.
class Relay {
 public:
  explicit Relay(Reply reply) : reply_(std::move(reply)) {}

  void OnHeader(const std::shared_ptr<Relay>& self, int status, HeaderList headers) {
    Response r;
    r.status = status;
    r.content_type.clear();  // the upstream's Content-Type is in `headers`
    r.headers = std::move(headers);
    r.body_stream = [self](std::shared_ptr<BodyStream> s) {
      std::lock_guard lock(self->mu_);
      if (!self->pending_.empty()) s->Write(self->pending_);
      self->pending_.clear();
      if (self->done_) self->ok_ ? s->Finish() : s->Abort();
      self->stream_ = std::move(s);
    };
    reply_(std::move(r));
  }
  bool OnBody(std::string_view data) {
    std::lock_guard lock(mu_);
    if (!stream_) {
      pending_.append(data);
      return true;
    }
    return stream_->Write(data);  // false: the client left, stop the upstream
  }
  void OnDone(const UpstreamResult& r) {
    std::lock_guard lock(mu_);
    if (!r.header_received) {
      reply_(JsonError(502, "bad_gateway", r.status.message()));
      return;
    }
    done_ = true;
    ok_ = r.status.ok();
    if (stream_) ok_ ? stream_->Finish() : stream_->Abort();
  }

 private:
  Reply reply_;
  std::mutex mu_;
  std::shared_ptr<BodyStream> stream_;  // guarded by mu_
  std::string pending_;                 // guarded by mu_
  bool done_ = false;                   // guarded by mu_
  bool ok_ = false;                     // guarded by mu_
};

TEST(UpstreamClientTest, RelayThroughDeferredBodyStream) {
  std::promise<void> first_relayed;
  auto first_relayed_f = first_relayed.get_future();
  std::atomic<bool> upstream_waited{false};
  ScriptedUpstream up([&](tcp::socket& s, int) {
    std::string buf;
    if (ReadRequest(s, buf).empty()) return;
    Send(s,
         "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
         "\r\nd\r\ndata: first\n\n\r\n");
    upstream_waited = first_relayed_f.wait_for(5s) == std::future_status::ready;
    Send(s, "e\r\ndata: second\n\n\r\n0\r\n\r\n");
    WaitForClose(s);
  });
  UpstreamClient client;
  HttpServerOptions o;
  o.address = "127.0.0.1";
  o.port = 0;
  HttpServer gateway(o, [&](const Request& req) {
    Response r;
    r.defer = [&client, &up, target = req.path](Reply reply) {
      auto relay = std::make_shared<Relay>(std::move(reply));
      UpstreamHandlers h;
      h.on_header = [relay](int status, HeaderList headers) {
        relay->OnHeader(relay, status, std::move(headers));
      };
      h.on_body = [relay](std::string_view d) { return relay->OnBody(d); };
      h.on_done = [relay](const UpstreamResult& r) { relay->OnDone(r); };
      client.Send(Req(up.port(), target), std::move(h));
    };
    return r;
  });
  ASSERT_TRUE(gateway.Start().ok());

  asio::io_context ioc;
  tcp::socket c(ioc);
  c.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), gateway.bound_port()));
  Send(c, "GET /v1/chat HTTP/1.1\r\nHost: g\r\n\r\n");
  std::string got;
  auto read_until = [&](std::string_view needle) {
    while (got.find(needle) == std::string::npos) {
      char tmp[4096];
      boost::system::error_code ec;
      size_t n = c.read_some(asio::buffer(tmp), ec);
      if (ec) return false;
      got.append(tmp, n);
    }
    return true;
  };
  ASSERT_TRUE(read_until("d\r\ndata: first\n\n\r\n"));
  first_relayed.set_value();
  ASSERT_TRUE(read_until("e\r\ndata: second\n\n\r\n0\r\n\r\n"));
  EXPECT_TRUE(upstream_waited);
  EXPECT_EQ(got.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << got;
  EXPECT_NE(got.find("Content-Type: text/event-stream\r\n"), std::string::npos) << got;
  EXPECT_NE(got.find("Transfer-Encoding: chunked\r\n"), std::string::npos) << got;
}

TEST(UpstreamClientTest, TargetThatWouldBreakTheRequestLineIsRefused) {
  ScriptedUpstream up(ServeHellos);
  UpstreamClient client;
  const std::vector<std::string> targets = {"/a b", "/a\r\nX-A: b", std::string("/a\0b", 4), "a", ""};
  for (const std::string& target : targets) {
    Collector c;
    UpstreamRequest r = Req(up.port());
    r.target = target;
    client.Send(r, c.Handlers());
    auto res = c.Wait();
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status.code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(res->not_sent);
  }
  EXPECT_EQ(up.accepts(), 0);
}

}  // namespace
}  // namespace hf::http
