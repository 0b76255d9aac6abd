// AVX-512 tiles for packed weights (packed.h), for CPUs with AVX-512 F/BW/VL and AVX512-VNNI.
//
// Every tile of two full groups (16 rows), for every packed type, runs on 512-bit vectors, 8 tokens at a time and
// the last 1 to 7 together: a weight vector is group 0's 32 bytes in the low half and group 1's in the high half,
// so one vpdpbusd multiplies 16 rows by the token's four activation bytes, broadcast from memory inside the
// instruction. Per product that is half the instructions of the 256-bit tiles (one weight load and one activation
// broadcast serve twice the rows, and the fp32 step runs on 16 lanes), so prefill is bound by vpdpbusd's own rate
// instead of by issuing everything around it, and a decode step (one token) streams both groups from one
// instruction stream.
// Each lane still ends as one row's exact integer block sum, and the fp32 step per block is the 256-bit tiles'
// (packed_tiles.inc), so every output is bitwise vec_dot_reference's.
//
// A partial last group runs packed_tiles.inc's 8-row tiles, compiled here with the EVEX vpdpbusd (AVX512-VNNI on
// 256-bit vectors), so this level needs no AVX-VNNI: AVX-512 CPUs without it (Ice Lake, Cascade Lake) run it too.

#include "kernels/vec_dot.h"
#include "tensor/dtype.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

#include "kernels/packed.h"
#include "tensor/fp16.h"
#include "tensor/quant.h"

#define HEARTH_PACKED __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

// GCC 12's AVX-512 intrinsics pass an undefined vector as the merge source of their unmasked forms
// (_mm512_inserti64x4, _mm512_cvtph_ps, _mm512_cvtepi32_ps), which -Wmaybe-uninitialized reports at every inlined
// use; no lane of it is ever read.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace hearth::kernels {
namespace {

HEARTH_PACKED inline __m256i dpbusd_pair(__m256i acc, __m256i u0, __m256i s0, __m256i u1, __m256i s1) {
  return _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(acc, u0, s0), u1, s1);
}

HEARTH_PACKED inline __m256i dpwssd(__m256i acc, __m256i a, __m256i b) {
  return _mm256_dpwssd_epi32(acc, a, b);
}

struct Wide {
  __m256i u;
};

HEARTH_PACKED inline Wide wide_weights(__m256i u) {
  return {u};
}

HEARTH_PACKED inline __m256i dpbusd_wide(__m256i acc, Wide w, __m256i s) {
  return _mm256_dpbusd_epi32(acc, w.u, s);
}

inline constexpr bool kWideOffsetInSum = true;

// vpdpbusd widens and accumulates in one instruction: no int16 sums.
inline constexpr bool kInt16Sums = false;

#include "kernels/packed_tiles.inc"

// ---- 16-row tiles on 512-bit vectors ----

inline constexpr int kWideRows = 2 * kPackRows;

// Group 0's 32 bytes at p in the low half, group 1's (`stride` bytes on) in the high half.
HEARTH_PACKED inline __m512i load_two_groups(const uint8_t* p, size_t stride) {
  const __m256i lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
  const __m256i hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(p + stride));
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// The 8 fp16 values at p (group 0) and at p + stride (group 1), as 16 fp32 lanes.
HEARTH_PACKED inline __m512 load_fp16_two_groups(const uint8_t* p, size_t stride) {
  const __m128i lo = _mm_load_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i hi = _mm_load_si128(reinterpret_cast<const __m128i*>(p + stride));
  return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
}

// The 8 bf16 values at p (group 0) and at p + stride (group 1), as 16 fp32 lanes: each the top half of its fp32.
HEARTH_PACKED inline __m512 load_bf16_two_groups(const uint8_t* p, size_t stride) {
  const __m128i lo = _mm_load_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i hi = _mm_load_si128(reinterpret_cast<const __m128i*>(p + stride));
  const __m512i bits = _mm512_cvtepu16_epi32(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
  return _mm512_castsi512_ps(_mm512_slli_epi32(bits, 16));
}

// acc + vpdpbusd(w, the four activation bytes at p on all 16 lanes), the bytes as the instruction's embedded broadcast
// memory operand ({1to16}). From the intrinsic with _mm512_set1_epi32, GCC 12 issues a vpbroadcastd of its own before
// every vpdpbusd; the fused form is one instruction fewer per product, and a tile of 8 tokens spends most of its
// instructions there: prefill runs about 7% faster (docs/performance-log.md, "decode's near fetches on every CPU"). The
// same bits: the same instruction, reading the same bytes.
HEARTH_PACKED inline __m512i dpbusd_x4(__m512i acc, __m512i w, const int8_t* p) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*reinterpret_cast<const int32_t*>(p)));
  return acc;
}

