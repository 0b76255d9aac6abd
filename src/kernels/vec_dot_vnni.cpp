// AVX-VNNI tiles for packed Q8_0 and Q4_0 weights (packed.h) times Q8_0 activations.
//
// A tile is one group of 8 rows × up to 4 tokens. Per block, each token's 8 row sums start at the block's offset
// correction and take one vpdpbusd per four columns (the packed weights as the unsigned operand, the token's four
// activation bytes broadcast as the signed one), so lane r ends as row r's exact Σ w·x. Then, as the scalar
// reference does for every output, sum = sum + (d_w·d_x)·float(Σ w·x): one fp32 accumulator per output, the same
// operations in the same order for every tile shape and every batch, and the same bits as vec_dot_reference.

#include "kernels/vec_dot.h"
#include "tensor/dtype.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstring>

#include "kernels/avx2_common.h"
#include "kernels/packed.h"
#include "tensor/fp16.h"
#include "tensor/quant.h"

#define HEARTH_VNNI __attribute__((target("avx2,fma,f16c,avxvnni")))

namespace hearth::kernels {
namespace {

HEARTH_VNNI inline __m256i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm256_set1_epi32(v);
}

// Independent vpdpbusd chains per token: with few tokens one chain of 8 (or 16) dependent vpdpbusd per block would
// bound the tile by their latency, not by the loads. The chains are added exactly (integers), so they change no bit.
template <int T>
inline constexpr int kChains = T == 1 ? 4 : (T == 2 ? 2 : 1);

template <int T>
HEARTH_VNNI inline void add_chains(__m256i (&chain)[T][kChains<T>], __m256i (&sum)[T]) {
  for (int t = 0; t < T; ++t) {
    __m256i s = chain[t][0];
    for (int k = 1; k < kChains<T>; ++k) s = _mm256_add_epi32(s, chain[t][k]);
    sum[t] = s;
  }
}

// The eight unsigned weight vectors of block b and the activation bytes each multiplies.
struct PackedQ8_0 {
  static constexpr size_t kQuantBytes = kPackedQ8_0QuantBytes;
  template <int T>
  HEARTH_VNNI static void block_sums(const uint8_t* q, const BlockQ8_0* const (&x)[T], __m256i (&sum)[T]) {
    __m256i chain[T][kChains<T>];
    for (int t = 0; t < T; ++t) {
      chain[t][0] = sum[t];
      for (int k = 1; k < kChains<T>; ++k) chain[t][k] = _mm256_setzero_si256();
    }
    for (int c = 0; c < 8; ++c) {
      const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 32 * c));
      for (int t = 0; t < T; ++t) {
        __m256i& acc = chain[t][c % kChains<T>];
        acc = _mm256_dpbusd_avx_epi32(acc, w, broadcast4(x[t]->qs + 4 * c));
      }
    }
    add_chains<T>(chain, sum);
  }
};

struct PackedQ4_0 {
  static constexpr size_t kQuantBytes = kPackedQ4_0QuantBytes;
  template <int T>
  HEARTH_VNNI static void block_sums(const uint8_t* q, const BlockQ8_0* const (&x)[T], __m256i (&sum)[T]) {
    __m256i chain[T][kChains<T>];
    for (int t = 0; t < T; ++t) {
      chain[t][0] = sum[t];
      for (int k = 1; k < kChains<T>; ++k) chain[t][k] = _mm256_setzero_si256();
    }
    const __m256i low_mask = _mm256_set1_epi8(0x0F);
    for (int c = 0; c < 4; ++c) {
      const __m256i packed = _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 32 * c));
      const __m256i lo = _mm256_and_si256(packed, low_mask);                        // columns 4c + j
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_mask);  // columns 16 + 4c + j
      for (int t = 0; t < T; ++t) {
        __m256i& a0 = chain[t][(2 * c) % kChains<T>];
        __m256i& a1 = chain[t][(2 * c + 1) % kChains<T>];
        a0 = _mm256_dpbusd_avx_epi32(a0, lo, broadcast4(x[t]->qs + 4 * c));
        a1 = _mm256_dpbusd_avx_epi32(a1, hi, broadcast4(x[t]->qs + 16 + 4 * c));
      }
    }
    add_chains<T>(chain, sum);
  }
};

// Weight bytes the tile asks the cache for ahead of its loads. A packed group is one sequential stream, which the
// hardware prefetcher alone does not keep far enough ahead for one decode token: `hearth-bench-matmul-cpu 8192 4096
// 1` (weights 4x the L3, one thread) reads Q8_0 at 22 GB/s without, 41 GB/s with 8 KiB ahead (12 KiB: 44, 4 KiB:
// 32); Q4_0 53 against 50. Past the group's end it fetches the next group, which the next tile reads.
constexpr int64_t kPrefetchBytes = 8192;

template <class Layout>
struct PackedKernel {
  template <bool kFullGroup, int T>
  HEARTH_VNNI static void run(const TileArgs& a) {
    const int64_t n_blocks = a.n_cols / kQK8_0;
    const uint8_t* quants = a.w;
    const uint16_t* scales = reinterpret_cast<const uint16_t*>(a.w + n_blocks * Layout::kQuantBytes);
    const BlockQ8_0* x_rows[T];
    const int32_t* corrections[T];
    for (int t = 0; t < T; ++t) {
      x_rows[t] = reinterpret_cast<const BlockQ8_0*>(a.x + t * a.x_stride);
      corrections[t] = a.x_sums + t * a.x_sums_stride;
    }
    __m256 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n_blocks; ++b) {
      const BlockQ8_0* x[T];
      __m256i sum[T];
      for (int t = 0; t < T; ++t) {
        x[t] = x_rows[t] + b;
        sum[t] = _mm256_set1_epi32(corrections[t][b]);
      }
      const uint8_t* ahead = quants + b * Layout::kQuantBytes + kPrefetchBytes;
      for (size_t i = 0; i < Layout::kQuantBytes; i += 64)
        _mm_prefetch(reinterpret_cast<const char*>(ahead + i), _MM_HINT_T0);
      Layout::template block_sums<T>(quants + b * Layout::kQuantBytes, x, sum);
      const __m256 wd = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(scales + b * kPackRows)));
      for (int t = 0; t < T; ++t) {
        const __m256 scale = _mm256_mul_ps(wd, _mm256_set1_ps(fp16_to_fp32(x[t]->d)));
        acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(scale, _mm256_cvtepi32_ps(sum[t])));
      }
    }
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
};

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
};

constexpr int kPackedTokens = 4;

}  // namespace

TileKernel vnni_packed_tile_kernel(DType weight_type) {
  switch (weight_type) {
    case DType::Q8_0:
      return {&PackedTable<PackedKernel<PackedQ8_0>>::run, kPackRows, kPackedTokens};
    case DType::Q4_0:
      return {&PackedTable<PackedKernel<PackedQ4_0>>::run, kPackRows, kPackedTokens};
    default:
      return {};
  }
}

}  // namespace hearth::kernels

#else

namespace hearth::kernels {
TileKernel vnni_packed_tile_kernel(DType) {
  return {};
}
}  // namespace hearth::kernels

#endif

namespace hearth::kernels {

void packed_activation_corrections(DType weight_type, const BlockQ8_0* x, int64_t n_cols, int32_t* out) {
  const int32_t offset = weight_type == DType::Q8_0 ? 128 : 8;
  for (int64_t b = 0; b < n_cols / kQK8_0; ++b) {
    int32_t sum = 0;
    for (int i = 0; i < kQK8_0; ++i) sum += x[b].qs[i];
    out[b] = -offset * sum;
  }
}

}  // namespace hearth::kernels
