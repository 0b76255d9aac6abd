// AVX2 activation quantizers (fp32 rows to Q8_0 / Q8_K blocks), byte for byte equal to the scalar ones in
// tensor/quant.cpp: the absolute maximum is exact in any order, the scale and its inverse are computed by the same
// scalar code per block, and x·inverse is rounded half to even (the scalar round_to_int; cvtps under the default
// MXCSR) and clamped to [-127, 127]. Decode quantizes every matmul's input on one thread before the others start,
// so this conversion is on the critical path of every op; the scalar loops take about 24 instructions per element.

#include "kernels/vec_dot.h"
#include "tensor/dtype.h"

#if defined(__x86_64__)

#include <algorithm>

#include "kernels/avx2_common.h"
#include "tensor/fp16.h"
#include "tensor/quant.h"

namespace hearth::kernels {
namespace {

// max(|x[i]|) over n (a multiple of 8) floats; NaNs are skipped, as the scalar search skips them.
HEARTH_AVX2 float abs_max(const float* x, int n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  // max_ps returns its second operand when either is NaN, so a NaN |x| leaves m as it was.
  for (int i = 0; i < n; i += 8) m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)), m);
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// q[i] = clamp(round_half_even(x[i] * inverse), -127, 127) for 32 elements.
HEARTH_AVX2 void quantize_32(const float* x, float inverse, int8_t* q) {
  const __m256 inv = _mm256_set1_ps(inverse);
  __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), inv));
  __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), inv));
  __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16), inv));
  __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 24), inv));
  i0 = _mm256_packs_epi32(i0, i1);  // saturating, 128-bit lanes interleaved
  i2 = _mm256_packs_epi32(i2, i3);
  i0 = _mm256_packs_epi16(i0, i2);
  i0 = _mm256_permutevar8x32_epi32(i0, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  i0 = _mm256_max_epi8(i0, _mm256_set1_epi8(-127));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), i0);
}

HEARTH_AVX2 void quantize_blocks_q8_0(const float* src, BlockQ8_0* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const float* x = src + b * kQK8_0;
    const uint16_t d16 = fp32_to_fp16(abs_max(x, kQK8_0) / 127.0f);
    const float d = fp16_to_fp32(d16);
    const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = d16;
    quantize_32(x, inverse, dst[b].qs);
  }
}

HEARTH_AVX2 void quantize_blocks_q8_k(const float* src, BlockQ8_K* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float* x = src + b * kQK_K;
    const float d = abs_max(x, kQK_K) / 127.0f;
    const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = d;
    for (int i = 0; i < kQK_K; i += 32) quantize_32(x + i, inverse, dst[b].qs + i);
    // bsums: the exact int sums of each 16 quants (widened to int16 pairs, then summed).
    for (int g = 0; g < kQK_K / 16; ++g) {
      const __m256i q16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(dst[b].qs + 16 * g)));
      dst[b].bsums[g] = static_cast<int16_t>(avx2::hsum_i32(_mm256_madd_epi16(q16, _mm256_set1_epi16(1))));
    }
  }
}

}  // namespace

HEARTH_AVX2 void quantize_row_q8_0_avx2(const float* src, uint8_t* dst, int64_t n_cols) {
  quantize_blocks_q8_0(src, reinterpret_cast<BlockQ8_0*>(dst), n_cols);
}

HEARTH_AVX2 void quantize_row_q8_k_avx2(const float* src, uint8_t* dst, int64_t n_cols) {
  quantize_blocks_q8_k(src, reinterpret_cast<BlockQ8_K*>(dst), n_cols);
}

}  // namespace hearth::kernels

#endif