// broadcast_f32_bits on 16 lanes.
HEARTH_PACKED inline __m512 broadcast_f32_bits_512(const int32_t* p) {
  float f;
  std::memcpy(&f, p, sizeof(f));
  return _mm512_set1_ps(f);
}

// Independent vpdpbusd chains per token: 8 tokens give 8 chains, enough to cover vpdpbusd's latency; 2 to 7 take
// 2 each, one token (decode) 4.
template <int T>
inline constexpr int kWideChains = T >= 8 ? 1 : (T == 1 ? 4 : 2);

// Chain 0 of each token starts at its block's correction, the others at 0 (start_chains on 16 lanes).
template <int T, int K>
HEARTH_PACKED inline void start_wide_chains(const __m512i (&sum)[T], __m512i (&chain)[T][K]) {
  for (int t = 0; t < T; ++t) {
    chain[t][0] = sum[t];
    for (int k = 1; k < K; ++k) chain[t][k] = _mm512_setzero_si512();
  }
}

// Each token's chains added up (exact integers) into sum[t] (add_chains on 16 lanes).
template <int T, int K>
HEARTH_PACKED inline void add_wide_chains(const __m512i (&chain)[T][K], __m512i (&sum)[T]) {
  for (int t = 0; t < T; ++t) {
    sum[t] = chain[t][0];
    for (int k = 1; k < K; ++k) sum[t] = _mm512_add_epi32(sum[t], chain[t][k]);
  }
}

// Q8_0 and Q4_0 over two groups: the integer block sums of 16 rows for T tokens, each starting at sum[t].
struct WideQ8_0 {
  static constexpr size_t kQuantBytes = kPackedQ8_0QuantBytes;
  HEARTH_PACKED static __m512 row_scales(const uint8_t* p, size_t stride) { return load_fp16_two_groups(p, stride); }
  template <int T>
  HEARTH_PACKED static void block_sums(const uint8_t* q, size_t stride, const BlockQ8_0* const (&x)[T],
                                       __m512i (&sum)[T]) {
    constexpr int K = kWideChains<T>;
    __m512i chain[T][K];
    start_wide_chains<T, K>(sum, chain);
    for (int c = 0; c < 8; ++c) {
      const __m512i w = load_two_groups(q + 32 * c, stride);
      for (int t = 0; t < T; ++t) {
        __m512i& acc = chain[t][c % K];
        acc = dpbusd_x4(acc, w, x[t]->qs + 4 * c);
      }
    }
    add_wide_chains<T, K>(chain, sum);
  }
};

struct WideQ4_0 {
  static constexpr size_t kQuantBytes = kPackedQ4_0QuantBytes;
  HEARTH_PACKED static __m512 row_scales(const uint8_t* p, size_t stride) { return load_fp16_two_groups(p, stride); }
  template <int T>
  HEARTH_PACKED static void block_sums(const uint8_t* q, size_t stride, const BlockQ8_0* const (&x)[T],
                                       __m512i (&sum)[T]) {
    constexpr int K = kWideChains<T>;
    __m512i chain[T][K];
    start_wide_chains<T, K>(sum, chain);
    const __m512i low_mask = _mm512_set1_epi8(0x0F);
    for (int c = 0; c < 4; ++c) {
      const __m512i packed = load_two_groups(q + 32 * c, stride);
      const __m512i lo = _mm512_and_si512(packed, low_mask);                        // columns 4c + j
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(packed, 4), low_mask);  // columns 16 + 4c + j
      for (int t = 0; t < T; ++t) {
        __m512i& acc = chain[t][c % K];
        acc = dpbusd_x4(acc, lo, x[t]->qs + 4 * c);
        acc = dpbusd_x4(acc, hi, x[t]->qs + 16 + 4 * c);
      }
    }
    add_wide_chains<T, K>(chain, sum);
  }
};

