#include "model/synth.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/synth_internal.h"
#include "tensor/quant.h"
#include "util/thread_pool.h"

namespace hearth {
namespace {

using detail::TensorPlan;

constexpr size_t kBatchBytes = 4 << 20;  // rows generated per parallel batch, before they are written

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  return h;
}

// xoshiro256+: fast, and plenty for weights nobody will train on.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (uint64_t& word : s_) word = splitmix64(seed);
  }
  // Uniform in (0, 1]: never 0, so log() below stays finite.
  double uniform() { return static_cast<double>((next() >> 11) + 1) * 0x1p-53; }

 private:
  uint64_t next() {
    const uint64_t result = s_[0] + s_[3];
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = (s_[3] << 45) | (s_[3] >> 19);
    return result;
  }
  uint64_t s_[4];
};

// row[0, n) ~ N(0, sd^2) by Box-Muller; a pure function of (stream, row_index).
void gaussian_row(uint64_t stream, int64_t row_index, float sd, float* row, int64_t n) {
  uint64_t seed = stream ^ (static_cast<uint64_t>(row_index) * 0xd1b54a32d192ed03ull);
  Rng rng(splitmix64(seed));
  for (int64_t i = 0; i < n; i += 2) {
    const double radius = sd * std::sqrt(-2.0 * std::log(rng.uniform()));
    const double angle = 2.0 * std::numbers::pi * rng.uniform();
    row[i] = static_cast<float>(radius * std::cos(angle));
    if (i + 1 < n) row[i + 1] = static_cast<float>(radius * std::sin(angle));
  }
}

// qwen35, qwen35moe and qwen3next: the hybrid layers (Gated DeltaNet beside gated attention).
bool qwen35_family(const std::string& a) {
  return a == "qwen35" || a == "qwen35moe" || a == "qwen3next";
}

// llama-quantize's choice of the layers that get more bits in the _M mixes.
bool use_more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// The type of every matrix that is not an expert: the weight type, but Q8_0 in the MXFP4 mix (llama-quantize's
// MXFP4_MOE: MXFP4 experts, Q8_0 for the other matrices).
DType dense_type(const SynthConfig& c) {
  return c.weight_type == DType::MXFP4 ? DType::Q8_0 : c.weight_type;
}

// The router and experts (synth.h), in the weight type itself; Q4_K_M's more bits go to ffn_down_exps as to
// ffn_down. gpt-oss adds a bias to the router and to every expert matrix.
void plan_experts(const SynthConfig& c, const std::string& blk, bool more_bits, std::vector<TensorPlan>& plan) {
  const DType w = c.weight_type;
  const DType w_more = more_bits ? DType::Q6_K : w;
  const float router_sd = c.router_sd > 0 ? c.router_sd : c.weight_sd;
  plan.push_back({blk + "ffn_gate_inp.weight", {c.dim, c.n_expert}, DType::F32, 0.0f, router_sd});
  plan.push_back({blk + "ffn_gate_exps.weight", {c.dim, c.expert_ffn_dim, c.n_expert}, w, 0.0f, c.weight_sd});
  plan.push_back({blk + "ffn_up_exps.weight", {c.dim, c.expert_ffn_dim, c.n_expert}, w, 0.0f, c.weight_sd});
  plan.push_back({blk + "ffn_down_exps.weight", {c.expert_ffn_dim, c.dim, c.n_expert}, w_more, 0.0f, c.weight_sd});
  if (c.architecture != "gpt-oss") return;
  plan.push_back({blk + "ffn_gate_inp.bias", {c.n_expert}, DType::F32, 0.0f, router_sd});
  plan.push_back({blk + "ffn_gate_exps.bias", {c.expert_ffn_dim, c.n_expert}, DType::F32, 0.0f, c.bias_sd});
  plan.push_back({blk + "ffn_up_exps.bias", {c.expert_ffn_dim, c.n_expert}, DType::F32, 0.0f, c.bias_sd});
  plan.push_back({blk + "ffn_down_exps.bias", {c.dim, c.n_expert}, DType::F32, 0.0f, c.bias_sd});
}

// gpt-oss's layer: q/k/v and attention output with biases, a sink logit per head, post_attention_norm as the FFN's
// input norm, and the biased experts.
std::vector<TensorPlan> plan_gpt_oss_layer(const SynthConfig& c, int64_t i, bool more_bits) {
  const int64_t head_dim = synth_head_dim(c);
  const int64_t q_dim = c.n_heads * head_dim;
  const int64_t kv_dim = c.n_kv_heads * head_dim;
  const DType w = dense_type(c);
  const DType w_more = more_bits ? DType::Q6_K : w;
  const float sd = c.weight_sd;
  const std::string blk = "blk." + std::to_string(i) + ".";
  std::vector<TensorPlan> plan;
  plan.push_back({blk + "attn_norm.weight", {c.dim}, DType::F32, 1.0f, c.qk_norm_sd});
  plan.push_back({blk + "attn_q.weight", {c.dim, q_dim}, w, 0.0f, sd});
  plan.push_back({blk + "attn_k.weight", {c.dim, kv_dim}, w, 0.0f, sd});
  plan.push_back({blk + "attn_v.weight", {c.dim, kv_dim}, w_more, 0.0f, sd});
  plan.push_back({blk + "attn_q.bias", {q_dim}, DType::F32, 0.0f, c.bias_sd});
  plan.push_back({blk + "attn_k.bias", {kv_dim}, DType::F32, 0.0f, c.bias_sd});
  plan.push_back({blk + "attn_v.bias", {kv_dim}, DType::F32, 0.0f, c.bias_sd});
  plan.push_back({blk + "attn_output.weight", {q_dim, c.dim}, w, 0.0f, sd});
  plan.push_back({blk + "attn_output.bias", {c.dim}, DType::F32, 0.0f, c.bias_sd});
  plan.push_back({blk + "attn_sinks.weight", {c.n_heads}, DType::F32, 0.0f, 1.0f});
  plan.push_back({blk + "post_attention_norm.weight", {c.dim}, DType::F32, 1.0f, c.qk_norm_sd});
  plan_experts(c, blk, more_bits, plan);
  return plan;
}

