#include "http/upstream.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <limits>
#include <optional>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/mutex.h"
#include "core/text.h"

namespace hf::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

bool IStartsWith(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && IEquals(s.substr(0, prefix.size()), prefix);
}

// Headers that describe one hop, not the message (RFC 9110 section 7.6.1).
bool IsHopByHop(std::string_view name) {
  return IEquals(name, "Connection") || IEquals(name, "Keep-Alive") ||
         IEquals(name, "Transfer-Encoding") || IEquals(name, "TE") || IEquals(name, "Upgrade") ||
         IEquals(name, "Trailer") || IStartsWith(name, "Proxy-");
}

std::string_view SV(beast::string_view s) { return {s.data(), s.size()}; }

std::string Ms(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

// The read errors that mean "the peer closed or reset the connection", as
// opposed to a malformed answer.
bool IsConnectionLoss(const beast::error_code& ec) {
  return ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
         ec == asio::error::eof || ec.category() == asio::error::get_system_category() ||
         ec.category() == asio::error::get_misc_category();
}

// A pooled connection is unusable when the peer closed it (EOF) or sent
// something unasked. A non-blocking peek tells without disturbing the socket;
// this avoids most retries, and the retry covers the race that remains.
bool LooksStale(tcp::socket& s) {
  char c;
  ssize_t r = ::recv(s.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (r < 0) return !(errno == EAGAIN || errno == EWOULDBLOCK);
  return true;
}

struct IdleConnection {
  std::unique_ptr<tcp::socket> socket;
  Clock::time_point since;
};

}  // namespace

class Exchange;

class UpstreamClient::Impl {
 public:
  explicit Impl(UpstreamOptions o) : options(std::move(o)), work(asio::make_work_guard(ioc)) {}

  std::unique_ptr<tcp::socket> TakeIdle(const std::string& key) HF_EXCLUDES(mu);
  void PutIdle(const std::string& key, std::unique_ptr<tcp::socket> socket) HF_EXCLUDES(mu);
  void Unregister(Exchange* e) HF_EXCLUDES(mu);

  const UpstreamOptions options;
  mutable Mutex mu;  // guards stopping, idle and active
  std::condition_variable all_done;
  bool stopping HF_GUARDED_BY(mu) = false;
  std::unordered_map<std::string, std::vector<IdleConnection>> idle HF_GUARDED_BY(mu);
  std::unordered_map<Exchange*, std::weak_ptr<Exchange>> active HF_GUARDED_BY(mu);

  // Guards stopped and threads (filled by the constructor, before the
  // client is shared; joined by Stop). Taken before mu.
  Mutex lifecycle_mu;
  bool stopped HF_GUARDED_BY(lifecycle_mu) = false;
  std::vector<std::thread> threads HF_GUARDED_BY(lifecycle_mu);

  // Declared last so it is destroyed first: queued handlers own exchanges.
  asio::io_context ioc;
  asio::executor_work_guard<asio::io_context::executor_type> work;
};

// One request/response, including its one transparent retry. Everything runs
// on the exchange's strand (every handler is bound to it, whichever
// connection it uses), so members need no lock.
class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(UpstreamClient::Impl* client, UpstreamRequest request, UpstreamHandlers handlers)
      : client_(client),
        request_(std::move(request)),
        handlers_(std::move(handlers)),
        strand_(asio::make_strand(client->ioc)),
        timer_(strand_) {}

  void Post(void (Exchange::*fn)()) {
    asio::post(strand_, [self = shared_from_this(), fn] { ((*self).*fn)(); });
  }

  void Start() {
    beast::error_code ec;
    auto addr = asio::ip::make_address(request_.host, ec);
    std::string host = addr.is_v6() ? "[" + request_.host + "]" : request_.host;
    peer_ = host + ":" + std::to_string(request_.port);
    if (ec || request_.port == 0) {
      result_.not_sent = true;
      return Done(InvalidArgument("upstream address " + peer_ +
                                  " is not an IP literal and a non-zero port"));
    }
    endpoint_ = tcp::endpoint(addr, request_.port);
    key_ = peer_;
    BuildWire(host);
    if (stopped_) return Stopped();
    socket_ = client_->TakeIdle(key_);
    if (socket_) {
      reused_ = true;
      return WriteRequest();
    }
    Connect();
  }

  // Posted by Stop().
  void Cancel() {
    stopped_ = true;
    CloseSocket();
  }

 private:
  void BuildWire(const std::string& host) {
    bhttp::request<bhttp::string_body> req;
    req.version(11);
    req.method_string(request_.method);
    req.target(request_.target);
    for (const auto& [k, v] : request_.headers) {
      if (IsHopByHop(k) || IEquals(k, "Host") || IEquals(k, "Content-Length") || k.empty() ||
          k.find_first_of("\r\n: ") != std::string::npos ||
          v.find_first_of("\r\n") != std::string::npos) {
        continue;
      }
      req.insert(k, v);
    }
    req.set(bhttp::field::host, host + ":" + std::to_string(request_.port));
    req.body() = std::move(request_.body);
    req.prepare_payload();
    std::ostringstream out;
    out << req;
    wire_ = std::move(out).str();
  }

  void Connect() {
    socket_ = std::make_unique<tcp::socket>(client_->ioc);
    Arm(request_.connect_timeout,
        "connect to " + peer_ + " timed out after " + Ms(request_.connect_timeout));
    socket_->async_connect(
        endpoint_, asio::bind_executor(strand_, [self = shared_from_this()](beast::error_code ec) {
          self->OnConnect(ec);
        }));
  }

  void OnConnect(beast::error_code ec) {
    if (stopped_) return Stopped();
    if (ec) {
      result_.not_sent = true;
      return Done(Unavailable(timed_out_ ? timeout_message_
                                         : "connect to " + peer_ + " failed: " + ec.message()));
    }
    beast::error_code ignored;
    socket_->set_option(tcp::no_delay(true), ignored);
    WriteRequest();
  }

  void WriteRequest() {
    buffer_.clear();
    Arm(request_.header_timeout,
        "no response header from " + peer_ + " within " + Ms(request_.header_timeout));
    asio::async_write(
        *socket_, asio::buffer(wire_),
        asio::bind_executor(strand_, [self = shared_from_this()](beast::error_code ec, size_t n) {
          self->OnWritten(ec, n);
        }));
  }

  void OnWritten(beast::error_code ec, size_t n) {
    if (stopped_) return Stopped();
    if (n > 0) wrote_any_ = true;
    if (ec) {
      if (reused_ && !retried_ && !timed_out_) return Retry();
      // Not one byte left: the upstream cannot have seen the request.
      result_.not_sent = n == 0;
      return Done(Unavailable(timed_out_
                                  ? timeout_message_
                                  : "sending request to " + peer_ + " failed: " + ec.message()));
    }
    ReadHeader();
  }

  void ReadHeader() {
    parser_.emplace();
    parser_->header_limit(
        static_cast<uint32_t>(std::min<size_t>(client_->options.max_header_bytes, UINT32_MAX)));
    // Model streams can be long; nothing is buffered, so no limit is needed.
    // Not boost::none: Beast 1.74 then compares a Content-Length against an
    // empty optional and refuses every body.
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    if (IEquals(request_.method, "HEAD")) parser_->skip(true);
    bhttp::async_read_header(
        *socket_, buffer_, *parser_,
        asio::bind_executor(strand_, [self = shared_from_this()](beast::error_code ec, size_t) {
          self->OnHeader(ec);
        }));
  }

  void OnHeader(beast::error_code ec) {
    if (stopped_) return Stopped();
    if (ec) {
      // A pooled connection the upstream closed while it sat idle: nothing
      // of the answer came, so the request can go again on a fresh one.
      if (reused_ && !retried_ && !timed_out_ && IsConnectionLoss(ec) && !parser_->got_some() &&
          buffer_.size() == 0) {
        return Retry();
      }
      if (timed_out_) return Done(Unavailable(timeout_message_));
      if (ec == bhttp::error::header_limit) {
        return Done(Internal("response header from " + peer_ + " exceeds " +
                             std::to_string(client_->options.max_header_bytes) + " bytes"));
      }
      if (ec == bhttp::error::end_of_stream) {
        return Done(Unavailable(peer_ + " closed the connection without answering"));
      }
      if (IsConnectionLoss(ec)) {
        return Done(Unavailable("reading response from " + peer_ + " failed: " + ec.message()));
      }
      return Done(Internal("malformed response from " + peer_ + ": " + ec.message()));
    }
    auto& msg = parser_->get();
    int status = static_cast<int>(msg.result_int());
    // Interim answers (100 Continue, 103 Early Hints) precede the real one.
    if (status >= 100 && status < 200 && status != 101) return ReadHeader();
    // Headers the upstream's Connection header names are hop-by-hop too.
    std::vector<std::string> named;
    for (const auto& f : msg) {
      if (!IEquals(SV(f.name_string()), "Connection")) continue;
      std::string_view v = SV(f.value());
      while (!v.empty()) {
        size_t comma = v.find(',');
        std::string_view token = v.substr(0, comma);
        while (!token.empty() && (token.front() == ' ' || token.front() == '\t')) {
          token.remove_prefix(1);
        }
        while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) {
          token.remove_suffix(1);
        }
        if (!token.empty()) named.emplace_back(token);
        v = comma == std::string_view::npos ? std::string_view() : v.substr(comma + 1);
      }
    }
    HeaderList headers;
    for (const auto& f : msg) {
      std::string_view name = SV(f.name_string());
      if (IsHopByHop(name) || IEquals(name, "Content-Length") ||
          std::any_of(named.begin(), named.end(),
                      [&](const std::string& n) { return IEquals(n, name); })) {
        continue;
      }
      headers.emplace_back(std::string(name), std::string(SV(f.value())));
    }
    result_.header_received = true;
    Arm(request_.idle_timeout,
        "no response body bytes from " + peer_ + " for " + Ms(request_.idle_timeout));
    if (handlers_.on_header) handlers_.on_header(status, std::move(headers));
    if (stopped_) return Stopped();
    if (parser_->is_done()) return Complete();
    ReadBody();
  }

  void ReadBody() {
    auto& body = parser_->get().body();
    body.data = body_buf_;
    body.size = sizeof(body_buf_);
    bhttp::async_read_some(
        *socket_, buffer_, *parser_,
        asio::bind_executor(strand_, [self = shared_from_this()](beast::error_code ec, size_t) {
          self->OnBody(ec);
        }));
  }

  void OnBody(beast::error_code ec) {
    if (stopped_) return Stopped();
    if (ec == bhttp::error::need_buffer) ec = {};
    size_t got = sizeof(body_buf_) - parser_->get().body().size;
    if (got > 0) {
      Arm(request_.idle_timeout,
          "no response body bytes from " + peer_ + " for " + Ms(request_.idle_timeout));
      if (handlers_.on_body && !handlers_.on_body(std::string_view(body_buf_, got))) {
        result_.cancelled = true;
        return Done(Unavailable("exchange with " + peer_ + " cancelled by the caller"));
      }
    }
    if (ec) {
      if (timed_out_) return Done(Unavailable(timeout_message_));
      if (IsConnectionLoss(ec)) {
        return Done(Unavailable("response body from " + peer_ + " cut short: " + ec.message()));
      }
      return Done(Internal("malformed response body from " + peer_ + ": " + ec.message()));
    }
    if (parser_->is_done()) return Complete();
    ReadBody();
  }

  void Complete() {
    Disarm();
    // Leftover bytes would be an answer to nothing: such a peer is not
    // trusted with another request.
    if (parser_->keep_alive() && !parser_->need_eof() && buffer_.size() == 0) {
      client_->PutIdle(key_, std::move(socket_));
    }
    Done(Status::Ok());
  }

  void Retry() {
    retried_ = true;
    reused_ = false;
    CloseSocket();
    Connect();
  }

  void Stopped() {
    if (!result_.header_received && !wrote_any_) result_.not_sent = true;
    Done(Unavailable("client stopping"));
  }

  void Done(Status status) {
    if (done_) return;
    done_ = true;
    Disarm();
    CloseSocket();
    result_.status = std::move(status);
    result_.timed_out = !result_.status.ok() && timed_out_;
    if (handlers_.on_done) {
      try {
        handlers_.on_done(result_);
      } catch (const std::exception& e) {
        spdlog::error("upstream: on_done threw: {}", e.what());
      }
    }
    // Released here, not in the destructor: the callbacks may own things
    // (a BodyStream, a Reply) that should not outlive the exchange's end.
    handlers_ = {};
    client_->Unregister(this);
  }

  // Starts the deadline for what begins now; closing the socket is what
  // makes the pending operation fail, and timed_out_ tells why.
  void Arm(std::chrono::milliseconds timeout, std::string message) {
    timed_out_ = false;
    timeout_message_ = std::move(message);
    timer_.expires_after(timeout);
    timer_.async_wait([self = shared_from_this(), gen = ++timer_generation_](beast::error_code ec) {
      if (ec || gen != self->timer_generation_) return;
      self->timed_out_ = true;
      self->CloseSocket();
    });
  }

  void Disarm() {
    ++timer_generation_;
    timer_.cancel();
  }

  void CloseSocket() {
    if (!socket_) return;
    beast::error_code ignored;
    socket_->shutdown(tcp::socket::shutdown_both, ignored);
    socket_->close(ignored);
  }

  UpstreamClient::Impl* const client_;  // outlives every exchange (see Impl::ioc)
  UpstreamRequest request_;
  UpstreamHandlers handlers_;
  asio::strand<asio::io_context::executor_type> strand_;
  asio::steady_timer timer_;
  uint64_t timer_generation_ = 0;
  bool timed_out_ = false;
  std::string timeout_message_;
  std::string peer_;  // "host:port", IPv6 in brackets; also the pool key
  std::string key_;
  tcp::endpoint endpoint_;
  std::string wire_;  // the serialized request, kept for the retry
  std::unique_ptr<tcp::socket> socket_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::response_parser<bhttp::buffer_body>> parser_;
  char body_buf_[16384];
  UpstreamResult result_;
  bool reused_ = false;
  bool retried_ = false;
  bool wrote_any_ = false;
  bool stopped_ = false;
  bool done_ = false;
};

