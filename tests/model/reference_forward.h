#pragma once
// A plain, straight-line, scalar forward pass written from the architectures' definitions, for checking the
// engine's Model against. It shares no code with src/model: it reads the hyperparameters from the GGUF metadata
// itself, dequantizes every tensor to f32 up front, accumulates in double and keeps its K/V in plain vectors.
// It is slow (one token at a time, every matrix-vector product by hand) and meant for tiny models only.
//
// Architectures: llama (normal RoPE, optional q/k/v biases), qwen2 (neox RoPE, q/k/v biases), qwen3 (neox RoPE,
// per-head RMSNorm of q and k before RoPE), phi3 (neox RoPE; attn_qkv.weight split into q, k, v rows; ffn_up.weight
// split into gate rows then up rows). RoPE: pair i of a head turns by pos / rope.scaling.factor ×
// base^(-2i / head_dim) / rope_freqs[i] (rope_freqs.weight of Llama 3.1, phi3's rope_factors_long.weight when
// context_length exceeds rope.scaling.original_context_length or rope_factors_short.weight otherwise, else 1),
// and phi3's LongRoPE multiplies both rotated values by rope.scaling.attn_factor.
// gemma2/gemma3 (from Google's gemma_pytorch and HF's modeling_gemma2/3): neox RoPE; embeddings × sqrt(dim);
// post-attention and post-FFN RMSNorms (GGUF's norm weights already hold Gemma's 1 + w); GELU(tanh) gate;
// scores × query_pre_attn_scalar^-1/2 (head size; dim / heads for the 27B layer counts); sliding-window layers
// (gemma2: even layers; gemma3: all but every sixth) see the last sliding_window keys only; gemma2 soft-caps
// scores (cap × tanh(s / cap)) and the final logits; gemma3 norms q and k per head and rotates its local layers
// with base 10000.
// qwen3moe (from HF's modeling_qwen3_moe, Qwen3MoeSparseMoeBlock with norm_topk_prob): qwen3's attention; the FFN
// is a mixture of experts: softmax of ffn_gate_inp · x over all expert_count experts, the expert_used_count most
// probable, their probabilities divided by their sum, each expert e's SwiGLU down_e(silu(gate_e x) * up_e x) (slices
// e of the 3-D ffn_{gate,up,down}_exps tensors) weighted by it and summed.

// gpt-oss (from OpenAI's gpt_oss reference torch model and llama.cpp's build_openai_moe): neox RoPE with YaRN
// (pair i's angle blends pos × base^(-2i/d) / factor and pos × base^(-2i/d) by a ramp between the correction dims
// of beta_fast 32 and beta_slow 1 turns over the original context; cos and sin × (1 + 0.1 ln factor)); q/k/v and
// output biases; each head's softmax has a sink: exp(sink - max) joins the denominator; even layers see the last
// sliding_window keys; the FFN's norm is post_attention_norm; a mixture of experts whose router and expert matrices
// have biases, choosing the expert_used_count largest logits, weighted by a softmax over those logits, each
// expert's activation min(g, 7) · sigmoid(1.702 · min(g, 7)) · (clamp(u, -7, 7) + 1).
//
// qwen35 (Qwen3.5 dense, from llama.cpp's qwen35 graph and HF's Qwen3_5 Gated DeltaNet): layer l is gated full
// attention when (l + 1) % full_attention_interval == 0: attn_q's rows are per head q then gate; q/k RMSNorm;
// neox RoPE of the leading rope.dimension_count dims; the attention output × sigmoid(gate). Every other layer is a
// Gated DeltaNet: qkv = attn_qkv · x through a causal depthwise conv of ssm.conv_kernel taps (the window carried
// from token to token), silu; q and k L2-normed per head (x / sqrt(Σx² + eps)); per value head h (reading key
// head h % group_count): S ← exp(softplus(alpha + dt_bias) · ssm_a) S; S += k (beta (v − Sᵀk))ᵀ with beta =
// sigmoid(ssm_beta · x); out = Sᵀq / sqrt(state_size); then RMSNorm(out) · ssm_norm · silu(attn_gate · x) and
// ssm_out. Both use post_attention_norm as the FFN's input norm.
// qwen35moe (llama.cpp's qwen35moe graph, HF's Qwen3_5Moe sparse block): qwen35's layers; the FFN is qwen3moe's
// mixture of experts plus a shared expert, sigmoid(ffn_gate_inp_shexp · x) × ffn_down_shexp(silu(ffn_gate_shexp · x)
// * ffn_up_shexp · x).
#include <cstdint>
#include <vector>

#include "gguf/gguf_file.h"

namespace hearth::test {

struct ReferenceOptions {
  bool skip_qkv_bias = false;                // compute as if the file had no q/k/v biases (shows a test would catch it)
  bool skip_qk_norm = false;                 // compute as if the file had no q/k norms
  bool skip_rope_freqs = false;              // compute as if the file had no rope_freqs.weight (or LongRoPE factors)
  bool skip_rope_mscale = false;             // phi3 LongRoPE: compute as if rope.scaling.attn_factor were 1
  bool swap_gate_up = false;                 // phi3: take the fused ffn_up's second half as the gate
  bool skip_window = false;                  // gemma: every layer global
  bool skip_softcap = false;                 // gemma2: no soft-capping
  bool skip_post_norms = false;              // gemma: no post-attention / post-FFN norms
  bool global_rope_base_everywhere = false;  // gemma3: local layers rotate with rope.freq_base too
  bool skip_expert_norm = false;             // qwen3moe: the chosen experts' probabilities as weights, unnormalised
  bool top1_experts = false;                 // qwen3moe: route each token to its most probable expert only
  bool skip_sinks = false;                   // gpt-oss: softmax without the sink logits
  bool skip_yarn = false;                    // gpt-oss: plain linear scaling instead of YaRN's blend and mscale
  bool skip_swiglu_clamp = false;            // gpt-oss: silu(g) · u for the experts
  bool skip_expert_biases = false;           // gpt-oss: no router or expert biases
  bool skip_attn_gate = false;               // qwen35: attention output not × sigmoid(gate)
  bool full_rope = false;                    // qwen35: rotate every head dim, not rope.dimension_count
  bool interleaved_key_heads = false;        // qwen35: value head h reads key head h / (v heads / k heads)
  bool tiled_key_heads = false;              // qwen3next: value head h reads key head h % k heads (qwen35's)
  bool ungrouped_fused = false;              // qwen3next: ssm_in split as whole q, k, v, z; ssm_ba as beta, alpha
  bool skip_conv = false;                    // qwen35: no convolution (the tap on the current token only)
  bool skip_shared_expert = false;           // qwen35moe: the routed experts only
  bool skip_shared_gate = false;             // qwen35moe: the shared expert not × sigmoid(its gate logit)
  bool skip_per_layer_embd = false;          // gemma4: no per-layer embedding branch
  bool skip_value_norm = false;              // gemma4: v not RMS-normed
  bool shared_kv_from_first = false;         // gemma4: shared sliding layers read layer 0's K/V instead
};

// gemma4 (reference_forward_gemma4.cpp, which says what it computes); reference_logits dispatches to it.
std::vector<std::vector<float>> gemma4_reference_logits(const GgufFile& file, const std::vector<int32_t>& tokens,
                                                        const ReferenceOptions& options);

// Logits after every token of `tokens`, in order: [tokens.size()][n_vocab].
std::vector<std::vector<float>> reference_logits(const GgufFile& file, const std::vector<int32_t>& tokens,
                                                 const ReferenceOptions& options = {});

}  // namespace hearth::test