// qwen35moe's shared expert (synth.h): its gate logit's weights in F32 (a vector: llama-quantize leaves it), its
// matrices in the dense type.
void plan_shared_expert(const SynthConfig& c, const std::string& blk, std::vector<TensorPlan>& plan) {
  const DType w = dense_type(c);
  plan.push_back({blk + "ffn_gate_inp_shexp.weight", {c.dim}, DType::F32, 0.0f, c.weight_sd});
  plan.push_back({blk + "ffn_gate_shexp.weight", {c.dim, c.ffn_dim}, w, 0.0f, c.weight_sd});
  plan.push_back({blk + "ffn_up_shexp.weight", {c.dim, c.ffn_dim}, w, 0.0f, c.weight_sd});
  plan.push_back({blk + "ffn_down_shexp.weight", {c.ffn_dim, c.dim}, w, 0.0f, c.weight_sd});
}

// qwen35's layer (synth.h): gated attention or a Gated DeltaNet layer, then the dense FFN (qwen35moe: the experts
// and the shared expert).
std::vector<TensorPlan> plan_qwen35_layer(const SynthConfig& c, int64_t i) {
  const int64_t head_dim = synth_head_dim(c);
  const int64_t q_dim = c.n_heads * head_dim;
  const int64_t kv_dim = c.n_kv_heads * head_dim;
  const DType w = dense_type(c);
  const float sd = c.weight_sd;
  const std::string blk = "blk." + std::to_string(i) + ".";
  std::vector<TensorPlan> plan;
  plan.push_back({blk + "attn_norm.weight", {c.dim}, DType::F32, 1.0f, c.qk_norm_sd});
  plan.push_back({blk + "post_attention_norm.weight", {c.dim}, DType::F32, 1.0f, c.qk_norm_sd});
  if ((i + 1) % c.full_attention_interval == 0) {
    plan.push_back({blk + "attn_q.weight", {c.dim, 2 * q_dim}, w, 0.0f, sd});
    plan.push_back({blk + "attn_k.weight", {c.dim, kv_dim}, w, 0.0f, sd});
    plan.push_back({blk + "attn_v.weight", {c.dim, kv_dim}, w, 0.0f, sd});
    plan.push_back({blk + "attn_q_norm.weight", {head_dim}, DType::F32, 1.0f, c.qk_norm_sd});
    plan.push_back({blk + "attn_k_norm.weight", {head_dim}, DType::F32, 1.0f, c.qk_norm_sd});
    plan.push_back({blk + "attn_output.weight", {q_dim, c.dim}, w, 0.0f, sd});
  } else {
    const SynthDeltaNet d = synth_delta_net(c);
    const int64_t key_dim = d.n_k_heads * d.d_state;
    const int64_t value_dim = d.n_v_heads * d.d_state;
    std::vector<float> a;
    for (int64_t h = 0; h < d.n_v_heads; ++h) a.push_back(-(0.5f + static_cast<float>(h) / d.n_v_heads));
    const bool fused = c.architecture == "qwen3next";  // ssm_in: q, k, v, z per key head; ssm_ba: beta, alpha
    if (fused) plan.push_back({blk + "ssm_in.weight", {c.dim, 2 * key_dim + 2 * value_dim}, w, 0.0f, sd});
    if (!fused) plan.push_back({blk + "attn_qkv.weight", {c.dim, 2 * key_dim + value_dim}, w, 0.0f, sd});
    if (!fused) plan.push_back({blk + "attn_gate.weight", {c.dim, value_dim}, w, 0.0f, sd});
    plan.push_back({blk + "ssm_conv1d.weight", {d.d_conv, 2 * key_dim + value_dim}, DType::F32, 0.0f, c.ssm_conv_sd});
    plan.push_back({blk + "ssm_dt.bias", {d.n_v_heads}, DType::F32, 0.0f, c.bias_sd});
    plan.push_back({blk + "ssm_a", {d.n_v_heads}, DType::F32, 0.0f, 0.0f, a});
    if (fused) plan.push_back({blk + "ssm_ba.weight", {c.dim, 2 * d.n_v_heads}, w, 0.0f, sd});
    if (!fused) plan.push_back({blk + "ssm_alpha.weight", {c.dim, d.n_v_heads}, w, 0.0f, sd});
    if (!fused) plan.push_back({blk + "ssm_beta.weight", {c.dim, d.n_v_heads}, w, 0.0f, sd});
    plan.push_back({blk + "ssm_norm.weight", {d.d_state}, DType::F32, 1.0f, c.qk_norm_sd});
    plan.push_back({blk + "ssm_out.weight", {value_dim, c.dim}, w, 0.0f, sd});
  }
  if (c.architecture == "qwen35moe" || c.architecture == "qwen3next") {
    plan_experts(c, blk, false, plan);
    plan_shared_expert(c, blk, plan);
    return plan;
  }
  plan.push_back({blk + "ffn_gate.weight", {c.dim, c.ffn_dim}, w, 0.0f, sd});
  plan.push_back({blk + "ffn_up.weight", {c.dim, c.ffn_dim}, w, 0.0f, sd});
  plan.push_back({blk + "ffn_down.weight", {c.ffn_dim, c.dim}, w, 0.0f, sd});
  return plan;
}

// A multi-token-prediction block (synth.h) at blk.i, as llama.cpp's converter keeps Qwen3.5/3-Next's mtp.* and its
// qwen35/qwen35moe/qwen3next loaders read them: a gated full-attention layer with the trunk's FFN (experts and
// shared expert on the MoE architectures), then nextn.eh_proj [2 dim, dim], nextn.enorm, nextn.hnorm and
// nextn.shared_head_norm [dim]. No embed_tokens or shared_head_head: Qwen's MTP shares the trunk's.
std::vector<TensorPlan> plan_qwen35_mtp_block(const SynthConfig& c, int64_t i) {
  SynthConfig attending = c;
  attending.full_attention_interval = i + 1;  // makes layer i a full-attention layer
  std::vector<TensorPlan> plan = plan_qwen35_layer(attending, i);
  const std::string blk = "blk." + std::to_string(i) + ".nextn.";
  plan.push_back({blk + "eh_proj.weight", {2 * c.dim, c.dim}, dense_type(c), 0.0f, c.weight_sd});
  for (const char* norm : {"enorm.weight", "hnorm.weight", "shared_head_norm.weight"}) {
    plan.push_back({blk + norm, {c.dim}, DType::F32, 1.0f, c.qk_norm_sd});
  }
  return plan;
}

