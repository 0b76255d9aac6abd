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

}  // namespace hearth
