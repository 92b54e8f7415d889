// Tests over real sockets on 127.0.0.1 with ephemeral ports. The client sends
// raw bytes so that malformed requests can be written exactly.
#include "http/server.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>
#include <vector>

#include "http/router.h"

namespace hf::http {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

struct RawResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-cased names
  std::string body;

  nlohmann::json Json() const { return nlohmann::json::parse(body, nullptr, false); }
  std::string ErrorCode() const {
    auto j = Json();
    return j.is_object() && j.contains("error") ? j["error"].value("code", "") : "";
  }
};

// A blocking client with a deadline on every read, so a server bug fails the
// test instead of hanging it.
class Client {
 public:
  // `from`: the loopback address to connect from (Linux answers on all of
  // 127/8), so a test can play several client addresses.
  explicit Client(uint16_t port, const char* from = nullptr) : socket_(ioc_) {
    if (from != nullptr) {
      socket_.open(tcp::v4());
      socket_.bind(tcp::endpoint(asio::ip::make_address(from), 0));
    }
    socket_.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  }

  void Send(std::string_view bytes) {
    boost::system::error_code ec;
    asio::write(socket_, asio::buffer(bytes.data(), bytes.size()), ec);
  }

  // Reads more bytes into buf_. False on EOF, error or timeout.
  bool ReadMore(std::chrono::milliseconds timeout) {
    pollfd p{socket_.native_handle(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) {
      timed_out_ = true;
      return false;
    }
    char tmp[8192];
    boost::system::error_code ec;
    size_t n = socket_.read_some(asio::buffer(tmp), ec);
    if (ec || n == 0) return false;
    buf_.append(tmp, n);
    return true;
  }

  // Reads one response with a Content-Length body, or only the header when
  // there is none (event streams). status stays 0 when nothing came.
  RawResponse ReadResponse(std::chrono::milliseconds timeout = 5s) {
    RawResponse r;
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!ReadMore(timeout)) return r;
    }
    std::string head = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    size_t line_end = head.find("\r\n");
    std::string status_line = head.substr(0, line_end);
    r.status = std::stoi(status_line.substr(status_line.find(' ') + 1, 3));
    size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
    while (pos < head.size()) {
      size_t e = head.find("\r\n", pos);
      if (e == std::string::npos) e = head.size();
      std::string line = head.substr(pos, e - pos);
      size_t colon = line.find(':');
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::string value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(' '));
      r.headers[name] = value;
      pos = e + 2;
    }
    if (auto it = r.headers.find("content-length"); it != r.headers.end()) {
      size_t len = std::stoul(it->second);
      while (buf_.size() < len) {
        if (!ReadMore(timeout)) break;
      }
      r.body = buf_.substr(0, len);
      buf_.erase(0, std::min(len, buf_.size()));
    }
    return r;
  }

  // Reads until `needle` has arrived (in the unread bytes). False on timeout.
  bool ReadUntil(std::string_view needle, std::chrono::milliseconds timeout = 5s) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (buf_.find(needle) == std::string::npos) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left <= 0ms || !ReadMore(left)) return false;
    }
    return true;
  }

  // True when the server closes the connection within `timeout`.
  bool ClosedWithin(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    timed_out_ = false;
    while (std::chrono::steady_clock::now() < deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (!ReadMore(left)) return !timed_out_;
    }
    return false;
  }

  const std::string& buffered() const { return buf_; }
  void ClearBuffered() { buf_.clear(); }
  void Close() {
    boost::system::error_code ec;
    socket_.close(ec);
  }

 private:
  asio::io_context ioc_;
  tcp::socket socket_;
  std::string buf_;
  bool timed_out_ = false;
};

std::string Get(std::string_view target, std::string_view extra = "") {
  return "GET " + std::string(target) + " HTTP/1.1\r\nHost: t\r\n" + std::string(extra) + "\r\n";
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.address = "127.0.0.1";
    options_.port = 0;
    options_.max_body_bytes = 1024;
    options_.max_header_bytes = 2048;
    ASSERT_TRUE(router_
                    .Add("GET", "/api/v1/tasks/{id}",
                         [](const Request& req) {
                           nlohmann::json q = nlohmann::json::object();
                           for (const auto& [k, v] : req.query) q[k] = v;
                           return JsonResponse(200,
                                               {{"id", req.Param("id")},
                                                {"query", q},
                                                {"agent", req.Header("USER-AGENT").value_or("")},
                                                {"remote", req.remote_address}});
                         })
                    .ok());
    ASSERT_TRUE(router_
                    .Add("POST", "/echo",
                         [](const Request& req) {
                           Response r;
                           r.content_type = "text/plain";
                           r.body = req.body;
                           return r;
                         })
                    .ok());
    ASSERT_TRUE(router_
                    .Add("GET", "/throw",
                         [](const Request&) -> Response { throw std::runtime_error("secret"); })
                    .ok());
    ASSERT_TRUE(
        router_.Add("GET", "/ok",
                    [](const Request&) {
                      return JsonResponse(200, {{"ok", true}});
                    })
            .ok());
  }

  void StartServer(Handler handler = nullptr) {
    server_ = std::make_unique<HttpServer>(options_, handler ? handler : router_.AsHandler());
    ASSERT_TRUE(server_->Start().ok());
    port_ = server_->bound_port();
    ASSERT_NE(port_, 0);
  }

  RawResponse Exchange(std::string_view bytes) {
    Client c(port_);
    c.Send(bytes);
    return c.ReadResponse();
  }

  // GET `path` answers later: its Reply is kept in `kept` (under `mu`).
  void AddKeptDeferral(const char* path, std::vector<Reply>& kept, std::mutex& mu) {
    ASSERT_TRUE(router_
                    .Add("GET", path,
                         [&](const Request&) {
                           Response r;
                           r.defer = [&](Reply reply) {
                             std::lock_guard lock(mu);
                             kept.push_back(std::move(reply));
                           };
                           return r;
                         })
                    .ok());
  }

  void ExpectStillServing() {
    RawResponse r = Exchange(Get("/ok"));
    EXPECT_EQ(r.status, 200) << "server stopped serving";
  }

  HttpServerOptions options_;
  Router router_;
  std::unique_ptr<HttpServer> server_;
  uint16_t port_ = 0;
};