// gemma4's shapes (synth.h): which layers slide, their head sizes and KV heads, which compute K/V.
struct Gemma4Shape {
  int64_t period, head_dim_swa, kv_heads_global;
  bool local(int64_t il) const { return (il + 1) % period != 0; }
};
Gemma4Shape gemma4_shape(const SynthConfig& c) {
  return {c.swa_period > 0 ? c.swa_period : 5, c.head_dim_swa > 0 ? c.head_dim_swa : synth_head_dim(c) / 2,
          c.n_kv_heads_global > 0 ? c.n_kv_heads_global : c.n_kv_heads};
}

std::vector<TensorPlan> plan_gemma4_layer(const SynthConfig& c, int64_t i) {
  const Gemma4Shape g = gemma4_shape(c);
  const int64_t head_dim = g.local(i) ? g.head_dim_swa : synth_head_dim(c);
  const int64_t q_dim = c.n_heads * head_dim;
  const int64_t kv_dim = (g.local(i) ? c.n_kv_heads : g.kv_heads_global) * head_dim;
  const bool has_kv = i < c.n_layers - c.shared_kv_layers;
  const DType w = dense_type(c);
  const float sd = c.weight_sd;
  const std::string blk = "blk." + std::to_string(i) + ".";
  std::vector<TensorPlan> plan;
  plan.push_back({blk + "attn_norm.weight", {c.dim}, DType::F32, 1.0f, 0.0f});
  plan.push_back({blk + "attn_q.weight", {c.dim, q_dim}, w, 0.0f, sd});
  // q and k norm weights of head_dim^-1/4: Gemma 4 does not scale its scores, so these give them the spread of a
  // 1/sqrt(head_dim)-scaled attention (weights of 1 make every softmax nearly one-hot, where the last bits of a
  // score decide which key wins).
  const float qk_mean = 1.0f / std::sqrt(std::sqrt(static_cast<float>(head_dim)));
  plan.push_back({blk + "attn_q_norm.weight", {head_dim}, DType::F32, qk_mean, c.qk_norm_sd * qk_mean});
  if (has_kv) {
    plan.push_back({blk + "attn_k.weight", {c.dim, kv_dim}, w, 0.0f, sd});
    plan.push_back({blk + "attn_v.weight", {c.dim, kv_dim}, w, 0.0f, sd});
    plan.push_back({blk + "attn_k_norm.weight", {head_dim}, DType::F32, qk_mean, c.qk_norm_sd * qk_mean});
  }
  plan.push_back({blk + "attn_output.weight", {q_dim, c.dim}, w, 0.0f, sd});
  plan.push_back({blk + "post_attention_norm.weight", {c.dim}, DType::F32, 1.0f, c.qk_norm_sd});
  plan.push_back({blk + "ffn_norm.weight", {c.dim}, DType::F32, 1.0f, 0.0f});
  plan.push_back({blk + "ffn_gate.weight", {c.dim, c.ffn_dim}, w, 0.0f, sd});
  plan.push_back({blk + "ffn_up.weight", {c.dim, c.ffn_dim}, w, 0.0f, sd});
  plan.push_back({blk + "ffn_down.weight", {c.ffn_dim, c.dim}, w, 0.0f, sd});
  plan.push_back({blk + "post_ffw_norm.weight", {c.dim}, DType::F32, 1.0f, c.qk_norm_sd});
  if (c.per_layer_dim > 0) {
    plan.push_back({blk + "inp_gate.weight", {c.dim, c.per_layer_dim}, w, 0.0f, sd});
    plan.push_back({blk + "proj.weight", {c.per_layer_dim, c.dim}, w, 0.0f, sd});
    plan.push_back({blk + "post_norm.weight", {c.dim}, DType::F32, 1.0f, c.qk_norm_sd});
  }
  if (c.layer_output_scale > 0) {
    plan.push_back({blk + "layer_output_scale.weight", {1}, DType::F32, 0.0f, 0.0f, {c.layer_output_scale}});
  }
  if (c.n_expert > 0) {  // 26B-A4B: experts beside the dense FFN, which is then a shared expert
    plan_experts(c, blk, false, plan);
    plan.push_back({blk + "ffn_gate_inp.scale", {c.dim}, DType::F32, 1.0f, c.qk_norm_sd});
    plan.push_back({blk + "ffn_down_exps.scale", {c.n_expert}, DType::F32, 1.0f, c.qk_norm_sd});
    for (const char* norm : {"pre_ffw_norm_2.weight", "post_ffw_norm_1.weight", "post_ffw_norm_2.weight"}) {
      plan.push_back({blk + norm, {c.dim}, DType::F32, 1.0f, c.qk_norm_sd});
    }
  }
  return plan;
}

// gemma4's model-wide tensors besides token_embd and output_norm: the global layers' rope_freqs and the per-layer
// embeddings' (synth.h).
void plan_gemma4_extras(const SynthConfig& c, int64_t n_vocab, std::vector<TensorPlan>& plan) {
  const int64_t pairs = synth_head_dim(c) / 2;
  const auto rotated = static_cast<int64_t>(static_cast<float>(synth_head_dim(c)) * c.rope_partial_global / 2);
  std::vector<float> freqs(static_cast<size_t>(pairs), 1e30f);
  std::fill(freqs.begin(), freqs.begin() + std::min(rotated, pairs), 1.0f);
  plan.push_back({"rope_freqs.weight", {pairs}, DType::F32, 0.0f, 0.0f, freqs});
  if (c.per_layer_dim == 0) return;
  const int64_t width = c.n_layers * c.per_layer_dim;
  plan.push_back({"per_layer_token_embd.weight", {width, n_vocab}, dense_type(c), 0.0f, c.weight_sd});
  plan.push_back({"per_layer_model_proj.weight", {c.dim, width}, dense_type(c), 0.0f, c.weight_sd});
  plan.push_back({"per_layer_proj_norm.weight", {c.per_layer_dim}, DType::F32, 1.0f, c.qk_norm_sd});
}