std::unique_ptr<tcp::socket> UpstreamClient::Impl::TakeIdle(const std::string& key) {
  MutexLock lock(mu);
  auto it = idle.find(key);
  if (it == idle.end()) return nullptr;
  auto& list = it->second;
  auto now = Clock::now();
  std::unique_ptr<tcp::socket> found;
  // Most recently used first: it is the least likely to have been closed.
  while (!list.empty() && !found) {
    IdleConnection c = std::move(list.back());
    list.pop_back();
    if (now - c.since <= options.idle_keepalive && !LooksStale(*c.socket)) {
      found = std::move(c.socket);
    } else {
      beast::error_code ignored;
      c.socket->close(ignored);
    }
  }
  if (list.empty()) idle.erase(it);
  return found;
}

void UpstreamClient::Impl::PutIdle(const std::string& key, std::unique_ptr<tcp::socket> socket) {
  MutexLock lock(mu);
  auto& list = idle[key];
  // Expired ones go first, so a busy host's pool does not fill with them.
  auto now = Clock::now();
  std::erase_if(list, [&](IdleConnection& c) {
    if (now - c.since <= options.idle_keepalive) return false;
    beast::error_code ignored;
    c.socket->close(ignored);
    return true;
  });
  if (stopping || list.size() >= options.max_idle_per_host) {
    beast::error_code ignored;
    socket->close(ignored);
    if (list.empty()) idle.erase(key);
    return;
  }
  list.push_back({std::move(socket), now});
}

