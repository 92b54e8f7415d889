#include "http/server.h"

#include <spdlog/spdlog.h>
#include <algorithm>
#include <atomic>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <unordered_map>

#include "core/mutex.h"
#include "core/text.h"
#include "http/target.h"

namespace hf::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

namespace {

std::string FormatEvent(std::string_view event, std::string_view data) {
  std::string out;
  out.reserve(event.size() + data.size() + 32);
  // A newline inside the event name would let a caller forge extra fields.
  if (!event.empty() && event.find_first_of("\r\n") == std::string_view::npos) {
    out.append("event: ").append(event).append("\n");
  }
  size_t start = 0;
  while (true) {
    size_t nl = data.find('\n', start);
    std::string_view line = data.substr(start, nl == std::string_view::npos ? nl : nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out.append("data: ").append(line).append("\n");
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  out.append("\n");
  return out;
}

// Beast 1.74 has its own string_view type; this keeps std types at the edges.
std::string_view SV(beast::string_view s) { return {s.data(), s.size()}; }

const char* const kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

const char* const kBusyResponse =
    "HTTP/1.1 503 Service Unavailable\r\n"
    "Content-Type: application/json\r\n"
    "Connection: close\r\n"
    "Content-Length: 78\r\n"
    "\r\n"
    "{\"error\":{\"code\":\"unavailable\",\"message\":\"too many connections, retry later\"}}";

}  // namespace

std::optional<std::string_view> Request::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (IEquals(k, name)) return std::string_view(v);
  }
  return std::nullopt;
}

std::optional<std::string_view> Request::Query(std::string_view name) const {
  auto it = query.find(std::string(name));
  if (it == query.end()) return std::nullopt;
  return std::string_view(it->second);
}

std::string_view Request::Param(std::string_view name) const {
  auto it = path_params.find(std::string(name));
  return it == path_params.end() ? std::string_view() : std::string_view(it->second);
}

void Response::SetHeader(std::string name, std::string value) {
  std::erase_if(headers, [&](const auto& h) { return IEquals(h.first, name); });
  headers.emplace_back(std::move(name), std::move(value));
}

std::optional<std::string_view> Response::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (IEquals(k, name)) return std::string_view(v);
  }
  return std::nullopt;
}

Response JsonError(int status, std::string code, std::string message) {
  nlohmann::json body = {{"error", {{"code", std::move(code)}, {"message", std::move(message)}}}};
  return JsonResponse(status, body);
}

