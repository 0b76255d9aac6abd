// AVX-VNNI tiles for packed Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS weights (packed.h) times Q8_K activations.
//
// As for Q8_0 (vec_dot_vnni.cpp), a tile is one group of 8 rows × up to 4 tokens and lane r of every vector is row
// r: one vpdpbusd multiplies four columns of the 8 rows by four broadcast activation bytes. Per super-block the
// integer sums are exact (any order of additions gives the same int32), and then each output takes the scalar
// reference's fp32 step, lane-wise, in the reference's order:
//   Q4_K, Q5_K: sum = sum + ((d_w·d_x)·float(sumi) − (dmin_w·d_x)·float(summ))   (dot_q4_k, dot_q5_k_reference)
//   Q6_K, Q3_K, IQ4_XS: sum = sum + (d_w·d_x)·float(sumi)   (dot_q6_k, dot_q3_k_reference, dot_iq4_xs_reference)
// so every output is bitwise vec_dot_reference's, whatever the tile shape or batch.

#include "kernels/vec_dot.h"
#include "tensor/dtype.h"

#if defined(__x86_64__)

#include "kernels/vnni_common.h"
#include "tensor/quant.h"

namespace hearth::kernels {
namespace {

using vnni::broadcast4;
using vnni::kChains;

HEARTH_VNNI inline __m256 load_fp16x8(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p)));
}

