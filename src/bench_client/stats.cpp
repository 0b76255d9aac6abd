#include "bench_client/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "util/result.h"

namespace hearth::bench {

double percentile(std::vector<double> values, double p) {
  HEARTH_CHECK(!values.empty(), "percentile of no values");
  HEARTH_CHECK(p >= 0 && p <= 100, "percentile {} outside [0, 100]", p);
  std::sort(values.begin(), values.end());
  const double rank = (static_cast<double>(values.size()) - 1) * p / 100.0;
  const auto lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

Distribution summarize(const std::vector<double>& values) {
  Distribution d;
  if (values.empty()) return d;
  d.count = static_cast<int>(values.size());
  d.p50 = percentile(values, 50);
  d.p95 = percentile(values, 95);
  d.p99 = percentile(values, 99);
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  d.max = *std::max_element(values.begin(), values.end());
  return d;
}

}  // namespace hearth::bench
