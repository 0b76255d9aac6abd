#include "reference_forward.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "tensor/dtype.h"
#include "tensor/quant.h"

namespace hearth::test {
namespace {

using Vec = std::vector<double>;

struct Hparams {
  std::string arch;
  int64_t dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, ffn = 0, n_vocab = 0;
  double eps = 1e-5, rope_base = 10000.0, rope_scale = 1.0;
  int64_t n_ctx = 0, rope_original_context = 0;  // phi3 LongRoPE: long factors when n_ctx exceeds the original
  double rope_mscale = 1.0;                       // phi3 LongRoPE: cos and sin × rope.scaling.attn_factor
  bool gemma = false, gemma2 = false;
  int64_t window = 0;  // gemma's sliding window
  double attn_cap = 0, final_cap = 0, query_scale = 0;
  int64_t n_expert = 0, n_expert_used = 0;  // qwen3moe, gpt-oss
  bool gpt_oss = false;
  bool yarn = false;  // gpt-oss: rope.scaling.type yarn
  // qwen35: the DeltaNet shape, which layers attend, the rotated dims.
  bool qwen35 = false;
  bool qwen3next = false;  // qwen35's layers with fused ssm_in / ssm_ba and key heads grouped (model/config.h)
  int64_t d_conv = 0, d_state = 0, n_k_heads = 0, n_v_heads = 0, full_attention_interval = 0, rope_dim = 0;
};

// Gemma 2 alternates local and global layers starting with a local one; Gemma 3 makes every sixth layer global.
// Phi-3 (llama.cpp's build_phi3) windows every layer when the file names a window.
bool is_sliding_layer(const Hparams& hp, int64_t layer) {
  if (hp.arch == "phi3") return hp.window > 0;
  if (hp.gpt_oss) return layer % 2 == 0;
  if (!hp.gemma) return false;
  return hp.gemma2 ? layer % 2 == 0 : layer % 6 != 5;
}

int64_t meta_int(const GgufFile& f, const std::string& key, int64_t fallback) {
  auto v = f.get_uint(key);
  return v.ok() && v->has_value() ? static_cast<int64_t>(**v) : fallback;
}

double meta_float(const GgufFile& f, const std::string& key, double fallback) {
  auto v = f.get_float(key);
  return v.ok() && v->has_value() ? **v : fallback;
}

Hparams read_hparams(const GgufFile& f) {
  Hparams h;
  h.arch = **f.get_string("general.architecture");
  const std::string p = h.arch + ".";
  h.dim = meta_int(f, p + "embedding_length", 0);
  h.n_layers = meta_int(f, p + "block_count", 0);
  h.n_heads = meta_int(f, p + "attention.head_count", 0);
  h.n_kv_heads = meta_int(f, p + "attention.head_count_kv", h.n_heads);
  h.head_dim = meta_int(f, p + "attention.key_length", h.dim / h.n_heads);
  h.ffn = meta_int(f, p + "feed_forward_length", 0);
  h.eps = meta_float(f, p + "attention.layer_norm_rms_epsilon", 1e-5);
  h.rope_base = meta_float(f, p + "rope.freq_base", 10000.0);
  h.rope_scale = 1.0 / meta_float(f, p + "rope.scaling.factor", 1.0);
  h.n_ctx = meta_int(f, p + "context_length", 0);
  h.rope_original_context = meta_int(f, p + "rope.scaling.original_context_length", h.n_ctx);
  h.rope_mscale = meta_float(f, p + "rope.scaling.attn_factor", 1.0);
  h.n_vocab = f.find_tensor("token_embd.weight")->ne[1];
  h.gemma = h.arch == "gemma2" || h.arch == "gemma3";
  h.gemma2 = h.arch == "gemma2";
  h.window = meta_int(f, p + "attention.sliding_window", h.gemma ? 4096 : 0);
  h.attn_cap = h.gemma2 ? meta_float(f, p + "attn_logit_softcapping", 50.0) : 0.0;
  h.final_cap = h.gemma2 ? meta_float(f, p + "final_logit_softcapping", 30.0) : 0.0;
  const bool big = h.n_layers == (h.gemma2 ? 46 : 62);  // 27B: query_pre_attn_scalar = dim / heads
  h.query_scale = 1.0 / std::sqrt(static_cast<double>(h.gemma && big ? h.dim / h.n_heads : h.head_dim));
  h.n_expert = meta_int(f, p + "expert_count", 0);
  h.n_expert_used = meta_int(f, p + "expert_used_count", 0);
  h.gpt_oss = h.arch == "gpt-oss";
  auto type = f.get_string(p + "rope.scaling.type");
  h.yarn = type.ok() && type->has_value() && **type == "yarn";
  h.qwen35 = h.arch == "qwen35" || h.arch == "qwen35moe" || h.arch == "qwen3next";
  h.qwen3next = h.arch == "qwen3next";
  h.d_conv = meta_int(f, p + "ssm.conv_kernel", 0);
  h.d_state = meta_int(f, p + "ssm.state_size", 0);
  h.n_k_heads = meta_int(f, p + "ssm.group_count", 0);
  h.n_v_heads = meta_int(f, p + "ssm.time_step_rank", 0);
  h.full_attention_interval = meta_int(f, p + "full_attention_interval", 4);
  h.rope_dim = meta_int(f, p + "rope.dimension_count", h.head_dim);
  return h;
}

// A tensor as f32, row-major [ne[1]][ne[0]]; empty when the file does not have it.
std::vector<float> load(const GgufFile& f, const std::string& name) {
  const GgufTensor* t = f.find_tensor(name);
  if (t == nullptr) return {};
  const int64_t cols = t->ne[0];
  const int64_t rows = t->num_elements() / cols;
  std::vector<float> out(static_cast<size_t>(t->num_elements()));
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(t->type, t->data + r * row_bytes(t->type, cols), out.data() + r * cols, cols);
  }
  return out;
}

// y = W x + b, W row-major [n_out][n_in]; b may be empty.
Vec matvec(const std::vector<float>& w, const std::vector<float>& b, const Vec& x) {
  const size_t n_in = x.size();
  const size_t n_out = w.size() / n_in;
  Vec y(n_out, 0.0);
  for (size_t r = 0; r < n_out; ++r) {
    double sum = b.empty() ? 0.0 : b[r];
    for (size_t c = 0; c < n_in; ++c) sum += static_cast<double>(w[r * n_in + c]) * x[c];
    y[r] = sum;
  }
  return y;
}

// x / sqrt(mean(x^2) + eps) * w, on x[offset, offset + n).
void rms_norm_in_place(Vec& x, size_t offset, size_t n, const std::vector<float>& w, double eps) {
  double ss = 0.0;
  for (size_t i = 0; i < n; ++i) ss += x[offset + i] * x[offset + i];
  const double scale = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (size_t i = 0; i < n; ++i) x[offset + i] = x[offset + i] * scale * w[i];
}

// Rotates each head of `x` by position `pos`: pairs (2i, 2i+1) for llama, (i, i + d/2) for neox (qwen, phi3).
// Pair i's frequency is scaled by `scale` and divided by freqs[i] (when freqs is not empty).
struct RopeParams {
  double base, scale;
  double mscale = 1.0;  // LongRoPE: both rotated values × mscale
  // YaRN: the ramp's correction dims (the pair index range where the angle goes from original to interpolated).
  bool yarn = false;
  double low = 0, high = 0;
};
void rope(Vec& x, int64_t n_heads, int64_t head_dim, int64_t pos, RopeParams rp, const std::vector<float>& freqs,
          bool neox) {
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t i = 0; i < head_dim / 2; ++i) {
      const double divisor = freqs.empty() ? 1.0 : freqs[i];
      double angle =
          static_cast<double>(pos) * rp.scale * std::pow(rp.base, -2.0 * static_cast<double>(i) / head_dim) / divisor;
      if (rp.yarn) {
        const double original = angle / rp.scale;
        const double ramp = 1.0 - std::clamp((static_cast<double>(i) - rp.low) / std::max(0.001, rp.high - rp.low),
                                             0.0, 1.0);
        angle = angle * (1.0 - ramp) + original * ramp;
      }
      const size_t a = h * head_dim + (neox ? i : 2 * i);
      const size_t b = h * head_dim + (neox ? i + head_dim / 2 : 2 * i + 1);
      const double x0 = x[a], x1 = x[b];
      x[a] = (x0 * std::cos(angle) - x1 * std::sin(angle)) * rp.mscale;
      x[b] = (x0 * std::sin(angle) + x1 * std::cos(angle)) * rp.mscale;
    }
  }
}

