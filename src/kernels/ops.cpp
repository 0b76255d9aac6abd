#include "kernels/ops.h"

#include "kernels/cpu_isa.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

namespace hearth {
namespace {

bool have_avx2() { return active_isa_level() == IsaLevel::kAvx2; }

// Lane layout is fixed: 8 partial sums, lane l takes elements i ≡ l (mod 8) of the first n - n % 8,
// then lanes are combined as ((0+4)+(2+6)) + ((1+5)+(3+7)), then the tail is added in order.
float combine_lanes(const float* lanes) {
  return ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
}

float dot_lanes_scalar(const float* a, const float* b, int64_t n) {
  float lanes[8] = {};
  const int64_t n8 = n - n % 8;
  for (int64_t i = 0; i < n8; i += 8) {
    for (int l = 0; l < 8; ++l) lanes[l] = std::fma(a[i + l], b[i + l], lanes[l]);
  }
  float sum = combine_lanes(lanes);
  for (int64_t i = n8; i < n; ++i) sum = std::fma(a[i], b[i], sum);
  return sum;
}

__attribute__((target("avx2,fma"))) float dot_lanes_avx2(const float* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  const int64_t n8 = n - n % 8;
  for (int64_t i = 0; i < n8; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  float sum = combine_lanes(lanes);
  for (int64_t i = n8; i < n; ++i) sum = std::fma(a[i], b[i], sum);
  return sum;
}

// out = out * a + x * b  (fixed per element, so trivially order-independent)
__attribute__((target("avx2,fma"))) void scale_add_avx2(float* out, float a, const float* x, float b, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  const __m256 vb = _mm256_set1_ps(b);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 o = _mm256_mul_ps(_mm256_loadu_ps(out + i), va);
    _mm256_storeu_ps(out + i, _mm256_fmadd_ps(_mm256_loadu_ps(x + i), vb, o));
  }
  for (; i < n; ++i) out[i] = std::fma(x[i], b, out[i] * a);
}

void scale_add_scalar(float* out, float a, const float* x, float b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::fma(x[i], b, out[i] * a);
}

}  // namespace

void rms_norm(const float* x, const float* w, float* out, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(n)) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
}

void rope_fill_cos_sin(int32_t pos, int32_t rope_dim, float base, float* cos_sin) {
  for (int32_t i = 0; i < rope_dim / 2; ++i) {
    const double freq = std::pow(static_cast<double>(base), -2.0 * i / rope_dim);
    const double angle = pos * freq;
    cos_sin[2 * i] = static_cast<float>(std::cos(angle));
    cos_sin[2 * i + 1] = static_cast<float>(std::sin(angle));
  }
}

