// fp16 / bf16 conversions: exhaustive over all 16-bit patterns, every rounding midpoint, and (where the CPU has
// F16C) agreement with the hardware converter on random fp32 bit patterns.

#include "tensor/fp16.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace hearth {
namespace {

bool is_half_nan(uint16_t h) {
  return (h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0;
}

// Independent decoding from the IEEE definition.
double half_value(uint16_t h) {
  const int sign = (h & 0x8000) ? -1 : 1;
  const int exponent = (h >> 10) & 0x1F;
  const int mantissa = h & 0x3FF;
  if (exponent == 0x1F) return mantissa == 0 ? sign * INFINITY : NAN;
  if (exponent == 0) return sign * std::ldexp(static_cast<double>(mantissa), -24);
  return sign * std::ldexp(1.0 + mantissa / 1024.0, exponent - 15);
}

TEST(Fp16Test, EveryHalfDecodesToItsIeeeValue) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    const double want = half_value(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(f)) << h;
    } else {
      ASSERT_EQ(static_cast<double>(f), want) << h;
      ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << h;
    }
  }
}

TEST(Fp16Test, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t back = fp32_to_fp16(fp16_to_fp32(static_cast<uint16_t>(h)));
    if (is_half_nan(static_cast<uint16_t>(h))) {
      ASSERT_EQ(back, h | 0x0200) << h;  // quieted, payload kept
    } else {
      ASSERT_EQ(back, h) << h;
    }
  }
}

// Between consecutive halfs h and h+1 the exact midpoint rounds to the even one; one fp32 ulp either side rounds
// to the nearer one. Covers subnormals, the subnormal/normal boundary and overflow to inf.
TEST(Fp16Test, MidpointsRoundToNearestEven) {
  for (uint32_t h = 0; h < 0x7C00; ++h) {
    const float lo = fp16_to_fp32(static_cast<uint16_t>(h));
    const float hi = h + 1 == 0x7C00 ? 65536.0f : fp16_to_fp32(static_cast<uint16_t>(h + 1));
    const float mid = (lo + hi) / 2;  // exact: needs one bit more than a half's significand
    const uint16_t even = (h % 2 == 0) ? static_cast<uint16_t>(h) : static_cast<uint16_t>(h + 1);
    for (float sign : {1.0f, -1.0f}) {
      const uint16_t sign_bit = sign < 0 ? 0x8000 : 0;
      ASSERT_EQ(fp32_to_fp16(sign * mid), even | sign_bit) << h;
      ASSERT_EQ(fp32_to_fp16(sign * std::nextafter(mid, 0.0f)), h | sign_bit) << h;
      ASSERT_EQ(fp32_to_fp16(sign * std::nextafter(mid, INFINITY)), (h + 1) | sign_bit) << h;
    }
  }
}

TEST(Fp16Test, SpecialValues) {
  EXPECT_EQ(fp32_to_fp16(0.0f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(INFINITY), 0x7C00);
  EXPECT_EQ(fp32_to_fp16(-INFINITY), 0xFC00);
  EXPECT_EQ(fp32_to_fp16(1e10f), 0x7C00);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7BFF);
  EXPECT_EQ(fp32_to_fp16(1e-30f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_TRUE(is_half_nan(fp32_to_fp16(NAN)));
  EXPECT_TRUE(is_half_nan(fp32_to_fp16(std::bit_cast<float>(0x7F800001u))));  // payload only in low bits
  EXPECT_EQ(fp32_to_fp16(-NAN) & 0x8000, 0x8000);
}

#if defined(__x86_64__)
__attribute__((target("f16c"))) uint16_t hardware_fp32_to_fp16(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

TEST(Fp16Test, MatchesF16cOnRandomBitPatterns) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "no F16C";
  std::mt19937 rng(1234);
  for (int i = 0; i < 4'000'000; ++i) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    ASSERT_EQ(fp32_to_fp16(f), hardware_fp32_to_fp16(f)) << std::bit_cast<uint32_t>(f);
  }
}
#endif

TEST(Bf16Test, EveryBf16RoundTrips) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = bf16_to_fp32(static_cast<uint16_t>(b));
    ASSERT_EQ(std::bit_cast<uint32_t>(f), b << 16);
    const bool nan = (b & 0x7F80) == 0x7F80 && (b & 0x7F) != 0;
    ASSERT_EQ(fp32_to_bf16(f), nan ? (b | 0x40) : b) << b;
  }
}

// Independent rounding: pick the nearer of the two bf16 neighbours by exact double arithmetic, ties to even.
uint16_t reference_bf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint16_t down = static_cast<uint16_t>(bits >> 16);
  const uint16_t up = static_cast<uint16_t>(down + 1);
  const double lo = std::fabs(static_cast<double>(bf16_to_fp32(down)));
  const double hi = (up & 0x7FFF) == 0x7F80 ? std::ldexp(1.0, 128) : std::fabs(static_cast<double>(bf16_to_fp32(up)));
  const double v = std::fabs(static_cast<double>(f));
  if (v - lo < hi - v) return down;
  if (v - lo > hi - v) return up;
  return (down % 2 == 0) ? down : up;
}

TEST(Bf16Test, RoundsToNearestEven) {
  std::mt19937 rng(99);
  for (int i = 0; i < 2'000'000; ++i) {
    uint32_t bits = static_cast<uint32_t>(rng());
    if (i % 4 == 0) bits = (bits & 0xFFFF0000u) | 0x8000u;  // exact midpoints
    const float f = std::bit_cast<float>(bits);
    if (std::isnan(f) || std::isinf(f)) continue;
    ASSERT_EQ(fp32_to_bf16(f), reference_bf16(f)) << bits;
  }
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x7F7FFFFFu)), 0x7F80);  // FLT_MAX rounds up to inf
  EXPECT_EQ(fp32_to_bf16(INFINITY), 0x7F80);
  EXPECT_EQ(fp32_to_bf16(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(std::bit_cast<float>(0x7F800001u)))));
  EXPECT_EQ(fp32_to_bf16(-NAN) & 0x8000, 0x8000);
}

}  // namespace
}  // namespace hearth