Response JsonResponse(int status, const nlohmann::json& body) {
  Response r;
  r.status = status;
  r.content_type = "application/json";
  // Replace invalid UTF-8 instead of throwing: an error message may quote
  // bytes the client sent.
  r.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

class Connection;

// A client's IP address as a hashable key: IPv4 is stored as its IPv4-mapped
// IPv6 form, so each address has exactly one key.
struct AddressKey {
  uint64_t hi = 0;
  uint64_t lo = 0;
  bool operator==(const AddressKey&) const = default;
};
struct AddressKeyHash {
  size_t operator()(const AddressKey& k) const { return std::hash<uint64_t>()(k.hi * 0x9E3779B97F4A7C15ull ^ k.lo); }
};

AddressKey KeyOf(const asio::ip::address& a) {
  AddressKey k;
  if (a.is_v4()) {
    k.lo = 0xFFFF00000000ull | a.to_v4().to_uint();
    return k;
  }
  const auto bytes = a.to_v6().to_bytes();
  for (int i = 0; i < 8; ++i) k.hi = k.hi << 8 | bytes[i];
  for (int i = 8; i < 16; ++i) k.lo = k.lo << 8 | bytes[i];
  return k;
}

// State shared by the server object, its connections and its streams.
class HttpServer::Impl {
 public:
  Impl(HttpServerOptions options, Handler handler)
      : options(std::move(options)),
        handler(std::move(handler)),
        work(asio::make_work_guard(ioc)),
        acceptor(asio::make_strand(ioc)) {}

  void Accept();
  // Counts a new connection from `address` in, making room by closing a
  // quiet one when a limit is reached; false (counted as refused) when
  // there is none to close.
  bool Admit(const AddressKey& address);
  void Register(Connection* c, const std::shared_ptr<Connection>& sp);
  void Unregister(Connection* c);
  // The pool that runs the handler of a request for `target`; null: the
  // connection's own I/O thread.
  asio::thread_pool* PoolFor(std::string_view target) const;
  // The handler's answer; what it throws becomes a 500.
  Response Handle(const Request& req) const;

  const HttpServerOptions options;
  const Handler handler;
  std::atomic<bool> stopping{false};
  std::atomic<uint16_t> port{0};

  Mutex mu;
  std::condition_variable all_closed;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> connections HF_GUARDED_BY(mu);
  int open_count HF_GUARDED_BY(mu) = 0;
  std::unordered_map<AddressKey, int, AddressKeyHash> open_by_address HF_GUARDED_BY(mu);
  int64_t evicted HF_GUARDED_BY(mu) = 0;
  int64_t refused HF_GUARDED_BY(mu) = 0;

  Mutex lifecycle_mu;
  bool started HF_GUARDED_BY(lifecycle_mu) = false;
  bool stopped HF_GUARDED_BY(lifecycle_mu) = false;
  std::vector<std::thread> threads;
  tcp::endpoint accept_peer;  // filled by the pending accept; acceptor strand only
  // options.handler_pools in order, then the handler_threads pool; made by
  // Start, joined by Stop.
  std::vector<std::unique_ptr<asio::thread_pool>> pools;

  // Declared last so it is destroyed first: queued handlers own connections,
  // whose destructors still touch the members above.
  asio::io_context ioc;
  asio::executor_work_guard<asio::io_context::executor_type> work;
  tcp::acceptor acceptor;
};

class SseStreamImpl;
class BodyStreamImpl;

int64_t SteadyNowNs() {
  return std::chrono::steady_clock::now().time_since_epoch().count();
}

// One accepted socket. Everything it does runs on its strand, so its members
// need no lock; the handler runs on that strand too, which is what lets Stop()
// finish in-flight requests simply by posting its shutdown behind them.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(HttpServer::Impl* server, tcp::socket socket, const asio::ip::address& peer)
      : server_(server),
        socket_(std::move(socket)),
        timer_(socket_.get_executor()),
        peer_(peer),
        key_(KeyOf(peer)) {}

  ~Connection() { server_->Unregister(this); }

  void Start() {
    asio::dispatch(socket_.get_executor(), [self = shared_from_this()] { self->ReadHeader(); });
  }

  // Posted by Stop(). Runs between handler invocations, never during one.
  void Shutdown() {
    stopping_ = true;
    if (phase_ == Phase::kReading || phase_ == Phase::kIdle || phase_ == Phase::kStreaming ||
        phase_ == Phase::kBodyStreaming || phase_ == Phase::kDeferred) {
      CloseSocket();
    }
  }

  // The client's IP address, as the connection-limit key.
  const AddressKey& key() const { return key_; }

  // Read from the acceptor under Impl::mu to pick a connection to close when
  // the server is full: since when (steady ns) it has been quiet, -1 while at
  // work; whether it ever sent a request; whether it is already being closed.
  std::atomic<int64_t> quiet_since_ns{SteadyNowNs()};
  std::atomic<bool> spoke{false};
  std::atomic<bool> evicting{false};

  // Closes the connection to make room for another if it is still quiet.
  void PostEvict() {
    asio::post(socket_.get_executor(), [self = shared_from_this()] {
      if (self->quiet_since_ns.load() >= 0 &&
          (self->phase_ == Phase::kIdle || self->phase_ == Phase::kReading)) {
        return self->CloseSocket();
      }
      self->evicting = false;  // it got to work meanwhile; it stays
    });
  }

  // Called by SseStreamImpl (from any thread) after queueing an event.
  void PostFlush() {
    asio::post(socket_.get_executor(), [self = shared_from_this()] { self->Flush(); });
  }
  void PostShutdown() {
    asio::post(socket_.get_executor(), [self = shared_from_this()] { self->Shutdown(); });
  }
  void PostClose() {
    asio::post(socket_.get_executor(), [self = shared_from_this()] { self->CloseSocket(); });
  }
  // Called by BodyStreamImpl (from any thread). The stream identity check
  // keeps a stray call from an earlier response off the next one.
  void PostFlushBody(const BodyStreamImpl* stream) {
    asio::post(socket_.get_executor(), [self = shared_from_this(), stream] {
      if (self->body_.get() == stream) self->FlushBody();
    });
  }
  void PostCloseBody(const BodyStreamImpl* stream) {
    asio::post(socket_.get_executor(), [self = shared_from_this(), stream] {
      if (self->body_.get() == stream) self->CloseSocket();
    });
  }

 private:
  enum class Phase {
    kIdle,
    kReading,
    kHandling,
    kDeferred,
    kWriting,
    kStreaming,
    kBodyStreaming,
    kClosed
  };

  const HttpServerOptions& opts() const { return server_->options; }

  bool ShouldStop() const { return stopping_ || server_->stopping.load(); }

  // Waits for the first byte of the next keep-alive request under the idle
  // timeout; the header timeout starts only once the client shows intent.
  void WaitIdle() {
    if (ShouldStop()) return CloseSocket();
    phase_ = Phase::kIdle;
    quiet_since_ns = SteadyNowNs();
    Arm(opts().idle_timeout);
    socket_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              if (ec) return self->CloseSocket();
                              self->buffer_.commit(n);
                              self->ReadHeader();
                            });
  }

  void ReadHeader() {
    if (ShouldStop()) return CloseSocket();
    phase_ = Phase::kReading;
    parser_.emplace();
    parser_->header_limit(
        static_cast<uint32_t>(std::min<size_t>(opts().max_header_bytes, UINT32_MAX)));
    // Beast refuses a Content-Length over the body limit as soon as the
    // header is parsed, before the path is known: the largest limit until
    // then, the path's own in OnHeader.
    body_limit_ = opts().max_body_bytes;
    size_t widest = body_limit_;
    for (const auto& [prefix, limit] : opts().body_limits) widest = std::max(widest, limit);
    parser_->body_limit(widest);
    Arm(opts().header_read_timeout);
    bhttp::async_read_header(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    quiet_since_ns = -1;  // a whole header is in: at work until answered
    spoke = true;
    body_limit_ = BodyLimitFor(SV(parser_->get().target()));
    parser_->body_limit(body_limit_);
    // Beast checks this too, but checking here makes the 413-before-reading
    // promise explicit instead of an accident of the parser's internals.
    if (auto len = parser_->content_length(); len && *len > body_limit_) {
      return WriteError(413, "payload_too_large",
                        "request body of " + std::to_string(*len) + " bytes exceeds the limit of " +
                            std::to_string(body_limit_));
    }
    if (parser_->is_done()) return OnRequest();
    // curl and others wait (a second, for curl) for this before sending a
    // body; answering it is what keeps uploads from stalling.
    if (IEquals(SV(parser_->get()[bhttp::field::expect]), "100-continue")) {
      Arm(opts().write_timeout);
      return asio::async_write(socket_, asio::buffer(kContinue, std::strlen(kContinue)),
                               [self = shared_from_this()](beast::error_code ec, size_t) {
                                 if (ec) return self->CloseSocket();
                                 self->ReadBody();
                               });
    }
    ReadBody();
  }

  size_t BodyLimitFor(std::string_view target) const {
    for (const auto& [prefix, limit] : opts().body_limits) {
      if (target.starts_with(prefix)) return limit;
    }
    return opts().max_body_bytes;
  }

  void ReadBody() {
    Arm(opts().body_read_timeout);
    bhttp::async_read(socket_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->OnReadError(ec);
                       self->OnRequest();
                     });
  }

  void OnReadError(beast::error_code ec) {
    if (timed_out_) {
      return WriteError(408, "timeout", "request was not received in time");
    }
    if (ec == bhttp::error::header_limit) {
      return WriteError(
          431, "header_too_large",
          "request header exceeds " + std::to_string(opts().max_header_bytes) + " bytes");
    }
    if (ec == bhttp::error::body_limit) {
      // Beast stops in the header's fields when its Content-Length is over
      // every limit; the start line, with the target, is in by then, so the
      // message names the path's own limit.
      const std::string_view target = SV(parser_->get().target());
      const size_t limit = target.empty() ? body_limit_ : BodyLimitFor(target);
      return WriteError(413, "payload_too_large",
                        "request body exceeds " + std::to_string(limit) + " bytes");
    }
    // The peer went away (or we closed it): nobody to answer.
    if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
        ec == asio::error::operation_aborted ||
        ec.category() == asio::error::get_system_category() ||
        ec.category() == asio::error::get_misc_category()) {
      return CloseSocket();
    }
    // Everything else the parser reports is malformed HTTP.
    WriteError(400, "bad_request", "malformed HTTP request: " + ec.message());
  }

  void OnRequest() {
    phase_ = Phase::kHandling;
    auto& msg = parser_->get();
    Request req;
    req.method = std::string(SV(msg.method_string()));
    if (auto err = ParseRequestTarget(SV(msg.target()), req)) return WriteError(400, "bad_request", *err);
    for (const auto& field : msg) {
      req.headers.emplace_back(std::string(SV(field.name_string())),
                               std::string(SV(field.value())));
    }
    req.body = std::move(msg.body());
    // Formatted here, on the connection's strand, not by the acceptor.
    if (address_.empty()) address_ = peer_.to_string();
    req.remote_address = address_;
    asio::thread_pool* pool = server_->PoolFor(SV(msg.target()));
    bool keep_alive = msg.keep_alive();
    int version = msg.version();
    parser_.reset();

    if (pool == nullptr || (opts().runs_inline && opts().runs_inline(req))) {
      return Answer(server_->Handle(req), keep_alive, version);
    }
    // No timer runs while a handler does, wherever it runs; the answer comes
    // back to this connection's strand.
    Disarm();
    // The I/O threads keep running until the answer is back, even through
    // Stop (which lets them end once no work is left).
    asio::post(*pool, [self = shared_from_this(), req = std::move(req), keep_alive, version,
                       work = asio::make_work_guard(socket_.get_executor())] {
      Response res = self->server_->Handle(req);
      asio::post(self->socket_.get_executor(),
                 [self, res = std::move(res), keep_alive, version]() mutable {
                   if (self->phase_ != Phase::kHandling) return;
                   self->Answer(std::move(res), keep_alive, version);
                   // A Stop that came while the handler ran found nothing to
                   // end then: an event stream just opened ends now.
                   if (self->ShouldStop()) self->Shutdown();
                 });
    });
  }

  // What the handler answered: now, or later (deferred).
  void Answer(Response res, bool keep_alive, int version) {
    if (!res.stream && !res.body_stream && res.defer) {
      return StartDeferred(std::move(res.defer), keep_alive, version);
    }
    Respond(std::move(res), keep_alive, version);
  }

  // Sends a final answer, whichever kind it is (a deferred one included).
  void Respond(Response res, bool keep_alive, int version) {
    if (res.stream) return StartStream(std::move(res));
    if (res.body_stream) return StartBodyStream(std::move(res), keep_alive, version);
    Write(std::move(res), keep_alive && !ShouldStop(), version);
  }

  // The connection keeps itself alive (hold_) until the answer is written or
  // the deferred timeout closes it; the Reply only holds a weak pointer, so a
  // Reply kept past the connection's end is harmless.
  void StartDeferred(std::function<void(Reply)> defer, bool keep_alive, int version) {
    phase_ = Phase::kDeferred;
    hold_ = shared_from_this();
    Arm(opts().deferred_timeout);
    auto answered = std::make_shared<std::atomic<bool>>(false);
    Reply reply = [weak = weak_from_this(), answered, keep_alive, version](Response res) {
      if (answered->exchange(true)) return;
      auto self = weak.lock();
      if (!self) return;
      asio::post(self->socket_.get_executor(),
                 [self, res = std::move(res), keep_alive, version]() mutable {
                   if (self->phase_ != Phase::kDeferred) return;
                   self->hold_.reset();
                   self->Respond(std::move(res), keep_alive, version);
                 });
    };
    try {
      defer(reply);
    } catch (const std::exception& e) {
      spdlog::error("http: deferred handler threw: {}", e.what());
      reply(JsonError(500, "internal", "internal error while handling the request"));
    } catch (...) {
      reply(JsonError(500, "internal", "internal error while handling the request"));
    }
  }

  void WriteError(int status, std::string code, std::string message) {
    parser_.reset();
    Write(JsonError(status, std::move(code), std::move(message)), /*keep_alive=*/false, 11);
  }

  void Write(Response res, bool keep_alive, int version) {
    phase_ = Phase::kWriting;
    auto msg = std::make_shared<bhttp::response<bhttp::string_body>>();
    msg->version(version);
    msg->result(static_cast<unsigned>(res.status));
    for (auto& [k, v] : res.headers) msg->set(k, v);
    if (!res.content_type.empty()) msg->set(bhttp::field::content_type, res.content_type);
    msg->body() = std::move(res.body);
    msg->keep_alive(keep_alive);
    msg->prepare_payload();
    Arm(opts().write_timeout);
    bhttp::async_write(socket_, *msg,
                      [self = shared_from_this(), msg](beast::error_code ec, size_t) {
                        if (ec || !msg->keep_alive() || self->ShouldStop()) {
                          return self->CloseSocket();
                        }
                        // A pipelined request may already sit in the buffer.
                        if (self->buffer_.size() > 0) return self->ReadHeader();
                        self->WaitIdle();
                      });
  }

  void StartStream(Response res);
  // Writes a stream's head, then calls `then` (Flush or FlushBody). No
  // timeouts while a stream lives: a client that stops reading is cut off
  // by the backlog limit instead.
  void WriteStreamHead(std::string head, void (Connection::*then)());
  // Hands the open stream to the handler's producer; a producer that throws
  // ends the connection.
  template <typename S>
  void RunProducer(const char* what, const std::function<void(std::shared_ptr<S>)>& producer,
                   std::shared_ptr<S> stream);
  void DiscardInput();
  void Flush();
  void StartBodyStream(Response res, bool keep_alive, int version);
  void MonitorInput();
  void FlushBody();
  void EndBodyStream();

  // Starts the deadline for the operation about to begin; a later Arm or
  // Disarm supersedes it.
  //
  // The timer is not reset on every Arm: a wait already pending that ends
  // no later than the new deadline is kept, and when it fires early its
  // handler waits again for the rest. A keep-alive connection arms three times a
  // request (header, write, idle), each deadline later than the one
  // pending, so its timer is reset about once per header_read_timeout
  // instead of three times a request; each reset cancelled a wait, whose
  // aborted handler was queued, often woke another I/O thread, and could
  // reprogram the reactor's timerfd.
  void Arm(std::chrono::milliseconds timeout) {
    timed_out_ = false;
    deadline_ = std::chrono::steady_clock::now() + timeout;
    if (timer_pending_ && timer_expiry_ <= deadline_) return;
    WaitForDeadline();
  }

  // No deadline until the next Arm. The pending wait, if any, is left to
  // end on its own (it then finds no deadline); CloseSocket cancels it.
  void Disarm() { deadline_ = kNoDeadline; }

  // (Re)starts the timer for deadline_. Setting the expiry cancels a wait
  // still pending; the generation check drops its handler, and an expiry
  // that was already queued when the timer was reset.
  void WaitForDeadline() {
    timer_expiry_ = deadline_;
    timer_pending_ = true;
    timer_.expires_at(deadline_);
    timer_.async_wait([self = shared_from_this(), gen = ++timer_generation_](beast::error_code ec) {
      if (gen != self->timer_generation_) return;
      self->timer_pending_ = false;
      if (ec || self->deadline_ == kNoDeadline) return;
      if (std::chrono::steady_clock::now() < self->deadline_) return self->WaitForDeadline();
      self->timed_out_ = true;
      if (self->phase_ == Phase::kDeferred) return self->CloseSocket();
      beast::error_code ignored;
      self->socket_.cancel(ignored);
    });
  }

  void CloseSocket() {
    if (phase_ == Phase::kClosed) return;
    phase_ = Phase::kClosed;
    // Cancelled, not left to expire: the pending wait holds the connection.
    Disarm();
    ++timer_generation_;
    timer_pending_ = false;
    timer_.cancel();
    hold_.reset();
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    MarkStreamClosed();
  }

  void MarkStreamClosed();

  HttpServer::Impl* const server_;  // outlives every connection (see Impl::ioc)
  tcp::socket socket_;
  // Beast's tcp_stream closes the socket when its timer fires, which leaves no
  // way to answer 408; a timer of our own cancels the read instead.
  asio::steady_timer timer_;
  const asio::ip::address peer_;
  const AddressKey key_;
  std::string address_;  // peer_ as text, formatted at the first request
  size_t body_limit_ = 0;  // of the request being read
  static constexpr std::chrono::steady_clock::time_point kNoDeadline =
      std::chrono::steady_clock::time_point::max();
  std::chrono::steady_clock::time_point deadline_ = kNoDeadline;  // of the current operation
  std::chrono::steady_clock::time_point timer_expiry_;  // of the pending wait
  bool timer_pending_ = false;  // a wait of generation timer_generation_ is pending
  uint64_t timer_generation_ = 0;
  bool timed_out_ = false;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  Phase phase_ = Phase::kReading;
  bool stopping_ = false;
  std::shared_ptr<SseStreamImpl> sse_;
  std::shared_ptr<BodyStreamImpl> body_;  // the body stream being sent, if any
  bool body_keep_alive_ = false;          // serve another request after it
  bool monitor_pending_ = false;          // MonitorInput's read is outstanding
  std::shared_ptr<Connection> hold_;  // set while a deferred answer is awaited
  std::string stream_writing_;  // the event (or body chunks) being written now
  bool stream_write_pending_ = false;
  char discard_[512];
};

