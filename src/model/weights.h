#pragma once
// ModelWeights: views of a llama-family model's tensors inside the mapped GGUF. Matrices stay in the
// mmap in their stored dtype; only the small norm vectors are converted to owned f32. phi3's fused matrices
// (attn_qkv: rows q, k, v; ffn_up: rows gate, then up) are bound as row ranges of the fused tensor, so the
// forward pass sees the same wq/wk/wv/w_gate/w_up as for any other architecture. A MoE layer's 3-D expert
// tensors are bound as one view per expert (model/moe.h).

#include <memory>
#include <vector>

#include "gguf/gguf_file.h"
#include "kernels/matmul.h"
#include "kernels/packed.h"
#include "model/config.h"
#include "model/moe.h"
#include "util/result.h"

namespace hearth {

struct LayerWeights {
  std::vector<float> attn_norm;       // [dim]
  MatrixView wq;                      // [q_dim, dim]   (rows × cols: n_rows outputs of n_cols inputs); qwen35:
                                      // [2 q_dim, dim], each head's q rows then its output gate's
  MatrixView wk;                      // [kv_dim, dim]
  MatrixView wv;                      // [kv_dim, dim]
  MatrixView wo;                      // [dim, q_dim]
  std::vector<float> bq;              // [q_dim]; empty when the model has no q/k/v biases
  std::vector<float> bk;              // [kv_dim]; empty with bq
  std::vector<float> bv;              // [kv_dim]; empty with bq
  std::vector<float> bo;              // [dim]; gpt-oss: the attention output's bias, else empty
  std::vector<float> attn_sinks;      // [n_heads]; gpt-oss: each query head's sink logit, else empty
  std::vector<float> q_norm;          // [head_dim]; per-head RMSNorm weight of q (qwen3), else empty
  std::vector<float> k_norm;          // [head_dim]; per-head RMSNorm weight of k (qwen3), else empty
  std::vector<float> attn_post_norm;  // [dim]; gemma: RMSNorm of the attention output before the residual add
  std::vector<float> ffn_norm;        // [dim]
  std::vector<float> ffn_post_norm;   // [dim]; gemma: RMSNorm of the FFN output before the residual add
  MatrixView w_gate;                  // [ffn_dim, dim]
  MatrixView w_up;                    // [ffn_dim, dim]
  MatrixView w_down;                  // [dim, ffn_dim]
  MoeLayerWeights moe;                // MoE (config.is_moe()): router, experts (and qwen35moe's shared expert)
                                      // instead of w_gate/w_up/w_down
  // A recurrent (Gated DeltaNet) layer of a hybrid model (config.is_recurrent(il); model/delta_net.h), instead of
  // wq/wk/wv/wo; llama.cpp's qwen35 names in comments.
  MatrixView ssm_qkv;              // [conv_channels, dim]  attn_qkv.weight: rows q, k, v before the convolution
  MatrixView ssm_z;                // [value_dim, dim]      attn_gate.weight: the output gate
  MatrixView ssm_beta;             // [n_v_heads, dim]      ssm_beta.weight
  MatrixView ssm_alpha;            // [n_v_heads, dim]      ssm_alpha.weight
  MatrixView ssm_out;              // [dim, value_dim]      ssm_out.weight
  // qwen3next's fused projections (config.h), instead of ssm_qkv/ssm_z and ssm_beta/ssm_alpha; empty otherwise.
  MatrixView ssm_in;               // [2 key_dim + 2 value_dim, dim]  ssm_in.weight: q, k, v, z per key head
  MatrixView ssm_ba;               // [2 n_v_heads, dim]              ssm_ba.weight: beta, alpha per key head
  std::vector<float> ssm_conv;     // [conv_channels, d_conv]  ssm_conv1d.weight, each channel's taps oldest first
  std::vector<float> ssm_dt_bias;  // [n_v_heads]  ssm_dt.bias
  std::vector<float> ssm_a;        // [n_v_heads]  ssm_a: −exp(A_log), as the converter stores it
  std::vector<float> ssm_norm;     // [d_state]    ssm_norm.weight: the gated RMSNorm's weight
  // gemma4's per-layer embeddings (config.per_layer_dim > 0), else empty: x += post_norm(proj · (gelu(gate · x) *
  // the layer's per-layer input)).
  MatrixView ple_gate;               // [per_layer_dim, dim]   blk.N.inp_gate.weight
  MatrixView ple_proj;               // [dim, per_layer_dim]   blk.N.proj.weight
  std::vector<float> ple_post_norm;  // [dim]                  blk.N.post_norm.weight
  std::vector<float> out_scale;      // [1]; gemma4: blk.N.layer_output_scale.weight scales the layer's output
  // gemma4's mixture of experts beside the dense FFN (a shared expert): ffn = post_ffn_norm(post_ffn_norm_1(dense) +
  // post_ffn_norm_2(experts(pre_ffn_norm_2(x)) routed by router_scale · RMSNorm(x) / sqrt(dim))).
  std::vector<float> pre_ffn_norm_2;   // [dim]  blk.N.pre_ffw_norm_2.weight
  std::vector<float> post_ffn_norm_1;  // [dim]  blk.N.post_ffw_norm_1.weight
  std::vector<float> post_ffn_norm_2;  // [dim]  blk.N.post_ffw_norm_2.weight
  std::vector<float> router_scale;     // [dim]  blk.N.ffn_gate_inp.scale
  // bert, nomic-bert (config.encoder): the post-norm LayerNorms and the FFN biases (bert; empty when absent).
  std::vector<float> attn_out_norm, attn_out_norm_b;    // [dim]  blk.N.attn_output_norm.{weight,bias}
  std::vector<float> layer_out_norm, layer_out_norm_b;  // [dim]  blk.N.layer_output_norm.{weight,bias}
  std::vector<float> b_up;                              // [ffn_dim]  blk.N.ffn_up.bias
  std::vector<float> b_down;                            // [dim]      blk.N.ffn_down.bias

