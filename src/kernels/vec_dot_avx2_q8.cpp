// AVX2 tiles for Q8_0 and Q4_0 weights times Q8_0 activations (Q4_1, Q5_0, Q5_1, IQ4_NL: vec_dot_avx2_q8_more.cpp).
//
// Reduction order of every output: per block of 32, the exact int8 products are summed pairwise into 8 int32 lanes
// (maddubs + madd), converted to fp32 and accumulated with one fma by d_w·d_x into an 8-lane accumulator; at the
// end one hsum. Both operands are within [-127, 127] resp. [-8, 7], so the 16-bit pair sums never saturate.

#include "kernels/vec_dot.h"
#include "tensor/dtype.h"

#if defined(__x86_64__)

#include "kernels/avx2_common.h"
#include "tensor/quant.h"

namespace hearth::kernels {
namespace {

using avx2::hsum;
using avx2::load_fp16;
using avx2::TileTable;

// Signed int8 values of block b of a weight row, and its scale.
struct DecodeQ8_0 {
  // A file may hold -128, whose negation wraps: the weight must be the operand made unsigned (|-128| reads as 128).
  static constexpr bool kNegatable = false;
  HEARTH_AVX2 static __m256i load(const uint8_t* row, int64_t b, float* d) {
    const BlockQ8_0* block = reinterpret_cast<const BlockQ8_0*>(row) + b;
    *d = load_fp16(&block->d);
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block->qs));
  }
};

struct DecodeQ4_0 {
  static constexpr bool kNegatable = true;  // values in [-8, 7]
  HEARTH_AVX2 static __m256i load(const uint8_t* row, int64_t b, float* d) {
    const BlockQ4_0* block = reinterpret_cast<const BlockQ4_0*>(row) + b;
    *d = load_fp16(&block->d);
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block->qs));
    const __m128i low_mask = _mm_set1_epi8(0x0F);
    const __m128i lo = _mm_and_si128(packed, low_mask);                     // elements 0..15
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(packed, 4), low_mask);  // elements 16..31
    return _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(8));
  }
};

// Σ w·x over 32 int8 pairs as 8 int32 lanes. maddubs needs an unsigned first operand: either |w| and x·sign(w)
// (the weight decoded once, reused for every token) or, when -w cannot wrap, |x| (once per token) and w·sign(x),
// which reads x from L1 instead of holding it in a register. Every product and pair sum is exact either way.
template <bool kWeightNegatable>
HEARTH_AVX2 inline __m256i dot_i8_lanes(__m256i w_abs, __m256i w, __m256i x_abs, const int8_t* x_mem) {
  const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x_mem));
  const __m256i products = kWeightNegatable ? _mm256_maddubs_epi16(x_abs, _mm256_sign_epi8(w, x))
                                            : _mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(x, w));
  return _mm256_madd_epi16(products, _mm256_set1_epi16(1));
}

template <class Decode>
struct Q8Kernel {
  template <int R, int T>
  HEARTH_AVX2 static void run(const TileArgs& a) {
    const BlockQ8_0* x[T];
    for (int t = 0; t < T; ++t) x[t] = reinterpret_cast<const BlockQ8_0*>(a.x + t * a.x_stride);
    __m256 acc[R][T];
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    }
    const int64_t n_blocks = a.n_cols / kQK8_0;
    for (int64_t b = 0; b < n_blocks; ++b) {
      __m256i x_abs[T];
      __m256 xd[T];
      for (int t = 0; t < T; ++t) {
        if constexpr (Decode::kNegatable) {
          const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t][b].qs));
          x_abs[t] = _mm256_sign_epi8(xq, xq);
        }
        xd[t] = _mm256_set1_ps(load_fp16(&x[t][b].d));
      }
      for (int r = 0; r < R; ++r) {
        float wd_scalar;
        const __m256i wq = Decode::load(a.w + r * a.w_stride, b, &wd_scalar);
        const __m256 wd = _mm256_set1_ps(wd_scalar);
        const __m256i w_abs = Decode::kNegatable ? wq : _mm256_sign_epi8(wq, wq);
        for (int t = 0; t < T; ++t) {
          const __m256i lanes = dot_i8_lanes<Decode::kNegatable>(w_abs, wq, x_abs[t], x[t][b].qs);
          // The scale d_w·d_x is the same fp32 product in every lane, whatever the tile shape.
          acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanes), _mm256_mul_ps(wd, xd[t]), acc[r][t]);
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < T; ++t) a.y[t * a.y_stride + r] = hsum(acc[r][t]);
    }
  }
};

constexpr int kQ8Rows = 4;
constexpr int kQ8Tokens = 2;

}  // namespace

TileKernel avx2_q8_tile_kernel(DType weight_type) {
  switch (weight_type) {
    case DType::Q8_0:
      return TileTable<Q8Kernel<DecodeQ8_0>, kQ8Rows, kQ8Tokens>::kernel();
    case DType::Q4_0:
      return TileTable<Q8Kernel<DecodeQ4_0>, kQ8Rows, kQ8Tokens>::kernel();
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::IQ4_NL:
      return avx2_q8_more_tile_kernel(weight_type);
    default:
      return {};
  }
}

}  // namespace hearth::kernels

#else

namespace hearth::kernels {
TileKernel avx2_q8_tile_kernel(DType) {
  return {};
}
}  // namespace hearth::kernels

#endif