// Causal softmax attention of one query row against the cached keys from `first` on; GQA: query head h reads KV
// head h / (n_heads / n_kv_heads). Scores are scaled by `scale`, then soft-capped when cap > 0.
Vec attention(const Hparams& hp, const Vec& q, const std::vector<Vec>& keys, const std::vector<Vec>& values,
              size_t first, double scale, double cap, const std::vector<float>& sinks) {
  const int64_t group = hp.n_heads / hp.n_kv_heads;
  Vec out(hp.n_heads * hp.head_dim, 0.0);
  for (int64_t h = 0; h < hp.n_heads; ++h) {
    const int64_t kvh = h / group;
    std::vector<double> scores(keys.size(), 0.0);
    double max_score = -1e300;
    for (size_t t = first; t < keys.size(); ++t) {
      double s = 0.0;
      for (int64_t i = 0; i < hp.head_dim; ++i) s += q[h * hp.head_dim + i] * keys[t][kvh * hp.head_dim + i];
      scores[t] = s * scale;
      if (cap > 0) scores[t] = cap * std::tanh(scores[t] / cap);
      max_score = std::max(max_score, scores[t]);
    }
    if (!sinks.empty()) max_score = std::max(max_score, static_cast<double>(sinks[h]));
    double total = 0.0;
    for (size_t t = first; t < keys.size(); ++t) total += (scores[t] = std::exp(scores[t] - max_score));
    if (!sinks.empty()) total += std::exp(sinks[h] - max_score);
    for (size_t t = first; t < keys.size(); ++t) {
      for (int64_t i = 0; i < hp.head_dim; ++i) {
        out[h * hp.head_dim + i] += scores[t] / total * values[t][kvh * hp.head_dim + i];
      }
    }
  }
  return out;
}

