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

#include "kernels/packed.h"
#include "kernels/vnni_common.h"
#include "tensor/fp16.h"
#include "tensor/quant.h"

namespace hearth::kernels {
namespace {

using vnni::broadcast4;
using vnni::kChains;

// Chain 0 of each token starts at its block correction, the others at 0.
template <int T>
HEARTH_VNNI inline void start_chains(const __m256i (&sum)[T], __m256i (&chain)[T][kChains<T>]) {
  for (int t = 0; t < T; ++t) {
    chain[t][0] = sum[t];
    for (int k = 1; k < kChains<T>; ++k) chain[t][k] = _mm256_setzero_si256();
  }
}

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
    start_chains<T>(sum, chain);
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
    start_chains<T>(sum, chain);
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
      vnni::prefetch_ahead(quants + b * Layout::kQuantBytes, Layout::kQuantBytes);
      Layout::template block_sums<T>(quants + b * Layout::kQuantBytes, x, sum);
      const __m256 wd = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(scales + b * kPackRows)));
      for (int t = 0; t < T; ++t) {
        const __m256 scale = _mm256_mul_ps(wd, _mm256_set1_ps(fp16_to_fp32(x[t]->d)));
        acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(scale, _mm256_cvtepi32_ps(sum[t])));
      }
    }
    vnni::store_outputs<kFullGroup, T>(a, acc);
  }
};

}  // namespace

TileKernel vnni_packed_tile_kernel(DType weight_type) {
  switch (weight_type) {
    case DType::Q8_0:
      return vnni::PackedTable<PackedKernel<PackedQ8_0>>::kernel();
    case DType::Q4_0:
      return vnni::PackedTable<PackedKernel<PackedQ4_0>>::kernel();
    default:
      return vnni_kquant_packed_tile_kernel(weight_type);
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

int64_t packed_correction_count(DType weight_type, int64_t n_cols) {
  switch (weight_type) {
    case DType::Q8_0:
    case DType::Q4_0:
      return n_cols / kQK8_0;
    case DType::Q4_K:
    case DType::Q5_K:
      return n_cols / kQK_K * 4;
    case DType::Q3_K:
    case DType::Q6_K:
      return n_cols / kQK_K * 16;
    case DType::IQ4_XS:
      return n_cols / kQK_K * 8;
    default:
      return 0;
  }
}

void packed_activation_corrections(DType weight_type, const uint8_t* x, int64_t n_cols, int32_t* out) {
  if (weight_type == DType::Q8_0 || weight_type == DType::Q4_0) {
    const auto* blocks = reinterpret_cast<const BlockQ8_0*>(x);
    const int32_t offset = weight_type == DType::Q8_0 ? 128 : 8;
    for (int64_t b = 0; b < n_cols / kQK8_0; ++b) {
      int32_t sum = 0;
      for (int i = 0; i < kQK8_0; ++i) sum += blocks[b].qs[i];
      out[b] = -offset * sum;
    }
    return;
  }
  const auto* blocks = reinterpret_cast<const BlockQ8_K*>(x);
  for (int64_t b = 0; b < n_cols / kQK_K; ++b) {
    const int16_t* bsums = blocks[b].bsums;
    switch (weight_type) {
      case DType::Q4_K:
      case DType::Q5_K:
        for (int k = 0; k < 4; ++k) {
          // |bs| <= 32·127: each fits an int16.
          const int lo = bsums[4 * k] + bsums[4 * k + 1];
          const int hi = bsums[4 * k + 2] + bsums[4 * k + 3];
          out[4 * b + k] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(lo)) |
                                                (static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16));
        }
        break;
      case DType::Q3_K:
      case DType::Q6_K: {
        const int32_t offset = weight_type == DType::Q6_K ? 32 : 4;
        for (int g = 0; g < 16; ++g) out[16 * b + g] = -offset * bsums[g];
        break;
      }
      case DType::IQ4_XS:
        for (int s = 0; s < 8; ++s) out[8 * b + s] = -128 * (bsums[2 * s] + bsums[2 * s + 1]);
        break;
      default:
        return;
    }
  }
}

}  // namespace hearth::kernels
