// Fuzz target: the GGUF reader (src/gguf) on arbitrary bytes, then what is built on a file that parses: every
// metadata value rendered, the typed lookups the model and tokenizer use, ModelConfig and the tokenizer
// vocabulary. Errors are expected; crashes, out-of-bounds reads and huge allocations are not.

#include <cstdint>
#include <span>

#include "gguf/gguf_file.h"
#include "model/config.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = hearth::GgufFile::parse(std::span<const uint8_t>(data, size), "fuzz.gguf");
  if (!file) return 0;
  for (const auto& [key, value] : file->metadata()) {
    (void)hearth::gguf_value_to_string(value);
    (void)file->get_uint(key);
    (void)file->get_float(key);
    (void)file->get_string(key);
    (void)file->get_string_array(key);
    (void)file->get_float_array(key);
    (void)file->get_int_array(key);
  }
  for (const hearth::GgufTensor& t : file->tensors()) (void)file->find_tensor(t.name);
  (void)hearth::ModelConfig::from_gguf(*file);
  (void)hearth::Tokenizer::from_gguf(*file);
  return 0;
}
