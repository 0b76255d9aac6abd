// Block formats: layouts checked on hand-built blocks with exact expected values, and quantize -> dequantize
// round trips within each format's error bound.

#include "tensor/quant.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/fp16.h"

namespace hearth {
namespace {

std::vector<float> gaussian(int64_t n, uint32_t seed, float sd = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sd);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(QuantTest, BlockSizesMatchDtypeTable) {
  EXPECT_EQ(sizeof(BlockQ8_0), dtype_info(DType::Q8_0).block_bytes);
  EXPECT_EQ(sizeof(BlockQ4_0), dtype_info(DType::Q4_0).block_bytes);
  EXPECT_EQ(sizeof(BlockQ4_K), dtype_info(DType::Q4_K).block_bytes);
  EXPECT_EQ(sizeof(BlockQ6_K), dtype_info(DType::Q6_K).block_bytes);
  EXPECT_EQ(sizeof(BlockQ8_K), dtype_info(DType::Q8_K).block_bytes);
  EXPECT_EQ(sizeof(BlockMXFP4), dtype_info(DType::MXFP4).block_bytes);
  EXPECT_EQ(dtype_info(DType::MXFP4).block_size, 32);
  EXPECT_EQ(dtype_info(39)->type, DType::MXFP4);  // GGML_TYPE_MXFP4
  EXPECT_EQ(offsetof(BlockMXFP4, qs), 1u);
  EXPECT_EQ(offsetof(BlockQ6_K, d), 208u);
  EXPECT_EQ(offsetof(BlockQ4_K, qs), 16u);
}

TEST(QuantTest, ComputeSupportedNamesListsTheTableRowsHearthRuns) {
  const std::string names = compute_supported_names();
  EXPECT_EQ(names.rfind("F32, F16, ", 0), 0u) << names;
  EXPECT_NE(names.find(", MXFP4"), std::string::npos) << names;
  EXPECT_NE(names.find(", IQ4_XS"), std::string::npos) << names;
  EXPECT_EQ(names.find("Q8_1"), std::string::npos) << names;  // a row the file format names, Hearth does not run
  EXPECT_EQ(names.find("IQ2_XXS"), std::string::npos) << names;
}

TEST(QuantTest, Q4_0LowNibblesAreTheFirstHalf) {
  BlockQ4_0 block{};
  block.d = fp32_to_fp16(0.5f);
  for (int j = 0; j < 16; ++j) block.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  dequantize_row(DType::Q4_0, &block, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * (j - 8)) << j;
    EXPECT_EQ(y[j + 16], 0.5f * (7 - j)) << j;
  }
}

TEST(QuantTest, Q8_0IsScaleTimesInt8) {
  BlockQ8_0 block{};
  block.d = fp32_to_fp16(0.25f);
  for (int i = 0; i < 32; ++i) block.qs[i] = static_cast<int8_t>(i * 8 - 127);
  float y[32];
  dequantize_row(DType::Q8_0, &block, y, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], 0.25f * (i * 8 - 127));
}

// The E2M1 code's value (OCP MX spec: sign bit 3, then 2 exponent bits and 1 mantissa bit), written out by hand.
constexpr float kE2M1[16] = {0.0f, 0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                             0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

TEST(QuantTest, MXFP4LowNibblesAreTheFirstHalfTimesTheE8M0Scale) {
  BlockMXFP4 block{};
  block.e = 129;  // 2^(129-127) = 4
  for (int j = 0; j < 16; ++j) block.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  dequantize_row(DType::MXFP4, &block, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 4.0f * kE2M1[j]) << j;
    EXPECT_EQ(y[j + 16], 4.0f * kE2M1[15 - j]) << j;
  }
  // Code 8 is E2M1's -0, but GGML's table holds 0 there: +0, as GGML (and gguf-py) give.
  EXPECT_FALSE(std::signbit(y[8]));
  EXPECT_FALSE(std::signbit(y[16 + 7]));
}

