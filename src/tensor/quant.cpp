#include "tensor/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/fp16.h"
#include "tensor/quant_internal.h"
#include "util/result.h"

namespace hearth {

namespace quant_detail {

void check_blocks(int64_t n, int64_t block, const char* what) {
  HEARTH_CHECK(n >= 0 && n % block == 0, "{}: row of {} elements is not a multiple of {}", what, n, block);
}

}  // namespace quant_detail

namespace {

using quant_detail::check_blocks;
using quant_detail::round_to_int;

// Largest |x| of src[0, n), and the signed value that has it (first one on ties).
struct AbsMax {
  float abs = 0.0f;
  float value = 0.0f;
};
AbsMax find_abs_max(const float* src, int n) {
  AbsMax result;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(src[i]) > result.abs) result = {std::fabs(src[i]), src[i]};
  }
  return result;
}

}  // namespace

void quantize_row_q8_0(const float* src, BlockQ8_0* dst, int64_t n) {
  check_blocks(n, kQK8_0, "quantize_row_q8_0");
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const float* x = src + b * kQK8_0;
    const uint16_t d16 = fp32_to_fp16(find_abs_max(x, kQK8_0).abs / 127.0f);
    const float d = fp16_to_fp32(d16);
    const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = d16;
    for (int i = 0; i < kQK8_0; ++i)
      dst[b].qs[i] = static_cast<int8_t>(std::clamp(round_to_int(x[i] * inverse), -127, 127));
  }
}

void dequantize_row_q8_0(const BlockQ8_0* src, float* dst, int64_t n) {
  check_blocks(n, kQK8_0, "dequantize_row_q8_0");
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const float d = fp16_to_fp32(src[b].d);
    for (int i = 0; i < kQK8_0; ++i) dst[b * kQK8_0 + i] = d * static_cast<float>(src[b].qs[i]);
  }
}

// As GGML: the value with the largest magnitude maps to -8, so the full [-8, 7] range is used.
void quantize_row_q4_0(const float* src, BlockQ4_0* dst, int64_t n) {
  check_blocks(n, kQK4_0, "quantize_row_q4_0");
  for (int64_t b = 0; b < n / kQK4_0; ++b) {
    const float* x = src + b * kQK4_0;
    const uint16_t d16 = fp32_to_fp16(find_abs_max(x, kQK4_0).value / -8.0f);
    const float d = fp16_to_fp32(d16);
    const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = d16;
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      const int lo = std::clamp(round_to_int(x[j] * inverse) + 8, 0, 15);
      const int hi = std::clamp(round_to_int(x[j + kQK4_0 / 2] * inverse) + 8, 0, 15);
      dst[b].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void dequantize_row_q4_0(const BlockQ4_0* src, float* dst, int64_t n) {
  check_blocks(n, kQK4_0, "dequantize_row_q4_0");
  for (int64_t b = 0; b < n / kQK4_0; ++b) {
    const float d = fp16_to_fp32(src[b].d);
    float* y = dst + b * kQK4_0;
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      y[j] = d * static_cast<float>((src[b].qs[j] & 0x0F) - 8);
      y[j + kQK4_0 / 2] = d * static_cast<float>((src[b].qs[j] >> 4) - 8);
    }
  }
}

void quantize_row_q8_k(const float* src, BlockQ8_K* dst, int64_t n) {
  check_blocks(n, kQK_K, "quantize_row_q8_k");
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float* x = src + b * kQK_K;
    const float d = find_abs_max(x, kQK_K).abs / 127.0f;
    const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = d;
    for (int i = 0; i < kQK_K; ++i)
      dst[b].qs[i] = static_cast<int8_t>(std::clamp(round_to_int(x[i] * inverse), -127, 127));
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += dst[b].qs[16 * g + i];
      dst[b].bsums[g] = static_cast<int16_t>(sum);
    }
  }
}

void dequantize_row_q8_k(const BlockQ8_K* src, float* dst, int64_t n) {
  check_blocks(n, kQK_K, "dequantize_row_q8_k");
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    for (int i = 0; i < kQK_K; ++i) dst[b * kQK_K + i] = src[b].d * static_cast<float>(src[b].qs[i]);
  }
}

bool quant_row_supported(DType type) {
  switch (type) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_K:
    case DType::Q6_K:
    case DType::MXFP4:
      return true;
    default:
      return false;
  }
}

void dequantize_row(DType type, const void* src, float* dst, int64_t n) {
  switch (type) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(static_cast<const uint16_t*>(src)[i]);
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(static_cast<const uint16_t*>(src)[i]);
      return;
    case DType::Q8_0:
      return dequantize_row_q8_0(static_cast<const BlockQ8_0*>(src), dst, n);
    case DType::Q4_0:
      return dequantize_row_q4_0(static_cast<const BlockQ4_0*>(src), dst, n);
    case DType::Q4_K:
      return dequantize_row_q4_k(static_cast<const BlockQ4_K*>(src), dst, n);
    case DType::Q6_K:
      return dequantize_row_q6_k(static_cast<const BlockQ6_K*>(src), dst, n);
    case DType::Q4_1:
      return dequantize_row_q4_1(static_cast<const BlockQ4_1*>(src), dst, n);
    case DType::Q5_0:
      return dequantize_row_q5_0(static_cast<const BlockQ5_0*>(src), dst, n);
    case DType::Q5_1:
      return dequantize_row_q5_1(static_cast<const BlockQ5_1*>(src), dst, n);
    case DType::IQ4_NL:
      return dequantize_row_iq4_nl(static_cast<const BlockIQ4_NL*>(src), dst, n);
    case DType::Q2_K:
      return dequantize_row_q2_k(static_cast<const BlockQ2_K*>(src), dst, n);
    case DType::Q3_K:
      return dequantize_row_q3_k(static_cast<const BlockQ3_K*>(src), dst, n);
    case DType::Q5_K:
      return dequantize_row_q5_k(static_cast<const BlockQ5_K*>(src), dst, n);
    case DType::IQ4_XS:
      return dequantize_row_iq4_xs(static_cast<const BlockIQ4_XS*>(src), dst, n);
    case DType::MXFP4:
      return dequantize_row_mxfp4(static_cast<const BlockMXFP4*>(src), dst, n);
    default:
      HEARTH_CHECK(false, "dequantize_row: unsupported type {}", dtype_name(type));
  }
}

void quantize_row(DType type, const float* src, void* dst, int64_t n) {
  switch (type) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = fp32_to_fp16(src[i]);
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = fp32_to_bf16(src[i]);
      return;
    case DType::Q8_0:
      return quantize_row_q8_0(src, static_cast<BlockQ8_0*>(dst), n);
    case DType::Q4_0:
      return quantize_row_q4_0(src, static_cast<BlockQ4_0*>(dst), n);
    case DType::Q4_K:
      return quantize_row_q4_k(src, static_cast<BlockQ4_K*>(dst), n);
    case DType::Q6_K:
      return quantize_row_q6_k(src, static_cast<BlockQ6_K*>(dst), n);
    case DType::MXFP4:
      return quantize_row_mxfp4(src, static_cast<BlockMXFP4*>(dst), n);
    default:
      HEARTH_CHECK(false, "quantize_row: unsupported type {}", dtype_name(type));
  }
}

}  // namespace hearth
