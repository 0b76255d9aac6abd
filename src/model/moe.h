#pragma once
// The mixture-of-experts FFN, one implementation for every MoE family (qwen3moe, qwen35moe, gpt-oss, Gemma 4's
// experts). For each token x (already normed):
//
//   logits = router · x (+ router bias)                   [n_expert]
//   p      = softmax(logits)                              (MoeRouting::gating kSoftmax; kSoftmaxWeight: p = logits)
//   E      = the n_used experts of highest p, most probable first (ties: the lower id)
//   w_e    = p_e, / Σ_{E} p_e when norm_weights           (the sum clamped below at 2^-14, as llama.cpp);
//            kSoftmaxWeight: softmax over the chosen logits
//   out    = Σ_{e in E, in that order} w_e · s_e · down_e(act(gate_e · x, up_e · x))   (each product + its bias, if
//            any; act: silu(g) ⊙ u, gpt-oss's clamped SwiGLU or gemma4's gelu(g) ⊙ u: MoeRouting::activation; s_e:
//            gemma4's per-expert scale of the down product, else 1)
// The router may read another input than the experts (gemma4: a scaled RMSNorm of the residual).
// qwen35moe adds a shared expert that every token runs, gated by a sigmoid of its own logit (MoeRouting::
// shared_ffn_dim > 0), as llama.cpp's qwen35moe graph:
//
//   out   += sigmoid(shared_gate_inp · x) · shared_down(silu(shared_gate · x) ⊙ shared_up · x)
//
// as llama.cpp's build_moe_ffn computes it. A 3-D expert tensor [n_cols, n_rows, n_expert] is n_expert stacked
// matrices, each multiplied with the ordinary matmul kernels.
//
// Work: the batch's (token, expert) pairs are grouped by expert, so each chosen expert's matrices are read once per
// step whatever number of tokens chose it (prefill), and an expert no token chose is never read (decode reads only
// its token's n_used experts). Determinism: matmul's rows are batch-invariant, the routing of a token reads only its
// own logits, and its weighted sum runs in its own choice order, so a token's output has the same bits whichever
// other tokens share the batch and however prefill is chunked.

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/matmul.h"
#include "model/config.h"
#include "util/thread_pool.h"

namespace hearth {

// One layer's experts: views into the mapped file (or their packed copies).
struct MoeLayerWeights {
  MatrixView router;             // [n_expert, dim]  (ffn_gate_inp)
  std::vector<MatrixView> gate;  // n_expert × [expert_ffn, dim]  (ffn_gate_exps)
  std::vector<MatrixView> up;    // n_expert × [expert_ffn, dim]  (ffn_up_exps)
  std::vector<MatrixView> down;  // n_expert × [dim, expert_ffn]  (ffn_down_exps)
  // gpt-oss (MoeRouting::biases): added to the router's logits and to each expert's products; empty otherwise.
  std::vector<float> router_bias;  // [n_expert]
  std::vector<float> gate_bias;    // [n_expert, expert_ffn]
  std::vector<float> up_bias;      // [n_expert, expert_ffn]
  std::vector<float> down_bias;    // [n_expert, dim]
  // gemma4: each expert's down product × down_scale[e] (ffn_down_exps.scale); empty otherwise.
  std::vector<float> down_scale;  // [n_expert]
  // qwen35moe's shared expert (MoeRouting::shared_ffn_dim > 0); empty views and vector otherwise.
  std::vector<float> shared_gate_inp;  // [dim]  (ffn_gate_inp_shexp): the shared expert's gate logit
  MatrixView shared_gate;              // [shared_ffn, dim]  (ffn_gate_shexp)
  MatrixView shared_up;                // [shared_ffn, dim]  (ffn_up_shexp)
  MatrixView shared_down;              // [dim, shared_ffn]  (ffn_down_shexp)
};

// The shared expert's contribution to one token, the scalar twin of MoeFfn's batched version (matmul_reference,
// std::exp; tests check the engine against it):
//   out[d] += sigmoid(shared_gate_inp · x) · (shared_down · (silu(shared_gate · x) ⊙ (shared_up · x)))[d]
//                                                                                     x: [dim]; out: [dim]
void shared_expert_reference(const MoeLayerWeights& weights, const float* x, float* out);

// One routed expert of a token.
struct ExpertChoice {
  int32_t expert = 0;
  float weight = 0.0f;
};

// Routes one token: fills `choices` [routing.n_used] from its router logits [routing.n_expert], most probable
// expert first. `probs` [routing.n_expert] is scratch.
void route_token(const MoeRouting& routing, std::span<const float> logits, std::span<float> probs,
                 std::span<ExpertChoice> choices);

// The MoE FFN with its scratch, which grows to the largest batch seen and is then reused (no allocation per step).
class MoeFfn {
 public:
  // out = the mixture of experts of each row of x, routed by router_x (nullptr: x).
  //                                                     x, router_x, out: [n_tokens, dim]; out must not alias them
  // Requires weights shaped as `routing` says and dim = weights.router.n_cols.
  void forward(const MoeLayerWeights& weights, const MoeRouting& routing, const float* x, int64_t n_tokens, float* out,
               ThreadPool& pool, MatmulScratch& matmul_scratch, const float* router_x = nullptr);

  // Bytes its buffers hold now, and what they grow to for a batch of n_tokens rows of width dim (matmul scratch
  // not included: the caller's).
  [[nodiscard]] int64_t scratch_bytes() const;
  [[nodiscard]] static int64_t scratch_bytes_for(const MoeRouting& routing, int64_t dim, int64_t n_tokens);

 private:
  void route(const MoeLayerWeights& weights, const MoeRouting& routing, const float* x, int64_t n_tokens,
             ThreadPool& pool, MatmulScratch& matmul_scratch);
  // Orders the (token, choice) pairs by expert: the rows of each expert are consecutive, in token order.
  void group_by_expert(const MoeRouting& routing, int64_t n_tokens);
  void run_experts(const MoeLayerWeights& weights, const MoeRouting& routing, const float* x, ThreadPool& pool,
                   MatmulScratch& matmul_scratch);
  void combine(const MoeRouting& routing, int64_t n_tokens, int64_t dim, float* out, ThreadPool& pool) const;
  // out += the gated shared expert of each row of x (qwen35moe).
  void add_shared_expert(const MoeLayerWeights& weights, const MoeRouting& routing, const float* x, int64_t n_tokens,
                         float* out, ThreadPool& pool, MatmulScratch& matmul_scratch);

  std::vector<float> logits_;               // [n_tokens, n_expert]
  std::vector<float> probs_;                // [n_expert]
  std::vector<ExpertChoice> choices_;       // [n_tokens, n_used]
  std::vector<int32_t> expert_begin_;       // [n_expert + 1]: expert e's rows are [begin[e], begin[e + 1])
  std::vector<int32_t> next_row_;           // [n_expert]: grouping's next free row of each expert
  std::vector<int32_t> row_of_choice_;      // [n_tokens × n_used]: the grouped row of each choice
  std::vector<int32_t> token_of_row_;       // [n_tokens × n_used]
  std::vector<float> x_rows_;               // [n_tokens × n_used, dim]: x gathered by expert
  std::vector<float> gate_rows_, up_rows_;  // [n_tokens × n_used, expert_ffn]
  std::vector<float> down_rows_;            // [n_tokens × n_used, dim]
  std::vector<float> shared_gate_rows_, shared_up_rows_;  // [n_tokens, shared_ffn]
  std::vector<float> shared_out_;                         // [n_tokens, dim]
};

}  // namespace hearth
