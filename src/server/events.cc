#include "server/events.h"

#include <algorithm>
#include <utility>

#include "core/time.h"

namespace hf::server {

using http::SseStream;

void EventHub::Subscribe(std::shared_ptr<SseStream> stream) {
  MutexLock lock(mu_);
  DropClosedLocked();
  streams_.push_back(std::move(stream));
}

void EventHub::Publish(const std::string& type, nlohmann::json data, int64_t now_ms) {
  data["time"] = FormatTimeMs(now_ms);
  const std::string line = data.dump();
  MutexLock lock(mu_);
  for (const auto& s : streams_) s->Send(type, line);
  DropClosedLocked();
  recent_.emplace_back(type, std::move(data));
  if (recent_.size() > kRecentEvents) recent_.pop_front();
}

nlohmann::json EventHub::Recent(size_t limit) const {
  MutexLock lock(mu_);
  nlohmann::json out = nlohmann::json::array();
  const size_t skip = recent_.size() > limit ? recent_.size() - limit : 0;
  for (size_t i = skip; i < recent_.size(); ++i) {
    out.push_back({{"type", recent_[i].first}, {"data", recent_[i].second}});
  }
  return out;
}

void EventHub::Ping() {
  MutexLock lock(mu_);
  for (const auto& s : streams_) s->Send("ping", "{}");
  DropClosedLocked();
}

size_t EventHub::subscribers() const {
  MutexLock lock(mu_);
  return streams_.size();
}

void EventHub::DropClosedLocked() {
  std::erase_if(streams_, [](const std::shared_ptr<SseStream>& s) { return s->closed(); });
}

}  // namespace hf::server
