// Gemma 4's scalar reference forward (reference_forward.h), written from HF's modeling_gemma4 as llama.cpp's
// gemma4 loader reads its GGUF: nothing here is shared with src/model. Per token, in double:
//   x = embd[t] · sqrt(dim); per-layer inputs (embedding_length_per_layer_input P > 0):
//     ple[l] = (RMSNorm(per_layer_model_proj · x / sqrt(dim), per_layer_proj_norm) + per_layer_token_embd[t][l] ·
//     sqrt(P)) / sqrt(2)
//   each layer l: xn = RMSNorm(x, attn_norm); q = Wq xn, per head RMSNorm(q_norm) then RoPE; layers before the last
//   shared_kv_layers also k = Wk xn (per head RMSNorm(k_norm), RoPE) and v = Wv xn (Wk xn without attn_v), per head
//   RMSNorm with no weight, kept in the layer's cache; a shared layer reads the cache of the last K/V layer of its
//   kind (global: the last; sliding: the one before it). Sliding layers (sliding_window_pattern) see the last
//   sliding_window keys, have heads of key_length_swa and rotate rope.dimension_count_swa dims (neox pairs (i, i +
//   d/2)) with rope.freq_base_swa; global ones have heads of key_length and rotate with rope.freq_base, each pair's
//   angle divided by rope_freqs.weight (1e30: the pair does not turn). Scores are q·k unscaled. x += RMSNorm(Wo
//   attn, post_attention_norm); x += RMSNorm(down(gelu(gate xn') * up xn'), post_ffw_norm) with xn' =
//   RMSNorm(x, ffn_norm); then x += RMSNorm(proj · (gelu(inp_gate · x) * ple[l]), post_norm); x *=
//   layer_output_scale. With experts (26B-A4B) the FFN's output is with_experts's (below). Logits:
//   final_logit_softcapping of RMSNorm(x, output_norm) · token_embd (or output).
#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "reference_forward.h"
#include "tensor/dtype.h"
#include "tensor/quant.h"

