#include "http/client.h"

#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <thread>
#include <vector>

namespace hf::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

TEST(ParseServerUrlTest, Accepts) {
  struct Row {
    const char* url;
    const char* host;
    uint16_t port;
    const char* prefix;
  };
  const Row rows[] = {
      {"http://127.0.0.1:3333", "127.0.0.1", 3333, ""},
      {"http://127.0.0.1:3333/", "127.0.0.1", 3333, ""},
      {"http://hf.example.com", "hf.example.com", 80, ""},
      {"http://hf.example.com/heteroflow/", "hf.example.com", 80, "/heteroflow"},
      {"localhost:8080", "localhost", 8080, ""},
      {"http://[::1]:3333/x/y", "::1", 3333, "/x/y"},
      {"http://[::1]", "::1", 80, ""},
  };
  for (const Row& r : rows) {
    Result<ServerUrl> u = ParseServerUrl(r.url);
    ASSERT_TRUE(u.ok()) << r.url << ": " << u.status().ToString();
    EXPECT_EQ(u->host, r.host) << r.url;
    EXPECT_EQ(u->port, r.port) << r.url;
    EXPECT_EQ(u->prefix, r.prefix) << r.url;
  }
  EXPECT_EQ(ParseServerUrl("http://[::1]:3333")->HostHeader(), "[::1]:3333");
  EXPECT_EQ(ParseServerUrl("http://h:1/p/")->ToString(), "http://h:1/p");
}

