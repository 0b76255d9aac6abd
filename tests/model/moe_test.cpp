// The mixture-of-experts FFN (model/moe.h): the router's choices and weights on hand-computed cases, the FFN's
// rows against a plain per-token, per-expert loop, alone and in batches, and qwen35moe's gated shared expert
// against its scalar twin (shared_expert_reference), itself checked on a case computed by hand.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/matmul.h"
#include "model/moe.h"
#include "tensor/quant.h"

namespace hearth {
namespace {

std::vector<ExpertChoice> route(const MoeRouting& r, const std::vector<float>& logits) {
  std::vector<float> probs(logits.size());
  std::vector<ExpertChoice> choices(static_cast<size_t>(r.n_used));
  route_token(r, logits, probs, choices);
  return choices;
}

// Logits ln 1 .. ln 4: probabilities 0.1, 0.2, 0.3, 0.4. The two most probable, most probable first, weighted
// 0.4 / 0.7 and 0.3 / 0.7 when normalised, 0.4 and 0.3 when not.
TEST(MoeRouter, SoftmaxTopKNormalised) {
  const std::vector<float> logits = {0.0f, std::log(2.0f), std::log(3.0f), std::log(4.0f)};
  const MoeRouting normalised{4, 2, 8, ExpertGating::kSoftmax, true};
  const auto chosen = route(normalised, logits);
  EXPECT_EQ(chosen[0].expert, 3);
  EXPECT_EQ(chosen[1].expert, 2);
  EXPECT_FLOAT_EQ(chosen[0].weight, 4.0f / 7.0f);
  EXPECT_FLOAT_EQ(chosen[1].weight, 3.0f / 7.0f);
  MoeRouting raw = normalised;
  raw.norm_weights = false;
  const auto unnormalised = route(raw, logits);
  EXPECT_EQ(unnormalised[0].expert, 3);
  EXPECT_FLOAT_EQ(unnormalised[0].weight, 0.4f);
  EXPECT_FLOAT_EQ(unnormalised[1].weight, 0.3f);
}

// gpt-oss's gating: the two largest logits (raw, not softmaxed over all), weighted by a softmax over those two
// alone: logits 0.5 and 2.0 weigh 1 / (1 + e^1.5) and e^1.5 / (1 + e^1.5); negative logits are fine.
TEST(MoeRouter, SoftmaxWeightChoosesTheLargestLogitsAndSoftmaxesThemAlone) {
  const std::vector<float> logits = {-3.0f, 0.5f, -1.0f, 2.0f};
  const MoeRouting r{4, 2, 8, ExpertGating::kSoftmaxWeight, false};
  const auto chosen = route(r, logits);
  ASSERT_EQ(chosen.size(), 2u);
  EXPECT_EQ(chosen[0].expert, 3);
  EXPECT_EQ(chosen[1].expert, 1);
  const float e = std::exp(1.5f);
  EXPECT_FLOAT_EQ(chosen[0].weight, e / (1.0f + e));
  EXPECT_FLOAT_EQ(chosen[1].weight, 1.0f / (1.0f + e));
  const auto all_negative = route(r, {-5.0f, -4.0f, -9.0f, -7.0f});
  EXPECT_EQ(all_negative[0].expert, 1);
  EXPECT_EQ(all_negative[1].expert, 0);
}

// Equal probabilities go to the lower expert id; a single used expert gets weight 1 when normalised.
TEST(MoeRouter, TiesGoToTheLowerIdAndOneExpertWeighsOne) {
  const auto tied = route({4, 2, 8, ExpertGating::kSoftmax, true}, {1.0f, 0.0f, 1.0f, 1.0f});
  EXPECT_EQ(tied[0].expert, 0);
  EXPECT_EQ(tied[1].expert, 2);
  EXPECT_EQ(tied[0].weight, 0.5f);
  const auto top1 = route({4, 1, 8, ExpertGating::kSoftmax, true}, {0.5f, 2.0f, -1.0f, 1.0f});
  EXPECT_EQ(top1[0].expert, 1);
  EXPECT_EQ(top1[0].weight, 1.0f);
}

// 8 experts of 32 over dim 64, 3 used, Q8_0 experts and an F32 router, deterministic pseudo-random values.
struct TinyMoe {
  static constexpr int64_t kDim = 64, kFf = 32;
  MoeRouting routing{8, 3, kFf, ExpertGating::kSoftmax, true};
  std::vector<float> router_f32;
  std::vector<uint8_t> gate_q, up_q, down_q;
  MoeLayerWeights w;

