#pragma once
// Shared pieces of the AVX2 kernels. Include only from translation units that guard on x86-64. Every function
// carries HEARTH_AVX2 so the rest of the binary stays baseline x86-64 and the ISA is chosen at run time.

#include <immintrin.h>

#include <array>
#include <cstdint>
#include <utility>

#include "kernels/vec_dot.h"
#include "tensor/quant.h"

#define HEARTH_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace hearth::kernels::avx2 {

// Sum of the 8 lanes in one fixed order: (lo128 + hi128), then pairs, then the last two.
HEARTH_AVX2 inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Exact integer sum of the 8 int32 lanes (callers keep it within int32).
HEARTH_AVX2 inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

// Exact integer sums of the 8 int32 lanes of a and of b, reduced together (one hadd tree instead of two).
HEARTH_AVX2 inline void hsum_i32_pair(__m256i a, __m256i b, int* sum_a, int* sum_b) {
  const __m128i a4 = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
  const __m128i b4 = _mm_add_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
  const __m128i ab2 = _mm_hadd_epi32(a4, b4);    // a01+a23.. | b..
  const __m128i ab1 = _mm_hadd_epi32(ab2, ab2);  // Σa, Σb, Σa, Σb
  *sum_a = _mm_cvtsi128_si32(ab1);
  *sum_b = _mm_extract_epi32(ab1, 1);
}

HEARTH_AVX2 inline float load_fp16(const uint16_t* p) {
  return _cvtsh_ss(*p);
}

// Weight bytes a K-quant tile asks the cache for ahead of its loads. Decode streams each weight row from DRAM once;
// for Q4_K the hardware prefetcher alone leaves a thread waiting on memory (a profile puts the samples on the weight
// loads). The Q8_0/Q4_0 and F16/BF16 tiles do not fetch ahead: it gains them nothing.
inline constexpr int64_t kPrefetchBytes = 2048;

// Prefetches the bytes [p, p + n) of one weight row into L1, one cache line at a time. Reading past the end of a
// mapping is harmless for a prefetch (it never faults).
HEARTH_AVX2 inline void prefetch_lines(const uint8_t* p, int64_t n) {
  for (int64_t i = 0; i < n; i += 64) _mm_prefetch(reinterpret_cast<const char*>(p + i), _MM_HINT_T0);
}

// TileTable<Kernel, R, T>::run dispatches a TileArgs to Kernel::run<n_rows, n_tokens>, so every tile shape is its
// own fully unrolled instance. Kernel::run must give each output the same arithmetic for every shape.
template <class Kernel, int kMaxRows, int kMaxTokens>
struct TileTable {
  template <int... kIndex>
  static constexpr std::array<TileFn, sizeof...(kIndex)> make(std::integer_sequence<int, kIndex...>) {
    return {&Kernel::template run<kIndex / kMaxTokens + 1, kIndex % kMaxTokens + 1>...};
  }
  static constexpr std::array<TileFn, kMaxRows* kMaxTokens> kTable =
      make(std::make_integer_sequence<int, kMaxRows * kMaxTokens>{});

  static void run(const TileArgs& args) { kTable[(args.n_rows - 1) * kMaxTokens + (args.n_tokens - 1)](args); }
  static constexpr TileKernel kernel() { return {&run, kMaxRows, kMaxTokens}; }
};

template <int T>
HEARTH_AVX2 inline void activation_blocks(const TileArgs& a, int64_t b, const BlockQ8_K* (&x)[T]) {
  for (int t = 0; t < T; ++t) x[t] = reinterpret_cast<const BlockQ8_K*>(a.x + t * a.x_stride) + b;
}

// The tile driver of the Q8_K-activation weight types: for each 256-element super-block, RowKernel::row<T> adds
// that block's contribution to acc[0, T), one scalar fp32 accumulator per output, exactly as the scalar reference
// does; the tile shape changes no output's arithmetic.
template <class Block, class RowKernel>
struct KQuantKernel {
  template <int R, int T>
  HEARTH_AVX2 static void run(const TileArgs& a) {
    float acc[R][T] = {};
    const int64_t n_blocks = a.n_cols / kQK_K;
    for (int64_t b = 0; b < n_blocks; ++b) {
      const BlockQ8_K* x[T];
      activation_blocks<T>(a, b, x);
      for (int r = 0; r < R; ++r) {
        const Block& w = reinterpret_cast<const Block*>(a.w + r * a.w_stride)[b];
        avx2::prefetch_lines(reinterpret_cast<const uint8_t*>(&w) + avx2::kPrefetchBytes, sizeof(Block));
        RowKernel::template row<T>(w, x, acc[r]);
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < T; ++t) a.y[t * a.y_stride + r] = acc[r][t];
    }
  }
};

inline constexpr int kKQuantRows = 4;
// Q4_K and Q2_K stream from DRAM about twice as fast two rows at a time, while Q6_K wants four and the others do not
// care (docs/performance-log.md, "Quiet run on a faster machine"); the rows of a tile never change an output's bits.
inline constexpr int kKQuantRowsSmallBlocks = 2;
inline constexpr int kKQuantTokens = 2;

}  // namespace hearth::kernels::avx2