std::vector<TensorPlan> plan_layer(const SynthConfig& c, int64_t i) {
  if (c.architecture == "gemma4") return plan_gemma4_layer(c, i);
  const int64_t head_dim = synth_head_dim(c);
  const int64_t q_dim = c.n_heads * head_dim;
  const int64_t kv_dim = c.n_kv_heads * head_dim;
  const DType w = dense_type(c);
  const bool more_bits = c.q4_k_m && use_more_bits(i, c.n_layers);
  const DType w_more = more_bits ? DType::Q6_K : w;  // attn_v, ffn_down
  const float sd = c.weight_sd;
  if (c.architecture == "gpt-oss") return plan_gpt_oss_layer(c, i, more_bits);
  if (qwen35_family(c.architecture)) return plan_qwen35_layer(c, i);
  const std::string blk = "blk." + std::to_string(i) + ".";
  const bool phi3 = c.architecture == "phi3";
  const bool gemma = c.architecture == "gemma2" || c.architecture == "gemma3";
  std::vector<TensorPlan> plan;
  plan.push_back({blk + "attn_norm.weight", {c.dim}, DType::F32, 1.0f, 0.0f});
  if (phi3) {
    plan.push_back({blk + "attn_qkv.weight", {c.dim, c.dim + 2 * kv_dim}, w, 0.0f, sd});
  } else {
    plan.push_back({blk + "attn_q.weight", {c.dim, q_dim}, w, 0.0f, sd});
    plan.push_back({blk + "attn_k.weight", {c.dim, kv_dim}, w, 0.0f, sd});
    plan.push_back({blk + "attn_v.weight", {c.dim, kv_dim}, w_more, 0.0f, sd});
  }
  if (c.architecture == "qwen2") {
    plan.push_back({blk + "attn_q.bias", {c.dim}, DType::F32, 0.0f, c.bias_sd});
    plan.push_back({blk + "attn_k.bias", {kv_dim}, DType::F32, 0.0f, c.bias_sd});
    plan.push_back({blk + "attn_v.bias", {kv_dim}, DType::F32, 0.0f, c.bias_sd});
  }
  if (c.architecture == "qwen3" || c.architecture == "qwen3moe" || c.architecture == "gemma3") {
    plan.push_back({blk + "attn_q_norm.weight", {head_dim}, DType::F32, 1.0f, c.qk_norm_sd});
    plan.push_back({blk + "attn_k_norm.weight", {head_dim}, DType::F32, 1.0f, c.qk_norm_sd});
  }
  plan.push_back({blk + "attn_output.weight", {q_dim, c.dim}, w, 0.0f, sd});
  plan.push_back({blk + "ffn_norm.weight", {c.dim}, DType::F32, 1.0f, 0.0f});
  if (c.architecture == "qwen3moe") {
    plan_experts(c, blk, more_bits, plan);
    return plan;
  }
  if (phi3) {
    plan.push_back({blk + "ffn_up.weight", {c.dim, 2 * c.ffn_dim}, w, 0.0f, sd});  // gate rows, then up rows
  } else {
    plan.push_back({blk + "ffn_gate.weight", {c.dim, c.ffn_dim}, w, 0.0f, sd});
    plan.push_back({blk + "ffn_up.weight", {c.dim, c.ffn_dim}, w, 0.0f, sd});
  }
  plan.push_back({blk + "ffn_down.weight", {c.ffn_dim, c.dim}, w_more, 0.0f, sd});
  if (gemma) {
    plan.push_back({blk + "post_attention_norm.weight", {c.dim}, DType::F32, 1.0f, c.qk_norm_sd});
    plan.push_back({blk + "post_ffw_norm.weight", {c.dim}, DType::F32, 1.0f, c.qk_norm_sd});
  }
  return plan;
}

std::vector<TensorPlan> plan_tensors(const SynthConfig& c, int64_t n_vocab) {
  const DType w = dense_type(c);
  const bool tied = c.architecture == "gemma2" || c.architecture == "gemma3" || c.architecture == "gemma4";
  const DType w_output = c.q4_k_m ? DType::Q6_K : w;
  std::vector<TensorPlan> plan;
  plan.push_back({"token_embd.weight", {c.dim, n_vocab}, tied ? w_output : w, 0.0f, c.weight_sd});
  for (int64_t i = 0; i < c.n_layers; ++i) {
    for (TensorPlan& t : plan_layer(c, i)) plan.push_back(std::move(t));
  }
  for (int64_t i = c.n_layers; i < c.n_layers + c.nextn_layers; ++i) {
    for (TensorPlan& t : plan_qwen35_mtp_block(c, i)) plan.push_back(std::move(t));
  }
  plan.push_back({"output_norm.weight", {c.dim}, DType::F32, 1.0f, 0.0f});
  if (!tied) {
    plan.push_back({"output.weight", {c.dim, n_vocab}, w_output, 0.0f, c.weight_sd});
  }
  if (c.architecture == "gemma4") plan_gemma4_extras(c, n_vocab, plan);
  if (c.llama3_rope_freqs) {
    std::vector<float> freqs = llama3_rope_freqs(c);
    plan.push_back({"rope_freqs.weight", {static_cast<int64_t>(freqs.size())}, DType::F32, 0.0f, 0.0f, freqs});
  }
  if (c.phi3_longrope) {
    for (bool long_factors : {true, false}) {
      std::vector<float> f = phi3_rope_factors(c, long_factors);
      plan.push_back({long_factors ? "rope_factors_long.weight" : "rope_factors_short.weight",
                      {static_cast<int64_t>(f.size())}, DType::F32, 0.0f, 0.0f, f});
    }
  }
  return plan;
}

}  // namespace