TEST_F(HttpServerTest, RoutesWithParamsQueryAndHeaders) {
  StartServer();
  RawResponse r =
      Exchange(Get("/api/v1/tasks/t%201?x=a%20b&y=1+2&flag", "User-Agent: hf-test\r\n"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers["content-type"], "application/json");
  auto j = r.Json();
  EXPECT_EQ(j["id"], "t 1");
  EXPECT_EQ(j["query"]["x"], "a b");
  EXPECT_EQ(j["query"]["y"], "1 2");
  EXPECT_EQ(j["query"]["flag"], "");
  EXPECT_EQ(j["agent"], "hf-test");
  EXPECT_EQ(j["remote"], "127.0.0.1");
}

TEST_F(HttpServerTest, NotFoundAndMethodNotAllowedOverTheWire) {
  StartServer();
  RawResponse nf = Exchange(Get("/nope"));
  EXPECT_EQ(nf.status, 404);
  EXPECT_EQ(nf.ErrorCode(), "not_found");
  RawResponse na = Exchange("DELETE /echo HTTP/1.1\r\nHost: t\r\n\r\n");
  EXPECT_EQ(na.status, 405);
  EXPECT_EQ(na.ErrorCode(), "method_not_allowed");
  EXPECT_EQ(na.headers["allow"], "POST");
}

TEST_F(HttpServerTest, BadPathsAre400) {
  StartServer();
  for (const char* target :
       {"/api/v1/tasks/../secret", "/api/v1/tasks/a%2Fb", "/api/v1/tasks/a%2fb",
        "/api/v1/tasks/%2e%2e", "/api/v1/tasks/a%zz", "/api/v1/tasks/a%00", "http://evil/x", "*"}) {
    RawResponse r = Exchange(Get(target));
    EXPECT_EQ(r.status, 400) << target;
    EXPECT_EQ(r.ErrorCode(), "bad_request") << target;
  }
  ExpectStillServing();
}

TEST_F(HttpServerTest, BodyOverLimitByContentLengthIs413BeforeReadingIt) {
  StartServer();
  Client c(port_);
  // The body never comes: the answer must not wait for it.
  c.Send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n");
  RawResponse r = c.ReadResponse(2s);
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(r.ErrorCode(), "payload_too_large");
  EXPECT_TRUE(c.ClosedWithin(2s));
  // At the limit is fine.
  RawResponse ok = Exchange("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1024\r\n\r\n" +
                            std::string(1024, 'x'));
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body.size(), 1024u);
}

