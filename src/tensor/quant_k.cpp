// Q4_K and Q6_K: GGML's 256-element "K-quant" super-blocks. See quant.h for the element order.

#include <algorithm>
#include <cmath>

#include "tensor/fp16.h"
#include "tensor/quant.h"
#include "tensor/quant_internal.h"

namespace hearth {
namespace {

using quant_detail::check_blocks;
using quant_detail::round_to_int;

constexpr int kQ4KSubBlocks = 8;   // of 32 elements
constexpr int kQ6KSubBlocks = 16;  // of 16 elements

// Inverse of unpack_q4_k_scales; scale and min are 6-bit values.
void pack_q4_k_scales(const uint8_t* scale, const uint8_t* min, uint8_t* packed) {  // [8], [8] -> [12]
  for (int s = 0; s < 4; ++s) {
    packed[s] = static_cast<uint8_t>((scale[s] & 63) | ((scale[s + 4] >> 4) << 6));
    packed[s + 4] = static_cast<uint8_t>((min[s] & 63) | ((min[s + 4] >> 4) << 6));
    packed[s + 8] = static_cast<uint8_t>((scale[s + 4] & 0x0F) | ((min[s + 4] & 0x0F) << 4));
  }
}

// Where element e (in [0, 256)) of a Q6_K block keeps its bits.
struct Q6KPosition {
  int ql_index;
  int ql_shift;  // 0: low nibble, 4: high nibble
  int qh_index;
  int qh_shift;  // 0, 2, 4 or 6
};
constexpr Q6KPosition q6_k_position(int e) {
  const int half = e / 128;
  const int quarter = (e % 128) / 32;
  const int l = e % 32;
  return {64 * half + l + 32 * (quarter & 1), 4 * (quarter >> 1), 32 * half + l, 2 * quarter};
}

// 6-bit code of a sub-block parameter relative to the super-block scale `unit`.
uint8_t code_6bit(float value, float unit) {
  return unit > 0.0f ? static_cast<uint8_t>(std::clamp(round_to_int(value / unit), 0, 63)) : 0;
}

void quantize_block_q4_k(const float* x, BlockQ4_K* out) {
  float scale[kQ4KSubBlocks];
  float min[kQ4KSubBlocks];  // subtracted: x ~ scale * q - min, min >= 0
  float max_scale = 0.0f;
  float max_min = 0.0f;
  for (int s = 0; s < kQ4KSubBlocks; ++s) {
    const float* sub = x + 32 * s;
    const float lo = std::min(0.0f, *std::min_element(sub, sub + 32));
    const float hi = *std::max_element(sub, sub + 32);
    scale[s] = (hi - lo) / 15.0f;
    min[s] = -lo;
    max_scale = std::max(max_scale, scale[s]);
    max_min = std::max(max_min, min[s]);
  }
  out->d = fp32_to_fp16(max_scale / 63.0f);
  out->dmin = fp32_to_fp16(max_min / 63.0f);
  const float d = fp16_to_fp32(out->d);
  const float dmin = fp16_to_fp32(out->dmin);
  uint8_t sc[kQ4KSubBlocks];
  uint8_t m[kQ4KSubBlocks];
  for (int s = 0; s < kQ4KSubBlocks; ++s) {
    sc[s] = code_6bit(scale[s], d);
    m[s] = code_6bit(min[s], dmin);
  }
  pack_q4_k_scales(sc, m, out->scales);
  for (int s = 0; s < kQ4KSubBlocks; ++s) {
    const float step = d * sc[s];
    const float offset = dmin * m[s];
    const float inverse = step > 0.0f ? 1.0f / step : 0.0f;
    for (int i = 0; i < 32; ++i) {
      const int q = std::clamp(round_to_int((x[32 * s + i] + offset) * inverse), 0, 15);
      uint8_t& byte = out->qs[32 * (s / 2) + i];
      byte = (s % 2 == 0) ? static_cast<uint8_t>(q) : static_cast<uint8_t>(byte | (q << 4));
    }
  }
}

void quantize_block_q6_k(const float* x, BlockQ6_K* out) {
  float scale[kQ6KSubBlocks];  // signed: the largest-magnitude value of each sub-block maps to q = -32
  float max_abs_scale = 0.0f;
  for (int s = 0; s < kQ6KSubBlocks; ++s) {
    float extreme = 0.0f;
    for (int i = 0; i < 16; ++i) {
      if (std::fabs(x[16 * s + i]) > std::fabs(extreme)) extreme = x[16 * s + i];
    }
    scale[s] = extreme / -32.0f;
    max_abs_scale = std::max(max_abs_scale, std::fabs(scale[s]));
  }
  out->d = fp32_to_fp16(max_abs_scale / 127.0f);
  const float d = fp16_to_fp32(out->d);
  std::fill(out->ql, out->ql + sizeof(out->ql), 0);
  std::fill(out->qh, out->qh + sizeof(out->qh), 0);
  for (int s = 0; s < kQ6KSubBlocks; ++s) {
    out->scales[s] = d > 0.0f ? static_cast<int8_t>(std::clamp(round_to_int(scale[s] / d), -127, 127)) : 0;
    const float step = d * out->scales[s];
    const float inverse = step != 0.0f ? 1.0f / step : 0.0f;
    for (int i = 0; i < 16; ++i) {
      const int e = 16 * s + i;
      const int q = std::clamp(round_to_int(x[e] * inverse), -32, 31) + 32;
      const Q6KPosition pos = q6_k_position(e);
      out->ql[pos.ql_index] = static_cast<uint8_t>(out->ql[pos.ql_index] | ((q & 0x0F) << pos.ql_shift));
      out->qh[pos.qh_index] = static_cast<uint8_t>(out->qh[pos.qh_index] | ((q >> 4) << pos.qh_shift));
    }
  }
}

}  // namespace

void dequantize_row_q4_k(const BlockQ4_K* src, float* dst, int64_t n) {
  check_blocks(n, kQK_K, "dequantize_row_q4_k");
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const BlockQ4_K& block = src[b];
    const float d = fp16_to_fp32(block.d);
    const float dmin = fp16_to_fp32(block.dmin);
    uint8_t sc[kQ4KSubBlocks];
    uint8_t m[kQ4KSubBlocks];
    unpack_q4_k_scales(block.scales, sc, m);
    float* y = dst + b * kQK_K;
    for (int s = 0; s < kQ4KSubBlocks; ++s) {
      const float step = d * sc[s];
      const float offset = dmin * m[s];
      const int shift = 4 * (s % 2);
      for (int i = 0; i < 32; ++i) {
        const int q = (block.qs[32 * (s / 2) + i] >> shift) & 0x0F;
        y[32 * s + i] = step * static_cast<float>(q) - offset;
      }
    }
  }
}

