#pragma once
// Synthetic llama-family models (architecture llama, qwen2, qwen3, qwen3moe, phi3, gemma2, gemma3, gemma4, gpt-oss,
// qwen35, qwen35moe): a real
// vocabulary (copied from an existing GGUF) with random Gaussian weights at any shape and weight type. Speed does not
// depend on the weight values, so these stand in for real 1B-8B models in benchmarks and tests (vLLM's "dummy" load
// format exists for the same reason).
//
// The file is what llama.cpp writes for such a model: general.architecture, the <arch>.* hyperparameter keys
// (qwen3 adds attention.key_length/value_length), and tensors named and shaped as llama.cpp names them (shapes
// in GGML order, ne[0] first):
//   token_embd.weight        [dim, n_vocab]       weight type
//   blk.N.attn_norm.weight   [dim]                F32, all ones
//   blk.N.attn_q.weight      [dim, q_dim]         weight type; q_dim = n_heads * head_dim
//   blk.N.attn_k.weight      [dim, kv_dim]        kv_dim = n_kv_heads * head_dim
//   blk.N.attn_v.weight      [dim, kv_dim]
//   blk.N.attn_q.bias        [dim]                qwen2 only: F32, N(0, bias_sd^2)
//   blk.N.attn_k.bias        [kv_dim]             qwen2 only
//   blk.N.attn_v.bias        [kv_dim]             qwen2 only
//   blk.N.attn_q_norm.weight [head_dim]           qwen3 only: F32, 1 + N(0, qk_norm_sd^2)
//   blk.N.attn_k_norm.weight [head_dim]           qwen3 only
//   blk.N.attn_output.weight [q_dim, dim]
//   blk.N.ffn_norm.weight    [dim]                F32, all ones
//   blk.N.ffn_gate.weight    [dim, ffn_dim]
//   blk.N.ffn_up.weight      [dim, ffn_dim]
//   blk.N.ffn_down.weight    [ffn_dim, dim]
//   output_norm.weight       [dim]                F32, all ones
//   output.weight            [dim, n_vocab]
//   rope_freqs.weight        [head_dim / 2]       llama with llama3_rope_freqs: F32, Llama 3's formula (below)
//   rope_factors_long.weight, rope_factors_short.weight  [head_dim / 2]  phi3 with phi3_longrope: F32 (below)
// phi3 instead fuses blk.N.attn_qkv.weight [dim, dim + 2 kv_dim] (rows q, k, v) and blk.N.ffn_up.weight
// [dim, 2 ffn_dim] (rows gate, then up) and has no ffn_gate; it writes phi3.attention.sliding_window.
// gemma2 and gemma3 add blk.N.post_attention_norm.weight and blk.N.post_ffw_norm.weight ([dim], F32,
// 1 + N(0, qk_norm_sd^2)), have no output.weight (tied to token_embd, as llama.cpp requires) and write
// attention.sliding_window and key_length; gemma2 writes attn_/final_logit_softcapping, gemma3 has q/k norms as
// qwen3.
// qwen3moe is qwen3's attention with a mixture-of-experts FFN instead of ffn_gate/ffn_up/ffn_down, as llama.cpp's
// converter writes Qwen3-30B-A3B (expert_count, expert_used_count, expert_feed_forward_length beside
// feed_forward_length):
//   blk.N.ffn_gate_inp.weight  [dim, n_expert]                F32 (llama-quantize never quantizes the router),
//                                                             N(0, router_sd^2)
//   blk.N.ffn_gate_exps.weight [dim, expert_ffn, n_expert]    weight type
//   blk.N.ffn_up_exps.weight   [dim, expert_ffn, n_expert]
//   blk.N.ffn_down_exps.weight [expert_ffn, dim, n_expert]    (Q6_K on the Q4_K_M mix's use_more_bits layers)
// qwen35 (Qwen3.5 dense, a hybrid) writes llama.cpp's qwen35 keys (ssm.conv_kernel, ssm.state_size, ssm.group_count,
// ssm.time_step_rank, ssm.inner_size, full_attention_interval, rope.dimension_sections, a partial
// rope.dimension_count) and, on each layer, attn_norm.weight and post_attention_norm.weight ([dim], F32, 1 + noise:
// the FFN's input norm) and the dense FFN; layer i is gated full attention when (i + 1) % full_attention_interval
// == 0:
//   blk.N.attn_q.weight      [dim, 2 q_dim]       each head's q rows, then its output gate's
//   blk.N.attn_k.weight, attn_v.weight [dim, kv_dim]; attn_q_norm/attn_k_norm.weight [head_dim]; attn_output.weight
// else a Gated DeltaNet layer (key_dim = ssm_n_k_heads × d_state, value_dim = ssm_n_v_heads × d_state):
//   blk.N.attn_qkv.weight    [dim, 2 key_dim + value_dim]   weight type
//   blk.N.attn_gate.weight   [dim, value_dim]
//   blk.N.ssm_conv1d.weight  [d_conv, 2 key_dim + value_dim] F32, N(0, ssm_conv_sd^2)
//   blk.N.ssm_dt.bias        [n_v_heads]          F32, N(0, bias_sd^2)
//   blk.N.ssm_a              [n_v_heads]          F32, −(0.5 + h / n_v_heads): −exp(A_log), negative
//   blk.N.ssm_alpha.weight, ssm_beta.weight [dim, n_v_heads]
//   blk.N.ssm_norm.weight    [d_state]            F32, 1 + N(0, qk_norm_sd^2)
//   blk.N.ssm_out.weight     [value_dim, dim]
// qwen35moe (Qwen3.5/3.6-MoE, a hybrid) is qwen35's layers with qwen3moe's router and experts instead of the dense
// FFN, plus a shared expert of width ffn_dim (written as expert_shared_feed_forward_length beside the expert_* keys):
//   blk.N.ffn_gate_inp_shexp.weight [dim]         F32, N(0, weight_sd^2): the shared expert's sigmoid gate
//   blk.N.ffn_gate_shexp.weight, ffn_up_shexp.weight [dim, ffn_dim]; blk.N.ffn_down_shexp.weight [ffn_dim, dim]
// qwen35, qwen35moe and qwen3next with nextn_layers > 0 add that many multi-token-prediction blocks after the
// n_layers that run, as llama.cpp's converter keeps Qwen's mtp.* tensors: block_count is n_layers + nextn_layers,
// nextn_predict_layers is nextn_layers, and each blk.N (N >= n_layers) is the architecture's full-attention layer
// (the dense FFN, or the experts and shared expert) plus
//   blk.N.nextn.eh_proj.weight [2 dim, dim]; blk.N.nextn.enorm/hnorm/shared_head_norm.weight [dim] F32, 1 + noise
// Every other tensor is the same bytes as without them (weights are a function of the seed and the tensor's name).
// qwen3next (Qwen3-Next) is qwen35moe with llama.cpp's older DeltaNet tensors (model/config.h) and no
// rope.dimension_sections: instead of attn_qkv, attn_gate, ssm_alpha and ssm_beta,
//   blk.N.ssm_in.weight      [dim, 2 key_dim + 2 value_dim]  per key head: q, k, its value heads' v, their z
//   blk.N.ssm_ba.weight      [dim, 2 n_v_heads]              per key head: its value heads' beta, then alpha
// gemma4 is gemma3's layer as llama.cpp's gemma4 loader reads it: attention.sliding_window_pattern (every
// swa_period-th layer global), sliding layers with heads of head_dim_swa (attention.key_length_swa), global ones
// of head_dim with n_kv_heads_global KV heads (attention.head_count_kv then one count per layer), the last
// shared_kv_layers layers without attn_k/attn_v/attn_k_norm (they read an earlier layer's K/V), rope_freqs.weight
// [head_dim / 2] (1 for the first rope_partial_global of the pairs, 1e30 for the rest: Gemma 4's partial rotary
// on global layers), rope.freq_base_swa, final_logit_softcapping, and with per_layer_dim > 0 the per-layer
// embeddings: per_layer_token_embd.weight [n_layers × per_layer_dim, n_vocab], per_layer_model_proj.weight
// [dim, n_layers × per_layer_dim], per_layer_proj_norm.weight [per_layer_dim], and per layer blk.N.inp_gate.weight
// [dim, per_layer_dim], blk.N.proj.weight [per_layer_dim, dim], blk.N.post_norm.weight [dim]; with
// layer_output_scale > 0, blk.N.layer_output_scale.weight [1]. With experts (n_expert > 0: the 26B-A4B shape) each
// layer keeps its dense FFN as a shared expert and adds qwen3moe's router and experts, blk.N.ffn_gate_inp.scale
// [dim], blk.N.ffn_down_exps.scale [n_expert] and the norms blk.N.pre_ffw_norm_2, post_ffw_norm_1, post_ffw_norm_2
// [dim].
// bert and nomic-bert (encoders, synth_encoder.cpp) need no vocab_from: the file carries a synthetic WordPiece
// vocabulary (tokenizer.ggml.model "bert": [PAD] [UNK] [CLS] [SEP] [MASK], every printable ASCII character and
// letter pair word-initially ("▁x") and as a continuation ("x"), common English words and suffixes), lowercasing,
// token_type_count 2, attention.causal false, attention.layer_norm_epsilon rms_eps, and pooling_type (1 mean or
// 2 cls, required). Tensors as llama.cpp's bert loader names them: token_types.weight [dim, 2], position_embd
// (bert) [dim, context], token_embd_norm.{weight,bias}, per layer attn_q/k/v.{weight,bias} (bert) or attn_qkv.weight
// [dim, 3 dim] (nomic-bert), attn_output.{weight,bias} (bias: bert), attn_output_norm.{weight,bias},
// ffn_up.{weight,bias} and ffn_down.{weight,bias} (biases: bert), ffn_gate.weight (nomic-bert),
// layer_output_norm.{weight,bias}; LayerNorm weights 1 + noise, biases and norm biases N(0, bias_sd^2).
// head_dim (attention.key_length) may differ from dim / n_heads for qwen3, qwen3moe and gemma, as Qwen3's does.
//
// Generation streams one row at a time (rows are generated in parallel in small batches), so a 1B model needs
// a few MiB of memory, not the model's size. Weights are a pure function of (seed, tensor name, row): the same
// config gives a byte-identical file whatever the thread count.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/dtype.h"
#include "util/result.h"