TEST_F(HttpServerTest, PathPrefixesHaveTheirOwnBodyLimit) {
  options_.body_limits = {{"/big/", 4096}};
  ASSERT_TRUE(router_
                  .Add("POST", "/big/echo",
                       [](const Request& req) {
                         Response r;
                         r.content_type = "text/plain";
                         r.body = req.body;
                         return r;
                       })
                  .ok());
  StartServer();
  const auto post = [](std::string_view path, size_t n) {
    return "POST " + std::string(path) + " HTTP/1.1\r\nHost: t\r\nContent-Length: " +
           std::to_string(n) + "\r\n\r\n" + std::string(n, 'x');
  };
  // Past the default limit, within the prefix's: served.
  RawResponse big = Exchange(post("/big/echo", 4096));
  EXPECT_EQ(big.status, 200);
  EXPECT_EQ(big.body.size(), 4096u);
  // Past the prefix's: refused, naming its limit.
  RawResponse over = Exchange(post("/big/echo", 4097));
  EXPECT_EQ(over.status, 413);
  EXPECT_NE(over.body.find("4096"), std::string::npos) << over.body;
  // Chunked past the prefix's limit: refused too.
  Client c(port_);
  c.Send("POST /big/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
  for (int i = 0; i < 9; ++i) c.Send("200\r\n" + std::string(512, 'a') + "\r\n");
  EXPECT_EQ(c.ReadResponse(2s).status, 413);
  // Every other path keeps max_body_bytes.
  EXPECT_EQ(Exchange(post("/echo", 2048)).status, 413);
  EXPECT_EQ(Exchange(post("/echo", 1024)).status, 200);
  ExpectStillServing();
}

TEST_F(HttpServerTest, ChunkedBodyGrowingPastLimitIs413) {
  StartServer();
  Client c(port_);
  c.Send("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
  std::string chunk = "200\r\n" + std::string(512, 'a') + "\r\n";
  for (int i = 0; i < 3; ++i) c.Send(chunk);
  RawResponse r = c.ReadResponse(2s);
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(r.ErrorCode(), "payload_too_large");
  // A chunked body within the limit is reassembled for the handler.
  RawResponse ok = Exchange(
      "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, "hello world");
}

TEST_F(HttpServerTest, HeaderOverLimitIs431) {
  StartServer();
  RawResponse r = Exchange(Get("/ok", "X-Big: " + std::string(4000, 'b') + "\r\n"));
  EXPECT_EQ(r.status, 431);
  EXPECT_EQ(r.ErrorCode(), "header_too_large");
  ExpectStillServing();
}

TEST_F(HttpServerTest, MalformedRequestsAre400AndClose) {
  StartServer();
  const std::string chunked =
      "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string cases[] = {
      "GARBAGE\r\n\r\n",
      "GET /ok HTTP/9.9 extra\r\n\r\n",
      "G@T /ok HTTP/1.1\r\nHost: t\r\n\r\n",
      "GET /ok HTTP/1.1\r\nBad Header Line\r\n\r\n",
      "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: abc\r\n\r\n",
      "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
      chunked + "zz\r\nhello\r\n0\r\n\r\n",  // bad hex size
      chunked + "5\r\nhelloXX0\r\n\r\n",     // missing CRLF after data
      chunked + "fffffffffffffffffff\r\n",   // size overflows
  };
  for (const std::string& bytes : cases) {
    Client c(port_);
    c.Send(bytes);
    RawResponse r = c.ReadResponse(2s);
    EXPECT_EQ(r.status, 400) << bytes;
    EXPECT_EQ(r.ErrorCode(), "bad_request") << bytes;
    EXPECT_EQ(r.headers["connection"], "close") << bytes;
    EXPECT_TRUE(c.ClosedWithin(2s)) << bytes;
  }
  ExpectStillServing();
}

TEST_F(HttpServerTest, ThrowingHandlerIs500AndServerKeepsServing) {
  StartServer();
  Client c(port_);
  c.Send(Get("/throw"));
  RawResponse r = c.ReadResponse();
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.ErrorCode(), "internal");
  EXPECT_EQ(r.body.find("secret"), std::string::npos) << "exception text leaked";
  // The same keep-alive connection still works after the 500.
  c.Send(Get("/ok"));
  EXPECT_EQ(c.ReadResponse().status, 200);
  ExpectStillServing();
}

TEST_F(HttpServerTest, KeepAliveServesTwoRequestsOnOneConnection) {
  StartServer();
  Client c(port_);
  c.Send(Get("/api/v1/tasks/one"));
  RawResponse a = c.ReadResponse();
  c.Send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc");
  RawResponse b = c.ReadResponse();
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(a.Json()["id"], "one");
  EXPECT_EQ(b.status, 200);
  EXPECT_EQ(b.body, "abc");
  // Pipelined: both requests in one write, both answered in order.
  c.Send(Get("/api/v1/tasks/p1") + Get("/api/v1/tasks/p2"));
  EXPECT_EQ(c.ReadResponse().Json()["id"], "p1");
  EXPECT_EQ(c.ReadResponse().Json()["id"], "p2");
}

TEST_F(HttpServerTest, ExpectContinueIsAnsweredBeforeTheBody) {
  StartServer();
  Client c(port_);
  c.Send("POST /echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
  EXPECT_EQ(c.ReadResponse(1s).status, 100);
  c.Send("xyz");
  RawResponse r = c.ReadResponse();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "xyz");
}

TEST_F(HttpServerTest, HeaderReadTimeoutClosesHalfRequest) {
  options_.header_read_timeout = 300ms;
  StartServer();
  Client slow(port_);
  auto t0 = std::chrono::steady_clock::now();
  slow.Send("GET /ok HTTP/1.1\r\nHost: t\r\n");  // never finished
  RawResponse r = slow.ReadResponse(3s);
  EXPECT_EQ(r.status, 408);
  EXPECT_EQ(r.ErrorCode(), "timeout");
  EXPECT_TRUE(slow.ClosedWithin(2s));
  auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, 250ms);
  EXPECT_LT(waited, 3s);
  ExpectStillServing();
}

TEST_F(HttpServerTest, IdleKeepAliveConnectionIsClosed) {
  options_.idle_timeout = 300ms;
  StartServer();
  Client c(port_);
  c.Send(Get("/ok"));
  EXPECT_EQ(c.ReadResponse().status, 200);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(c.ClosedWithin(3s));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 250ms);
}

// A connection's one timer is reset only when a deadline comes earlier
// than the wait pending; every phase must still get its own timeout.
TEST_F(HttpServerTest, EachPhaseOfAKeepAliveConnectionGetsItsOwnTimeout) {
  options_.header_read_timeout = 300ms;
  options_.idle_timeout = 2s;
  StartServer();
  Client c(port_);
  c.Send(Get("/ok"));
  EXPECT_EQ(c.ReadResponse().status, 200);
  // Idle past the header timeout, whose wait was pending: still open.
  std::this_thread::sleep_for(600ms);
  c.Send(Get("/ok"));
  EXPECT_EQ(c.ReadResponse().status, 200);
  // A header begun while the idle wait is pending gets the shorter timeout.
  std::this_thread::sleep_for(400ms);
  auto t0 = std::chrono::steady_clock::now();
  c.Send("GET /ok HTTP/1.1\r\nHost: t\r\n");  // never finished
  RawResponse r = c.ReadResponse(3s);
  EXPECT_EQ(r.status, 408);
  auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, 250ms);
  EXPECT_LT(waited, 1200ms) << "waited for the idle deadline instead";
}