double silu(double x) {
  return x / (1.0 + std::exp(-x));
}

// Rows [first, first + n) of a row-major matrix of `cols` columns, as a matrix of its own.
std::vector<float> rows_of(const std::vector<float>& w, size_t cols, size_t first, size_t n) {
  return {w.begin() + static_cast<std::ptrdiff_t>(first * cols),
          w.begin() + static_cast<std::ptrdiff_t>((first + n) * cols)};
}

double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
}

// phi3's fused tensors as the separate ones of the llama layout: attn_qkv rows are q, k, v; ffn_up rows are gate,
// then up (or up, then gate with `swap`).
void split_fused(std::map<std::string, std::vector<float>>& w, const Hparams& hp, bool swap) {
  for (int64_t l = 0; l < hp.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    if (w.contains(p + "attn_qkv.weight")) {
      const auto& qkv = w[p + "attn_qkv.weight"];
      const size_t q = hp.n_heads * hp.head_dim * hp.dim, kv = hp.n_kv_heads * hp.head_dim * hp.dim;
      w[p + "attn_q.weight"].assign(qkv.begin(), qkv.begin() + q);
      w[p + "attn_k.weight"].assign(qkv.begin() + q, qkv.begin() + q + kv);
      w[p + "attn_v.weight"].assign(qkv.begin() + q + kv, qkv.begin() + q + 2 * kv);
    }
    if (!w.contains(p + "ffn_gate.weight")) {
      const std::vector<float> gate_up = w[p + "ffn_up.weight"];
      const size_t half = gate_up.size() / 2;
      w[p + (swap ? "ffn_up.weight" : "ffn_gate.weight")].assign(gate_up.begin(), gate_up.begin() + half);
      w[p + (swap ? "ffn_gate.weight" : "ffn_up.weight")].assign(gate_up.begin() + half, gate_up.end());
    }
  }
}

}  // namespace

