#pragma once
// ModelConfig: the hyperparameters of a llama-family model, read from GGUF metadata.
//
// Supported architectures (general.architecture) and how they differ from llama:
//   llama, mistral, smollm  the llama block; q/k/v biases are optional (applied when present)
//   qwen2                   neox RoPE, q/k/v biases required (blk.N.attn_{q,k,v}.bias)
//   qwen3                   neox RoPE, no biases, per-head RMSNorm of q and k before RoPE
//                           (blk.N.attn_q_norm.weight, blk.N.attn_k_norm.weight, [head_dim]); head_dim
//                           (attention.key_length) need not be embedding_length / head_count
//   phi3                    neox RoPE; fused blk.N.attn_qkv.weight (rows q, k, v) and fused blk.N.ffn_up.weight
//                           (rows gate, then up); every layer attends to the last attention.sliding_window keys
//                           (llama.cpp's phi3 mask); LongRoPE (Phi-3 128k, Phi-3.5, Phi-4-mini): see below
//   gemma2, gemma3          neox RoPE; embeddings × sqrt(dim); GELU(tanh)-gated FFN; RMSNorms after attention and
//                           after the FFN too (blk.N.post_attention_norm, blk.N.post_ffw_norm), every norm weight
//                           applied as stored (Gemma's converter already adds its +1); tied output; the query scale
//                           is 1/sqrt(key_length), or 1/sqrt(dim / head_count) for the 27B shapes (46 or 62
//                           layers), as llama.cpp picks Gemma's query_pre_attn_scalar; local layers attend to the
//                           last attention.sliding_window keys only (kept in window slabs by the engine)
//     gemma2                even layers local (window default 4096); attention scores soft-capped
//                           (attn_logit_softcapping, default 50) and final logits (final_logit_softcapping, 30)
//     gemma3                5 local : 1 global ((il + 1) % 6 == 0 is global); q/k per-head RMSNorm before RoPE;
//                           local layers rotate with base 10000 and no scaling, global ones with rope.freq_base
//                           and rope.scaling
//   qwen3moe                qwen3's attention; every layer's FFN is a mixture of experts (MoeRouting, moe.h):
//                           expert_count experts of expert_feed_forward_length (absent: feed_forward_length /
//                           expert_used_count, as llama.cpp), softmax router over all of them, the expert_used_count
//                           most probable, their weights normalised to sum 1 (llama.cpp's build_qwen3moe always
//                           normalises, whatever expert_weights_norm says; Qwen3-MoE's norm_topk_prob is true)
//   gpt-oss                 neox RoPE with YaRN scaling (rope.scaling.type yarn: factor, original_context_length;
//                           beta_fast 32, beta_slow 1 as llama.cpp's defaults); q/k/v biases and an attention output
//                           bias (blk.N.attn_output.bias); a learned sink logit per query head
//                           (blk.N.attn_sinks.weight) that joins every softmax's denominator; even layers attend to
//                           the last attention.sliding_window keys, odd ones to all; the FFN's input norm is
//                           blk.N.post_attention_norm; every FFN is a mixture of experts with biases on the router
//                           and on every expert matrix, the expert_used_count largest router logits chosen and
//                           their weights a softmax over those logits alone, and a clamped SwiGLU
//                           (min(gate, 7) · sigmoid(1.702 · min(gate, 7)) · (clamp(up, -7, 7) + 1))
//   gemma4                  gemma3's block with these differences (llama.cpp's llama_model_gemma4): which layers
//                           slide is attention.sliding_window_pattern (one bool per layer); sliding layers have
//                           heads of attention.key_length_swa, global ones of attention.key_length, and
//                           attention.head_count_kv may be one count per layer; q and k are normed per head, v by
//                           a plain RMSNorm (no weight); scores are not scaled (attention scale 1); sliding layers
//                           rotate rope.dimension_count_swa dims with rope.freq_base_swa, global ones with
//                           rope.freq_base and rope_freqs.weight as divisors (1e30 for the pairs that do not turn:
//                           partial rotary); the last attention.shared_kv_layers layers compute no K/V and read
//                           the last earlier layer of their kind (sliding: the last KV layer but one, global: the
//                           last); per-layer embeddings (embedding_length_per_layer_input > 0): per_layer_token_embd
//                           rows and a projection of the embeddings give each layer a vector that gates a
//                           residual branch after the FFN; blk.N.layer_output_scale scales a layer's output;
//                           final_logit_softcapping (default none). Its mixture-of-experts variant (expert_count,
//                           ffn_gate_inp) and fused attn_qkv are refused by name.
//   qwen35                  Qwen3.5 (dense), a hybrid: layer il is gated full attention when
//                           (il + 1) % full_attention_interval == 0 (default 4), else a Gated DeltaNet layer
//                           (DeltaNetConfig below, the layer in model/delta_net.h). Both keep blk.N.attn_norm as their
//                           input norm and name the FFN's input norm blk.N.post_attention_norm; the FFN is dense
//                           SwiGLU. The attention layers: attn_q.weight is [dim, 2 q_dim], each head's q rows followed
//                           by its output gate's rows; q/k per-head RMSNorm, then neox RoPE over the leading
//                           rope.dimension_count dims (partial rotary); the output × sigmoid(gate) before attn_output.
//                           rope.dimension_sections are llama.cpp's interleaved M-RoPE sections: text positions are
//                           the same in the first three, so a file whose sections cover every rotated pair rotates
//                           as plain neox RoPE; any other is refused naming the key.
//   qwen35moe               Qwen3.5/3.6-MoE (35B-A3B): qwen35's hybrid layers, every FFN qwen3moe's mixture of
//                           experts (softmax router, top-k renormalised: llama.cpp's qwen35moe always normalises)
//                           plus a shared expert, as llama.cpp's qwen35moe graph: ffn = experts(x) +
//                           sigmoid(ffn_gate_inp_shexp · x) × ffn_down_shexp(silu(ffn_gate_shexp · x) ⊙
//                           ffn_up_shexp · x), of width expert_shared_feed_forward_length (absent:
//                           feed_forward_length).
//   qwen3next               Qwen3-Next (80B-A3B): qwen35moe's layers and FFN (shared expert required) with
//                           llama.cpp's older DeltaNet tensors, grouped by key head (DeltaNetConfig::grouped_heads):
//                           ssm_in.weight [dim, 2 key_dim + 2 value_dim] holds, for each key head g in turn, g's q
//                           rows, its k rows, then the v rows and the z (gate) rows of its n_v / n_k value heads;
//                           ssm_ba.weight [dim, 2 n_v_heads] holds, per key head, its value heads' beta rows then
//                           their alpha rows; value head h reads key head h / (n_v / n_k) (llama.cpp's repeat-
//                           interleave). Plain neox RoPE (no rope.dimension_sections). A file with attn_qkv and
//                           attn_gate instead of ssm_in (llama.cpp's newer converter) reads them as qwen35 does.
//   bert                    an encoder (BERT, bge, all-MiniLM; llama.cpp's llm_build_bert): x = token_embd[t] +
//                           position_embd[pos] + token_types[0], LayerNorm (token_embd_norm, with bias, eps
//                           attention.layer_norm_epsilon); each layer post-norm: x = LN_attn_output_norm(x + attn(x)),
//                           x = LN_layer_output_norm(x + down(gelu(up(x) + b) + b)); q/k/v/o biases; attention is
//                           bidirectional (every token reads every other) and there is no RoPE; no output norm or
//                           head: the hidden states are the output, pooled by pooling_type. token_types.weight holds
//                           tokenizer.ggml.token_type_count rows, of which row 0 is added (llama.cpp's "sentence A").
//   nomic-bert              bert's block with a fused attn_qkv (rows q, k, v; no biases), neox RoPE (rope.freq_base)
//                           instead of position embeddings, and a SwiGLU FFN (ffn_up, ffn_gate, ffn_down, no biases)
//
// RoPE scaling: a rope_freqs.weight tensor (Llama 3.1/3.2, llama family) divides each pair's frequency
// (weights.h); rope.scaling.type linear (or absent) with rope.scaling.factor F multiplies every angle by 1/F;
// phi3's LongRoPE (rope.scaling.type longrope or absent) divides each pair's frequency by rope_factors_long.weight
// when the context Hearth serves (n_ctx_train) exceeds rope.scaling.original_context_length, else by
// rope_factors_short.weight, and multiplies cos and sin by rope.scaling.attn_factor, as llama.cpp does with the
// context it runs at: one choice per model, so every cached block was rotated alike. Any other scaling type, and
// an attn_factor other than 1 outside phi3, is refused naming the key.