// MXFP4 over two groups: WideQ4_0 with each code looked up as its table value plus 12 (PackedMXFP4).
struct WideMXFP4 {
  static constexpr size_t kQuantBytes = kPackedMXFP4QuantBytes;
  HEARTH_PACKED static __m512 row_scales(const uint8_t* p, size_t stride) { return load_bf16_two_groups(p, stride); }
  template <int T>
  HEARTH_PACKED static void block_sums(const uint8_t* q, size_t stride, const BlockQ8_0* const (&x)[T],
                                       __m512i (&sum)[T]) {
    constexpr int K = kWideChains<T>;
    __m512i chain[T][K];
    start_wide_chains<T, K>(sum, chain);
    const __m512i low_mask = _mm512_set1_epi8(0x0F);
    const __m512i table =
        _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kMxfp4OffsetValues.data())));
    for (int c = 0; c < 4; ++c) {
      const __m512i packed = load_two_groups(q + 32 * c, stride);
      const __m512i lo = _mm512_shuffle_epi8(table, _mm512_and_si512(packed, low_mask));  // columns 4c + j
      const __m512i hi = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(packed, 4), low_mask));
      for (int t = 0; t < T; ++t) {
        __m512i& acc = chain[t][c % K];
        acc = dpbusd_x4(acc, lo, x[t]->qs + 4 * c);
        acc = dpbusd_x4(acc, hi, x[t]->qs + 16 + 4 * c);
      }
    }
    add_wide_chains<T, K>(chain, sum);
  }
};

// Each of a wide tile's two group streams asks for the bytes at the same place one tile (two groups, 2 · w_stride)
// ahead, so the distance follows the row length. A fixed distance does not: 12 KiB ahead is less than one group of a
// 3B row, so group 0's fetches would fall on group 1's bytes, which the same tile is already reading (decode runs
// compared in docs/performance-log.md, "the tile dispatch compiled for its tiles").

// Group 0's distance ahead at byte `at` of its group, given the tile's `ahead` for group 1 (both groups the same
// when it is at least one group). A distance shorter than a group runs group 1's fetches into the next tile's group
// 0, while group 0's would fall on group 1, which this tile is reading: those go to the next tile's group 1 instead,
// so neither of its streams starts cold.
inline int64_t group0_ahead(int64_t at, int64_t ahead, size_t group_bytes) {
  const auto g = static_cast<int64_t>(group_bytes);
  return ahead < g && at + ahead >= g ? ahead + 2 * g : ahead;
}

// Two full groups × T tokens of a Q8_0-style layout: per block, acc[t] += (d_w·d_x)·float(Σ w·x), lane r = row r
// (rows 8..15 from group 1), the 256-bit tiles' fp32 step on 16 lanes.
template <class Layout>
struct WideKernel {
  // Block b, its quants and scales at `at` in each group.
  template <int T>
  HEARTH_PACKED static void block(const TileArgs& a, int64_t b, PackedBlockAt at, __m512 (&acc)[T]) {
    const BlockQ8_0* x[T];
    __m512i sum[T];
    for (int t = 0; t < T; ++t) {
      x[t] = reinterpret_cast<const BlockQ8_0*>(a.x + t * a.x_stride) + b;
      sum[t] = _mm512_set1_epi32(a.x_sums[t * a.x_sums_stride + 2 * b]);
    }
    Layout::template block_sums<T>(a.w + at.quants, a.w_stride, x, sum);
    const __m512 wd = Layout::row_scales(a.w + at.scales, a.w_stride);
    for (int t = 0; t < T; ++t) {
      const __m512 scale = _mm512_mul_ps(wd, broadcast_f32_bits_512(a.x_sums + t * a.x_sums_stride + 2 * b + 1));
      acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(scale, _mm512_cvtepi32_ps(sum[t])));
    }
  }

  // Pair by pair (packed_block_at), each pair's bytes fetched ahead in both groups where that pays.
  template <int T>
  HEARTH_PACKED static void run(const TileArgs& a) {
    constexpr size_t kQ = Layout::kQuantBytes;
    constexpr size_t kPair = 2 * (kQ + kPackedScaleBytes);
    const int64_t n_blocks = a.n_cols / kQK8_0;
    __m512 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    const auto ahead = static_cast<int64_t>(T >= 4 ? 2 * a.w_stride : decode_fetch_distance(a.w_stride));
    int64_t b = 0;
    for (size_t base = 0; b + 2 <= n_blocks; b += 2, base += kPair) {
      if (ahead != 0) {
        prefetch_ahead(a.w + base, kPair, group0_ahead(static_cast<int64_t>(base), ahead, a.w_stride));
        prefetch_ahead(a.w + base + a.w_stride, kPair, ahead);
      }
      block<T>(a, b, PackedBlockAt{base, base + 2 * kQ}, acc);
      block<T>(a, b + 1, PackedBlockAt{base + kQ, base + 2 * kQ + kPackedScaleBytes}, acc);
    }
    if (b < n_blocks) block<T>(a, b, packed_block_at(n_blocks, b, kQ), acc);
    for (int t = 0; t < T; ++t) _mm512_storeu_ps(a.y + t * a.y_stride, acc[t]);
  }
};