namespace {

using Weights = std::map<std::string, std::vector<float>>;

struct LayerCache {
  std::vector<Vec> keys, values;
};

// gpt-oss's mixture of experts of the normed x (reference_forward.h).
Vec gpt_oss_moe_ffn(const Hparams& hp, Weights& w, const std::string& p, const ReferenceOptions& options,
                    const Vec& xn) {
  const bool biases = !options.skip_expert_biases;
  auto bias = [&](const std::string& name) { return biases ? w[p + name] : std::vector<float>{}; };
  const Vec logits = matvec(w[p + "ffn_gate_inp.weight"], bias("ffn_gate_inp.bias"), xn);
  std::vector<size_t> order(logits.size());
  for (size_t e = 0; e < order.size(); ++e) order[e] = e;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return logits[a] > logits[b]; });
  order.resize(hp.n_expert_used);
  double max_logit = logits[order[0]], total = 0.0;
  for (size_t e : order) total += std::exp(logits[e] - max_logit);
  const auto& gate = w[p + "ffn_gate_exps.weight"];
  const auto& up = w[p + "ffn_up_exps.weight"];
  const auto& down = w[p + "ffn_down_exps.weight"];
  const size_t ff = gate.size() / hp.n_expert / hp.dim;
  auto slice = [&](const std::string& name, size_t e, size_t n) {
    return biases ? rows_of(w[p + name], n, e, 1) : std::vector<float>{};
  };
  Vec out(hp.dim, 0.0);
  for (size_t e : order) {
    Vec g = matvec(rows_of(gate, hp.dim, e * ff, ff), slice("ffn_gate_exps.bias", e, ff), xn);
    const Vec u = matvec(rows_of(up, hp.dim, e * ff, ff), slice("ffn_up_exps.bias", e, ff), xn);
    for (size_t i = 0; i < ff; ++i) {
      if (options.skip_swiglu_clamp) {
        g[i] = silu(g[i]) * u[i];
      } else {
        const double x = std::min(g[i], 7.0);
        g[i] = x / (1.0 + std::exp(-1.702 * x)) * (std::clamp(u[i], -7.0, 7.0) + 1.0);
      }
    }
    const Vec y = matvec(rows_of(down, ff, e * hp.dim, hp.dim), slice("ffn_down_exps.bias", e, hp.dim), g);
    const double weight = std::exp(logits[e] - max_logit) / total;
    for (int64_t i = 0; i < hp.dim; ++i) out[i] += weight * y[i];
  }
  return out;
}

// qwen3moe's mixture of experts of the normed x (reference_forward.h).
Vec moe_ffn(const Hparams& hp, Weights& w, const std::string& p, const ReferenceOptions& options, const Vec& xn) {
  if (hp.gpt_oss) return gpt_oss_moe_ffn(hp, w, p, options, xn);
  const Vec logits = matvec(w[p + "ffn_gate_inp.weight"], {}, xn);
  const double max_logit = *std::max_element(logits.begin(), logits.end());
  Vec probs(logits.size());
  double total = 0.0;
  for (size_t e = 0; e < logits.size(); ++e) total += (probs[e] = std::exp(logits[e] - max_logit));
  for (double& pr : probs) pr /= total;
  std::vector<size_t> order(probs.size());
  for (size_t e = 0; e < order.size(); ++e) order[e] = e;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return probs[a] > probs[b]; });
  order.resize(options.top1_experts ? 1 : hp.n_expert_used);
  double chosen = 0.0;
  for (size_t e : order) chosen += probs[e];
  const auto& gate = w[p + "ffn_gate_exps.weight"];
  const auto& up = w[p + "ffn_up_exps.weight"];
  const auto& down = w[p + "ffn_down_exps.weight"];
  const size_t ff = gate.size() / hp.n_expert / hp.dim;
  Vec out(hp.dim, 0.0);
  for (size_t e : order) {
    Vec g = matvec(rows_of(gate, hp.dim, e * ff, ff), {}, xn);
    const Vec u = matvec(rows_of(up, hp.dim, e * ff, ff), {}, xn);
    for (size_t i = 0; i < ff; ++i) g[i] = silu(g[i]) * u[i];
    const Vec y = matvec(rows_of(down, ff, e * hp.dim, hp.dim), {}, g);
    const double weight = options.skip_expert_norm ? probs[e] : probs[e] / chosen;
    for (int64_t i = 0; i < hp.dim; ++i) out[i] += weight * y[i];
  }
  return out;
}

// The dense FFN of the normed x: SwiGLU, or GELU-gated for gemma.
Vec dense_ffn(const Hparams& hp, Weights& w, const std::string& p, const Vec& xn) {
  Vec gate = matvec(w[p + "ffn_gate.weight"], {}, xn);
  const Vec up = matvec(w[p + "ffn_up.weight"], {}, xn);
  for (size_t i = 0; i < gate.size(); ++i) gate[i] = (hp.gemma ? gelu_tanh(gate[i]) : silu(gate[i])) * up[i];
  return matvec(w[p + "ffn_down.weight"], {}, gate);
}

