// The scalar reference dot products, the twins (vec_dot.h): one sequential fp32 accumulator per output. Per block
// (or super-block) every product is summed exactly in int32; the block's integer sums are then folded into the
// accumulator with the expression written above each function. These define the results of IsaLevel::kScalar; the
// vector tiles that reduce as the twin (weight_types.h, Reduction::kAsTwin) compute the same integers and the same
// expression, so they agree bit for bit.

#include "kernels/vec_dot.h"
#include "tensor/fp16.h"
#include "tensor/quant.h"

namespace hearth::kernels {
namespace {

constexpr int kHalf = kQK4_0 / 2;

int q5_code(const uint8_t* qs, const uint8_t* qh, int e) {  // 5-bit code of element e of a Q5_0/Q5_1 block
  const int low = e < kHalf ? (qs[e] & 0x0F) : (qs[e - kHalf] >> 4);
  return low | (((qh[e / 8] >> (e % 8)) & 1) << 4);
}

int sum_q8(const BlockQ8_0& x) {
  int sum = 0;
  for (int i = 0; i < kQK8_0; ++i) sum += x.qs[i];
  return sum;
}

// 2-bit field of element e in the Q2_K/Q3_K `qs` layout.
int low2(const uint8_t* qs, int e) {
  return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

}  // namespace

// fp32 activations: sum = sum + w[i]·x[i], element after element.

float vec_dot_f32_reference(const float* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += w[i] * x[i];
  return sum;
}

float vec_dot_f16_reference(const uint16_t* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += fp16_to_fp32(w[i]) * x[i];
  return sum;
}

float vec_dot_bf16_reference(const uint16_t* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += bf16_to_fp32(w[i]) * x[i];
  return sum;
}

// Q8_0 activations.

// Per block: (d·dx)·Σ q·qx.
float vec_dot_q8_0_reference(const BlockQ8_0* w, const BlockQ8_0* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    int sumi = 0;
    for (int i = 0; i < kQK8_0; ++i) sumi += w[b].qs[i] * x[b].qs[i];
    sum += (fp16_to_fp32(w[b].d) * fp16_to_fp32(x[b].d)) * static_cast<float>(sumi);
  }
  return sum;
}

// Per block: (d·dx)·Σ (q − 8)·qx.
float vec_dot_q4_0_reference(const BlockQ4_0* w, const BlockQ8_0* x, int64_t n) {
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

// Per block: (d·dx)·Σ q·qx + (m·dx)·Σ qx.
float vec_dot_q4_1_reference(const BlockQ4_1* w, const BlockQ8_0* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    int sumi = 0;
    for (int j = 0; j < kHalf; ++j) sumi += (w[b].qs[j] & 0x0F) * x[b].qs[j] + (w[b].qs[j] >> 4) * x[b].qs[j + kHalf];
    const float dx = fp16_to_fp32(x[b].d);
    sum += (fp16_to_fp32(w[b].d) * dx) * static_cast<float>(sumi) +
           (fp16_to_fp32(w[b].m) * dx) * static_cast<float>(sum_q8(x[b]));
  }
  return sum;
}

// Per block: (d·dx)·Σ (q − 16)·qx.
float vec_dot_q5_0_reference(const BlockQ5_0* w, const BlockQ8_0* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    int sumi = 0;
    for (int e = 0; e < kQK8_0; ++e) sumi += (q5_code(w[b].qs, w[b].qh, e) - 16) * x[b].qs[e];
    sum += (fp16_to_fp32(w[b].d) * fp16_to_fp32(x[b].d)) * static_cast<float>(sumi);
  }
  return sum;
}

// Per block: (d·dx)·Σ q·qx + (m·dx)·Σ qx.
float vec_dot_q5_1_reference(const BlockQ5_1* w, const BlockQ8_0* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    int sumi = 0;
    for (int e = 0; e < kQK8_0; ++e) sumi += q5_code(w[b].qs, w[b].qh, e) * x[b].qs[e];
    const float dx = fp16_to_fp32(x[b].d);
    sum += (fp16_to_fp32(w[b].d) * dx) * static_cast<float>(sumi) +
           (fp16_to_fp32(w[b].m) * dx) * static_cast<float>(sum_q8(x[b]));
  }
  return sum;
}

// Per block: (d·dx)·Σ kIq4NlValues[q]·qx.
float vec_dot_iq4_nl_reference(const BlockIQ4_NL* w, const BlockQ8_0* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    int sumi = 0;
    for (int j = 0; j < kHalf; ++j) {
      sumi += kIq4NlValues[w[b].qs[j] & 0x0F] * x[b].qs[j] + kIq4NlValues[w[b].qs[j] >> 4] * x[b].qs[j + kHalf];
    }
    sum += (fp16_to_fp32(w[b].d) * fp16_to_fp32(x[b].d)) * static_cast<float>(sumi);
  }
  return sum;
}

