// The tensors of the encoder architectures (config.h: bert, nomic-bert), with llama.cpp's names and GGML shapes:
// token_types [dim, n_token_types], position_embd [dim, n_ctx_train] (bert), token_embd_norm.{weight,bias} [dim];
// per layer attn_q/k/v.{weight,bias} (bert) or attn_qkv.weight [dim, 3 dim] (nomic-bert), attn_output.{weight,bias},
// attn_output_norm.{weight,bias}, ffn_up and ffn_down (bert: with biases), ffn_gate (nomic-bert),
// layer_output_norm.{weight,bias}. Biases that llama.cpp treats as optional are optional here too.

#include "model/config.h"
#include "model/weights.h"
#include "model/weights_binder.h"

namespace hearth::detail {
namespace {

// A vector that llama.cpp creates with TENSOR_NOT_REQUIRED: bound when present, left empty when not.
Result<void> optional_vector(Binder& b, const std::string& name, int64_t n, std::vector<float>& out) {
  if (!b.has(name)) return {};
  auto v = b.vector(name, n);
  if (!v) return v.error();
  out = std::move(*v);
  return {};
}

Result<void> required_vector(Binder& b, const std::string& name, int64_t n, std::vector<float>& out) {
  auto v = b.vector(name, n);
  if (!v) return v.error();
  out = std::move(*v);
  return {};
}

Result<void> bind_matrix(Binder& b, const std::string& name, int64_t n_cols, int64_t n_rows, MatrixView& out) {
  auto m = b.matrix(name, n_cols, n_rows);
  if (!m) return m.error();
  out = *m;
  return {};
}

Result<void> bind_encoder_attention(Binder& b, const ModelConfig& c, const std::string& p, LayerWeights& l) {
  const int64_t q = c.q_dim();
  const int64_t kv = c.kv_dim();
  if (b.has(p + "attn_qkv.weight")) {
    MatrixView qkv;
    HEARTH_TRY(bind_matrix(b, p + "attn_qkv.weight", c.dim, q + 2 * kv, qkv));
    l.wq = rows_of(qkv, 0, q);
    l.wk = rows_of(qkv, q, kv);
    l.wv = rows_of(qkv, q + kv, kv);
    std::vector<float> bias;
    HEARTH_TRY(optional_vector(b, p + "attn_qkv.bias", q + 2 * kv, bias));
    if (!bias.empty()) {
      l.bq.assign(bias.begin(), bias.begin() + q);
      l.bk.assign(bias.begin() + q, bias.begin() + q + kv);
      l.bv.assign(bias.begin() + q + kv, bias.end());
    }
  } else {
    HEARTH_TRY(bind_matrix(b, p + "attn_q.weight", c.dim, q, l.wq));
    HEARTH_TRY(bind_matrix(b, p + "attn_k.weight", c.dim, kv, l.wk));
    HEARTH_TRY(bind_matrix(b, p + "attn_v.weight", c.dim, kv, l.wv));
  }
  if (l.bq.empty()) {
    HEARTH_TRY(optional_vector(b, p + "attn_q.bias", q, l.bq));
    HEARTH_TRY(optional_vector(b, p + "attn_k.bias", kv, l.bk));
    HEARTH_TRY(optional_vector(b, p + "attn_v.bias", kv, l.bv));
    if (l.bq.empty() != l.bk.empty() || l.bq.empty() != l.bv.empty()) {
      return make_error("{}: {}attn_q/k/v.bias: Hearth needs all three or none", b.file_name(), p);
    }
  }
  HEARTH_TRY(bind_matrix(b, p + "attn_output.weight", q, c.dim, l.wo));
  HEARTH_TRY(optional_vector(b, p + "attn_output.bias", c.dim, l.bo));
  HEARTH_TRY(required_vector(b, p + "attn_output_norm.weight", c.dim, l.attn_out_norm));
  return required_vector(b, p + "attn_output_norm.bias", c.dim, l.attn_out_norm_b);
}

Result<void> bind_encoder_ffn(Binder& b, const ModelConfig& c, const std::string& p, LayerWeights& l) {
  HEARTH_TRY(bind_matrix(b, p + "ffn_up.weight", c.dim, c.ffn_dim, l.w_up));
  HEARTH_TRY(bind_matrix(b, p + "ffn_down.weight", c.ffn_dim, c.dim, l.w_down));
  if (c.architecture == "nomic-bert") HEARTH_TRY(bind_matrix(b, p + "ffn_gate.weight", c.dim, c.ffn_dim, l.w_gate));
  HEARTH_TRY(optional_vector(b, p + "ffn_up.bias", c.ffn_dim, l.b_up));
  HEARTH_TRY(optional_vector(b, p + "ffn_down.bias", c.dim, l.b_down));
  HEARTH_TRY(required_vector(b, p + "layer_output_norm.weight", c.dim, l.layer_out_norm));
  return required_vector(b, p + "layer_output_norm.bias", c.dim, l.layer_out_norm_b);
}

}  // namespace

Result<void> bind_encoder(Binder& b, const ModelConfig& c, ModelWeights& w) {
  if (b.has("token_types.weight")) {
    auto types = b.matrix("token_types.weight", c.dim, c.n_token_types);
    if (!types) return types.error();
    w.type_embd0.resize(static_cast<size_t>(c.dim));
    dequantize_row(types->type, types->data, w.type_embd0.data(), c.dim);
  }
  if (c.architecture == "bert") HEARTH_TRY(bind_matrix(b, "position_embd.weight", c.dim, c.n_ctx_train, w.pos_embd));
  HEARTH_TRY(required_vector(b, "token_embd_norm.weight", c.dim, w.embd_norm));
  HEARTH_TRY(required_vector(b, "token_embd_norm.bias", c.dim, w.embd_norm_b));
  w.layers.resize(static_cast<size_t>(c.n_layers));
  for (int il = 0; il < c.n_layers; ++il) {
    const std::string p = fmt::format("blk.{}.", il);
    HEARTH_TRY(bind_encoder_attention(b, c, p, w.layers[il]));
    HEARTH_TRY(bind_encoder_ffn(b, c, p, w.layers[il]));
  }
  w.output = MatrixView{};  // an encoder has no LM head
  return {};
}

}  // namespace hearth::detail