namespace detail {

// Streams a tensor's rows in batches: the pool generates and quantizes a batch, then the batch is written.
GgufTensorFill make_fill(const TensorPlan& t, const SynthConfig& c, ThreadPool& pool) {
  return [&t, &c, &pool](GgufDataSink& sink) -> Result<void> {
    const int64_t row_len = t.shape[0];
    int64_t n_rows = 1;
    for (size_t d = 1; d < t.shape.size(); ++d) n_rows *= t.shape[d];
    const size_t rbytes = row_bytes(t.type, row_len);
    const int64_t batch_rows = std::clamp<int64_t>(static_cast<int64_t>(kBatchBytes / rbytes), 1, n_rows);
    std::vector<uint8_t> batch(static_cast<size_t>(batch_rows) * rbytes);
    std::vector<std::vector<float>> scratch(pool.num_threads(), std::vector<float>(row_len, t.mean));
    uint64_t stream_seed = c.seed ^ fnv1a(t.name);
    const uint64_t stream = splitmix64(stream_seed);
    for (int64_t first = 0; first < n_rows; first += batch_rows) {
      const int64_t count = std::min(batch_rows, n_rows - first);
      pool.run([&](int ith, int nth) {
        const Range range = split_range(count, ith, nth);
        float* row = scratch[ith].data();
        for (int64_t r = range.begin; r < range.end; ++r) {
          if (!t.values.empty()) {
            std::copy(t.values.begin(), t.values.end(), row);
          } else if (t.sd > 0) {
            gaussian_row(stream, first + r, t.sd, row, row_len);
            for (int64_t i = 0; i < row_len; ++i) row[i] += t.mean;
          }
          quantize_row(t.type, row, batch.data() + r * rbytes, row_len);
        }
      });
      HEARTH_TRY(sink.write({batch.data(), static_cast<size_t>(count) * rbytes}));
    }
    return {};
  };
}

// llama.cpp's LLAMA_FTYPE for a file whose weights are all `type` (norms stay F32 in every ftype), or its Q4_K_M
// or MXFP4_MOE mix.
uint32_t llama_file_type(DType type, bool q4_k_m) {
  if (q4_k_m) return 15;  // MOSTLY_Q4_K_M
  switch (type) {
    case DType::F32:
      return 0;
    case DType::F16:
      return 1;
    case DType::Q4_0:
      return 2;
    case DType::Q8_0:
      return 7;
    case DType::Q4_K:
      return 14;  // MOSTLY_Q4_K_S
    case DType::Q6_K:
      return 18;
    case DType::BF16:
      return 32;
    case DType::MXFP4:
      return 38;  // MOSTLY_MXFP4_MOE
    default:
      return 0;  // unreachable: validate_synth_config admits only the types above
  }
}

}  // namespace detail

namespace {

using detail::llama_file_type;
using detail::make_fill;

void add_gemma4_metadata(GgufWriter& w, const SynthConfig& c) {
  const std::string a = "gemma4.";
  const Gemma4Shape g = gemma4_shape(c);
  std::vector<GgufValue> pattern;
  for (int64_t il = 0; il < c.n_layers; ++il) pattern.push_back(gguf_bool(g.local(il)));
  w.add(a + "attention.sliding_window_pattern", gguf_array(GgufType::BOOL, std::move(pattern)));
  w.add(a + "attention.key_length_swa", gguf_u32(static_cast<uint32_t>(g.head_dim_swa)));
  w.add(a + "attention.value_length_swa", gguf_u32(static_cast<uint32_t>(g.head_dim_swa)));
  w.add(a + "rope.dimension_count_swa", gguf_u32(static_cast<uint32_t>(g.head_dim_swa)));
  w.add(a + "rope.freq_base_swa", gguf_f32(c.rope_freq_base_swa));
  w.add(a + "attention.shared_kv_layers", gguf_u32(static_cast<uint32_t>(c.shared_kv_layers)));
  w.add(a + "embedding_length_per_layer_input", gguf_u32(static_cast<uint32_t>(c.per_layer_dim)));
  w.add(a + "final_logit_softcapping", gguf_f32(c.final_softcap));
}

// The vocabulary's token list, types and scores with `extra` appended as control tokens of score 0; other keys as
// they are.
GgufValue with_extra_tokens(const std::string& key, const GgufValue& value, const std::vector<std::string>& extra) {
  const bool per_token =
      key == "tokenizer.ggml.tokens" || key == "tokenizer.ggml.token_type" || key == "tokenizer.ggml.scores";
  const auto* array = std::get_if<std::shared_ptr<GgufArray>>(&value.data);
  if (extra.empty() || !per_token || array == nullptr || !*array) return value;
  auto grown = std::make_shared<GgufArray>(**array);
  for (const std::string& text : extra) {
    if (key == "tokenizer.ggml.tokens") {
      grown->items.push_back(gguf_string(text));
    } else if (key == "tokenizer.ggml.token_type") {
      grown->items.push_back(gguf_int(grown->elem_type, 3));  // control
    } else {
      grown->items.push_back(gguf_float(grown->elem_type, 0.0));
    }
  }
  GgufValue out = value;
  out.data = std::move(grown);
  return out;
}

void add_metadata(GgufWriter& w, const SynthConfig& c, const GgufFile& vocab, int64_t n_vocab) {
  auto u32 = [](int64_t v) { return gguf_u32(static_cast<uint32_t>(v)); };
  const std::string& a = c.architecture;
  w.add("general.architecture", gguf_string(a));
  w.add("general.name", gguf_string(c.name));
  w.add("general.file_type", gguf_u32(llama_file_type(c.weight_type, c.q4_k_m)));
  if (dtype_info(c.weight_type).block_size > 1) w.add("general.quantization_version", gguf_u32(2));
  w.add(a + ".vocab_size", u32(n_vocab));
  w.add(a + ".context_length", u32(c.context_length));
  w.add(a + ".embedding_length", u32(c.dim));
  w.add(a + ".block_count", u32(c.n_layers + c.nextn_layers));  // llama.cpp's block_count counts the MTP blocks
  if (c.nextn_layers > 0) w.add(a + ".nextn_predict_layers", u32(c.nextn_layers));
  w.add(a + ".feed_forward_length", u32(c.ffn_dim));
  w.add(a + ".attention.head_count", u32(c.n_heads));
  if (a == "gemma4" && gemma4_shape(c).kv_heads_global != c.n_kv_heads) {
    std::vector<GgufValue> heads;
    for (int64_t il = 0; il < c.n_layers; ++il) {
      heads.push_back(u32(gemma4_shape(c).local(il) ? c.n_kv_heads : gemma4_shape(c).kv_heads_global));
    }
    w.add(a + ".attention.head_count_kv", gguf_array(GgufType::UINT32, std::move(heads)));
  } else {
    w.add(a + ".attention.head_count_kv", u32(c.n_kv_heads));
  }
  w.add(a + ".attention.layer_norm_rms_epsilon", gguf_f32(c.rms_eps));
  w.add(a + ".rope.freq_base", gguf_f32(c.rope_freq_base));
  w.add(a + ".rope.dimension_count", u32(qwen35_family(a) ? synth_delta_net(c).rope_dim : synth_head_dim(c)));
  if (qwen35_family(a)) {
    const SynthDeltaNet d = synth_delta_net(c);
    w.add(a + ".ssm.conv_kernel", u32(d.d_conv));
    w.add(a + ".ssm.state_size", u32(d.d_state));
    w.add(a + ".ssm.group_count", u32(d.n_k_heads));
    w.add(a + ".ssm.time_step_rank", u32(d.n_v_heads));
    w.add(a + ".ssm.inner_size", u32(d.n_v_heads * d.d_state));
    w.add(a + ".full_attention_interval", u32(c.full_attention_interval));
  }
  if (qwen35_family(a) && a != "qwen3next") {  // qwen3next rotates plain neox RoPE
    const SynthDeltaNet d = synth_delta_net(c);
    // Qwen3.5's interleaved M-RoPE sections ([11, 11, 10, 0] for its 32 rotated pairs), scaled to these pairs.
    const int64_t pairs = d.rope_dim / 2;
    std::vector<GgufValue> sections;
    for (int64_t s : {(pairs + 2) / 3, (pairs + 1) / 3, pairs / 3, int64_t{0}}) {
      sections.push_back(gguf_int(GgufType::INT32, s));
    }
    w.add(a + ".rope.dimension_sections", gguf_array(GgufType::INT32, std::move(sections)));
  }
  if (a == "phi3")
    w.add(a + ".attention.sliding_window", u32(c.sliding_window > 0 ? c.sliding_window : c.context_length));
  if (c.phi3_longrope) {
    w.add(a + ".rope.scaling.attn_factor", gguf_f32(phi3_rope_attn_factor(c)));
    w.add(a + ".rope.scaling.original_context_length", u32(c.rope_original_context));
  }
  const bool gemma = a == "gemma2" || a == "gemma3" || a == "gemma4";
  if (gemma) w.add(a + ".attention.sliding_window", u32(c.sliding_window > 0 ? c.sliding_window : 4096));
  if (a == "gemma4") add_gemma4_metadata(w, c);
  if (a == "gemma2") {
    w.add(a + ".attn_logit_softcapping", gguf_f32(c.attn_softcap));
    w.add(a + ".final_logit_softcapping", gguf_f32(c.final_softcap));
  }
  if (a == "qwen3" || a == "qwen3moe" || gemma || a == "gpt-oss" || qwen35_family(a)) {
    w.add(a + ".attention.key_length", u32(synth_head_dim(c)));
    w.add(a + ".attention.value_length", u32(synth_head_dim(c)));
  }
  if (a == "gpt-oss") {
    w.add(a + ".attention.sliding_window", u32(c.sliding_window > 0 ? c.sliding_window : 128));
    w.add(a + ".rope.scaling.type", gguf_string("yarn"));
    w.add(a + ".rope.scaling.factor", gguf_f32(c.rope_factor));
    w.add(a + ".rope.scaling.original_context_length", u32(c.rope_original_context));
  }
  if (a == "qwen3moe" || a == "qwen35moe" || a == "qwen3next" || a == "gpt-oss" || (a == "gemma4" && c.n_expert > 0)) {
    w.add(a + ".expert_count", u32(c.n_expert));
    w.add(a + ".expert_used_count", u32(c.n_expert_used));
    w.add(a + ".expert_feed_forward_length", u32(c.expert_ffn_dim));
  }
  if (a == "qwen35moe" || a == "qwen3next") w.add(a + ".expert_shared_feed_forward_length", u32(c.ffn_dim));
  if (c.pooling_type >= 0) w.add(a + ".pooling_type", u32(c.pooling_type));
  if (c.add_eos) w.add("tokenizer.ggml.add_eos_token", gguf_bool(*c.add_eos));
  for (const auto& [key, value] : vocab.metadata()) {
    if (c.add_eos && key == "tokenizer.ggml.add_eos_token") continue;
    if (key.starts_with("tokenizer.") && (c.chat_template.empty() || key != "tokenizer.chat_template")) {
      w.add(key, with_extra_tokens(key, value, c.extra_control_tokens));
    }
  }
  if (!c.chat_template.empty()) w.add("tokenizer.chat_template", gguf_string(c.chat_template));
}

}  // namespace

