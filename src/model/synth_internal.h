#pragma once
// Internal to the synthetic-model generator (synth.cpp, synth_encoder.cpp): the plan of one tensor and the fill
// that streams its rows into a GgufWriter.

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"
#include "model/synth.h"
#include "util/thread_pool.h"

namespace hearth::detail {

// Values are mean + N(0, sd^2); sd 0 gives exactly `mean` (the norm weights of the llama layout are ones).
struct TensorPlan {
  std::string name;
  std::vector<int64_t> shape;  // GGML order
  DType type;
  float mean = 0.0f;
  float sd = 0.0f;
  std::vector<float> values = {};  // when set: exactly these values (one row), instead of mean + noise
};

// Streams t's rows in batches: the pool generates and quantizes a batch, then the batch is written. t, c and pool
// must outlive the writer's write_file.
GgufTensorFill make_fill(const TensorPlan& t, const SynthConfig& c, ThreadPool& pool);

// llama.cpp's LLAMA_FTYPE for a file whose weights are all `type`, or its Q4_K_M or MXFP4_MOE mix.
uint32_t llama_file_type(DType type, bool q4_k_m);

// bert, nomic-bert (synth_encoder.cpp): a synthetic WordPiece vocabulary and an encoder's tensors, written to
// c.out_path (c.vocab_from is not read). Requires validate_synth_config(c).
[[nodiscard]] Result<void> write_synthetic_encoder(const SynthConfig& c);

}  // namespace hearth::detail