// The 8 bytes at p (group 0) and at p + stride (group 1), in one 128-bit vector.
HEARTH_PACKED inline __m128i load8_two_groups(const uint8_t* p, size_t stride) {
  return _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)),
                            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + stride)));
}

// move_bit on 512-bit vectors.
HEARTH_PACKED inline __m512i move_bit_512(__m512i v, int from, int to) {
  const __m512i mask = _mm512_set1_epi8(static_cast<char>(1 << to));
  if (from < to) return _mm512_and_si512(_mm512_slli_epi16(v, to - from), mask);
  if (from > to) return _mm512_and_si512(_mm512_srli_epi16(v, from - to), mask);
  return _mm512_and_si512(v, mask);
}

// Sub-blocks 2p and 2p + 1 of each token (chain[t][0], chain[t][1]), each times its 16 rows' scales, into sumi
// (add_pair_scaled on 16 lanes; Q4_K, Q5_K and IQ4_XS).
template <int T>
HEARTH_PACKED inline void add_pair_scaled_512(const __m512i (&chain)[T][2], __m512i sc0, __m512i sc1,
                                              __m512i (&sumi)[T]) {
  for (int t = 0; t < T; ++t) {
    sumi[t] = _mm512_add_epi32(sumi[t], _mm512_mullo_epi32(chain[t][0], sc0));
    sumi[t] = _mm512_add_epi32(sumi[t], _mm512_mullo_epi32(chain[t][1], sc1));
  }
}

// Q4_K and Q5_K over two groups: PackedQ4_KQ5_K's steps on 16 lanes.
template <bool kQ5>
struct WideQ4_KQ5_K {
  static constexpr size_t kSuperBytes = kQ5 ? kPackedQ5_KSuperBytes : kPackedQ4_KSuperBytes;
  static constexpr int kSums = 4;
  static constexpr bool kPrefetchToL2 = !kQ5;
  // Q4_K's decode tiles (1 to 3 tokens) take the high nibbles without shifting them (below); Q5_K's fifth bit has
  // no room above them.
  template <int T>
  static constexpr bool kHighInPlace = !kQ5 && T < 4;