  static float value(uint32_t i, float scale) {
    i = i * 2654435761u + 12345u;
    return (static_cast<float>((i >> 8) % 2001) / 1000.0f - 1.0f) * scale;
  }
  std::vector<uint8_t> quantized(int64_t rows, int64_t cols, uint32_t salt) {
    std::vector<float> row(static_cast<size_t>(cols));
    std::vector<uint8_t> out(static_cast<size_t>(rows) * row_bytes(DType::Q8_0, cols));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) row[c] = value(static_cast<uint32_t>(salt + r * cols + c), 0.2f);
      quantize_row(DType::Q8_0, row.data(), out.data() + r * row_bytes(DType::Q8_0, cols), cols);
    }
    return out;
  }
  std::vector<MatrixView> experts(const std::vector<uint8_t>& data, int64_t rows, int64_t cols) {
    std::vector<MatrixView> out;
    const size_t stride = row_bytes(DType::Q8_0, cols);
    for (int32_t e = 0; e < routing.n_expert; ++e) {
      out.push_back({DType::Q8_0, rows, cols, data.data() + e * rows * stride, stride});
    }
    return out;
  }
  TinyMoe() {
    for (int64_t i = 0; i < routing.n_expert * kDim; ++i) router_f32.push_back(value(static_cast<uint32_t>(i), 1.0f));
    gate_q = quantized(routing.n_expert * kFf, kDim, 1000);
    up_q = quantized(routing.n_expert * kFf, kDim, 2000);
    down_q = quantized(routing.n_expert * kDim, kFf, 3000);
    w.router = {DType::F32, routing.n_expert, kDim, reinterpret_cast<const uint8_t*>(router_f32.data()),
                kDim * sizeof(float)};
    w.gate = experts(gate_q, kFf, kDim);
    w.up = experts(up_q, kFf, kDim);
    w.down = experts(down_q, kDim, kFf);
  }
};

