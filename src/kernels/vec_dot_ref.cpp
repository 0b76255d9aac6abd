// Scalar reference dot products: one sequential fp32 accumulator per output; the integer parts of the
// quantized products are exact. These define the results of IsaLevel::kScalar.

#include <cstring>

#include "kernels/matmul.h"
#include "kernels/vec_dot.h"
#include "tensor/fp16.h"
#include "tensor/quant.h"
#include "util/result.h"

namespace hearth::kernels {
namespace {

float dot_f32(const float* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += w[i] * x[i];
  return sum;
}

float dot_f16(const uint16_t* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += fp16_to_fp32(w[i]) * x[i];
  return sum;
}

float dot_bf16(const uint16_t* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += bf16_to_fp32(w[i]) * x[i];
  return sum;
}

float dot_q8_0(const BlockQ8_0* w, const BlockQ8_0* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    int sumi = 0;
    for (int i = 0; i < kQK8_0; ++i) sumi += w[b].qs[i] * x[b].qs[i];
    sum += (fp16_to_fp32(w[b].d) * fp16_to_fp32(x[b].d)) * static_cast<float>(sumi);
  }
  return sum;
}

float dot_q4_0(const BlockQ4_0* w, const BlockQ8_0* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    int sumi = 0;
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      sumi += ((w[b].qs[j] & 0x0F) - 8) * x[b].qs[j];
      sumi += ((w[b].qs[j] >> 4) - 8) * x[b].qs[j + kQK4_0 / 2];
    }
    sum += (fp16_to_fp32(w[b].d) * fp16_to_fp32(x[b].d)) * static_cast<float>(sumi);
  }
  return sum;
}

// Per super-block: d·dx·Σ_s sc[s]·Σ q·qx  −  dmin·dx·Σ_s m[s]·Σ qx, the integer sums exact.
float dot_q4_k(const BlockQ4_K* w, const BlockQ8_K* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    uint8_t sc[8];
    uint8_t m[8];
    unpack_q4_k_scales(w[b].scales, sc, m);
    int sumi = 0;
    int summ = 0;
    for (int s = 0; s < 8; ++s) {
      const int shift = 4 * (s % 2);
      int sub = 0;
      for (int i = 0; i < 32; ++i) sub += ((w[b].qs[32 * (s / 2) + i] >> shift) & 0x0F) * x[b].qs[32 * s + i];
      sumi += sc[s] * sub;
      summ += m[s] * (x[b].bsums[2 * s] + x[b].bsums[2 * s + 1]);
    }
    const float d = fp16_to_fp32(w[b].d) * x[b].d;
    const float dmin = fp16_to_fp32(w[b].dmin) * x[b].d;
    sum += d * static_cast<float>(sumi) - dmin * static_cast<float>(summ);
  }
  return sum;
}

// Per super-block: d·dx·Σ_e sc[e/16]·(q_e − 32)·qx_e, the integer sum exact.
float dot_q6_k(const BlockQ6_K* w, const BlockQ8_K* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const BlockQ6_K& block = w[b];
    int sumi = 0;
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = block.ql + 64 * half;
      const uint8_t* qh = block.qh + 32 * half;
      const int8_t* qx = x[b].qs + 128 * half;
      const int8_t* sc = block.scales + 8 * half;
      for (int l = 0; l < 32; ++l) {
        const int q0 = ((ql[l] & 0x0F) | ((qh[l] & 3) << 4)) - 32;
        const int q1 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        const int g = l / 16;
        sumi += sc[g] * q0 * qx[l] + sc[g + 2] * q1 * qx[l + 32] + sc[g + 4] * q2 * qx[l + 64] +
                sc[g + 6] * q3 * qx[l + 96];
      }
    }
    sum += (fp16_to_fp32(block.d) * x[b].d) * static_cast<float>(sumi);
  }
  return sum;
}

template <DType kType>
void scalar_tile_for(const TileArgs& a) {
  for (int t = 0; t < a.n_tokens; ++t) {
    for (int r = 0; r < a.n_rows; ++r) {
      a.y[t * a.y_stride + r] = vec_dot_reference(kType, a.w + r * a.w_stride, a.x + t * a.x_stride, a.n_cols);
    }
  }
}

}  // namespace