#include <algorithm>
#include <cstdint>
#include <string>

#include <vector>

#include "gguf/gguf_file.h"
#include "model/pooling.h"
#include "util/kv_shape.h"
#include "util/result.h"

namespace hearth {

// How RoPE pairs dimensions: GGML "normal" rotates adjacent pairs (x[2i], x[2i+1]) as Llama GGUFs expect;
// "neox" rotates (x[i], x[i + rope_dim/2]) as Qwen2-style models do.
enum class RopeStyle { kNormal, kNeox };

// How a mixture-of-experts router turns its logits into probabilities. Later families add theirs (sigmoid,
// softmax over the chosen logits); a switch on it has no default, so a new one fails to compile until handled.
enum class ExpertGating {
  kSoftmax,        // p = softmax over every expert's logit; the n_used largest p, weighted by p
  kSoftmaxWeight,  // the n_used largest logits; weights = softmax over those n_used logits alone (gpt-oss)
};

// The activation between an expert's gate/up and down products.
enum class ExpertActivation {
  kSilu,       // silu(gate) · up
  kSwigluOai,  // gpt-oss: x = min(gate, 7); x · sigmoid(1.702 x) · (clamp(up, -7, 7) + 1)
  kGelu,       // gemma4: gelu(gate) · up (GELU's tanh form)
};

// A mixture-of-experts FFN's routing, as llama.cpp's build_moe_ffn computes it: probabilities from the router
// logits (gating), the n_used most probable experts (ties: the lower id), their probabilities as weights, divided
// by their sum when norm_weights. n_expert 0: the layer's FFN is dense.
struct MoeRouting {
  int32_t n_expert = 0;
  int32_t n_used = 0;
  int32_t ffn_dim = 0;  // each expert's hidden width
  ExpertGating gating = ExpertGating::kSoftmax;
  bool norm_weights = false;
  ExpertActivation activation = ExpertActivation::kSilu;
  bool biases = false;  // gpt-oss: the router and every expert matrix add a bias
  int32_t shared_ffn_dim = 0;  // qwen35moe, qwen3next: the sigmoid-gated shared expert's width; 0: none
};

// A Gated DeltaNet layer's shape (qwen35's ssm.* keys as llama.cpp reads them): n_v_heads value heads
// (ssm.time_step_rank) of d_state (ssm.state_size) each, n_k_heads query/key heads (ssm.group_count) of d_state, value
// head h reading key head key_head_of(h) (qwen35: llama.cpp's tiling, h % n_k_heads), a causal convolution of d_conv
// taps (ssm.conv_kernel) over the q|k|v channels. ssm.inner_size must be n_v_heads × d_state.
struct DeltaNetConfig {
  int32_t d_conv = 0;
  int32_t d_state = 0;
  int32_t n_k_heads = 0;
  int32_t n_v_heads = 0;
  int32_t full_attention_interval = 0;  // 0: not a hybrid model
  bool grouped_heads = false;           // qwen3next: value head h reads key head h / (n_v / n_k), not h % n_k

