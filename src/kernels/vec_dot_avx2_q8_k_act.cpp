// AVX2 tiles for the weight types of Q8_K activations: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS.
//
// Per 256-element super-block all products are summed exactly in int32, then folded into one scalar fp32
// accumulator with exactly the expression the scalar reference uses (vec_dot_ref.cpp). These kernels therefore give
// bitwise the same results as vec_dot_reference, whatever the tile shape.

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

// int16 lane kLane of `scales16` in the low 128 bits and lane kLane + 1 in the high ones, each broadcast: the scales
// of a 32-element group's two 16-element halves.
template <int kLane>
HEARTH_AVX2 inline __m256i scale_pair(__m256i scales16) {
  const __m256i mask = _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(((2 * kLane + 3) << 8) | (2 * kLane + 2))),
                                        _mm_set1_epi16(static_cast<int16_t>(((2 * kLane + 1) << 8) | (2 * kLane))));
  return _mm256_shuffle_epi8(scales16, mask);
}

// Q2_K: q in [0, 3] (unsigned, as maddubs needs): sumi = Σ_g sc[g]·Σ q·qx, summ = Σ_g m[g]·bsums[g].
struct Q2KKernel {
  // Group k of 32 elements (k = 4n + j): 2 bits from qs[32n ..] >> 2j; its 16-element halves take scales 2k and
  // 2k + 1, int16 lanes 2j and 2j + 1 of `scales16` (the 8 scales of half n, in both 128-bit lanes).
  template <int T, int kGroup>
  HEARTH_AVX2 static void group(__m256i qs, __m256i scales16, const BlockQ8_K* const (&x)[T], __m256i (&sumi)[T]) {
    constexpr int kFirst = 2 * (kGroup % 4);
    const __m256i q = _mm256_and_si256(_mm256_srli_epi16(qs, kFirst), _mm256_set1_epi8(3));
    const __m256i scale = scale_pair<kFirst>(scales16);
    for (int t = 0; t < T; ++t) {
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t]->qs + 32 * kGroup));
      sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q, xq), scale));
    }
  }

  template <int T, int kHalf>
  HEARTH_AVX2 static void half(const BlockQ2_K& w, __m128i scales8, const BlockQ8_K* const (&x)[T],
                               __m256i (&sumi)[T]) {
    const __m256i qs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 32 * kHalf));
    const __m256i scales16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_srli_si128(scales8, 8 * kHalf)));
    group<T, 4 * kHalf + 0>(qs, scales16, x, sumi);
    group<T, 4 * kHalf + 1>(qs, scales16, x, sumi);
    group<T, 4 * kHalf + 2>(qs, scales16, x, sumi);
    group<T, 4 * kHalf + 3>(qs, scales16, x, sumi);
  }

  template <int T>
  HEARTH_AVX2 static void row(const BlockQ2_K& w, const BlockQ8_K* const (&x)[T], float (&acc)[T]) {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.scales));
    const __m128i low_mask = _mm_set1_epi8(0x0F);
    const __m128i scales8 = _mm_and_si128(packed, low_mask);
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), low_mask));
    __m256i sumi[T];
    for (int t = 0; t < T; ++t) sumi[t] = _mm256_setzero_si256();
    half<T, 0>(w, scales8, x, sumi);
    half<T, 1>(w, scales8, x, sumi);
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

// Q3_K with u = q + 4 in [0, 7] (unsigned, as maddubs needs):
// sumi = Σ_g (sc[g] − 32)·Σ u·qx − 4·Σ_g (sc[g] − 32)·bsums[g].
struct Q3KKernel {
  // The 16 six-bit scales minus 32, as int8 (unpack_q3_k_scales in SIMD): the low nibbles of packed[0..8) are
  // scales 0-7 and their high nibbles scales 8-15; scale s takes 2 bits of packed[8 + s % 4] at 2·(s / 4).
  HEARTH_AVX2 static __m128i scales8(const uint8_t* packed) {
    const __m128i low_mask = _mm_set1_epi8(0x0F);
    const __m128i p = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(packed));
    const __m128i low = _mm_unpacklo_epi64(_mm_and_si128(p, low_mask), _mm_and_si128(_mm_srli_epi16(p, 4), low_mask));
    uint32_t h;
    std::memcpy(&h, packed + 8, sizeof(h));
    const __m128i high = _mm_and_si128(
        _mm_srlv_epi32(_mm_set1_epi32(static_cast<int32_t>(h)), _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(3));
    return _mm_sub_epi8(_mm_or_si128(low, _mm_slli_epi16(high, 4)), _mm_set1_epi8(32));
  }