  // Calls fn(matrix) for every matrix of the layer the matmul kernels read, experts included (unused views of the
  // other FFN kind are empty).
  template <class F>
  void for_each_matrix(F&& fn) {
    visit_matrices(*this, fn);
  }
  template <class F>
  void for_each_matrix(F&& fn) const {
    visit_matrices(*this, fn);
  }

 private:
  template <class Self, class F>
  static void visit_matrices(Self& l, F& fn) {
    for (auto* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.moe.router, &l.ple_gate, &l.ple_proj,
                    &l.ssm_qkv, &l.ssm_z, &l.ssm_beta, &l.ssm_alpha, &l.ssm_out, &l.moe.shared_gate, &l.moe.shared_up,
                    &l.moe.shared_down}) {
      fn(*m);
    }
    for (auto* m : {&l.ssm_in, &l.ssm_ba}) {
      fn(*m);
    }
    for (auto* experts : {&l.moe.gate, &l.moe.up, &l.moe.down}) {
      for (auto& m : *experts) fn(m);
    }
  }
};

struct ModelWeights {
  MatrixView token_embd;           // [n_vocab, dim]
  std::vector<float> output_norm;  // [dim]
  MatrixView output;               // [n_vocab, dim]; token_embd when the output matrix is tied
  std::vector<float> rope_freqs;   // [rope_dim / 2]; pair i's frequency is divided by rope_freqs[i]; empty: none
                                   // (gemma4: the global layers' only)
  // gemma4's per-layer embeddings (config.per_layer_dim > 0), else empty.
  MatrixView ple_token_embd;         // [n_vocab, n_layers × per_layer_dim]  per_layer_token_embd.weight
  MatrixView ple_model_proj;         // [n_layers × per_layer_dim, dim]      per_layer_model_proj.weight
  std::vector<float> ple_proj_norm;  // [per_layer_dim]                      per_layer_proj_norm.weight
  // bert, nomic-bert (config.encoder): the input's extra embeddings and LayerNorm; empty otherwise.
  MatrixView pos_embd;                        // [n_ctx_train, dim]  position_embd.weight (bert)
  std::vector<float> type_embd0;              // [dim]  row 0 of token_types.weight, added to every token
  std::vector<float> embd_norm, embd_norm_b;  // [dim]  token_embd_norm.{weight,bias}
  std::vector<LayerWeights> layers;
  // The packed copies (kernels/packed.h) that the views' `packed` point to; empty when the active ISA level or the
  // weight types have no packed tiles.
  std::vector<std::unique_ptr<PackedMatrix>> packed;
  // Bytes of the tensors bound to nothing: the multi-token-prediction blocks (config.n_nextn_layers), mapped and
  // never read, so never resident (model_memory.h leaves them out).
  int64_t unused_bytes = 0;

  // Packs every layer matrix and the output matrix whose type has a packed layout, when the active ISA level reads
  // packed weights. Returns the bytes of the packed copies.
  size_t pack_matrices();

  // Hands the mapped pages of every packed matrix back to the page cache (madvise MADV_DONTNEED): matmul reads the
  // packed copy, so the original costs no resident memory until something reads it again (the fingerprint, another
  // ISA level), which faults it back in from the file. The token embedding, read row by row, is never released.
  void release_packed_originals() const;

  // Binds every tensor of `config` in `file`. Fails naming the first tensor that is missing, has the
  // wrong shape, or has a dtype Hearth cannot compute with, or, for the norm vectors and any tensor of at most
  // 2^20 elements (cheap to scan), holds a NaN or an infinity (larger matrices are not scanned); and naming any
  // tensor of the file that the architecture does not use (a tensor Hearth would ignore means Hearth would
  // compute the wrong model).
  [[nodiscard]] static Result<ModelWeights> from_gguf(const GgufFile& file, const ModelConfig& config);
};

}  // namespace hearth