namespace hearth::test {
namespace {

using Vec = std::vector<double>;
using Weights = std::map<std::string, std::vector<float>>;

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

int64_t meta_int(const GgufFile& f, const std::string& key, int64_t fallback) {
  auto v = f.get_uint(key);
  return v.ok() && v->has_value() ? static_cast<int64_t>(**v) : fallback;
}

double meta_float(const GgufFile& f, const std::string& key, double fallback) {
  auto v = f.get_float(key);
  return v.ok() && v->has_value() ? **v : fallback;
}

// A per-layer key stored as one number or one per layer.
std::vector<int64_t> meta_per_layer(const GgufFile& f, const std::string& key, int64_t n_layers, int64_t fallback) {
  auto array = f.get_int_array(key);
  if (array.ok() && !array->empty()) return *array;
  return std::vector<int64_t>(static_cast<size_t>(n_layers), meta_int(f, key, fallback));
}

Vec matvec(const std::vector<float>& w, const Vec& x) {
  const size_t n_in = x.size();
  Vec y(w.size() / n_in, 0.0);
  for (size_t r = 0; r < y.size(); ++r) {
    double sum = 0.0;
    for (size_t c = 0; c < n_in; ++c) sum += static_cast<double>(w[r * n_in + c]) * x[c];
    y[r] = sum;
  }
  return y;
}

// x[offset, offset + n) / sqrt(mean square + eps) × w (w empty: 1).
void rms_norm(Vec& x, size_t offset, size_t n, const std::vector<float>& w, double eps) {
  double ss = 0.0;
  for (size_t i = 0; i < n; ++i) ss += x[offset + i] * x[offset + i];
  const double scale = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (size_t i = 0; i < n; ++i) x[offset + i] *= scale * (w.empty() ? 1.0 : w[i]);
}

double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
}

struct Hp {
  int64_t dim, n_layers, n_heads, head_dim, head_dim_swa, rope_dim, rope_dim_swa, window, n_kv, per_layer;
  int64_t n_expert_used;
  std::vector<int64_t> kv_heads;
  std::vector<bool> swa;
  double eps, base, base_swa, final_cap;
};

Hp read_hp(const GgufFile& f) {
  const std::string p = "gemma4.";
  Hp h{};
  h.dim = meta_int(f, p + "embedding_length", 0);
  h.n_layers = meta_int(f, p + "block_count", 0);
  h.n_heads = meta_int(f, p + "attention.head_count", 0);
  h.head_dim = meta_int(f, p + "attention.key_length", 0);
  h.head_dim_swa = meta_int(f, p + "attention.key_length_swa", 0);
  h.rope_dim = meta_int(f, p + "rope.dimension_count", h.head_dim);
  h.rope_dim_swa = meta_int(f, p + "rope.dimension_count_swa", h.head_dim_swa);
  h.window = meta_int(f, p + "attention.sliding_window", 0);
  h.n_kv = h.n_layers - meta_int(f, p + "attention.shared_kv_layers", 0);
  h.per_layer = meta_int(f, p + "embedding_length_per_layer_input", 0);
  h.n_expert_used = meta_int(f, p + "expert_used_count", 0);
  h.kv_heads = meta_per_layer(f, p + "attention.head_count_kv", h.n_layers, h.n_heads);
  const GgufValue* pattern = f.find(p + "attention.sliding_window_pattern");
  for (const GgufValue& item : std::get<std::shared_ptr<GgufArray>>(pattern->data)->items) {
    h.swa.push_back(std::get<bool>(item.data));
  }
  h.eps = meta_float(f, p + "attention.layer_norm_rms_epsilon", 1e-6);
  h.base = meta_float(f, p + "rope.freq_base", 10000.0);
  h.base_swa = meta_float(f, p + "rope.freq_base_swa", 10000.0);
  h.final_cap = meta_float(f, p + "final_logit_softcapping", 0.0);
  return h;
}

// Neox RoPE of every head: pair (i, i + rope_dim / 2) turns by pos × base^(-2i / rope_dim) / divisors[i].
void rope(Vec& x, int64_t n_heads, int64_t head_dim, int64_t rope_dim, int64_t pos, double base,
          const std::vector<float>& divisors) {
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t i = 0; i < rope_dim / 2; ++i) {
      const double divisor = divisors.empty() ? 1.0 : divisors[i];
      const double angle = static_cast<double>(pos) * std::pow(base, -2.0 * i / rope_dim) / divisor;
      const size_t a = h * head_dim + i, b = a + rope_dim / 2;
      const double x0 = x[a], x1 = x[b];
      x[a] = x0 * std::cos(angle) - x1 * std::sin(angle);
      x[b] = x0 * std::sin(angle) + x1 * std::cos(angle);
    }
  }
}

// 26B-A4B: the dense FFN's output `dense` is a shared expert beside expert_used_count experts; returns
// RMSNorm(dense, post_ffw_norm_1) + RMSNorm(Σ_chosen w_e · s_e · down_e(gelu(gate_e y) · up_e y), post_ffw_norm_2)
// with y = RMSNorm(x, pre_ffw_norm_2); the router reads ffn_gate_inp.scale · RMSNorm(x) / sqrt(dim), softmax over
// all experts, the most probable chosen (ties: the lower id), their probabilities divided by their sum.
Vec with_experts(const Hp& hp, Weights& w, const std::string& p, const Vec& x, Vec dense,
                 const ReferenceOptions& options) {
  rms_norm(dense, 0, hp.dim, w[p + "post_ffw_norm_1.weight"], hp.eps);
  Vec y = x, router_in = x;
  rms_norm(y, 0, hp.dim, w[p + "pre_ffw_norm_2.weight"], hp.eps);
  rms_norm(router_in, 0, hp.dim, {}, hp.eps);
  const auto& router_scale = w[p + "ffn_gate_inp.scale"];
  for (int64_t i = 0; i < hp.dim; ++i) router_in[i] *= router_scale[i] / std::sqrt(static_cast<double>(hp.dim));
  const Vec logits = matvec(w[p + "ffn_gate_inp.weight"], router_in);
  const double top = *std::max_element(logits.begin(), logits.end());
  Vec probs(logits.size());
  double total = 0.0;
  for (size_t e = 0; e < logits.size(); ++e) total += (probs[e] = std::exp(logits[e] - top));
  std::vector<size_t> order(probs.size());
  for (size_t e = 0; e < order.size(); ++e) order[e] = e;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return probs[a] > probs[b]; });
  order.resize(options.top1_experts ? 1 : hp.n_expert_used);
  double chosen = 0.0;
  for (size_t e : order) chosen += probs[e] / total;
  const auto& gate = w[p + "ffn_gate_exps.weight"];
  const auto& up = w[p + "ffn_up_exps.weight"];
  const auto& down = w[p + "ffn_down_exps.weight"];
  const std::vector<float>& scale = w[p + "ffn_down_exps.scale"];
  const size_t ff = gate.size() / probs.size() / hp.dim;
  auto rows = [](const std::vector<float>& m, size_t cols, size_t first, size_t n) {
    return std::vector<float>(m.begin() + first * cols, m.begin() + (first + n) * cols);
  };
  Vec out(hp.dim, 0.0);
  for (size_t e : order) {
    Vec g = matvec(rows(gate, hp.dim, e * ff, ff), y);
    const Vec u = matvec(rows(up, hp.dim, e * ff, ff), y);
    for (size_t i = 0; i < ff; ++i) g[i] = gelu_tanh(g[i]) * u[i];
    const Vec d = matvec(rows(down, ff, e * hp.dim, hp.dim), g);
    const double weight = probs[e] / total / chosen * (scale.empty() ? 1.0 : scale[e]);
    for (int64_t i = 0; i < hp.dim; ++i) out[i] += weight * d[i];
  }
  rms_norm(out, 0, hp.dim, w[p + "post_ffw_norm_2.weight"], hp.eps);
  for (int64_t i = 0; i < hp.dim; ++i) dense[i] += out[i];
  return dense;
}

