#pragma once
// BPE pre-tokenizers: split text into words before merging, so merges never cross a word boundary. Each is a
// hand-written equivalent of its family's splitting regex (no std::regex: it is slow and lacks \p{L}).

#include <string_view>
#include <vector>

#include "util/result.h"

namespace hearth {

enum class PreTokenizer {
  // GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kGpt2,
  // StarCoder, Refact, SmolLM: every \p{N} character is a piece of its own, then GPT-2 within each piece.
  kGpt2SingleDigits,
  // Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+
  //          |\s+(?!\S)|\s+  (whole words found in the vocabulary skip merging)
  kLlama3,
  // Qwen2: as Llama 3, but digits one at a time (\p{N} instead of \p{N}{1,3}), and words are always merged.
  kQwen2,
  // DeepSeek Coder: [\r\n], \s?\p{L}+, \s?\p{P}+, [\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+, \p{N}, each
  // regex splitting the pieces of the previous ones into matches and gaps (llama.cpp's sequence of regexes).
  kDeepseekCoder,
  // o200k (gpt-4o, gpt-oss): words split by letter case, so "HelloWorld" is "Hello" "World":
  //   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
  //   |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
  //   |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kO200k,
};

// Maps a `tokenizer.ggml.pre` name to its pre-tokenizer; fails for names whose regex is not implemented.
[[nodiscard]] Result<PreTokenizer> pre_tokenizer_from_name(std::string_view name);

// Appends the words of `text` to `words`, in order; together they cover `text` exactly. Ill-formed UTF-8 bytes count
// as single characters of no class (like punctuation), so nothing is dropped.
void pre_tokenize(PreTokenizer pre, std::string_view text, std::vector<std::string_view>& words);

}  // namespace hearth
