#include "http/client.h"

#include <poll.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <memory>
#include <utility>

namespace hf::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

// Tasks lists are capped at 1000 per page by the server; 64 MiB leaves room
// for any answer the API gives while bounding what a wrong server can make
// this process hold.
constexpr uint64_t kMaxResponseBytes = 64ull << 20;
// With several servers, the longest wait for one to accept a connection.
constexpr auto kConnectEach = std::chrono::seconds(2);

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::string Describe(const beast::error_code& ec) {
  if (ec == asio::error::connection_refused) return "connection refused";
  if (ec == beast::error::timeout) return "timed out";
  if (ec == asio::error::host_not_found || ec == asio::error::host_not_found_try_again) {
    return "host not found";
  }
  if (ec == bhttp::error::end_of_stream || ec == asio::error::eof) {
    return "the server closed the connection without answering";
  }
  if (ec == asio::error::connection_reset) return "connection reset by the server";
  return ec.message();
}

}  // namespace

std::string ServerUrl::HostHeader() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string ServerUrl::ToString() const { return "http://" + HostHeader() + prefix; }

Result<ServerUrl> ParseServerUrl(std::string_view url) {
  const std::string shown(url.substr(0, 200));
  auto bad = [&](const std::string& why) {
    return InvalidArgument("server URL \"" + shown + "\": " + why);
  };
  std::string_view rest = url;
  if (StartsWith(rest, "https://")) {
    return bad("https is not supported by this client; use http:// (or a local TLS proxy)");
  }
  if (StartsWith(rest, "http://")) {
    rest.remove_prefix(7);
  } else if (rest.find("://") != std::string_view::npos) {
    return bad("only http:// URLs are supported");
  }
  if (rest.find_first_of("?#") != std::string_view::npos) {
    return bad("a query or fragment is not allowed");
  }
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? "" : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos) {
    // Not echoed: the part before '@' may be a secret.
    return InvalidArgument(
        "server URL: user info (user:password@) is not allowed; pass the token with --token or "
        "HETEROFLOW_TOKEN");
  }
  ServerUrl out;
  std::string_view port_text;
  if (StartsWith(authority, "[")) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("unclosed '[' in the host");
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return bad("unexpected text after the IPv6 address");
      port_text = after.substr(1);
      if (port_text.empty()) return bad("empty port");
    }
  } else {
    const size_t colon = authority.find(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) return bad("empty port");
    }
  }
  if (out.host.empty()) return bad("no host");
  if (!port_text.empty()) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || value < 1 ||
        value > 65535) {
      return bad("port must be a number in 1..65535");
    }
    out.port = static_cast<uint16_t>(value);
  }
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  out.prefix = std::string(path);
  return out;
}

struct HttpClient::Connection {
  asio::io_context ioc;
  beast::tcp_stream stream{ioc};
  beast::flat_buffer buffer;
};

namespace {

// Beast's timeouts work on asynchronous operations only, so each step is
// started asynchronously and the context is run until it completes.
void RunOnce(asio::io_context& ioc) {
  ioc.run();
  ioc.restart();
}

// An idle keep-alive connection that is readable has been closed by the
// server (or carries bytes nobody asked for): it cannot take a request.
bool Unusable(tcp::socket& s) {
  if (!s.is_open()) return true;
  pollfd p{.fd = s.native_handle(), .events = POLLIN};
  return ::poll(&p, 1, 0) != 0;
}

}  // namespace

