// AVX2 tiles for Q4_K, Q5_K and Q6_K weights times Q8_K activations (Q2_K, Q3_K, IQ4_XS: vec_dot_avx2_kquant_more.cpp).
//
// Per 256-element super-block all products are summed exactly in int32, then folded into one scalar fp32
// accumulator with exactly the expression the scalar reference uses. These kernels therefore give bitwise the
// same results as vec_dot_reference, whatever the tile shape.

#include "kernels/vec_dot.h"
#include "tensor/dtype.h"

#if defined(__x86_64__)

#include <cstring>

#include "kernels/avx2_common.h"
#include "tensor/quant.h"

namespace hearth::kernels {
namespace {

using avx2::hsum_i32;
using avx2::hsum_i32_pair;
using avx2::KQuantKernel;
using avx2::load_fp16;
using avx2::TileTable;

// The 8 six-bit scales and mins of a Q4_K (and Q5_K) block as bytes, unpacked in SIMD (layout in quant.h): with
// the packed words w0, w1, w2, scales 0-3 = w0 & 0x3F.., scales 4-7 = (w2 & 0x0F..) | (w0 & 0xC0..) >> 2, mins 0-3 =
// w1 & 0x3F.., mins 4-7 = (w2 >> 4 & 0x0F..) | (w1 & 0xC0..) >> 2, one 32-bit lane each. Reads 16 bytes from
// `packed`: the 12 of the scales and 4 of what follows them in the block.
HEARTH_AVX2 inline void unpack_q4_k_scales_x4(const uint8_t* packed, __m128i* scale8, __m128i* min8) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed));
  const __m128i low = _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0));   // w0, w2, w1, w2
  const __m128i high = _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0));  // w0, w0, w1, w1
  const __m128i x = _mm_and_si128(_mm_srlv_epi32(low, _mm_setr_epi32(0, 0, 0, 4)),
                                  _mm_setr_epi32(0x3F3F3F3F, 0x0F0F0F0F, 0x3F3F3F3F, 0x0F0F0F0F));
  const __m128i y = _mm_and_si128(_mm_srli_epi32(high, 2), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
  const __m128i r = _mm_or_si128(x, y);  // scales 0-3, scales 4-7, mins 0-3, mins 4-7
  *scale8 = _mm_move_epi64(r);
  *min8 = _mm_srli_si128(r, 8);
}

// Broadcasts int16 lane `kLane` of both 128-bit halves of v to all 16 lanes.
template <int kLane>
HEARTH_AVX2 inline __m256i broadcast_i16(__m256i v) {
  return _mm256_shuffle_epi8(v, _mm256_set1_epi16(static_cast<int16_t>(((2 * kLane + 1) << 8) | (2 * kLane))));
}

// Q4_K: sumi = Σ_s sc[s]·Σ q·qx (q in [0, 15]), summ = Σ_s m[s]·(bsums[2s] + bsums[2s+1]).
struct Q4KKernel {
  template <int T, int kChunk>
  HEARTH_AVX2 static void chunk(const BlockQ4_K& w, const BlockQ8_K* const (&x)[T], __m256i scales16,
                                __m256i (&sumi)[T]) {
    const __m256i low_mask = _mm256_set1_epi8(0x0F);
    const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 32 * kChunk));
    const __m256i lo = _mm256_and_si256(packed, low_mask);                        // sub-block 2·kChunk
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_mask);  // sub-block 2·kChunk + 1
    const __m256i scale_lo = broadcast_i16<2 * kChunk>(scales16);
    const __m256i scale_hi = broadcast_i16<2 * kChunk + 1>(scales16);
    for (int t = 0; t < T; ++t) {
      const __m256i x_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t]->qs + 64 * kChunk));
      const __m256i x_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t]->qs + 64 * kChunk + 32));
      const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, x_lo), scale_lo);
      const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, x_hi), scale_hi);
      sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(p_lo, p_hi));
    }
  }

  template <int T>
  HEARTH_AVX2 static void row(const BlockQ4_K& w, const BlockQ8_K* const (&x)[T], float (&acc)[T]) {
    __m128i scale8;
    __m128i min8;
    unpack_q4_k_scales_x4(w.scales, &scale8, &min8);
    const __m256i scales16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scale8));
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(min8, min8));  // m[s] at lanes 2s, 2s+1
    __m256i sumi[T];
    for (int t = 0; t < T; ++t) sumi[t] = _mm256_setzero_si256();
    chunk<T, 0>(w, x, scales16, sumi);
    chunk<T, 1>(w, x, scales16, sumi);
    chunk<T, 2>(w, x, scales16, sumi);
    chunk<T, 3>(w, x, scales16, sumi);
    const float wd = load_fp16(&w.d);
    const float wdmin = load_fp16(&w.dmin);
    for (int t = 0; t < T; ++t) {
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t]->bsums));
      int sum_q;
      int sum_m;
      hsum_i32_pair(sumi[t], _mm256_madd_epi16(bsums, mins16), &sum_q, &sum_m);
      const float d = wd * x[t]->d;
      const float dmin = wdmin * x[t]->d;
      acc[t] += d * static_cast<float>(sum_q) - dmin * static_cast<float>(sum_m);
    }
  }
};

