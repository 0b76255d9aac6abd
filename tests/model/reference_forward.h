#pragma once
// A plain, straight-line, scalar forward pass written from the architectures' definitions, for checking the
// engine's Model against. It shares no code with src/model: it reads the hyperparameters from the GGUF metadata
// itself, dequantizes every tensor to f32 up front, accumulates in double and keeps its K/V in plain vectors.
// It is slow (one token at a time, every matrix-vector product by hand) and meant for tiny models only.
//
// Architectures: llama (normal RoPE, optional q/k/v biases), qwen2 (neox RoPE, q/k/v biases), qwen3 (neox RoPE,
// per-head RMSNorm of q and k before RoPE), phi3 (neox RoPE; attn_qkv.weight split into q, k, v rows; ffn_up.weight
// split into gate rows then up rows). RoPE: pair i of a head turns by pos / rope.scaling.factor ×
// base^(-2i / head_dim) / rope_freqs[i] (rope_freqs.weight of Llama 3.1, else 1).

#include <cstdint>
#include <vector>

#include "gguf/gguf_file.h"

namespace hearth::test {

struct ReferenceOptions {
  bool skip_qkv_bias = false;    // compute as if the file had no q/k/v biases (shows a test would catch it)
  bool skip_qk_norm = false;     // compute as if the file had no q/k norms
  bool skip_rope_freqs = false;  // compute as if the file had no rope_freqs.weight
  bool swap_gate_up = false;     // phi3: take the fused ffn_up's second half as the gate
};

// Logits after every token of `tokens`, in order: [tokens.size()][n_vocab].
std::vector<std::vector<float>> reference_logits(const GgufFile& file, const std::vector<int32_t>& tokens,
                                                 const ReferenceOptions& options = {});

}  // namespace hearth::test