// One token by hand: route, then each chosen expert with matmul_reference, weighted and added in choice order.
std::vector<float> by_hand(const TinyMoe& m, const float* x) {
  const int64_t dim = TinyMoe::kDim, ff = TinyMoe::kFf;
  std::vector<float> logits(8), probs(8), g(ff), u(ff), y(dim), out(dim, 0.0f);
  std::vector<ExpertChoice> choices(3);
  matmul_reference(m.w.router, x, 1, logits.data());
  route_token(m.routing, logits, probs, choices);
  for (size_t k = 0; k < choices.size(); ++k) {
    const int32_t e = choices[k].expert;
    matmul_reference(m.w.gate[e], x, 1, g.data());
    matmul_reference(m.w.up[e], x, 1, u.data());
    for (int64_t i = 0; i < ff; ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    matmul_reference(m.w.down[e], g.data(), 1, y.data());
    for (int64_t i = 0; i < dim; ++i) out[i] += y[i] * choices[k].weight;
  }
  return out;
}

// The grouped FFN over batches of 1, 5 and 40 rows gives each row the same bits as that row alone, and agrees with
// the per-token loop to rounding (silu_mul's polynomial exp against std::exp, SIMD dot products).
TEST(MoeFfn, RowsSameBitsAloneOrInBatchesAndAgreeWithThePerTokenLoop) {
  const TinyMoe m;
  const int64_t dim = TinyMoe::kDim;
  std::vector<float> x(40 * dim);
  for (size_t i = 0; i < x.size(); ++i) x[i] = TinyMoe::value(static_cast<uint32_t>(i + 7777), 1.0f);
  ThreadPool pool(2);
  MatmulScratch scratch;
  MoeFfn ffn;
  std::vector<float> alone(x.size());
  for (int64_t t = 0; t < 40; ++t) {
    ffn.forward(m.w, m.routing, x.data() + t * dim, 1, alone.data() + t * dim, pool, scratch);
    const std::vector<float> expected = by_hand(m, x.data() + t * dim);
    for (int64_t i = 0; i < dim; ++i) EXPECT_NEAR(alone[t * dim + i], expected[i], 2e-3) << t << " " << i;
  }
  for (int64_t batch : {5, 40}) {
    std::vector<float> out(x.size());
    for (int64_t t0 = 0; t0 < 40; t0 += batch) {
      ffn.forward(m.w, m.routing, x.data() + t0 * dim, batch, out.data() + t0 * dim, pool, scratch);
    }
    EXPECT_EQ(std::memcmp(out.data(), alone.data(), out.size() * sizeof(float)), 0) << "batches of " << batch;
  }
}

// The scalar twin on a case by hand: dim 2, one hidden unit; x = (1, 2), gate row (1, 0), up row (0, 1): hidden
// h = silu(1) · 2; down rows (2) and (-1); a gate logit of 0 (sigmoid 1/2) adds (h, -h / 2) to out.
TEST(MoeSharedExpert, ScalarTwinOnAHandComputedCase) {
  const std::vector<float> gate = {1.0f, 0.0f}, up = {0.0f, 1.0f}, down = {2.0f, -1.0f};
  auto view = [](const std::vector<float>& v, int64_t rows, int64_t cols) {
    return MatrixView{DType::F32, rows, cols, reinterpret_cast<const uint8_t*>(v.data()), cols * sizeof(float)};
  };
  MoeLayerWeights w;
  w.shared_gate_inp = {0.0f, 0.0f};
  w.shared_gate = view(gate, 1, 2);
  w.shared_up = view(up, 1, 2);
  w.shared_down = view(down, 2, 1);
  const float x[2] = {1.0f, 2.0f};
  float out[2] = {10.0f, 20.0f};
  shared_expert_reference(w, x, out);
  const float h = 1.0f / (1.0f + std::exp(-1.0f)) * 2.0f;
  EXPECT_FLOAT_EQ(out[0], 10.0f + h);
  EXPECT_FLOAT_EQ(out[1], 20.0f - h / 2.0f);
  w.shared_gate_inp = {0.0f, 1.0f};  // logit 2: the gate is sigmoid(2)
  float gated[2] = {0.0f, 0.0f};
  shared_expert_reference(w, x, gated);
  EXPECT_FLOAT_EQ(gated[0], 2.0f * h / (1.0f + std::exp(-2.0f)));
}

// TinyMoe with qwen35moe's shared expert of 64 (Q8_0) and its gate logit's F32 weights.
struct SharedMoe : TinyMoe {
  static constexpr int64_t kSharedFf = 64;
  std::vector<uint8_t> shared_gate_q, shared_up_q, shared_down_q;
  SharedMoe() {
    routing.shared_ffn_dim = kSharedFf;
    shared_gate_q = quantized(kSharedFf, kDim, 4000);
    shared_up_q = quantized(kSharedFf, kDim, 5000);
    shared_down_q = quantized(kDim, kSharedFf, 6000);
    for (int64_t i = 0; i < kDim; ++i) w.shared_gate_inp.push_back(value(static_cast<uint32_t>(i + 7000), 0.5f));
    const size_t in_stride = row_bytes(DType::Q8_0, kDim), ff_stride = row_bytes(DType::Q8_0, kSharedFf);
    w.shared_gate = {DType::Q8_0, kSharedFf, kDim, shared_gate_q.data(), in_stride};
    w.shared_up = {DType::Q8_0, kSharedFf, kDim, shared_up_q.data(), in_stride};
    w.shared_down = {DType::Q8_0, kDim, kSharedFf, shared_down_q.data(), ff_stride};
  }
};

// The FFN with a shared expert is the routed experts (the per-token loop) plus the shared expert's scalar twin, to
// rounding, and each row has the same bits alone or in batches of 5 and 40; the gate moves the rows (its logits
// here are spread, so a gate of 1/2 or none would be far off).
TEST(MoeSharedExpert, RowsAreTheExpertsPlusTheScalarTwinAndSameBitsInBatches) {
  const SharedMoe m;
  const int64_t dim = TinyMoe::kDim;
  std::vector<float> x(40 * dim);
  for (size_t i = 0; i < x.size(); ++i) x[i] = TinyMoe::value(static_cast<uint32_t>(i + 9999), 1.0f);
  ThreadPool pool(2);
  MatmulScratch scratch;
  MoeFfn ffn;
  std::vector<float> alone(x.size());
  double shared_size = 0.0;
  for (int64_t t = 0; t < 40; ++t) {
    ffn.forward(m.w, m.routing, x.data() + t * dim, 1, alone.data() + t * dim, pool, scratch);
    std::vector<float> expected = by_hand(m, x.data() + t * dim);
    const std::vector<float> routed = expected;
    shared_expert_reference(m.w, x.data() + t * dim, expected.data());
    for (int64_t i = 0; i < dim; ++i) {
      EXPECT_NEAR(alone[t * dim + i], expected[i], 2e-3) << t << " " << i;
      shared_size = std::max(shared_size, std::abs(static_cast<double>(expected[i]) - routed[i]));
    }
  }
  EXPECT_GT(shared_size, 0.05);  // the shared expert's share is far above the tolerance
  for (int64_t batch : {5, 40}) {
    std::vector<float> out(x.size());
    for (int64_t t0 = 0; t0 < 40; t0 += batch) {
      ffn.forward(m.w, m.routing, x.data() + t0 * dim, batch, out.data() + t0 * dim, pool, scratch);
    }
    EXPECT_EQ(std::memcmp(out.data(), alone.data(), out.size() * sizeof(float)), 0) << "batches of " << batch;
  }
  EXPECT_GE(ffn.scratch_bytes(), 0);
  EXPECT_LE(ffn.scratch_bytes(), MoeFfn::scratch_bytes_for(m.routing, dim, 40));
}

}  // namespace
}  // namespace hearth
