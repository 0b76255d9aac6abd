// The Gated DeltaNet layer of hybrid models (qwen35, qwen35moe, qwen3next), as llama.cpp's qwen35 graph and delta-net
// code define it:
//
//   x ─ attn_norm ─┬─ attn_qkv ─ causal conv (d_conv taps, window kept in the state) ─ silu ─┬ q ─ L2 norm ┐
//                  │                                                                         ├ k ─ L2 norm ┤
//                  │                                                                         └ v ──────────┤
//                  ├─ ssm_alpha ─ + ssm_dt.bias ─ softplus ─ × ssm_a ─ exp ─── decay ──────────────────────┤
//                  ├─ ssm_beta ─ sigmoid ──────────────────────────────── beta ────────────────────────────┤
//                  │                                   gated delta rule per value head (kernels/delta_net.h) ┘
//                  └─ attn_gate ─ z ──────── RMSNorm(out_h) · ssm_norm · silu(z_h) ─ ssm_out ─ + x
//
// Value head h reads query/key head h % n_k_heads (ggml's repeat tiles the key heads); qwen3next's reads
// h / (n_v_heads / n_k_heads), and its fused ssm_in and ssm_ba are gathered into this layout (delta_net_project). The
// L2 norm is x / sqrt(Σx² + eps) (llama.cpp: rms_norm with eps / n, × 1/sqrt(n)); the rule's output is scaled by
// 1/sqrt(d_state).
//
// Recurrent state of one sequence, per recurrent layer in layer order (ModelConfig::recurrent_state_floats):
//   [conv window: conv_channels][d_conv − 1] oldest first, then [n_v_heads][d_state (value)][d_state (key)]
// Every token runs the same sequential steps on the state its predecessor left, so the bits never depend on
// chunking (Model::forward's contract).

#include <atomic>
#include <cmath>
#include <cstring>

#include "kernels/delta_net.h"
#include "kernels/ops.h"
#include "model/model.h"