void UpstreamClient::Impl::Unregister(Exchange* e) {
  MutexLock lock(mu);
  active.erase(e);
  if (active.empty()) all_done.notify_all();
}

UpstreamClient::UpstreamClient(UpstreamOptions options)
    : impl_(std::make_shared<Impl>(std::move(options))) {
  int n = std::max(1, impl_->options.threads);
  for (int i = 0; i < n; ++i) {
    impl_->threads.emplace_back([impl = impl_.get()] {
      // A callback that throws must not take the client's thread with it.
      while (true) {
        try {
          impl->ioc.run();
          return;
        } catch (const std::exception& e) {
          spdlog::error("upstream: callback threw: {}", e.what());
        } catch (...) {
          spdlog::error("upstream: callback threw a non-exception");
        }
      }
    });
  }
}

UpstreamClient::~UpstreamClient() { Stop(); }

void UpstreamClient::Send(UpstreamRequest request, UpstreamHandlers handlers) {
  // The target goes into the request line as it is: nothing in it may end
  // that line or start another.
  const std::string& t = request.target;
  if (t.empty() || t[0] != '/' ||
      std::any_of(t.begin(), t.end(),
                  [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; })) {
    UpstreamResult r;
    r.status = InvalidArgument("request target must start with '/' and hold no spaces or control characters");
    r.not_sent = true;
    if (handlers.on_done) handlers.on_done(r);
    return;
  }
  std::shared_ptr<Exchange> ex;
  {
    MutexLock lock(impl_->mu);
    if (!impl_->stopping) {
      ex = std::make_shared<Exchange>(impl_.get(), std::move(request), std::move(handlers));
      impl_->active.emplace(ex.get(), ex);
    }
  }
  if (!ex) {
    UpstreamResult r;
    r.status = Unavailable("client stopping");
    r.not_sent = true;
    if (handlers.on_done) handlers.on_done(r);
    return;
  }
  ex->Post(&Exchange::Start);
}

