// KV dtypes: sizes (scales included), names, and the quantize → dequantize round trip within each format's bound.
#include "tensor/kv_dtype.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "random_vector.h"

namespace hearth {
namespace {

using testing::random_vector;

TEST(KvDtype, NamesRoundTripAndUnknownNamesAreRejected) {
  for (KvDtype t : all_kv_dtypes()) EXPECT_EQ(*parse_kv_dtype(kv_dtype_name(t)), t);
  auto bad = parse_kv_dtype("q3_k");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("expected one of f32, f16, bf16, q8_0, q4_0"), std::string::npos);
}

TEST(KvDtype, HeadBytesCountScales) {
  // head_dim 64: q8_0 is one group of 64 (2-byte scale + 64 bytes), q4_0 two groups of 32 (2 × (2 + 16)).
  EXPECT_EQ(kv_head_bytes(KvDtype::kF32, 64), 256u);
  EXPECT_EQ(kv_head_bytes(KvDtype::kF16, 64), 128u);
  EXPECT_EQ(kv_head_bytes(KvDtype::kBF16, 64), 128u);
  EXPECT_EQ(kv_head_bytes(KvDtype::kQ8_0, 64), 66u);
  EXPECT_EQ(kv_head_bytes(KvDtype::kQ4_0, 64), 36u);
  EXPECT_EQ(kv_head_scale_bytes(KvDtype::kQ4_0, 64), 4u);
  // head_dim 128: q8_0 two groups of 64, q4_0 four of 32.
  EXPECT_EQ(kv_head_bytes(KvDtype::kQ8_0, 128), 132u);
  EXPECT_EQ(kv_head_bytes(KvDtype::kQ4_0, 128), 72u);
  // stories260K's head_dim 8: one group each.
  EXPECT_EQ(kv_head_bytes(KvDtype::kQ8_0, 8), 10u);
  EXPECT_EQ(kv_head_bytes(KvDtype::kQ4_0, 8), 6u);
  // head_dim 80: q4_0 groups of 20.
  EXPECT_EQ(*kv_group_size(KvDtype::kQ4_0, 80), 20);
  EXPECT_EQ(kv_head_bytes(KvDtype::kQ4_0, 80), 4u * (2 + 10));
  auto odd = kv_group_size(KvDtype::kQ4_0, 7);
  ASSERT_FALSE(odd);
  EXPECT_NE(odd.error().message.find("even head size"), std::string::npos);
}

TEST(KvDtype, RoundTripErrorIsWithinEachFormatsBound) {
  for (int32_t hd : {8, 64, 80, 128}) {
    for (float scale : {1e-3f, 1.0f, 40.0f}) {
      const auto x = random_vector(hd, hd + static_cast<uint32_t>(scale * 10), scale);
      for (KvDtype t : all_kv_dtypes()) {
        std::vector<uint8_t> q(kv_head_bytes(t, hd));
        kv_quantize_head(t, x.data(), q.data(), hd);
        std::vector<float> y(hd);
        kv_dequantize_head_reference(t, q.data(), y.data(), hd);
        const int32_t g = *kv_group_size(t, hd);
        for (int32_t i = 0; i < hd; ++i) {
          const int32_t g0 = i / g * g;
          const float amax = std::fabs(*std::max_element(x.begin() + g0, x.begin() + g0 + g,
                                                         [](float a, float b) { return std::fabs(a) < std::fabs(b); }));
          float bound = 0;
          switch (t) {
            case KvDtype::kF32: bound = 0; break;
            case KvDtype::kF16: bound = std::fabs(x[i]) * 0x1p-11f + 0x1p-24f; break;
            case KvDtype::kBF16: bound = std::fabs(x[i]) * 0x1p-8f; break;
            // Half a step of d = amax/127 (or amax/8), plus the f16 rounding of d over the full range.
            case KvDtype::kQ8_0: bound = amax / 127 * 0.5f + amax * 0x1p-10f; break;
            case KvDtype::kQ4_0: bound = amax / 8 + amax * 0x1p-9f; break;
          }
          EXPECT_LE(std::fabs(y[i] - x[i]), bound)
              << kv_dtype_name(t) << " hd " << hd << " scale " << scale << " i " << i;
        }
      }
    }
  }
}

TEST(KvDtype, ZeroGroupsStayZero) {
  std::vector<float> x(64, 0.0f), y(64, 1.0f);
  for (KvDtype t : all_kv_dtypes()) {
    std::vector<uint8_t> q(kv_head_bytes(t, 64));
    kv_quantize_head(t, x.data(), q.data(), 64);
    kv_dequantize_head_reference(t, q.data(), y.data(), 64);
    EXPECT_EQ(y, x) << kv_dtype_name(t);
  }
}

}  // namespace
}  // namespace hearth
