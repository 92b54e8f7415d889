#include "inference/autoscaler.h"

#include <gtest/gtest.h>

namespace hf::inference {
namespace {

ModelSpec Spec(int32_t min, int32_t max) {
  ModelSpec m;
  m.name = "m";
  m.min_replicas = min;
  m.max_replicas = max;
  m.autoscaling.enabled = true;
  m.autoscaling.target_inflight_per_replica = 2;
  m.autoscaling.upscale_delay_s = 1;
  m.autoscaling.downscale_delay_s = 3;
  m.autoscaling.window_s = 1;
  return m;
}

// Feeds `load` every 250 ms from `from` until a decision or `until`; returns
// the decision and when it came.
std::pair<std::optional<Autoscaler::Decision>, int64_t> Feed(Autoscaler& a, const ModelSpec& s,
                                                             int32_t desired, double load,
                                                             int64_t from, int64_t until,
                                                             size_t waiting = 0) {
  for (int64_t t = from; t <= until; t += 250) {
    if (auto d = a.Step(s, desired, load, waiting, t)) return {d, t};
  }
  return {std::nullopt, until};
}

TEST(AutoscalerTest, ScalesUpToCeilOfLoadOverTargetAfterTheDelay) {
  Autoscaler a;
  const ModelSpec s = Spec(1, 4);
  // 5 in flight, target 2: 3 replicas, once the load has stayed 1 s.
  auto [d, t] = Feed(a, s, 1, 5, 0, 10'000);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->from, 1);
  EXPECT_EQ(d->to, 3);
  EXPECT_EQ(t, 1000);
  EXPECT_NE(d->reason.find("above target"), std::string::npos);
  // Clamped at max_replicas.
  Autoscaler b;
  EXPECT_EQ(Feed(b, s, 1, 100, 0, 10'000).first->to, 4);
}

TEST(AutoscalerTest, ABurstShorterThanTheDelayDoesNotScale) {
  Autoscaler a;
  const ModelSpec s = Spec(1, 4);
  EXPECT_FALSE(a.Step(s, 1, 8, 0, 0));
  // The load drops at once: the mean over the window is back at the target
  // (one replica) before the 1 s delay, and nothing is decided.
  EXPECT_FALSE(Feed(a, s, 1, 0, 250, 5000).first);
  // Load that stays above for the delay does scale.
  EXPECT_TRUE(Feed(a, s, 1, 8, 5250, 7000).first);
}

TEST(AutoscalerTest, ScalesDownAfterTheDownscaleDelayAndToZero) {
  Autoscaler a;
  const ModelSpec s = Spec(0, 4);
  auto [d, t] = Feed(a, s, 3, 0, 0, 20'000);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->to, 0);
  // The window (1 s) empties of load at once here; then 3 s below.
  EXPECT_EQ(t, 3000);
  // With min_replicas 1 it stops at one.
  Autoscaler b;
  EXPECT_EQ(Feed(b, Spec(1, 4), 3, 0, 0, 20'000).first->to, 1);
}

TEST(AutoscalerTest, WaitingRequestsScaleFromZeroAtOnce) {
  Autoscaler a;
  const ModelSpec s = Spec(0, 2);
  std::optional<Autoscaler::Decision> d = a.Step(s, 0, 1, 1, 0);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->to, 1);
  EXPECT_NE(d->reason.find("from zero"), std::string::npos);
  // Without waiting requests, zero stays zero.
  Autoscaler b;
  EXPECT_FALSE(Feed(b, s, 0, 0, 0, 10'000).first);
}

TEST(AutoscalerTest, ChangedBoundsMoveDesiredAtOnce) {
  Autoscaler a;
  std::optional<Autoscaler::Decision> d = a.Step(Spec(1, 2), 4, 8, 0, 0);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->to, 2);
  d = a.Step(Spec(3, 5), 2, 0, 0, 250);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->to, 3);
}

}  // namespace
}  // namespace hf::inference
