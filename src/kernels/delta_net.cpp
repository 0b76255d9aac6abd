#include "kernels/delta_net.h"

#include "kernels/ops.h"

namespace hearth {

namespace {

template <float (*Dot)(const float*, const float*, int64_t)>
void delta_rule(float* state, const float* q, const float* k, const float* v, float decay, float beta,
                float out_scale, int32_t d, float* delta, float* out) {
  for (int64_t i = 0; i < int64_t{d} * d; ++i) state[i] *= decay;
  for (int32_t j = 0; j < d; ++j) delta[j] = (v[j] - Dot(state + int64_t{j} * d, k, d)) * beta;
  for (int32_t j = 0; j < d; ++j) {
    float* row = state + int64_t{j} * d;
    const float dj = delta[j];
    for (int32_t i = 0; i < d; ++i) row[i] += k[i] * dj;
  }
  for (int32_t j = 0; j < d; ++j) out[j] = Dot(state + int64_t{j} * d, q, d) * out_scale;
}

}  // namespace

void gated_delta_rule_step(float* state, const float* q, const float* k, const float* v, float decay, float beta,
                           float out_scale, int32_t d, float* delta, float* out) {
  delta_rule<dot_f32>(state, q, k, v, decay, beta, out_scale, d, delta, out);
}

void gated_delta_rule_step_reference(float* state, const float* q, const float* k, const float* v, float decay,
                                     float beta, float out_scale, int32_t d, float* delta, float* out) {
  delta_rule<dot_f32_reference>(state, q, k, v, decay, beta, out_scale, d, delta, out);
}

void causal_conv_step(const float* w, float* window, const float* in, float* out, int32_t channels, int32_t d_conv) {
  const int32_t taps = d_conv - 1;
  for (int32_t c = 0; c < channels; ++c) {
    const float* wc = w + int64_t{c} * d_conv;
    float* win = window + int64_t{c} * taps;
    float acc = 0.0f;
    for (int32_t t = 0; t < taps; ++t) acc += wc[t] * win[t];
    acc += wc[taps] * in[c];
    out[c] = acc;
    for (int32_t t = 0; t + 1 < taps; ++t) win[t] = win[t + 1];
    if (taps > 0) win[taps - 1] = in[c];
  }
}

}  // namespace hearth