int64_t synth_head_dim(const SynthConfig& c) {
  return c.head_dim > 0 ? c.head_dim : c.dim / c.n_heads;
}

SynthDeltaNet synth_delta_net(const SynthConfig& c) {
  const int64_t head_dim = synth_head_dim(c);
  return {c.ssm_d_conv, c.ssm_d_state > 0 ? c.ssm_d_state : head_dim,
          c.ssm_n_k_heads > 0 ? c.ssm_n_k_heads : c.n_kv_heads, c.ssm_n_v_heads > 0 ? c.ssm_n_v_heads : c.n_heads,
          c.rope_dim > 0 ? c.rope_dim : std::max<int64_t>(2, head_dim / 4 / 2 * 2)};
}

std::vector<float> llama3_rope_freqs(const SynthConfig& c) {
  const int64_t head_dim = synth_head_dim(c);
  const double low_wavelen = static_cast<double>(c.rope_original_context) / c.rope_low_freq_factor;
  const double high_wavelen = static_cast<double>(c.rope_original_context) / c.rope_high_freq_factor;
  std::vector<float> freqs;
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const double theta = std::pow(static_cast<double>(c.rope_freq_base), -2.0 * i / head_dim);
    const double wavelen = 2.0 * std::numbers::pi / theta;
    double f = 1.0;
    if (wavelen > low_wavelen) {
      f = c.rope_factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth = (c.rope_original_context / wavelen - c.rope_low_freq_factor) /
                            (c.rope_high_freq_factor - c.rope_low_freq_factor);
      f = 1.0 / ((1.0 - smooth) / c.rope_factor + smooth);
    }
    freqs.push_back(static_cast<float>(f));
  }
  return freqs;
}

std::vector<float> phi3_rope_factors(const SynthConfig& c, bool long_factors) {
  const int64_t n = synth_head_dim(c) / 2;
  const double top = long_factors ? c.rope_factor - 1.0 : 0.25;
  std::vector<float> f;
  for (int64_t i = 0; i < n; ++i) f.push_back(static_cast<float>(1.0 + top * i / std::max<int64_t>(n - 1, 1)));
  return f;
}

float phi3_rope_attn_factor(const SynthConfig& c) {
  const double scale = static_cast<double>(c.context_length) / c.rope_original_context;
  if (scale <= 1.0) return 1.0f;
  return static_cast<float>(std::sqrt(1.0 + std::log(scale) / std::log(static_cast<double>(c.rope_original_context))));
}