void dequantize_row_q6_k(const BlockQ6_K* src, float* dst, int64_t n) {
  check_blocks(n, kQK_K, "dequantize_row_q6_k");
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const BlockQ6_K& block = src[b];
    const float d = fp16_to_fp32(block.d);
    float* y = dst + b * kQK_K;
    for (int e = 0; e < kQK_K; ++e) {
      const Q6KPosition pos = q6_k_position(e);
      const int q =
          ((block.ql[pos.ql_index] >> pos.ql_shift) & 0x0F) | (((block.qh[pos.qh_index] >> pos.qh_shift) & 3) << 4);
      y[e] = d * static_cast<float>(block.scales[e / 16]) * static_cast<float>(q - 32);
    }
  }
}

void quantize_row_q4_k(const float* src, BlockQ4_K* dst, int64_t n) {
  check_blocks(n, kQK_K, "quantize_row_q4_k");
  for (int64_t b = 0; b < n / kQK_K; ++b) quantize_block_q4_k(src + b * kQK_K, dst + b);
}

void quantize_row_q6_k(const float* src, BlockQ6_K* dst, int64_t n) {
  check_blocks(n, kQK_K, "quantize_row_q6_k");
  for (int64_t b = 0; b < n / kQK_K; ++b) quantize_block_q6_k(src + b * kQK_K, dst + b);
}

}  // namespace hearth
