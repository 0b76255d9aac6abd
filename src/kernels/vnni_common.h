#pragma once
// Shared pieces of the AVX-VNNI tiles for packed weights (packed.h): vec_dot_vnni.cpp (Q8_0, Q4_0) and
// vec_dot_vnni_kquant.cpp (Q4_K, Q6_K). Include only from translation units that guard on x86-64.

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/packed.h"
#include "kernels/vec_dot.h"

#define HEARTH_VNNI __attribute__((target("avx2,fma,f16c,avxvnni")))

namespace hearth::kernels::vnni {

HEARTH_VNNI inline __m256i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm256_set1_epi32(v);
}

// Independent vpdpbusd chains per token: with few tokens one chain of 8 (or 16) dependent vpdpbusd per block would
// bound the tile by their latency, not by the loads. The chains are added exactly (integers), so they change no bit.
template <int T>
inline constexpr int kChains = T == 1 ? 4 : (T == 2 ? 2 : 1);

// Weight bytes the tile asks the cache for ahead of its loads. A packed group is one sequential stream, which the
// hardware prefetcher alone does not keep far enough ahead for one decode token: `hearth-bench-matmul-cpu 8192 4096
// 1` (weights 4x the L3, one thread) reads Q8_0 at 22 GB/s without, 41 GB/s with 8 KiB ahead (12 KiB: 44, 4 KiB:
// 32); Q4_0 53 against 50. Past the group's end it fetches the next group, which the next tile reads.
inline constexpr int64_t kPrefetchBytes = 8192;

// Asks for the cache lines of [p + distance, p + distance + n).
HEARTH_VNNI inline void prefetch_ahead(const uint8_t* p, size_t n, int64_t distance = kPrefetchBytes) {
  for (size_t i = 0; i < n; i += 64) _mm_prefetch(reinterpret_cast<const char*>(p + distance + i), _MM_HINT_T0);
}

// Writes token t's 8 row outputs (acc[t] lane r = row r); a partial last group writes its n_rows real rows only.
template <bool kFullGroup, int T>
HEARTH_VNNI inline void store_outputs(const TileArgs& a, const __m256 (&acc)[T]) {
  for (int t = 0; t < T; ++t) {
    float* y = a.y + t * a.y_stride;
    if constexpr (kFullGroup) {
      _mm256_storeu_ps(y, acc[t]);
    } else {
      alignas(32) float lanes[kPackRows];
      _mm256_store_ps(lanes, acc[t]);
      std::memcpy(y, lanes, sizeof(float) * a.n_rows);
    }
  }
}

inline constexpr int kPackedTokens = 4;

// Two instances per token count: a full group (one 8-lane store) and a partial last group (n_rows < 8).
template <class Kernel>
struct PackedTable {
  template <int T>
  static void dispatch_rows(const TileArgs& a) {
    if (a.n_rows == kPackRows) {
      Kernel::template run<true, T>(a);
    } else {
      Kernel::template run<false, T>(a);
    }
  }
  static void run(const TileArgs& a) {
    switch (a.n_tokens) {
      case 1:
        return dispatch_rows<1>(a);
      case 2:
        return dispatch_rows<2>(a);
      case 3:
        return dispatch_rows<3>(a);
      default:
        return dispatch_rows<4>(a);
    }
  }
  static TileKernel kernel() { return {&run, kPackRows, kPackedTokens}; }
};

}  // namespace hearth::kernels::vnni