class SseStreamImpl : public SseStream {
 public:
  SseStreamImpl(std::weak_ptr<Connection> conn, size_t max_backlog)
      : conn_(std::move(conn)), max_backlog_(max_backlog) {}

  bool Send(std::string_view event, std::string_view data) override {
    std::string framed = FormatEvent(event, data);
    bool post = false;
    {
      MutexLock lock(mu_);
      if (closed_) return false;
      if (backlog_ + framed.size() > max_backlog_) {
        closed_ = true;
        queue_.clear();
      } else {
        backlog_ += framed.size();
        queue_.append(framed);
        // One flush at a time is posted: it writes whatever queued before
        // it runs, so a burst of events leaves in one write.
        post = !flush_posted_;
        flush_posted_ = true;
      }
    }
    auto conn = conn_.lock();
    if (!conn) {
      MarkClosed();
      return false;
    }
    if (closed()) {
      conn->PostClose();
      return false;
    }
    if (post) conn->PostFlush();
    return true;
  }

  void Close() override {
    MarkClosed();
    if (auto conn = conn_.lock()) conn->PostClose();
  }

  bool closed() const override {
    MutexLock lock(mu_);
    return closed_;
  }

  void MarkClosed() {
    MutexLock lock(mu_);
    closed_ = true;
    queue_.clear();
  }

