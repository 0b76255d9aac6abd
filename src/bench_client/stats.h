#pragma once
// Summary statistics for benchmark samples: percentiles by linear interpolation between closest ranks (the
// definition numpy's default and most load generators use), so p50 of {1, 2, 3, 4} is 2.5.

#include <vector>

namespace hearth::bench {

// The p-th percentile (0 <= p <= 100) of `values` (any order). Requires a non-empty vector.
[[nodiscard]] double percentile(std::vector<double> values, double p);

struct Distribution {
  int count = 0;
  double p50 = 0;
  double p95 = 0;
  double p99 = 0;
  double mean = 0;
  double max = 0;
};

// All zero (count 0) for an empty vector.
[[nodiscard]] Distribution summarize(const std::vector<double>& values);

}  // namespace hearth::bench