// Eight signed byte scales, one per row, as int32 lanes.
HEARTH_VNNI inline __m256i load_scales8(const uint8_t* p) {
  return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

// The bit at position `from` of every byte of v moved to position `to` of that byte, every other bit cleared. The
// bit stays inside its byte, so what the 16-bit shifts carry across bytes lands only where the mask clears.
HEARTH_VNNI inline __m256i move_bit(__m256i v, int from, int to) {
  const __m256i mask = _mm256_set1_epi8(static_cast<char>(1 << to));
  if (from < to) return _mm256_and_si256(_mm256_slli_epi16(v, to - from), mask);
  if (from > to) return _mm256_and_si256(_mm256_srli_epi16(v, from - to), mask);
  return _mm256_and_si256(v, mask);
}

// Q4_K, per super-block: sumi = Σ_s sc[s]·Σ_i q·x over sub-block s (q the unsigned nibble, no offset to cancel);
// summ = Σ_s m[s]·bs[s], one vpdpwssd per pair of sub-blocks with the activation's bs pairs (x_sums).
// Q5_K (kQ5) is the same with q = nibble | fifth bit << 4, in [0, 31]: still unsigned, still no offset, and the same
// scales, mins and fp32 step (dot_q5_k_reference), so it costs only the bits ORed into each quant vector.
// Sub-blocks 2p and 2p + 1 of a super-block pair: their chains added up (exact integers), each times its 8 rows'
// scales, into sumi (Q4_K, Q5_K and IQ4_XS share this step).
template <int T, int K>
HEARTH_VNNI inline void add_pair_scaled(const __m256i (&chain)[T][2][K], __m256i sc0, __m256i sc1, __m256i (&sumi)[T]) {
  for (int t = 0; t < T; ++t) {
    __m256i s0 = chain[t][0][0];
    __m256i s1 = chain[t][1][0];
    for (int k = 1; k < K; ++k) {
      s0 = _mm256_add_epi32(s0, chain[t][0][k]);
      s1 = _mm256_add_epi32(s1, chain[t][1][k]);
    }
    sumi[t] = _mm256_add_epi32(sumi[t], _mm256_mullo_epi32(s0, sc0));
    sumi[t] = _mm256_add_epi32(sumi[t], _mm256_mullo_epi32(s1, sc1));
  }
}

template <bool kQ5>
struct PackedQ4_KQ5_K {
  static constexpr size_t kSuperBytes = kQ5 ? kPackedQ5_KSuperBytes : kPackedQ4_KSuperBytes;
  static constexpr int kSums = 4;  // x_sums per super-block

  template <int T>
  HEARTH_VNNI static void super_block(const uint8_t* w, const BlockQ8_K* const (&x)[T], const int32_t* const (&sums)[T],
                                      __m256 (&acc)[T]) {
    constexpr int K = kChains<T>;
    const uint8_t* quants = w + 160;
    const __m256i low_mask = _mm256_set1_epi8(0x0F);
    __m256i sumi[T];
    for (int t = 0; t < T; ++t) sumi[t] = _mm256_setzero_si256();
    for (int p = 0; p < 4; ++p) {
      // chain[t][h][k]: sub-block 2p + h of token t.
      __m256i chain[T][2][K];
      for (int t = 0; t < T; ++t) {
        for (int h = 0; h < 2; ++h) {
          for (int k = 0; k < K; ++k) chain[t][h][k] = _mm256_setzero_si256();
        }
      }
      [[maybe_unused]] __m256i fifth = _mm256_setzero_si256();  // Q5_K only
      // Unrolled, so that move_bit's shift counts are immediates (GCC leaves the Q5_K body rolled otherwise, with
      // variable shifts: 190 GFLOP/s at 64 tokens against the unrolled one's).
#pragma GCC unroll 8
      for (int c = 0; c < 8; ++c) {
        const __m256i packed = _mm256_load_si256(reinterpret_cast<const __m256i*>(quants + 256 * p + 32 * c));
        __m256i lo = _mm256_and_si256(packed, low_mask);                        // sub-block 2p
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_mask);  // sub-block 2p + 1
        if constexpr (kQ5) {
          // Bits 2k and 2k + 1 of the fifth-bit vector belong to lo and hi of quant vector 4·(c / 4) + k.
          const int k = c % 4;
          if (k == 0) fifth = _mm256_load_si256(reinterpret_cast<const __m256i*>(w + 1184 + 64 * p + 32 * (c / 4)));
          lo = _mm256_or_si256(lo, move_bit(fifth, 2 * k, 4));
          hi = _mm256_or_si256(hi, move_bit(fifth, 2 * k + 1, 4));
        }
        for (int t = 0; t < T; ++t) {
          __m256i& a0 = chain[t][0][c % K];
          __m256i& a1 = chain[t][1][c % K];
          a0 = _mm256_dpbusd_avx_epi32(a0, lo, broadcast4(x[t]->qs + 64 * p + 4 * c));
          a1 = _mm256_dpbusd_avx_epi32(a1, hi, broadcast4(x[t]->qs + 64 * p + 32 + 4 * c));
        }
      }
      const __m256i sc0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w + 32 + 16 * p)));
      const __m256i sc1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w + 40 + 16 * p)));
      add_pair_scaled<T, K>(chain, sc0, sc1, sumi);
    }
    __m256i summ[T];
    for (int t = 0; t < T; ++t) summ[t] = _mm256_setzero_si256();
    for (int k = 0; k < 4; ++k) {
      // Lane r: the int16 pair (m[2k], m[2k + 1]) of row r.
      const __m256i m = _mm256_cvtepu8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(w + 96 + 16 * k)));
      for (int t = 0; t < T; ++t) summ[t] = _mm256_dpwssd_avx_epi32(summ[t], m, _mm256_set1_epi32(sums[t][k]));
    }
    const __m256 wd = load_fp16x8(w);
    const __m256 wdmin = load_fp16x8(w + 16);
    for (int t = 0; t < T; ++t) {
      const __m256 xd = _mm256_set1_ps(x[t]->d);
      const __m256 d = _mm256_mul_ps(wd, xd);
      const __m256 dmin = _mm256_mul_ps(wdmin, xd);
      const __m256 term = _mm256_sub_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(sumi[t])),
                                        _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(summ[t])));
      acc[t] = _mm256_add_ps(acc[t], term);
    }
  }
};