  // Moves every queued event, in order, into `out`; false when none is
  // waiting. Called by the connection's flush (on its strand): a Send after
  // it posts the next one.
  bool Pop(std::string& out) {
    MutexLock lock(mu_);
    flush_posted_ = false;
    if (closed_ || queue_.empty()) return false;
    out.swap(queue_);
    queue_.clear();
    return true;
  }

  void Written(size_t n) {
    MutexLock lock(mu_);
    backlog_ -= std::min(backlog_, n);
  }

 private:
  const std::weak_ptr<Connection> conn_;
  const size_t max_backlog_;
  mutable Mutex mu_;
  bool closed_ HF_GUARDED_BY(mu_) = false;
  std::string queue_ HF_GUARDED_BY(mu_);          // framed events not yet written
  bool flush_posted_ HF_GUARDED_BY(mu_) = false;  // a flush that will take queue_
  size_t backlog_ HF_GUARDED_BY(mu_) = 0;  // bytes queued or being written
};

void Connection::StartStream(Response res) {
  phase_ = Phase::kStreaming;
  // Close-delimited body: simplest framing every EventSource client accepts,
  // and the connection is dedicated to the stream anyway.
  std::string head = "HTTP/1.1 " + std::to_string(res.status) + " " +
                     std::string(SV(bhttp::obsolete_reason(static_cast<bhttp::status>(res.status)))) +
                     "\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                     "Connection: close\r\n";
  for (const auto& [k, v] : res.headers) {
    if (IEquals(k, "Content-Type") || IEquals(k, "Content-Length") || IEquals(k, "Connection") ||
        k.find_first_of("\r\n:") != std::string::npos ||
        v.find_first_of("\r\n") != std::string::npos) {
      continue;
    }
    head.append(k).append(": ").append(v).append("\r\n");
  }
  head.append("\r\n");
  sse_ = std::make_shared<SseStreamImpl>(weak_from_this(), opts().max_stream_backlog_bytes);
  WriteStreamHead(std::move(head), &Connection::Flush);
  DiscardInput();
  RunProducer<SseStream>("stream", res.stream, sse_);
}