TEST_F(HttpServerTest, FiftyConcurrentClientsAllAnswered) {
  StartServer();
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 50; ++i) {
    threads.emplace_back([&, i] {
      Client c(port_);
      c.Send(Get("/api/v1/tasks/c" + std::to_string(i)));
      RawResponse r = c.ReadResponse(10s);
      if (r.status == 200 && r.Json()["id"] == "c" + std::to_string(i)) ++ok;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 50);
}

// A request whose header is in and whose body is still to come: at work, so
// never closed to make room for another connection.
constexpr std::string_view kBusyRequest =
    "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n";

TEST_F(HttpServerTest, ConnectionsBeyondLimitGet503WhenNoneIsQuiet) {
  options_.max_connections = 2;
  StartServer();
  Client a(port_), b(port_);
  for (Client* c : {&a, &b}) c->Send(kBusyRequest);
  std::this_thread::sleep_for(100ms);
  Client third(port_);
  RawResponse r = third.ReadResponse(2s);
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.ErrorCode(), "unavailable");
  EXPECT_EQ(server_->stats().refused, 1);
  EXPECT_EQ(server_->stats().evicted, 0);
  a.Close();
  // Once a slot frees up, new clients are served again.
  bool served = false;
  for (int i = 0; i < 50 && !served; ++i) {
    Client c(port_);
    c.Send(Get("/ok"));
    served = c.ReadResponse(2s).status == 200;
    if (!served) std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(served);
}

TEST_F(HttpServerTest, QuietConnectionsMakeRoomSilentOnesFirst) {
  options_.max_connections = 4;
  StartServer();
  // One idle after a request, then three that never said anything.
  Client idle(port_);
  idle.Send(Get("/ok"));
  ASSERT_EQ(idle.ReadResponse().status, 200);
  std::vector<std::unique_ptr<Client>> silent;
  for (int i = 0; i < 3; ++i) {
    silent.push_back(std::make_unique<Client>(port_));
    std::this_thread::sleep_for(20ms);  // distinct ages
  }
  std::this_thread::sleep_for(100ms);
  std::vector<std::unique_ptr<Client>> newcomers;  // kept open: the server stays full
  for (int round = 0; round < 3; ++round) {
    newcomers.push_back(std::make_unique<Client>(port_));
    Client& c = *newcomers.back();
    c.Send(Get("/ok"));
    ASSERT_EQ(c.ReadResponse().status, 200) << "round " << round;
    // The oldest silent connection went, the idle one that spoke stayed.
    EXPECT_TRUE(silent[round]->ClosedWithin(2s)) << "round " << round;
  }
  EXPECT_EQ(server_->stats().evicted, 3);
  EXPECT_EQ(server_->stats().refused, 0);
  idle.Send(Get("/ok"));
  EXPECT_EQ(idle.ReadResponse().status, 200);
}

TEST_F(HttpServerTest, PerAddressLimitTakesRoomFromTheSameAddressOnly) {
  options_.max_connections = 100;
  options_.max_connections_per_address = 2;
  StartServer();
  Client other(port_, "127.0.0.1");  // silent, but from another address
  Client x1(port_, "127.0.0.2");
  std::this_thread::sleep_for(20ms);
  Client x2(port_, "127.0.0.2");
  std::this_thread::sleep_for(100ms);
  Client x3(port_, "127.0.0.2");
  x3.Send(Get("/ok"));
  ASSERT_EQ(x3.ReadResponse().status, 200);
  EXPECT_TRUE(x1.ClosedWithin(2s));
  // Two at work from that address: a third from it is refused, others not.
  x2.Send(kBusyRequest);
  x3.Send(kBusyRequest);
  std::this_thread::sleep_for(100ms);
  Client x4(port_, "127.0.0.2");
  EXPECT_EQ(x4.ReadResponse(2s).status, 503);
  Client y(port_, "127.0.0.3");
  y.Send(Get("/ok"));
  EXPECT_EQ(y.ReadResponse().status, 200);
  other.Send(Get("/ok"));
  EXPECT_EQ(other.ReadResponse().status, 200);
}

TEST_F(HttpServerTest, FullServerTakesRoomFromTheBusiestAddress) {
  options_.max_connections = 4;
  StartServer();
  Client lone(port_, "127.0.0.1");  // the oldest silent connection
  std::this_thread::sleep_for(20ms);
  std::vector<std::unique_ptr<Client>> crowd;
  for (int i = 0; i < 3; ++i) {
    crowd.push_back(std::make_unique<Client>(port_, "127.0.0.2"));
    std::this_thread::sleep_for(20ms);
  }
  std::this_thread::sleep_for(100ms);
  Client newcomer(port_, "127.0.0.3");
  newcomer.Send(Get("/ok"));
  ASSERT_EQ(newcomer.ReadResponse().status, 200);
  EXPECT_TRUE(crowd[0]->ClosedWithin(2s));
  lone.Send(Get("/ok"));
  EXPECT_EQ(lone.ReadResponse().status, 200);
}

TEST_F(HttpServerTest, StopReturnsPromptlyWithIdleConnections) {
  StartServer();
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 5; ++i) {
    clients.push_back(std::make_unique<Client>(port_));
    if (i % 2 == 0) {  // some idle after a request, some never sent a byte
      clients.back()->Send(Get("/ok"));
      ASSERT_EQ(clients.back()->ReadResponse().status, 200);
    }
  }
  std::this_thread::sleep_for(50ms);  // let the server register the silent ones
  auto t0 = std::chrono::steady_clock::now();
  server_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);  // grace is 5 s
  for (auto& c : clients) EXPECT_TRUE(c->ClosedWithin(1s));
  EXPECT_THROW(Client{port_}, boost::system::system_error);
}

// Whether the handler runs on an I/O thread (0) or on a pool (1 thread).
class HttpServerStopTest : public HttpServerTest, public ::testing::WithParamInterface<int> {};