// The E8M0 byte is 2^(e-127) over its whole range, as GGML reads it: e 0 and 1 give subnormal values, 255 is
// 2^127 (no NaN), and the values past the float range are ±infinity.
TEST(QuantTest, MXFP4ScalesUnderflowAndOverflowAsGgmlReadsThem) {
  struct Case {
    uint8_t e;
    uint8_t code;
    float want;
  };
  const float inf = std::numeric_limits<float>::infinity();
  const Case cases[] = {
      {127, 1, 0.5f},
      {127, 15, -6.0f},
      {0, 1, std::ldexp(1.0f, -128)},   // 0.5 · 2^-127, subnormal
      {0, 7, std::ldexp(6.0f, -127)},   // subnormal
      {0, 9, -std::ldexp(1.0f, -128)},  // negative subnormal
      {1, 1, std::ldexp(1.0f, -127)},
      {1, 2, std::ldexp(1.0f, -126)},  // the smallest normal
      {2, 1, std::ldexp(1.0f, -126)},
      {254, 3, std::ldexp(1.5f, 127)},  // 1.5 · 2^127, the largest finite value MXFP4 has
      {254, 4, inf},                    // 2 · 2^127
      {255, 1, std::ldexp(1.0f, 127)},  // 0.5 · 2^128
      {255, 9, -std::ldexp(1.0f, 127)},
      {255, 3, inf},  // 1.5 · 2^128
      {255, 15, -inf},
      {253, 7, inf},                    // 6 · 2^126 = 1.5 · 2^128
      {252, 7, std::ldexp(1.5f, 127)},  // 6 · 2^125
  };
  for (const Case& c : cases) {
    BlockMXFP4 block{};
    block.e = c.e;
    block.qs[0] = c.code;
    float y[32];
    dequantize_row(DType::MXFP4, &block, y, 32);
    EXPECT_EQ(y[0], c.want) << "e " << int{c.e} << " code " << int{c.code};
    EXPECT_EQ(y[1], 0.0f);
  }
}

// GGML's reference choice: e = floor(log2(absmax)) - 2 + 127, so the absmax is 4 to 8 times 2^(e-127) and E2M1's
// largest value, 6, clips the top; each value takes the nearest code, the lower one on ties.
TEST(QuantTest, MXFP4QuantizerTakesGgmlsScaleAndTheNearestCode) {
  float x[64] = {};
  x[0] = 1.0f;     // absmax 1: e = 0 - 2 + 127, half-scale 1/8, so 1.0 is code 6 (8 · 1/8)
  x[1] = -0.375f;  // -3/8: code 11
  x[2] = 0.3125f;  // 2.5/8, between 2/8 (code 2) and 3/8 (code 3): a tie, the lower code
  x[3] = 0.0625f;  // 0.5/8, between 0 and 1/8: a tie, code 0
  x[17] = -0.9f;   // element 17, byte 1's high nibble: nearest -8/8 (code 14)
  x[32] = 7.9f;    // absmax 7.9: e = 2 - 2 + 127, so 7.9 clips to 6 (code 7)
  x[33] = 5.0f;    // between 4 and 6: code 6
  BlockMXFP4 q[2];
  quantize_row(DType::MXFP4, x, q, 64);
  EXPECT_EQ(q[0].e, 125);
  EXPECT_EQ(q[0].qs[0], 6);
  EXPECT_EQ(q[0].qs[1], 11 | (14 << 4));
  EXPECT_EQ(q[0].qs[2], 2);
  EXPECT_EQ(q[0].qs[3], 0);
  EXPECT_EQ(q[1].e, 127);
  EXPECT_EQ(q[1].qs[0], 7);
  EXPECT_EQ(q[1].qs[1], 6);
  for (int j = 4; j < 16; ++j) EXPECT_EQ(q[0].qs[j], 0) << j;
  float zeros[32] = {};
  quantize_row(DType::MXFP4, zeros, q, 32);
  EXPECT_EQ(q[0].e, 0);
  for (uint8_t byte : q[0].qs) EXPECT_EQ(byte, 0);
}