namespace hearth {
namespace {

template <class F>
void for_each_row(ThreadPool& pool, int64_t n_rows, F&& fn) {
  if (n_rows < 4) {
    for (int64_t row = 0; row < n_rows; ++row) fn(row);
    return;
  }
  pool.run([&](int ith, int nth) {
    const Range r = split_range(n_rows, ith, nth);
    for (int64_t row = r.begin; row < r.end; ++row) fn(row);
  });
}

// Runs fn(item, ith) for items [0, n), threads taking them one at a time.
template <class F>
void for_each_item(ThreadPool& pool, int64_t n, F&& fn) {
  std::atomic<int64_t> next{0};
  pool.run([&](int ith, int) {
    for (int64_t i = next.fetch_add(1, std::memory_order_relaxed); i < n; i = next.fetch_add(1, std::memory_order_relaxed)) {
      fn(i, ith);
    }
  });
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }
float softplus(float x) { return x > 20.0f ? x : std::log(1.0f + std::exp(x)); }  // ggml_softplus

// x / sqrt(Σx² + eps), in place.                                                      x: [n]
void l2_norm(float* x, int32_t n, float eps) {
  double sum = 0.0;
  for (int32_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(sum + eps));
  for (int32_t i = 0; i < n; ++i) x[i] *= scale;
}

// Where layer `layer`'s state starts inside a slot: the recurrent layers before it, each state_floats_per_layer.
int64_t layer_state_offset(const ModelConfig& c, int layer) {
  int64_t before = 0;
  for (int il = 0; il < layer; ++il) before += c.is_recurrent(il) ? 1 : 0;
  return before * c.delta_net.state_floats_per_layer();
}

}  // namespace

void Model::reset_states(const BatchInput& batch, KvStorage& kv) const {
  if (!config_.is_hybrid()) return;
  HEARTH_CHECK(kv.state_floats_per_slot() == config_.recurrent_state_floats(),
               "KvStorage holds {} recurrent state floats per slot, the model needs {}", kv.state_floats_per_slot(),
               config_.recurrent_state_floats());
  for (const BatchSequence& seq : batch.seqs) {
    float* state = kv.state_slot(seq.state_slot);
    if (seq.pos_begin == 0) std::memset(state, 0, sizeof(float) * static_cast<size_t>(kv.state_floats_per_slot()));
    for (const BatchSequence::StateCheckpoint& ckpt : seq.checkpoints) {
      HEARTH_CHECK(ckpt.slot < 0 || (ckpt.slot != seq.state_slot && ckpt.pos > seq.pos_begin &&
                                     ckpt.pos <= seq.pos_begin + seq.n_tokens),
                   "checkpoint at {} (slot {}) outside the chunk [{}, {}) of slot {}", ckpt.pos, ckpt.slot,
                   seq.pos_begin, seq.pos_begin + seq.n_tokens, seq.state_slot);
    }
  }
}

void Model::delta_net_block(int layer, const BatchInput& batch, KvStorage& kv, ThreadPool& pool) {
  const auto& c = config_;
  const DeltaNetConfig& d = c.delta_net;
  const LayerWeights& w = weights_.layers[layer];
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  for_each_row(pool, n, [&](int64_t row) {
    rms_norm(s_.x.data() + row * c.dim, w.attn_norm.data(), s_.xn.data() + row * c.dim, c.dim, c.rms_eps);
  });
  delta_net_project(layer, n, pool);
  for_each_row(pool, n, [&](int64_t row) {
    float* decay = s_.dn_decay.data() + row * d.n_v_heads;
    float* beta = s_.dn_beta.data() + row * d.n_v_heads;
    for (int32_t h = 0; h < d.n_v_heads; ++h) {
      decay[h] = std::exp(softplus(decay[h] + w.ssm_dt_bias[h]) * w.ssm_a[h]);
      beta[h] = 1.0f / (1.0f + std::exp(-beta[h]));
    }
  });
  delta_net_recurrence(layer, batch, kv, pool);
  // The gated RMSNorm per value head, then the output projection and the residual.
  for_each_row(pool, n, [&](int64_t row) {
    float* out = s_.dn_out.data() + row * d.value_dim();
    const float* z = s_.dn_z.data() + row * d.value_dim();
    for (int32_t h = 0; h < d.n_v_heads; ++h) {
      float* oh = out + int64_t{h} * d.d_state;
      rms_norm(oh, w.ssm_norm.data(), oh, d.d_state, c.rms_eps);
      for (int32_t i = 0; i < d.d_state; ++i) oh[i] *= silu(z[int64_t{h} * d.d_state + i]);
    }
  });
  matmul(w.ssm_out, s_.dn_out.data(), n, s_.proj.data(), pool, s_.matmul);
  for_each_row(pool, n, [&](int64_t row) { add_inplace(s_.x.data() + row * c.dim, s_.proj.data() + row * c.dim, c.dim); });
}

// The input projections into dn_qkv (q|k|v), dn_z, dn_beta and dn_decay (alpha, before the decay's formula).
// qwen3next's fused ssm_in and ssm_ba (config.h) go to dn_in and dn_ba, then each row is gathered key head by key
// head into the same layout: copies only, so a token's bits still depend on nothing but its own row.
void Model::delta_net_project(int layer, int64_t n, ThreadPool& pool) {
  const DeltaNetConfig& d = config_.delta_net;
  const LayerWeights& w = weights_.layers[layer];
  if (!d.grouped_heads) {
    const MatmulOutput outs[] = {{&w.ssm_qkv, s_.dn_qkv.data()},
                                 {&w.ssm_z, s_.dn_z.data()},
                                 {&w.ssm_beta, s_.dn_beta.data()},
                                 {&w.ssm_alpha, s_.dn_decay.data()}};
    matmul_group(outs, s_.xn.data(), n, pool, s_.matmul);
    return;
  }
  const bool fused_in = w.ssm_in.data != nullptr;  // else the newer attn_qkv and attn_gate, as qwen35's
  if (fused_in) {
    const MatmulOutput outs[] = {{&w.ssm_in, s_.dn_in.data()}, {&w.ssm_ba, s_.dn_ba.data()}};
    matmul_group(outs, s_.xn.data(), n, pool, s_.matmul);
  } else {
    const MatmulOutput outs[] = {
        {&w.ssm_qkv, s_.dn_qkv.data()}, {&w.ssm_z, s_.dn_z.data()}, {&w.ssm_ba, s_.dn_ba.data()}};
    matmul_group(outs, s_.xn.data(), n, pool, s_.matmul);
  }
  const int32_t r = d.n_v_heads / d.n_k_heads;             // value heads per key head
  const size_t qk = sizeof(float) * d.d_state;             // one key head's q (or k)
  const size_t vz = sizeof(float) * r * d.d_state;         // its value heads' v (or z)
  const int64_t group = 2 * int64_t{d.d_state} * (1 + r);  // one key head's span of an ssm_in row
  for_each_row(pool, n, [&](int64_t row) {
    const float* ba = s_.dn_ba.data() + row * 2 * d.n_v_heads;
    float* beta = s_.dn_beta.data() + row * d.n_v_heads;
    float* alpha = s_.dn_decay.data() + row * d.n_v_heads;
    for (int32_t g = 0; g < d.n_k_heads; ++g) {
      std::memcpy(beta + g * r, ba + 2 * g * r, sizeof(float) * r);
      std::memcpy(alpha + g * r, ba + 2 * g * r + r, sizeof(float) * r);
    }
    if (!fused_in) return;
    const float* in = s_.dn_in.data() + row * group * d.n_k_heads;
    float* qkv = s_.dn_qkv.data() + row * d.conv_channels();
    float* z = s_.dn_z.data() + row * d.value_dim();
    for (int32_t g = 0; g < d.n_k_heads; ++g) {
      const float* src = in + g * group;
      const int64_t kg = int64_t{g} * d.d_state;
      const int64_t vg = kg * r;
      std::memcpy(qkv + kg, src, qk);
      std::memcpy(qkv + d.key_dim() + kg, src + d.d_state, qk);
      std::memcpy(qkv + 2 * d.key_dim() + vg, src + 2 * d.d_state, vz);
      std::memcpy(z + vg, src + 2 * d.d_state + int64_t{r} * d.d_state, vz);
    }
  });
}

// The convolution (one item per sequence: its tokens in order through the window), the L2 norms, then the rule (one
// item per sequence and value head: its tokens in order through that head's state).
void Model::delta_net_recurrence(int layer, const BatchInput& batch, KvStorage& kv, ThreadPool& pool) {
  const auto& c = config_;
  const DeltaNetConfig& d = c.delta_net;
  const LayerWeights& w = weights_.layers[layer];
  const int32_t channels = d.conv_channels();
  const int64_t offset = layer_state_offset(c, layer);
  const int64_t window_floats = int64_t{d.d_conv - 1} * channels;
  const int64_t n_seqs = static_cast<int64_t>(batch.seqs.size());
  for_each_item(pool, n_seqs, [&](int64_t si, int) {
    const BatchSequence& seq = batch.seqs[si];
    float* window = kv.state_slot(seq.state_slot) + offset;
    for (int32_t t = 0; t < seq.n_tokens; ++t) {
      const int64_t row = seq.first_row + t;
      float* out = s_.dn_conv.data() + row * channels;
      causal_conv_step(w.ssm_conv.data(), window, s_.dn_qkv.data() + row * channels, out, channels, d.d_conv);
      for (const BatchSequence::StateCheckpoint& ckpt : seq.checkpoints) {
        if (ckpt.slot >= 0 && seq.pos_begin + t + 1 == ckpt.pos) {
          std::memcpy(kv.state_slot(ckpt.slot) + offset, window, sizeof(float) * window_floats);
        }
      }
      for (int32_t ch = 0; ch < channels; ++ch) out[ch] = silu(out[ch]);
      for (int32_t h = 0; h < 2 * d.n_k_heads; ++h) l2_norm(out + int64_t{h} * d.d_state, d.d_state, c.rms_eps);
    }
  });
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.d_state));
  const int64_t matrix = int64_t{d.d_state} * d.d_state;
  for_each_item(pool, n_seqs * d.n_v_heads, [&](int64_t item, int ith) {
    const BatchSequence& seq = batch.seqs[item / d.n_v_heads];
    const int32_t h = static_cast<int32_t>(item % d.n_v_heads);
    const int32_t hk = d.key_head_of(h);
    float* state = kv.state_slot(seq.state_slot) + offset + window_floats + h * matrix;
    float* delta = s_.dn_delta.data() + static_cast<int64_t>(ith) * d.d_state;
    for (int32_t t = 0; t < seq.n_tokens; ++t) {
      const int64_t row = seq.first_row + t;
      const float* conv = s_.dn_conv.data() + row * channels;
      const float* q = conv + int64_t{hk} * d.d_state;
      const float* k = conv + d.key_dim() + int64_t{hk} * d.d_state;
      const float* v = conv + 2 * d.key_dim() + int64_t{h} * d.d_state;
      gated_delta_rule_step(state, q, k, v, s_.dn_decay[row * d.n_v_heads + h], s_.dn_beta[row * d.n_v_heads + h],
                            scale, d.d_state, delta, s_.dn_out.data() + row * d.value_dim() + int64_t{h} * d.d_state);
      for (const BatchSequence::StateCheckpoint& ckpt : seq.checkpoints) {
        if (ckpt.slot >= 0 && seq.pos_begin + t + 1 == ckpt.pos) {
          std::memcpy(kv.state_slot(ckpt.slot) + offset + window_floats + h * matrix, state, sizeof(float) * matrix);
        }
      }
    }
  });
}

}  // namespace hearth
