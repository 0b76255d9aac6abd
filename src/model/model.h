#pragma once
// Model: a llama-family transformer on the CPU (llama, mistral, smollm, phi3, qwen2, qwen3, gemma2, gemma3, gemma4,
// qwen3moe and gpt-oss with a mixture-of-experts FFN (moe.h), and the hybrids qwen35 and qwen35moe: see config.h).
// It owns the mapped GGUF, the weight views and the forward scratch. K/V memory is passed in (KvStorage) and addressed
// through each sequence's block table, so the same forward pass serves one sequence or a batch of many, cold or from a
// prefix cache.

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "kernels/matmul.h"
#include "model/config.h"
#include "model/kv_storage.h"
#include "model/model_memory.h"
#include "model/moe.h"
#include "model/weights.h"
#include "util/ids.h"
#include "util/result.h"
#include "util/thread_pool.h"

namespace hearth {

// One sequence's slice of a batch. Its tokens are rows [first_row, first_row + n_tokens) of the batch and sit
// at positions [pos_begin, pos_begin + n_tokens); positions before pos_begin are already in the KV blocks.
struct BatchSequence {
  int32_t first_row = 0;
  int32_t n_tokens = 0;
  int32_t pos_begin = 0;
  std::span<const BlockId> block_table;  // must cover positions [0, pos_begin + n_tokens)
  bool want_logits = false;              // produce logits for the last token
  int32_t n_logits = 1;                  // with want_logits: for the last n_logits tokens (speculative verification)
  // With window slabs (KvStorage::windowed layers): each block's slab, BlockId{-1} where none is held; it must
  // hold every position those layers read or write this step. Empty otherwise.
  std::span<const BlockId> window_table;
  // Hybrid models: the sequence's recurrent-state slot in KvStorage (reserve_state_slots); see Model::forward.
  int32_t state_slot = 0;
  // Hybrid models: for each checkpoint with slot >= 0, the state after the token before position pos
  // (pos_begin < pos <= pos_begin + n_tokens) is also copied into that slot, as the forward passes it.
  struct StateCheckpoint {
    int32_t pos = -1;
    int32_t slot = -1;
  };
  static constexpr size_t kMaxCheckpoints = 4;
  std::array<StateCheckpoint, kMaxCheckpoints> checkpoints{};
};

struct BatchInput {
  std::span<const TokenId> tokens;  // [n_tokens]
  std::span<const BatchSequence> seqs;
};

class Model {
 public:
  // Binds config and weights of an opened GGUF. Fails naming what is missing or unsupported.
  [[nodiscard]] static Result<std::unique_ptr<Model>> load(std::shared_ptr<const GgufFile> file);

  const ModelConfig& config() const { return config_; }
  const GgufFile& file() const { return *file_; }

  // Bytes of the weight copies packed at load for the packed tiles (kernels/packed.h); 0 when none were made. They
  // are resident memory beyond the mapped file, whose pages of the packed matrices are handed back after packing.
  size_t packed_bytes() const { return packed_bytes_; }

  // What this model holds in memory beside its KV pool now (model_memory.h): resident weights, and the forward
  // scratch as large as the largest step so far made it.
  [[nodiscard]] ModelMemory memory() const;

  // The name of the ISA level the kernels run at now (kernels/cpu_isa.h), for reports.
  static const char* kernel_isa();
  // The decode tiles' prefetch policy (DecodePrefetch, kernels/packed.h), for reports: speed only, no bit.
  static const char* kernel_decode_prefetch();
  // Which arithmetic computes the K/V and logits: the ISA level and kNumericsVersion, e.g. "avx512vnni/n2". Cache
  // namespaces include it, so K/V that a disk tier kept from another build or another CPU, computed with other
  // bits, never counts as a hit (a hit must give the bits a miss would).
  static std::string kernel_arithmetic();
  // Raised whenever a change makes any kernel produce other bits (2: SiLU's polynomial exp, RMS norm's lanes).
  static constexpr int kNumericsVersion = 2;

  // Hands the mapped pages of the packed matrices back again, after something read them (the fingerprint).
  void release_packed_originals() const { weights_.release_packed_originals(); }

  // Runs the batch: writes each token's K/V into `kv` at its position, then returns logits
  // [n_logit_rows, n_vocab], n_logits rows per sequence with want_logits (its last tokens, in order), in sequence
  // order. The returned span stays valid until the next call. Logits of a token depend only on the sequence's tokens,
  // never on how the batch was formed or chunked: results are bitwise reproducible. Requires: token ids < n_vocab,
  // block tables covering every position, kv shaped for this model.
  //
  // Hybrid models (config().is_hybrid(): Gated DeltaNet layers, model/delta_net.cpp) also carry each sequence's
  // recurrent state in kv's state slot `state_slot` (KvStorage::reserve_state_slots with
  // config().recurrent_state_floats() floats; one slot per sequence of the batch, no two sharing one). A sequence with
  // pos_begin 0 starts from a zero state (its slot is cleared first); any other must find in its slot the state its
  // own tokens [0, pos_begin) left there, and the forward leaves the state after its last token. The state after
  // token t has the same bits however the tokens before it were batched or chunked (kernels/delta_net.h), so
  // resuming from a copy of a slot taken after token t gives the bits of a cold run.
  std::span<const float> forward(const BatchInput& batch, KvStorage& kv, ThreadPool& pool);

  // Runs the batch as forward() does (K/V written, recurrent states advanced) but returns, instead of logits, every
  // row's final hidden state after the output norm, before the LM head: [n_tokens, dim], in batch row order, what
  // embedding pooling (pooling.h) reads. want_logits is ignored. Valid until the next call.
  // Encoders (config().encoder: bert, nomic-bert) have no output norm and attend bidirectionally: each sequence must
  // come whole (pos_begin 0), and forward() (logits) must not be called on them.
  std::span<const float> forward_hidden(const BatchInput& batch, KvStorage& kv, ThreadPool& pool);

