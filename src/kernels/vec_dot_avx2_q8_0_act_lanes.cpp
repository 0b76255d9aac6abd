// AVX2 tiles for Q8_0 and Q4_0 weights times Q8_0 activations, the block sums in fp32 lanes (Reduction::kLanes in
// weight_types.h; Q4_1, Q5_0, Q5_1, IQ4_NL: vec_dot_avx2_q8_0_act_in_order.cpp).
//
// Reduction order of every output: per block of 32, the exact int8 products are summed (maddubs + madd, then the
// lanes of four blocks at once by hadd) into the block's exact int32 sum; blocks 4g + k are accumulated with one fma
// by d_w·d_x into lane k of a 4-lane fp32 accumulator, the last n_blocks % 4 into a scalar one; at the end
// (lane 0 + lane 2) + (lane 1 + lane 3) + the scalar. The same operations whatever the tile shape, so batch size and
// threads never change a bit. Both operands are within [-127, 127] resp. [-8, 7], so the 16-bit pair sums never
// saturate.

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

// Signed int8 values of block b of a weight row, and its fp16 scale.
struct DecodeQ8_0 {
  // A file may hold -128, whose negation wraps: the weight must be the operand made unsigned (|-128| reads as 128).
  static constexpr bool kNegatable = false;
  HEARTH_AVX2 static __m256i load(const uint8_t* row, int64_t b) {
    const BlockQ8_0* block = reinterpret_cast<const BlockQ8_0*>(row) + b;
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block->qs));
  }
  static uint16_t scale(const uint8_t* row, int64_t b) { return (reinterpret_cast<const BlockQ8_0*>(row) + b)->d; }
};

struct DecodeQ4_0 {
  static constexpr bool kNegatable = true;  // values in [-8, 7]
  HEARTH_AVX2 static __m256i load(const uint8_t* row, int64_t b) {
    const BlockQ4_0* block = reinterpret_cast<const BlockQ4_0*>(row) + b;
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block->qs));
    const __m128i low_mask = _mm_set1_epi8(0x0F);
    const __m128i lo = _mm_and_si128(packed, low_mask);                     // elements 0..15
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(packed, 4), low_mask);  // elements 16..31
    return _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(8));
  }
  static uint16_t scale(const uint8_t* row, int64_t b) { return (reinterpret_cast<const BlockQ4_0*>(row) + b)->d; }
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

// The exact int32 sums of four blocks' lanes, block k in lane k.
HEARTH_AVX2 inline __m128i block_sums4(__m256i l0, __m256i l1, __m256i l2, __m256i l3) {
  const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(l0, l1), _mm256_hadd_epi32(l2, l3));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

// Four fp16 scales as fp32.
HEARTH_AVX2 inline __m128 scales4(uint16_t a, uint16_t b, uint16_t c, uint16_t d) {
  return _mm_cvtph_ps(_mm_setr_epi16(static_cast<int16_t>(a), static_cast<int16_t>(b), static_cast<int16_t>(c),
                                     static_cast<int16_t>(d), 0, 0, 0, 0));
}

template <class Decode>
struct Q8Kernel {
  template <int R, int T>
  HEARTH_AVX2 static void run(const TileArgs& a) {
    const BlockQ8_0* x[T];
    for (int t = 0; t < T; ++t) x[t] = reinterpret_cast<const BlockQ8_0*>(a.x + t * a.x_stride);
    __m128 acc[R][T];
    float tail[R][T];
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < T; ++t) {
        acc[r][t] = _mm_setzero_ps();
        tail[r][t] = 0.0f;
      }
    }
    const int64_t n_blocks = a.n_cols / kQK8_0;
    int64_t b = 0;
    for (; b + 4 <= n_blocks; b += 4) {
      __m256i x_abs[T][4];
      __m128 xd[T];
      for (int t = 0; t < T; ++t) {
        if constexpr (Decode::kNegatable) {
          for (int k = 0; k < 4; ++k) {
            const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t][b + k].qs));
            x_abs[t][k] = _mm256_sign_epi8(xq, xq);
          }
        }
        xd[t] = scales4(x[t][b].d, x[t][b + 1].d, x[t][b + 2].d, x[t][b + 3].d);
      }
      for (int r = 0; r < R; ++r) {
        const uint8_t* row = a.w + r * a.w_stride;
        const __m128 wd = scales4(Decode::scale(row, b), Decode::scale(row, b + 1), Decode::scale(row, b + 2),
                                  Decode::scale(row, b + 3));
        __m256i lanes[T][4];
        for (int k = 0; k < 4; ++k) {
          const __m256i wq = Decode::load(row, b + k);
          const __m256i w_abs = Decode::kNegatable ? wq : _mm256_sign_epi8(wq, wq);
          for (int t = 0; t < T; ++t) {
            lanes[t][k] = dot_i8_lanes<Decode::kNegatable>(w_abs, wq, x_abs[t][k], x[t][b + k].qs);
          }
        }
        for (int t = 0; t < T; ++t) {
          const __m128i sums = block_sums4(lanes[t][0], lanes[t][1], lanes[t][2], lanes[t][3]);
          // Block k's exact sum times d_w·d_x, into lane k: the same fp32 operations whatever the tile shape.
          acc[r][t] = _mm_fmadd_ps(_mm_cvtepi32_ps(sums), _mm_mul_ps(wd, xd[t]), acc[r][t]);
        }
      }
    }
    for (; b < n_blocks; ++b) {  // the last n_blocks % 4, one at a time
      for (int r = 0; r < R; ++r) {
        const uint8_t* row = a.w + r * a.w_stride;
        const __m256i wq = Decode::load(row, b);
        const __m256i w_abs = Decode::kNegatable ? wq : _mm256_sign_epi8(wq, wq);
        const uint16_t wd16 = Decode::scale(row, b);
        const float wd = load_fp16(&wd16);
        for (int t = 0; t < T; ++t) {
          const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t][b].qs));
          const __m256i lanes = dot_i8_lanes<Decode::kNegatable>(w_abs, wq, _mm256_sign_epi8(xq, xq), x[t][b].qs);
          tail[r][t] += static_cast<float>(avx2::hsum_i32(lanes)) * (wd * load_fp16(&x[t][b].d));
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < T; ++t) {
        const __m128 v = acc[r][t];
        const __m128 pair = _mm_add_ps(v, _mm_movehl_ps(v, v));  // lanes 0+2, 1+3
        a.y[t * a.y_stride + r] = _mm_cvtss_f32(_mm_add_ss(pair, _mm_movehdup_ps(pair))) + tail[r][t];
      }
    }
  }
};

constexpr int kQ8Rows = 4;
constexpr int kQ8Tokens = 2;

}  // namespace

constinit const TileKernel kTileAvx2Q8_0 = TileTable<Q8Kernel<DecodeQ8_0>, kQ8Rows, kQ8Tokens>::kernel();
constinit const TileKernel kTileAvx2Q4_0 = TileTable<Q8Kernel<DecodeQ4_0>, kQ8Rows, kQ8Tokens>::kernel();

}  // namespace hearth::kernels

#else

namespace hearth::kernels {
constinit const TileKernel kTileAvx2Q8_0{};
constinit const TileKernel kTileAvx2Q4_0{};
}  // namespace hearth::kernels

#endif