  // The query/key head that value head h reads.
  int32_t key_head_of(int32_t h) const { return grouped_heads ? h / (n_v_heads / n_k_heads) : h % n_k_heads; }

  int32_t key_dim() const { return n_k_heads * d_state; }
  int32_t value_dim() const { return n_v_heads * d_state; }
  int32_t conv_channels() const { return 2 * key_dim() + value_dim(); }
  // One sequence's recurrent state in one layer: the conv window ((d_conv − 1) × channels) and one
  // d_state × d_state matrix per value head.
  int64_t state_floats_per_layer() const {
    return int64_t{d_conv - 1} * conv_channels() + int64_t{n_v_heads} * d_state * d_state;
  }
};

struct ModelConfig {
  std::string architecture;
  std::string name;
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;  // context length the model was trained for
  int32_t dim = 0;          // embedding width
  int32_t n_layers = 0;     // the layers that run: block_count less the multi-token-prediction blocks
  int32_t n_nextn_layers = 0;  // nextn_predict_layers: MTP blocks after the trunk, loaded as nothing, never run
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t ffn_dim = 0;
  int32_t rope_dim = 0;  // leading dimensions of each head that RoPE rotates
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // linear RoPE scaling: every angle × 1 / rope.scaling.factor
  float rope_attn_factor = 1.0f;      // phi3 LongRoPE: cos and sin × rope.scaling.attn_factor
  int32_t rope_original_context = 0;  // rope.scaling.original_context_length (LongRoPE's long/short choice)
  float rms_eps = 1e-5f;
  RopeStyle rope_style = RopeStyle::kNormal;
  bool qkv_bias_required = false;     // qwen2: attn_{q,k,v}.bias must be present
  bool qk_norm = false;               // qwen3: per-head RMSNorm of q and k before RoPE
  bool fused_qkv_ffn = false;         // phi3: attn_qkv.weight and a gate+up ffn_up.weight instead of separate ones
  bool rope_freqs_allowed = false;    // llama family: an optional rope_freqs.weight (Llama 3 RoPE scaling)
  bool rope_factors_allowed = false;  // phi3: optional LongRoPE rope_factors_long/short.weight
  int32_t sliding_window = 0;         // attention.sliding_window as stored (0: none)
  bool gemma = false;                 // gemma2/3: √dim embeddings, GELU FFN, post-attention and post-FFN norms
  float attn_scale = 0.0f;            // scores are (q · k) × attn_scale
  float attn_softcap = 0.0f;          // gemma2: scores → cap × tanh(score / cap); 0: none
  float final_softcap = 0.0f;         // gemma2: logits → cap × tanh(logit / cap); 0: none
  int32_t swa_period = 0;             // 0: no local layers; 1: all local (phi3); N > 1: global when (il + 1) % N == 0
  float rope_freq_base_local = 0.0f;  // gemma3: local layers' RoPE base, unscaled; 0: every layer uses the global
  MoeRouting moe;                     // qwen3moe, qwen35moe, gpt-oss: every layer's FFN is a mixture of experts
  // YaRN RoPE scaling (gpt-oss): the angle of pair i blends the interpolated (× rope_freq_scale) and the original
  // angle by a ramp over the pairs between the correction dims, and cos and sin are × rope_attn_factor ×
  // (1 + 0.1 ln(1 / rope_freq_scale)), as ggml's rope_yarn with ext_factor 1.
  bool rope_yarn = false;
  float yarn_beta_fast = 32.0f;
  float yarn_beta_slow = 1.0f;
  bool attn_sinks = false;   // gpt-oss: blk.N.attn_sinks.weight, one logit per query head
  bool attn_out_bias = false;  // gpt-oss: blk.N.attn_output.bias
  bool attn_output_gate = false;  // qwen35, qwen35moe: attn_q holds q and a gate per head; output × sigmoid(gate)
  DeltaNetConfig delta_net;       // qwen35, qwen35moe: the recurrent layers' shape; full_attention_interval 0 elsewhere
  // <arch>.pooling_type (pooling.h): how an embedding model pools its hidden states; kNone when absent (chat models).
  PoolingType pooling = PoolingType::kNone;
  // bert, nomic-bert: a bidirectional encoder with LayerNorms (norm_eps) and n_token_types token-type rows; it
  // produces hidden states, never logits.
  bool encoder = false;
  float norm_eps = 1e-12f;
  int32_t n_token_types = 0;

