// Q2_K, Q3_K, Q5_K and IQ4_XS: GGML's other 256-element super-blocks (dequantization only; see quant.h for the
// element order). Each value uses exactly GGML's fp32 expression, so the results equal gguf-py's bit for bit.

#include "tensor/quant.h"
#include "tensor/fp16.h"
#include "tensor/quant_internal.h"

namespace hearth {

using quant_detail::check_blocks;

void dequantize_row_q2_k(const BlockQ2_K* src, float* dst, int64_t n) {
  check_blocks(n, kQK_K, "dequantize_row_q2_k");
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const BlockQ2_K& block = src[b];
    const float d = fp16_to_fp32(block.d);
    const float dmin = fp16_to_fp32(block.dmin);
    float* y = dst + b * kQK_K;
    for (int g = 0; g < kQK_K / 16; ++g) {  // 16 elements share a scale and a min
      const float dl = d * static_cast<float>(block.scales[g] & 0x0F);
      const float ml = dmin * static_cast<float>(block.scales[g] >> 4);
      for (int i = 0; i < 16; ++i) {
        const int e = 16 * g + i;
        const int q = (block.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
        y[e] = dl * static_cast<float>(q) - ml;
      }
    }
  }
}

void dequantize_row_q3_k(const BlockQ3_K* src, float* dst, int64_t n) {
  check_blocks(n, kQK_K, "dequantize_row_q3_k");
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const BlockQ3_K& block = src[b];
    const float d = fp16_to_fp32(block.d);
    uint8_t scale[16];
    unpack_q3_k_scales(block.scales, scale);
    float* y = dst + b * kQK_K;
    for (int g = 0; g < kQK_K / 16; ++g) {
      const float dl = d * static_cast<float>(scale[g] - 32);
      for (int i = 0; i < 16; ++i) {
        const int e = 16 * g + i;
        const int low = (block.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
        const int high = (block.hmask[e % 32] >> (e / 32)) & 1;
        y[e] = dl * static_cast<float>(low - (high ? 0 : 4));
      }
    }
  }
}

void dequantize_row_q5_k(const BlockQ5_K* src, float* dst, int64_t n) {
  check_blocks(n, kQK_K, "dequantize_row_q5_k");
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const BlockQ5_K& block = src[b];
    const float d = fp16_to_fp32(block.d);
    const float dmin = fp16_to_fp32(block.dmin);
    uint8_t sc[8];
    uint8_t m[8];
    unpack_q4_k_scales(block.scales, sc, m);
    float* y = dst + b * kQK_K;
    for (int s = 0; s < 8; ++s) {
      const float step = d * sc[s];
      const float offset = dmin * m[s];
      for (int l = 0; l < 32; ++l) {
        const int q = ((block.qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 0x0F) | (((block.qh[l] >> s) & 1) << 4);
        y[32 * s + l] = step * static_cast<float>(q) - offset;
      }
    }
  }
}

void dequantize_row_iq4_xs(const BlockIQ4_XS* src, float* dst, int64_t n) {
  check_blocks(n, kQK_K, "dequantize_row_iq4_xs");
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const BlockIQ4_XS& block = src[b];
    const float d = fp16_to_fp32(block.d);
    float* y = dst + b * kQK_K;
    for (int s = 0; s < 8; ++s) {
      const float dl = d * static_cast<float>(iq4_xs_scale(block, s) - 32);
      const uint8_t* qs = block.qs + 16 * s;
      for (int j = 0; j < 16; ++j) {
        y[32 * s + j] = dl * static_cast<float>(kIq4NlValues[qs[j] & 0x0F]);
        y[32 * s + j + 16] = dl * static_cast<float>(kIq4NlValues[qs[j] >> 4]);
      }
    }
  }
}

}  // namespace hearth