void rope_apply(float* x, const float* cos_sin, int32_t rope_dim, bool neox) {
  const int32_t half = rope_dim / 2;
  for (int32_t i = 0; i < half; ++i) {
    const int32_t a = neox ? i : 2 * i;
    const int32_t b = neox ? i + half : 2 * i + 1;
    const float c = cos_sin[2 * i];
    const float s = cos_sin[2 * i + 1];
    const float x0 = x[a];
    const float x1 = x[b];
    x[a] = x0 * c - x1 * s;
    x[b] = x0 * s + x1 * c;
  }
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void add_inplace(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

float dot_f32(const float* a, const float* b, int64_t n) {
  return have_avx2() ? dot_lanes_avx2(a, b, n) : dot_lanes_scalar(a, b, n);
}

float dot_f32_reference(const float* a, const float* b, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(a[i]) * b[i];
  return static_cast<float>(sum);
}

namespace {

// Visits keys 0..n_keys-1 block by block, so the block table is read once per block, not once per key.
template <class F>
inline void for_each_row(const PagedKvView& kv, int32_t head_offset, int32_t n_keys, F&& fn) {
  for (int32_t b = 0, j = 0; j < n_keys; ++b) {
    const float* row = kv.base + static_cast<size_t>(kv.block_table[b].value) * kv.block_stride + head_offset;
    const int32_t end = std::min(n_keys, j + kv.block_size);
    for (; j < end; ++j, row += kv.slot_stride) fn(j, row);
  }
}

// Softmax over scores[0, n) in place (fixed order); returns 1 / sum.
float softmax_in_place(float* scores, int32_t n, float max_score) {
  float sum = 0.0f;
  for (int32_t j = 0; j < n; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    sum += scores[j];
  }
  return 1.0f / sum;
}

__attribute__((target("avx2,fma"))) void attention_head_avx2(const float* q, const PagedKvView& k,
                                                               const PagedKvView& v, int32_t head_offset,
                                                               int32_t head_dim, int32_t n_keys, float scale,
                                                               float* scores, float* out) {
  float max_score = -INFINITY;
  for_each_row(k, head_offset, n_keys, [&](int32_t j, const float* kj) {
    scores[j] = dot_lanes_avx2(q, kj, head_dim) * scale;
    max_score = std::max(max_score, scores[j]);
  });
  const float inv_sum = softmax_in_place(scores, n_keys, max_score);
  // out[d] = fma(v_j[d], p_j, out[d]) for j in order, exactly as the scalar twin, but 64 dimensions at a time
  // stay in registers across all keys instead of being loaded and stored per key.
  int32_t d0 = 0;
  for (; d0 + 64 <= head_dim; d0 += 64) {
    __m256 acc[8];
    for (auto& a : acc) a = _mm256_setzero_ps();
    // A lambda would not inherit this function's target attribute, so the block walk is spelled out here.
    for (int32_t b = 0, j = 0; j < n_keys; ++b) {
      const float* vj = v.base + static_cast<size_t>(v.block_table[b].value) * v.block_stride + head_offset + d0;
      for (const int32_t end = std::min(n_keys, j + v.block_size); j < end; ++j, vj += v.slot_stride) {
        const __m256 p = _mm256_set1_ps(scores[j] * inv_sum);
        for (int c = 0; c < 8; ++c) acc[c] = _mm256_fmadd_ps(_mm256_loadu_ps(vj + 8 * c), p, acc[c]);
      }
    }
    for (int c = 0; c < 8; ++c) _mm256_storeu_ps(out + d0 + 8 * c, acc[c]);
  }
  if (d0 < head_dim) {
    for (int32_t d = d0; d < head_dim; ++d) out[d] = 0.0f;
    for_each_row(v, head_offset + d0, n_keys, [&](int32_t j, const float* vj) {
      scale_add_avx2(out + d0, 1.0f, vj, scores[j] * inv_sum, head_dim - d0);
    });
  }
}

void attention_head_scalar(const float* q, const PagedKvView& k, const PagedKvView& v, int32_t head_offset,
                           int32_t head_dim, int32_t n_keys, float scale, float* scores, float* out) {
  float max_score = -INFINITY;
  for_each_row(k, head_offset, n_keys, [&](int32_t j, const float* kj) {
    scores[j] = dot_lanes_scalar(q, kj, head_dim) * scale;
    max_score = std::max(max_score, scores[j]);
  });
  const float inv_sum = softmax_in_place(scores, n_keys, max_score);
  for (int32_t d = 0; d < head_dim; ++d) out[d] = 0.0f;
  for_each_row(v, head_offset, n_keys,
               [&](int32_t j, const float* vj) { scale_add_scalar(out, 1.0f, vj, scores[j] * inv_sum, head_dim); });
}

}  // namespace

void attention_head(const float* q, const PagedKvView& k, const PagedKvView& v, int32_t head_offset,
                    int32_t head_dim, int32_t n_keys, float scale, float* scores, float* out) {
  if (have_avx2()) {
    attention_head_avx2(q, k, v, head_offset, head_dim, n_keys, scale, scores, out);
  } else {
    attention_head_scalar(q, k, v, head_offset, head_dim, n_keys, scale, scores, out);
  }
}

void attention_head_reference(const float* q, const PagedKvView& k, const PagedKvView& v, int32_t head_offset,
                              int32_t head_dim, int32_t n_keys, float scale, float* scores, float* out) {
  double max_score = -INFINITY;
  for (int32_t j = 0; j < n_keys; ++j) {
    scores[j] = dot_f32_reference(q, k.row(j) + head_offset, head_dim) * scale;
    max_score = std::max<double>(max_score, scores[j]);
  }
  double sum = 0.0;
  for (int32_t j = 0; j < n_keys; ++j) sum += std::exp(scores[j] - max_score);
  for (int32_t d = 0; d < head_dim; ++d) {
    double acc = 0.0;
    for (int32_t j = 0; j < n_keys; ++j) acc += std::exp(scores[j] - max_score) / sum * (v.row(j) + head_offset)[d];
    out[d] = static_cast<float>(acc);
  }
}

}  // namespace hearth
