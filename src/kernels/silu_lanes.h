#pragma once
// SiLU-times-up with a polynomial exp, in a scalar and an AVX2 form that agree bit for bit (internal header).
//
// exp(x): x is clamped to [-87.3, 88], then x = n ln2 + r with n = floor(x log2(e) + 1/2) and r taken off in two
// steps (ln2 = C1 + C2, C1 exact in a few bits), e^r ~ 1 + r + r^2 P(r) with Cephes' degree-5 P (about 1 ulp on
// |r| <= ln2/2), then scaled by 2^n through the exponent bits. Every step is one IEEE operation or an fma, the same
// in both forms, so an element's result does not depend on the ISA, on n or on where the element sits.
// silu_mul(g, up) = g / (1 + exp(-g)) * up, in that order. A NaN gate stays NaN (it is multiplied in at the end).

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace hearth::kernels {

struct ExpPoly {
  static constexpr float kLow = -87.3365447504f;  // 2^n stays a normal float: n >= -126
  static constexpr float kHigh = 88.0f;           // n <= 127
  static constexpr float kLog2e = 1.44269504088896341f;
  static constexpr float kC1 = 0.693359375f;
  static constexpr float kC2 = -2.12194440e-4f;
  static constexpr float kP0 = 1.9875691500e-4f;
  static constexpr float kP1 = 1.3981999507e-3f;
  static constexpr float kP2 = 8.3334519073e-3f;
  static constexpr float kP3 = 4.1665795894e-2f;
  static constexpr float kP4 = 1.6666665459e-1f;
  static constexpr float kP5 = 5.0000001201e-1f;
};

inline float exp_poly_scalar(float x) {
  // The clamps in _mm256_min_ps/_mm256_max_ps's form (a NaN x becomes the bound; silu keeps the NaN elsewhere).
  x = x < ExpPoly::kHigh ? x : ExpPoly::kHigh;
  x = x > ExpPoly::kLow ? x : ExpPoly::kLow;
  const float n = std::floor(std::fma(x, ExpPoly::kLog2e, 0.5f));
  float r = std::fma(n, -ExpPoly::kC1, x);
  r = std::fma(n, -ExpPoly::kC2, r);
  const float r2 = r * r;
  float p = std::fma(ExpPoly::kP0, r, ExpPoly::kP1);
  p = std::fma(p, r, ExpPoly::kP2);
  p = std::fma(p, r, ExpPoly::kP3);
  p = std::fma(p, r, ExpPoly::kP4);
  p = std::fma(p, r, ExpPoly::kP5);
  const float e = std::fma(p, r2, r) + 1.0f;
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return e * scale;
}

inline void silu_mul_lanes_scalar(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + exp_poly_scalar(-g)) * up[i];
  }
}

__attribute__((target("avx2,fma"))) inline __m256 exp_poly_avx2(__m256 x) {
  x = _mm256_min_ps(x, _mm256_set1_ps(ExpPoly::kHigh));
  x = _mm256_max_ps(x, _mm256_set1_ps(ExpPoly::kLow));
  const __m256 n = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(ExpPoly::kLog2e), _mm256_set1_ps(0.5f)));
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-ExpPoly::kC1), x);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(-ExpPoly::kC2), r);
  const __m256 r2 = _mm256_mul_ps(r, r);
  __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(ExpPoly::kP0), r, _mm256_set1_ps(ExpPoly::kP1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ExpPoly::kP2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ExpPoly::kP3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ExpPoly::kP4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ExpPoly::kP5));
  const __m256 e = _mm256_add_ps(_mm256_fmadd_ps(p, r2, r), _mm256_set1_ps(1.0f));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(e, _mm256_castsi256_ps(bits));
}

__attribute__((target("avx2,fma"))) inline void silu_mul_lanes_avx2(const float* gate, const float* up, float* out,
                                                                    int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const int64_t n8 = n - n % 8;
  for (int64_t i = 0; i < n8; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = exp_poly_avx2(_mm256_xor_ps(g, sign));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
  }
  silu_mul_lanes_scalar(gate + n8, up + n8, out + n8, n - n8);
}

}  // namespace hearth::kernels
