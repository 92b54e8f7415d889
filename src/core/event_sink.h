// EventSink: where the scheduler and the inference service announce state
// changes ("task", "node", "plugin", "config", "inference" events). The
// server's EventHub (server/events.h) is the one implementation: it stamps
// each event with its time and fans it out to the clients of
// GET /api/v1/events. Layers below the server depend only on this interface.
//
// Threading: implementations accept calls from any thread.
#ifndef HF_CORE_EVENT_SINK_H_
#define HF_CORE_EVENT_SINK_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace hf {

class EventSink {
 public:
  virtual ~EventSink() = default;
  // Announces `data` as event `type`, which happened at `now_ms`.
  virtual void Publish(const std::string& type, nlohmann::json data, int64_t now_ms) = 0;
};

}  // namespace hf

#endif  // HF_CORE_EVENT_SINK_H_