namespace {

// qwen3moe needs 1 <= n_expert_used <= n_expert <= 512 (llama.cpp's LLAMA_MAX_EXPERTS) and an expert width; every
// other architecture is dense and must leave them 0.
Result<void> validate_experts(const SynthConfig& c) {
  // gemma4: dense, or 26B-A4B's experts
  const bool moe = c.architecture == "qwen3moe" || c.architecture == "qwen35moe" || c.architecture == "qwen3next" ||
                   c.architecture == "gpt-oss" || (c.architecture == "gemma4" && c.n_expert > 0);
  if (!moe) {
    if (c.n_expert != 0 || c.n_expert_used != 0 || c.expert_ffn_dim != 0) {
      return make_error(
          "synthetic model: experts are for architectures qwen3moe, qwen35moe, qwen3next, gpt-oss and gemma4 only");
    }
    return {};
  }
  if (c.n_expert < 1 || c.n_expert > 512 || c.n_expert_used < 1 || c.n_expert_used > c.n_expert) {
    return make_error("synthetic model: {} needs 1 <= experts used ({}) <= experts ({}) <= 512", c.architecture,
                      c.n_expert_used, c.n_expert);
  }
  if (c.expert_ffn_dim < 1 || c.expert_ffn_dim > (int64_t{1} << 22)) {
    return make_error("synthetic model: expert_ffn_dim is {}, expected 1 to {}", c.expert_ffn_dim, int64_t{1} << 22);
  }
  if (!(c.router_sd >= 0)) return make_error("synthetic model: router_sd must not be negative");
  return {};
}

// gemma4's shapes: llama.cpp's reuse needs at least two K/V layers, the last one global and the one before it
// sliding, when shared layers of that kind read them.
Result<void> validate_gemma4(const SynthConfig& c) {
  const bool any = c.head_dim_swa != 0 || c.n_kv_heads_global != 0 || c.swa_period != 0 || c.shared_kv_layers != 0 ||
                   c.per_layer_dim != 0 || c.layer_output_scale != 0;
  if (c.architecture != "gemma4") {
    if (any) return make_error("synthetic model: head_dim_swa, shared_kv_layers, per_layer_dim ... are gemma4's only");
    return {};
  }
  const Gemma4Shape g = gemma4_shape(c);
  if (g.period < 1 || g.head_dim_swa < 2 || g.head_dim_swa % 2 != 0 || g.kv_heads_global < 1 ||
      c.n_heads % g.kv_heads_global != 0 || c.shared_kv_layers < 0 || c.per_layer_dim < 0 || c.per_layer_dim > 65536 ||
      !(c.rope_partial_global > 0 && c.rope_partial_global <= 1) || !(c.rope_freq_base_swa > 0) ||
      !(c.layer_output_scale >= 0)) {
    return make_error(
        "synthetic model: gemma4 needs swa_period >= 1, an even head_dim_swa, global KV heads dividing "
        "the heads, shared_kv_layers and per_layer_dim >= 0, 0 < rope_partial_global <= 1");
  }
  const int64_t n_kv = c.n_layers - c.shared_kv_layers;
  if (c.shared_kv_layers > 0 && (n_kv < 2 || g.local(n_kv - 1) || !g.local(n_kv - 2))) {
    return make_error(
        "synthetic model: gemma4 with {} shared-KV layers needs its last K/V layer ({}) global and the "
        "one before it sliding",
        c.shared_kv_layers, n_kv - 1);
  }
  if (c.per_layer_dim % dtype_info(dense_type(c)).block_size != 0) {
    return make_error("synthetic model: per_layer_dim {} is not a multiple of {}'s block", c.per_layer_dim,
                      dtype_name(dense_type(c)));
  }
  return {};
}

}  // namespace