void Connection::WriteStreamHead(std::string head, void (Connection::*then)()) {
  Disarm();
  stream_writing_ = std::move(head);
  stream_write_pending_ = true;
  asio::async_write(socket_, asio::buffer(stream_writing_),
                    [self = shared_from_this(), then](beast::error_code ec, size_t) {
                      self->stream_write_pending_ = false;
                      if (ec) return self->CloseSocket();
                      ((*self).*then)();
                    });
}

template <typename S>
void Connection::RunProducer(const char* what, const std::function<void(std::shared_ptr<S>)>& producer,
                             std::shared_ptr<S> stream) {
  try {
    producer(std::move(stream));
  } catch (const std::exception& e) {
    spdlog::error("http: {} producer threw: {}", what, e.what());
    CloseSocket();
  } catch (...) {
    CloseSocket();
  }
}

// Reading is how a vanished client is noticed: EOF or a reset ends the
// stream. Whatever a client sends on an event stream is ignored.
void Connection::DiscardInput() {
  socket_.async_read_some(asio::buffer(discard_),
                          [self = shared_from_this()](beast::error_code ec, size_t) {
                            if (ec) return self->CloseSocket();
                            if (self->phase_ == Phase::kStreaming) self->DiscardInput();
                          });
}

void Connection::Flush() {
  if (phase_ != Phase::kStreaming || stream_write_pending_ || !sse_) return;
  if (!sse_->Pop(stream_writing_)) {
    if (sse_->closed()) CloseSocket();
    return;
  }
  stream_write_pending_ = true;
  asio::async_write(socket_, asio::buffer(stream_writing_),
                    [self = shared_from_this()](beast::error_code ec, size_t n) {
                      self->stream_write_pending_ = false;
                      self->sse_->Written(n);
                      if (ec) return self->CloseSocket();
                      self->Flush();
                    });
}