 private:
  Model(std::shared_ptr<const GgufFile> file, ModelConfig config, ModelWeights weights);

  // One unit of attention work: rows [row0, row0 + n_rows) of sequence `seq` against KV head `kv_head`.
  // Rows [row0, row_end) of one sequence for KV heads [kv_head, kv_head + n_kv_heads): tiles of at most kAttnRows
  // rows (model.cpp), the earliest first, one after another on one thread.
  friend int64_t estimate_scratch_bytes(const ModelConfig& c, const ModelWeights& w, const ForwardShape& shape);
  struct AttnItem {
    int32_t seq, kv_head, n_kv_heads, row0, row_end;
  };
  // The work items of the layers that attend with n_kv_heads KV heads (gemma4's layers differ).
  struct AttnItemSet {
    int32_t n_kv_heads = 0;
    std::vector<AttnItem> items;
  };
  struct Scratch {
    std::vector<float> x, xn, q, k, v, attn, proj, gate, up;  // [n_tokens, width]
    std::vector<float> q_gate, attn_gate;                     // qwen35 attention: [n_tokens, 2 q_dim | q_dim]
    // Gated DeltaNet rows: projections, convolved q|k|v, the output gate, per-head decay and beta, the rule's output.
    std::vector<float> dn_qkv, dn_conv, dn_z, dn_decay, dn_beta, dn_out;
    std::vector<float> dn_in, dn_ba;  // qwen3next's fused projections: [n_tokens, 2 key_dim + 2 value_dim | 2 n_v]
    std::vector<float> dn_delta;                              // [n_threads, d_state]
    std::vector<float> cos_sin;                               // [n_tokens, rope_dim]
    std::vector<float> cos_sin_local;                         // [n_tokens, rope_dim]; gemma3's local layers
    std::vector<int32_t> row_pos, row_seq;                    // [n_tokens]
    std::vector<int64_t> logit_rows;                          // [n_logit_rows]
    std::vector<AttnItemSet> attn_sets;                       // attention work of one forward
    std::vector<float> ple;                                   // [n_tokens, n_layers × per_layer_dim]; gemma4
    std::vector<float> ple_gate;                              // [n_tokens, per_layer_dim]; gemma4
    std::vector<float> moe_in, moe_out;                       // [n_tokens, dim]; gemma4's router input, experts
    std::vector<float> attn_scratch;                          // [n_threads, attention_scratch_floats]
    size_t attn_scratch_per_thread = 0;
    std::vector<float> logits_in, logits;  // [n_logit_rows, dim | n_vocab]
    MatmulScratch matmul;
    MoeFfn moe;  // the MoE FFN's routing and grouped rows
  };
  void prepare_scratch(const BatchInput& batch, int n_threads);
  // Everything before the output head: embeddings, then every layer; leaves the residual stream in s_.x.
  void run_layers(const BatchInput& batch, KvStorage& kv, ThreadPool& pool);
  void embed(const BatchInput& batch, ThreadPool& pool);
  void per_layer_inputs(const BatchInput& batch, ThreadPool& pool);
  void per_layer_branch(int layer, int64_t n_rows, ThreadPool& pool);
  void gemma4_experts(int layer, int64_t n_rows, ThreadPool& pool);
  // attn_norm, then q/k/v projections with bias, q/k norm and RoPE as the architecture asks, into s_.q/k/v.
  void project_qkv(int layer, int64_t n_rows, ThreadPool& pool);
  void attention_block(int layer, const BatchInput& batch, KvStorage& kv, ThreadPool& pool);
  void store_kv(int layer, const BatchInput& batch, KvStorage& kv);
  void attend(int layer, const BatchInput& batch, const KvStorage& kv, ThreadPool& pool);
  void ffn_block(int layer, int64_t n_rows, ThreadPool& pool);
  // A Gated DeltaNet layer (delta_net.cpp): reads and advances each sequence's recurrent state in kv.
  void delta_net_block(int layer, const BatchInput& batch, KvStorage& kv, ThreadPool& pool);
  void delta_net_project(int layer, int64_t n_tokens, ThreadPool& pool);
  void delta_net_recurrence(int layer, const BatchInput& batch, KvStorage& kv, ThreadPool& pool);
  // bert, nomic-bert (encoder.cpp): the whole forward, leaving the hidden states in s_.x.
  void run_encoder(const BatchInput& batch, KvStorage& kv, ThreadPool& pool);
  void encoder_embed(const BatchInput& batch, ThreadPool& pool);
  void encoder_attention(int layer, const BatchInput& batch, KvStorage& kv, ThreadPool& pool);
  void attend_bidirectional(int layer, const BatchInput& batch, const KvStorage& kv, ThreadPool& pool);
  void encoder_ffn(int layer, int64_t n_rows, ThreadPool& pool);
  // Clears the state slot of every sequence that starts at position 0 (hybrid models).
  void reset_states(const BatchInput& batch, KvStorage& kv) const;
  // x += post_norm(proj) (gemma), or x += proj when post_norm is empty.
  void add_residual(const std::vector<float>& post_norm, int64_t n_rows, ThreadPool& pool);
  std::span<const float> output_logits(const BatchInput& batch, ThreadPool& pool);

  std::shared_ptr<const GgufFile> file_;
  ModelConfig config_;
  ModelWeights weights_;
  size_t packed_bytes_ = 0;
  std::vector<float> ones_;  // [max head_dim]; the weight of gemma4's value norm; [ffn_dim] for encoders' GELU
  Scratch s_;
};

}  // namespace hearth
