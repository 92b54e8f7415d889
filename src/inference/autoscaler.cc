#include "inference/autoscaler.h"

#include <algorithm>
#include <cmath>

#include "core/text.h"

namespace hf::inference {

std::optional<Autoscaler::Decision> Autoscaler::Step(const ModelSpec& spec, int32_t desired,
                                                     double load, size_t waiting, int64_t now_ms) {
  const AutoscalingSpec& a = spec.autoscaling;
  samples_.emplace_back(now_ms, load);
  const int64_t window_ms = static_cast<int64_t>(a.window_s * 1000);
  while (samples_.size() > 1 && samples_.front().first < now_ms - window_ms) samples_.pop_front();
  double sum = 0;
  for (const auto& s : samples_) sum += s.second;
  const double mean = sum / static_cast<double>(samples_.size());
  int32_t want = static_cast<int32_t>(std::ceil(mean / a.target_inflight_per_replica - 1e-9));
  if (waiting > 0) want = std::max(want, 1);
  want = std::clamp(want, spec.min_replicas, spec.max_replicas);

  std::optional<Decision> d;
  auto decide = [&](int32_t to, std::string reason) {
    d = Decision{desired, to, mean, std::move(reason)};
    above_since_ms_ = below_since_ms_ = -1;
  };
  if (desired < spec.min_replicas || desired > spec.max_replicas) {
    decide(std::clamp(desired, spec.min_replicas, spec.max_replicas),
           "min_replicas/max_replicas changed");
  } else if (want > desired) {
    below_since_ms_ = -1;
    if (desired == 0 && waiting > 0) {
      decide(want, "scale from zero: " + std::to_string(waiting) + " request(s) waiting");
    } else {
      if (above_since_ms_ < 0) above_since_ms_ = now_ms;
      if (now_ms - above_since_ms_ >= static_cast<int64_t>(a.upscale_delay_s * 1000)) {
        decide(want, "load above target for " + FormatNumber(a.upscale_delay_s) + " s");
      }
    }
  } else if (want < desired) {
    above_since_ms_ = -1;
    if (below_since_ms_ < 0) below_since_ms_ = now_ms;
    if (now_ms - below_since_ms_ >= static_cast<int64_t>(a.downscale_delay_s * 1000)) {
      decide(want, "load below target for " + FormatNumber(a.downscale_delay_s) + " s");
    }
  } else {
    above_since_ms_ = below_since_ms_ = -1;
  }
  return d;
}

}  // namespace hf::inference