// qwen35moe's shared expert of the normed x: sigmoid(ffn_gate_inp_shexp · x) × its SwiGLU (reference_forward.h).
Vec shared_expert_ffn(Weights& w, const std::string& p, const ReferenceOptions& options, const Vec& xn) {
  Vec gate = matvec(w[p + "ffn_gate_shexp.weight"], {}, xn);
  const Vec up = matvec(w[p + "ffn_up_shexp.weight"], {}, xn);
  for (size_t i = 0; i < gate.size(); ++i) gate[i] = silu(gate[i]) * up[i];
  Vec out = matvec(w[p + "ffn_down_shexp.weight"], {}, gate);
  const double logit = matvec(w[p + "ffn_gate_inp_shexp.weight"], {}, xn)[0];
  const double scale = options.skip_shared_gate ? 1.0 : 1.0 / (1.0 + std::exp(-logit));
  for (double& o : out) o *= scale;
  return out;
}

// One transformer block at position `pos`, updating x and the layer's K/V.
void layer_forward(const Hparams& hp, Weights& w, int64_t l, size_t pos, const ReferenceOptions& options,
                   const std::vector<float>& freqs, Vec& x, LayerCache& cache) {
  const bool neox = hp.arch == "qwen2" || hp.arch == "qwen3" || hp.arch == "qwen3moe" || hp.arch == "phi3" ||
                    hp.gemma || hp.gpt_oss;
  const bool sliding = is_sliding_layer(hp, l) && !options.skip_window;
  const std::string p = "blk." + std::to_string(l) + ".";
  auto bias = [&](const char* name) { return options.skip_qkv_bias ? std::vector<float>{} : w[p + name]; };
  auto post_norm = [&](Vec& y, const char* name) {
    if (hp.gemma && !options.skip_post_norms) rms_norm_in_place(y, 0, hp.dim, w[p + name], hp.eps);
  };
  Vec xn = x;
  rms_norm_in_place(xn, 0, hp.dim, w[p + "attn_norm.weight"], hp.eps);
  Vec q = matvec(w[p + "attn_q.weight"], bias("attn_q.bias"), xn);
  Vec k = matvec(w[p + "attn_k.weight"], bias("attn_k.bias"), xn);
  Vec v = matvec(w[p + "attn_v.weight"], bias("attn_v.bias"), xn);
  if (w.contains(p + "attn_q_norm.weight") && !options.skip_qk_norm) {
    for (int64_t h = 0; h < hp.n_heads; ++h)
      rms_norm_in_place(q, h * hp.head_dim, hp.head_dim, w[p + "attn_q_norm.weight"], hp.eps);
    for (int64_t h = 0; h < hp.n_kv_heads; ++h)
      rms_norm_in_place(k, h * hp.head_dim, hp.head_dim, w[p + "attn_k_norm.weight"], hp.eps);
  }
  const bool local_base = hp.arch == "gemma3" && is_sliding_layer(hp, l) && !options.global_rope_base_everywhere;
  RopeParams rp = local_base ? RopeParams{10000.0, 1.0}
                              : RopeParams{hp.rope_base, hp.rope_scale, options.skip_rope_mscale ? 1.0 : hp.rope_mscale};
  if (hp.yarn && !options.skip_yarn) {
    // The pair indices where beta turns of a pair fit in the original context, as the YaRN paper defines them.
    const double d = static_cast<double>(hp.head_dim);
    auto corr = [&](double beta) {
      return d * std::log(hp.rope_original_context / (beta * 2.0 * 3.14159265358979323846)) / (2.0 * std::log(hp.rope_base));
    };
    rp.yarn = true;
    rp.low = std::max(0.0, std::floor(corr(32.0)));
    rp.high = std::min(d - 1.0, std::ceil(corr(1.0)));
    rp.mscale *= 1.0 + 0.1 * std::log(1.0 / hp.rope_scale);
  }
  rope(q, hp.n_heads, hp.head_dim, static_cast<int64_t>(pos), rp, freqs, neox);
  rope(k, hp.n_kv_heads, hp.head_dim, static_cast<int64_t>(pos), rp, freqs, neox);
  cache.keys.push_back(k);
  cache.values.push_back(v);
  const size_t first = sliding && pos + 1 > static_cast<size_t>(hp.window) ? pos + 1 - hp.window : 0;
  const double scale = hp.gemma ? hp.query_scale : 1.0 / std::sqrt(static_cast<double>(hp.head_dim));
  const double cap = options.skip_softcap ? 0.0 : hp.attn_cap;
  const std::vector<float> sinks = options.skip_sinks ? std::vector<float>{} : w[p + "attn_sinks.weight"];
  Vec attn = matvec(w[p + "attn_output.weight"], w[p + "attn_output.bias"],
                    attention(hp, q, cache.keys, cache.values, first, scale, cap, sinks));
  post_norm(attn, "post_attention_norm.weight");
  for (int64_t i = 0; i < hp.dim; ++i) x[i] += attn[i];
  xn = x;
  rms_norm_in_place(xn, 0, hp.dim, w[p + (hp.gpt_oss ? "post_attention_norm.weight" : "ffn_norm.weight")], hp.eps);
  Vec down = hp.n_expert > 0 ? moe_ffn(hp, w, p, options, xn) : dense_ffn(hp, w, p, xn);
  post_norm(down, "post_ffw_norm.weight");
  for (int64_t i = 0; i < hp.dim; ++i) x[i] += down[i];
}

