#pragma once
// RMS norm with a fixed-order sum of squares, in a scalar and an AVX2 form that agree bit for bit (internal header).
// The squares are summed in double (a float's square is exact there) over 8 lanes, lane l taking the elements
// i = l (mod 8) of the first n - n % 8, combined as ((0+4)+(2+6)) + ((1+5)+(3+7)), then the tail in order, as
// dot_lanes.h sums. out[i] = x[i] * scale * w[i], in that order.

#include <immintrin.h>

#include <cmath>
#include <cstdint>

namespace hearth::kernels {

inline double combine_lanes_f64(const double* l) {
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

inline float rms_scale(double sum_of_squares, int64_t n, float eps) {
  return 1.0f / std::sqrt(static_cast<float>(sum_of_squares / static_cast<double>(n)) + eps);
}

inline void rms_norm_lanes_scalar(const float* x, const float* w, float* out, int64_t n, float eps) {
  double lanes[8] = {};
  const int64_t n8 = n - n % 8;
  for (int64_t i = 0; i < n8; i += 8) {
    for (int l = 0; l < 8; ++l) lanes[l] += static_cast<double>(x[i + l]) * x[i + l];
  }
  double sum = combine_lanes_f64(lanes);
  for (int64_t i = n8; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = rms_scale(sum, n, eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
}

__attribute__((target("avx2,fma"))) inline void rms_norm_lanes_avx2(const float* x, const float* w, float* out,
                                                                   int64_t n, float eps) {
  __m256d low = _mm256_setzero_pd();   // lanes 0..3
  __m256d high = _mm256_setzero_pd();  // lanes 4..7
  const int64_t n8 = n - n % 8;
  for (int64_t i = 0; i < n8; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
    const __m256d b = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    low = _mm256_add_pd(low, _mm256_mul_pd(a, a));  // the square is exact in double: no fma needed to match
    high = _mm256_add_pd(high, _mm256_mul_pd(b, b));
  }
  alignas(32) double lanes[8];
  _mm256_store_pd(lanes, low);
  _mm256_store_pd(lanes + 4, high);
  double sum = combine_lanes_f64(lanes);
  for (int64_t i = n8; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = rms_scale(sum, n, eps);
  const __m256 s = _mm256_set1_ps(scale);
  for (int64_t i = 0; i < n8; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), s), _mm256_loadu_ps(w + i)));
  }
  for (int64_t i = n8; i < n; ++i) out[i] = x[i] * scale * w[i];
}

}  // namespace hearth::kernels
