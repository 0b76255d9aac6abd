#pragma once
// Cache-miss explanations as people read them: the kv layer's PrefixExplanation (token indexes and ids) plus the
// text around the point where reuse stopped, detokenized and truncated.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kv/prefix_explain.h"
#include "model/tokenizer.h"

namespace hearth {

struct ReuseExplanation {
  std::string reason;  // reuse_stop_name(); empty when the request was never admitted
  int32_t stopped_at = 0;      // token index of the first token not reused
  int32_t stopped_block = 0;   // its block
  int32_t block_size = 0;
  // Text around stopped_at (kDiverged, kEvicted, kDifferentSalt, kEndOfCachedPrefix): the shared text before it,
  // the prompt's text from it, and (kDiverged) the nearest cached prefix's text from it.
  std::string context_text;
  std::string prompt_text;
  std::string cached_text;
  int32_t evicted_block = -1;        // kEvicted
  int32_t other_salt_tokens = 0;     // kDifferentSalt: tokens reusable under another cache_salt
};

inline constexpr int32_t kExcerptTokens = 16;  // tokens of text shown on each side of a divergence

// Text of tokens[begin, end) clamped to the sequence, with control tokens rendered (chat markers stay visible).
[[nodiscard]] std::string token_excerpt(const Tokenizer& tokenizer, std::span<const TokenId> tokens, int64_t begin,
                                        int64_t end);

// Fills the text of `e` for `prompt` (the tokens it explains).
[[nodiscard]] ReuseExplanation describe_reuse(const Tokenizer& tokenizer, const PrefixExplanation& e,
                                              std::span<const TokenId> prompt, int32_t block_size);

}  // namespace hearth
