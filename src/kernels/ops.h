#pragma once
// Element-wise and attention kernels. They know nothing about models: shapes come in as arguments.
// Every vectorized kernel has a scalar `_reference` twin; tests compare them.
// Reduction orders are fixed functions of the vector length only, never of batch size or threads.

#include <cstddef>
#include <cstdint>
#include <span>

#include "util/ids.h"

namespace hearth {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]                     x, w, out: [n]
void rms_norm(const float* x, const float* w, float* out, int64_t n, float eps);

// Rotates `x` in place for one head at position `pos`:                x: [head_dim]
// normal style rotates pairs (x[2i], x[2i+1]), neox style pairs (x[i], x[i + rope_dim/2]), for i < rope_dim/2,
// by angle pos × base^(-2i / rope_dim). cos_sin holds the precomputed [rope_dim/2][2] values for `pos`.
void rope_fill_cos_sin(int32_t pos, int32_t rope_dim, float base, float* cos_sin);
void rope_apply(float* x, const float* cos_sin, int32_t rope_dim, bool neox);

// out[i] = silu(gate[i]) * up[i]                                      [n]
void silu_mul(const float* gate, const float* up, float* out, int64_t n);

// x[i] += y[i]                                                       [n]
void add_inplace(float* x, const float* y, int64_t n);

// Dot product with a fixed reduction order (8 interleaved lanes, then a fixed tree, then the tail).
float dot_f32(const float* a, const float* b, int64_t n);
float dot_f32_reference(const float* a, const float* b, int64_t n);

// K or V rows of one layer stored in fixed-size blocks. Position p of a sequence lives at
//   base + block_table[p / block_size] * block_stride + (p % block_size) * slot_stride.
struct PagedKvView {
  const float* base = nullptr;
  size_t block_stride = 0;
  size_t slot_stride = 0;
  int32_t block_size = 0;
  std::span<const BlockId> block_table;

  const float* row(int32_t pos) const {
    return base + static_cast<size_t>(block_table[pos / block_size].value) * block_stride +
           static_cast<size_t>(pos % block_size) * slot_stride;
  }
};

// Causal attention of one query head over keys [0, n_keys):
//   out = softmax(scale × q·k_j) · v_j,  with k_j = k.row(j) + head_offset, v_j likewise.
// q, out: [head_dim]; scores: scratch of at least n_keys floats.
void attention_head(const float* q, const PagedKvView& k, const PagedKvView& v, int32_t head_offset,
                    int32_t head_dim, int32_t n_keys, float scale, float* scores, float* out);
void attention_head_reference(const float* q, const PagedKvView& k, const PagedKvView& v, int32_t head_offset,
                              int32_t head_dim, int32_t n_keys, float scale, float* scores, float* out);

}  // namespace hearth