TEST(ParseServerUrlTest, Refuses) {
  struct Row {
    const char* url;
    const char* says;
  };
  const Row rows[] = {
      {"https://h:3333", "https is not supported"},
      {"ftp://h", "only http://"},
      {"http://user:secret@h:3333", "user info"},
      {"http://h:3333?x=1", "query"},
      {"http://h:3333#f", "query or fragment"},
      {"http://:3333", "no host"},
      {"http://", "no host"},
      {"http://h:", "empty port"},
      {"http://h:0", "1..65535"},
      {"http://h:65536", "1..65535"},
      {"http://h:12a", "1..65535"},
      {"http://[::1", "unclosed"},
      {"http://[::1]x", "after the IPv6"},
  };
  for (const Row& r : rows) {
    Result<ServerUrl> u = ParseServerUrl(r.url);
    ASSERT_FALSE(u.ok()) << r.url;
    EXPECT_EQ(u.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(u.status().message().find(r.says), std::string::npos)
        << r.url << ": " << u.status().message();
  }
  // A refused URL is echoed in the message, except one with user info,
  // which may hold a secret.
  EXPECT_EQ(ParseServerUrl("http://u:secret@h").status().message().find("secret"),
            std::string::npos);
}

// A port nobody listens on: bind one, note it, close it.
uint16_t ClosedPort() {
  asio::io_context ioc;
  tcp::acceptor a(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const uint16_t port = a.local_endpoint().port();
  a.close();
  return port;
}

TEST(HttpClientTest, ConnectionRefusedIsUnavailableNamingTheServer) {
  ServerUrl url{.host = "127.0.0.1", .port = ClosedPort()};
  HttpClient client(url, "hf_secret_token", std::chrono::seconds(5));
  Result<HttpResponse> r = client.Send("GET", "/api/v1/plugins");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("connection refused"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find(url.ToString()), std::string::npos);
  EXPECT_EQ(r.status().message().find("hf_secret_token"), std::string::npos);
}

// One request served by a thread: checks what the client sent and answers.
TEST(HttpClientTest, SendsMethodPrefixTokenAndBody) {
  asio::io_context ioc;
  tcp::acceptor acceptor(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const uint16_t port = acceptor.local_endpoint().port();
  bhttp::request<bhttp::string_body> seen;
  std::thread server([&] {
    tcp::socket s(ioc);
    acceptor.accept(s);
    beast::flat_buffer buf;
    bhttp::read(s, buf, seen);
    bhttp::response<bhttp::string_body> res{bhttp::status::conflict, 11};
    res.set(bhttp::field::content_type, "application/json");
    res.body() = R"({"error":{"code":"conflict","message":"no"}})";
    res.prepare_payload();
    bhttp::write(s, res);
  });
  Result<ServerUrl> url = ParseServerUrl("http://127.0.0.1:" + std::to_string(port) + "/hf");
  ASSERT_TRUE(url.ok());
  HttpClient client(*url, "hf_t", std::chrono::seconds(5));
  Result<HttpResponse> r = client.Send("PUT", "/api/v1/plugins/spread", R"({"enabled":true})");
  server.join();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 409);
  EXPECT_EQ(r->body, R"({"error":{"code":"conflict","message":"no"}})");
  EXPECT_EQ(seen.method(), bhttp::verb::put);
  EXPECT_EQ(seen.target(), "/hf/api/v1/plugins/spread");
  EXPECT_EQ(seen[bhttp::field::authorization], "Bearer hf_t");
  EXPECT_EQ(seen[bhttp::field::content_type], "application/json");
  EXPECT_EQ(seen[bhttp::field::host], "127.0.0.1:" + std::to_string(port));
  EXPECT_EQ(seen.body(), R"({"enabled":true})");
}

TEST(HttpClientTest, SeveralServersTheNextIsTriedWhenOneDoesNotConnectAndKept) {
  // Two requests answered by the second server; the first refuses.
  asio::io_context ioc;
  tcp::acceptor acceptor(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const uint16_t port = acceptor.local_endpoint().port();
  std::vector<std::string> targets;
  std::thread server([&] {
    for (int i = 0; i < 2; ++i) {
      tcp::socket s(ioc);
      acceptor.accept(s);
      beast::flat_buffer buf;
      bhttp::request<bhttp::string_body> req;
      bhttp::read(s, buf, req);
      targets.push_back(std::string(req.target()) + " " + std::string(req[bhttp::field::host]));
      bhttp::response<bhttp::string_body> res{bhttp::status::ok, 11};
      res.body() = "{}";
      res.prepare_payload();
      bhttp::write(s, res);
    }
  });
  const uint16_t closed = ClosedPort();
  Result<std::vector<ServerUrl>> urls = ParseServerUrls(
      "http://127.0.0.1:" + std::to_string(closed) + "/a, http://127.0.0.1:" + std::to_string(port) + "/b");
  ASSERT_TRUE(urls.ok()) << urls.status().ToString();
  ASSERT_EQ(urls->size(), 2u);
  HttpClient client(*urls, "", std::chrono::seconds(5));
  Result<HttpResponse> first = client.Send("GET", "/x");
  Result<HttpResponse> second = client.Send("GET", "/y");
  server.join();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  const std::string host = "127.0.0.1:" + std::to_string(port);
  EXPECT_EQ(targets, (std::vector<std::string>{"/b/x " + host, "/b/y " + host}));
  // None answers: the error names the last one tried.
  HttpClient none(std::vector<ServerUrl>{(*urls)[0], (*urls)[0]}, "", std::chrono::seconds(5));
  Result<HttpResponse> r = none.Send("GET", "/x");
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  // A malformed member of the list is refused, naming it.
  EXPECT_EQ(ParseServerUrls("http://a:1,ftp://b").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseServerUrls("").status().code(), StatusCode::kInvalidArgument);
}

TEST(HttpClientTest, TimesOutOnASilentServer) {
  asio::io_context ioc;
  tcp::acceptor acceptor(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  ServerUrl url{.host = "127.0.0.1", .port = acceptor.local_endpoint().port()};
  // The kernel completes the handshake from the listen backlog; nobody ever
  // answers.
  HttpClient client(url, "", std::chrono::milliseconds(200));
  const auto start = std::chrono::steady_clock::now();
  Result<HttpResponse> r = client.Send("GET", "/livez");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("timed out"), std::string::npos) << r.status().message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// Answers one request on `s` with 200 and `body`; false when the client
// closed the connection instead of sending one.
bool AnswerOne(tcp::socket& s, beast::flat_buffer& buf, const std::string& body) {
  bhttp::request<bhttp::string_body> req;
  beast::error_code ec;
  bhttp::read(s, buf, req, ec);
  if (ec) return false;
  bhttp::response<bhttp::string_body> res{bhttp::status::ok, 11};
  res.body() = body + " " + std::string(req.target());
  res.prepare_payload();
  bhttp::write(s, res);
  return true;
}

TEST(HttpClientTest, KeepAliveSendsEveryRequestOnOneConnection) {
  asio::io_context ioc;
  tcp::acceptor acceptor(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  ServerUrl url{.host = "127.0.0.1", .port = acceptor.local_endpoint().port()};
  int answered = 0;
  std::thread server([&] {
    tcp::socket s(ioc);
    acceptor.accept(s);
    beast::flat_buffer buf;
    while (AnswerOne(s, buf, "one")) ++answered;
  });
  {
    HttpClient client(url, "", std::chrono::seconds(5), /*keep_alive=*/true);
    for (int i = 0; i < 3; ++i) {
      Result<HttpResponse> r = client.Send("POST", "/r" + std::to_string(i), "{}");
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(r->body, "one /r" + std::to_string(i));
    }
  }  // closes the connection: the server's loop ends
  server.join();
  EXPECT_EQ(answered, 3);
}

TEST(HttpClientTest, KeepAliveReconnectsWhenTheServerClosedTheConnection) {
  asio::io_context ioc;
  tcp::acceptor acceptor(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  ServerUrl url{.host = "127.0.0.1", .port = acceptor.local_endpoint().port()};
  std::thread server([&] {
    beast::flat_buffer buf;
    {
      // Answers, then closes the idle connection.
      tcp::socket s(ioc);
      acceptor.accept(s);
      AnswerOne(s, buf, "first");
    }
    {
      // Answers, then reads the next request and closes without answering
      // (as a server going away would).
      tcp::socket s(ioc);
      acceptor.accept(s);
      buf.clear();
      AnswerOne(s, buf, "second");
      bhttp::request<bhttp::string_body> req;
      beast::error_code ec;
      bhttp::read(s, buf, req, ec);
    }
    tcp::socket s(ioc);
    acceptor.accept(s);
    buf.clear();
    AnswerOne(s, buf, "third");
  });
  HttpClient client(url, "", std::chrono::seconds(5), /*keep_alive=*/true);
  Result<HttpResponse> r = client.Send("GET", "/a");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, "first /a");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the close arrives
  r = client.Send("GET", "/b");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, "second /b");
  // Broken after the request was read: sent once more, on a new connection.
  r = client.Send("GET", "/c");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, "third /c");
  server.join();
}

}  // namespace
}  // namespace hf::http