Result<std::vector<ServerUrl>> ParseServerUrls(std::string_view urls) {
  std::vector<ServerUrl> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = urls.find(',', start);
    std::string_view one = urls.substr(start, comma == std::string_view::npos ? urls.npos : comma - start);
    while (!one.empty() && one.front() == ' ') one.remove_prefix(1);
    while (!one.empty() && one.back() == ' ') one.remove_suffix(1);
    Result<ServerUrl> u = ParseServerUrl(one);
    if (!u.ok()) return u.status();
    out.push_back(std::move(*u));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

HttpClient::HttpClient(ServerUrl server, std::string token, std::chrono::milliseconds timeout,
                       bool keep_alive)
    : HttpClient(std::vector<ServerUrl>{std::move(server)}, std::move(token), timeout, keep_alive) {}

HttpClient::HttpClient(std::vector<ServerUrl> servers, std::string token,
                       std::chrono::milliseconds timeout, bool keep_alive)
    : servers_(std::move(servers)),
      token_(std::move(token)),
      timeout_(timeout),
      keep_alive_(keep_alive) {
  HF_CHECK(!servers_.empty());
}

HttpClient::~HttpClient() = default;
HttpClient::HttpClient(HttpClient&&) noexcept = default;
HttpClient& HttpClient::operator=(HttpClient&&) noexcept = default;

void HttpClient::Close() const {
  if (!conn_) return;
  beast::error_code ignored;
  conn_->stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  conn_.reset();
}

Result<HttpResponse> HttpClient::Send(std::string_view method, std::string_view target,
                                      std::string_view body) const {
  const bhttp::verb verb = bhttp::string_to_verb(beast::string_view(method.data(), method.size()));
  HF_CHECK(verb != bhttp::verb::unknown);
  auto failed = [&](const beast::error_code& ec) {
    std::string why = Describe(ec);
    if (ec == beast::error::timeout) {
      why += " after " + std::to_string(timeout_.count()) + " ms";
    }
    return Unavailable("cannot reach the server at " + server().ToString() + ": " + why);
  };

  bhttp::request<bhttp::string_body> req{verb, server().prefix + std::string(target), 11};
  req.set(bhttp::field::host, server().HostHeader());
  req.set(bhttp::field::user_agent, "heteroflow-client/0.1.0");
  req.set(bhttp::field::accept, "application/json");
  if (!token_.empty()) req.set(bhttp::field::authorization, "Bearer " + token_);
  if (!body.empty()) {
    req.set(bhttp::field::content_type, "application/json");
    req.body() = std::string(body);
  }
  req.prepare_payload();

  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  if (conn_ && Unusable(conn_->stream.socket())) conn_.reset();
  size_t tried = 0;  // servers that could not be connected to
  while (true) {
    const bool reused = conn_ != nullptr;
    beast::error_code ec;
    if (!reused) {
      auto c = std::make_unique<Connection>();
      // Sync resolution: the timeout does not cover it, which only matters
      // for names whose DNS server does not answer; addresses resolve at once.
      tcp::resolver resolver(c->ioc);
      const auto endpoints = resolver.resolve(server().host, std::to_string(server().port), ec);
      if (!ec) {
        // With several servers, one that does not connect soon is passed
        // over for the next.
        const auto connect_by =
            servers_.size() == 1 ? deadline
                                 : std::min(deadline, std::chrono::steady_clock::now() + kConnectEach);
        c->stream.expires_at(connect_by);
        c->stream.async_connect(endpoints, [&](beast::error_code e, const tcp::endpoint&) { ec = e; });
        RunOnce(c->ioc);
      }
      if (ec) {
        if (++tried < servers_.size() && std::chrono::steady_clock::now() < deadline) {
          current_ = (current_ + 1) % servers_.size();
          req.target(server().prefix + std::string(target));
          req.set(bhttp::field::host, server().HostHeader());
          continue;
        }
        return failed(ec);
      }
      conn_ = std::move(c);
    }
    Connection& c = *conn_;
    c.stream.expires_at(deadline);
    bhttp::async_write(c.stream, req, [&](beast::error_code e, size_t) { ec = e; });
    RunOnce(c.ioc);
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(kMaxResponseBytes);
    if (!ec) {
      bhttp::async_read(c.stream, c.buffer, parser, [&](beast::error_code e, size_t) { ec = e; });
      RunOnce(c.ioc);
    }
    if (ec) {
      conn_.reset();
      // The server closed a reused connection before answering (it went
      // idle too long, or made room for another client): once more, anew.
      if (reused && !parser.got_some() && ec != beast::error::timeout) continue;
      return failed(ec);
    }
    HttpResponse out;
    out.status = static_cast<int>(parser.get().result_int());
    out.body = std::move(parser.get().body());
    if (!keep_alive_ || !parser.keep_alive()) {
      beast::error_code ignored;
      c.stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
      conn_.reset();
    }
    return out;
  }
}

}  // namespace hf::http
