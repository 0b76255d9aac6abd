// Fuzz target: the tokenizers (src/tokenizer/) on four real vocabularies (SentencePiece Llama 2, BPE
// Llama 3, Qwen 2, GPT-2) from ../shared/vocab. The first input byte picks the vocabulary and the flags, the
// rest is the text. Every id encode() returns must be in the vocabulary and decode() must accept them; crashes,
// hangs and out-of-bounds reads on any bytes (invalid UTF-8 included) are the bugs looked for.

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace {

const std::array<const char*, 4> kVocabs = {"ggml-vocab-llama-spm.gguf", "ggml-vocab-llama-bpe.gguf",
                                            "ggml-vocab-qwen2.gguf", "ggml-vocab-gpt-2.gguf"};

const hearth::Tokenizer& tokenizer(size_t index) {
  static std::array<std::unique_ptr<hearth::Tokenizer>, kVocabs.size()> loaded;
  if (!loaded[index]) {
    const std::string path = std::string(HEARTH_SHARED_DIR) + "/vocab/" + kVocabs[index];
    auto file = hearth::GgufFile::open(path);
    if (!file) std::fprintf(stderr, "%s\n", file.error().message.c_str()), std::abort();
    auto tok = hearth::Tokenizer::from_gguf(*file);
    if (!tok) std::fprintf(stderr, "%s\n", tok.error().message.c_str()), std::abort();
    loaded[index] = std::make_unique<hearth::Tokenizer>(std::move(*tok));
  }
  return *loaded[index];
}

}  // namespace

// Loads every vocabulary before the first input: loading the 128k- and 151k-token ones under ASan takes seconds, which
// libFuzzer would otherwise charge to that input and report as a slow unit.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  for (size_t i = 0; i < kVocabs.size(); ++i) tokenizer(i);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t control = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const hearth::Tokenizer& tok = tokenizer(control % kVocabs.size());
  const bool add_special = control & 0x10;
  const bool parse_special = control & 0x20;
  const auto ids = tok.encode(text, add_special, parse_special);
  for (hearth::TokenId id : ids) {
    if (!tok.is_valid(id)) std::abort();
  }
  const std::string decoded = tok.decode(ids);
  (void)decoded;
  return 0;
}