TEST(QuantTest, Q4_KScaleUnpackingMatchesTheSpecifiedBits) {
  // Byte j < 4: scale j in bits 0-5, top 2 bits of scale j+4 in bits 6-7; bytes 4-7 likewise for the mins;
  // bytes 8-11: low 4 bits of scale j+4 (bits 0-3) and min j+4 (bits 4-7).
  const uint8_t want_scale[8] = {1, 22, 63, 40, 17, 63, 34, 48};
  const uint8_t want_min[8] = {5, 0, 31, 62, 33, 9, 63, 20};
  uint8_t packed[12] = {};
  for (int j = 0; j < 4; ++j) {
    packed[j] = static_cast<uint8_t>(want_scale[j] | ((want_scale[j + 4] >> 4) << 6));
    packed[j + 4] = static_cast<uint8_t>(want_min[j] | ((want_min[j + 4] >> 4) << 6));
    packed[j + 8] = static_cast<uint8_t>((want_scale[j + 4] & 15) | ((want_min[j + 4] & 15) << 4));
  }
  uint8_t scale[8];
  uint8_t min[8];
  unpack_q4_k_scales(packed, scale, min);
  for (int j = 0; j < 8; ++j) {
    EXPECT_EQ(scale[j], want_scale[j]) << j;
    EXPECT_EQ(min[j], want_min[j]) << j;
  }
}

TEST(QuantTest, Q4_KElementOrder) {
  BlockQ4_K block{};
  block.d = fp32_to_fp16(1.0f);
  block.dmin = fp32_to_fp16(0.5f);
  // Sub-block s: scale s + 1, min 2s (all < 16, so only bytes 0-7 and the low bits of 8-11 are used).
  for (int s = 0; s < 4; ++s) {
    block.scales[s] = static_cast<uint8_t>(s + 1);
    block.scales[s + 4] = static_cast<uint8_t>(2 * s);
    block.scales[s + 8] = static_cast<uint8_t>((s + 5) | ((2 * (s + 4)) << 4));
  }
  for (int c = 0; c < 4; ++c) {
    for (int i = 0; i < 32; ++i) block.qs[32 * c + i] = static_cast<uint8_t>((i % 16) | ((15 - i % 16) << 4));
  }
  float y[256];
  dequantize_row(DType::Q4_K, &block, y, 256);
  for (int s = 0; s < 8; ++s) {
    for (int i = 0; i < 32; ++i) {
      const int q = s % 2 == 0 ? i % 16 : 15 - i % 16;
      EXPECT_EQ(y[32 * s + i], static_cast<float>((s + 1) * q) - 0.5f * static_cast<float>(2 * s)) << s << " " << i;
    }
  }
}

TEST(QuantTest, Q6_KElementOrder) {
  // Element e gets q = e % 64 (6 bits), scale e / 16 + 1; so x[e] = d * (e/16 + 1) * (e % 64 - 32).
  BlockQ6_K block{};
  block.d = fp32_to_fp16(0.125f);
  for (int g = 0; g < 16; ++g) block.scales[g] = static_cast<int8_t>(g + 1);
  for (int e = 0; e < 256; ++e) {
    const int q = e % 64;
    const int half = e / 128;
    const int quarter = (e % 128) / 32;
    const int l = e % 32;
    const int ql_index = 64 * half + l + 32 * (quarter % 2);
    block.ql[ql_index] = static_cast<uint8_t>(block.ql[ql_index] | ((q & 15) << (4 * (quarter / 2))));
    block.qh[32 * half + l] = static_cast<uint8_t>(block.qh[32 * half + l] | ((q >> 4) << (2 * quarter)));
  }
  float y[256];
  dequantize_row(DType::Q6_K, &block, y, 256);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.125f * static_cast<float>((e / 16 + 1) * (e % 64 - 32))) << e;
}

TEST(QuantTest, FloatRowsConvertElementwise) {
  const std::vector<float> x = gaussian(64, 1);
  std::vector<uint16_t> half(64);
  std::vector<float> y(64);
  quantize_row(DType::F16, x.data(), half.data(), 64);
  dequantize_row(DType::F16, half.data(), y.data(), 64);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(y[i], fp16_to_fp32(fp32_to_fp16(x[i])));
  quantize_row(DType::BF16, x.data(), half.data(), 64);
  dequantize_row(DType::BF16, half.data(), y.data(), 64);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(y[i], bf16_to_fp32(fp32_to_bf16(x[i])));
  quantize_row(DType::F32, x.data(), y.data(), 64);
  EXPECT_EQ(y, x);
}

struct RoundTripCase {
  DType type;
  int64_t bound_block;         // elements over which the absmax of the bound is taken
  float max_error_per_absmax;  // max |error| <= this × block absmax
  float max_nmse;              // Σ error² / Σ x² over the row
};

class QuantRoundTripTest : public testing::TestWithParam<RoundTripCase> {};

