#include "model/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/ops.h"
#include "util/result.h"

namespace hearth {
namespace {

// llama.cpp clamps the sum of the chosen weights below at the smallest normal f16 before dividing by it.
constexpr float kMinWeightSum = 6.103515625e-5f;

// Rows of element-wise work below which it runs on the calling thread (a decode step's few rows cost less than
// waking the pool).
constexpr int64_t kInlineRows = 16;

template <class F>
void for_rows(ThreadPool& pool, int64_t n_rows, F&& fn) {
  if (n_rows < kInlineRows) {
    for (int64_t row = 0; row < n_rows; ++row) fn(row);
    return;
  }
  pool.run([&](int ith, int nth) {
    const Range r = split_range(n_rows, ith, nth);
    for (int64_t row = r.begin; row < r.end; ++row) fn(row);
  });
}

template <class T>
void grow(std::vector<T>& v, size_t n) {  // to exactly n: model_memory.h counts what it holds
  if (v.size() >= n) return;
  v.reserve(n);
  v.resize(n);
}

// probs = softmax(logits), as ggml's soft_max: exp(l - max), their sum in double, each × 1/sum.
void softmax(std::span<const float> logits, std::span<float> probs) {
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (size_t e = 0; e < logits.size(); ++e) sum += (probs[e] = std::exp(logits[e] - max));
  const float scale = static_cast<float>(1.0 / sum);
  for (float& p : probs) p *= scale;
}

// Which experts a token's routing has chosen so far (one per thread: route_token is called per token).
std::vector<bool>& taken_scratch(int32_t n_expert) {
  thread_local std::vector<bool> taken;
  taken.assign(static_cast<size_t>(n_expert), false);
  return taken;
}

// gpt-oss's clamped SwiGLU, as ggml's swiglu_oai (alpha 1.702, limit 7): out = x / (1 + exp(-alpha x)) · (y + 1)
// with x = min(gate, limit) and y = clamp(up, -limit, limit).
void swiglu_oai(float* gate, const float* up, int64_t n) {
  constexpr float kAlpha = 1.702f;
  constexpr float kLimit = 7.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float x = std::min(gate[i], kLimit);
    const float y = std::clamp(up[i], -kLimit, kLimit);
    gate[i] = x / (1.0f + std::exp(kAlpha * (-x))) * (y + 1.0f);
  }
}

}  // namespace

void route_token(const MoeRouting& routing, std::span<const float> logits, std::span<float> probs,
                 std::span<ExpertChoice> choices) {
  HEARTH_CHECK(static_cast<int32_t>(logits.size()) == routing.n_expert && probs.size() == logits.size() &&
                   static_cast<int32_t>(choices.size()) == routing.n_used,
               "route_token: {} logits, {} probs, {} choices for {} experts, {} used", logits.size(), probs.size(),
               choices.size(), routing.n_expert, routing.n_used);
  switch (routing.gating) {
    case ExpertGating::kSoftmax:
      softmax(logits, probs);
      break;
    case ExpertGating::kSoftmaxWeight:
      std::copy(logits.begin(), logits.end(), probs.begin());
      break;
  }
  // n_used passes of argmax (strictly greater: the lower id wins a tie); each winner leaves the race.
  std::vector<bool>& taken = taken_scratch(routing.n_expert);
  for (ExpertChoice& choice : choices) {
    int32_t best = -1;
    for (int32_t e = 0; e < routing.n_expert; ++e) {
      if (!taken[e] && (best < 0 || probs[e] > probs[best])) best = e;
    }
    choice = {best, probs[best]};
    taken[best] = true;
  }
  if (routing.gating == ExpertGating::kSoftmaxWeight) {
    // ggml's soft_max over the chosen logits: exp(l - max), the sum in double, each × 1/sum.
    float max = choices[0].weight;
    for (const ExpertChoice& choice : choices) max = std::max(max, choice.weight);
    double sum = 0.0;
    for (ExpertChoice& choice : choices) sum += (choice.weight = std::exp(choice.weight - max));
    const float scale = static_cast<float>(1.0 / sum);
    for (ExpertChoice& choice : choices) choice.weight *= scale;
  }
  if (!routing.norm_weights) return;
  float sum = 0.0f;
  for (const ExpertChoice& choice : choices) sum += choice.weight;
  sum = std::max(sum, kMinWeightSum);
  for (ExpertChoice& choice : choices) choice.weight /= sum;
}