// Per block: (d·dx)·Σ kMxfp4Values[q]·qx, d half the E8M0 scale (mxfp4_scale_half).
float vec_dot_mxfp4_reference(const BlockMXFP4* w, const BlockQ8_0* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    int sumi = 0;
    for (int j = 0; j < kHalf; ++j) {
      sumi += kMxfp4Values[w[b].qs[j] & 0x0F] * x[b].qs[j] + kMxfp4Values[w[b].qs[j] >> 4] * x[b].qs[j + kHalf];
    }
    sum += (mxfp4_scale_half(w[b].e) * fp16_to_fp32(x[b].d)) * static_cast<float>(sumi);
  }
  return sum;
}

// Q8_K activations.

// Per super-block: (d·dx)·Σ_g sc[g]·Σ q·qx − (dmin·dx)·Σ_g m[g]·bsums[g].
float vec_dot_q2_k_reference(const BlockQ2_K* w, const BlockQ8_K* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int sumi = 0;
    int summ = 0;
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sub = 0;
      for (int e = 16 * g; e < 16 * g + 16; ++e) sub += low2(w[b].qs, e) * x[b].qs[e];
      sumi += (w[b].scales[g] & 0x0F) * sub;
      summ += (w[b].scales[g] >> 4) * x[b].bsums[g];
    }
    const float d = fp16_to_fp32(w[b].d) * x[b].d;
    const float dmin = fp16_to_fp32(w[b].dmin) * x[b].d;
    sum += d * static_cast<float>(sumi) - dmin * static_cast<float>(summ);
  }
  return sum;
}

// Per super-block: (d·dx)·Σ_g (sc[g] − 32)·Σ q·qx, q in [-4, 3].
float vec_dot_q3_k_reference(const BlockQ3_K* w, const BlockQ8_K* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    uint8_t scale[16];
    unpack_q3_k_scales(w[b].scales, scale);
    int sumi = 0;
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sub = 0;
      for (int e = 16 * g; e < 16 * g + 16; ++e) {
        const int high = (w[b].hmask[e % 32] >> (e / 32)) & 1;
        sub += (low2(w[b].qs, e) - (high ? 0 : 4)) * x[b].qs[e];
      }
      sumi += (scale[g] - 32) * sub;
    }
    sum += (fp16_to_fp32(w[b].d) * x[b].d) * static_cast<float>(sumi);
  }
  return sum;
}

// Per super-block: d·dx·Σ_s sc[s]·Σ q·qx  −  dmin·dx·Σ_s m[s]·Σ qx, the integer sums exact.
float vec_dot_q4_k_reference(const BlockQ4_K* w, const BlockQ8_K* x, int64_t n) {
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

// Per super-block: (d·dx)·Σ_s sc[s]·Σ q·qx − (dmin·dx)·Σ_s m[s]·(bsums[2s] + bsums[2s+1]).
float vec_dot_q5_k_reference(const BlockQ5_K* w, const BlockQ8_K* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    uint8_t sc[8];
    uint8_t m[8];
    unpack_q4_k_scales(w[b].scales, sc, m);
    int sumi = 0;
    int summ = 0;
    for (int s = 0; s < 8; ++s) {
      int sub = 0;
      for (int l = 0; l < 32; ++l) {
        const int q = ((w[b].qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 0x0F) | (((w[b].qh[l] >> s) & 1) << 4);
        sub += q * x[b].qs[32 * s + l];
      }
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
float vec_dot_q6_k_reference(const BlockQ6_K* w, const BlockQ8_K* x, int64_t n) {
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

// Per super-block: (d·dx)·Σ_s (sc[s] − 32)·Σ kIq4NlValues[q]·qx.
float vec_dot_iq4_xs_reference(const BlockIQ4_XS* w, const BlockQ8_K* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int sumi = 0;
    for (int s = 0; s < 8; ++s) {
      const uint8_t* qs = w[b].qs + 16 * s;
      const int8_t* qx = x[b].qs + 32 * s;
      int sub = 0;
      for (int j = 0; j < 16; ++j) sub += kIq4NlValues[qs[j] & 0x0F] * qx[j] + kIq4NlValues[qs[j] >> 4] * qx[j + 16];
      sumi += (iq4_xs_scale(w[b], s) - 32) * sub;
    }
    sum += (fp16_to_fp32(w[b].d) * x[b].d) * static_cast<float>(sumi);
  }
  return sum;
}

}  // namespace hearth::kernels