// One 16-column group g of the Q6_K and Q3_K layouts: its four column-quad vectors v (the reference's q plus the
// type's offset o, unsigned) and its signed scales sc; adds sc·(Σ v·x − o·Σx) to each token's sumi. The −o·Σx
// (x_sums) starts the group's chain, so the offset costs no instruction.
template <int T>
HEARTH_VNNI inline void add_group16(const __m256i (&v)[4], __m256i sc, int g, const BlockQ8_K* const (&x)[T],
                                    const int32_t* const (&sums)[T], __m256i (&sumi)[T]) {
  // Four vpdpbusd per group and token: two chains of two are enough for one token, where groups overlap anyway.
  constexpr int K = T == 1 ? 2 : 1;
  for (int t = 0; t < T; ++t) {
    __m256i chain[K];
    chain[0] = _mm256_set1_epi32(sums[t][g]);
    for (int k = 1; k < K; ++k) chain[k] = _mm256_setzero_si256();
    for (int k = 0; k < 4; ++k) {
      chain[k % K] = _mm256_dpbusd_avx_epi32(chain[k % K], v[k], broadcast4(x[t]->qs + 16 * g + 4 * k));
    }
    __m256i s = chain[0];
    for (int k = 1; k < K; ++k) s = _mm256_add_epi32(s, chain[k]);
    sumi[t] = _mm256_add_epi32(sumi[t], _mm256_mullo_epi32(s, sc));
  }
}

// The fp32 step of dot_q6_k, dot_q3_k_reference and dot_iq4_xs_reference: sum = sum + (d_w·d_x)·float(sumi).
template <int T>
HEARTH_VNNI inline void add_scaled(const uint8_t* w, const BlockQ8_K* const (&x)[T], const __m256i (&sumi)[T],
                                   __m256 (&acc)[T]) {
  const __m256 wd = load_fp16x8(w);
  for (int t = 0; t < T; ++t) {
    const __m256 d = _mm256_mul_ps(wd, _mm256_set1_ps(x[t]->d));
    acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(d, _mm256_cvtepi32_ps(sumi[t])));
  }
}

// Q6_K, per super-block: sumi = Σ_g sc[g]·(Σ q·x − 32·Σx) over each 16 columns g, q the unsigned 6-bit value.
struct PackedQ6_K {
  static constexpr size_t kSuperBytes = kPackedQ6_KSuperBytes;
  static constexpr int kSums = 16;

  template <int T>
  HEARTH_VNNI static void super_block(const uint8_t* w, const BlockQ8_K* const (&x)[T], const int32_t* const (&sums)[T],
                                      __m256 (&acc)[T]) {
    const __m256i low_mask = _mm256_set1_epi8(0x0F);
    const __m256i high_mask = _mm256_set1_epi8(0x30);
    __m256i sumi[T];
    for (int t = 0; t < T; ++t) sumi[t] = _mm256_setzero_si256();
    for (int g = 0; g < 16; ++g) {
      const uint8_t* q = w + 160 + 96 * g;
      const __m256i a = _mm256_load_si256(reinterpret_cast<const __m256i*>(q));
      const __m256i b = _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 32));
      const __m256i h = _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 64));
      // Column quad k of the group: the nibble from a or b, the two high bits from bits 2k, 2k + 1 of h. The 16-bit
      // shifts carry bits across bytes only into positions the masks clear.
      __m256i v[4];
      v[0] = _mm256_or_si256(_mm256_and_si256(a, low_mask), _mm256_and_si256(_mm256_slli_epi16(h, 4), high_mask));
      v[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), low_mask),
                             _mm256_and_si256(_mm256_slli_epi16(h, 2), high_mask));
      v[2] = _mm256_or_si256(_mm256_and_si256(b, low_mask), _mm256_and_si256(h, high_mask));
      v[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), low_mask),
                             _mm256_and_si256(_mm256_srli_epi16(h, 2), high_mask));
      const __m256i sc = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w + 16 + 8 * g)));
      add_group16<T>(v, sc, g, x, sums, sumi);
    }
    add_scaled<T>(w, x, sumi, acc);
  }
};