class BodyStreamImpl : public BodyStream {
 public:
  // `chunked` is false for an HTTP/1.0 client, whose body ends with the
  // connection instead.
  BodyStreamImpl(std::weak_ptr<Connection> conn, size_t max_backlog, bool chunked)
      : conn_(std::move(conn)), max_backlog_(max_backlog), chunked_(chunked) {}

  bool Write(std::string_view bytes) override {
    bool cut_off = false;
    {
      MutexLock lock(mu_);
      if (state_ != State::kOpen) return false;
      if (bytes.empty()) return true;
      std::string framed;
      if (chunked_) {
        char size_line[24];
        int n = std::snprintf(size_line, sizeof size_line, "%zx\r\n", bytes.size());
        framed.reserve(bytes.size() + n + 2);
        framed.append(size_line, n).append(bytes).append("\r\n");
      } else {
        framed.assign(bytes);
      }
      if (backlog_ + framed.size() > max_backlog_) {
        state_ = State::kClosed;
        queue_.clear();
        cut_off = true;
      } else {
        backlog_ += framed.size();
        queue_.push_back(std::move(framed));
      }
    }
    auto conn = conn_.lock();
    if (!conn) {
      MarkClosed();
      return false;
    }
    if (cut_off) {
      conn->PostCloseBody(this);
      return false;
    }
    conn->PostFlushBody(this);
    return true;
  }

  void Finish() override {
    {
      MutexLock lock(mu_);
      if (state_ != State::kOpen) return;
      state_ = State::kFinishing;
      if (chunked_) queue_.emplace_back("0\r\n\r\n");
    }
    if (auto conn = conn_.lock()) conn->PostFlushBody(this);
  }

  void Abort() override {
    {
      MutexLock lock(mu_);
      if (state_ != State::kOpen) return;
      state_ = State::kClosed;
      queue_.clear();
    }
    if (auto conn = conn_.lock()) conn->PostCloseBody(this);
  }

  bool closed() const override {
    MutexLock lock(mu_);
    return state_ != State::kOpen;
  }

  void MarkClosed() {
    MutexLock lock(mu_);
    state_ = State::kClosed;
    queue_.clear();
  }

  enum class Next { kWrite, kWait, kFinished, kClosed };
  // Moves everything queued into `out`, so that chunks produced while the
  // previous write was in flight go out in one write.
  Next Pop(std::string& out) {
    MutexLock lock(mu_);
    if (state_ == State::kClosed) return Next::kClosed;
    if (queue_.empty()) return state_ == State::kFinishing ? Next::kFinished : Next::kWait;
    out.clear();
    for (auto& q : queue_) out.append(q);
    queue_.clear();
    return Next::kWrite;
  }

  void Written(size_t n) {
    MutexLock lock(mu_);
    backlog_ -= std::min(backlog_, n);
  }

 private:
  // kFinishing: Finish was called; the queue may still hold the terminator.
  enum class State { kOpen, kFinishing, kClosed };
  const std::weak_ptr<Connection> conn_;
  const size_t max_backlog_;
  const bool chunked_;
  mutable Mutex mu_;
  State state_ HF_GUARDED_BY(mu_) = State::kOpen;
  std::deque<std::string> queue_ HF_GUARDED_BY(mu_);
  size_t backlog_ HF_GUARDED_BY(mu_) = 0;  // bytes queued or being written
};

void Connection::StartBodyStream(Response res, bool keep_alive, int version) {
  phase_ = Phase::kBodyStreaming;
  hold_.reset();
  bool chunked = version >= 11;
  body_keep_alive_ = chunked && keep_alive && !ShouldStop();
  std::string head = "HTTP/1.1 " + std::to_string(res.status) + " " +
                     std::string(SV(bhttp::obsolete_reason(static_cast<bhttp::status>(res.status)))) +
                     "\r\n";
  bool have_type = !res.content_type.empty();
  if (have_type) head.append("Content-Type: ").append(res.content_type).append("\r\n");
  for (const auto& [k, v] : res.headers) {
    if ((have_type && IEquals(k, "Content-Type")) || IEquals(k, "Content-Length") ||
        IEquals(k, "Transfer-Encoding") || IEquals(k, "Connection") || k.empty() ||
        k.find_first_of("\r\n: ") != std::string::npos ||
        v.find_first_of("\r\n") != std::string::npos) {
      continue;
    }
    head.append(k).append(": ").append(v).append("\r\n");
  }
  if (chunked) head.append("Transfer-Encoding: chunked\r\n");
  head.append(body_keep_alive_ ? "Connection: keep-alive\r\n" : "Connection: close\r\n");
  head.append("\r\n");
  body_ = std::make_shared<BodyStreamImpl>(weak_from_this(), opts().max_stream_backlog_bytes,
                                           chunked);
  WriteStreamHead(std::move(head), &Connection::FlushBody);
  if (!monitor_pending_) MonitorInput();
  RunProducer<BodyStream>("body stream", res.body_stream, body_);
}

