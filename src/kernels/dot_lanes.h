#pragma once
// The fixed-order f32 dot product shared by the element-wise and attention kernels (internal header).
// Lane layout: 8 partial sums, lane l takes elements i ≡ l (mod 8) of the first n - n % 8, then lanes are
// combined as ((0+4)+(2+6)) + ((1+5)+(3+7)), then the tail is added in order. Scalar and AVX2 agree bit for bit.

#include <immintrin.h>

#include <cmath>
#include <cstdint>

namespace hearth::kernels {

inline float combine_lanes(const float* lanes) {
  return ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
}

inline float dot_lanes_scalar(const float* a, const float* b, int64_t n) {
  float lanes[8] = {};
  const int64_t n8 = n - n % 8;
  for (int64_t i = 0; i < n8; i += 8) {
    for (int l = 0; l < 8; ++l) lanes[l] = std::fma(a[i + l], b[i + l], lanes[l]);
  }
  float sum = combine_lanes(lanes);
  for (int64_t i = n8; i < n; ++i) sum = std::fma(a[i], b[i], sum);
  return sum;
}

__attribute__((target("avx2,fma"))) inline float dot_lanes_avx2(const float* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  const int64_t n8 = n - n % 8;
  for (int64_t i = 0; i < n8; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  float sum = combine_lanes(lanes);
  for (int64_t i = n8; i < n; ++i) sum = std::fma(a[i], b[i], sum);
  return sum;
}

}  // namespace hearth::kernels