Result<void> validate_synth_config(const SynthConfig& c) {
  constexpr int64_t kMax = int64_t{1} << 30;
  auto bad = [](std::string_view what) { return make_error("synthetic model: {}", what); };
  if (c.out_path.empty()) return bad("no output path");
  const std::string& a = c.architecture;
  if (c.vocab_from.empty() && !synth_is_encoder(a)) return bad("no vocabulary file to copy the tokenizer from");
  if (a != "llama" && a != "qwen2" && a != "qwen3" && a != "qwen3moe" && a != "phi3" && a != "gemma2" &&
      a != "gemma3" && a != "gemma4" && a != "gpt-oss" && !qwen35_family(a) && !synth_is_encoder(a)) {
    return bad(fmt::format(
        "architecture '{}' is not one the generator writes (llama, qwen2, qwen3, qwen3moe, phi3, gemma2, gemma3, "
        "gemma4, gpt-oss, qwen35, qwen35moe, qwen3next, bert, nomic-bert)",
        a));
  }
  if (synth_is_encoder(a) && (c.n_kv_heads != c.n_heads || c.pooling_type < 1 || c.pooling_type > 2)) {
    return bad(fmt::format("{} needs n_kv_heads = n_heads ({} vs {}) and pooling_type 1 (mean) or 2 (cls), got {}", a,
                           c.n_kv_heads, c.n_heads, c.pooling_type));
  }
  HEARTH_TRY(validate_gemma4(c));
  if (qwen35_family(a)) {
    const SynthDeltaNet d = synth_delta_net(c);
    if (c.full_attention_interval < 1 || d.d_conv < 2 || d.d_conv > 64 || d.d_state < 1 || d.d_state > 1024 ||
        d.n_k_heads < 1 || d.n_v_heads % d.n_k_heads != 0 || d.rope_dim % 2 != 0 || d.rope_dim > synth_head_dim(c)) {
      return bad(fmt::format("qwen35 needs full_attention_interval >= 1, 2 <= conv taps <= 64, 1 <= state size <= "
                             "1024, value heads a multiple of key heads, an even rope_dim <= the head size (got {}, {}, "
                             "{}, {} value / {} key heads, rope_dim {})",
                             c.full_attention_interval, d.d_conv, d.d_state, d.n_v_heads, d.n_k_heads, d.rope_dim));
    }
    const int64_t block = dtype_info(c.weight_type).block_size;
    if (c.dim % block != 0) return bad("qwen35's DeltaNet matrices need dim a multiple of the weight type's block");
  }
  if (c.nextn_layers < 0 || c.nextn_layers > 16 || (c.nextn_layers > 0 && !qwen35_family(a))) {
    return bad(
        fmt::format("nextn_layers {}: multi-token-prediction blocks (0 to 16) are written for qwen35, qwen35moe "
                    "and qwen3next only",
                    c.nextn_layers));
  }
  if (a == "gpt-oss" && (!(c.rope_factor >= 1) || c.rope_original_context <= 0)) {
    return bad("gpt-oss's YaRN needs rope_factor >= 1 and an original context > 0");
  }
  HEARTH_TRY(validate_experts(c));
  if (!(c.attn_softcap > 0) || !(c.final_softcap > 0)) return bad("soft-capping values must be positive");
  if (c.llama3_rope_freqs && a != "llama") return bad("Llama 3 rope_freqs are for architecture llama only");
  if (c.llama3_rope_freqs && (!(c.rope_factor >= 1) || !(c.rope_high_freq_factor > c.rope_low_freq_factor) ||
                              !(c.rope_low_freq_factor > 0) || c.rope_original_context <= 0)) {
    return bad("Llama 3 RoPE scaling needs factor >= 1, 0 < low_freq_factor < high_freq_factor, original context > 0");
  }
  if (c.phi3_longrope && a != "phi3") return bad("LongRoPE factors are for architecture phi3 only");
  if (c.phi3_longrope && (!(c.rope_factor >= 1) || c.rope_original_context <= 1)) {
    return bad("LongRoPE needs factor >= 1 and an original context > 1");
  }
  if (c.sliding_window < 0) return bad("sliding_window must not be negative");
  if (c.pooling_type > 4) return bad(fmt::format("pooling_type {} is not one of 0 to 4", c.pooling_type));
  for (auto [name, v] : {std::pair{"dim", c.dim},
                         {"n_layers", c.n_layers},
                         {"n_heads", c.n_heads},
                         {"n_kv_heads", c.n_kv_heads},
                         {"ffn_dim", c.ffn_dim},
                         {"context_length", c.context_length}}) {
    if (v <= 0 || v > kMax) return bad(fmt::format("{} is {}, expected 1 to {}", name, v, kMax));
  }
  const bool writes_key_length = a == "qwen3" || a == "qwen3moe" || a == "gemma2" || a == "gemma3" || a == "gemma4" ||
                                 a == "gpt-oss" || qwen35_family(a);
  if (c.head_dim < 0 || (c.head_dim > 0 && !writes_key_length)) {
    return bad(fmt::format("head_dim {} is for qwen3, qwen3moe, gemma and gpt-oss only (0: dim / n_heads)", c.head_dim));
  }
  if (c.head_dim == 0 && c.dim % c.n_heads != 0) {
    return bad(fmt::format("dim {} is not divisible by n_heads {}", c.dim, c.n_heads));
  }
  const int64_t head_dim = synth_head_dim(c);
  if (head_dim % 2 != 0) return bad(fmt::format("head dim {} is odd; RoPE needs pairs", head_dim));
  if (c.n_heads % c.n_kv_heads != 0) {
    return bad(fmt::format("n_heads {} is not a multiple of n_kv_heads {}", c.n_heads, c.n_kv_heads));
  }
  if (!quant_row_supported(c.weight_type)) {
    return bad(fmt::format("weight type {} has no quantizer (use F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K or MXFP4)",
                           dtype_name(c.weight_type)));
  }
  if (c.weight_type == DType::MXFP4 && a != "qwen3moe" && a != "qwen35moe" && a != "qwen3next" && a != "gpt-oss") {
    return bad(fmt::format(
        "the MXFP4 mix quantizes the experts, and {} has none (use qwen3moe, qwen35moe, qwen3next or gpt-oss)", a));
  }
  if (c.q4_k_m && c.weight_type != DType::Q4_K) return bad("the Q4_K_M mix needs weight type Q4_K");
  const int64_t block = dtype_info(c.weight_type).block_size;
  const bool moe = a == "qwen3moe" || a == "gpt-oss";
  const int64_t ffn = moe ? c.expert_ffn_dim : c.ffn_dim;  // qwen35moe: ffn_dim is the shared expert's
  if (c.dim % block != 0 || ffn % block != 0 || (c.n_heads * head_dim) % block != 0) {
    return bad(fmt::format("{} rows need multiples of {} elements, but dim is {}, {} {} and n_heads × head_dim {}",
                           dtype_name(c.weight_type), block, c.dim, moe ? "expert_ffn_dim" : "ffn_dim", ffn,
                           c.n_heads * head_dim));
  }
  if ((a == "qwen35moe" || a == "qwen3next") && c.expert_ffn_dim % block != 0) {
    return bad(fmt::format("{} rows need multiples of {} elements, but expert_ffn_dim is {}", dtype_name(c.weight_type),
                           block, c.expert_ffn_dim));
  }
  if (!(c.weight_sd > 0) || !(c.rms_eps > 0) || !(c.rope_freq_base > 0)) {
    return bad("weight_sd, rms_eps and rope_freq_base must be positive");
  }
  if (!(c.bias_sd >= 0) || !(c.qk_norm_sd >= 0)) return bad("bias_sd and qk_norm_sd must not be negative");
  return {};
}

Result<void> write_synthetic_model(const SynthConfig& c) {
  HEARTH_TRY(validate_synth_config(c));
  if (synth_is_encoder(c.architecture)) return detail::write_synthetic_encoder(c);
  auto vocab = GgufFile::open(c.vocab_from);
  if (!vocab) return make_error("synthetic model: vocabulary: {}", vocab.error().message);
  auto tokens = vocab->get_string_array("tokenizer.ggml.tokens");
  if (!tokens) return make_error("synthetic model: vocabulary: {}", tokens.error().message);
  if (tokens->empty()) return make_error("synthetic model: {} has no tokenizer.ggml.tokens", c.vocab_from);
  for (const std::string& text : c.extra_control_tokens) {
    if (text.empty() || std::find(tokens->begin(), tokens->end(), text) != tokens->end()) {
      return make_error("synthetic model: extra token '{}' is empty or already in {}", text, c.vocab_from);
    }
  }
  const auto n_vocab = static_cast<int64_t>(tokens->size() + c.extra_control_tokens.size());

  GgufWriter writer;
  add_metadata(writer, c, *vocab, n_vocab);
  ThreadPool pool(c.num_threads);
  const std::vector<TensorPlan> plan = plan_tensors(c, n_vocab);
  for (const TensorPlan& t : plan) writer.add_tensor({t.name, t.type, t.shape, make_fill(t, c, pool)});
  return writer.write_file(c.out_path);
}

}  // namespace hearth