// A Gated DeltaNet layer's recurrent state: the conv window [channels][d_conv - 1] and S [v head][key i][value j].
struct DeltaState {
  std::vector<Vec> window;  // [channel][tap], oldest first
  std::vector<Vec> s;       // [v head][i * d_state + j]
};

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// x[offset, offset + n) / sqrt(Σx² + eps).
void l2_norm_in_place(Vec& x, size_t offset, size_t n, double eps) {
  double ss = 0.0;
  for (size_t i = 0; i < n; ++i) ss += x[offset + i] * x[offset + i];
  const double scale = 1.0 / std::sqrt(ss + eps);
  for (size_t i = 0; i < n; ++i) x[offset + i] *= scale;
}

struct DeltaProjections {
  Vec qkv, z, beta, alpha;
};

// The DeltaNet input projections of the normed x. qwen3next's fused ssm_in and ssm_ba are split as llama.cpp's
// qwen3next graph views them: per key head g, ssm_in holds q_g, k_g, then its value heads' v, then their z; ssm_ba
// their beta, then their alpha.
DeltaProjections delta_net_projections(const Hparams& hp, Weights& w, const std::string& p,
                                       const ReferenceOptions& options, const Vec& xn) {
  if (!hp.qwen3next) {
    return {matvec(w[p + "attn_qkv.weight"], {}, xn), matvec(w[p + "attn_gate.weight"], {}, xn),
            matvec(w[p + "ssm_beta.weight"], {}, xn), matvec(w[p + "ssm_alpha.weight"], {}, xn)};
  }
  const int64_t d = hp.d_state, r = hp.n_v_heads / hp.n_k_heads, key_dim = hp.n_k_heads * d, vd = r * d;
  const Vec in = matvec(w[p + "ssm_in.weight"], {}, xn);
  const Vec ba = matvec(w[p + "ssm_ba.weight"], {}, xn);
  if (options.ungrouped_fused) {  // as if ssm_in were rows q, k, v, z and ssm_ba beta, alpha, each whole
    const int64_t value_dim = hp.n_v_heads * d, qkv = 2 * key_dim + value_dim;
    return {Vec(in.begin(), in.begin() + qkv), Vec(in.begin() + qkv, in.end()),
            Vec(ba.begin(), ba.begin() + hp.n_v_heads), Vec(ba.begin() + hp.n_v_heads, ba.end())};
  }
  DeltaProjections out{Vec(2 * key_dim + hp.n_v_heads * d), Vec(hp.n_v_heads * d), Vec(hp.n_v_heads),
                       Vec(hp.n_v_heads)};
  for (int64_t g = 0; g < hp.n_k_heads; ++g) {
    const auto src = in.begin() + g * (2 * d + 2 * vd);
    std::copy_n(src, d, out.qkv.begin() + g * d);
    std::copy_n(src + d, d, out.qkv.begin() + key_dim + g * d);
    std::copy_n(src + 2 * d, vd, out.qkv.begin() + 2 * key_dim + g * vd);
    std::copy_n(src + 2 * d + vd, vd, out.z.begin() + g * vd);
    std::copy_n(ba.begin() + 2 * g * r, r, out.beta.begin() + g * r);
    std::copy_n(ba.begin() + 2 * g * r + r, r, out.alpha.begin() + g * r);
  }
  return out;
}