// Q3_K, per super-block: sumi = Σ_g (sc[g] − 32)·(Σ q'·x − 4·Σx) over each 16 columns g, q' = q + 4 in [0, 7] the
// reference's q made unsigned (low 2 bits | high bit << 2), sc − 32 stored signed. Two groups per step, 8 value
// vectors out of three loads.
struct PackedQ3_K {
  static constexpr size_t kSuperBytes = kPackedQ3_KSuperBytes;
  static constexpr int kSums = 16;

  template <int T>
  HEARTH_VNNI static void super_block(const uint8_t* w, const BlockQ8_K* const (&x)[T], const int32_t* const (&sums)[T],
                                      __m256 (&acc)[T]) {
    const __m256i mask3 = _mm256_set1_epi8(0x07);
    const __m256i mask2 = _mm256_set1_epi8(0x03);
    __m256i sumi[T];
    for (int t = 0; t < T; ++t) sumi[t] = _mm256_setzero_si256();
    for (int pair = 0; pair < 8; ++pair) {
      const uint8_t* q = w + 160 + 96 * pair;
      const __m256i a = _mm256_load_si256(reinterpret_cast<const __m256i*>(q));
      const __m256i b = _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 32));
      const __m256i c = _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 64));
      // What the 16-bit shifts carry across bytes lands only in bits the masks clear.
      const __m256i v0[4] = {_mm256_and_si256(a, mask3), _mm256_and_si256(_mm256_srli_epi16(a, 3), mask3),
                             _mm256_and_si256(b, mask3), _mm256_and_si256(_mm256_srli_epi16(b, 3), mask3)};
      const __m256i v1[4] = {_mm256_and_si256(c, mask3), _mm256_and_si256(_mm256_srli_epi16(c, 3), mask3),
                             _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 6), mask2), move_bit(b, 6, 2)),
                             _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 6), mask2), move_bit(b, 7, 2))};
      add_group16<T>(v0, load_scales8(w + 16 + 16 * pair), 2 * pair, x, sums, sumi);
      add_group16<T>(v1, load_scales8(w + 24 + 16 * pair), 2 * pair + 1, x, sums, sumi);
    }
    add_scaled<T>(w, x, sumi, acc);
  }
};

// IQ4_XS, per super-block: sumi = Σ_s (sc[s] − 32)·(Σ (v + 128)·x − 128·Σx) over each sub-block s of 32 columns,
// v = kIq4NlValues[index] looked up 32 bytes at once (vpshufb) in the codebook plus 128, which makes it the unsigned
// operand vpdpbusd needs (1 to 241); the −128·Σx (x_sums) starts each sub-block's chain.
struct PackedIQ4_XS {
  static constexpr size_t kSuperBytes = kPackedIQ4_XSSuperBytes;
  static constexpr int kSums = 8;

