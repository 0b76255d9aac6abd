#pragma once
// A human-readable summary of a GGUF file, for `hearth inspect`.

#include <string>

#include "gguf/gguf_file.h"
#include "util/units.h"

namespace hearth {

// Multi-line text: format version, file size, architecture and name, parameter count, tensors per type, the
// `<arch>.*` hyperparameters and the tokenizer. Never fails: missing or odd metadata shows as "-" or its raw value.
std::string describe_gguf(const GgufFile& file);

// "260.8K", "1.10B": decimal units for parameter counts.
std::string format_count(uint64_t count);

// What a model file is, in the terms model listings use (Ollama's /api/tags details).
struct GgufSummary {
  std::string architecture;  // general.architecture ("" when absent)
  uint64_t num_params = 0;   // elements of every tensor
  std::string file_type;     // llama.cpp's file type without "MOSTLY_": "Q4_K_M", "F16", "F32" ("" when unknown)
};
[[nodiscard]] GgufSummary summarize_gguf(const GgufFile& file);

}  // namespace hearth