  template <int T>
  HEARTH_PACKED static void super_block(const uint8_t* w, size_t stride, const BlockQ8_K* const (&x)[T],
                                        const int32_t* const (&sums)[T], __m512 (&acc)[T]) {
    const uint8_t* quants = w + 160;
    const __m512i low_mask = _mm512_set1_epi8(0x0F);
    const __m512i high_mask = _mm512_set1_epi8(static_cast<char>(0xF0));
    __m512i sumi[T];
    for (int t = 0; t < T; ++t) sumi[t] = _mm512_setzero_si512();
    for (int p = 0; p < 4; ++p) {
      __m512i chain[T][2];  // sub-block 2p + h of token t
      for (int t = 0; t < T; ++t) chain[t][0] = chain[t][1] = _mm512_setzero_si512();
      [[maybe_unused]] __m512i fifth = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int c = 0; c < 8; ++c) {
        const __m512i packed = load_two_groups(quants + 256 * p + 32 * c, stride);
        __m512i lo = _mm512_and_si512(packed, low_mask);
        // Decode keeps the high nibbles in place (16 × the value, still an unsigned byte), so chain[t][1] sums 16 ×
        // the products and is shifted back once per sub-block (exact: every term is a multiple of 16). That saves
        // the shift per weight vector that prefill shares among its tokens.
        __m512i hi = kHighInPlace<T> ? _mm512_and_si512(packed, high_mask)
                                     : _mm512_and_si512(_mm512_srli_epi16(packed, 4), low_mask);
        if constexpr (kQ5) {
          const int k = c % 4;
          if (k == 0) fifth = load_two_groups(w + 1184 + 64 * p + 32 * (c / 4), stride);
          lo = _mm512_or_si512(lo, move_bit_512(fifth, 2 * k, 4));
          hi = _mm512_or_si512(hi, move_bit_512(fifth, 2 * k + 1, 4));
        }
        for (int t = 0; t < T; ++t) {
          const int8_t* xs = x[t]->qs + 64 * p + 4 * c;
          chain[t][0] = dpbusd_x4(chain[t][0], lo, xs);
          chain[t][1] = dpbusd_x4(chain[t][1], hi, xs + 32);
        }
      }
      if constexpr (kHighInPlace<T>) {
        for (int t = 0; t < T; ++t) chain[t][1] = _mm512_srai_epi32(chain[t][1], 4);
      }
      const __m512i sc0 = _mm512_cvtepu8_epi32(load8_two_groups(w + 32 + 16 * p, stride));
      const __m512i sc1 = _mm512_cvtepu8_epi32(load8_two_groups(w + 40 + 16 * p, stride));
      add_pair_scaled_512<T>(chain, sc0, sc1, sumi);
    }
    __m512i summ[T];
    for (int t = 0; t < T; ++t) summ[t] = _mm512_setzero_si512();
    for (int k = 0; k < 4; ++k) {
      const __m128i m0 = _mm_load_si128(reinterpret_cast<const __m128i*>(w + 96 + 16 * k));
      const __m128i m1 = _mm_load_si128(reinterpret_cast<const __m128i*>(w + stride + 96 + 16 * k));
      const __m512i m = _mm512_cvtepu8_epi16(_mm256_inserti128_si256(_mm256_castsi128_si256(m0), m1, 1));
      for (int t = 0; t < T; ++t) summ[t] = _mm512_dpwssd_epi32(summ[t], m, _mm512_set1_epi32(sums[t][k]));
    }
    const __m512 wd = load_fp16_two_groups(w, stride);
    const __m512 wdmin = load_fp16_two_groups(w + 16, stride);
    for (int t = 0; t < T; ++t) {
      const __m512 xd = _mm512_set1_ps(x[t]->d);
      const __m512 d = _mm512_mul_ps(wd, xd);
      const __m512 dmin = _mm512_mul_ps(wdmin, xd);
      const __m512 term = _mm512_sub_ps(_mm512_mul_ps(d, _mm512_cvtepi32_ps(sumi[t])),
                                        _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(summ[t])));
      acc[t] = _mm512_add_ps(acc[t], term);
    }
  }
};

// add_group16 on 16 lanes: sumi[t] += sc·(Σ v·x − o·Σx) for the 16 columns of group g (the −o·Σx starts the chain).
template <int T>
HEARTH_PACKED inline void add_group16_512(const __m512i (&v)[4], __m512i sc, int g, const BlockQ8_K* const (&x)[T],
                                          const int32_t* const (&sums)[T], __m512i (&sumi)[T]) {
  for (int t = 0; t < T; ++t) {
    const int8_t* xs = x[t]->qs + 16 * g;
    __m512i s = _mm512_set1_epi32(sums[t][g]);
    for (int k = 0; k < 4; ++k) s = dpbusd_x4(s, v[k], xs + 4 * k);
    sumi[t] = _mm512_add_epi32(sumi[t], _mm512_mullo_epi32(s, sc));
  }
}

// add_scaled on 16 lanes: acc[t] += (d_w·d_x)·float(sumi[t]).
template <int T>
HEARTH_PACKED inline void add_scaled_512(const uint8_t* w, size_t stride, const BlockQ8_K* const (&x)[T],
                                         const __m512i (&sumi)[T], __m512 (&acc)[T]) {
  const __m512 wd = load_fp16_two_groups(w, stride);
  for (int t = 0; t < T; ++t) {
    const __m512 d = _mm512_mul_ps(wd, _mm512_set1_ps(x[t]->d));
    acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(d, _mm512_cvtepi32_ps(sumi[t])));
  }
}

// Q6_K over two groups: PackedQ6_K's steps on 16 lanes.
struct WideQ6_K {
  static constexpr size_t kSuperBytes = kPackedQ6_KSuperBytes;
  static constexpr int kSums = 16;
  static constexpr bool kPrefetchToL2 = false;

