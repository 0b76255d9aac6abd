#include "model/model.h"

#include <atomic>
#include <cmath>
#include <numbers>

#include "kernels/attention.h"
#include "kernels/cpu_isa.h"
#include "kernels/packed.h"
#include "kernels/ops.h"
#include "tensor/quant.h"

namespace hearth {
namespace {

// Query rows that share one pass over their sequence's K/V tiles. A household's later turn (~30 new rows behind
// ~2,400 cached keys) then reads each head's K/V from memory once, not twice (bench/household-limit; the runs are
// in docs/performance-log.md).
constexpr int32_t kAttnRows = 32;
// A sequence with at most this many rows in a forward (decode) attends with several KV heads per work item.
constexpr int32_t kStreamRows = 4;
// Attention work items per thread a sequence's prefill aims for. A KV head's row tiles go in as few items as that
// allows, earliest first, so one thread runs them one after another and the later tiles find the head's K/V in its
// L2 (a 110M head's 2,500 cached keys are 640 KB of f16 K/V; the L2s of these machines are 1-2 MiB). A turn of 33
// new rows after 2,507 cached keys read them from memory twice, for its 32-row tile and again for the one row
// after it, on the per-query path, which streams memory worse than the wide one (docs/performance-log.md).
constexpr int32_t kAttnItemsPerThread = 4;

// KV heads per decode work item: the most that still leaves every thread an item (a divisor of n_kv_heads, at
// least 1). A decode row's attention is a stream through memory; an item of neighbouring heads reads their runs of
// each pool block (adjacent: a block holds head after head) one after another, and the tile fetches the next head's
// run while one computes. Which item a head is in never changes its result.
int32_t stream_heads(int32_t n_kv_heads, int n_threads) {
  int32_t heads = std::max(1, n_kv_heads / std::max(n_threads, 1));
  while (n_kv_heads % heads != 0) --heads;
  return heads;
}
// The attention scratch floats of one thread (prepare_scratch's attn_scratch_per_thread): the most any layer needs
// (gemma4's layers differ in head size and KV heads).
size_t attention_floats_per_thread(const ModelConfig& c, int n_threads) {
  size_t most = 0;
  for (int32_t il = 0; il < c.n_layers; ++il) {
    const int32_t kv_heads = c.kv_heads_of(c.kv_layer_of(il));
    const int32_t head_dim = c.head_dim_of(il);
    const int32_t group = c.n_heads / kv_heads;
    most = std::max({most, attention_scratch_floats(head_dim, kAttnRows, group),
                     attention_scratch_floats(head_dim, kStreamRows, group * stream_heads(kv_heads, n_threads))});
  }
  return most;
}

// The distinct KV-head counts the layers attend with (one attention work list each).
std::vector<int32_t> attention_kv_heads(const ModelConfig& c) {
  std::vector<int32_t> counts;
  for (int32_t il = 0; il < c.n_layers; ++il) {
    const int32_t h = c.kv_heads_of(c.kv_layer_of(il));
    if (std::find(counts.begin(), counts.end(), h) == counts.end()) counts.push_back(h);
  }
  return counts;
}

// The local layers' rotated dims: gemma4's rope.dimension_count_swa, else rope_dim.
int32_t local_rope_dim(const ModelConfig& c) {
  return c.rope_dim_local > 0 ? c.rope_dim_local : c.rope_dim;
}

// Rows of element-wise work (norms, RoPE, residuals) below which for_rows runs them on the calling thread: a decode
// step's one to three rows take a microsecond or two, less than one pool call costs.
constexpr int64_t kInlineRows = 4;

// Grows to exactly n (reserve first: resize alone may double the capacity, past what model_memory.h counts).
void grow(std::vector<float>& v, size_t n) {
  if (v.size() >= n) return;
  v.reserve(n);
  v.resize(n);
}

// Applies fn(row) to rows [0, n_rows), split across the pool.
template <class F>
void for_rows(ThreadPool& pool, int64_t n_rows, F&& fn) {
  if (n_rows < kInlineRows) {  // a few rows of element-wise work cost less than waking the pool
    for (int64_t row = 0; row < n_rows; ++row) fn(row);
    return;
  }
  pool.run([&](int ith, int nth) {
    const Range r = split_range(n_rows, ith, nth);
    for (int64_t row = r.begin; row < r.end; ++row) fn(row);
  });
}

// YaRN (gpt-oss), as ggml's rope_yarn with ext_factor 1 and llama.cpp's attn_factor: pair i's original angle
// pos × base^(-2i / rope_dim) and its interpolation (× rope_freq_scale) are blended by a ramp that is 1 (original)
// below the first correction dim and 0 (interpolated) above the second; cos and sin × attn_factor ×
// (1 + 0.1 ln(1 / rope_freq_scale)). The correction dims are where the original context fits beta_fast and
// beta_slow turns of a pair (ggml_rope_yarn_corr_dims).
void fill_yarn_cos_sin(int32_t pos, const ModelConfig& c, float* cos_sin) {
  const double n_dims = c.rope_dim;
  const double base = c.rope_freq_base;
  auto corr_dim = [&](double turns) {
    return n_dims * std::log(c.rope_original_context / (turns * 2.0 * std::numbers::pi)) / (2.0 * std::log(base));
  };
  const double low = std::max(0.0, std::floor(corr_dim(c.yarn_beta_fast)));
  const double high = std::min(n_dims - 1.0, std::ceil(corr_dim(c.yarn_beta_slow)));
  const double scale = c.rope_freq_scale;
  const double mscale = c.rope_attn_factor * (1.0 + 0.1 * std::log(1.0 / scale));
  for (int32_t i = 0; i < c.rope_dim / 2; ++i) {
    const double extrap = pos * std::pow(base, -2.0 * i / n_dims);
    const double interp = scale * extrap;
    const double y = (i - low) / std::max(0.001, high - low);
    const double ramp = 1.0 - std::min(1.0, std::max(0.0, y));
    const double angle = interp * (1.0 - ramp) + extrap * ramp;
    cos_sin[2 * i] = static_cast<float>(std::cos(angle) * mscale);
    cos_sin[2 * i + 1] = static_cast<float>(std::sin(angle) * mscale);
  }
}

// The cos/sin table of one position. With rope_freqs (Llama 3's, or phi3's LongRoPE factors) or linear scaling,
// pair i turns by pos × freq_scale × base^(-2i / rope_dim) / rope_freqs[i], and cos and sin are multiplied by
// attn_factor (LongRoPE's), as ggml's rope does with freq_factors and no YaRN (ext_factor 0, mscale attn_factor);
// without them this is exactly the kernel's table.
void fill_rope_cos_sin(int32_t pos, const ModelConfig& c, int32_t rope_dim, float base, float freq_scale,
                       const std::vector<float>& rope_freqs, float attn_factor, float* cos_sin) {
  if (c.rope_yarn) {
    fill_yarn_cos_sin(pos, c, cos_sin);
    return;
  }
  if (rope_freqs.empty() && freq_scale == 1.0f && attn_factor == 1.0f) {
    rope_fill_cos_sin(pos, rope_dim, base, cos_sin);
    return;
  }
  for (int32_t i = 0; i < rope_dim / 2; ++i) {
    double freq = std::pow(static_cast<double>(base), -2.0 * i / rope_dim) * freq_scale;
    if (!rope_freqs.empty()) freq /= rope_freqs[i];
    const double angle = pos * freq;
    cos_sin[2 * i] = static_cast<float>(std::cos(angle)) * attn_factor;
    cos_sin[2 * i + 1] = static_cast<float>(std::sin(angle)) * attn_factor;
  }
}

}  // namespace

Model::Model(std::shared_ptr<const GgufFile> file, ModelConfig config, ModelWeights weights)
    : file_(std::move(file)), config_(std::move(config)), weights_(std::move(weights)) {
  if (config_.gemma4) ones_.assign(static_cast<size_t>(std::max(config_.max_head_dim(), config_.dim)), 1.0f);
  if (config_.encoder) ones_.assign(static_cast<size_t>(config_.ffn_dim), 1.0f);
  packed_bytes_ = weights_.pack_matrices();
  weights_.release_packed_originals();
}

const char* Model::kernel_isa() {
  return isa_level_name(active_isa_level());
}

const char* Model::kernel_decode_prefetch() {
  return decode_prefetch_name(decode_prefetch());
}

std::string Model::kernel_arithmetic() {
  return std::string(kernel_isa()) + "/n" + std::to_string(kNumericsVersion);
}

Result<std::unique_ptr<Model>> Model::load(std::shared_ptr<const GgufFile> file) {
  auto config = ModelConfig::from_gguf(*file);
  if (!config) return config.error();
  auto weights = ModelWeights::from_gguf(*file, *config);
  if (!weights) return weights.error();
  return std::unique_ptr<Model>(new Model(std::move(file), std::move(*config), std::move(*weights)));
}

void Model::prepare_scratch(const BatchInput& batch, int n_threads) {
  const auto& c = config_;
  const size_t t = batch.tokens.size();
  grow(s_.x, t * c.dim);
  grow(s_.xn, t * c.dim);
  grow(s_.q, t * c.max_q_dim());
  grow(s_.k, t * c.max_kv_dim());
  grow(s_.v, t * c.max_kv_dim());
  grow(s_.attn, t * c.max_q_dim());
  grow(s_.proj, t * c.dim);
  if (c.has_dense_ffn()) {  // the MoE FFN keeps its own rows
    grow(s_.gate, t * c.max_ffn_dim());
    grow(s_.up, t * c.max_ffn_dim());
  }
  if (c.gemma4 && c.is_moe()) {
    grow(s_.moe_in, t * c.dim);
    grow(s_.moe_out, t * c.dim);
  }
  if (c.attn_output_gate) {
    grow(s_.q_gate, t * 2 * c.q_dim());
    grow(s_.attn_gate, t * c.q_dim());
  }
  if (c.is_hybrid()) {
    const DeltaNetConfig& d = c.delta_net;
    grow(s_.dn_qkv, t * d.conv_channels());
    grow(s_.dn_conv, t * d.conv_channels());
    grow(s_.dn_z, t * d.value_dim());
    grow(s_.dn_decay, t * d.n_v_heads);
    grow(s_.dn_beta, t * d.n_v_heads);
    grow(s_.dn_out, t * d.value_dim());
    grow(s_.dn_delta, static_cast<size_t>(n_threads) * d.d_state);
    if (d.grouped_heads) {
      grow(s_.dn_in, t * (d.conv_channels() + d.value_dim()));
      grow(s_.dn_ba, t * 2 * d.n_v_heads);
    }
  }
  grow(s_.cos_sin, t * c.rope_dim);
  if (c.rope_freq_base_local > 0.0f) grow(s_.cos_sin_local, t * local_rope_dim(c));
  if (c.per_layer_dim > 0) {
    grow(s_.ple, t * c.n_layers * c.per_layer_dim);
    grow(s_.ple_gate, t * c.per_layer_dim);
  }
  s_.row_pos.resize(t);
  s_.row_seq.resize(t);
  if (s_.attn_sets.empty()) {
    for (int32_t h : attention_kv_heads(c)) s_.attn_sets.push_back({h, {}});
  }
  for (AttnItemSet& set : s_.attn_sets) set.items.clear();
  for (size_t si = 0; si < batch.seqs.size(); ++si) {
    const BatchSequence& seq = batch.seqs[si];
    HEARTH_CHECK(seq.first_row >= 0 && seq.n_tokens > 0 && seq.first_row + seq.n_tokens <= static_cast<int32_t>(t),
                 "batch sequence {} rows out of range", si);
    for (int32_t i = 0; i < seq.n_tokens; ++i) {
      s_.row_pos[seq.first_row + i] = seq.pos_begin + i;
      s_.row_seq[seq.first_row + i] = static_cast<int32_t>(si);
    }
    // Each head item's row tiles in as few runs of consecutive tiles as still give every thread
    // kAttnItemsPerThread items; latest rows first: they read the most keys, and the pool takes items in order.
    for (AttnItemSet& set : s_.attn_sets) {
      const int32_t n_kv_heads = set.n_kv_heads;
      const int32_t heads = seq.n_tokens <= kStreamRows ? stream_heads(n_kv_heads, n_threads) : 1;
      const int32_t head_items = n_kv_heads / heads;
      const int32_t tiles = (seq.n_tokens + kAttnRows - 1) / kAttnRows;
      const int32_t runs = std::clamp((kAttnItemsPerThread * n_threads + head_items - 1) / head_items, 1, tiles);
      const int32_t run_rows = (tiles + runs - 1) / runs * kAttnRows;
      for (int32_t row0 = (tiles - 1) / (run_rows / kAttnRows) * run_rows; row0 >= 0; row0 -= run_rows) {
        for (int32_t h = 0; h < n_kv_heads; h += heads) {
          set.items.push_back({static_cast<int32_t>(si), h, heads, row0, std::min(row0 + run_rows, seq.n_tokens)});
        }
      }
    }
  }
  s_.attn_scratch_per_thread = attention_floats_per_thread(c, n_threads);
  grow(s_.attn_scratch, static_cast<size_t>(n_threads) * s_.attn_scratch_per_thread);
}

void Model::embed(const BatchInput& batch, ThreadPool& pool) {
  const auto& c = config_;
  const MatrixView& e = weights_.token_embd;
  for_rows(pool, static_cast<int64_t>(batch.tokens.size()), [&](int64_t row) {
    const int32_t id = batch.tokens[row].value;
    HEARTH_CHECK(id >= 0 && id < c.n_vocab, "token id {} out of range [0, {})", id, c.n_vocab);
    float* x = s_.x.data() + row * c.dim;
    dequantize_row(e.type, e.data + static_cast<size_t>(id) * e.row_stride, x, c.dim);
    if (c.gemma) {
      const float embd_scale = std::sqrt(static_cast<float>(c.dim));
      for (int32_t i = 0; i < c.dim; ++i) x[i] *= embd_scale;
    }
    const int32_t pos = s_.row_pos[row];
    fill_rope_cos_sin(pos, c, c.rope_dim, c.rope_freq_base, c.rope_freq_scale, weights_.rope_freqs, c.rope_attn_factor,
                      s_.cos_sin.data() + row * c.rope_dim);
    if (c.rope_freq_base_local > 0.0f) {
      const int32_t local_dim = local_rope_dim(c);
      fill_rope_cos_sin(pos, c, local_dim, c.rope_freq_base_local, 1.0f, {}, 1.0f,
                        s_.cos_sin_local.data() + row * local_dim);
    }
  });
  if (c.per_layer_dim > 0) per_layer_inputs(batch, pool);
}

// gemma4's per-layer inputs, as llama.cpp's project_per_layer_inputs: for every layer, (RMSNorm(model_proj · x /
// sqrt(dim)) + per_layer_token_embd[token] × sqrt(per_layer_dim)) / sqrt(2), with x the scaled embedding.
void Model::per_layer_inputs(const BatchInput& batch, ThreadPool& pool) {
  const auto& c = config_;
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  const int64_t width = int64_t{c.n_layers} * c.per_layer_dim;
  matmul(weights_.ple_model_proj, s_.x.data(), n, s_.ple.data(), pool, s_.matmul);
  const float proj_scale = 1.0f / std::sqrt(static_cast<float>(c.dim));
  const float embd_scale = std::sqrt(static_cast<float>(c.per_layer_dim));
  const float input_scale = 1.0f / std::sqrt(2.0f);
  const MatrixView& e = weights_.ple_token_embd;
  for_rows(pool, n, [&](int64_t row) {
    float* ple = s_.ple.data() + row * width;
    float* embd = s_.ple_gate.data() + row * c.per_layer_dim;  // one layer's embedding at a time
    const uint8_t* embd_row = e.data + static_cast<size_t>(batch.tokens[row].value) * e.row_stride;
    for (int32_t il = 0; il < c.n_layers; ++il) {
      float* p = ple + int64_t{il} * c.per_layer_dim;
      for (int32_t i = 0; i < c.per_layer_dim; ++i) p[i] *= proj_scale;
      rms_norm(p, weights_.ple_proj_norm.data(), p, c.per_layer_dim, c.rms_eps);
      // Each layer's slice starts on a block boundary (weights.cpp checks the width against the block size).
      dequantize_row(e.type, embd_row + row_bytes(e.type, int64_t{il} * c.per_layer_dim), embd, c.per_layer_dim);
      for (int32_t i = 0; i < c.per_layer_dim; ++i) p[i] = (p[i] + embd[i] * embd_scale) * input_scale;
    }
  });
}

// gemma4's per-layer embedding branch after the FFN: x += RMSNorm(proj · (gelu(gate · x) * the layer's input)); then
// the layer's output scale.
void Model::per_layer_branch(int layer, int64_t n, ThreadPool& pool) {
  const auto& c = config_;
  const LayerWeights& w = weights_.layers[layer];
  if (c.per_layer_dim > 0) {
    const int64_t width = int64_t{c.n_layers} * c.per_layer_dim;
    matmul(w.ple_gate, s_.x.data(), n, s_.ple_gate.data(), pool, s_.matmul);
    for_rows(pool, n, [&](int64_t row) {
      float* g = s_.ple_gate.data() + row * c.per_layer_dim;
      gelu_mul(g, s_.ple.data() + row * width + int64_t{layer} * c.per_layer_dim, g, c.per_layer_dim);
    });
    matmul(w.ple_proj, s_.ple_gate.data(), n, s_.proj.data(), pool, s_.matmul);
    add_residual(w.ple_post_norm, n, pool);
  }
  if (!w.out_scale.empty()) {
    const float scale = w.out_scale[0];
    for_rows(pool, n, [&](int64_t row) {
      float* x = s_.x.data() + row * c.dim;
      for (int32_t i = 0; i < c.dim; ++i) x[i] *= scale;
    });
  }
}

void Model::store_kv(int layer, const BatchInput& batch, KvStorage& kv) {
  const auto& c = config_;
  const int32_t kv_dim = c.kv_dim_of(layer);
  const int32_t bs = kv.block_size();
  const int32_t kv_layer = c.kv_layer(layer);  // hybrid models keep K/V for their attention layers only
  for (int64_t row = 0; row < static_cast<int64_t>(batch.tokens.size()); ++row) {
    const BatchSequence& seq = batch.seqs[s_.row_seq[row]];
    const int32_t pos = s_.row_pos[row];
    const std::span<const BlockId> table = kv.windowed(kv_layer) ? seq.window_table : seq.block_table;
    HEARTH_CHECK(pos / bs < static_cast<int32_t>(table.size()) && table[pos / bs].value >= 0,
                 "block table too short for position {} (layer {})", pos, layer);
    const BlockId block = table[pos / bs];
    kv.store_row(kv_layer, 0, block, pos % bs, s_.k.data() + row * kv_dim);
    kv.store_row(kv_layer, 1, block, pos % bs, s_.v.data() + row * kv_dim);
  }
}

void Model::attend(int layer, const BatchInput& batch, const KvStorage& kv, ThreadPool& pool) {
  const auto& c = config_;
  const int32_t source = c.kv_layer_of(layer);  // gemma4's shared-KV layers read an earlier layer's K/V
  const int32_t n_kv_heads = c.kv_heads_of(source);
  const int32_t group = c.n_heads / n_kv_heads;
  const int32_t head_dim = c.head_dim_of(layer);
  const int32_t q_dim = c.q_dim_of(layer);
  const int32_t window = c.is_local(layer) ? c.sliding_window : 0;
  const std::vector<float>& sinks = weights_.layers[layer].attn_sinks;
  const int32_t kv_layer = c.kv_layer(layer);  // source's KvStorage plane (a hybrid's attention layers only)
  const std::vector<AttnItem>& items =
      std::find_if(s_.attn_sets.begin(), s_.attn_sets.end(), [&](const AttnItemSet& set) {
        return set.n_kv_heads == n_kv_heads;
      })->items;
  // Items differ in cost (later rows read more keys), so threads take them one at a time. Which thread runs
  // an item never changes its result.
  std::atomic<size_t> next{0};
  pool.run([&](int ith, int) {
    float* scratch = s_.attn_scratch.data() + ith * s_.attn_scratch_per_thread;
    for (size_t i = next.fetch_add(1, std::memory_order_relaxed); i < items.size();
         i = next.fetch_add(1, std::memory_order_relaxed)) {
      const AttnItem& item = items[i];
      const BatchSequence& seq = batch.seqs[item.seq];
      const std::span<const BlockId> table = kv.windowed(kv_layer) ? seq.window_table : seq.block_table;
      const int32_t head0 = item.kv_head * group;
      for (int32_t row0 = item.row0; row0 < item.row_end; row0 += kAttnRows) {
        const int64_t row = seq.first_row + row0;
        const AttentionTile tile{s_.q.data() + row * q_dim + head0 * head_dim,
                                 static_cast<size_t>(q_dim),
                                 s_.attn.data() + row * q_dim + head0 * head_dim,
                                 static_cast<size_t>(q_dim),
                                 std::min(kAttnRows, item.row_end - row0),
                                 seq.pos_begin + row0,
                                 group,
                                 item.kv_head,
                                 head_dim,
                                 c.attn_scale,
                                 window,
                                 c.attn_softcap,
                                 item.n_kv_heads,
                                 sinks.empty() ? nullptr : sinks.data() + head0};
        attention_tile(tile, kv.layer_view(kv_layer, 0, table), kv.layer_view(kv_layer, 1, table), scratch);
      }
    }
  });
}

void Model::project_qkv(int layer, int64_t n, ThreadPool& pool) {
  const auto& c = config_;
  const LayerWeights& w = weights_.layers[layer];
  for_rows(pool, n, [&](int64_t row) {
    rms_norm(s_.x.data() + row * c.dim, w.attn_norm.data(), s_.xn.data() + row * c.dim, c.dim, c.rms_eps);
  });
  // gemma4: a shared-KV layer projects q only; without attn_v, V is K's projection. qwen35: q with its gate.
  const bool has_kv = c.has_kv(layer);
  const bool v_is_k = has_kv && w.wv.data == nullptr;
  float* q_out = c.attn_output_gate ? s_.q_gate.data() : s_.q.data();
  const MatmulOutput qkv[] = {{&w.wq, q_out}, {&w.wk, s_.k.data()}, {&w.wv, s_.v.data()}};
  matmul_group(std::span(qkv, !has_kv ? 1 : v_is_k ? 2 : 3), s_.xn.data(), n, pool, s_.matmul);
  if (c.attn_output_gate) {  // qwen35: each head's q rows, then its gate's
    for_rows(pool, n, [&](int64_t row) {
      const float* qg = s_.q_gate.data() + row * 2 * c.q_dim();
      for (int32_t h = 0; h < c.n_heads; ++h) {
        const float* src = qg + int64_t{2} * h * c.head_dim;
        std::copy(src, src + c.head_dim, s_.q.data() + row * c.q_dim() + h * c.head_dim);
        std::copy(src + c.head_dim, src + 2 * c.head_dim, s_.attn_gate.data() + row * c.q_dim() + h * c.head_dim);
      }
    });
  }
  const bool neox = c.rope_style == RopeStyle::kNeox;
  const int32_t q_dim = c.q_dim_of(layer);
  const int32_t kv_dim = c.kv_dim_of(layer);
  const int32_t head_dim = c.head_dim_of(layer);
  const int32_t rope_dim = c.rope_dim_of(layer);
  // Per row, in the order the architectures define: bias (qwen2), per-head RMSNorm (qwen3), then RoPE.
  for_rows(pool, n, [&](int64_t row) {
    float* q = s_.q.data() + row * q_dim;
    float* k = s_.k.data() + row * kv_dim;
    float* v = s_.v.data() + row * kv_dim;
    if (!w.bq.empty()) {
      add_inplace(q, w.bq.data(), q_dim);
      add_inplace(k, w.bk.data(), kv_dim);
      add_inplace(v, w.bv.data(), kv_dim);
    }
    const bool local_rope = c.rope_freq_base_local > 0.0f && c.is_local(layer);
    const float* cs =
        local_rope ? s_.cos_sin_local.data() + row * local_rope_dim(c) : s_.cos_sin.data() + row * c.rope_dim;
    for (int32_t h = 0; h < c.n_heads; ++h) {
      float* qh = q + h * head_dim;
      if (!w.q_norm.empty()) rms_norm(qh, w.q_norm.data(), qh, head_dim, c.rms_eps);
      rope_apply(qh, cs, rope_dim, neox);
    }
    if (!has_kv) return;
    if (v_is_k) std::copy(k, k + kv_dim, v);
    for (int32_t h = 0; h < c.kv_heads_of(layer); ++h) {
      float* kh = k + h * head_dim;
      if (!w.k_norm.empty()) rms_norm(kh, w.k_norm.data(), kh, head_dim, c.rms_eps);
      rope_apply(kh, cs, rope_dim, neox);
      if (c.value_norm) rms_norm(v + h * head_dim, ones_.data(), v + h * head_dim, head_dim, c.rms_eps);
    }
  });
}

void Model::attention_block(int layer, const BatchInput& batch, KvStorage& kv, ThreadPool& pool) {
  const LayerWeights& w = weights_.layers[layer];
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  project_qkv(layer, n, pool);
  if (config_.has_kv(layer)) store_kv(layer, batch, kv);
  attend(layer, batch, kv, pool);
  if (config_.attn_output_gate) {  // qwen35: attention output × sigmoid(gate)
    const int32_t q_dim = config_.q_dim();
    for_rows(pool, n, [&](int64_t row) {
      float* a = s_.attn.data() + row * q_dim;
      const float* g = s_.attn_gate.data() + row * q_dim;
      for (int32_t i = 0; i < q_dim; ++i) a[i] *= 1.0f / (1.0f + std::exp(-g[i]));
    });
  }
  matmul(w.wo, s_.attn.data(), n, s_.proj.data(), pool, s_.matmul);
  if (!w.bo.empty()) {
    for_rows(pool, n, [&](int64_t row) { add_inplace(s_.proj.data() + row * config_.dim, w.bo.data(), config_.dim); });
  }
  add_residual(w.attn_post_norm, n, pool);
}

void Model::add_residual(const std::vector<float>& post_norm, int64_t n, ThreadPool& pool) {
  const auto& c = config_;
  for_rows(pool, n, [&](int64_t row) {
    float* proj = s_.proj.data() + row * c.dim;
    if (!post_norm.empty()) rms_norm(proj, post_norm.data(), proj, c.dim, c.rms_eps);
    add_inplace(s_.x.data() + row * c.dim, proj, c.dim);
  });
}

void Model::ffn_block(int layer, int64_t n, ThreadPool& pool) {
  const auto& c = config_;
  const LayerWeights& w = weights_.layers[layer];
  for_rows(pool, n, [&](int64_t row) {
    rms_norm(s_.x.data() + row * c.dim, w.ffn_norm.data(), s_.xn.data() + row * c.dim, c.dim, c.rms_eps);
  });
  if (c.is_moe() && !c.gemma4) {
    s_.moe.forward(w.moe, c.moe, s_.xn.data(), n, s_.proj.data(), pool, s_.matmul);
    add_residual(w.ffn_post_norm, n, pool);
    return;
  }
  const MatmulOutput gate_up[] = {{&w.w_gate, s_.gate.data()}, {&w.w_up, s_.up.data()}};
  matmul_group(gate_up, s_.xn.data(), n, pool, s_.matmul);
  const int32_t ffn_dim = c.ffn_dim_of(layer);
  for_rows(pool, n, [&](int64_t row) {
    float* g = s_.gate.data() + row * ffn_dim;
    if (c.gemma) {
      gelu_mul(g, s_.up.data() + row * ffn_dim, g, ffn_dim);
    } else {
      silu_mul(g, s_.up.data() + row * ffn_dim, g, ffn_dim);
    }
  });
  matmul(w.w_down, s_.gate.data(), n, s_.proj.data(), pool, s_.matmul);
  if (c.is_moe()) gemma4_experts(layer, n, pool);  // gemma4: the dense FFN above is the shared expert
  add_residual(w.ffn_post_norm, n, pool);
}

// gemma4's experts beside its dense FFN (whose output is in proj), as llama.cpp's gemma4 graph: proj =
// post_ffn_norm_1(proj) + post_ffn_norm_2(experts(pre_ffn_norm_2(x))), the router reading router_scale ·
// RMSNorm(x) / sqrt(dim).
void Model::gemma4_experts(int layer, int64_t n, ThreadPool& pool) {
  const auto& c = config_;
  const LayerWeights& w = weights_.layers[layer];
  const float router_input_scale = 1.0f / std::sqrt(static_cast<float>(c.dim));
  for_rows(pool, n, [&](int64_t row) {
    const float* x = s_.x.data() + row * c.dim;
    rms_norm(x, w.pre_ffn_norm_2.data(), s_.xn.data() + row * c.dim, c.dim, c.rms_eps);
    float* r = s_.moe_in.data() + row * c.dim;
    rms_norm(x, ones_.data(), r, c.dim, c.rms_eps);
    for (int32_t i = 0; i < c.dim; ++i) r[i] = r[i] * router_input_scale * w.router_scale[i];
  });
  s_.moe.forward(w.moe, c.moe, s_.xn.data(), n, s_.moe_out.data(), pool, s_.matmul, s_.moe_in.data());
  for_rows(pool, n, [&](int64_t row) {
    float* proj = s_.proj.data() + row * c.dim;
    float* experts = s_.moe_out.data() + row * c.dim;
    rms_norm(proj, w.post_ffn_norm_1.data(), proj, c.dim, c.rms_eps);
    rms_norm(experts, w.post_ffn_norm_2.data(), experts, c.dim, c.rms_eps);
    add_inplace(proj, experts, c.dim);
  });
}

std::span<const float> Model::output_logits(const BatchInput& batch, ThreadPool& pool) {
  const auto& c = config_;
  std::vector<int64_t>& rows = s_.logit_rows;
  rows.clear();
  for (const BatchSequence& seq : batch.seqs) {
    if (!seq.want_logits) continue;
    for (int32_t i = std::min(seq.n_logits, seq.n_tokens); i >= 1; --i)
      rows.push_back(seq.first_row + seq.n_tokens - i);
  }
  const int64_t n_out = static_cast<int64_t>(rows.size());
  if (n_out == 0) return {};
  grow(s_.logits_in, n_out * c.dim);
  grow(s_.logits, n_out * c.n_vocab);
  for (int64_t i = 0; i < n_out; ++i) {
    rms_norm(s_.x.data() + rows[i] * c.dim, weights_.output_norm.data(), s_.logits_in.data() + i * c.dim, c.dim,
             c.rms_eps);
  }
  matmul(weights_.output, s_.logits_in.data(), n_out, s_.logits.data(), pool, s_.matmul);
  if (c.final_softcap > 0.0f) softcap_inplace(s_.logits.data(), n_out * c.n_vocab, c.final_softcap);
  return {s_.logits.data(), static_cast<size_t>(n_out * c.n_vocab)};
}

std::span<const float> Model::forward(const BatchInput& batch, KvStorage& kv, ThreadPool& pool) {
  HEARTH_CHECK(!config_.encoder, "{} is an encoder: it computes hidden states (forward_hidden), not logits",
               config_.architecture);
  if (batch.tokens.empty()) return {};
  run_layers(batch, kv, pool);
  return output_logits(batch, pool);
}

std::span<const float> Model::forward_hidden(const BatchInput& batch, KvStorage& kv, ThreadPool& pool) {
  if (batch.tokens.empty()) return {};
  run_layers(batch, kv, pool);
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  const int32_t dim = config_.dim;
  if (config_.encoder) return {s_.x.data(), static_cast<size_t>(n * dim)};
  for_rows(pool, n, [&](int64_t row) {
    float* x = s_.x.data() + row * dim;
    rms_norm(x, weights_.output_norm.data(), x, dim, config_.rms_eps);
  });
  return {s_.x.data(), static_cast<size_t>(n * dim)};
}

void Model::run_layers(const BatchInput& batch, KvStorage& kv, ThreadPool& pool) {
  const KvShape want = config_.kv_shape();
  bool same = kv.shape().n_layers == want.n_layers;
  for (int32_t il = 0; same && il < want.n_layers; ++il) {
    same = kv.shape().layer(il).n_kv_heads == want.layer(il).n_kv_heads &&
           kv.shape().layer(il).head_dim == want.layer(il).head_dim;
  }
  HEARTH_CHECK(same, "KvStorage shape ({} layers, {} KV heads of {}) does not match the model's ({}, {} of {})",
               kv.shape().n_layers, kv.shape().n_kv_heads, kv.shape().head_dim, want.n_layers, want.n_kv_heads,
               want.head_dim);
  prepare_scratch(batch, pool.num_threads());
  if (config_.encoder) {
    run_encoder(batch, kv, pool);
    return;
  }
  reset_states(batch, kv);
  embed(batch, pool);
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  for (int layer = 0; layer < config_.n_layers; ++layer) {
    if (config_.is_recurrent(layer)) {
      delta_net_block(layer, batch, kv, pool);
    } else {
      attention_block(layer, batch, kv, pool);
    }
    ffn_block(layer, n, pool);
    if (config_.gemma4) per_layer_branch(layer, n, pool);
  }
}

namespace {

template <class... V>
int64_t capacity_bytes(const V&... v) {
  return (static_cast<int64_t>(v.capacity() * sizeof(typename V::value_type)) + ...);
}

}  // namespace

int64_t estimate_scratch_bytes(const ModelConfig& c, const ModelWeights& w, const ForwardShape& shape) {
  const int64_t t = std::max<int64_t>(shape.max_batch_tokens, 1);
  const int64_t seqs = std::clamp<int64_t>(shape.max_sequences, 1, t);
  const int64_t row_floats =
      3 * int64_t{c.dim} + 2 * int64_t{c.max_q_dim()} + 2 * int64_t{c.max_kv_dim()} +
      (c.has_dense_ffn() ? 2 * int64_t{c.max_ffn_dim()} : 0) + int64_t{c.rope_dim} +
      (c.gemma4 && c.is_moe() ? 2 * int64_t{c.dim} : 0) + (c.rope_freq_base_local > 0.0f ? local_rope_dim(c) : 0) +
      (c.per_layer_dim > 0 ? int64_t{c.n_layers + 1} * c.per_layer_dim : 0) +
      (c.attn_output_gate ? 3 * int64_t{c.q_dim()} : 0) +
      (c.is_hybrid()
           ? 2 * int64_t{c.delta_net.conv_channels()} + 2 * int64_t{c.delta_net.value_dim()} + 2 * c.delta_net.n_v_heads
           : 0);
  int64_t bytes = static_cast<int64_t>(sizeof(float)) * (t * row_floats + seqs * (int64_t{c.dim} + c.n_vocab));
  bytes += static_cast<int64_t>(sizeof(float) * attention_floats_per_thread(c, shape.n_threads)) * shape.n_threads;
  bytes += static_cast<int64_t>(sizeof(int32_t)) * 2 * t + static_cast<int64_t>(sizeof(int64_t)) * seqs;
  if (c.is_hybrid()) bytes += static_cast<int64_t>(sizeof(float)) * shape.n_threads * c.delta_net.d_state;
  // Work items: at most every row tile of every sequence for every KV head; push_back may leave twice that.
  for (int32_t h : attention_kv_heads(c)) {
    bytes += 2 * static_cast<int64_t>(sizeof(Model::AttnItem)) * (t / kAttnRows + seqs) * h;
  }
  // The largest matmul's activations: a layer matrix over the whole batch, the output over one row per sequence.
  size_t matmul_bytes = 0;
  const bool packs = isa_at_least(IsaLevel::kAvx2);
  auto consider = [&](const MatrixView& m, int64_t rows) {
    if (m.data == nullptr || m.n_rows == 0) return;
    const bool packed = packs && packing_available(m.type);
    matmul_bytes = std::max(matmul_bytes, matmul_scratch_bytes(m.type, m.n_cols, rows, packed));
  };
  for (const LayerWeights& l : w.layers) l.for_each_matrix([&](const MatrixView& m) { consider(m, t); });
  consider(w.ple_model_proj, t);
  consider(w.output, seqs);
  bytes += static_cast<int64_t>(matmul_bytes);
  if (c.is_moe()) bytes += MoeFfn::scratch_bytes_for(c.moe, c.dim, t);
  return bytes;
}

ModelMemory Model::memory() const {
  ModelMemory m;
  m.weights_bytes = resident_weight_bytes(*file_, weights_, [](const MatrixView& v) { return v.packed != nullptr; });
  int64_t item_bytes = 0;
  for (const AttnItemSet& set : s_.attn_sets) item_bytes += capacity_bytes(set.items);
  m.scratch_bytes =
      capacity_bytes(s_.x, s_.xn, s_.q, s_.k, s_.v, s_.attn, s_.proj, s_.gate, s_.up, s_.cos_sin, s_.cos_sin_local,
                     s_.ple, s_.ple_gate, s_.moe_in, s_.moe_out, s_.row_pos, s_.row_seq, s_.logit_rows, s_.attn_scratch,
                     s_.logits_in, s_.logits, s_.q_gate, s_.attn_gate, s_.dn_qkv, s_.dn_conv, s_.dn_z, s_.dn_decay,
                     s_.dn_beta, s_.dn_out, s_.dn_delta, s_.dn_in, s_.dn_ba) +
      item_bytes + static_cast<int64_t>(s_.matmul.capacity()) + s_.moe.scratch_bytes();
  return m;
}

}  // namespace hearth
