#pragma once
// The gated delta rule (Gated DeltaNet, Yang et al. 2024), one head and one token at a time. It knows nothing about
// models: shapes come in as arguments.
//
// The state S is a d × d matrix stored transposed, as ggml's gated_delta_net keeps it: row j (a value dimension)
// holds S[0..d)[j] over the key dimensions, so every product below reads contiguous rows.
//
// There is one definition of the update, token by token: a sequence's state after token t is the same bits
// whether its tokens came in one prefill, in chunks of any size, or one decode step at a time, because every token
// runs exactly this function on the state the previous token left (each row's dot products have a fixed reduction
// order, dot_f32's). There is no chunked (WY) form; its bits would depend on where the chunks fall.
//
// gated_delta_rule_step reads rows with dot_f32 (8 fixed lanes, vectorized where the CPU allows); its twin
// gated_delta_rule_step_reference is the same loops with dot_f32_reference (summed in order). Tests compare both with
// a double-precision formula.

#include <cstdint>

namespace hearth {

// One token of one head:                                   state: [d][d] (row j: value dim j over key dims)
//   S ← decay · S;  delta_j = beta · (v_j − Σ_i S[i][j] k_i);  S[i][j] += k_i · delta_j;
//   out_j = out_scale · Σ_i S[i][j] q_i                        q, k, v, out: [d]; `delta` [d] is scratch
// `decay` is exp(g) (0 < decay <= 1 in the models), `beta` the write strength in (0, 1).
void gated_delta_rule_step(float* state, const float* q, const float* k, const float* v, float decay, float beta,
                           float out_scale, int32_t d, float* delta, float* out);
void gated_delta_rule_step_reference(float* state, const float* q, const float* k, const float* v, float decay,
                                     float beta, float out_scale, int32_t d, float* delta, float* out);

// A causal depthwise convolution's step for one token over `channels` channels with `d_conv` taps each:
//   out_c = Σ_{t < d_conv − 1} w[c][t] · window[c][t] + w[c][d_conv − 1] · in_c    (taps oldest first, summed in order)
// then the window shifts by one and takes in_c as its newest value.      w: [channels][d_conv]
// window: [channels][d_conv − 1], oldest first; in, out: [channels] (out may not alias in).
void causal_conv_step(const float* w, float* window, const float* in, float* out, int32_t channels, int32_t d_conv);

}  // namespace hearth