  // gemma4 (config.h's header): per-layer shapes. Empty vectors and zeros mean every layer is alike.
  bool gemma4 = false;
  std::vector<bool> swa_layers;         // attention.sliding_window_pattern: layer il slides
  std::vector<int32_t> layer_kv_heads;  // attention.head_count_kv per layer
  std::vector<int32_t> layer_ffn_dim;   // feed_forward_length per layer
  int32_t head_dim_local = 0;           // attention.key_length_swa: the sliding layers' head size
  int32_t rope_dim_local = 0;           // rope.dimension_count_swa
  int32_t n_kv_shared_layers = 0;       // attention.shared_kv_layers: the last ones read an earlier layer's K/V
  int32_t per_layer_dim = 0;            // embedding_length_per_layer_input: per-layer embeddings' width; 0: none
  bool value_norm = false;              // v RMS-normed per head without a weight

  bool is_moe() const { return moe.n_expert > 0; }
  // Whether layers have the dense FFN: every non-MoE model, and gemma4's MoE, whose dense FFN is a shared expert.
  bool has_dense_ffn() const { return !is_moe() || gemma4; }
  // Whether the model has recurrent (Gated DeltaNet) layers beside attention, and whether layer `il` is one.
  bool is_hybrid() const { return delta_net.full_attention_interval > 0; }
  bool is_recurrent(int32_t il) const { return is_hybrid() && (il + 1) % delta_net.full_attention_interval != 0; }
  int32_t n_recurrent_layers() const {
    int32_t n = 0;
    for (int32_t il = 0; il < n_layers; ++il) n += is_recurrent(il) ? 1 : 0;
    return n;
  }
  // One sequence's recurrent state over every recurrent layer (0 for attention-only models).
  int64_t recurrent_state_floats() const { return n_recurrent_layers() * delta_net.state_floats_per_layer(); }

