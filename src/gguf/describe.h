#pragma once
// A human-readable summary of a GGUF file, for `hearth inspect`.

#include <string>

#include "gguf/gguf_file.h"

namespace hearth {

// Multi-line text: format version, file size, architecture and name, parameter count, tensors per type, the
// `<arch>.*` hyperparameters and the tokenizer. Never fails: missing or odd metadata shows as "-" or its raw value.
std::string describe_gguf(const GgufFile& file);

// "1.18 MiB", "3.50 GiB": binary units, three significant digits.
std::string format_bytes(uint64_t bytes);
// "260.8K", "1.10B": decimal units for parameter counts.
std::string format_count(uint64_t count);

}  // namespace hearth
