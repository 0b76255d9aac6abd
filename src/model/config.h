#pragma once
// ModelConfig: the hyperparameters of a llama-family model, read from GGUF metadata.
//
// Supported architectures (general.architecture) and how they differ from llama:
//   llama, mistral, smollm  the llama block; q/k/v biases are optional (applied when present)
//   qwen2                   neox RoPE, q/k/v biases required (blk.N.attn_{q,k,v}.bias)
//   qwen3                   neox RoPE, no biases, per-head RMSNorm of q and k before RoPE
//                           (blk.N.attn_q_norm.weight, blk.N.attn_k_norm.weight, [head_dim]); head_dim
//                           (attention.key_length) need not be embedding_length / head_count

#include <cstdint>
#include <string>

#include "gguf/gguf_file.h"
#include "util/result.h"

namespace hearth {

// How RoPE pairs dimensions: GGML "normal" rotates adjacent pairs (x[2i], x[2i+1]) as Llama GGUFs expect;
// "neox" rotates (x[i], x[i + rope_dim/2]) as Qwen2-style models do.
enum class RopeStyle { kNormal, kNeox };

struct ModelConfig {
  std::string architecture;
  std::string name;
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;  // context length the model was trained for
  int32_t dim = 0;          // embedding width
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t ffn_dim = 0;
  int32_t rope_dim = 0;  // leading dimensions of each head that RoPE rotates
  float rope_freq_base = 10000.0f;
  float rms_eps = 1e-5f;
  RopeStyle rope_style = RopeStyle::kNormal;
  bool qkv_bias_required = false;  // qwen2: attn_{q,k,v}.bias must be present
  bool qk_norm = false;            // qwen3: per-head RMSNorm of q and k before RoPE

  int32_t q_dim() const { return n_heads * head_dim; }
  int32_t kv_dim() const { return n_kv_heads * head_dim; }

  // The architectures from_gguf accepts, comma-separated, for error messages.
  static std::string supported_architectures();

  // Reads `<arch>.*` keys. Fails with a message naming the missing or inconsistent key.
  [[nodiscard]] static Result<ModelConfig> from_gguf(const GgufFile& file);
};

}  // namespace hearth