  // Per-layer shapes: the layer's own under gemma4, else the model's.
  int32_t head_dim_of(int32_t il) const { return head_dim_local > 0 && is_local(il) ? head_dim_local : head_dim; }
  int32_t kv_heads_of(int32_t il) const { return layer_kv_heads.empty() ? n_kv_heads : layer_kv_heads[il]; }
  int32_t ffn_dim_of(int32_t il) const { return layer_ffn_dim.empty() ? ffn_dim : layer_ffn_dim[il]; }
  int32_t rope_dim_of(int32_t il) const { return rope_dim_local > 0 && is_local(il) ? rope_dim_local : rope_dim; }
  int32_t q_dim_of(int32_t il) const { return n_heads * head_dim_of(il); }
  int32_t kv_dim_of(int32_t il) const { return kv_heads_of(il) * head_dim_of(il); }

  // The layers that store K/V, one KvStorage plane each, in layer order: every attention layer (a hybrid's recurrent
  // layers keep a recurrent state instead) before the last n_kv_shared_layers (gemma4's shared-KV layers, which
  // read an earlier layer's K/V).
  bool has_kv(int32_t il) const { return il < n_layers - n_kv_shared_layers && !is_recurrent(il); }
  int32_t n_kv_layers() const {
    int32_t n = 0;
    for (int32_t il = 0; il < n_layers; ++il) n += has_kv(il) ? 1 : 0;
    return n;
  }
  // The layer whose K/V layer il reads: its own, or (a shared layer) the last KV layer of its kind, as llama.cpp's
  // gemma3n/gemma4 reuse: the last KV layer for a global layer, the one before it for a sliding one.
  int32_t kv_layer_of(int32_t il) const {
    const int32_t first_shared = n_layers - n_kv_shared_layers;
    return il < first_shared ? il : first_shared - (is_local(il) ? 2 : 1);
  }
  // The KvStorage plane that attention layer il reads and (when has_kv) writes: the index of kv_layer_of(il) among
  // the layers that store K/V.
  int32_t kv_layer(int32_t il) const {
    const int32_t source = kv_layer_of(il);
    int32_t before = 0;
    for (int32_t l = 0; l < source; ++l) before += has_kv(l) ? 1 : 0;
    return before;
  }
  // The layer whose K/V plane `plane` (< n_kv_layers()) holds.
  int32_t layer_of_kv_plane(int32_t plane) const {
    for (int32_t il = 0; il < n_layers; ++il) {
      if (has_kv(il) && plane-- == 0) return il;
    }
    return n_layers;
  }
  // The largest per-layer sizes (scratch).
  int32_t max_head_dim() const { return std::max(head_dim, head_dim_local); }
  int32_t max_kv_heads() const;
  int32_t max_ffn_dim() const;
  int32_t max_q_dim() const { return n_heads * max_head_dim(); }
  int32_t max_kv_dim() const;
  // The KV that the model stores: one layer per KV plane (has_kv), each with its heads and head size. Shared-KV and
  // recurrent layers store none, so a plan over this shape counts what the model writes.
  KvShape kv_shape() const;

  // phi3 LongRoPE: the long factors when the served context exceeds the original one.
  bool rope_uses_long_factors() const { return n_ctx_train > rope_original_context; }

  int32_t q_dim() const { return n_heads * head_dim; }
  int32_t kv_dim() const { return n_kv_heads * head_dim; }
  // Whether layer `il` attends to the last sliding_window keys only.
  bool is_local(int32_t il) const {
    if (!swa_layers.empty()) return sliding_window > 0 && swa_layers[il];
    return sliding_window > 0 && (swa_period == 1 || (swa_period > 1 && (il + 1) % swa_period != 0));
  }

  // The architectures from_gguf accepts, comma-separated, for error messages.
  static std::string supported_architectures();

  // Reads `<arch>.*` keys. Fails with a message naming the missing or inconsistent key.
  [[nodiscard]] static Result<ModelConfig> from_gguf(const GgufFile& file);
};

}  // namespace hearth