  template <int T>
  HEARTH_PACKED static void super_block(const uint8_t* w, size_t stride, const BlockQ8_K* const (&x)[T],
                                        const int32_t* const (&sums)[T], __m512 (&acc)[T]) {
    const __m512i low_mask = _mm512_set1_epi8(0x0F);
    const __m512i high_mask = _mm512_set1_epi8(0x30);
    __m512i sumi[T];
    for (int t = 0; t < T; ++t) sumi[t] = _mm512_setzero_si512();
    for (int g = 0; g < 16; ++g) {
      const uint8_t* q = w + 160 + 96 * g;
      const __m512i a = load_two_groups(q, stride);
      const __m512i b = load_two_groups(q + 32, stride);
      const __m512i h = load_two_groups(q + 64, stride);
      __m512i v[4];
      v[0] = _mm512_or_si512(_mm512_and_si512(a, low_mask), _mm512_and_si512(_mm512_slli_epi16(h, 4), high_mask));
      v[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(a, 4), low_mask),
                             _mm512_and_si512(_mm512_slli_epi16(h, 2), high_mask));
      v[2] = _mm512_or_si512(_mm512_and_si512(b, low_mask), _mm512_and_si512(h, high_mask));
      v[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(b, 4), low_mask),
                             _mm512_and_si512(_mm512_srli_epi16(h, 2), high_mask));
      add_group16_512<T>(v, _mm512_cvtepi8_epi32(load8_two_groups(w + 16 + 8 * g, stride)), g, x, sums, sumi);
    }
    add_scaled_512<T>(w, stride, x, sumi, acc);
  }
};

// Q3_K over two groups: PackedQ3_K's steps on 16 lanes.
struct WideQ3_K {
  static constexpr size_t kSuperBytes = kPackedQ3_KSuperBytes;
  static constexpr int kSums = 16;
  static constexpr bool kPrefetchToL2 = false;

  template <int T>
  HEARTH_PACKED static void super_block(const uint8_t* w, size_t stride, const BlockQ8_K* const (&x)[T],
                                        const int32_t* const (&sums)[T], __m512 (&acc)[T]) {
    const __m512i mask3 = _mm512_set1_epi8(0x07);
    const __m512i mask2 = _mm512_set1_epi8(0x03);
    __m512i sumi[T];
    for (int t = 0; t < T; ++t) sumi[t] = _mm512_setzero_si512();
    for (int pair = 0; pair < 8; ++pair) {
      const uint8_t* q = w + 160 + 96 * pair;
      const __m512i a = load_two_groups(q, stride);
      const __m512i b = load_two_groups(q + 32, stride);
      const __m512i c = load_two_groups(q + 64, stride);
      const __m512i v0[4] = {_mm512_and_si512(a, mask3), _mm512_and_si512(_mm512_srli_epi16(a, 3), mask3),
                             _mm512_and_si512(b, mask3), _mm512_and_si512(_mm512_srli_epi16(b, 3), mask3)};
      const __m512i v1[4] = {_mm512_and_si512(c, mask3), _mm512_and_si512(_mm512_srli_epi16(c, 3), mask3),
                             _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(a, 6), mask2), move_bit_512(b, 6, 2)),
                             _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(c, 6), mask2), move_bit_512(b, 7, 2))};
      add_group16_512<T>(v0, _mm512_cvtepi8_epi32(load8_two_groups(w + 16 + 16 * pair, stride)), 2 * pair, x, sums,
                         sumi);
      add_group16_512<T>(v1, _mm512_cvtepi8_epi32(load8_two_groups(w + 24 + 16 * pair, stride)), 2 * pair + 1, x, sums,
                         sumi);
    }
    add_scaled_512<T>(w, stride, x, sumi, acc);
  }
};

// IQ4_XS over two groups: PackedIQ4_XS's steps on 16 lanes (vpshufb looks up within each 128-bit lane, so the
// codebook is in all four).
struct WideIQ4_XS {
  static constexpr size_t kSuperBytes = kPackedIQ4_XSSuperBytes;
  static constexpr int kSums = 8;
  static constexpr bool kPrefetchToL2 = true;