  template <int T>
  HEARTH_VNNI static void super_block(const uint8_t* w, const BlockQ8_K* const (&x)[T], const int32_t* const (&sums)[T],
                                      __m256 (&acc)[T]) {
    constexpr int K = kChains<T>;
    const uint8_t* quants = w + 96;
    const __m256i low_mask = _mm256_set1_epi8(0x0F);
    // v + 128 = v ^ 0x80 for an int8 v: the codebook in both 128-bit lanes, as vpshufb indexes each lane alone.
    const __m256i codebook =
        _mm256_xor_si256(_mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlValues))),
                         _mm256_set1_epi8(static_cast<char>(0x80)));
    __m256i sumi[T];
    for (int t = 0; t < T; ++t) sumi[t] = _mm256_setzero_si256();
    for (int p = 0; p < 4; ++p) {
      // chain[t][h][k]: sub-block 2p + h of token t.
      __m256i chain[T][2][K];
      for (int t = 0; t < T; ++t) {
        for (int h = 0; h < 2; ++h) {
          chain[t][h][0] = _mm256_set1_epi32(sums[t][2 * p + h]);
          for (int k = 1; k < K; ++k) chain[t][h][k] = _mm256_setzero_si256();
        }
      }
      for (int c = 0; c < 8; ++c) {
        const __m256i packed = _mm256_load_si256(reinterpret_cast<const __m256i*>(quants + 256 * p + 32 * c));
        const __m256i lo = _mm256_shuffle_epi8(codebook, _mm256_and_si256(packed, low_mask));  // sub-block 2p
        const __m256i hi =
            _mm256_shuffle_epi8(codebook, _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_mask));  // 2p + 1
        for (int t = 0; t < T; ++t) {
          __m256i& a0 = chain[t][0][c % K];
          __m256i& a1 = chain[t][1][c % K];
          a0 = _mm256_dpbusd_avx_epi32(a0, lo, broadcast4(x[t]->qs + 64 * p + 4 * c));
          a1 = _mm256_dpbusd_avx_epi32(a1, hi, broadcast4(x[t]->qs + 64 * p + 32 + 4 * c));
        }
      }
      const __m256i sc0 = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w + 16 + 16 * p)));
      const __m256i sc1 = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w + 24 + 16 * p)));
      add_pair_scaled<T, K>(chain, sc0, sc1, sumi);
    }
    add_scaled<T>(w, x, sumi, acc);
  }
};

// The K-quant tiles read a super-block (928 to 1696 bytes) per step, and 12 KiB ahead serves them better than
// vnni::kPrefetchBytes: `hearth-bench-matmul-cpu 8192 4096 1`, one thread, three alternating runs, Q4_K 51-54 GB/s
// against 49-51 at 8 KiB (4 KiB: 49, 16 KiB: 53), Q6_K 49-51 against 45-48 (4 KiB: 43, 16 KiB: 51).
constexpr int64_t kKQuantPrefetchBytes = 12288;

template <class Layout>
struct PackedKQuantKernel {
  template <bool kFullGroup, int T>
  HEARTH_VNNI static void run(const TileArgs& a) {
    const int64_t n_super = a.n_cols / kQK_K;
    const BlockQ8_K* x_rows[T];
    const int32_t* sum_rows[T];
    for (int t = 0; t < T; ++t) {
      x_rows[t] = reinterpret_cast<const BlockQ8_K*>(a.x + t * a.x_stride);
      sum_rows[t] = a.x_sums + t * a.x_sums_stride;
    }
    __m256 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n_super; ++b) {
      const uint8_t* w = a.w + b * Layout::kSuperBytes;
      vnni::prefetch_ahead(w, Layout::kSuperBytes, kKQuantPrefetchBytes);
      const BlockQ8_K* x[T];
      const int32_t* sums[T];
      for (int t = 0; t < T; ++t) {
        x[t] = x_rows[t] + b;
        sums[t] = sum_rows[t] + b * Layout::kSums;
      }
      Layout::template super_block<T>(w, x, sums, acc);
    }
    vnni::store_outputs<kFullGroup, T>(a, acc);
  }
};

}  // namespace

TileKernel vnni_kquant_packed_tile_kernel(DType weight_type) {
  switch (weight_type) {
    case DType::Q3_K:
      return vnni::PackedTable<PackedKQuantKernel<PackedQ3_K>>::kernel();
    case DType::Q4_K:
      return vnni::PackedTable<PackedKQuantKernel<PackedQ4_KQ5_K<false>>>::kernel();
    case DType::Q5_K:
      return vnni::PackedTable<PackedKQuantKernel<PackedQ4_KQ5_K<true>>>::kernel();
    case DType::Q6_K:
      return vnni::PackedTable<PackedKQuantKernel<PackedQ6_K>>::kernel();
    case DType::IQ4_XS:
      return vnni::PackedTable<PackedKQuantKernel<PackedIQ4_XS>>::kernel();
    default:
      return {};
  }
}

}  // namespace hearth::kernels

#else

namespace hearth::kernels {
TileKernel vnni_kquant_packed_tile_kernel(DType) {
  return {};
}
}  // namespace hearth::kernels

#endif