struct Cache {
  std::vector<Vec> keys, values;
};

}  // namespace

std::vector<std::vector<float>> gemma4_reference_logits(const GgufFile& f, const std::vector<int32_t>& tokens,
                                                        const ReferenceOptions& options) {
  const Hp hp = read_hp(f);
  Weights w;
  for (const GgufTensor& t : f.tensors()) w[t.name] = load(f, t.name);
  const auto& embd = w["token_embd.weight"];
  const auto& output = w.contains("output.weight") ? w["output.weight"] : embd;
  const std::vector<float> divisors = options.skip_rope_freqs ? std::vector<float>{} : w["rope_freqs.weight"];
  const bool ple = hp.per_layer > 0 && !options.skip_per_layer_embd;
  std::vector<Cache> caches(hp.n_layers);
  std::vector<std::vector<float>> logits;
  for (size_t pos = 0; pos < tokens.size(); ++pos) {
    const int64_t t = tokens[pos];
    Vec x(embd.begin() + t * hp.dim, embd.begin() + (t + 1) * hp.dim);
    for (double& e : x) e *= std::sqrt(static_cast<double>(hp.dim));
    Vec per_layer;
    if (ple) {
      const int64_t width = hp.n_layers * hp.per_layer;
      per_layer = matvec(w["per_layer_model_proj.weight"], x);
      const auto& tok = w["per_layer_token_embd.weight"];
      for (int64_t l = 0; l < hp.n_layers; ++l) {
        for (int64_t i = 0; i < hp.per_layer; ++i)
          per_layer[l * hp.per_layer + i] /= std::sqrt(static_cast<double>(hp.dim));
        rms_norm(per_layer, l * hp.per_layer, hp.per_layer, w["per_layer_proj_norm.weight"], hp.eps);
      }
      for (int64_t i = 0; i < width; ++i) {
        per_layer[i] =
            (per_layer[i] + tok[t * width + i] * std::sqrt(static_cast<double>(hp.per_layer))) / std::sqrt(2.0);
      }
    }
    for (int64_t l = 0; l < hp.n_layers; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      const bool swa = hp.swa[l];
      const int64_t hd = swa ? hp.head_dim_swa : hp.head_dim;
      const int64_t rd = swa ? hp.rope_dim_swa : hp.rope_dim;
      const double base = swa ? hp.base_swa : hp.base;
      const std::vector<float>& div = swa ? std::vector<float>{} : divisors;
      Vec xn = x;
      rms_norm(xn, 0, hp.dim, w[p + "attn_norm.weight"], hp.eps);
      Vec q = matvec(w[p + "attn_q.weight"], xn);
      for (int64_t h = 0; h < hp.n_heads; ++h) rms_norm(q, h * hd, hd, w[p + "attn_q_norm.weight"], hp.eps);
      rope(q, hp.n_heads, hd, rd, static_cast<int64_t>(pos), base, div);
      if (l < hp.n_kv) {
        Vec k = matvec(w[p + "attn_k.weight"], xn);
        Vec v = w.contains(p + "attn_v.weight") ? matvec(w[p + "attn_v.weight"], xn) : k;
        for (int64_t h = 0; h < hp.kv_heads[l]; ++h) {
          rms_norm(k, h * hd, hd, w[p + "attn_k_norm.weight"], hp.eps);
          if (!options.skip_value_norm) rms_norm(v, h * hd, hd, {}, hp.eps);
        }
        rope(k, hp.kv_heads[l], hd, rd, static_cast<int64_t>(pos), base, div);
        caches[l].keys.push_back(k);
        caches[l].values.push_back(v);
      }
      int64_t source = l < hp.n_kv ? l : hp.n_kv - (swa ? 2 : 1);
      if (options.shared_kv_from_first && l >= hp.n_kv) source = swa ? 0 : source;  // a wrong source, for teeth
      const Cache& cache = caches[source];
      const int64_t group = hp.n_heads / hp.kv_heads[source];
      const bool windowed = swa && !options.skip_window;
      const size_t first = windowed && pos + 1 > static_cast<size_t>(hp.window) ? pos + 1 - hp.window : 0;
      Vec out(hp.n_heads * hd, 0.0);
      for (int64_t h = 0; h < hp.n_heads; ++h) {
        const int64_t kvh = h / group;
        std::vector<double> scores(cache.keys.size(), 0.0);
        double top = -1e300;
        for (size_t j = first; j <= pos; ++j) {
          double s = 0.0;
          for (int64_t i = 0; i < hd; ++i) s += q[h * hd + i] * cache.keys[j][kvh * hd + i];
          top = std::max(top, scores[j] = s);
        }
        double total = 0.0;
        for (size_t j = first; j <= pos; ++j) total += (scores[j] = std::exp(scores[j] - top));
        for (size_t j = first; j <= pos; ++j) {
          for (int64_t i = 0; i < hd; ++i) out[h * hd + i] += scores[j] / total * cache.values[j][kvh * hd + i];
        }
      }
      Vec attn = matvec(w[p + "attn_output.weight"], out);
      rms_norm(attn, 0, hp.dim, w[p + "post_attention_norm.weight"], hp.eps);
      for (int64_t i = 0; i < hp.dim; ++i) x[i] += attn[i];
      xn = x;
      rms_norm(xn, 0, hp.dim, w[p + "ffn_norm.weight"], hp.eps);
      Vec gate = matvec(w[p + "ffn_gate.weight"], xn);
      const Vec up = matvec(w[p + "ffn_up.weight"], xn);
      for (size_t i = 0; i < gate.size(); ++i) gate[i] = gelu_tanh(gate[i]) * up[i];
      Vec down = matvec(w[p + "ffn_down.weight"], gate);
      if (w.contains(p + "ffn_gate_inp.weight")) down = with_experts(hp, w, p, x, down, options);
      rms_norm(down, 0, hp.dim, w[p + "post_ffw_norm.weight"], hp.eps);
      for (int64_t i = 0; i < hp.dim; ++i) x[i] += down[i];
      if (ple) {
        Vec g = matvec(w[p + "inp_gate.weight"], x);
        for (int64_t i = 0; i < hp.per_layer; ++i) g[i] = gelu_tanh(g[i]) * per_layer[l * hp.per_layer + i];
        Vec branch = matvec(w[p + "proj.weight"], g);
        rms_norm(branch, 0, hp.dim, w[p + "post_norm.weight"], hp.eps);
        for (int64_t i = 0; i < hp.dim; ++i) x[i] += branch[i];
      }
      if (w.contains(p + "layer_output_scale.weight")) {
        for (double& e : x) e *= w[p + "layer_output_scale.weight"][0];
      }
    }
    rms_norm(x, 0, hp.dim, w["output_norm.weight"], hp.eps);
    Vec out = matvec(output, x);
    if (hp.final_cap > 0 && !options.skip_softcap) {
      for (double& o : out) o = hp.final_cap * std::tanh(o / hp.final_cap);
    }
    logits.emplace_back(out.begin(), out.end());
  }
  return logits;
}

}  // namespace hearth::test