TEST_P(HttpServerStopTest, StopLetsInFlightRequestFinish) {
  options_.handler_threads = GetParam();
  std::atomic<bool> entered{false};
  StartServer([&](const Request&) {
    entered = true;
    std::this_thread::sleep_for(300ms);
    return JsonResponse(200, {{"done", true}});
  });
  Client c(port_);
  c.Send(Get("/slow"));
  while (!entered) std::this_thread::sleep_for(1ms);
  server_->Stop();
  RawResponse r = c.ReadResponse(2s);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.Json()["done"], true);
  EXPECT_EQ(r.headers["connection"], "close");
}

INSTANTIATE_TEST_SUITE_P(InlineAndPool, HttpServerStopTest, ::testing::Values(0, 1));

// Blocking handlers in their pools hold up neither the I/O threads nor
// another pool: with every API thread stuck (as behind a slow fsync), the
// gateway's pool and a request the I/O threads answer still go through.
TEST_F(HttpServerTest, HandlerPoolsKeepBlockedHandlersFromOtherTraffic) {
  options_.worker_threads = 1;
  options_.handler_threads = 2;
  options_.handler_pools.push_back({{"/gw/"}, 1});
  options_.runs_inline = [](const Request& req) { return req.path == "/gw/inline"; };
  std::mutex mu;
  std::condition_variable cv;
  int blocked = 0;
  bool release = false;
  std::set<std::thread::id> api_threads, gw_threads;
  // However the test ends, the blocked handlers are let go (Stop waits for them).
  struct Release {
    std::mutex& mu;
    std::condition_variable& cv;
    bool& release;
    ~Release() {
      std::lock_guard lock(mu);
      release = true;
      cv.notify_all();
    }
  } let_go{mu, cv, release};
  StartServer([&](const Request& req) {
    if (req.path == "/gw/inline") return JsonResponse(200, {{"pool", "none"}});
    std::unique_lock lock(mu);
    if (req.path.starts_with("/gw/")) {
      gw_threads.insert(std::this_thread::get_id());
      return JsonResponse(200, {{"pool", "gateway"}});
    }
    api_threads.insert(std::this_thread::get_id());
    ++blocked;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
    return JsonResponse(200, {{"pool", "api"}});
  });
  std::vector<std::unique_ptr<Client>> api;
  for (int i = 0; i < 3; ++i) {  // one more than the pool: it queues
    api.push_back(std::make_unique<Client>(port_));
    api.back()->Send(Get("/api/" + std::to_string(i)));
  }
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 5s, [&] { return blocked == 2; }));
  }
  // The gateway's pool is held up too: what runs inline still answers.
  std::unique_lock hold_gateway(mu);
  RawResponse inline_answer = Exchange(Get("/gw/inline"));
  EXPECT_EQ(inline_answer.status, 200);
  EXPECT_EQ(inline_answer.Json()["pool"], "none");
  hold_gateway.unlock();
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    RawResponse gw = Exchange(Get("/gw/chat"));
    EXPECT_EQ(gw.status, 200);
    EXPECT_EQ(gw.Json()["pool"], "gateway");
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  }
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(blocked, 2) << "the third API request waits for a pool thread";
    release = true;
    cv.notify_all();
  }
  for (auto& c : api) {
    RawResponse r = c->ReadResponse(5s);
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.Json()["pool"], "api");
    // The connection goes on after an answer from a pool.
    c->Send(Get("/gw/again"));
    EXPECT_EQ(c->ReadResponse(5s).status, 200);
  }
  std::lock_guard lock(mu);
  EXPECT_EQ(api_threads.size(), 2u);
  EXPECT_EQ(gw_threads.size(), 1u);
  for (const auto& id : gw_threads) EXPECT_EQ(api_threads.count(id), 0u);
}

TEST_F(HttpServerTest, PoolHandlersThatThrowOrDeferAnswerAsInline) {
  options_.handler_threads = 1;
  std::vector<Reply> replies;
  std::mutex mu;
  AddKeptDeferral("/later", replies, mu);
  StartServer();
  RawResponse thrown = Exchange(Get("/throw"));
  EXPECT_EQ(thrown.status, 500);
  EXPECT_EQ(thrown.body.find("secret"), std::string::npos);
  Client c(port_);
  c.Send(Get("/later"));
  for (int i = 0; i < 500; ++i) {
    {
      std::lock_guard lock(mu);
      if (!replies.empty()) break;
    }
    std::this_thread::sleep_for(2ms);
  }
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(replies.size(), 1u);
    replies[0](JsonResponse(200, {{"later", true}}));
  }
  RawResponse r = c.ReadResponse(2s);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.Json()["later"], true);
}

// Stop posts its shutdown to every connection; one whose handler was still
// on a pool then gets an event stream back, which must end at once rather
// than keep Stop waiting for its grace period.
TEST_F(HttpServerTest, StopEndsAStreamItsPoolHandlerOpenedMeanwhile) {
  options_.handler_threads = 1;
  options_.shutdown_grace = 5s;
  std::atomic<bool> entered{false};
  StartServer([&](const Request&) {
    entered = true;
    std::this_thread::sleep_for(300ms);
    Response r;
    r.stream = [](std::shared_ptr<SseStream> s) { s->Send("hello", "{}"); };
    return r;
  });
  Client c(port_);
  c.Send(Get("/events"));
  while (!entered) std::this_thread::sleep_for(1ms);
  const auto t0 = std::chrono::steady_clock::now();
  server_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  EXPECT_TRUE(c.ClosedWithin(1s));
}