// Q5_K: as Q4_K with q = nibble | (bit s of qh[l]) << 4, in [0, 31].
struct Q5KKernel {
  template <int T, int kChunk>
  HEARTH_AVX2 static void chunk(const BlockQ5_K& w, const BlockQ8_K* const (&x)[T], __m256i scales16, __m256i qh,
                                __m256i (&sumi)[T]) {
    const __m256i low_mask = _mm256_set1_epi8(0x0F);
    const __m256i one = _mm256_set1_epi8(1);
    const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 32 * kChunk));
    const __m256i high_lo = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * kChunk), one), 4);
    const __m256i high_hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * kChunk + 1), one), 4);
    const __m256i lo = _mm256_or_si256(_mm256_and_si256(packed, low_mask), high_lo);
    const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(packed, 4), low_mask), high_hi);
    const __m256i scale_lo = broadcast_i16<2 * kChunk>(scales16);
    const __m256i scale_hi = broadcast_i16<2 * kChunk + 1>(scales16);
    for (int t = 0; t < T; ++t) {
      const __m256i x_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t]->qs + 64 * kChunk));
      const __m256i x_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t]->qs + 64 * kChunk + 32));
      const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, x_lo), scale_lo);
      const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, x_hi), scale_hi);
      sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(p_lo, p_hi));
    }
  }

  template <int T>
  HEARTH_AVX2 static void row(const BlockQ5_K& w, const BlockQ8_K* const (&x)[T], float (&acc)[T]) {
    __m128i scale8;
    __m128i min8;
    unpack_q4_k_scales_x4(w.scales, &scale8, &min8);
    const __m256i scales16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scale8));
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(min8, min8));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qh));
    __m256i sumi[T];
    for (int t = 0; t < T; ++t) sumi[t] = _mm256_setzero_si256();
    chunk<T, 0>(w, x, scales16, qh, sumi);
    chunk<T, 1>(w, x, scales16, qh, sumi);
    chunk<T, 2>(w, x, scales16, qh, sumi);
    chunk<T, 3>(w, x, scales16, qh, sumi);
    const float wd = load_fp16(&w.d);
    const float wdmin = load_fp16(&w.dmin);
    for (int t = 0; t < T; ++t) {
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t]->bsums));
      int sum_q;
      int sum_m;
      hsum_i32_pair(sumi[t], _mm256_madd_epi16(bsums, mins16), &sum_q, &sum_m);
      const float d = wd * x[t]->d;
      const float dmin = wdmin * x[t]->d;
      acc[t] += d * static_cast<float>(sum_q) - dmin * static_cast<float>(sum_m);
    }
  }
};

// The four 32-element groups of Q6_K half `half` as unsigned 6-bit values (element order in quant.h).
HEARTH_AVX2 inline void decode_q6_k_half(const BlockQ6_K& w, int half, __m256i (&q)[4]) {
  const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.ql + 64 * half));
  const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.ql + 64 * half + 32));
  const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qh + 32 * half));
  const __m256i low_mask = _mm256_set1_epi8(0x0F);
  const __m256i high_mask = _mm256_set1_epi8(0x30);
  q[0] = _mm256_or_si256(_mm256_and_si256(ql0, low_mask), _mm256_and_si256(_mm256_slli_epi16(qh, 4), high_mask));
  q[1] = _mm256_or_si256(_mm256_and_si256(ql1, low_mask), _mm256_and_si256(_mm256_slli_epi16(qh, 2), high_mask));
  q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low_mask), _mm256_and_si256(qh, high_mask));
  q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low_mask),
                         _mm256_and_si256(_mm256_srli_epi16(qh, 2), high_mask));
}

