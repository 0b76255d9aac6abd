#pragma once
// Seeded N(0, scale²) test data for the tensor and kernel tests.

#include <cstdint>
#include <random>
#include <vector>

namespace hearth::testing {

inline std::vector<float> random_vector(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

}  // namespace hearth::testing
