// Percentiles by linear interpolation between closest ranks (numpy's default), and the summary around them.

#include <gtest/gtest.h>

#include "bench_client/stats.h"

namespace hearth::bench {
namespace {

TEST(Percentile, InterpolatesBetweenClosestRanks) {
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 50), 2.5);  // order of the input does not matter
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 0), 1);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 100), 4);
  EXPECT_DOUBLE_EQ(percentile({10, 20, 30}, 25), 15);
  EXPECT_DOUBLE_EQ(percentile({7}, 99), 7);
}

TEST(Percentile, MatchesNumpyOnOneToHundred) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  // numpy.percentile(range(1, 101), [50, 95, 99]) == [50.5, 95.05, 99.01]
  EXPECT_DOUBLE_EQ(percentile(v, 50), 50.5);
  EXPECT_NEAR(percentile(v, 95), 95.05, 1e-12);
  EXPECT_NEAR(percentile(v, 99), 99.01, 1e-12);
}

TEST(Summarize, EmptyIsAllZero) {
  const Distribution d = summarize({});
  EXPECT_EQ(d.count, 0);
  EXPECT_EQ(d.p50, 0);
  EXPECT_EQ(d.max, 0);
}

TEST(Summarize, CountsMeanMaxAndPercentiles) {
  const Distribution d = summarize({0.5, 0.1, 0.3});
  EXPECT_EQ(d.count, 3);
  EXPECT_DOUBLE_EQ(d.p50, 0.3);
  EXPECT_DOUBLE_EQ(d.p95, 0.3 + 0.2 * 0.9);
  EXPECT_DOUBLE_EQ(d.mean, 0.3);
  EXPECT_DOUBLE_EQ(d.max, 0.5);
}

}  // namespace
}  // namespace hearth::bench
