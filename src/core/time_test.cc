#include "core/time.h"

#include <gtest/gtest.h>

namespace hf {
namespace {

TEST(TimeTest, Rfc3339InUtc) {
  EXPECT_EQ(FormatTimeMs(1796220000123), "2026-12-02T14:00:00.123Z");
  EXPECT_EQ(FormatTimeMs(1796220000000), "2026-12-02T14:00:00.000Z");
  EXPECT_EQ(FormatTimeSeconds(1796220000123), "2026-12-02T14:00:00Z");
  EXPECT_EQ(FormatTimeMs(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatTimeMs(-1), "1969-12-31T23:59:59.999Z");
  EXPECT_EQ(FormatTimeSeconds(-1), "1969-12-31T23:59:59Z");
}

}  // namespace
}  // namespace hf