TEST_F(HttpServerTest, ServerSentEventsReachClientAndDetectDisconnect) {
  std::mutex mu;
  std::shared_ptr<SseStream> stream;
  StartServer([&](const Request&) {
    Response r;
    r.headers.emplace_back("X-Stream", "yes");
    r.stream = [&](std::shared_ptr<SseStream> s) {
      std::lock_guard lock(mu);
      stream = std::move(s);
    };
    return r;
  });
  Client c(port_);
  c.Send(Get("/events"));
  RawResponse head = c.ReadResponse();
  ASSERT_EQ(head.status, 200);
  EXPECT_EQ(head.headers["content-type"], "text/event-stream");
  EXPECT_EQ(head.headers.count("content-length"), 0u);
  EXPECT_EQ(head.headers["x-stream"], "yes");
  std::shared_ptr<SseStream> s;
  for (int i = 0; i < 200 && !s; ++i) {
    std::lock_guard lock(mu);
    s = stream;
    if (!s) std::this_thread::sleep_for(5ms);
  }
  ASSERT_TRUE(s);
  // Sent from two threads: Send must be safe to call concurrently.
  std::thread other([&] { EXPECT_TRUE(s->Send("task", "{\"id\":\"t1\"}")); });
  other.join();
  EXPECT_TRUE(s->Send("node", "line1\nline2"));
  ASSERT_TRUE(c.ReadUntil("data: line2\n\n"));
  EXPECT_NE(c.buffered().find("event: task\ndata: {\"id\":\"t1\"}\n\n"), std::string::npos);
  EXPECT_NE(c.buffered().find("event: node\ndata: line1\ndata: line2\n\n"), std::string::npos);
  c.Close();
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = !s->Send("ping", "x");
    if (!gone) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(gone) << "Send kept returning true after the client left";
  EXPECT_TRUE(s->closed());
}

TEST_F(HttpServerTest, StopClosesEventStreams) {
  std::shared_ptr<SseStream> stream;
  std::atomic<bool> ready{false};
  StartServer([&](const Request&) {
    Response r;
    r.stream = [&](std::shared_ptr<SseStream> s) {
      stream = std::move(s);
      ready = true;
    };
    return r;
  });
  Client c(port_);
  c.Send(Get("/events"));
  ASSERT_EQ(c.ReadResponse().status, 200);
  while (!ready) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(stream->Send("", "hello"));
  ASSERT_TRUE(c.ReadUntil("data: hello\n\n"));
  auto t0 = std::chrono::steady_clock::now();
  server_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  EXPECT_TRUE(c.ClosedWithin(1s));
  EXPECT_FALSE(stream->Send("x", "y"));
}

// Deferred answers: the handler thread is free while the answer waits, so
// more waiting requests than worker threads do not block other requests.
TEST_F(HttpServerTest, DeferredAnswersDoNotHoldWorkerThreads) {
  options_.worker_threads = 2;
  std::mutex mu;
  std::vector<Reply> waiting;
  ASSERT_TRUE(router_
                  .Add("GET", "/wait/{n}",
                       [&](const Request& req) {
                         Response r;
                         r.defer = [&, n = std::string(req.Param("n"))](Reply reply) {
                           std::lock_guard lock(mu);
                           // Answered later, from another thread, in reverse order.
                           waiting.push_back([reply, n](Response) {
                             reply(JsonResponse(200, {{"n", n}}));
                           });
                         };
                         return r;
                       })
                  .ok());
  StartServer();
  constexpr int kWaiters = 20;  // ten times the worker threads
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < kWaiters; ++i) {
    clients.push_back(std::make_unique<Client>(port_));
    clients.back()->Send(Get("/wait/" + std::to_string(i)));
  }
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard lock(mu);
      if (waiting.size() == kWaiters) break;
    }
    std::this_thread::sleep_for(2ms);
  }
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(waiting.size(), static_cast<size_t>(kWaiters));
  }
  // Other requests are served while all twenty wait.
  RawResponse ok = Exchange(Get("/ok"));
  EXPECT_EQ(ok.status, 200);
  std::thread answerer([&] {
    std::lock_guard lock(mu);
    for (auto it = waiting.rbegin(); it != waiting.rend(); ++it) (*it)(Response{});
    // A second call is ignored.
    waiting.front()(Response{});
  });
  answerer.join();
  for (int i = 0; i < kWaiters; ++i) {
    RawResponse r = clients[i]->ReadResponse(2s);
    ASSERT_EQ(r.status, 200) << i;
    EXPECT_EQ(r.Json()["n"], std::to_string(i));
    // The connection stays usable for the next request.
    clients[i]->Send(Get("/ok"));
    RawResponse again = clients[i]->ReadResponse(2s);
    EXPECT_EQ(again.status, 200) << i;
    EXPECT_TRUE(clients[i]->buffered().empty()) << "one answer per request";
  }
}

TEST_F(HttpServerTest, DeferredAnswerNeverGivenTimesOutAndStopEndsWaiters) {
  options_.deferred_timeout = 200ms;
  std::vector<Reply> kept;
  std::mutex mu;
  AddKeptDeferral("/never", kept, mu);
  ASSERT_TRUE(router_
                  .Add("GET", "/dropped",
                       [](const Request&) {
                         Response r;
                         r.defer = [](Reply) {};  // the Reply is dropped at once
                         return r;
                       })
                  .ok());
  StartServer();
  Client timed(port_);
  timed.Send(Get("/never"));
  EXPECT_TRUE(timed.ClosedWithin(2s)) << "closed after the deferred timeout";
  Client dropped(port_);
  dropped.Send(Get("/dropped"));
  EXPECT_TRUE(dropped.ClosedWithin(2s));
  // A Reply called after its connection closed does nothing.
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(kept.size(), 1u);
    kept[0](JsonResponse(200, {{"late", true}}));
  }
  ExpectStillServing();
  options_.deferred_timeout = 60s;
  server_.reset();
  StartServer();
  Client waiter(port_);
  waiter.Send(Get("/never"));
  for (int i = 0; i < 500; ++i) {
    {
      std::lock_guard lock(mu);
      if (kept.size() == 2) break;
    }
    std::this_thread::sleep_for(2ms);
  }
  auto t0 = std::chrono::steady_clock::now();
  server_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s) << "Stop does not wait for waiters";
  EXPECT_TRUE(waiter.ClosedWithin(1s));
  std::lock_guard lock(mu);
  kept.back()(JsonResponse(200, {}));  // after Stop: ignored, no crash
}

