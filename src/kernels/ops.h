#pragma once
// Element-wise kernels (attention is in attention.h). They know nothing about models: shapes come in as arguments.
// Every vectorized kernel has a scalar `_reference` twin; tests compare them.
// Reduction orders are fixed functions of the vector length only, never of batch size or threads.

#include <cstddef>
#include <cstdint>

namespace hearth {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]                     x, w, out: [n]
// The sum of squares runs in double over 8 fixed lanes (rms_lanes.h): the same bits with or without AVX2.
void rms_norm(const float* x, const float* w, float* out, int64_t n, float eps);
// Twin: the squares summed in order.
void rms_norm_reference(const float* x, const float* w, float* out, int64_t n, float eps);

// out[i] = (x[i] - mean(x)) / sqrt(var(x) + eps) * w[i] + b[i]: LayerNorm (BERT's)       x, w, b, out: [n]
// Mean and variance are two passes in double over x in order: a fixed function of n alone. out may alias x.
void layer_norm(const float* x, const float* w, const float* b, float* out, int64_t n, float eps);
// Twin: the same formula with long double sums and the normalisation in long double, rounded once.
void layer_norm_reference(const float* x, const float* w, const float* b, float* out, int64_t n, float eps);

// Rotates `x` in place for one head at position `pos`:                x: [head_dim]
// normal style rotates pairs (x[2i], x[2i+1]), neox style pairs (x[i], x[i + rope_dim/2]), for i < rope_dim/2,
// by angle pos × base^(-2i / rope_dim). cos_sin holds the precomputed [rope_dim/2][2] values for `pos`.
void rope_fill_cos_sin(int32_t pos, int32_t rope_dim, float base, float* cos_sin);
void rope_apply(float* x, const float* cos_sin, int32_t rope_dim, bool neox);

// out[i] = silu(gate[i]) * up[i] = gate[i] / (1 + exp(-gate[i])) * up[i]                       [n]
// exp is a polynomial (silu_lanes.h), the same bits with or without AVX2; within a few ulp of the twin.
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
// Twin: the formula in double precision, rounded once.
void silu_mul_reference(const float* gate, const float* up, float* out, int64_t n);

// out[i] = gelu(gate[i]) * up[i], GELU's tanh form as ggml_gelu and Gemma use:               [n]
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2)))
void gelu_mul(const float* gate, const float* up, float* out, int64_t n);
// Twin: the formula in double precision, rounded once.
void gelu_mul_reference(const float* gate, const float* up, float* out, int64_t n);

// x[i] = cap × tanh(x[i] / cap): Gemma 2's soft-capping of logits (cap > 0)                   [n]
void softcap_inplace(float* x, int64_t n, float cap);

// x[i] += y[i]                                                       [n]
void add_inplace(float* x, const float* y, int64_t n);

// Dot product with a fixed reduction order (8 interleaved lanes, then a fixed tree, then the tail).
float dot_f32(const float* a, const float* b, int64_t n);
float dot_f32_reference(const float* a, const float* b, int64_t n);

}  // namespace hearth