namespace hearth {

struct SynthConfig {
  std::string out_path;
  std::string vocab_from;  // a GGUF whose tokenizer.* metadata is copied; its token list sets n_vocab
  // Written as tokenizer.chat_template when not empty, in place of the vocabulary's own (gpt-oss's vocabulary file
  // has none: its harmony template comes from the model card).
  std::string chat_template;
  // Control tokens appended to the copied vocabulary (score 0), e.g. Gemma 4's <turn|>, which the Gemma 3
  // vocabulary its test files borrow lacks; n_vocab grows by their number. Each must be new to the vocabulary.
  std::vector<std::string> extra_control_tokens;
  std::string name = "hearth-synthetic";
  std::string architecture = "llama";  // llama, qwen2 (q/k/v biases), qwen3 (per-head q/k RMSNorm), qwen3moe, phi3, ...
  int64_t dim = 256;
  int64_t n_layers = 2;
  int64_t n_heads = 4;
  int64_t n_kv_heads = 2;
  int64_t ffn_dim = 768;
  int64_t context_length = 1024;
  int64_t head_dim = 0;  // 0: dim / n_heads; else written as attention.key_length (qwen3, qwen3moe, gemma only)
  // qwen3moe: experts per layer, experts each token uses, each expert's hidden width; 0 for dense architectures.
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t expert_ffn_dim = 0;
  float router_sd = 0.0f;          // qwen3moe: the router's N(0, router_sd^2) weights; 0: weight_sd
  // F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K, or MXFP4 (qwen3moe and gpt-oss only): llama-quantize's MXFP4_MOE mix,
  // the experts in MXFP4 and every other matrix in Q8_0, as the published gpt-oss files keep their experts.
  DType weight_type = DType::F16;
  // With weight_type Q4_K: llama-quantize's Q4_K_M mix instead of all Q4_K: the output matrix (token_embd when
  // it is tied) and, on the layers its use_more_bits picks (the first and last eighth, every third between),
  // attn_v and ffn_down in Q6_K. phi3's fused attn_qkv, Q5_K in that mix, stays Q4_K (no Q5_K quantizer here).
  bool q4_k_m = false;
  uint64_t seed = 1;
  float weight_sd = 0.02f;
  float bias_sd = 0.1f;     // qwen2's q/k/v biases
  float qk_norm_sd = 0.1f;  // qwen3's q/k norm weights are 1 + N(0, qk_norm_sd^2)
  float rms_eps = 1e-5f;
  float rope_freq_base = 10000.0f;
  // Llama 3.1's RoPE scaling (llama only): rope_freqs[i] = 1 for wavelengths 2π/θ_i below
  // original_context / high_freq_factor, rope_factor above original_context / low_freq_factor, and between them
  // 1 / ((1 - s) / rope_factor + s) with s = (original_context / wavelength - low) / (high - low).
  bool llama3_rope_freqs = false;
  float rope_factor = 8.0f;
  float rope_low_freq_factor = 1.0f;
  float rope_high_freq_factor = 4.0f;
  int64_t rope_original_context = 8192;
  // phi3's LongRoPE (phi3 only): rope_factors_long.weight and rope_factors_short.weight (long_i = 1 + (rope_factor
  // − 1)·i / (n − 1), short_i = 1 + 0.25·i / (n − 1) over the n = head_dim / 2 pairs), rope.scaling.attn_factor
  // √(1 + ln(context / original) / ln(original)) as Phi-3's config gives it, and
  // rope.scaling.original_context_length = rope_original_context.
  bool phi3_longrope = false;
  int64_t sliding_window = 0;   // phi3's attention.sliding_window (0: the context length); gemma's (0: 4096)
  float attn_softcap = 50.0f;   // gemma2's attn_logit_softcapping
  float final_softcap = 30.0f;  // gemma2's and gemma4's final_logit_softcapping
  // gemma4 (above): the sliding layers' head size (0: head_dim / 2), the global layers' KV heads (0: n_kv_heads),
  // the global layers' period (0: 5), the layers that share K/V, the per-layer embeddings' width (0: none), the
  // global layers' rotated fraction, the sliding layers' RoPE base, and the layers' output scale (0: none).
  int64_t head_dim_swa = 0;
  int64_t n_kv_heads_global = 0;
  int64_t swa_period = 0;
  int64_t shared_kv_layers = 0;
  int64_t per_layer_dim = 0;
  float rope_partial_global = 0.25f;
  float rope_freq_base_swa = 10000.0f;
  float layer_output_scale = 0.0f;
  int num_threads = 0;          // < 1: hardware concurrency
  // qwen35: the Gated DeltaNet layers' shape (0: d_state = head size, key heads = n_kv_heads, value heads =
  // n_heads), their conv taps, which layers attend, and the attention's rotated dims (0: head size / 4, Qwen3.5's
  // partial_rotary_factor).
  int64_t ssm_d_conv = 4;
  int64_t ssm_d_state = 0;
  int64_t ssm_n_k_heads = 0;
  int64_t ssm_n_v_heads = 0;
  int64_t full_attention_interval = 4;
  int64_t rope_dim = 0;
  // qwen35, qwen35moe, qwen3next: multi-token-prediction blocks written after the n_layers that run (below), as
  // llama.cpp's converter keeps Qwen's mtp.* tensors. 0: none (no nextn_predict_layers key).
  int64_t nextn_layers = 0;
  float ssm_conv_sd = 0.5f;
  // Embedding models: written as <arch>.pooling_type when >= 0 (llama.cpp's numbers, model/pooling.h: 1 mean, 2 cls,
  // 3 last; Qwen3-Embedding's files say 3).
  int32_t pooling_type = -1;
  // Written as tokenizer.ggml.add_eos_token in place of the vocabulary's own when set (an embedding model that
  // ends every input with the end-of-text token).
  std::optional<bool> add_eos;
};

// Whether `architecture` is an encoder the generator writes (bert, nomic-bert).
inline bool synth_is_encoder(std::string_view architecture) {
  return architecture == "bert" || architecture == "nomic-bert";
}

// qwen35's Gated DeltaNet shape with the 0 defaults above resolved.
struct SynthDeltaNet {
  int64_t d_conv, d_state, n_k_heads, n_v_heads, rope_dim;
};
SynthDeltaNet synth_delta_net(const SynthConfig& config);

// Named shapes: "minilm-l6" (bert: all-MiniLM-L6-v2's dim 384, 6 layers, 12 heads, ffn 1536, context 512, mean
// pooling), "nomic-embed" (nomic-bert: nomic-embed-text-v1.5's 768, 12 layers, 12 heads, ffn 3072, context 2048,
// RoPE base 1000, mean), "tiny" (the shape of the shared synth-tiny models), "110m" (dim 768, 12 layers, 12 heads, ffn
// 2048), "1b" (dim 2048, 16 layers, 32 heads, 8 KV
// heads, ffn 8192), "3b", "8b", and "30b-a3b" (Qwen3-30B-A3B, architecture qwen3moe: dim 2048, 48 layers, 32 heads
// of 128, 4 KV heads, ffn 6144, 128 experts of 768, 8 used), "gpt-oss-20b", "qwen35-0.8b" (qwen35) and
// "qwen35-35b-a3b" (Qwen3.5-35B-A3B, qwen35moe: dim 2048, 40 layers, 16 heads of 256, 2 KV heads, 256 experts of 512,
// 8 used, a shared expert of 512, DeltaNet 16 key and 32 value heads of 128), "qwen3next-80b-a3b" (its shape with 48
// layers and 512 experts, 10 used, architecture qwen3next). nullopt for an unknown name. Paths, type
// and seed keep their defaults.
std::optional<SynthConfig> synth_preset(std::string_view name);

// The head size: head_dim, or dim / n_heads when it is 0.
int64_t synth_head_dim(const SynthConfig& config);

// Llama 3's rope_freqs for head size `head_dim` (head_dim / 2 values), from the config's rope_* fields.
std::vector<float> llama3_rope_freqs(const SynthConfig& config);

// phi3 LongRoPE's factors (head_dim / 2 values each) and attn_factor, from the config's rope_* fields.
std::vector<float> phi3_rope_factors(const SynthConfig& config, bool long_factors);
float phi3_rope_attn_factor(const SynthConfig& config);

// Checks shapes against each other and the weight type's block size; the error says which numbers disagree.
[[nodiscard]] Result<void> validate_synth_config(const SynthConfig& config);

// Writes the model to config.out_path (through a temporary name, so a failure leaves no partial file). Fails
// with a message on a bad config, an unreadable vocabulary file, or a write error.
[[nodiscard]] Result<void> write_synthetic_model(const SynthConfig& config);

}  // namespace hearth