// Hands a BodyStream from the server thread to the test thread.
class StreamCatcher {
 public:
  void Put(std::shared_ptr<BodyStream> s) {
    std::lock_guard lock(mu_);
    stream_ = std::move(s);
    cv_.notify_all();
  }
  std::shared_ptr<BodyStream> Get(std::chrono::milliseconds timeout = 5s) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return stream_ != nullptr; });
    return std::exchange(stream_, nullptr);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::shared_ptr<BodyStream> stream_;
};

Response BodyStreamResponse(StreamCatcher& catcher) {
  Response r;
  r.content_type = "text/plain";
  r.headers.emplace_back("X-Upstream", "r1");
  // Hop-by-hop headers the server must not pass on: it frames the body.
  r.headers.emplace_back("Content-Length", "99");
  r.headers.emplace_back("Connection", "close");
  r.headers.emplace_back("Transfer-Encoding", "identity");
  r.body_stream = [&catcher](std::shared_ptr<BodyStream> s) { catcher.Put(std::move(s)); };
  return r;
}

TEST_F(HttpServerTest, BodyStreamChunksArriveOneByOne) {
  StreamCatcher catcher;
  StartServer([&](const Request&) { return BodyStreamResponse(catcher); });
  Client c(port_);
  c.Send(Get("/stream"));
  RawResponse head = c.ReadResponse();
  ASSERT_EQ(head.status, 200);
  EXPECT_EQ(head.headers["transfer-encoding"], "chunked");
  EXPECT_EQ(head.headers.count("content-length"), 0u);
  EXPECT_EQ(head.headers["content-type"], "text/plain");
  EXPECT_EQ(head.headers["x-upstream"], "r1");
  EXPECT_EQ(head.headers["connection"], "keep-alive");
  auto s = catcher.Get();
  ASSERT_TRUE(s);
  // Each chunk reaches the client before the next one is written.
  EXPECT_TRUE(s->Write("a"));
  ASSERT_TRUE(c.ReadUntil("1\r\na\r\n"));
  EXPECT_TRUE(s->Write(""));  // ignored
  EXPECT_TRUE(s->Write("0123456789abcdefX"));
  ASSERT_TRUE(c.ReadUntil("11\r\n0123456789abcdefX\r\n"));
  EXPECT_EQ(c.buffered(), "1\r\na\r\n11\r\n0123456789abcdefX\r\n");
  s->Finish();
  s->Finish();
  EXPECT_TRUE(s->closed());
  EXPECT_FALSE(s->Write("late"));
  ASSERT_TRUE(c.ReadUntil("0\r\n\r\n"));
  EXPECT_EQ(c.buffered(), "1\r\na\r\n11\r\n0123456789abcdefX\r\n0\r\n\r\n");
}

TEST_F(HttpServerTest, BodyStreamFinishKeepsConnectionAlive) {
  StreamCatcher catcher;
  ASSERT_TRUE(router_
                  .Add("GET", "/stream", [&](const Request&) { return BodyStreamResponse(catcher); })
                  .ok());
  StartServer();
  Client c(port_);
  for (int round = 0; round < 2; ++round) {
    c.Send(Get("/stream"));
    ASSERT_EQ(c.ReadResponse().status, 200) << round;
    auto s = catcher.Get();
    ASSERT_TRUE(s);
    EXPECT_TRUE(s->Write("hi"));
    s->Finish();
    s->Abort();  // after Finish: nothing to abort
    ASSERT_TRUE(c.ReadUntil("2\r\nhi\r\n0\r\n\r\n")) << round;
    c.ClearBuffered();
  }
  c.Send(Get("/ok"));
  RawResponse r = c.ReadResponse();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.Json()["ok"], true);
}

TEST_F(HttpServerTest, BodyStreamAbortTruncatesTheBody) {
  StreamCatcher catcher;
  ASSERT_TRUE(router_
                  .Add("GET", "/stream", [&](const Request&) { return BodyStreamResponse(catcher); })
                  .ok());
  StartServer();
  Client c(port_);
  c.Send(Get("/stream"));
  ASSERT_EQ(c.ReadResponse().status, 200);
  auto s = catcher.Get();
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->Write("part"));
  ASSERT_TRUE(c.ReadUntil("4\r\npart\r\n"));
  s->Abort();
  s->Abort();
  EXPECT_TRUE(s->closed());
  EXPECT_FALSE(s->Write("more"));
  EXPECT_TRUE(c.ClosedWithin(2s));
  EXPECT_EQ(c.buffered().find("0\r\n\r\n"), std::string::npos) << "no terminating chunk";
  ExpectStillServing();
}

TEST_F(HttpServerTest, BodyStreamWriteFailsAfterClientLeaves) {
  StreamCatcher catcher;
  StartServer([&](const Request&) { return BodyStreamResponse(catcher); });
  Client c(port_);
  c.Send(Get("/stream"));
  ASSERT_EQ(c.ReadResponse().status, 200);
  auto s = catcher.Get();
  ASSERT_TRUE(s);
  c.Close();
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = !s->Write("tick");
    if (!gone) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(gone) << "Write kept returning true after the client left";
  EXPECT_TRUE(s->closed());
}