// qwen35's Gated DeltaNet mixer of the normed x (reference_forward.h); advances `st`.
Vec delta_net_mixer(const Hparams& hp, Weights& w, const std::string& p, const ReferenceOptions& options,
                    const Vec& xn, DeltaState& st) {
  const int64_t d = hp.d_state, key_dim = hp.n_k_heads * d, value_dim = hp.n_v_heads * d;
  const int64_t channels = 2 * key_dim + value_dim, taps = hp.d_conv;
  const auto [qkv, z, beta, alpha] = delta_net_projections(hp, w, p, options, xn);
  const auto& conv_w = w[p + "ssm_conv1d.weight"];
  if (st.window.empty()) {
    st.window.assign(channels, Vec(taps - 1, 0.0));
    st.s.assign(hp.n_v_heads, Vec(d * d, 0.0));
  }
  Vec conv(channels);
  for (int64_t c = 0; c < channels; ++c) {
    double acc = static_cast<double>(conv_w[c * taps + taps - 1]) * qkv[c];
    if (!options.skip_conv) {
      for (int64_t t = 0; t + 1 < taps; ++t) acc += static_cast<double>(conv_w[c * taps + t]) * st.window[c][t];
    }
    conv[c] = silu(acc);
    st.window[c].erase(st.window[c].begin());
    st.window[c].push_back(qkv[c]);
  }
  for (int64_t h = 0; h < 2 * hp.n_k_heads; ++h) l2_norm_in_place(conv, h * d, d, hp.eps);
  Vec out(value_dim, 0.0);
  for (int64_t h = 0; h < hp.n_v_heads; ++h) {
    const bool grouped = options.interleaved_key_heads || (hp.qwen3next && !options.tiled_key_heads);
    const int64_t hk = grouped ? h / (hp.n_v_heads / hp.n_k_heads) : h % hp.n_k_heads;
    const double* q = conv.data() + hk * d;
    const double* k = conv.data() + key_dim + hk * d;
    const double* v = conv.data() + 2 * key_dim + h * d;
    const double a = alpha[h] + w[p + "ssm_dt.bias"][h];
    const double softplus = a > 20.0 ? a : std::log1p(std::exp(a));
    const double decay = std::exp(softplus * w[p + "ssm_a"][h]);
    const double b = sigmoid(beta[h]);
    Vec& s = st.s[h];
    for (double& e : s) e *= decay;
    for (int64_t j = 0; j < d; ++j) {
      double sk = 0.0;
      for (int64_t i = 0; i < d; ++i) sk += s[i * d + j] * k[i];
      const double delta = b * (v[j] - sk);
      for (int64_t i = 0; i < d; ++i) s[i * d + j] += k[i] * delta;
    }
    for (int64_t j = 0; j < d; ++j) {
      double o = 0.0;
      for (int64_t i = 0; i < d; ++i) o += s[i * d + j] * q[i];
      out[h * d + j] = o / std::sqrt(static_cast<double>(d));
    }
    rms_norm_in_place(out, h * d, d, w[p + "ssm_norm.weight"], hp.eps);
    for (int64_t j = 0; j < d; ++j) out[h * d + j] *= silu(z[h * d + j]);
  }
  return matvec(w[p + "ssm_out.weight"], {}, out);
}

// qwen35's gated full attention of the normed x at `pos` (reference_forward.h).
Vec gated_attention_mixer(const Hparams& hp, Weights& w, const std::string& p, const ReferenceOptions& options,
                          const Vec& xn, size_t pos, LayerCache& cache) {
  const int64_t hd = hp.head_dim;
  const Vec qg = matvec(w[p + "attn_q.weight"], {}, xn);
  Vec q(hp.n_heads * hd), gate(hp.n_heads * hd);
  for (int64_t h = 0; h < hp.n_heads; ++h) {
    for (int64_t i = 0; i < hd; ++i) {
      q[h * hd + i] = qg[2 * h * hd + i];
      gate[h * hd + i] = qg[2 * h * hd + hd + i];
    }
  }
  Vec k = matvec(w[p + "attn_k.weight"], {}, xn);
  const Vec v = matvec(w[p + "attn_v.weight"], {}, xn);
  if (!options.skip_qk_norm) {
    for (int64_t h = 0; h < hp.n_heads; ++h) rms_norm_in_place(q, h * hd, hd, w[p + "attn_q_norm.weight"], hp.eps);
    for (int64_t h = 0; h < hp.n_kv_heads; ++h) rms_norm_in_place(k, h * hd, hd, w[p + "attn_k_norm.weight"], hp.eps);
  }
  const int64_t rot = options.full_rope ? hd : hp.rope_dim;
  for (Vec* x : {&q, &k}) {
    const int64_t heads = x == &q ? hp.n_heads : hp.n_kv_heads;
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < rot / 2; ++i) {
        const double angle = static_cast<double>(pos) * std::pow(hp.rope_base, -2.0 * static_cast<double>(i) / rot);
        const size_t a = h * hd + i, b = h * hd + i + rot / 2;
        const double x0 = (*x)[a], x1 = (*x)[b];
        (*x)[a] = x0 * std::cos(angle) - x1 * std::sin(angle);
        (*x)[b] = x0 * std::sin(angle) + x1 * std::cos(angle);
      }
    }
  }
  cache.keys.push_back(k);
  cache.values.push_back(v);
  Vec attn = attention(hp, q, cache.keys, cache.values, 0, 1.0 / std::sqrt(static_cast<double>(hd)), 0.0, {});
  if (!options.skip_attn_gate) {
    for (size_t i = 0; i < attn.size(); ++i) attn[i] *= sigmoid(gate[i]);
  }
  return matvec(w[p + "attn_output.weight"], {}, attn);
}

