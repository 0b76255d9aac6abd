#pragma once
// What a loaded model holds in resident memory beside its KV pool, known from its GGUF before it is loaded: the
// several-models budget (`--memory`) and `hearth plan` count it, so the budget bounds RSS rather than file sizes.
//
//   weights  = the file's tensor bytes
//              - the originals of the matrices packed at load (their mapped pages are handed back after packing)
//              + the packed copies (kernels/packed.h: anonymous memory, a few % larger than the originals)
//              (the token embedding stays mapped: counted whole, although only the rows looked up are resident)
//   scratch  = the forward pass's buffers at the largest step: max_batch_tokens rows of every activation, one
//              logits row per sequence, the attention scratch of every thread, the largest matmul's quantized
//              activations and, for a mixture of experts, its grouped rows (model.h Scratch, moe.h MoeFfn)
//   tokenizer = the tokenizer's tables: about 96 bytes per vocabulary entry and per BPE merge beside their text,
//              a little above what Qwen2's and Llama's vocabularies hold (docs/multi-model.md)
//
// A loaded Model measures its weights and scratch (Model::memory); tests check the estimate bounds the measurement.

#include <cstdint>
#include <functional>

#include "gguf/gguf_file.h"
#include "model/config.h"
#include "util/result.h"

namespace hearth {

// The largest step the engine runs: tokens per forward, sequences per forward (each wants one logits row), threads.
struct ForwardShape {
  int64_t max_batch_tokens = 512;
  int64_t max_sequences = 1;
  int32_t n_threads = 1;
};

struct ModelMemory {
  int64_t weights_bytes = 0;
  int64_t scratch_bytes = 0;
  int64_t tokenizer_bytes = 0;
  int64_t total() const { return weights_bytes + scratch_bytes + tokenizer_bytes; }
};

// The estimate for a model file run at `shape` on this CPU (whether matrices are packed depends on its ISA).
[[nodiscard]] Result<ModelMemory> estimate_model_memory(const GgufFile& file, const ForwardShape& shape);

struct ModelWeights;
struct MatrixView;

// The forward scratch alone, for a model of config `c` whose matrices are as `weights` binds them (model.cpp: it
// mirrors Model's own buffers).
[[nodiscard]] int64_t estimate_scratch_bytes(const ModelConfig& c, const ModelWeights& weights,
                                             const ForwardShape& shape);

// The resident weights of `weights` (bound from `file`, less the tensors bound to nothing: weights.unused_bytes) when
// the matrices for which packed(m) is true have packed copies and their originals' pages were handed back.
[[nodiscard]] int64_t resident_weight_bytes(const GgufFile& file, const ModelWeights& weights,
                                            const std::function<bool(const MatrixView&)>& packed);

}  // namespace hearth