// A proxy learns the upstream's status only later: the deferred Reply carries
// the body stream (or an event stream).
TEST_F(HttpServerTest, StreamsThroughDeferredReply) {
  StreamCatcher catcher;
  std::mutex mu;
  std::vector<Reply> replies;
  ASSERT_TRUE(router_
                  .Add("GET", "/proxy",
                       [&](const Request&) {
                         Response r;
                         r.defer = [&](Reply reply) {
                           std::lock_guard lock(mu);
                           replies.push_back(std::move(reply));
                         };
                         return r;
                       })
                  .ok());
  StartServer();
  auto take_reply = [&]() -> Reply {
    for (int i = 0; i < 500; ++i) {
      {
        std::lock_guard lock(mu);
        if (!replies.empty()) {
          Reply r = std::move(replies.back());
          replies.pop_back();
          return r;
        }
      }
      std::this_thread::sleep_for(2ms);
    }
    return nullptr;
  };

  Client c(port_);
  c.Send(Get("/proxy"));
  Reply reply = take_reply();
  ASSERT_TRUE(reply);
  std::thread([&] {
    Response r = BodyStreamResponse(catcher);
    r.status = 201;
    reply(std::move(r));
  }).join();
  RawResponse head = c.ReadResponse();
  ASSERT_EQ(head.status, 201);
  EXPECT_EQ(head.headers["transfer-encoding"], "chunked");
  auto s = catcher.Get();
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->Write("hello"));
  ASSERT_TRUE(c.ReadUntil("5\r\nhello\r\n"));
  s->Finish();
  ASSERT_TRUE(c.ReadUntil("0\r\n\r\n"));
  c.ClearBuffered();

  // The same connection, now with an event stream given to the Reply.
  c.Send(Get("/proxy"));
  reply = take_reply();
  ASSERT_TRUE(reply);
  std::shared_ptr<SseStream> sse;
  std::atomic<bool> ready{false};
  Response r;
  r.stream = [&](std::shared_ptr<SseStream> st) {
    sse = std::move(st);
    ready = true;
  };
  reply(std::move(r));
  head = c.ReadResponse();
  ASSERT_EQ(head.status, 200);
  EXPECT_EQ(head.headers["content-type"], "text/event-stream");
  for (int i = 0; i < 500 && !ready; ++i) std::this_thread::sleep_for(2ms);
  ASSERT_TRUE(ready);
  EXPECT_TRUE(sse->Send("e", "x"));
  EXPECT_TRUE(c.ReadUntil("event: e\ndata: x\n\n"));
  sse->Close();
  EXPECT_TRUE(c.ClosedWithin(2s));
}

TEST_F(HttpServerTest, BodyStreamBacklogCutsOffSlowClient) {
  options_.max_stream_backlog_bytes = 64 << 10;
  StreamCatcher catcher;
  StartServer([&](const Request&) { return BodyStreamResponse(catcher); });
  Client c(port_);
  c.Send(Get("/stream"));
  ASSERT_EQ(c.ReadResponse().status, 200);
  auto s = catcher.Get();
  ASSERT_TRUE(s);
  // The client reads nothing more: socket buffers fill, then the backlog.
  std::string piece(16 << 10, 'x');
  bool cut = false;
  for (int i = 0; i < 20000 && !cut; ++i) cut = !s->Write(piece);
  EXPECT_TRUE(cut) << "a client that never reads was never cut off";
  EXPECT_TRUE(s->closed());
  EXPECT_TRUE(c.ClosedWithin(5s));
}

TEST_F(HttpServerTest, BodyStreamToHttp10ClientIsCloseDelimited) {
  StreamCatcher catcher;
  StartServer([&](const Request&) { return BodyStreamResponse(catcher); });
  Client c(port_);
  c.Send("GET /stream HTTP/1.0\r\n\r\n");
  RawResponse head = c.ReadResponse();
  ASSERT_EQ(head.status, 200);
  EXPECT_EQ(head.headers.count("transfer-encoding"), 0u);
  EXPECT_EQ(head.headers["connection"], "close");
  auto s = catcher.Get();
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->Write("raw"));
  s->Finish();
  EXPECT_TRUE(c.ClosedWithin(2s));
  EXPECT_EQ(c.buffered(), "raw");
}

TEST_F(HttpServerTest, StartFailsOnBadAddressAndBusyPort) {
  StartServer();
  HttpServerOptions o = options_;
  o.port = port_;
  HttpServer clash(o, router_.AsHandler());
  EXPECT_EQ(clash.Start().code(), StatusCode::kUnavailable);
  o.address = "not-an-ip";
  HttpServer bad(o, router_.AsHandler());
  EXPECT_EQ(bad.Start().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(server_->Start().code(), StatusCode::kFailedPrecondition);
}

TEST(HttpHelpersTest, JsonErrorShape) {
  Response r = JsonError(409, "conflict", "binpack is enabled");
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(r.content_type, "application/json");
  auto j = nlohmann::json::parse(r.body);
  EXPECT_EQ(
      j, nlohmann::json::parse(R"({"error":{"code":"conflict","message":"binpack is enabled"}})"));
  r.SetHeader("allow", "GET");
  r.SetHeader("Allow", "POST");
  EXPECT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.Header("ALLOW").value_or(""), "POST");
}

}  // namespace
}  // namespace hf::http
