// The autoscaler of one model deployment (docs/INFERENCE.md, "Autoscaling"),
// without clocks, threads or I/O: InferenceService feeds it one sample per
// tick and acts on its decisions.
#ifndef HF_INFERENCE_AUTOSCALER_H_
#define HF_INFERENCE_AUTOSCALER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>

#include "inference/spec.h"

namespace hf::inference {

class Autoscaler {
 public:
  struct Decision {
    int32_t from = 0;
    int32_t to = 0;
    double mean = 0;  // the mean load over the window that led to it
    std::string reason;
  };

  // One sample at now_ms: `load` is the requests in flight plus those
  // waiting, `waiting` those waiting for a ready replica. Returns the new
  // desired count when it should change from `desired`:
  //   computed = clamp(ceil(mean load over window_s / target), min, max)
  // (at least 1 while requests wait), taken once it has stayed above
  // `desired` for upscale_delay_s or below it for downscale_delay_s; at once
  // from zero while requests wait, and at once when `desired` is outside
  // [min_replicas, max_replicas] (the bounds changed).
  std::optional<Decision> Step(const ModelSpec& spec, int32_t desired, double load, size_t waiting,
                               int64_t now_ms);

 private:
  std::deque<std::pair<int64_t, double>> samples_;  // (time, load)
  int64_t above_since_ms_ = -1;
  int64_t below_since_ms_ = -1;
};

}  // namespace hf::inference

#endif  // HF_INFERENCE_AUTOSCALER_H_
