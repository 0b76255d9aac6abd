// The element-wise kernels against their scalar reference twins.
#include "kernels/ops.h"

#include "kernels/cpu_isa.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "random_vector.h"  // tests/kernels

namespace hearth {
namespace {

using testing::random_vector;

TEST(Ops, DotMatchesReference) {
  for (int64_t n : {1, 7, 8, 9, 64, 100, 4096}) {
    auto a = random_vector(n, 1);
    auto b = random_vector(n, 2);
    const float fast = dot_f32(a.data(), b.data(), n);
    const float ref = dot_f32_reference(a.data(), b.data(), n);
    EXPECT_NEAR(fast, ref, 1e-5f * std::sqrt(static_cast<float>(n)) * 4) << "n = " << n;
  }
}

TEST(Ops, DotIsDeterministicForAGivenLength) {
  auto a = random_vector(1000, 3);
  auto b = random_vector(1000, 4);
  const float first = dot_f32(a.data(), b.data(), 1000);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(dot_f32(a.data(), b.data(), 1000), first);
}

TEST(Ops, RmsNormExactValues) {
  const float x[4] = {1, 2, 3, 4};
  const float w[4] = {1, 1, 2, 0.5f};
  float out[4];
  rms_norm(x, w, out, 4, 0.0f);
  const float rms = std::sqrt((1 + 4 + 9 + 16) / 4.0f);
  EXPECT_FLOAT_EQ(out[0], 1 / rms);
  EXPECT_FLOAT_EQ(out[2], 6 / rms);
  EXPECT_FLOAT_EQ(out[3], 2 / rms);
}

TEST(Ops, RopeRotatesPairsByPositionAngle) {
  float cs[4];
  rope_fill_cos_sin(3, 4, 10000.0f, cs);
  float x[4] = {1, 0, 1, 0};
  rope_apply(x, cs, 4, /*neox=*/false);
  EXPECT_NEAR(x[0], std::cos(3.0), 1e-6);
  EXPECT_NEAR(x[1], std::sin(3.0), 1e-6);
  EXPECT_NEAR(x[2], std::cos(3.0 / 100.0), 1e-6);
  EXPECT_NEAR(x[3], std::sin(3.0 / 100.0), 1e-6);
  float y[4] = {1, 1, 0, 0};
  rope_apply(y, cs, 4, /*neox=*/true);  // pairs (0,2) and (1,3)
  EXPECT_NEAR(y[0], std::cos(3.0), 1e-6);
  EXPECT_NEAR(y[2], std::sin(3.0), 1e-6);
  rope_fill_cos_sin(0, 4, 10000.0f, cs);
  float z[4] = {0.5f, -2, 3, 4};
  rope_apply(z, cs, 4, false);
  EXPECT_FLOAT_EQ(z[1], -2);  // position 0 is the identity
}

}  // namespace
}  // namespace hearth
