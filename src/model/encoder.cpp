// The encoder architectures' forward pass (config.h: bert, nomic-bert; llama.cpp's llm_build_bert):
//
//   x = LN_embd(token_embd[t] + position_embd[pos] (bert) + token_types[0])
//   per layer:  q, k, v = x·Wq + bq, ...   (nomic-bert: fused, RoPE neox on q and k)
//               x = LN_attn_out(x + (bidirectional attention)·Wo + bo)
//               x = LN_layer_out(x + FFN(x))   bert: down(gelu(up·x + b) ) + b; nomic-bert: down(silu(gate·x) ⊙ up·x)
//   the hidden states are x (no output norm, no head).
//
// Attention is bidirectional: every row of a sequence reads every key of it, so each sequence must arrive whole in
// one forward (pos_begin 0). K/V still go through the KvStorage blocks, which the engine borrows per input; a row
// attends as a one-row tile at the sequence's last position, so its arithmetic depends on its sequence alone, never
// on the batch it shares a forward with.

#include <atomic>

#include "kernels/attention.h"
#include "kernels/ops.h"
#include "model/model.h"
#include "tensor/quant.h"

namespace hearth {
namespace {

constexpr int64_t kInlineRows = 4;

template <class F>
void for_each_row(ThreadPool& pool, int64_t n_rows, F&& fn) {
  if (n_rows < kInlineRows) {
    for (int64_t row = 0; row < n_rows; ++row) fn(row);
    return;
  }
  pool.run([&](int ith, int nth) {
    const Range r = split_range(n_rows, ith, nth);
    for (int64_t row = r.begin; row < r.end; ++row) fn(row);
  });
}

}  // namespace

void Model::encoder_embed(const BatchInput& batch, ThreadPool& pool) {
  const auto& c = config_;
  const ModelWeights& w = weights_;
  for_each_row(pool, static_cast<int64_t>(batch.tokens.size()), [&](int64_t row) {
    const int32_t id = batch.tokens[row].value;
    HEARTH_CHECK(id >= 0 && id < c.n_vocab, "token id {} out of range [0, {})", id, c.n_vocab);
    const int32_t pos = s_.row_pos[row];
    float* x = s_.x.data() + row * c.dim;
    float* tmp = s_.xn.data() + row * c.dim;
    dequantize_row(w.token_embd.type, w.token_embd.data + static_cast<size_t>(id) * w.token_embd.row_stride, x, c.dim);
    if (!w.type_embd0.empty()) add_inplace(x, w.type_embd0.data(), c.dim);
    if (w.pos_embd.data != nullptr) {
      HEARTH_CHECK(pos < c.n_ctx_train, "position {} beyond the {} position embeddings", pos, c.n_ctx_train);
      dequantize_row(w.pos_embd.type, w.pos_embd.data + static_cast<size_t>(pos) * w.pos_embd.row_stride, tmp, c.dim);
      add_inplace(x, tmp, c.dim);
    }
    layer_norm(x, w.embd_norm.data(), w.embd_norm_b.data(), x, c.dim, c.norm_eps);
    if (c.rope_dim > 0) rope_fill_cos_sin(pos, c.rope_dim, c.rope_freq_base, s_.cos_sin.data() + row * c.rope_dim);
  });
}

void Model::encoder_attention(int layer, const BatchInput& batch, KvStorage& kv, ThreadPool& pool) {
  const auto& c = config_;
  const LayerWeights& w = weights_.layers[layer];
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  const MatmulOutput qkv[] = {{&w.wq, s_.q.data()}, {&w.wk, s_.k.data()}, {&w.wv, s_.v.data()}};
  matmul_group(qkv, s_.x.data(), n, pool, s_.matmul);
  for_each_row(pool, n, [&](int64_t row) {
    float* q = s_.q.data() + row * c.q_dim();
    float* k = s_.k.data() + row * c.kv_dim();
    if (!w.bq.empty()) {
      add_inplace(q, w.bq.data(), c.q_dim());
      add_inplace(k, w.bk.data(), c.kv_dim());
      add_inplace(s_.v.data() + row * c.kv_dim(), w.bv.data(), c.kv_dim());
    }
    if (c.rope_dim == 0) return;
    const float* cs = s_.cos_sin.data() + row * c.rope_dim;
    for (int32_t h = 0; h < c.n_heads; ++h) rope_apply(q + h * c.head_dim, cs, c.rope_dim, true);
    for (int32_t h = 0; h < c.n_kv_heads; ++h) rope_apply(k + h * c.head_dim, cs, c.rope_dim, true);
  });
  store_kv(layer, batch, kv);
  attend_bidirectional(layer, batch, kv, pool);
  matmul(w.wo, s_.attn.data(), n, s_.proj.data(), pool, s_.matmul);
  for_each_row(pool, n, [&](int64_t row) {
    float* x = s_.x.data() + row * c.dim;
    float* proj = s_.proj.data() + row * c.dim;
    if (!w.bo.empty()) add_inplace(proj, w.bo.data(), c.dim);
    add_inplace(x, proj, c.dim);
    layer_norm(x, w.attn_out_norm.data(), w.attn_out_norm_b.data(), x, c.dim, c.norm_eps);
  });
}

// Every row reads keys [0, n_tokens) of its sequence: a one-row tile at the sequence's last position.
void Model::attend_bidirectional(int layer, const BatchInput& batch, const KvStorage& kv, ThreadPool& pool) {
  const auto& c = config_;
  const int32_t group = c.n_heads / c.n_kv_heads;
  const int32_t q_dim = c.q_dim();
  const int32_t kv_layer = c.kv_layer(layer);
  const std::vector<AttnItem>& items = s_.attn_sets.front().items;
  std::atomic<size_t> next{0};
  pool.run([&](int ith, int) {
    float* scratch = s_.attn_scratch.data() + ith * s_.attn_scratch_per_thread;
    for (size_t i = next.fetch_add(1, std::memory_order_relaxed); i < items.size();
         i = next.fetch_add(1, std::memory_order_relaxed)) {
      const AttnItem& item = items[i];
      const BatchSequence& seq = batch.seqs[item.seq];
      HEARTH_CHECK(seq.pos_begin == 0, "an encoder's sequence must come whole in one forward (pos_begin {})",
                   seq.pos_begin);
      const int32_t head0 = item.kv_head * group;
      for (int32_t r = item.row0; r < item.row_end; ++r) {
        const int64_t row = seq.first_row + r;
        const AttentionTile tile{s_.q.data() + row * q_dim + head0 * c.head_dim,
                                 static_cast<size_t>(q_dim),
                                 s_.attn.data() + row * q_dim + head0 * c.head_dim,
                                 static_cast<size_t>(q_dim),
                                 1,
                                 seq.n_tokens - 1,
                                 group,
                                 item.kv_head,
                                 c.head_dim,
                                 c.attn_scale,
                                 0,
                                 0.0f,
                                 item.n_kv_heads,
                                 nullptr};
        attention_tile(tile, kv.layer_view(kv_layer, 0, seq.block_table), kv.layer_view(kv_layer, 1, seq.block_table),
                       scratch);
      }
    }
  });
}

void Model::encoder_ffn(int layer, int64_t n, ThreadPool& pool) {
  const auto& c = config_;
  const LayerWeights& w = weights_.layers[layer];
  const bool swiglu = w.w_gate.data != nullptr;  // nomic-bert
  if (swiglu) {
    const MatmulOutput gate_up[] = {{&w.w_gate, s_.gate.data()}, {&w.w_up, s_.up.data()}};
    matmul_group(gate_up, s_.x.data(), n, pool, s_.matmul);
  } else {
    matmul(w.w_up, s_.x.data(), n, s_.gate.data(), pool, s_.matmul);
  }
  for_each_row(pool, n, [&](int64_t row) {
    float* g = s_.gate.data() + row * c.ffn_dim;
    if (swiglu) {
      silu_mul(g, s_.up.data() + row * c.ffn_dim, g, c.ffn_dim);
      return;
    }
    if (!w.b_up.empty()) add_inplace(g, w.b_up.data(), c.ffn_dim);
    gelu_mul(g, ones_.data(), g, c.ffn_dim);  // plain GELU: × 1 is exact
  });
  matmul(w.w_down, s_.gate.data(), n, s_.proj.data(), pool, s_.matmul);
  for_each_row(pool, n, [&](int64_t row) {
    float* x = s_.x.data() + row * c.dim;
    float* proj = s_.proj.data() + row * c.dim;
    if (!w.b_down.empty()) add_inplace(proj, w.b_down.data(), c.dim);
    add_inplace(x, proj, c.dim);
    layer_norm(x, w.layer_out_norm.data(), w.layer_out_norm_b.data(), x, c.dim, c.norm_eps);
  });
}

void Model::run_encoder(const BatchInput& batch, KvStorage& kv, ThreadPool& pool) {
  encoder_embed(batch, pool);
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  for (int layer = 0; layer < config_.n_layers; ++layer) {
    encoder_attention(layer, batch, kv, pool);
    encoder_ffn(layer, n, pool);
  }
}

}  // namespace hearth