  template <int T>
  HEARTH_PACKED static void super_block(const uint8_t* w, size_t stride, const BlockQ8_K* const (&x)[T],
                                        const int32_t* const (&sums)[T], __m512 (&acc)[T]) {
    const uint8_t* quants = w + 96;
    const __m512i low_mask = _mm512_set1_epi8(0x0F);
    const __m512i codebook =
        _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlValues))),
                         _mm512_set1_epi8(static_cast<char>(0x80)));
    __m512i sumi[T];
    for (int t = 0; t < T; ++t) sumi[t] = _mm512_setzero_si512();
    for (int p = 0; p < 4; ++p) {
      __m512i chain[T][2];  // sub-block 2p + h of token t
      for (int t = 0; t < T; ++t) {
        for (int h = 0; h < 2; ++h) chain[t][h] = _mm512_set1_epi32(sums[t][2 * p + h]);
      }
      for (int c = 0; c < 8; ++c) {
        const __m512i packed = load_two_groups(quants + 256 * p + 32 * c, stride);
        const __m512i lo = _mm512_shuffle_epi8(codebook, _mm512_and_si512(packed, low_mask));
        const __m512i hi = _mm512_shuffle_epi8(codebook, _mm512_and_si512(_mm512_srli_epi16(packed, 4), low_mask));
        for (int t = 0; t < T; ++t) {
          chain[t][0] = dpbusd_x4(chain[t][0], lo, x[t]->qs + 64 * p + 4 * c);
          chain[t][1] = dpbusd_x4(chain[t][1], hi, x[t]->qs + 64 * p + 32 + 4 * c);
        }
      }
      const __m512i sc0 = _mm512_cvtepi8_epi32(load8_two_groups(w + 16 + 16 * p, stride));
      const __m512i sc1 = _mm512_cvtepi8_epi32(load8_two_groups(w + 24 + 16 * p, stride));
      add_pair_scaled_512<T>(chain, sc0, sc1, sumi);
    }
    add_scaled_512<T>(w, stride, x, sumi, acc);
  }
};

// prefetch_ahead into the L2 only (prefetcht1), leaving the last step to the L1's own prefetcher: the layouts that
// set kPrefetchToL2 use it for tiles of 4 and 8 tokens (prefill), where their weights stay in the L1 for several
// tokens' work. Decode (1 to 3 tokens) prefetches into the L1 for every layout, as far ahead as
// decode_fetch_distance says (packed.h: one tile ahead when the bytes in flight fit the L1D, a short distance
// otherwise). Into the L1, decode streams Q4_K and IQ4_XS faster than into the L2 (docs/performance-log.md, "the read
// bandwidth on 2 MiB pages"), while a long prefill runs faster with prefetcht1, so prefill keeps it.
HEARTH_PACKED inline void prefetch_ahead_l2(const uint8_t* p, size_t n, int64_t distance) {
  for (size_t i = 0; i < n; i += 64) _mm_prefetch(reinterpret_cast<const char*>(p + distance + i), _MM_HINT_T1);
}

// Two full groups × T tokens of a K-quant layout, super-block by super-block.
template <class Layout>
struct WideKQuantKernel {
  template <int T>
  HEARTH_PACKED static void run(const TileArgs& a) {
    __m512 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    const auto ahead = static_cast<int64_t>(T >= 4 ? 2 * a.w_stride : decode_fetch_distance(a.w_stride));
    for (int64_t b = 0; b < a.n_cols / kQK_K; ++b) {
      const uint8_t* w = a.w + b * Layout::kSuperBytes;
      if constexpr (Layout::kPrefetchToL2 && T >= 4) {
        prefetch_ahead_l2(w, Layout::kSuperBytes, ahead);
        prefetch_ahead_l2(w + a.w_stride, Layout::kSuperBytes, ahead);
      } else if (ahead != 0) {
        prefetch_ahead(w, Layout::kSuperBytes, group0_ahead(b * Layout::kSuperBytes, ahead, a.w_stride));
        prefetch_ahead(w + a.w_stride, Layout::kSuperBytes, ahead);
      }
      const BlockQ8_K* x[T];
      const int32_t* sums[T];
      for (int t = 0; t < T; ++t) {
        x[t] = reinterpret_cast<const BlockQ8_K*>(a.x + t * a.x_stride) + b;
        sums[t] = a.x_sums + t * a.x_sums_stride + b * Layout::kSums;
      }
      Layout::template super_block<T>(w, a.w_stride, x, sums, acc);
    }
    for (int t = 0; t < T; ++t) _mm512_storeu_ps(a.y + t * a.y_stride, acc[t]);
  }
};

// Tokens [t0, t0 + n) of tile a.
inline TileArgs tokens_of(const TileArgs& a, int t0, int n) {
  TileArgs s = a;
  s.x = a.x + static_cast<size_t>(t0) * a.x_stride;
  s.x_sums = a.x_sums + static_cast<size_t>(t0) * a.x_sums_stride;
  s.y = a.y + static_cast<size_t>(t0) * a.y_stride;
  s.n_tokens = n;
  return s;
}

inline constexpr int kWideTokens = 8;