  // Group k of 32 elements (k = 4n + j): 2 bits from qs[32n ..] >> 2j, the high bit from bit k of hmask; its
  // 16-element halves take scales 2k and 2k + 1, int16 lanes 2j and 2j + 1 of `scales16` (half n's 8 scales in
  // both 128-bit lanes).
  template <int T, int kGroup>
  HEARTH_AVX2 static void group(__m256i qs, __m256i hmask, __m256i scales16, const BlockQ8_K* const (&x)[T],
                                __m256i (&sumi)[T]) {
    constexpr int kFirst = 2 * (kGroup % 4);
    const __m256i low = _mm256_and_si256(_mm256_srli_epi16(qs, kFirst), _mm256_set1_epi8(3));
    const __m256i high = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hmask, kGroup), _mm256_set1_epi8(1)), 2);
    const __m256i u = _mm256_or_si256(low, high);
    const __m256i scale = scale_pair<kFirst>(scales16);
    for (int t = 0; t < T; ++t) {
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t]->qs + 32 * kGroup));
      sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(_mm256_maddubs_epi16(u, xq), scale));
    }
  }

  template <int T, int kHalf>
  HEARTH_AVX2 static void half(const BlockQ3_K& w, __m256i hmask, __m128i scales8, const BlockQ8_K* const (&x)[T],
                               __m256i (&sumi)[T]) {
    const __m256i qs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 32 * kHalf));
    const __m256i scales16 = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_srli_si128(scales8, 8 * kHalf)));
    group<T, 4 * kHalf + 0>(qs, hmask, scales16, x, sumi);
    group<T, 4 * kHalf + 1>(qs, hmask, scales16, x, sumi);
    group<T, 4 * kHalf + 2>(qs, hmask, scales16, x, sumi);
    group<T, 4 * kHalf + 3>(qs, hmask, scales16, x, sumi);
  }

  template <int T>
  HEARTH_AVX2 static void row(const BlockQ3_K& w, const BlockQ8_K* const (&x)[T], float (&acc)[T]) {
    const __m128i scales = scales8(w.scales);
    const __m256i hmask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.hmask));
    __m256i sumi[T];
    for (int t = 0; t < T; ++t) sumi[t] = _mm256_setzero_si256();
    half<T, 0>(w, hmask, scales, x, sumi);
    half<T, 1>(w, hmask, scales, x, sumi);
    const __m256i scales16 = _mm256_cvtepi8_epi16(scales);
    const float wd = load_fp16(&w.d);
    for (int t = 0; t < T; ++t) {
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t]->bsums));
      const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(bsums, scales16), 2);
      const int total = hsum_i32(_mm256_sub_epi32(sumi[t], offset));
      acc[t] += (wd * x[t]->d) * static_cast<float>(total);
    }
  }
};

// IQ4_XS: the nibbles index kIq4NlValues (pshufb); signed × signed products via maddubs(|w|, sign(x, w)), whose
// pair sums stay below 2·127·127 < 2^15. sumi = Σ_s (sc[s] − 32)·Σ v·qx.
struct IQ4XSKernel {
  template <int T>
  HEARTH_AVX2 static void row(const BlockIQ4_XS& w, const BlockQ8_K* const (&x)[T], float (&acc)[T]) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlValues)));
    const __m128i low_mask = _mm_set1_epi8(0x0F);
    __m256i sumi[T];
    for (int t = 0; t < T; ++t) sumi[t] = _mm256_setzero_si256();
    for (int s = 0; s < 8; ++s) {
      const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.qs + 16 * s));
      const __m256i nibbles =
          _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(packed, 4), low_mask), _mm_and_si128(packed, low_mask));
      const __m256i v = _mm256_shuffle_epi8(table, nibbles);
      const __m256i v_abs = _mm256_sign_epi8(v, v);
      const __m256i scale = _mm256_set1_epi16(static_cast<int16_t>(iq4_xs_scale(w, s) - 32));
      for (int t = 0; t < T; ++t) {
        const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t]->qs + 32 * s));
        const __m256i products = _mm256_maddubs_epi16(v_abs, _mm256_sign_epi8(xq, v));
        sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(products, scale));
      }
    }
    const float wd = load_fp16(&w.d);
    for (int t = 0; t < T; ++t) acc[t] += (wd * x[t]->d) * static_cast<float>(hsum_i32(sumi[t]));
  }
};

using avx2::kKQuantRows;
using avx2::kKQuantTokens;

}  // namespace

constinit const TileKernel kTileAvx2Q2_K =
    TileTable<KQuantKernel<BlockQ2_K, Q2KKernel>, avx2::kKQuantRowsSmallBlocks, kKQuantTokens>::kernel();
constinit const TileKernel kTileAvx2Q3_K =
    TileTable<KQuantKernel<BlockQ3_K, Q3KKernel>, kKQuantRows, kKQuantTokens>::kernel();
constinit const TileKernel kTileAvx2Q4_K =
    TileTable<KQuantKernel<BlockQ4_K, Q4KKernel>, avx2::kKQuantRowsSmallBlocks, kKQuantTokens>::kernel();
constinit const TileKernel kTileAvx2Q5_K =
    TileTable<KQuantKernel<BlockQ5_K, Q5KKernel>, kKQuantRows, kKQuantTokens>::kernel();
constinit const TileKernel kTileAvx2Q6_K =
    TileTable<KQuantKernel<BlockQ6_K, Q6KKernel>, kKQuantRows, kKQuantTokens>::kernel();
constinit const TileKernel kTileAvx2IQ4_XS =
    TileTable<KQuantKernel<BlockIQ4_XS, IQ4XSKernel>, kKQuantRows, kKQuantTokens>::kernel();

}  // namespace hearth::kernels

#else

namespace hearth::kernels {
constinit const TileKernel kTileAvx2Q2_K{};
constinit const TileKernel kTileAvx2Q3_K{};
constinit const TileKernel kTileAvx2Q4_K{};
constinit const TileKernel kTileAvx2Q5_K{};
constinit const TileKernel kTileAvx2Q6_K{};
constinit const TileKernel kTileAvx2IQ4_XS{};
}  // namespace hearth::kernels

#endif
