// The element-wise and attention kernels against their scalar reference twins.
#include "kernels/ops.h"

#include "kernels/cpu_isa.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace hearth {
namespace {

std::vector<float> random_vector(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

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

// A paged K/V layout with a scrambled block table, so the kernel must follow the table.
struct PagedFixture {
  int32_t block_size = 4, n_blocks = 6, row = 16;
  std::vector<float> k, v;
  std::vector<BlockId> table{BlockId{3}, BlockId{0}, BlockId{5}, BlockId{1}};
  explicit PagedFixture(int32_t row_width = 16)
      : row(row_width), k(random_vector(6 * 4 * row_width, 5)), v(random_vector(6 * 4 * row_width, 6)) {}
  PagedKvView view(const std::vector<float>& data) const {
    return {data.data(), static_cast<size_t>(block_size * row), static_cast<size_t>(row), block_size, table};
  }
};

TEST(Ops, AttentionMatchesReferenceThroughBlockTable) {
  PagedFixture f;
  const int32_t head_dim = 8;
  for (int32_t n_keys : {1, 3, 4, 5, 16}) {
    for (int32_t head_offset : {0, 8}) {
      auto q = random_vector(head_dim, 7 + n_keys);
      std::vector<float> scores(n_keys), out(head_dim), ref(head_dim);
      attention_head(q.data(), f.view(f.k), f.view(f.v), head_offset, head_dim, n_keys, 0.35f, scores.data(),
                     out.data());
      attention_head_reference(q.data(), f.view(f.k), f.view(f.v), head_offset, head_dim, n_keys, 0.35f,
                               scores.data(), ref.data());
      for (int d = 0; d < head_dim; ++d) EXPECT_NEAR(out[d], ref[d], 1e-5f) << n_keys << " keys, dim " << d;
    }
  }
}

TEST(Ops, AttentionOverOneKeyReturnsItsValue) {
  PagedFixture f;
  auto q = random_vector(8, 9);
  float scores[1], out[8];
  attention_head(q.data(), f.view(f.k), f.view(f.v), 0, 8, 1, 1.0f, scores, out);
  const float* v0 = f.v.data() + 3 * 4 * 16;  // position 0 lives in block 3, slot 0
  for (int d = 0; d < 8; ++d) EXPECT_FLOAT_EQ(out[d], v0[d]);
}

}  // namespace
}  // namespace hearth

namespace hearth {
namespace {

TEST(Ops, AttentionIsBitIdenticalToTheScalarLaneOrder) {
  // The AVX2 kernel and the portable fallback use the same lane order, so they agree bit for bit.
  for (int32_t head_dim : {8, 16, 64, 72, 128}) {
    PagedFixture f(2 * head_dim);
    auto q = random_vector(head_dim, 11);
    for (int32_t n_keys : {1, 5, 16}) {
      std::vector<float> scores(n_keys), fast(head_dim), scalar(head_dim), ref(head_dim);
      attention_head(q.data(), f.view(f.k), f.view(f.v), head_dim, head_dim, n_keys, 0.25f, scores.data(),
                     fast.data());
      const IsaLevel level = active_isa_level();
      set_isa_level(IsaLevel::kScalar);
      attention_head(q.data(), f.view(f.k), f.view(f.v), head_dim, head_dim, n_keys, 0.25f, scores.data(),
                     scalar.data());
      set_isa_level(level);
      EXPECT_EQ(fast, scalar) << "head_dim " << head_dim << ", " << n_keys << " keys";
      attention_head_reference(q.data(), f.view(f.k), f.view(f.v), head_dim, head_dim, n_keys, 0.25f, scores.data(),
                               ref.data());
      for (int32_t d = 0; d < head_dim; ++d) EXPECT_NEAR(fast[d], ref[d], 1e-5f) << head_dim << " dim " << d;
    }
  }
}

}  // namespace
}  // namespace hearth
