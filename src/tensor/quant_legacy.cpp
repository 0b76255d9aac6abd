// Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4: GGML's other 32-element blocks (see quant.h for the element order). Each
// value uses exactly GGML's fp32 expression, so the results equal gguf-py's bit for bit. Only MXFP4 has a quantizer
// here, for the synthetic gpt-oss files.

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/fp16.h"
#include "tensor/quant.h"
#include "tensor/quant_internal.h"

namespace hearth {
namespace {

using quant_detail::check_blocks;

constexpr int kHalf = kQK4_0 / 2;

uint32_t load_qh(const uint8_t* qh) {  // little-endian, as GGML memcpy's it
  return static_cast<uint32_t>(qh[0]) | (static_cast<uint32_t>(qh[1]) << 8) | (static_cast<uint32_t>(qh[2]) << 16) |
         (static_cast<uint32_t>(qh[3]) << 24);
}

// The 5-bit codes of a Q5_0 / Q5_1 block, in element order.
void unpack_q5(const uint8_t* qs, const uint8_t* qh_bytes, int* q) {  // -> [32]
  const uint32_t qh = load_qh(qh_bytes);
  for (int j = 0; j < kHalf; ++j) {
    q[j] = (qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1) << 4);
    q[j + kHalf] = (qs[j] >> 4) | static_cast<int>(((qh >> (j + kHalf)) & 1) << 4);
  }
}

// The code whose value kMxfp4Values[code]·d is nearest x; the lowest such code on ties (0 rather than 8 for 0).
uint8_t nearest_mxfp4_code(float x, float d) {
  uint8_t best = 0;
  float best_error = std::fabs(static_cast<float>(kMxfp4Values[0]) * d - x);
  for (uint8_t code = 1; code < 16; ++code) {
    const float error = std::fabs(static_cast<float>(kMxfp4Values[code]) * d - x);
    if (error < best_error) {
      best = code;
      best_error = error;
    }
  }
  return best;
}

}  // namespace

void dequantize_row_q4_1(const BlockQ4_1* src, float* dst, int64_t n) {
  check_blocks(n, kQK4_0, "dequantize_row_q4_1");
  for (int64_t b = 0; b < n / kQK4_0; ++b) {
    const float d = fp16_to_fp32(src[b].d);
    const float m = fp16_to_fp32(src[b].m);
    float* y = dst + b * kQK4_0;
    for (int j = 0; j < kHalf; ++j) {
      y[j] = d * static_cast<float>(src[b].qs[j] & 0x0F) + m;
      y[j + kHalf] = d * static_cast<float>(src[b].qs[j] >> 4) + m;
    }
  }
}

void dequantize_row_q5_0(const BlockQ5_0* src, float* dst, int64_t n) {
  check_blocks(n, kQK4_0, "dequantize_row_q5_0");
  for (int64_t b = 0; b < n / kQK4_0; ++b) {
    const float d = fp16_to_fp32(src[b].d);
    int q[kQK4_0];
    unpack_q5(src[b].qs, src[b].qh, q);
    for (int i = 0; i < kQK4_0; ++i) dst[b * kQK4_0 + i] = d * static_cast<float>(q[i] - 16);
  }
}

void dequantize_row_q5_1(const BlockQ5_1* src, float* dst, int64_t n) {
  check_blocks(n, kQK4_0, "dequantize_row_q5_1");
  for (int64_t b = 0; b < n / kQK4_0; ++b) {
    const float d = fp16_to_fp32(src[b].d);
    const float m = fp16_to_fp32(src[b].m);
    int q[kQK4_0];
    unpack_q5(src[b].qs, src[b].qh, q);
    for (int i = 0; i < kQK4_0; ++i) dst[b * kQK4_0 + i] = d * static_cast<float>(q[i]) + m;
  }
}

void dequantize_row_iq4_nl(const BlockIQ4_NL* src, float* dst, int64_t n) {
  check_blocks(n, kQK4_0, "dequantize_row_iq4_nl");
  for (int64_t b = 0; b < n / kQK4_0; ++b) {
    const float d = fp16_to_fp32(src[b].d);
    float* y = dst + b * kQK4_0;
    for (int j = 0; j < kHalf; ++j) {
      y[j] = d * static_cast<float>(kIq4NlValues[src[b].qs[j] & 0x0F]);
      y[j + kHalf] = d * static_cast<float>(kIq4NlValues[src[b].qs[j] >> 4]);
    }
  }
}

void dequantize_row_mxfp4(const BlockMXFP4* src, float* dst, int64_t n) {
  check_blocks(n, kQK4_0, "dequantize_row_mxfp4");
  for (int64_t b = 0; b < n / kQK4_0; ++b) {
    const float d = mxfp4_scale_half(src[b].e);
    float* y = dst + b * kQK4_0;
    for (int j = 0; j < kHalf; ++j) {
      y[j] = static_cast<float>(kMxfp4Values[src[b].qs[j] & 0x0F]) * d;
      y[j + kHalf] = static_cast<float>(kMxfp4Values[src[b].qs[j] >> 4]) * d;
    }
  }
}

void quantize_row_mxfp4(const float* src, BlockMXFP4* dst, int64_t n) {
  check_blocks(n, kQK4_0, "quantize_row_mxfp4");
  for (int64_t b = 0; b < n / kQK4_0; ++b) {
    const float* x = src + b * kQK4_0;
    float absmax = 0.0f;
    for (int i = 0; i < kQK4_0; ++i) absmax = std::max(absmax, std::fabs(x[i]));
    // floor(log2(absmax)) of the smallest subnormals is -149: clamp where GGML's uint8_t cast would wrap.
    const float exponent = absmax > 0.0f ? std::floor(std::log2(absmax)) - 2.0f + 127.0f : 0.0f;
    const auto e = static_cast<uint8_t>(std::clamp(exponent, 0.0f, 254.0f));
    const float d = mxfp4_scale_half(e);
    dst[b].e = e;
    for (int j = 0; j < kHalf; ++j) {
      dst[b].qs[j] = static_cast<uint8_t>(nearest_mxfp4_code(x[j], d) | (nearest_mxfp4_code(x[j + kHalf], d) << 4));
    }
  }
}

}  // namespace hearth