float vec_dot_reference(DType weight_type, const void* w, const void* x, int64_t n_cols) {
  switch (weight_type) {
    case DType::F32:
      return dot_f32(static_cast<const float*>(w), static_cast<const float*>(x), n_cols);
    case DType::F16:
      return dot_f16(static_cast<const uint16_t*>(w), static_cast<const float*>(x), n_cols);
    case DType::BF16:
      return dot_bf16(static_cast<const uint16_t*>(w), static_cast<const float*>(x), n_cols);
    case DType::Q8_0:
      return dot_q8_0(static_cast<const BlockQ8_0*>(w), static_cast<const BlockQ8_0*>(x), n_cols);
    case DType::Q4_0:
      return dot_q4_0(static_cast<const BlockQ4_0*>(w), static_cast<const BlockQ8_0*>(x), n_cols);
    case DType::Q4_K:
      return dot_q4_k(static_cast<const BlockQ4_K*>(w), static_cast<const BlockQ8_K*>(x), n_cols);
    case DType::Q6_K:
      return dot_q6_k(static_cast<const BlockQ6_K*>(w), static_cast<const BlockQ8_K*>(x), n_cols);
    case DType::Q4_1:
      return dot_q4_1_reference(static_cast<const BlockQ4_1*>(w), static_cast<const BlockQ8_0*>(x), n_cols);
    case DType::Q5_0:
      return dot_q5_0_reference(static_cast<const BlockQ5_0*>(w), static_cast<const BlockQ8_0*>(x), n_cols);
    case DType::Q5_1:
      return dot_q5_1_reference(static_cast<const BlockQ5_1*>(w), static_cast<const BlockQ8_0*>(x), n_cols);
    case DType::IQ4_NL:
      return dot_iq4_nl_reference(static_cast<const BlockIQ4_NL*>(w), static_cast<const BlockQ8_0*>(x), n_cols);
    case DType::Q2_K:
      return dot_q2_k_reference(static_cast<const BlockQ2_K*>(w), static_cast<const BlockQ8_K*>(x), n_cols);
    case DType::Q3_K:
      return dot_q3_k_reference(static_cast<const BlockQ3_K*>(w), static_cast<const BlockQ8_K*>(x), n_cols);
    case DType::Q5_K:
      return dot_q5_k_reference(static_cast<const BlockQ5_K*>(w), static_cast<const BlockQ8_K*>(x), n_cols);
    case DType::IQ4_XS:
      return dot_iq4_xs_reference(static_cast<const BlockIQ4_XS*>(w), static_cast<const BlockQ8_K*>(x), n_cols);
    default:
      HEARTH_CHECK(false, "vec_dot_reference: unsupported weight type {}", dtype_name(weight_type));
  }
}

TileKernel scalar_tile_kernel(DType weight_type) {
  switch (weight_type) {
    case DType::F32:
      return {scalar_tile_for<DType::F32>, 1, 1};
    case DType::F16:
      return {scalar_tile_for<DType::F16>, 1, 1};
    case DType::BF16:
      return {scalar_tile_for<DType::BF16>, 1, 1};
    case DType::Q8_0:
      return {scalar_tile_for<DType::Q8_0>, 1, 1};
    case DType::Q4_0:
      return {scalar_tile_for<DType::Q4_0>, 1, 1};
    case DType::Q4_K:
      return {scalar_tile_for<DType::Q4_K>, 1, 1};
    case DType::Q6_K:
      return {scalar_tile_for<DType::Q6_K>, 1, 1};
    case DType::Q4_1:
      return {scalar_tile_for<DType::Q4_1>, 1, 1};
    case DType::Q5_0:
      return {scalar_tile_for<DType::Q5_0>, 1, 1};
    case DType::Q5_1:
      return {scalar_tile_for<DType::Q5_1>, 1, 1};
    case DType::IQ4_NL:
      return {scalar_tile_for<DType::IQ4_NL>, 1, 1};
    case DType::Q2_K:
      return {scalar_tile_for<DType::Q2_K>, 1, 1};
    case DType::Q3_K:
      return {scalar_tile_for<DType::Q3_K>, 1, 1};
    case DType::Q5_K:
      return {scalar_tile_for<DType::Q5_K>, 1, 1};
    case DType::IQ4_XS:
      return {scalar_tile_for<DType::IQ4_XS>, 1, 1};
    default:
      return {};
  }
}

void quantize_activation_row(DType weight_type, const float* src, uint8_t* dst, int64_t n_cols) {
  switch (matmul_activation_type(weight_type)) {
    case DType::Q8_0:
      return quantize_row_q8_0(src, reinterpret_cast<BlockQ8_0*>(dst), n_cols);
    case DType::Q8_K:
      return quantize_row_q8_k(src, reinterpret_cast<BlockQ8_K*>(dst), n_cols);
    default:
      std::memcpy(dst, src, static_cast<size_t>(n_cols) * sizeof(float));
      return;
  }
}

}  // namespace hearth::kernels