// One qwen35 block at position `pos`.
void qwen35_layer_forward(const Hparams& hp, Weights& w, int64_t l, size_t pos, const ReferenceOptions& options,
                          Vec& x, LayerCache& cache, DeltaState& state) {
  const std::string p = "blk." + std::to_string(l) + ".";
  Vec xn = x;
  rms_norm_in_place(xn, 0, hp.dim, w[p + "attn_norm.weight"], hp.eps);
  const bool attends = (l + 1) % hp.full_attention_interval == 0;
  const Vec mixed = attends ? gated_attention_mixer(hp, w, p, options, xn, pos, cache)
                            : delta_net_mixer(hp, w, p, options, xn, state);
  for (int64_t i = 0; i < hp.dim; ++i) x[i] += mixed[i];
  xn = x;
  rms_norm_in_place(xn, 0, hp.dim, w[p + "post_attention_norm.weight"], hp.eps);
  Vec down = hp.n_expert > 0 ? moe_ffn(hp, w, p, options, xn) : dense_ffn(hp, w, p, xn);
  if (hp.n_expert > 0 && !options.skip_shared_expert) {  // qwen35moe
    const Vec shared = shared_expert_ffn(w, p, options, xn);
    for (int64_t i = 0; i < hp.dim; ++i) down[i] += shared[i];
  }
  for (int64_t i = 0; i < hp.dim; ++i) x[i] += down[i];
}

}  // namespace

std::vector<std::vector<float>> reference_logits(const GgufFile& f, const std::vector<int32_t>& tokens,
                                                 const ReferenceOptions& options) {
  if (**f.get_string("general.architecture") == "gemma4") return gemma4_reference_logits(f, tokens, options);
  const Hparams hp = read_hparams(f);
  Weights w;
  for (const GgufTensor& t : f.tensors()) w[t.name] = load(f, t.name);
  split_fused(w, hp, options.swap_gate_up);
  // Phi-3's LongRoPE (HF's Phi3LongRoPEScaledRotaryEmbedding, with the context fixed at the model's): the long
  // factors beyond the original context, the short ones within it.
  const char* longrope = hp.n_ctx > hp.rope_original_context ? "rope_factors_long.weight" : "rope_factors_short.weight";
  const std::vector<float> freqs = options.skip_rope_freqs ? std::vector<float>{}
                                   : w.contains(longrope)  ? w[longrope]
                                                           : w["rope_freqs.weight"];
  const auto& output = w.contains("output.weight") ? w["output.weight"] : w["token_embd.weight"];
  std::vector<LayerCache> caches(hp.n_layers);
  std::vector<DeltaState> states(hp.n_layers);
  std::vector<std::vector<float>> logits;
  for (size_t pos = 0; pos < tokens.size(); ++pos) {
    const auto& embd = w["token_embd.weight"];
    Vec x(embd.begin() + tokens[pos] * hp.dim, embd.begin() + (tokens[pos] + 1) * hp.dim);
    if (hp.gemma) {
      for (double& e : x) e *= std::sqrt(static_cast<double>(hp.dim));
    }
    for (int64_t l = 0; l < hp.n_layers; ++l) {
      if (hp.qwen35) {
        qwen35_layer_forward(hp, w, l, pos, options, x, caches[l], states[l]);
      } else {
        layer_forward(hp, w, l, pos, options, freqs, x, caches[l]);
      }
    }
    rms_norm_in_place(x, 0, hp.dim, w["output_norm.weight"], hp.eps);
    Vec out = matvec(output, {}, x);
    if (hp.final_cap > 0 && !options.skip_softcap) {
      for (double& o : out) o = hp.final_cap * std::tanh(o / hp.final_cap);
    }
    logits.emplace_back(out.begin(), out.end());
  }
  return logits;
}

}  // namespace hearth::test
