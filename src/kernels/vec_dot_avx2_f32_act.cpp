// AVX2/FMA tiles for F32, F16 and BF16 weights times fp32 activations.
//
// Reduction order of every output: one 8-lane fp32 accumulator over the columns in steps of 8
// (acc = fma(w[k..k+8], x[k..k+8], acc)), then hsum, then the n_cols % 8 tail added sequentially.

#include "kernels/vec_dot.h"
#include "tensor/dtype.h"

#if defined(__x86_64__)

#include "kernels/avx2_common.h"
#include "tensor/fp16.h"

namespace hearth::kernels {
namespace {

using avx2::hsum;
using avx2::TileTable;

struct LoadF32 {
  HEARTH_AVX2 static __m256 vec(const uint8_t* row, int64_t k) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + k);
  }
  static float scalar(const uint8_t* row, int64_t k) { return reinterpret_cast<const float*>(row)[k]; }
};

struct LoadF16 {
  HEARTH_AVX2 static __m256 vec(const uint8_t* row, int64_t k) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * k)));
  }
  static float scalar(const uint8_t* row, int64_t k) { return fp16_to_fp32(reinterpret_cast<const uint16_t*>(row)[k]); }
};

struct LoadBF16 {
  HEARTH_AVX2 static __m256 vec(const uint8_t* row, int64_t k) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * k)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static float scalar(const uint8_t* row, int64_t k) { return bf16_to_fp32(reinterpret_cast<const uint16_t*>(row)[k]); }
};

template <class Load>
struct FloatKernel {
  template <int R, int T>
  HEARTH_AVX2 static void run(const TileArgs& a) {
    const float* x[T];
    for (int t = 0; t < T; ++t) x[t] = reinterpret_cast<const float*>(a.x + t * a.x_stride);
    __m256 acc[R][T];
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    }
    const int64_t n_vec = a.n_cols / 8 * 8;
    for (int64_t k = 0; k < n_vec; k += 8) {
      __m256 xv[T];
      for (int t = 0; t < T; ++t) xv[t] = _mm256_loadu_ps(x[t] + k);
      for (int r = 0; r < R; ++r) {
        const __m256 wv = Load::vec(a.w + r * a.w_stride, k);
        for (int t = 0; t < T; ++t) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < T; ++t) {
        float sum = hsum(acc[r][t]);
        for (int64_t k = n_vec; k < a.n_cols; ++k) sum += Load::scalar(a.w + r * a.w_stride, k) * x[t][k];
        a.y[t * a.y_stride + r] = sum;
      }
    }
  }
};

// 4 rows × 3 tokens = 12 accumulators + 3 activation vectors + 1 weight vector: all 16 ymm registers.
constexpr int kFloatRows = 4;
constexpr int kFloatTokens = 3;

}  // namespace

constinit const TileKernel kTileAvx2F32 = TileTable<FloatKernel<LoadF32>, kFloatRows, kFloatTokens>::kernel();
constinit const TileKernel kTileAvx2F16 = TileTable<FloatKernel<LoadF16>, kFloatRows, kFloatTokens>::kernel();
constinit const TileKernel kTileAvx2BF16 = TileTable<FloatKernel<LoadBF16>, kFloatRows, kFloatTokens>::kernel();

}  // namespace hearth::kernels

#else

namespace hearth::kernels {
constinit const TileKernel kTileAvx2F32{};
constinit const TileKernel kTileAvx2F16{};
constinit const TileKernel kTileAvx2BF16{};
}  // namespace hearth::kernels

#endif