void MoeFfn::route(const MoeLayerWeights& w, const MoeRouting& r, const float* x, int64_t n, ThreadPool& pool,
                   MatmulScratch& matmul_scratch) {
  grow(logits_, static_cast<size_t>(n * r.n_expert));
  grow(probs_, static_cast<size_t>(r.n_expert));
  grow(choices_, static_cast<size_t>(n * r.n_used));
  matmul(w.router, x, n, logits_.data(), pool, matmul_scratch);
  if (!w.router_bias.empty()) {
    for (int64_t t = 0; t < n; ++t) add_inplace(logits_.data() + t * r.n_expert, w.router_bias.data(), r.n_expert);
  }
  for (int64_t t = 0; t < n; ++t) {
    route_token(r, {logits_.data() + t * r.n_expert, static_cast<size_t>(r.n_expert)},
                {probs_.data(), static_cast<size_t>(r.n_expert)},
                {choices_.data() + t * r.n_used, static_cast<size_t>(r.n_used)});
  }
}

void MoeFfn::group_by_expert(const MoeRouting& r, int64_t n) {
  const int64_t n_choices = n * r.n_used;
  expert_begin_.assign(static_cast<size_t>(r.n_expert) + 1, 0);
  for (int64_t i = 0; i < n_choices; ++i) ++expert_begin_[choices_[i].expert + 1];
  for (int32_t e = 0; e < r.n_expert; ++e) expert_begin_[e + 1] += expert_begin_[e];
  grow(row_of_choice_, static_cast<size_t>(n_choices));
  grow(token_of_row_, static_cast<size_t>(n_choices));
  next_row_.assign(expert_begin_.begin(), expert_begin_.end() - 1);
  for (int64_t i = 0; i < n_choices; ++i) {
    const int32_t row = next_row_[choices_[i].expert]++;
    row_of_choice_[i] = row;
    token_of_row_[row] = static_cast<int32_t>(i / r.n_used);
  }
}

void MoeFfn::run_experts(const MoeLayerWeights& w, const MoeRouting& r, const float* x, ThreadPool& pool,
                         MatmulScratch& matmul_scratch) {
  const int64_t dim = w.router.n_cols;
  const int64_t ff = r.ffn_dim;
  const int64_t n_rows = expert_begin_[r.n_expert];
  grow(x_rows_, static_cast<size_t>(n_rows * dim));
  grow(gate_rows_, static_cast<size_t>(n_rows * ff));
  grow(up_rows_, static_cast<size_t>(n_rows * ff));
  grow(down_rows_, static_cast<size_t>(n_rows * dim));
  for_rows(pool, n_rows, [&](int64_t row) {
    std::memcpy(x_rows_.data() + row * dim, x + token_of_row_[row] * dim, static_cast<size_t>(dim) * sizeof(float));
  });
  for (int32_t e = 0; e < r.n_expert; ++e) {
    const int64_t begin = expert_begin_[e], count = expert_begin_[e + 1] - begin;
    if (count == 0) continue;  // an expert no token chose is never read
    const MatmulOutput gate_up[] = {{&w.gate[e], gate_rows_.data() + begin * ff},
                                    {&w.up[e], up_rows_.data() + begin * ff}};
    matmul_group(gate_up, x_rows_.data() + begin * dim, count, pool, matmul_scratch);
  }
  // A grouped row's expert: the e with expert_begin_[e] <= row < expert_begin_[e + 1].
  auto expert_of = [&](int64_t row) {
    return static_cast<int32_t>(std::upper_bound(expert_begin_.begin(), expert_begin_.end(), row) -
                                expert_begin_.begin()) -
           1;
  };
  const bool biases = !w.gate_bias.empty();
  for_rows(pool, n_rows, [&](int64_t row) {
    float* g = gate_rows_.data() + row * ff;
    float* u = up_rows_.data() + row * ff;
    if (biases) {
      const int32_t e = expert_of(row);
      add_inplace(g, w.gate_bias.data() + e * ff, ff);
      add_inplace(u, w.up_bias.data() + e * ff, ff);
    }
    switch (r.activation) {
      case ExpertActivation::kSilu:
        silu_mul(g, u, g, ff);
        break;
      case ExpertActivation::kSwigluOai:
        swiglu_oai(g, u, ff);
        break;
      case ExpertActivation::kGelu:
        gelu_mul(g, u, g, ff);
        break;
    }
  });
  for (int32_t e = 0; e < r.n_expert; ++e) {
    const int64_t begin = expert_begin_[e], count = expert_begin_[e + 1] - begin;
    if (count == 0) continue;
    matmul(w.down[e], gate_rows_.data() + begin * ff, count, down_rows_.data() + begin * dim, pool, matmul_scratch);
  }
  if (biases) {
    for_rows(pool, n_rows, [&](int64_t row) {
      add_inplace(down_rows_.data() + row * dim, w.down_bias.data() + expert_of(row) * dim, dim);
    });
  }
  if (!w.down_scale.empty()) {
    for_rows(pool, n_rows, [&](int64_t row) {
      const float scale = w.down_scale[expert_of(row)];
      float* y = down_rows_.data() + row * dim;
      for (int64_t d = 0; d < dim; ++d) y[d] *= scale;
    });
  }
}

