// EventHub: fans state changes out to the clients of GET /api/v1/events
// (server-sent events), for the UI's live views.
//
// An event has a type ("task", "node", "plugin", "config") and a JSON object;
// the hub stamps it with "time" (RFC 3339, UTC, milliseconds). Delivery is
// best effort and in order per client: a client that reads too slowly is cut
// off by the transport (HttpServerOptions::max_stream_backlog_bytes) and
// reconnects, then re-reads what it shows through the REST API. The store,
// not the stream, is the source of truth.
//
// Threading: every method may be called from any thread.
#ifndef HF_SERVER_EVENTS_H_
#define HF_SERVER_EVENTS_H_

#include <cstdint>
#include <deque>
#include <memory>
#include "core/mutex.h"
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/event_sink.h"
#include "http/server.h"

namespace hf::server {

class EventHub : public EventSink {
 public:
  // Adds a client; closed streams are dropped on the next Publish or Ping.
  void Subscribe(std::shared_ptr<http::SseStream> stream);
  // Sends `data` (with "time" added) as event `type` to every client.
  void Publish(const std::string& type, nlohmann::json data, int64_t now_ms) override;
  // Sends a keep-alive comment so proxies and clients see the stream alive.
  void Ping();
  size_t subscribers() const;
  // The last `limit` events published (at most kRecentEvents are kept),
  // oldest first, as {"type", "data"}: what a page opened now has missed.
  nlohmann::json Recent(size_t limit) const;

  static constexpr size_t kRecentEvents = 200;

 private:
  void DropClosedLocked() HF_REQUIRES(mu_);

  mutable Mutex mu_;
  std::vector<std::shared_ptr<http::SseStream>> streams_ HF_GUARDED_BY(mu_);
  std::deque<std::pair<std::string, nlohmann::json>> recent_ HF_GUARDED_BY(mu_);  // type, data
};

}  // namespace hf::server

#endif  // HF_SERVER_EVENTS_H_