// Reading while the body streams is how a vanished client is noticed. What
// arrives is kept in buffer_ (a pipelined next request, read once the body
// ends); after the first bytes of it, reading pauses and only write errors
// notice a client that left.
void Connection::MonitorInput() {
  monitor_pending_ = true;
  socket_.async_read_some(buffer_.prepare(4096),
                          [self = shared_from_this()](beast::error_code ec, size_t n) {
                            self->monitor_pending_ = false;
                            if (ec) return self->CloseSocket();
                            self->buffer_.commit(n);
                            if (self->phase_ == Phase::kBodyStreaming) {
                              // Once a pipelined request has begun to arrive
                              // it waits in buffer_ for EndBodyStream; a read
                              // still pending then would wait for bytes that
                              // never come.
                              if (self->buffer_.size() == 0) self->MonitorInput();
                            } else if (self->phase_ == Phase::kIdle) {
                              // The stream ended meanwhile: a next request began.
                              self->ReadHeader();
                            }
                          });
}

void Connection::FlushBody() {
  if (phase_ != Phase::kBodyStreaming || stream_write_pending_ || !body_) return;
  switch (body_->Pop(stream_writing_)) {
    case BodyStreamImpl::Next::kWait:
      return;
    case BodyStreamImpl::Next::kClosed:
      return CloseSocket();
    case BodyStreamImpl::Next::kFinished:
      return EndBodyStream();
    case BodyStreamImpl::Next::kWrite:
      break;
  }
  stream_write_pending_ = true;
  asio::async_write(socket_, asio::buffer(stream_writing_),
                    [self = shared_from_this()](beast::error_code ec, size_t n) {
                      self->stream_write_pending_ = false;
                      if (self->body_) self->body_->Written(n);
                      if (ec) return self->CloseSocket();
                      self->FlushBody();
                    });
}

// The terminating chunk is out: the response is complete.
void Connection::EndBodyStream() {
  body_.reset();
  if (!body_keep_alive_ || ShouldStop()) return CloseSocket();
  if (monitor_pending_) {
    // MonitorInput's read becomes the wait for the next request; the idle
    // timer cancels it (and so closes) when none comes.
    phase_ = Phase::kIdle;
    Arm(opts().idle_timeout);
    return;
  }
  if (buffer_.size() > 0) return ReadHeader();
  WaitIdle();
}

void Connection::MarkStreamClosed() {
  if (sse_) sse_->MarkClosed();
  if (body_) body_->MarkClosed();
}

void HttpServer::Impl::Register(Connection* c, const std::shared_ptr<Connection>& sp) {
  MutexLock lock(mu);
  connections.emplace(c, sp);
}

void HttpServer::Impl::Unregister(Connection* c) {
  MutexLock lock(mu);
  connections.erase(c);
  --open_count;
  if (auto it = open_by_address.find(c->key()); it != open_by_address.end() && --it->second <= 0) {
    open_by_address.erase(it);
  }
  if (open_count == 0) all_closed.notify_all();
}

bool HttpServer::Impl::Admit(const AddressKey& address) {
  std::shared_ptr<Connection> victim;
  // Candidates passed over are let go after mu is released: if one held the
  // last reference (its connection closed meanwhile), dropping it runs
  // ~Connection, which takes mu in Unregister, and would deadlock here.
  std::vector<std::shared_ptr<Connection>> passed_over;
  {
    MutexLock lock(mu);
    auto mine = open_by_address.find(address);
    const int from_address = mine == open_by_address.end() ? 0 : mine->second;
    const bool over_address =
        options.max_connections_per_address > 0 && from_address >= options.max_connections_per_address;
    const bool over_total = open_count >= options.max_connections;
    if (over_address || over_total) {
      // Evictions under way let the count pass the limit by their number,
      // briefly; this bounds it should some of them find their connection
      // at work after all.
      const int hard_cap = options.max_connections + options.max_connections / 8 + 16;
      Connection* best = nullptr;
      int best_count = 0;
      bool best_spoke = true;
      int64_t best_since = 0;
      if (open_count < hard_cap) {
        for (const auto& [c, weak] : connections) {
          if (over_address && !(c->key() == address)) continue;
          const int64_t since = c->quiet_since_ns.load();
          if (since < 0 || c->evicting.load()) continue;
          const bool spoke = c->spoke.load();
          const int count = over_address ? from_address : open_by_address[c->key()];
          const bool better = best == nullptr || count > best_count ||
                              (count == best_count && (best_spoke && !spoke)) ||
                              (count == best_count && spoke == best_spoke && since < best_since);
          if (!better) continue;
          if (std::shared_ptr<Connection> sp = weak.lock()) {
            best = c;
            best_count = count;
            best_spoke = spoke;
            best_since = since;
            if (victim != nullptr) passed_over.push_back(std::move(victim));
            victim = std::move(sp);
          }
        }
      }
      if (victim == nullptr) {
        ++refused;
        return false;
      }
      victim->evicting = true;
      ++evicted;
    }
    ++open_count;
    ++open_by_address[address];
  }
  if (victim != nullptr) victim->PostEvict();
  return true;
}