void MoeFfn::combine(const MoeRouting& r, int64_t n, int64_t dim, float* out, ThreadPool& pool) const {
  // Each token's experts weighted and added in its choice order, as llama.cpp's chain of adds.
  for_rows(pool, n, [&](int64_t t) {
    float* y = out + t * dim;
    for (int32_t k = 0; k < r.n_used; ++k) {
      const int64_t i = t * r.n_used + k;
      const float weight = choices_[i].weight;
      const float* expert_out = down_rows_.data() + static_cast<int64_t>(row_of_choice_[i]) * dim;
      if (k == 0) {
        for (int64_t d = 0; d < dim; ++d) y[d] = expert_out[d] * weight;
      } else {
        for (int64_t d = 0; d < dim; ++d) y[d] += expert_out[d] * weight;
      }
    }
  });
}

void MoeFfn::forward(const MoeLayerWeights& w, const MoeRouting& r, const float* x, int64_t n, float* out,
                     ThreadPool& pool, MatmulScratch& matmul_scratch, const float* router_x) {
  if (n == 0) return;
  HEARTH_CHECK(static_cast<int32_t>(w.gate.size()) == r.n_expert && w.router.n_rows == r.n_expert,
               "MoeFfn: {} experts bound, {} in the routing", w.gate.size(), r.n_expert);
  route(w, r, router_x != nullptr ? router_x : x, n, pool, matmul_scratch);
  group_by_expert(r, n);
  run_experts(w, r, x, pool, matmul_scratch);
  combine(r, n, w.router.n_cols, out, pool);
}

template <class... V>
int64_t capacity_bytes(const V&... v) {
  return (static_cast<int64_t>(v.capacity() * sizeof(typename V::value_type)) + ...);
}

int64_t MoeFfn::scratch_bytes() const {
  return capacity_bytes(logits_, probs_, choices_, expert_begin_, next_row_, row_of_choice_, token_of_row_, x_rows_,
                        gate_rows_, up_rows_, down_rows_);
}

int64_t MoeFfn::scratch_bytes_for(const MoeRouting& r, int64_t dim, int64_t n_tokens) {
  const int64_t choices = n_tokens * r.n_used;
  return static_cast<int64_t>(sizeof(float)) *
             (n_tokens * r.n_expert + r.n_expert + choices * (2 * dim + 2 * r.ffn_dim)) +
         static_cast<int64_t>(sizeof(ExpertChoice)) * choices +
         static_cast<int64_t>(sizeof(int32_t)) * (2 * (r.n_expert + 1) + 2 * choices);
}

}  // namespace hearth