// Up to 16 rows × 8 tokens: two full groups take the 512-bit tiles, 8 tokens at a time and the last 1 to 7 in one tile;
// a partial group, packed_tiles.inc's 8-row tiles (their table takes at most kPackedTokens tokens). A tile pays a fixed
// cost per weight vector (its load, nibble split and scales) beside each token's vpdpbusd, so one tile of 6 costs less
// than a tile of 4 and one of 2: a later chat turn's 30 new tokens (8 + 8 + 8 + 6) cost what 30 tokens' work costs, not
// 32's (docs/performance-log.md, "decode's near fetches on every CPU"). The same bits: a lane's integer sums are exact
// in any chain count.
template <class Wide, class Narrow>
struct WideTable {
  HEARTH_PACKED static void narrow(const TileArgs& a) {
    for (int t = 0; t < a.n_tokens; t += kPackedTokens) {
      Narrow::run(tokens_of(a, t, std::min(kPackedTokens, a.n_tokens - t)));
    }
  }
  HEARTH_PACKED static void run(const TileArgs& a) {
    if (a.n_rows != kWideRows) return narrow(a);
    int t = 0;
    for (; a.n_tokens - t >= 8; t += 8) Wide::template run<8>(tokens_of(a, t, 8));
    switch (a.n_tokens - t) {
      case 7:
        return Wide::template run<7>(tokens_of(a, t, 7));
      case 6:
        return Wide::template run<6>(tokens_of(a, t, 6));
      case 5:
        return Wide::template run<5>(tokens_of(a, t, 5));
      case 4:
        return Wide::template run<4>(tokens_of(a, t, 4));
      case 1:
        return Wide::template run<1>(tokens_of(a, t, 1));
      case 2:
        return Wide::template run<2>(tokens_of(a, t, 2));
      case 3:
        return Wide::template run<3>(tokens_of(a, t, 3));
      default:
        return;
    }
  }
  static constexpr TileKernel kernel() { return {&run, kWideRows, kWideTokens, kWideRows}; }
};

}  // namespace

constinit const TileKernel kTilePackedAvx512VnniQ8_0 =
    WideTable<WideKernel<WideQ8_0>, PackedTable<PackedKernel<PackedQ8_0>>>::kernel();
constinit const TileKernel kTilePackedAvx512VnniQ4_0 =
    WideTable<WideKernel<WideQ4_0>, PackedTable<PackedKernel<PackedQ4_0>>>::kernel();
constinit const TileKernel kTilePackedAvx512VnniQ3_K =
    WideTable<WideKQuantKernel<WideQ3_K>, PackedTable<PackedKQuantKernel<PackedQ3_K>>>::kernel();
constinit const TileKernel kTilePackedAvx512VnniQ4_K =
    WideTable<WideKQuantKernel<WideQ4_KQ5_K<false>>, PackedTable<PackedKQuantKernel<PackedQ4_KQ5_K<false>>>>::kernel();
constinit const TileKernel kTilePackedAvx512VnniQ5_K =
    WideTable<WideKQuantKernel<WideQ4_KQ5_K<true>>, PackedTable<PackedKQuantKernel<PackedQ4_KQ5_K<true>>>>::kernel();
constinit const TileKernel kTilePackedAvx512VnniQ6_K =
    WideTable<WideKQuantKernel<WideQ6_K>, PackedTable<PackedKQuantKernel<PackedQ6_K>>>::kernel();
constinit const TileKernel kTilePackedAvx512VnniIQ4_XS =
    WideTable<WideKQuantKernel<WideIQ4_XS>, PackedTable<PackedKQuantKernel<PackedIQ4_XS>>>::kernel();
constinit const TileKernel kTilePackedAvx512VnniMXFP4 =
    WideTable<WideKernel<WideMXFP4>, PackedTable<PackedKernel<PackedMXFP4>>>::kernel();

}  // namespace hearth::kernels

#else

namespace hearth::kernels {
constinit const TileKernel kTilePackedAvx512VnniQ8_0{};
constinit const TileKernel kTilePackedAvx512VnniQ4_0{};
constinit const TileKernel kTilePackedAvx512VnniQ3_K{};
constinit const TileKernel kTilePackedAvx512VnniQ4_K{};
constinit const TileKernel kTilePackedAvx512VnniQ5_K{};
constinit const TileKernel kTilePackedAvx512VnniQ6_K{};
constinit const TileKernel kTilePackedAvx512VnniIQ4_XS{};
constinit const TileKernel kTilePackedAvx512VnniMXFP4{};
}  // namespace hearth::kernels

#endif