void UpstreamClient::Stop() {
  MutexLock lifecycle(impl_->lifecycle_mu);
  if (impl_->stopped) return;
  impl_->stopped = true;
  std::vector<std::shared_ptr<Exchange>> live;
  {
    MutexLock lock(impl_->mu);
    impl_->stopping = true;
    for (auto& [key, list] : impl_->idle) {
      for (auto& c : list) {
        beast::error_code ignored;
        c.socket->close(ignored);
      }
    }
    impl_->idle.clear();
    for (auto& [ptr, weak] : impl_->active) {
      if (auto sp = weak.lock()) live.push_back(std::move(sp));
    }
  }
  for (auto& e : live) e->Post(&Exchange::Cancel);
  live.clear();
  {
    // Bounded, in case a callback blocks despite the contract.
    MutexLock lock(impl_->mu);
    const auto until = Clock::now() + std::chrono::seconds(5);
    while (!impl_->active.empty() &&
           lock.WaitUntil(impl_->all_done, until) == std::cv_status::no_timeout) {
    }
  }
  impl_->work.reset();
  impl_->ioc.stop();
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
}

size_t UpstreamClient::idle_connections() const {
  MutexLock lock(impl_->mu);
  size_t n = 0;
  for (const auto& [key, list] : impl_->idle) n += list.size();
  return n;
}

}  // namespace hf::http
