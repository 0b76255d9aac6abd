// The gated delta rule and the causal convolution (kernels/delta_net.h) against the formulas in double precision,
// and the kernel against its twin.

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/delta_net.h"

namespace hearth {
namespace {

std::vector<float> random_vector(std::mt19937& rng, size_t n, float sd) {
  std::normal_distribution<float> dist(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// 20 tokens of one head of 64 (S[i][j] in double, i the key dim), against the kernel and its twin.
TEST(DeltaNet, RuleMatchesTheFormulaAndTheTwin) {
  constexpr int32_t d = 64;
  std::mt19937 rng(3);
  std::vector<double> s(d * d, 0.0);
  std::vector<float> state(d * d, 0.0f), twin(d * d, 0.0f), delta(d), out(d), out_twin(d);
  for (int t = 0; t < 20; ++t) {
    const auto q = random_vector(rng, d, 0.2f), k = random_vector(rng, d, 0.2f), v = random_vector(rng, d, 1.0f);
    const float decay = 0.9f - 0.01f * t, beta = 0.3f + 0.02f * t, scale = 0.125f;
    gated_delta_rule_step(state.data(), q.data(), k.data(), v.data(), decay, beta, scale, d, delta.data(), out.data());
    gated_delta_rule_step_reference(twin.data(), q.data(), k.data(), v.data(), decay, beta, scale, d, delta.data(),
                                    out_twin.data());
    for (double& e : s) e *= decay;
    for (int32_t j = 0; j < d; ++j) {
      double sk = 0.0;
      for (int32_t i = 0; i < d; ++i) sk += s[i * d + j] * k[i];
      const double dj = beta * (v[j] - sk);
      for (int32_t i = 0; i < d; ++i) s[i * d + j] += k[i] * dj;
    }
    for (int32_t j = 0; j < d; ++j) {
      double o = 0.0;
      for (int32_t i = 0; i < d; ++i) o += s[i * d + j] * q[i];
      EXPECT_NEAR(out[j], o * scale, 1e-5) << "token " << t << " dim " << j;
      EXPECT_NEAR(out_twin[j], out[j], 1e-5) << "token " << t << " dim " << j;
    }
  }
  for (int32_t j = 0; j < d; ++j) {
    for (int32_t i = 0; i < d; ++i) EXPECT_NEAR(state[j * d + i], s[i * d + j], 1e-5);  // stored transposed
  }
}

// Each output is the taps over the window then the current input, oldest first; the window then shifts.
TEST(DeltaNet, CausalConvKeepsItsWindow) {
  constexpr int32_t channels = 3, taps = 4;
  const std::vector<float> w = {1, 2, 3, 4, 0, 0, 0, 1, 0.5f, 0, 0, 0};
  std::vector<float> window(channels * (taps - 1), 0.0f), out(channels);
  const std::vector<std::vector<float>> inputs = {{1, 10, 100}, {2, 20, 200}, {3, 30, 300}, {4, 40, 400}};
  const std::vector<std::vector<float>> want = {{4, 10, 0}, {11, 20, 0}, {20, 30, 0}, {30, 40, 50}};
  for (size_t t = 0; t < inputs.size(); ++t) {
    causal_conv_step(w.data(), window.data(), inputs[t].data(), out.data(), channels, taps);
    for (int32_t c = 0; c < channels; ++c) EXPECT_EQ(out[c], want[t][c]) << "token " << t << " channel " << c;
  }
  EXPECT_EQ(window, (std::vector<float>{2, 3, 4, 20, 30, 40, 200, 300, 400}));
}

}  // namespace
}  // namespace hearth