// Q6_K: sumi = Σ_e sc[e/16]·q_e·qx_e − 32·Σ_g sc[g]·bsums[g], with q_e in [0, 63].
struct Q6KKernel {
  // Group kGroup of 32 elements: int16 lanes 0-7 (elements 0-15) take scale 2·kGroup, lanes 8-15 scale 2·kGroup+1.
  // `scales16` holds the 8 int16 scales of this half in both 128-bit lanes.
  template <int T, int kGroup>
  HEARTH_AVX2 static void group(__m256i q, const BlockQ8_K* const (&x)[T], __m256i scales16, __m256i (&sumi)[T]) {
    constexpr int kFirst = 2 * (kGroup % 4);
    const __m256i mask =
        _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(((2 * kFirst + 3) << 8) | (2 * kFirst + 2))),
                         _mm_set1_epi16(static_cast<int16_t>(((2 * kFirst + 1) << 8) | (2 * kFirst))));
    const __m256i scale = _mm256_shuffle_epi8(scales16, mask);
    for (int t = 0; t < T; ++t) {
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t]->qs + 32 * kGroup));
      sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q, xq), scale));
    }
  }

  template <int T, int kHalf>
  HEARTH_AVX2 static void half(const BlockQ6_K& w, const BlockQ8_K* const (&x)[T], __m128i scales8,
                               __m256i (&sumi)[T]) {
    __m256i q[4];
    decode_q6_k_half(w, kHalf, q);
    const __m256i scales16 = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_srli_si128(scales8, 8 * kHalf)));
    group<T, 4 * kHalf + 0>(q[0], x, scales16, sumi);
    group<T, 4 * kHalf + 1>(q[1], x, scales16, sumi);
    group<T, 4 * kHalf + 2>(q[2], x, scales16, sumi);
    group<T, 4 * kHalf + 3>(q[3], x, scales16, sumi);
  }

  template <int T>
  HEARTH_AVX2 static void row(const BlockQ6_K& w, const BlockQ8_K* const (&x)[T], float (&acc)[T]) {
    __m256i sumi[T];
    for (int t = 0; t < T; ++t) sumi[t] = _mm256_setzero_si256();
    const __m128i scales8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.scales));
    half<T, 0>(w, x, scales8, sumi);
    half<T, 1>(w, x, scales8, sumi);
    const __m256i scales16 = _mm256_cvtepi8_epi16(scales8);
    const float wd = load_fp16(&w.d);
    for (int t = 0; t < T; ++t) {
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t]->bsums));
      const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(bsums, scales16), 5);
      const int total = hsum_i32(_mm256_sub_epi32(sumi[t], offset));
      acc[t] += (wd * x[t]->d) * static_cast<float>(total);
    }
  }
};

using avx2::kKQuantRows;
using avx2::kKQuantTokens;

}  // namespace

TileKernel avx2_kquant_tile_kernel(DType weight_type) {
  switch (weight_type) {
    case DType::Q4_K:
      return TileTable<KQuantKernel<BlockQ4_K, Q4KKernel>, avx2::kKQuantRowsSmallBlocks, kKQuantTokens>::kernel();
    case DType::Q6_K:
      return TileTable<KQuantKernel<BlockQ6_K, Q6KKernel>, kKQuantRows, kKQuantTokens>::kernel();
    case DType::Q5_K:
      return TileTable<KQuantKernel<BlockQ5_K, Q5KKernel>, kKQuantRows, kKQuantTokens>::kernel();
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::IQ4_XS:
      return avx2_kquant_more_tile_kernel(weight_type);
    default:
      return {};
  }
}

}  // namespace hearth::kernels

#else

namespace hearth::kernels {
TileKernel avx2_kquant_tile_kernel(DType) {
  return {};
}
}  // namespace hearth::kernels

#endif