void HttpServer::Impl::Accept() {
  // The peer's address comes from accept() itself: no getpeername() per
  // connection on the acceptor's strand, which every connection waits on.
  acceptor.async_accept(
      asio::make_strand(ioc), accept_peer, [self = this](beast::error_code ec, tcp::socket sock) {
        if (self->stopping.load()) {
          beast::error_code ignored;
          sock.close(ignored);
          return;
        }
        if (ec) {
          // Out of descriptors and similar are transient; keep accepting.
          if (ec != asio::error::operation_aborted) self->Accept();
          return;
        }
        // Streamed answers go out in several writes (header, then chunks);
        // with Nagle on, each later write would wait for the client's
        // delayed ACK of the previous one (about 40 ms on Linux).
        beast::error_code nodelay_ec;
        sock.set_option(tcp::no_delay(true), nodelay_ec);
        const asio::ip::address peer = self->accept_peer.address();
        if (!self->Admit(KeyOf(peer))) {
          auto s = std::make_shared<tcp::socket>(std::move(sock));
          asio::async_write(*s, asio::buffer(kBusyResponse, std::strlen(kBusyResponse)),
                            [s](beast::error_code, size_t) {
                              beast::error_code ignored;
                              s->shutdown(tcp::socket::shutdown_both, ignored);
                              s->close(ignored);
                            });
        } else {
          auto conn = std::make_shared<Connection>(self, std::move(sock), peer);
          self->Register(conn.get(), conn);
          conn->Start();
        }
        self->Accept();
      });
}

asio::thread_pool* HttpServer::Impl::PoolFor(std::string_view target) const {
  for (size_t i = 0; i < options.handler_pools.size(); ++i) {
    for (const std::string& prefix : options.handler_pools[i].prefixes) {
      if (target.starts_with(prefix)) return pools[i].get();
    }
  }
  return options.handler_threads > 0 ? pools.back().get() : nullptr;
}

Response HttpServer::Impl::Handle(const Request& req) const {
  try {
    return handler(req);
  } catch (const std::exception& e) {
    // The detail goes to the log, not to the client: it may name internals.
    spdlog::error("http: handler for {} {} threw: {}", req.method, req.path, e.what());
  } catch (...) {
    spdlog::error("http: handler for {} {} threw a non-exception", req.method, req.path);
  }
  return JsonError(500, "internal", "internal error while handling the request");
}

HttpServer::HttpServer(HttpServerOptions options, Handler handler)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler))) {}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Start() {
  MutexLock lock(impl_->lifecycle_mu);
  if (impl_->started) return FailedPrecondition("HttpServer::Start called twice");
  const auto& o = impl_->options;
  if (o.worker_threads < 1) return InvalidArgument("worker_threads must be at least 1");
  if (o.handler_threads < 0) return InvalidArgument("handler_threads must not be negative");
  for (const HandlerPool& p : o.handler_pools) {
    if (p.threads < 1) return InvalidArgument("a handler pool needs at least 1 thread");
  }
  if (o.max_connections < 1) return InvalidArgument("max_connections must be at least 1");
  if (o.max_connections_per_address < 0) {
    return InvalidArgument("max_connections_per_address must not be negative");
  }
  beast::error_code ec;
  auto addr = asio::ip::make_address(o.address, ec);
  if (ec) return InvalidArgument("listen address \"" + o.address + "\" is not an IP address");
  tcp::endpoint ep(addr, o.port);
  auto& acc = impl_->acceptor;
  auto fail = [&](const char* what) {
    beast::error_code ignored;
    acc.close(ignored);
    return Unavailable(std::string("cannot ") + what + " " + o.address + ":" +
                       std::to_string(o.port) + ": " + ec.message());
  };
  if (acc.open(ep.protocol(), ec)) return fail("open socket for");
  if (acc.set_option(asio::socket_base::reuse_address(true), ec)) return fail("configure");
  if (acc.bind(ep, ec)) return fail("bind");
  if (acc.listen(asio::socket_base::max_listen_connections, ec)) return fail("listen on");
  impl_->port = acc.local_endpoint(ec).port();
  impl_->started = true;
  for (const HandlerPool& p : o.handler_pools) {
    impl_->pools.push_back(std::make_unique<asio::thread_pool>(static_cast<size_t>(p.threads)));
  }
  if (o.handler_threads > 0) {
    impl_->pools.push_back(std::make_unique<asio::thread_pool>(static_cast<size_t>(o.handler_threads)));
  }
  impl_->Accept();
  for (int i = 0; i < o.worker_threads; ++i) {
    impl_->threads.emplace_back([impl = impl_.get()] { impl->ioc.run(); });
  }
  return Status::Ok();
}

void HttpServer::Stop() {
  MutexLock lock(impl_->lifecycle_mu);
  if (!impl_->started || impl_->stopped) return;
  impl_->stopped = true;
  impl_->stopping = true;
  asio::post(impl_->acceptor.get_executor(), [impl = impl_.get()] {
    beast::error_code ignored;
    impl->acceptor.close(ignored);
  });
  std::vector<std::shared_ptr<Connection>> live;
  {
    MutexLock l(impl_->mu);
    for (auto& [ptr, weak] : impl_->connections) {
      if (auto sp = weak.lock()) live.push_back(std::move(sp));
    }
  }
  for (auto& c : live) c->PostShutdown();
  live.clear();
  impl_->work.reset();
  {
    MutexLock l(impl_->mu);
    const auto until = std::chrono::steady_clock::now() + impl_->options.shutdown_grace;
    while (impl_->open_count > 0 &&
           l.WaitUntil(impl_->all_closed, until) == std::cv_status::no_timeout) {
    }
  }
  impl_->ioc.stop();
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
  // Handlers still running finish; their answers have no I/O thread left.
  for (auto& pool : impl_->pools) pool->join();
  impl_->pools.clear();
}

uint16_t HttpServer::bound_port() const { return impl_->port.load(); }

HttpServer::Stats HttpServer::stats() const {
  MutexLock lock(impl_->mu);
  return {impl_->open_count, impl_->evicted, impl_->refused};
}

}  // namespace hf::http
