// The element-wise kernels against their scalar reference twins.
#include "kernels/ops.h"

#include "kernels/cpu_isa.h"
#include "kernels/rms_lanes.h"
#include "kernels/silu_lanes.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "../tensor/random_vector.h"  // tests/tensor

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

TEST(Ops, RmsNormMatchesReferenceAndItsAvx2FormIsTheScalarOne) {
  const auto w = random_vector(5000, 52);
  for (const int64_t n : {1, 7, 8, 9, 64, 100, 768, 2048, 5000}) {
    const auto x = random_vector(n, 51);
    std::vector<float> fast(n), ref(n);
    rms_norm(x.data(), w.data(), fast.data(), n, 1e-5f);
    rms_norm_reference(x.data(), w.data(), ref.data(), n, 1e-5f);
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(fast[i], ref[i], 2.5e-7f * std::fabs(ref[i])) << n << " " << i;
    std::vector<float> in_place(x);
    rms_norm(in_place.data(), w.data(), in_place.data(), n, 1e-5f);
    EXPECT_EQ(in_place, fast) << "out may be x";
    if (!isa_at_least(IsaLevel::kAvx2)) continue;
    std::vector<float> vec(n), sca(n);
    kernels::rms_norm_lanes_avx2(x.data(), w.data(), vec.data(), n, 1e-5f);
    kernels::rms_norm_lanes_scalar(x.data(), w.data(), sca.data(), n, 1e-5f);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(vec[i]), std::bit_cast<uint32_t>(sca[i])) << n << " " << i;
    }
  }
}