TEST_P(QuantRoundTripTest, ErrorWithinFormatBound) {
  const RoundTripCase c = GetParam();
  const int64_t n = 256 * 32;
  for (uint32_t seed : {1u, 2u, 3u}) {
    std::vector<float> x = gaussian(n, seed, 0.02f);
    if (seed == 3) {  // outliers and an all-zero block
      for (int64_t i = 0; i < n; i += 97) x[static_cast<size_t>(i)] *= 20.0f;
      std::fill(x.begin(), x.begin() + 256, 0.0f);
    }
    std::vector<uint8_t> q(row_bytes(c.type, n));
    std::vector<float> y(static_cast<size_t>(n));
    quantize_row(c.type, x.data(), q.data(), n);
    dequantize_row(c.type, q.data(), y.data(), n);
    double err2 = 0.0;
    double ref2 = 0.0;
    for (int64_t b = 0; b < n / c.bound_block; ++b) {
      float absmax = 0.0f;
      for (int64_t i = b * c.bound_block; i < (b + 1) * c.bound_block; ++i) absmax = std::max(absmax, std::fabs(x[i]));
      for (int64_t i = b * c.bound_block; i < (b + 1) * c.bound_block; ++i) {
        ASSERT_TRUE(std::isfinite(y[i]));
        ASSERT_LE(std::fabs(y[i] - x[i]), c.max_error_per_absmax * absmax) << dtype_name(c.type) << " at " << i;
        err2 += (y[i] - x[i]) * static_cast<double>(y[i] - x[i]);
        ref2 += x[i] * static_cast<double>(x[i]);
      }
    }
    EXPECT_LE(err2 / ref2, c.max_nmse) << dtype_name(c.type) << " seed " << seed;
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantRoundTripTest,
                         testing::Values(RoundTripCase{DType::F16, 32, 1.01f / 2048, 1e-7f},
                                         RoundTripCase{DType::BF16, 32, 1.01f / 256, 1e-5f},
                                         RoundTripCase{DType::Q8_0, 32, 0.6f / 127, 3e-4f},
                                         RoundTripCase{DType::Q4_0, 32, 1.01f / 8, 3e-2f},
                                         RoundTripCase{DType::Q4_K, 256, 1.0f / 15, 3e-2f},
                                         RoundTripCase{DType::Q6_K, 256, 1.0f / 31, 3e-3f},
                                         // the absmax, up to 8 units, clips to 6: below a quarter of it; one
                                         // mantissa bit leaves 3% NMSE on the outliers' seed
                                         RoundTripCase{DType::MXFP4, 32, 0.25f, 4e-2f}),
                         [](const testing::TestParamInfo<RoundTripCase>& info) {
                           return std::string(dtype_name(info.param.type));
                         });

TEST(QuantTest, Q8_KActivationsAreSymmetricWithBlockSums) {
  const std::vector<float> x = gaussian(512, 7);
  std::vector<BlockQ8_K> q(2);
  quantize_row_q8_k(x.data(), q.data(), 512);
  std::vector<float> y(512);
  dequantize_row_q8_k(q.data(), y.data(), 512);
  for (int b = 0; b < 2; ++b) {
    float absmax = 0.0f;
    for (int i = 0; i < 256; ++i) absmax = std::max(absmax, std::fabs(x[256 * b + i]));
    EXPECT_FLOAT_EQ(q[b].d, absmax / 127);
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += q[b].qs[16 * g + i];
      EXPECT_EQ(q[b].bsums[g], sum);
    }
    for (int i = 0; i < 256; ++i) {
      EXPECT_GE(q[b].qs[i], -127);
      EXPECT_LE(std::fabs(y[256 * b + i] - x[256 * b + i]), 0.5f * q[b].d * 1.0001f);
    }
  }
}

TEST(QuantTest, Q8_0ActivationsUseTheFullRange) {
  const std::vector<float> x = gaussian(64, 8);
  BlockQ8_0 q[2];
  quantize_row_q8_0(x.data(), q, 64);
  for (const BlockQ8_0& block : q) {
    int max_abs = 0;
    for (int8_t v : block.qs) max_abs = std::max(max_abs, std::abs(static_cast<int>(v)));
    EXPECT_EQ(max_abs, 127);
  }
}

}  // namespace
}  // namespace hearth
