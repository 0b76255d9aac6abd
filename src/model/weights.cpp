#include "model/weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "kernels/cpu_isa.h"
#include "model/weights_binder.h"
#include "tensor/quant.h"

namespace hearth {
namespace {

using detail::Binder;
using detail::rows_of;

// q/k/v biases: required by qwen2, optional for the llama family, absent in qwen3 (a present one is then an
// unknown tensor). All three or none.
Result<void> bind_qkv_bias(Binder& b, const ModelConfig& c, const std::string& p, LayerWeights& l) {
  const bool any = b.has(p + "attn_q.bias") || b.has(p + "attn_k.bias") || b.has(p + "attn_v.bias");
  if (c.qk_norm || (!any && !c.qkv_bias_required)) return {};
  auto bq = b.vector(p + "attn_q.bias", c.q_dim());
  if (!bq) return bq.error();
  auto bk = b.vector(p + "attn_k.bias", c.kv_dim());
  if (!bk) return bk.error();
  auto bv = b.vector(p + "attn_v.bias", c.kv_dim());
  if (!bv) return bv.error();
  l.bq = std::move(*bq);
  l.bk = std::move(*bk);
  l.bv = std::move(*bv);
  return {};
}

Result<void> bind_qk_norm(Binder& b, const ModelConfig& c, const std::string& p, int il, LayerWeights& l) {
  if (!c.qk_norm) return {};
  auto q_norm = b.vector(p + "attn_q_norm.weight", c.head_dim_of(il));
  if (!q_norm) return q_norm.error();
  l.q_norm = std::move(*q_norm);
  // A gemma4 layer that reads another's K/V has no K; a k norm there is bound but unused, as llama.cpp does.
  if (!c.has_kv(il) && !b.has(p + "attn_k_norm.weight")) return {};
  auto k_norm = b.vector(p + "attn_k_norm.weight", c.head_dim_of(il));
  if (!k_norm) return k_norm.error();
  if (c.has_kv(il)) l.k_norm = std::move(*k_norm);
  return {};
}

// q, k, v: separate matrices, or (phi3) one attn_qkv.weight whose rows are q, then k, then v (llama.cpp's views
// at offsets 0, n_embd, n_embd + n_embd_gqa).
// gemma4: q of the layer's head size; k on the layers that store K/V (on a shared-KV layer a k or v is bound but
// unused, as llama.cpp does); v optional: without it V is K's projection (llama.cpp's use_alternative_attention).
Result<void> bind_gemma4_qkv(Binder& b, const ModelConfig& c, const std::string& p, int il, LayerWeights& l) {
  auto wq = b.matrix(p + "attn_q.weight", c.dim, c.q_dim_of(il));
  if (!wq) return wq.error();
  l.wq = *wq;
  for (const char* name : {"attn_k.weight", "attn_v.weight"}) {
    const bool needed = c.has_kv(il) && std::string_view(name) == "attn_k.weight";
    if (!needed && !b.has(p + name)) continue;
    auto m = b.matrix(p + name, c.dim, c.kv_dim_of(il));
    if (!m) return m.error();
    if (c.has_kv(il)) (std::string_view(name) == "attn_k.weight" ? l.wk : l.wv) = *m;
  }
  return {};
}

Result<void> bind_qkv(Binder& b, const ModelConfig& c, const std::string& p, int il, LayerWeights& l) {
  if (c.fused_qkv_ffn) {
    auto qkv = b.matrix(p + "attn_qkv.weight", c.dim, c.q_dim() + 2 * c.kv_dim());
    if (!qkv) return qkv.error();
    l.wq = rows_of(*qkv, 0, c.q_dim());
    l.wk = rows_of(*qkv, c.q_dim(), c.kv_dim());
    l.wv = rows_of(*qkv, c.q_dim() + c.kv_dim(), c.kv_dim());
    return {};
  }
  if (c.gemma4) return bind_gemma4_qkv(b, c, p, il, l);
  auto wq = b.matrix(p + "attn_q.weight", c.dim, (c.attn_output_gate ? 2 : 1) * int64_t{c.q_dim()});
  auto wk = b.matrix(p + "attn_k.weight", c.dim, c.kv_dim());
  auto wv = b.matrix(p + "attn_v.weight", c.dim, c.kv_dim());
  for (const auto* m : {&wq, &wk, &wv}) {
    if (!*m) return m->error();
  }
  l.wq = *wq;
  l.wk = *wk;
  l.wv = *wv;
  return {};
}

// gate and up: separate matrices, or (phi3) one ffn_up.weight of 2 × ffn_dim rows, gate first: llama.cpp's
// LLM_FFN_SWIGLU takes silu of the first half of the product and multiplies it by the second.
Result<void> bind_gate_up(Binder& b, const ModelConfig& c, const std::string& p, int il, LayerWeights& l) {
  if (c.fused_qkv_ffn) {
    auto gate_up = b.matrix(p + "ffn_up.weight", c.dim, 2 * int64_t{c.ffn_dim});
    if (!gate_up) return gate_up.error();
    l.w_gate = rows_of(*gate_up, 0, c.ffn_dim);
    l.w_up = rows_of(*gate_up, c.ffn_dim, c.ffn_dim);
    return {};
  }
  auto gate = b.matrix(p + "ffn_gate.weight", c.dim, c.ffn_dim_of(il));
  auto up = b.matrix(p + "ffn_up.weight", c.dim, c.ffn_dim_of(il));
  for (const auto* m : {&gate, &up}) {
    if (!*m) return m->error();
  }
  l.w_gate = *gate;
  l.w_up = *up;
  return {};
}

// qwen35moe's shared expert, with llama.cpp's names and shapes (GGML order): ffn_gate_inp_shexp [dim] (or [dim, 1]),
// ffn_gate_shexp and ffn_up_shexp [dim, shared_ffn], ffn_down_shexp [shared_ffn, dim].
Result<void> bind_shared_expert(Binder& b, const ModelConfig& c, const std::string& p, MoeLayerWeights& moe) {
  const int32_t ff = c.moe.shared_ffn_dim;
  auto gate_inp = b.vector(p + "ffn_gate_inp_shexp.weight", c.dim);
  if (!gate_inp) return gate_inp.error();
  auto gate = b.matrix(p + "ffn_gate_shexp.weight", c.dim, ff);
  if (!gate) return gate.error();
  auto up = b.matrix(p + "ffn_up_shexp.weight", c.dim, ff);
  if (!up) return up.error();
  auto down = b.matrix(p + "ffn_down_shexp.weight", ff, c.dim);
  if (!down) return down.error();
  moe.shared_gate_inp = std::move(*gate_inp);
  moe.shared_gate = *gate;
  moe.shared_up = *up;
  moe.shared_down = *down;
  return {};
}

// A MoE layer's router and experts, with llama.cpp's qwen3moe names and shapes (GGML order):
// ffn_gate_inp [dim, n_expert], ffn_gate_exps and ffn_up_exps [dim, expert_ffn, n_expert], ffn_down_exps
// [expert_ffn, dim, n_expert].
Result<void> bind_moe(Binder& b, const ModelConfig& c, const std::string& p, LayerWeights& l) {
  const MoeRouting& r = c.moe;
  auto router = b.matrix(p + "ffn_gate_inp.weight", c.dim, r.n_expert);
  if (!router) return router.error();
  auto gate = b.experts(p + "ffn_gate_exps.weight", c.dim, r.ffn_dim, r.n_expert);
  if (!gate) return gate.error();
  auto up = b.experts(p + "ffn_up_exps.weight", c.dim, r.ffn_dim, r.n_expert);
  if (!up) return up.error();
  auto down = b.experts(p + "ffn_down_exps.weight", r.ffn_dim, c.dim, r.n_expert);
  if (!down) return down.error();
  l.moe = MoeLayerWeights{*router, std::move(*gate), std::move(*up), std::move(*down)};
  if (r.shared_ffn_dim > 0) HEARTH_TRY(bind_shared_expert(b, c, p, l.moe));
  if (!r.biases) return {};
  // gpt-oss: ffn_gate_inp.bias [n_expert]; ffn_gate_exps.bias and ffn_up_exps.bias [expert_ffn, n_expert];
  // ffn_down_exps.bias [dim, n_expert].
  auto router_bias = b.vector(p + "ffn_gate_inp.bias", r.n_expert);
  if (!router_bias) return router_bias.error();
  auto gate_bias = b.rows(p + "ffn_gate_exps.bias", r.ffn_dim, r.n_expert);
  if (!gate_bias) return gate_bias.error();
  auto up_bias = b.rows(p + "ffn_up_exps.bias", r.ffn_dim, r.n_expert);
  if (!up_bias) return up_bias.error();
  auto down_bias = b.rows(p + "ffn_down_exps.bias", c.dim, r.n_expert);
  if (!down_bias) return down_bias.error();
  l.moe.router_bias = std::move(*router_bias);
  l.moe.gate_bias = std::move(*gate_bias);
  l.moe.up_bias = std::move(*up_bias);
  l.moe.down_bias = std::move(*down_bias);
  return {};
}

// gemma4's experts (26B-A4B) beside its dense FFN, with llama.cpp's names: the router ffn_gate_inp [dim, n_expert]
// and its input scale ffn_gate_inp.scale [dim]; the experts as qwen3moe's, or gate and up fused in
// ffn_gate_up_exps [dim, 2 × expert_ffn, n_expert] (each expert's gate rows, then its up rows); ffn_down_exps.scale
// [n_expert] (optional); the norms pre_ffw_norm_2, post_ffw_norm_1 and post_ffw_norm_2 [dim].
Result<void> bind_gemma4_moe(Binder& b, const ModelConfig& c, const std::string& p, LayerWeights& l) {
  const MoeRouting& r = c.moe;
  auto router = b.matrix(p + "ffn_gate_inp.weight", c.dim, r.n_expert);
  if (!router) return router.error();
  l.moe.router = *router;
  if (b.has(p + "ffn_gate_up_exps.weight")) {
    auto gate_up = b.experts(p + "ffn_gate_up_exps.weight", c.dim, 2 * int64_t{r.ffn_dim}, r.n_expert);
    if (!gate_up) return gate_up.error();
    for (const MatrixView& m : *gate_up) {
      l.moe.gate.push_back(rows_of(m, 0, r.ffn_dim));
      l.moe.up.push_back(rows_of(m, r.ffn_dim, r.ffn_dim));
    }
  } else {
    auto gate = b.experts(p + "ffn_gate_exps.weight", c.dim, r.ffn_dim, r.n_expert);
    if (!gate) return gate.error();
    auto up = b.experts(p + "ffn_up_exps.weight", c.dim, r.ffn_dim, r.n_expert);
    if (!up) return up.error();
    l.moe.gate = std::move(*gate);
    l.moe.up = std::move(*up);
  }
  auto down = b.experts(p + "ffn_down_exps.weight", r.ffn_dim, c.dim, r.n_expert);
  if (!down) return down.error();
  l.moe.down = std::move(*down);
  if (b.has(p + "ffn_down_exps.scale")) {
    auto scale = b.vector(p + "ffn_down_exps.scale", r.n_expert);
    if (!scale) return scale.error();
    l.moe.down_scale = std::move(*scale);
  }
  auto router_scale = b.vector(p + "ffn_gate_inp.scale", c.dim);
  if (!router_scale) return router_scale.error();
  l.router_scale = std::move(*router_scale);
  for (auto [name, norm] : {std::pair{"pre_ffw_norm_2.weight", &l.pre_ffn_norm_2},
                            {"post_ffw_norm_1.weight", &l.post_ffn_norm_1},
                            {"post_ffw_norm_2.weight", &l.post_ffn_norm_2}}) {
    auto v = b.vector(p + name, c.dim);
    if (!v) return v.error();
    *norm = std::move(*v);
  }
  return {};
}

// The dense FFN's matrices: gate and up (bind_gate_up), down.
Result<void> bind_dense_ffn(Binder& b, const ModelConfig& c, const std::string& p, int il, LayerWeights& l) {
  HEARTH_TRY(bind_gate_up(b, c, p, il, l));
  auto down = b.matrix(p + "ffn_down.weight", c.ffn_dim_of(il), c.dim);
  if (!down) return down.error();
  l.w_down = *down;
  return {};
}

// qwen3next's fused DeltaNet projections (config.h): ssm_ba [dim, 2 n_v_heads] always, and ssm_in [dim, 2 key_dim +
// 2 value_dim] unless the file has the newer attn_qkv (then bind_delta_net binds attn_qkv and attn_gate).
Result<void> bind_delta_net_grouped(Binder& b, const ModelConfig& c, const std::string& p, LayerWeights& l) {
  const DeltaNetConfig& d = c.delta_net;
  auto ba = b.matrix(p + "ssm_ba.weight", c.dim, 2 * int64_t{d.n_v_heads});
  if (!ba) return ba.error();
  l.ssm_ba = *ba;
  if (b.has(p + "attn_qkv.weight")) return {};
  auto in = b.matrix(p + "ssm_in.weight", c.dim, int64_t{d.conv_channels()} + d.value_dim());
  if (!in) return in.error();
  l.ssm_in = *in;
  return {};
}

// A Gated DeltaNet layer's tensors, with llama.cpp's qwen35 names and shapes (GGML order): attn_qkv [dim,
// conv_channels], attn_gate [dim, value_dim], ssm_conv1d [d_conv, conv_channels], ssm_dt.bias and ssm_a [n_v_heads],
// ssm_beta and ssm_alpha [dim, n_v_heads], ssm_norm [d_state], ssm_out [value_dim, dim].
Result<void> bind_delta_net(Binder& b, const ModelConfig& c, const std::string& p, LayerWeights& l) {
  const DeltaNetConfig& d = c.delta_net;
  if (d.grouped_heads) HEARTH_TRY(bind_delta_net_grouped(b, c, p, l));
  const bool fused_in = l.ssm_in.data != nullptr;
  auto qkv = fused_in ? Result<MatrixView>(MatrixView{}) : b.matrix(p + "attn_qkv.weight", c.dim, d.conv_channels());
  auto z = fused_in ? Result<MatrixView>(MatrixView{}) : b.matrix(p + "attn_gate.weight", c.dim, d.value_dim());
  auto beta = d.grouped_heads ? Result<MatrixView>(MatrixView{}) : b.matrix(p + "ssm_beta.weight", c.dim, d.n_v_heads);
  auto alpha =
      d.grouped_heads ? Result<MatrixView>(MatrixView{}) : b.matrix(p + "ssm_alpha.weight", c.dim, d.n_v_heads);
  auto out = b.matrix(p + "ssm_out.weight", d.value_dim(), c.dim);
  for (const auto* m : {&qkv, &z, &beta, &alpha, &out}) {
    if (!*m) return m->error();
  }
  auto conv = b.rows(p + "ssm_conv1d.weight", d.d_conv, d.conv_channels());
  auto dt_bias = b.vector(p + "ssm_dt.bias", d.n_v_heads);
  auto a = b.vector(p + "ssm_a", d.n_v_heads);
  auto norm = b.vector(p + "ssm_norm.weight", d.d_state);
  for (const auto* v : {&conv, &dt_bias, &a, &norm}) {
    if (!*v) return v->error();
  }
  l.ssm_qkv = *qkv;
  l.ssm_z = *z;
  l.ssm_beta = *beta;
  l.ssm_alpha = *alpha;
  l.ssm_out = *out;
  l.ssm_conv = std::move(*conv);
  l.ssm_dt_bias = std::move(*dt_bias);
  l.ssm_a = std::move(*a);
  l.ssm_norm = std::move(*norm);
  return {};
}

// The attention half of a layer: q/k/v (with biases and q/k norms as the architecture has them) and the output.
Result<void> bind_attention(Binder& b, const ModelConfig& c, const std::string& p, int il, LayerWeights& l) {
  HEARTH_TRY(bind_qkv(b, c, p, il, l));
  auto wo = b.matrix(p + "attn_output.weight", c.q_dim_of(il), c.dim);
  if (!wo) return wo.error();
  l.wo = *wo;
  HEARTH_TRY(bind_qkv_bias(b, c, p, l));
  return bind_qk_norm(b, c, p, il, l);
}

// gemma4's per-layer embedding branch (when per_layer_dim > 0) and the optional layer output scale.
Result<void> bind_gemma4_layer_extras(Binder& b, const ModelConfig& c, const std::string& p, LayerWeights& l) {
  if (c.per_layer_dim > 0) {
    auto gate = b.matrix(p + "inp_gate.weight", c.dim, c.per_layer_dim);
    if (!gate) return gate.error();
    auto proj = b.matrix(p + "proj.weight", c.per_layer_dim, c.dim);
    if (!proj) return proj.error();
    auto norm = b.vector(p + "post_norm.weight", c.dim);
    if (!norm) return norm.error();
    l.ple_gate = *gate;
    l.ple_proj = *proj;
    l.ple_post_norm = std::move(*norm);
  }
  if (b.has(p + "layer_output_scale.weight")) {
    auto scale = b.vector(p + "layer_output_scale.weight", 1);
    if (!scale) return scale.error();
    l.out_scale = std::move(*scale);
  }
  return {};
}

Result<LayerWeights> bind_layer(Binder& b, const ModelConfig& c, int il) {
  const std::string p = fmt::format("blk.{}.", il);
  LayerWeights l;
  auto attn_norm = b.vector(p + "attn_norm.weight", c.dim);
  if (!attn_norm) return attn_norm.error();
  // gpt-oss and qwen35(moe) name the FFN's input norm post_attention_norm (it follows the attention's residual add).
  const bool post_attention_ffn_norm = c.architecture == "gpt-oss" || c.architecture == "qwen35" ||
                                       c.architecture == "qwen35moe" || c.architecture == "qwen3next";
  auto ffn_norm = b.vector(p + (post_attention_ffn_norm ? "post_attention_norm.weight" : "ffn_norm.weight"), c.dim);
  if (!ffn_norm) return ffn_norm.error();
  l.attn_norm = std::move(*attn_norm);
  l.ffn_norm = std::move(*ffn_norm);
  if (c.is_recurrent(il)) {
    HEARTH_TRY(bind_delta_net(b, c, p, l));
    HEARTH_TRY(c.is_moe() ? bind_moe(b, c, p, l) : bind_dense_ffn(b, c, p, il, l));  // qwen35moe: experts
    return l;
  }
  HEARTH_TRY(bind_attention(b, c, p, il, l));
  if (c.attn_out_bias) {
    auto bo = b.vector(p + "attn_output.bias", c.dim);
    if (!bo) return bo.error();
    l.bo = std::move(*bo);
  }
  if (c.attn_sinks) {
    auto sinks = b.vector(p + "attn_sinks.weight", c.n_heads);
    if (!sinks) return sinks.error();
    for (size_t h = 0; h < sinks->size(); ++h) {
      if (!std::isfinite((*sinks)[h])) {
        return make_error("{}: {}attn_sinks.weight[{}] = {} is not a finite number", b.file_name(), p, h, (*sinks)[h]);
      }
    }
    l.attn_sinks = std::move(*sinks);
  }
  if (c.has_dense_ffn()) HEARTH_TRY(bind_dense_ffn(b, c, p, il, l));
  if (c.is_moe()) HEARTH_TRY(c.gemma4 ? bind_gemma4_moe(b, c, p, l) : bind_moe(b, c, p, l));
  if (c.gemma4) HEARTH_TRY(bind_gemma4_layer_extras(b, c, p, l));
  if (c.gemma) {
    auto attn_post = b.vector(p + "post_attention_norm.weight", c.dim);
    if (!attn_post) return attn_post.error();
    auto ffn_post = b.vector(p + "post_ffw_norm.weight", c.dim);
    if (!ffn_post) return ffn_post.error();
    l.attn_post_norm = std::move(*attn_post);
    l.ffn_post_norm = std::move(*ffn_post);
  }
  return l;
}

// One divisor per rotated pair, as ggml's rope applies its freq_factors (theta_i / freq_factors[i]): Llama
// 3.1/3.2's rope_freqs.weight, or phi3's LongRoPE factors, long or short by the context (config.h).
Result<std::vector<float>> bind_divisors(Binder& b, const ModelConfig& c, const char* name) {
  auto freqs = b.vector(name, c.rope_dim / 2);
  if (!freqs) return freqs.error();
  for (size_t i = 0; i < freqs->size(); ++i) {
    const float f = (*freqs)[i];
    if (!(f > 0.0f) || !std::isfinite(f)) {
      return make_error("{}: {}[{}] = {} is not a positive number", b.file_name(), name, i, f);
    }
  }
  return freqs;
}

Result<void> bind_rope_freqs(Binder& b, const ModelConfig& c, ModelWeights& w) {
  const char* const long_name = "rope_factors_long.weight";
  const char* const short_name = "rope_factors_short.weight";
  if (c.rope_factors_allowed && (b.has(long_name) || b.has(short_name))) {
    // Both or neither: with one alone the other context range would silently rotate without factors.
    for (const char* name : {long_name, short_name}) {
      if (!b.has(name)) {
        return make_error("{}: LongRoPE needs both rope_factors_long.weight and rope_factors_short.weight; '{}' is "
                          "missing",
                          b.file_name(), name);
      }
    }
    auto longs = bind_divisors(b, c, long_name);
    auto shorts = bind_divisors(b, c, short_name);  // bound either way, so both are checked and neither is unknown
    if (!longs) return longs.error();
    if (!shorts) return shorts.error();
    w.rope_freqs = c.rope_uses_long_factors() ? std::move(*longs) : std::move(*shorts);
    return {};
  }
  if (!c.rope_freqs_allowed || !b.has("rope_freqs.weight")) return {};
  auto freqs = bind_divisors(b, c, "rope_freqs.weight");
  if (!freqs) return freqs.error();
  w.rope_freqs = std::move(*freqs);
  return {};
}

// gemma4: the global layers' rope_freqs.weight (partial rotary: 1e30 divisors for the pairs that do not turn;
// optional) and the per-layer embeddings' model-wide tensors.
Result<void> bind_gemma4_model_extras(Binder& b, const ModelConfig& c, ModelWeights& w) {
  if (b.has("rope_freqs.weight")) {
    auto freqs = bind_divisors(b, c, "rope_freqs.weight");
    if (!freqs) return freqs.error();
    w.rope_freqs = std::move(*freqs);
  }
  if (c.per_layer_dim == 0) return {};
  const int64_t width = int64_t{c.n_layers} * c.per_layer_dim;
  auto embd = b.matrix("per_layer_token_embd.weight", width, c.n_vocab);
  if (!embd) return embd.error();
  auto proj = b.matrix("per_layer_model_proj.weight", c.dim, width);
  if (!proj) return proj.error();
  auto norm = b.vector("per_layer_proj_norm.weight", c.per_layer_dim);
  if (!norm) return norm.error();
  if (c.per_layer_dim % dtype_info(embd->type).block_size != 0) {
    return make_error("{}: per_layer_token_embd.weight is {}, whose blocks do not divide the per-layer width {}",
                      b.file_name(), dtype_name(embd->type), c.per_layer_dim);
  }
  w.ple_token_embd = *embd;
  w.ple_model_proj = *proj;
  w.ple_proj_norm = std::move(*norm);
  return {};
}

// The whole pages inside [data, data + bytes).
void release_pages(const uint8_t* data, size_t bytes) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace

size_t ModelWeights::pack_matrices() {
  if (!isa_at_least(IsaLevel::kAvx2)) return 0;
  size_t bytes = 0;
  // Each original's mapped pages go back to the page cache as soon as its packed copy exists, so loading holds at
  // most one matrix twice, not the whole model (the load's peak RSS is what --memory must bound).
  auto pack = [&](MatrixView& m) {
    if (m.packed != nullptr || !packing_available(m.type)) return;
    packed.push_back(pack_matrix(m));
    m.packed = packed.back().get();
    bytes += packed.back()->bytes();
    if (m.data != token_embd.data) release_pages(m.data, m.row_stride * static_cast<size_t>(m.n_rows));
  };
  for (LayerWeights& l : layers) l.for_each_matrix(pack);
  pack(output);
  return bytes;
}

void ModelWeights::release_packed_originals() const {
  auto release = [&](const MatrixView& m) {
    if (m.packed == nullptr || m.data == token_embd.data) return;
    release_pages(m.data, m.row_stride * static_cast<size_t>(m.n_rows));
  };
  for (const LayerWeights& l : layers) l.for_each_matrix(release);
  release(output);
}

Result<ModelWeights> ModelWeights::from_gguf(const GgufFile& file, const ModelConfig& c) {
  Binder b(file);
  ModelWeights w;
  auto embd = b.matrix("token_embd.weight", c.dim, c.n_vocab);
  if (!embd) return embd.error();
  w.token_embd = *embd;
  if (c.encoder) {
    HEARTH_TRY(detail::bind_encoder(b, c, w));
    HEARTH_TRY(b.check_all_bound(c.architecture));
    return w;
  }
  auto norm = b.vector("output_norm.weight", c.dim);
  if (!norm) return norm.error();
  w.output_norm = std::move(*norm);
  // gemma2/3's output is always token_embd, as in llama.cpp; gemma4 takes an output.weight when there is one.
  if (b.has("output.weight") && (!c.gemma || c.gemma4)) {
    auto out = b.matrix("output.weight", c.dim, c.n_vocab);
    if (!out) return out.error();
    w.output = *out;
  } else {
    w.output = w.token_embd;  // tied embeddings
  }
  HEARTH_TRY(bind_rope_freqs(b, c, w));
  if (c.gemma4) HEARTH_TRY(bind_gemma4_model_extras(b, c, w));
  w.layers.reserve(c.n_layers);
  for (int il = 0; il < c.n_layers; ++il) {
    auto layer = bind_layer(b, c, il);
    if (!layer) return layer.error();
    w.layers.push_back(std::move(*layer));
  }
  w.unused_bytes = b.skip_blocks(c.n_layers, c.n_layers + c.n_nextn_layers);
  HEARTH_TRY(b.check_all_bound(c.architecture));
  return w;
}

}  // namespace hearth