TEST(Ops, LayerNormExactValuesAndMatchesReference) {
  const float x[4] = {1, 2, 3, 6};  // mean 3, variance (4 + 1 + 0 + 9) / 4 = 3.5
  const float w[4] = {1, 2, 1, 1};
  const float b[4] = {0, 0, 1, -1};
  float out[4];
  layer_norm(x, w, b, out, 4, 0.0f);
  const float sd = std::sqrt(3.5f);
  EXPECT_FLOAT_EQ(out[0], -2 / sd);
  EXPECT_FLOAT_EQ(out[1], -2 / sd);
  EXPECT_FLOAT_EQ(out[2], 1.0f);
  EXPECT_FLOAT_EQ(out[3], 3 / sd - 1);
  const auto wr = random_vector(5000, 61);
  const auto br = random_vector(5000, 62);
  for (const int64_t n : {1, 7, 64, 384, 768, 5000}) {
    auto xr = random_vector(n, 63);
    for (float& v : xr) v += 3.0f;  // an offset the mean must remove
    std::vector<float> fast(n), ref(n);
    layer_norm(xr.data(), wr.data(), br.data(), fast.data(), n, 1e-12f);
    layer_norm_reference(xr.data(), wr.data(), br.data(), ref.data(), n, 1e-12f);
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(fast[i], ref[i], 1e-5f * (1 + std::fabs(ref[i]))) << n << " " << i;
    std::vector<float> in_place(xr);
    layer_norm(in_place.data(), wr.data(), br.data(), in_place.data(), n, 1e-12f);
    EXPECT_EQ(in_place, fast) << "out may be x";
  }
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

// GELU (tanh form) against the double-precision formula, and at exact points.
TEST(Ops, GeluMulMatchesReference) {
  const auto gate = random_vector(1000, 31);
  const auto up = random_vector(1000, 32);
  std::vector<float> fast(1000), ref(1000);
  const std::vector<float> wide = [&] {
    std::vector<float> w(gate);
    for (float& x : w) x *= 6.0f;  // into GELU's tails
    return w;
  }();
  for (const auto* g : {&gate, &wide}) {
    gelu_mul(g->data(), up.data(), fast.data(), 1000);
    gelu_mul_reference(g->data(), up.data(), ref.data(), 1000);
    for (size_t i = 0; i < fast.size(); ++i) ASSERT_NEAR(fast[i], ref[i], 1e-6f * (1 + std::fabs(ref[i]))) << i;
  }
  const float g[] = {0.0f, 1.0f, -1.0f, 3.0f, -10.0f};
  const float one[] = {1, 1, 1, 1, 1};
  float out[5];
  gelu_mul(g, one, out, 5);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_NEAR(out[1], 0.841192f, 1e-6f);  // 0.5 (1 + tanh(0.7978846 × 1.044715))
  EXPECT_NEAR(out[2], -0.158808f, 1e-6f);
  EXPECT_NEAR(out[3], 2.996363f, 1e-6f);
  EXPECT_NEAR(out[4], 0.0f, 1e-6f);
}

// SiLU with the polynomial exp against the double-precision formula over the whole range a gate takes (and its
// tails, where exp over- or underflows), and its AVX2 and scalar forms bit for bit at every length.
TEST(Ops, SiluMulMatchesReference) {
  std::vector<float> gate;
  for (float x = -120.0f; x <= 120.0f; x += 0.0137f) gate.push_back(x);
  for (const float x : random_vector(5000, 41)) gate.push_back(x * 8.0f);
  for (const float x : {0.0f, -0.0f, 1e-30f, -1e-30f, 87.0f, -87.0f, 88.5f, -88.5f, 104.0f, -104.0f}) gate.push_back(x);
  const auto n = static_cast<int64_t>(gate.size());
  std::vector<float> up(gate.size());
  for (size_t i = 0; i < up.size(); ++i) up[i] = 0.25f + static_cast<float>(i % 7);
  std::vector<float> fast(gate.size()), ref(gate.size());
  silu_mul(gate.data(), up.data(), fast.data(), n);
  silu_mul_reference(gate.data(), up.data(), ref.data(), n);
  for (size_t i = 0; i < fast.size(); ++i) {
    ASSERT_NEAR(fast[i], ref[i], 4e-7f * std::fabs(ref[i]) + 1e-30f) << "gate " << gate[i];
  }
  const float nan = std::nanf("");
  const float special[] = {nan, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
  const float ones[] = {1, 1, 1};
  float out[3];
  silu_mul(special, ones, out, 3);
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(out[1], std::numeric_limits<float>::infinity());
  EXPECT_EQ(out[2], -std::numeric_limits<float>::infinity() / (1.0f + std::exp(88.0f)));
}

TEST(Ops, SiluMulAvx2IsTheScalarFormBitForBit) {
  if (!isa_at_least(IsaLevel::kAvx2)) GTEST_SKIP() << "this CPU has no AVX2";
  const auto gate = random_vector(1000, 43);
  const auto up = random_vector(1000, 44);
  for (const int64_t n : {1, 7, 8, 9, 31, 1000}) {
    for (const float scale : {1.0f, 12.0f, 100.0f}) {
      std::vector<float> g(gate.begin(), gate.begin() + n);
      for (float& x : g) x *= scale;
      std::vector<float> vec(n), sca(n);
      kernels::silu_mul_lanes_avx2(g.data(), up.data(), vec.data(), n);
      kernels::silu_mul_lanes_scalar(g.data(), up.data(), sca.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(std::bit_cast<uint32_t>(vec[i]), std::bit_cast<uint32_t>(sca[i])) << "n " << n << " i " << i;
      }
    }
  }
}

TEST(Ops, SoftcapBoundsByTheCap) {
  float x[] = {0.0f, 1.0f, -100.0f, 1000.0f};
  softcap_inplace(x, 4, 30.0f);
  EXPECT_EQ(x[0], 0.0f);
  EXPECT_NEAR(x[1], 30.0f * std::tanh(1.0f / 30.0f), 1e-6f);
  EXPECT_NEAR(x[2], -30.0f * std::tanh(100.0f / 30.0f), 1e-5f);
  EXPECT_NEAR(x[3], 30.0f, 1e-5f);
}

}  // namespace
}  // namespace hearth
